"""logical.py: units with original-string provenance, shell clauses, work surfaces.

Requirements: units are NFKC + casefold (full-width, ligatures, Greek/Cyrillic case and
Unicode spaces act like their ordinary forms) while spans stay on the original string;
'./' and sentence dots are canonicalized away; ideographs and kana are single units;
shell commands split only at top-level ';', newline, '&&' and lone '&', never inside
quotes or substitutions, never for control programs, pipes, '||' or heredocs.
"""

from __future__ import annotations

import json
import string
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eggshell.reuse.logical import Logical, Unit, fragment_text, grams, logical, result_lines, shell_clauses, work_surfaces


def texts(t: str) -> list[str]:
    return [u.text for u in logical(t).units]


def norm(s: str) -> str:
    """The spec's normalization, written independently of the module."""
    t = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", s).casefold())
    return (t[2:] if t.startswith("./") else t).rstrip(".")


# -- units: the reference examples ------------------------------------------------------


@pytest.mark.parametrize(
    "src, want",
    [
        ("./include/x.h", ["include/x.h"]),
        ("timekeeping.*update", ["timekeeping", "update"]),
        ("inspect source. trace result", ["inspect", "source", "trace", "result"]),
        (
            'rg -n "clocksource|noinstr|u64" arch/x86/kernel/tsc.c',
            ["rg", "n", "clocksource", "noinstr", "u64", "arch/x86/kernel/tsc.c"],
        ),
        ("file.", ["file"]),
        ("wait ... done", ["wait", "done"]),
        ("../up/x", ["../up/x"]),
        ("a=b,c:d(e);f&g|h", list("abcdefgh")),
        ("snake_case ID", ["snake_case", "id"]),
    ],
)
def test_reference_examples(src, want):
    assert texts(src) == want


def test_option_only_after_dash():
    lg = logical('rg -n "clocksource|noinstr|u64" arch/x86/kernel/tsc.c')
    assert [u.text for u in lg.units if u.option] == ["n"]
    assert [(u.text, u.option) for u in logical("ls --all -la x").units] == [
        ("ls", False), ("all", True), ("la", True), ("x", False)
    ]


def test_spans_point_at_the_identifying_characters():
    src = "cat ./include/x.h file."
    lg = logical(src)
    assert [src[u.start : u.end] for u in lg.units] == ["cat", "include/x.h", "file"]


# -- units: Unicode ----------------------------------------------------------------------


def test_fullwidth_letters_and_punctuation_fold():
    assert texts("ＲＧ　－ｎ　ｆｏｏ／ｂａｒ．") == texts("rg -n foo/bar.") == ["rg", "n", "foo/bar"]
    assert logical("ＲＧ　－ｎ").units[1].option


def test_ligature_folds():
    assert texts("ﬁle") == texts("file") == ["file"]


def test_greek_and_cyrillic_case_variants_meet():
    assert texts("ΟΔΟΣ ПРИВЕТ") == texts("οδος привет") == ["οδοσ", "привет"]
    assert texts("Straße") == texts("STRASSE") == ["strasse"]


def test_ideographic_space_is_a_boundary():
    assert texts("foo\u3000bar") == texts("foo bar") == ["foo", "bar"]
    assert texts("\u3000") == []
    for space in "\u00a0\u2003\u2009\u202f\u205f":
        assert texts("a" + space + "b") == ["a", "b"]


def test_cjk_characters_are_single_units_and_form_bigrams():
    lg = logical("時刻を確認")
    assert [u.text for u in lg.units] == ["時", "刻", "を", "確", "認"]
    g = grams(lg)
    assert g["時 刻"] == [(0, 2)] and g["時 刻 を"] == [(0, 3)]
    assert fragment_text(lg, [0, 1]) == "時刻"


def test_cjk_next_to_latin_splits_and_hangul_stays_whole():
    assert texts("x86時計") == ["x86", "時", "計"]
    assert texts("안녕하세요 세계") == ["안녕하세요", "세계"]


def test_halfwidth_kana_with_voiced_mark_is_one_unit():
    assert texts("ｶﾞ") == texts("ガ") == ["ガ"]


def test_combining_marks_stay_in_their_unit():
    assert texts("cafe\u0301") == texts("café") == ["café"]


def test_byte_span_for_multibyte_text():
    src = "é 時 x😀y z"
    lg = logical(src)
    b = src.encode()
    assert [lg.byte_span(u) for u in lg.units][:3] == [(0, 2), (3, 6), (7, 8)]
    assert [b[slice(*lg.byte_span(u))].decode() for u in lg.units] == ["é", "時", "x", "y", "z"]


def test_emoji_is_a_boundary():
    assert texts("x😀y") == ["x", "y"]


# -- units: properties -------------------------------------------------------------------

_SPECIAL = list("ＡｂＣ１／．－\u3000ﬁΣσςΔПрЁ時刻かなカナｶﾞ안녕é\u0301ß…⒈½ -./_\"'|;&()=,:\t\n")
any_text = st.text(st.sampled_from(_SPECIAL) | st.characters(blacklist_categories=("Cs",)), max_size=40)


@given(any_text)
def test_units_ordered_non_overlapping_and_provenanced(t):
    lg = logical(t)
    assert isinstance(lg, Logical) and lg.source == t
    prev = 0
    for u in lg.units:
        assert isinstance(u, Unit)
        assert prev <= u.start < u.end <= len(t)
        prev = u.end
        assert u.text and u.text == norm(t[u.start : u.end])
        assert u.option == (u.start > 0 and unicodedata.normalize("NFKC", t[u.start - 1]) == "-")
        assert " " not in u.text


@given(any_text)
def test_byte_span_agrees_with_utf8_prefix(t):
    lg = logical(t)
    for u in lg.units:
        a, b = lg.byte_span(u)
        assert a == len(t[: u.start].encode()) and b == len(t[: u.end].encode())
        assert t.encode()[a:b].decode() == t[u.start : u.end]


@given(st.text(st.sampled_from(string.printable), max_size=60))
def test_ascii_case_does_not_matter(t):
    assert texts(t.upper()) == texts(t.lower())


@given(any_text)
def test_grams_cover_every_unit(t):
    lg = logical(t)
    g = grams(lg)
    for u in lg.units:
        assert u.text in g
    covered = {i for spans in g.values() for a, b in spans for i in range(a, b)}
    assert covered == set(range(len(lg.units)))
    for key, spans in g.items():
        for a, b in spans:
            assert 1 <= b - a <= 3 and key == " ".join(u.text for u in lg.units[a:b])


def test_grams_widths_and_repeats():
    g = grams(logical("a b a b"), widths=(1, 2))
    assert g["a"] == [(0, 1), (2, 3)] and g["a b"] == [(0, 2), (2, 4)] and g["b a"] == [(1, 3)]
    assert "a b a" not in g


# -- fragments and result lines ----------------------------------------------------------


def test_fragment_text_coalesces_adjacent_and_overlapping_spans():
    lg = logical("rg -n foo ./src/x.c")
    assert fragment_text(lg, [3, 0, 2]) == "rg foo src/x.c"
    assert fragment_text(lg, [2, 2]) == "foo"
    assert fragment_text(lg, []) == ""


def test_result_lines_keeps_touched_lines_only():
    text = "alpha\nbeta gamma\n\ndelta"
    assert result_lines(text, [(7, 9)]) == "beta gamma"
    assert result_lines(text, [(0, 2), (18, 20)]) == "alpha\ndelta"
    assert result_lines(text, []) is None
    assert result_lines(text, [(17, 17)]) is None  # only the blank line
    assert result_lines(text, [(0, len(text))]) == text


def test_result_lines_with_logical_spans():
    out = "src/a.c:1: foo\nsrc/b.c:9: bar\n"
    lg = logical(out)
    bar = [u for u in lg.units if u.text == "bar"]
    assert result_lines(out, [(u.start, u.end) for u in bar]) == "src/b.c:9: bar"


# -- shell clauses -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "cmd, want",
    [
        ("cd src && rg foo", ["cd src", "rg foo"]),
        ('echo "a; b" && ls', ['echo "a; b"', "ls"]),
        ("x=$(cd a; pwd); ls", ["x=$(cd a; pwd)", "ls"]),
        ("cat f | grep x", ["cat f | grep x"]),
        ("make || true", ["make || true"]),
        ("for f in *; do echo $f; done", ["for f in *; do echo $f; done"]),
        ("a\nb", ["a", "b"]),
        ("echo 'x && y'; ls", ["echo 'x && y'", "ls"]),
        ("(cd a; make) && ls", ["(cd a; make)", "ls"]),
        ("{ a; b; } && c", ["{ a; b; }", "c"]),
        ("echo `a; b`; c", ["echo `a; b`", "c"]),
        ('echo "$(echo ")"; x)"; ls', ['echo "$(echo ")"; x)"', "ls"]),
        ("echo a\\; b; c", ["echo a\\; b", "c"]),
        ("echo a \\\n  b", ["echo a \\\n  b"]),
        ("sleep 1 & wait", ["sleep 1", "wait"]),
        ("make 2>&1 | tee log &> out", ["make 2>&1 | tee log &> out"]),
        ("a |& b", ["a |& b"]),
        ("cat <<EOF\na; b\nEOF\n", ["cat <<EOF\na; b\nEOF"]),
        ("cat <<< 'x'; ls", ["cat <<< 'x'", "ls"]),
        ("echo a # x; y\nls", ["echo a # x; y", "ls"]),
        ("if true; then ls; fi", ["if true; then ls; fi"]),
        ("cd x && while read l; do echo $l; done < f", ["cd x && while read l; do echo $l; done < f"]),
        ("format && ls", ["format", "ls"]),
        (" ; ; ", ["; ;"]),
        ("  ls  ", ["ls"]),
        ("", []),
        ("  \n ", []),
    ],
)
def test_shell_clause_examples(cmd, want):
    assert shell_clauses(cmd) == want


@given(st.text(max_size=60))
def test_clauses_never_empty_and_are_substrings(cmd):
    cl = shell_clauses(cmd)
    assert (cl == []) == (cmd.strip() == "")
    for c in cl:
        assert c and c in cmd and c == c.strip()


_payload = st.text(st.sampled_from(list(" ;&|()xy\n#{}<>")), min_size=1, max_size=20)
_word = st.text(st.sampled_from(list("abcxyz/._")), min_size=1, max_size=8).filter(
    lambda w: w.split("_")[0] not in ("if", "for", "case")
)


@given(st.lists(st.tuples(_word, _payload, st.sampled_from(['"', "'"])), min_size=1, max_size=4),
       st.sampled_from([";", " && ", "\n", " & "]))
def test_never_splits_inside_quotes(parts, sep):
    clauses = [f"{w} {q}{p}{q}" for w, p, q in parts]
    assert shell_clauses(sep.join(clauses)) == clauses


# -- work surfaces -----------------------------------------------------------------------


def work(name, inp):
    return name + "\n" + json.dumps(inp, sort_keys=True, separators=(",", ":"))


def test_shell_work_splits_into_clause_surfaces():
    assert work_surfaces(work("Bash", {"command": "cd src && rg foo", "timeout": 5})) == ["Bash\ncd src", "Bash\nrg foo"]
    assert work_surfaces(work("exec_command", {"cmd": "ls; pwd"})) == ["exec_command\nls", "exec_command\npwd"]
    assert work_surfaces(work("shell", {"command": ["bash", "-lc", "a && b"]})) == ["shell\na", "shell\nb"]
    assert work_surfaces(work("shell", {"command": ["/bin/sh", "-c", "a; b"]})) == ["shell\na", "shell\nb"]
    assert work_surfaces(work("local_shell", {"command": "ls"})) == ["local_shell\nls"]
    assert work_surfaces(work("bash", {"command": None, "cmd": "a;b"})) == ["bash\na", "bash\nb"]


def test_other_work_stays_whole():
    for w in [
        work("Read", {"command": "a; b"}),
        work("shell", {"command": ["ls", "-c", "a; b"]}),
        work("shell", {"command": ["python", "x; y"]}),
        work("bash", {"command": 3}),
        work("bash", {"command": "  "}),
        "bash\nnot json; x",
        "plain text without a newline; x",
    ]:
        assert work_surfaces(w) == [w]


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.sampled_from(["command", "cmd", "x"]), c, max_size=3),
    max_leaves=8,
)


@given(st.sampled_from(["bash", "Shell", "exec_command", "Read", "x"]), _json)
def test_work_surfaces_never_empty(name, inp):
    w = work(name, inp)
    s = work_surfaces(w)
    assert s and all(x.startswith(name + "\n") for x in s)
