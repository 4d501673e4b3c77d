"""Unicode-aware terms for lexical search.

Text is NFKC-normalized and case-folded. Words are Unicode letters and digits (so
accented Latin, Greek, Cyrillic and Hangul survive); Han and kana runs become
character bigrams, since they are written without spaces. Identifiers such as
`late_fee`, `parseConfig`, `src/app.py` or `a.b.c` are kept whole and also split
into their parts, so either spelling finds them. Trailing sentence punctuation is
not part of a term. Plain English words (and identifier parts) are Snowball-stemmed, so
"parsing", "parses" and "parse" meet; whole identifiers stay exact. Stemming is what
lifted LoCoMo recall most among the lexical changes measured (docs/benchmarks.md).
"""

from __future__ import annotations

import functools
import re
import unicodedata

from py_rust_stemmers import SnowballStemmer  # installed with fastembed

# Letters, digits, marks and the joiners that make identifiers: _ . / : - @ #
_RAW = re.compile(r"[\w\u0300-\u036f.:/@#-]+")
_JOINERS = "._/:-@#"
_SPLIT = re.compile(r"[._/:@#-]+")
_CJK = re.compile(r"[\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f]+")

STOPWORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been before being
    below between both but by can could did do does doing done down during each few for from further had
    has have having he her here hers herself him himself his how i if in into is it its itself just let
    me more most my myself no nor not now of off on once only or other our ours ourselves out over own
    please same she should so some such than that the their theirs them themselves then there these they
    this those through to too under until up us very via was we were what when where which while who whom
    why will with would you your yours yourself yourselves""".split()
)


_STEM = SnowballStemmer("english").stem_word


def _word(w: str) -> str:
    """A plain word as a term: ASCII letters are stemmed (the stemmer is English), others kept."""
    return _STEM(w) if w.isascii() and w.isalpha() else w


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text)


def _is_identifier(tok: str) -> bool:
    inner = tok.strip(_JOINERS)
    if any(c in _JOINERS for c in inner):
        return True
    has_digit = any(c.isdigit() for c in tok)
    has_alpha = any(c.isalpha() for c in tok)
    if has_digit and has_alpha:
        return True
    return any(c.isupper() for c in tok[1:]) and any(c.islower() for c in tok)


def _camel_parts(piece: str) -> list[str]:
    """Split at lower->Upper, letter<->digit, and before the last capital of a capital run.

    Works on any script with case (Latin, Greek, Cyrillic), not only ASCII.
    """
    parts: list[str] = []
    start = 0
    for i in range(1, len(piece)):
        a, b = piece[i - 1], piece[i]
        nxt = piece[i + 1] if i + 1 < len(piece) else ""
        if (
            (a.islower() and b.isupper())
            or (a.isdigit() != b.isdigit() and (a.isalpha() or b.isalpha()))
            or (a.isupper() and b.isupper() and nxt.islower())
        ):
            parts.append(piece[start:i])
            start = i
    parts.append(piece[start:])
    return [p for p in parts if p]


def _bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def terms(text: str, *, keep_stopwords: bool = False, stem: bool = True) -> list[str]:
    """The terms of a text, in order, with repeats (term frequency matters)."""
    out: list[str] = []
    for m in _RAW.finditer(_fold(text)):
        out.extend(_token_terms(m.group(), keep_stopwords, stem))
    return out


@functools.lru_cache(maxsize=1 << 14)
def _token_terms(raw: str, keep_stopwords: bool, stem: bool = True) -> tuple[str, ...]:
    """The terms of one raw token; memoized, since code and logs repeat tokens endlessly.

    16,384 tokens: at 131,072 the memo alone held 55 MB of a 10,000-turn manager, to make a
    full tokenizing of its stores 2.3 s instead of 2.8 s (a warm searcher tokenizes only
    what was saved since; measured 4 Dec 2026)."""
    tok = raw.strip(_JOINERS)
    if not tok:
        return ()
    out: list[str] = []
    if _CJK.search(tok):
        # Split CJK runs from any Latin/digits around them.
        pos = 0
        for cm in _CJK.finditer(tok):
            if cm.start() > pos:
                out.extend(terms(tok[pos : cm.start()], keep_stopwords=keep_stopwords, stem=stem))
            out.extend(_bigrams(cm.group()))
            pos = cm.end()
        if pos < len(tok):
            out.extend(terms(tok[pos:], keep_stopwords=keep_stopwords, stem=stem))
        return tuple(out)
    whole = tok.casefold()
    if _is_identifier(tok):
        out.append(whole)
        for piece in _SPLIT.split(tok):
            parts = _camel_parts(piece) or [piece]
            if len(parts) > 1 and piece.casefold() != whole:
                out.append(piece.casefold())
            for p in parts:
                p = p.casefold()
                if p and p != whole and (keep_stopwords or p not in STOPWORDS) and (len(p) > 1 or p.isdigit()):
                    out.append(_word(p) if stem else p)
        return tuple(out)
    if keep_stopwords or whole not in STOPWORDS:
        out.append(_word(whole) if stem else whole)
    return tuple(out)
