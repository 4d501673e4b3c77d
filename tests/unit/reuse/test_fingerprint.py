"""fingerprint.py: which inputs a call names, the git index reader, the budget, the key.

Requirements (issue 11 §1): the operands a read names are found from its command line
(quotes, `cd`, globs, redirections) and anything only a shell could resolve is unknown;
the git index is read as git itself lists it (`git ls-files -s`); past the budget a
directory is unknown, never guessed; the key that hashes untracked files is private; the way
to an input (every link followed, with its target) is part of it (issue 31 item 4), kept private
by the key, and a fingerprint from before it was is never verified.
"""

from __future__ import annotations

import os
import subprocess

import pytest
from hypothesis import given, strategies as st

from eggshell.reuse import commands
from eggshell.reuse import fingerprint as fpm
from eggshell.paths import walk
from eggshell.reuse.fingerprint import CHANGED, UNKNOWN, VERIFIED, Budget, Probe, check, needs, observe


def paths_of(command: str, cwd: str = "/p") -> list:
    return [p for p, _ in needs("Bash", {"command": command}, cwd).paths]


def test_the_tool_lists_are_the_commands_lists():
    assert fpm.SHELL_TOOLS == commands.SHELL_TOOLS and fpm.READ_TOOLS == commands.READ_TOOLS


def test_operands_come_from_the_command_line_as_a_shell_reads_it():
    assert paths_of("rg -n 'parse config' ./src tests") == ["/p/parse config", "/p/./src", "/p/tests"]
    assert paths_of("cd src && cat a.py") == ["/p/src/a.py"]
    assert paths_of("cat src/*.py 2>/dev/null | head -5") == ["/p/src"]  # a glob stands for its directory; an output is no input
    assert paths_of("rg --file=pats.txt foo") == ["/p/pats.txt", "/p/foo"]
    assert paths_of("wc -l < big.log") == ["/p/big.log"]
    assert paths_of("git -c color.ui=never log -- README") == ["/p/README"]
    assert [p for p, _ in needs("exec_command", {"cmd": "cat a.py", "workdir": "sub"}, "/p").paths] == ["/p/sub/a.py"]
    n = needs("Bash", {"command": "git log -3"}, "/p")
    assert n.git and n.paths == [] and n.unknown == []
    assert needs("Bash", {"command": "ls"}, "/p").defaults == [(0, "/p", "1")]
    assert needs("Bash", {"command": "grep -rn foo"}, "/p").defaults == [(0, "/p", "rh")]
    assert needs("Bash", {"command": "grep foo"}, "/p").defaults == []  # reads its stdin
    assert needs("Bash", {"command": "cat a.py && cd src && rg foo | head"}, "/p").defaults == [(2, "/p/src", "rbi")]
    # past the pattern, an operand names what is read: the directory is not, even if it is gone
    assert needs("Bash", {"command": "grep -rn foo src/"}, "/p").defaults == []
    assert needs("Bash", {"command": "rg -e foo"}, "/p").defaults == [(0, "/p", "rbi")]
    assert needs("Bash", {"command": "rg -e foo -e bar"}, "/p").defaults == [(0, "/p", "rbi")]  # patterns, not paths
    assert needs("Bash", {"command": "ls gone"}, "/p").defaults == []


@pytest.mark.parametrize("command", ["cat $F", "cat $(ls)", "for f in *; do cat $f; done", "cat <<EOF\nx\nEOF", "cat ~/x",
                                     "cd $HOME && ls", "git --work-tree=/x diff", "git log --all", "cat 'open"])
def test_what_only_a_shell_knows_is_unknown(command):
    assert needs("Bash", {"command": command}, "/p").unknown


def test_read_tools_name_their_path():
    assert needs("Read", {"file_path": "/p/a.py"}, "/p").paths == [("/p/a.py", "r")]
    assert needs("Grep", {"pattern": "x"}, "/p").paths == [("/p", "r")]
    assert needs("Glob", {"pattern": "src/**/*.py"}, "/p").paths == [("/p/src", "r")]
    assert needs("Edit", {"file_path": "/p/a.py"}, "/p").unknown


@given(st.text(max_size=200))
def test_any_command_line_is_read_without_raising(command):
    n = needs("Bash", {"command": command}, "/p")
    assert all(isinstance(p, str) for p, _ in n.paths)


# -- the git index ------------------------------------------------------------------------------


def git(root, *args) -> str:
    return subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True,
                          capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    for i in range(300):
        d = root / ("pkg%d" % (i % 7)) / ("sub%d" % (i % 3))
        d.mkdir(parents=True, exist_ok=True)
        (d / ("m%03d_%s.py" % (i, "x" * (i % 11)))).write_text("v = %d\n" % i)
    (root / "ünï code.txt").write_text("u\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "many")
    (root / "later.py").write_text("later\n")
    git(root, "add", "--intent-to-add", "later.py")  # an extended entry: the index is version 3
    return root


def test_the_index_reads_what_git_lists(repo):
    listed = {}
    for line in git(repo, "ls-files", "-s", "-z").split("\0"):
        if line:
            meta, path = line.split("\t", 1)
            listed[path] = meta.split()[1]
    probe = Probe(str(repo))
    with open(os.path.join(repo, ".git", "index"), "rb") as f:
        assert f.read(8)[4:] == b"\0\0\0\3"
    ix = probe.index()
    assert {p: ix.lookup(p)[0] for p in listed} == listed
    assert {p: b for p, (b, _) in ix.under("", Budget()).items()} == listed
    assert {p: b for p, (b, _) in ix.under("pkg3", Budget()).items()} == {p: b for p, b in listed.items() if p.startswith("pkg3/")}
    assert ix.lookup("pkg3") is None and ix.lookup("sub1/m001_x.py") is None
    assert probe.head() == git(repo, "rev-parse", "HEAD").strip()


def test_each_command_that_reads_the_directory_gets_it(tmp_path):
    (tmp_path / "a.py").write_text("a\n")
    fp = observe("Bash", {"command": "cat a.py && rg foo"}, str(tmp_path), str(tmp_path), b"k" * 32, "T")
    assert [e[:2] for e in fp["in"]] == [["f", "a.py"], ["a", "foo"], ["d", "."]]  # rg read the directory, though cat's file exists
    (tmp_path / "b.py").write_text("foo\n")
    assert check(fp, Probe(str(tmp_path), b"k" * 32)) == (CHANGED, ["."])


def test_byte_code_is_no_input_of_a_search_that_skips_binary_files(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "config.py").write_text("def parse_config(): pass\n")
    rg = observe("Bash", {"command": "rg -n parse_config src"}, str(tmp_path), str(tmp_path), b"k" * 32, "T")
    grep = observe("Bash", {"command": "grep -rn parse_config src"}, str(tmp_path), str(tmp_path), b"k" * 32, "T")
    (tmp_path / "src" / "__pycache__").mkdir()  # the tests ran: Python wrote byte code next to the sources
    (tmp_path / "src" / "__pycache__" / "config.cpython-311.pyc").write_bytes(b"\xa7\r\r\n\0\0\0\0parse_config")
    assert check(rg, Probe(str(tmp_path), b"k" * 32))[0] == VERIFIED  # rg skips binary files
    assert check(grep, Probe(str(tmp_path), b"k" * 32))[0] == CHANGED  # grep prints "Binary file ... matches"


def test_a_directory_past_the_budget_is_unknown(repo):
    fp = observe("Bash", {"command": "grep -rn v pkg1"}, str(repo), str(repo), b"k" * 32, "T", Probe(str(repo), b"k" * 32, budget=Budget(entries=10)))
    assert [e[0] for e in fp["in"]] == ["a", "u"]
    assert check(fp, Probe(str(repo), b"k" * 32))[0] == UNKNOWN


def test_a_staged_change_is_a_change_for_git_and_not_for_cat(repo):
    path = repo / "pkg0" / "sub0" / "m000_.py"
    path.write_text("v = 1000\n")
    key = b"k" * 32
    as_cat = observe("Bash", {"command": "cat pkg0/sub0/m000_.py"}, str(repo), str(repo), key, "T")
    as_git = observe("Bash", {"command": "git diff pkg0/sub0/m000_.py"}, str(repo), str(repo), key, "T")
    git(repo, "add", "pkg0/sub0/m000_.py")  # the bytes are the same; what `git diff` shows is not
    assert check(as_cat, Probe(str(repo), key)) == (VERIFIED, [])
    assert check(as_git, Probe(str(repo), key))[0] == CHANGED


def test_a_worktree_finds_its_own_head(repo, tmp_path):
    wt = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", "-b", "side", str(wt))
    (wt / "side.txt").write_text("s\n")
    git(wt, "add", "side.txt")
    git(wt, "commit", "-qm", "side")
    assert Probe(str(wt)).head() == git(wt, "rev-parse", "HEAD").strip() != Probe(str(repo)).head()


# -- links: the way to an input (issue 31 item 4) --------------------------------------------------

KEY = b"k" * 32


def linked_tree(root) -> None:
    """Two files alike but for their bytes, and links to them of every kind."""
    (root / "v1").mkdir(parents=True)
    (root / "v2").mkdir()
    for rel, text in (("a.txt", "alpha\n"), ("b.txt", "bravo\n"), ("v1/n.txt", "alpha\n"), ("v2/n.txt", "bravo\n")):
        (root / rel).write_text(text)
        os.utime(root / rel, ns=(10**18, 10**18))
    for rel, target in (("file.lnk", "a.txt"), ("dir.lnk", "v1"), ("chain.lnk", "file.lnk"), ("abs.lnk", str(root / "a.txt")),
                        ("v1/up.lnk", "../a.txt"), ("dangling.lnk", "gone.txt"), ("out.lnk", "/nonexistent/eggshell/x"),
                        ("loop1.lnk", "loop2.lnk"), ("loop2.lnk", "loop1.lnk")):
        os.symlink(target, root / rel)


def retarget(path, target) -> None:
    os.symlink(target, str(path) + ".new")
    os.replace(str(path) + ".new", path)


@pytest.mark.parametrize("name", ["a.txt", "./a.txt", "file.lnk", "chain.lnk", "abs.lnk", "dir.lnk/n.txt", "dir.lnk/up.lnk",
                                  "dir.lnk/../b.txt", "v1/../dir.lnk/./n.txt", "dangling.lnk", "gone/x/../y", "out.lnk", ".."])
def test_the_walk_leads_where_realpath_does(tmp_path, name):
    linked_tree(tmp_path)
    real, met = walk(str(tmp_path), name)
    assert real == os.path.realpath(os.path.join(tmp_path, name))
    assert [os.path.basename(p) for p, _ in met] == [c for c in ("chain.lnk", "file.lnk", "abs.lnk", "dir.lnk", "up.lnk", "dangling.lnk",
                                                                  "out.lnk") if c in name or (c == "file.lnk" and "chain" in name)]


def test_the_walk_stops_at_a_loop(tmp_path):
    linked_tree(tmp_path)
    assert walk(str(tmp_path), "loop1.lnk") is None


def test_only_a_way_that_is_not_plain_is_recorded(tmp_path):
    """A plain path costs what it did: its own entry, no way (the check's realpath sees a link appear on it)."""
    linked_tree(tmp_path)
    kinds = {cmd: [e[0] for e in observe("Bash", {"command": cmd}, str(tmp_path), str(tmp_path), KEY, "T")["in"]]
             for cmd in ("cat ./a.txt", "cat v1//n.txt", "cat file.lnk", "cat v1/../a.txt", "cd dir.lnk && cat n.txt", "ls dir.lnk")}
    assert kinds == {"cat ./a.txt": ["f"], "cat v1//n.txt": ["f"], "cat file.lnk": ["l", "f"], "cat v1/../a.txt": ["l", "f"],
                     "cd dir.lnk && cat n.txt": ["l", "f"], "ls dir.lnk": ["l", "d"]}


@pytest.mark.parametrize("command, link, target", [
    ("cat file.lnk", "file.lnk", "b.txt"),
    ("cat chain.lnk", "file.lnk", "b.txt"),
    ("cat abs.lnk", "abs.lnk", "{root}/b.txt"),
    ("cd dir.lnk && cat n.txt", "dir.lnk", "v2"),
    ("grep -rn alpha dir.lnk", "dir.lnk", "v2"),
    ("cat dir.lnk/up.lnk", "v1/up.lnk", "../b.txt"),
    ("cat dangling.lnk", "dangling.lnk", "b.txt"),
    ("cat a.txt out.lnk", "out.lnk", "b.txt"),  # a link out of the project to nothing is an input too
])
def test_a_retarget_is_named_as_a_change(tmp_path, command, link, target):
    linked_tree(tmp_path)
    fp = observe("Bash", {"command": command}, str(tmp_path), str(tmp_path), KEY, "T")
    assert check(fp, Probe(str(tmp_path), KEY)) == (VERIFIED, [])
    retarget(tmp_path / link, target.format(root=tmp_path))
    state, changed = check(fp, Probe(str(tmp_path), KEY))
    assert state == CHANGED and changed[0].endswith(command.split()[-1])  # the way as named, e.g. dir.lnk/n.txt


def test_a_walk_that_follows_links_notes_it():
    modes = {cmd: needs("Bash", {"command": cmd}, "/p").paths[-1][1] for cmd in
             ("grep -rn x src", "grep -Rn x src", "grep --dereference-recursive x src", "rg -L x src", "rg --follow x src", "rg -l x src",
              "find -L src", "find src -follow", "find src -name x", "ls -lL src", "ls -la src", "du -sL src", "ag -f x src")}
    assert {c for c, m in modes.items() if "L" in m} == {"grep -Rn x src", "grep --dereference-recursive x src", "rg -L x src",
                                                          "rg --follow x src", "find -L src", "find src -follow", "ls -lL src",
                                                          "du -sL src", "ag -f x src"}


def test_a_walk_that_follows_a_link_it_meets_is_unknown(tmp_path):
    linked_tree(tmp_path)
    follows = observe("Bash", {"command": "grep -Rn alpha v1"}, str(tmp_path), str(tmp_path), KEY, "T")
    skips = observe("Bash", {"command": "grep -rn alpha v1"}, str(tmp_path), str(tmp_path), KEY, "T")
    plain = observe("Bash", {"command": "grep -Rn alpha v2"}, str(tmp_path), str(tmp_path), KEY, "T")  # no link in v2
    assert [e[0] for e in follows["in"]][-1] == "u" and check(follows, Probe(str(tmp_path), KEY))[0] == UNKNOWN
    assert check(skips, Probe(str(tmp_path), KEY))[0] == VERIFIED and check(plain, Probe(str(tmp_path), KEY))[0] == VERIFIED
    os.symlink("../a.txt", tmp_path / "v2" / "new.lnk")
    assert check(plain, Probe(str(tmp_path), KEY))[0] != VERIFIED


def test_a_loop_is_unknown(tmp_path):
    linked_tree(tmp_path)
    fp = observe("Bash", {"command": "cat loop1.lnk"}, str(tmp_path), str(tmp_path), KEY, "T")
    assert fp["in"][0][0] == "u" and check(fp, Probe(str(tmp_path), KEY))[0] == UNKNOWN


def test_a_path_named_through_a_link_outside_the_project_is_unknown(tmp_path):
    """`cat /elsewhere/alias/a.txt`: the way passes a link whose place no fingerprint may store."""
    root = tmp_path / "proj"
    linked_tree(root)
    os.symlink(root, tmp_path / "alias")
    fp = observe("Bash", {"command": "cat %s/alias/a.txt" % tmp_path}, str(root), str(root), KEY, "T")
    assert [e[0] for e in fp["in"]] == ["u"] and check(fp, Probe(str(root), KEY))[0] == UNKNOWN
    # the host's cwd itself may be such a path: it is compared on its own, and reuse still works
    fp = observe("Bash", {"command": "cat file.lnk"}, str(tmp_path / "alias"), str(root), KEY, "T")
    assert fp["cwd"] == "." and check(fp, Probe(str(root), KEY), ".") == (VERIFIED, [])


def test_the_way_is_kept_private_and_checked_with_its_key(tmp_path):
    """A link's absolute target is not stored (a store travels through git); another data root's key cannot check it."""
    import json

    linked_tree(tmp_path)
    fp = observe("Bash", {"command": "cat abs.lnk"}, str(tmp_path), str(tmp_path), KEY, "T")
    assert str(tmp_path) not in json.dumps(fp)
    assert check(fp, Probe(str(tmp_path), b"j" * 32))[0] == UNKNOWN
    assert check(observe("Bash", {"command": "cat abs.lnk"}, str(tmp_path), str(tmp_path), None, "T"), Probe(str(tmp_path)))[0] == UNKNOWN


def test_a_version_1_fingerprint_is_never_verified_but_still_names_a_change(tmp_path):
    """One recorded before the way was: it cannot show a link on it was not retargeted since."""
    linked_tree(tmp_path)
    fp = observe("Bash", {"command": "cat file.lnk v1/n.txt"}, str(tmp_path), str(tmp_path), KEY, "T")
    old = dict(fp, v=1, **{"in": [e for e in fp["in"] if e[0] != "l"]})  # what version 1 recorded
    assert check(fp, Probe(str(tmp_path), KEY)) == (VERIFIED, [])
    assert check(old, Probe(str(tmp_path), KEY)) == (UNKNOWN, [])
    (tmp_path / "v1" / "n.txt").write_text("ALPHA\n")
    assert check(old, Probe(str(tmp_path), KEY)) == (CHANGED, ["v1/n.txt"])
    assert check(dict(fp, v=fpm.VERSION + 1), Probe(str(tmp_path), KEY)) == (UNKNOWN, [])  # a later version is not guessed at


@pytest.mark.parametrize("command", ["cat a.txt", "ls -l a.txt", "git log --oneline"])
def test_a_version_2_fingerprint_is_never_verified_but_still_names_a_change(tmp_path, command):
    """One recorded before metadata, other refs, ignore files and workdirs were inputs (red-team round IV)."""
    (tmp_path / "a.txt").write_text("alpha\n")
    fp = observe("Bash", {"command": command}, str(tmp_path), str(tmp_path), KEY, "T")
    assert check(fp, Probe(str(tmp_path), KEY))[0] == VERIFIED or command.startswith("git")
    assert check(dict(fp, v=2), Probe(str(tmp_path), KEY)) == (UNKNOWN, [])
    (tmp_path / "a.txt").write_text("ALPHA\n")
    if not command.startswith("git"):
        assert check(dict(fp, v=2), Probe(str(tmp_path), KEY)) == (CHANGED, ["a.txt"])


# -- the key ------------------------------------------------------------------------------------


def test_the_key_is_made_once_and_private(tmp_path):
    state = str(tmp_path / "state")
    assert fpm.key_of(state) is None
    k = fpm.key_of(state, create=True)
    assert len(k) == 32 and fpm.key_of(state) == k == fpm.key_of(state, create=True)
    assert os.stat(os.path.join(state, fpm.KEY_FILE)).st_mode & 0o777 == 0o600


def test_an_untracked_file_is_hashed_with_the_key_only(tmp_path):
    import hashlib

    (tmp_path / "secret.env").write_text("PASSWORD=hunter2\n")
    fp = observe("Bash", {"command": "cat secret.env"}, str(tmp_path), str(tmp_path), b"k" * 32, "T")
    (entry,) = fp["in"]
    data = b"PASSWORD=hunter2\n"
    plain = {hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest(), hashlib.sha256(data).hexdigest()}
    assert entry[6].startswith("k:") and entry[6][2:] not in plain
    assert check(fp, Probe(str(tmp_path), b"j" * 32))[0] == UNKNOWN  # another data root's key cannot check its bytes
