"""search/background.py: the unrelated turns a prompt's cosine is judged against.

The shipped vectors must be what the installed model gives those texts today (a stale file
would calibrate every prompt against the wrong numbers), the calibration must be the plain
mean and spread of what it is given, and the background must stay clear of the evaluation's
subjects (it would otherwise be fitted to them).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from importlib import resources

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from eggshell.search import background as bg
from eggshell.search.embed import Encoder
from eggshell.search.semantic import MAX_WINDOWS
from eggshell.search.terms import terms


def test_the_background_is_many_lengths_of_many_topics_and_none_of_the_evaluation_s():
    texts = bg.texts()
    assert len(texts) >= 200 and len(set(texts)) == len(texts)
    lengths = sorted(map(len, texts))
    assert lengths[0] < 400 and lengths[-1] > 1500 and 400 < lengths[len(lengths) // 2] < 1500
    lower = "\n".join(texts).casefold()
    for subject in ("astropy", "django", "matplotlib", "scikit", "sklearn", "sympy", "sphinx", "xarray", "pylint",
                    "seaborn", "flask", "late fee", "caroline", "melanie"):
        assert subject not in lower, subject


def test_the_shipped_vectors_are_the_default_model_s_for_today_s_texts():
    """A stale background.npz (texts or model changed without `make background`) fails here."""
    enc = Encoder()
    got = bg.shipped(enc.model_id)
    assert got is not None, "background.npz is not of today's background.jsonl and model: run `make background`"
    vectors, text_of = got
    assert vectors.shape[1] == 384 and len(vectors) == len(text_of) and set(text_of.tolist()) == set(range(len(bg.texts())))
    picks = sorted({0, 7, 50, 123, len(bg.texts()) - 1, *np.argsort([len(t) for t in bg.texts()])[-2:].tolist()})
    for n in picks:
        wins = [w.text for w in enc.windows(bg.texts()[n])][:MAX_WINDOWS]
        fresh = enc.embed(wins)
        assert fresh.shape == vectors[text_of == n].shape
        assert np.abs(fresh - vectors[text_of == n]).max() < 5e-3, n  # float16 on disk
    assert bg.shipped("another/model") is None


def test_shipped_scores_are_each_text_s_best_window():
    enc = Encoder()
    vectors, text_of = bg.shipped(enc.model_id)
    q = enc.embed(["why does the retry loop give up after three attempts?"])
    got = bg.shipped_scores(enc.model_id, q)
    for n in (0, 1, 100):
        assert got[n] == pytest.approx(float((vectors[text_of == n] @ q.T).max()), abs=1e-6)
    assert bg.shipped_scores("another/model", q) is None and bg.shipped_scores(enc.model_id, None) is None


@given(st.lists(st.floats(-1, 1), min_size=2, max_size=60), st.integers(0, 20))
def test_a_calibration_is_the_mean_and_spread_of_the_scored_texts(xs, unscored):
    got = bg.calibrate([*xs, *[-math.inf] * unscored])
    if len(xs) < bg.MIN_SCORED * (len(xs) + unscored) or np.std(xs) == 0:
        assert got is None
        return
    assert got is not None and got.mean == pytest.approx(np.mean(xs), abs=1e-9) and got.sd == pytest.approx(np.std(xs), abs=1e-9)
    assert got.z(got.mean + 2 * got.sd) == pytest.approx(2.0)


@pytest.mark.parametrize("value", [None, [], [0.1], [0.1, 0.0], [0.1, -0.2], ["0.1", 0.2], [True, 0.2], [float("nan"), 0.1],
                                   [0.1, float("inf")], {"mean": 0.1, "sd": 0.2}, [0.1, 0.2, 0.3]])
def test_a_message_s_calibration_is_two_finite_numbers_with_a_positive_spread_or_none(value):
    assert bg.Calibration.of(value) is None


def test_a_calibration_round_trips_through_a_message():
    c = bg.Calibration(0.123456, 0.0654321)
    assert bg.Calibration.of(json.loads(json.dumps(c.as_list()))) == bg.Calibration(0.123456, 0.065432)


def test_generic_terms_are_those_held_by_a_share_of_the_background():
    texts = bg.texts()
    df = Counter(t for x in texts for t in set(terms(x)))
    least = max(2, math.ceil(bg.GENERIC_SHARE * len(texts)))
    assert bg.generic_terms() == frozenset(t for t, n in df.items() if n >= least)
    assert {"chang", "test", "file", "function"} <= bg.generic_terms()


def test_the_background_ships_in_the_package():
    names = {p.name for p in resources.files("eggshell.search").iterdir()}
    assert {bg.FILE, bg.VECTORS} <= names
