"""terms.py: the tokenizer behind lexical search.

Requirements: NFKC + casefold; Unicode words kept (accented Latin, Greek, Cyrillic,
Hangul); CJK/kana runs become character bigrams; identifiers kept whole and split into
their parts (snake_case, camelCase, paths, a.b.c); trailing sentence punctuation is not
part of a term; stopwords dropped; plain English words stemmed, identifiers kept whole.

The structural tests read terms without stemming (`terms` below), so each expected list
shows the tokenizer's decisions; the stemming tests at the end use the product's terms.
"""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eggshell.search.terms import STOPWORDS
from eggshell.search.terms import terms as product_terms


def terms(text: str, **kw) -> list[str]:
    return product_terms(text, stem=False, **kw)


# -- normalization -------------------------------------------------------------------


def test_case_folds():
    assert terms("Billing BILLING billing") == ["billing"] * 3


def test_casefold_is_more_than_lower():
    # str.lower() would keep "ß"; casefold turns it into "ss", so both spellings meet.
    assert terms("Straße") == terms("STRASSE") == ["strasse"]


def test_nfkc_folds_compatibility_forms():
    # ligature fi, fullwidth Latin, superscript two
    assert terms("\ufb01le") == ["file"]
    assert terms("\uff21\uff22\uff23") == ["abc"]
    assert terms("\uff4c\uff41\uff54\uff45\uff3f\uff46\uff45\uff45") == terms("late_fee")


def test_composed_and_decomposed_accents_are_one_term():
    composed = "caf\u00e9"
    decomposed = "cafe\u0301"
    assert composed != decomposed
    assert terms(composed) == terms(decomposed) == ["caf\u00e9"]


@given(st.text(max_size=40))
def test_terms_are_casefolded_nonempty_and_without_spaces(text):
    for t in terms(text):
        assert t and t == t.casefold()
        assert not any(c.isspace() for c in t)


@given(st.text(max_size=40))
def test_text_and_its_nfkc_form_give_the_same_terms(text):
    assert terms(text) == terms(unicodedata.normalize("NFKC", text))


_letters = st.sampled_from(list("abcdefxyzéüßαβωджя"))
_words = st.lists(st.text(_letters, min_size=1, max_size=8), min_size=1, max_size=5)


@given(_words)
def test_all_caps_and_lowercase_words_give_the_same_terms(words):
    text = " ".join(words)
    assert terms(text.upper()) == terms(text)


@given(st.text(max_size=40))
def test_never_raises_and_is_deterministic(text):
    assert terms(text) == terms(text)


# -- Unicode words ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("r\u00e9sum\u00e9 na\u00efve", ["r\u00e9sum\u00e9", "na\u00efve"]),  # accented Latin
        ("\u00dcberweisung", ["\u00fcberweisung"]),
        ("\u0391\u03b8\u03ae\u03bd\u03b1", ["\u03b1\u03b8\u03ae\u03bd\u03b1"]),  # Greek
        ("\u041c\u043e\u0441\u043a\u0432\u0430", ["\u043c\u043e\u0441\u043a\u0432\u0430"]),  # Cyrillic
        ("\ud55c\uad6d\uc5b4 \ubb38\uc11c", ["\ud55c\uad6d\uc5b4", "\ubb38\uc11c"]),  # Hangul: words, not bigrams
    ],
)
def test_unicode_words_are_kept_whole(text, expected):
    assert terms(text) == expected


def test_greek_final_sigma_matches_capitals():
    assert terms("\u03a3\u03a9\u039a\u03a1\u0391\u03a4\u0397\u03a3") == terms("\u03c3\u03c9\u03ba\u03c1\u03b1\u03c4\u03b7\u03c2")


# -- CJK and kana -----------------------------------------------------------------------


def test_han_runs_become_bigrams():
    assert terms("\u6771\u4eac\u90fd") == ["\u6771\u4eac", "\u4eac\u90fd"]


def test_hiragana_and_katakana_become_bigrams():
    assert terms("\u3072\u3089\u304c\u306a") == ["\u3072\u3089", "\u3089\u304c", "\u304c\u306a"]
    assert terms("\u30ab\u30bf\u30ab\u30ca") == ["\u30ab\u30bf", "\u30bf\u30ab", "\u30ab\u30ca"]


def test_single_cjk_character_is_a_term():
    assert terms("\u65e5") == ["\u65e5"]


def test_cjk_is_split_from_latin_around_it():
    assert terms("CJK\u6f22\u5b57mixed") == ["cjk", "\u6f22\u5b57", "mixed"]


def test_cjk_bigrams_make_a_phrase_findable_inside_a_sentence():
    sentence = terms("\u8acb\u6c42\u66f8\u306e\u5ef6\u6ede\u6599\u3092\u8a08\u7b97\u3059\u308b")  # compute the late fee of the invoice
    query = terms("\u5ef6\u6ede\u6599")  # late fee
    assert query and set(query) <= set(sentence)


# -- identifiers ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "ident, whole, parts",
    [
        ("late_fee", "late_fee", ["late", "fee"]),
        ("parseConfig", "parseconfig", ["parse", "config"]),
        ("getHTTPResponse", "gethttpresponse", ["get", "http", "response"]),
        ("src/billing/app.py", "src/billing/app.py", ["src", "billing", "app", "py"]),
        ("os.path.join", "os.path.join", ["os", "path", "join"]),
        ("x86_64", "x86_64", ["x86", "86", "64"]),
        ("my-package", "my-package", ["package"]),  # "my" is a stopword
    ],
)
def test_identifiers_are_kept_whole_and_split(ident, whole, parts):
    got = terms(ident)
    assert got[0] == whole
    for p in parts:
        assert p in got, (p, got)


def test_dotted_name_with_one_letter_parts_is_kept_whole():
    assert terms("a.b.c") == ["a.b.c"]


def test_identifier_found_by_either_spelling():
    doc = set(terms("the fee comes from computeLateFee in src/billing.py"))
    assert "computelatefee" in doc and {"compute", "late", "fee"} <= doc
    assert "src/billing.py" in doc and "billing" in doc


def test_identifier_parts_that_are_stopwords_are_dropped_but_the_whole_is_kept():
    got = terms("is_valid")
    assert got == ["is_valid", "valid"]
    assert terms("is_valid", keep_stopwords=True) == ["is_valid", "is", "valid"]


@pytest.mark.parametrize(
    "ident, parts",
    [
        ("calculerD\u00e9lai", ["calculer", "d\u00e9lai"]),
        ("get\u00dcberConfig", ["get", "\u00fcber", "config"]),
        ("\u00c9coleNormale", ["\u00e9cole", "normale"]),
        ("\u041f\u0440\u0438\u0432\u0435\u0442\u041c\u0438\u0440", ["\u043f\u0440\u0438\u0432\u0435\u0442", "\u043c\u0438\u0440"]),
        ("\u0391\u03b8\u03ae\u03bd\u03b1\u03a0\u03cc\u03bb\u03b7", ["\u03b1\u03b8\u03ae\u03bd\u03b1", "\u03c0\u03cc\u03bb\u03b7"]),
        ("cr\u00e8me_br\u00fbl\u00e9e", ["cr\u00e8me", "br\u00fbl\u00e9e"]),
    ],
)
def test_identifiers_with_non_ascii_letters_split_into_whole_words(ident, parts):
    # (a regression: camelCase splitting once knew only ASCII [A-Z][a-z], giving "lai" for "Délai")
    got = terms(ident)
    assert got == [ident.casefold()] + parts


# -- punctuation and stopwords ----------------------------------------------------------


@pytest.mark.parametrize("punct", [".", "!", "?", ",", ";", ":", "\u2026", ")"])
def test_trailing_sentence_punctuation_is_not_part_of_a_term(punct):
    assert terms("billing" + punct) == ["billing"]


def test_trailing_period_after_a_path_keeps_the_path():
    got = terms("see src/app.py.")
    assert "src/app.py" in got
    assert "src/app.py." not in got


def test_question_mark_after_identifier():
    assert terms("where is late_fee?")[:1] == ["late_fee"]


def test_stopwords_are_dropped():
    assert terms("Where is the late fee computed?") == ["late", "fee", "computed"]
    assert terms("The And OF") == []


def test_keep_stopwords_keeps_them():
    assert terms("where is the fee", keep_stopwords=True) == ["where", "is", "the", "fee"]


def test_stopword_list_is_lowercase_english_function_words():
    assert {"the", "is", "where", "and", "of"} <= STOPWORDS
    assert all(w == w.casefold() for w in STOPWORDS)
    assert not {"fee", "test", "build", "error"} & STOPWORDS


def test_repeats_are_kept_for_term_frequency():
    assert terms("fee fee fee") == ["fee", "fee", "fee"]


def test_empty_and_symbol_only_text():
    assert terms("") == []
    assert terms("  \n\t ... --- /// !!! ") == []


# -- stemming ------------------------------------------------------------------------


def test_inflections_of_an_english_word_meet():
    assert product_terms("parsing") == product_terms("parses") == product_terms("parse") == product_terms("parsed")
    assert product_terms("Where is the late fee computed?") == ["late", "fee", "comput"]


def test_identifiers_stay_whole_and_only_their_plain_parts_are_stemmed():
    got = product_terms("parse_configs")
    assert got[0] == "parse_configs"  # the exact spelling still matches exactly
    assert "config" in got and "pars" in got
    assert product_terms("src/billing.py")[0] == "src/billing.py"
    assert product_terms("v2.1.0") == terms("v2.1.0")


def test_non_ascii_words_are_not_run_through_the_english_stemmer():
    for w in ["caf\u00e9s", "\u03c3\u03c9\u03ba\u03c1\u03b1\u03c4\u03b7\u03c2", "\u0434\u0430\u043d\u043d\u044b\u0435", "\u6771\u4eac\u90fd"]:
        assert product_terms(w) == terms(w)


@given(st.text(max_size=60))
def test_stemming_changes_terms_but_never_their_number(text):
    assert len(product_terms(text)) == len(terms(text))
