"""The shared vector cache: exact identity, persistence, crash safety, concurrent writers.

A vector may be reused only for the same model id and byte-identical window text; a
digest match alone must never be enough. A crash loses at most the batch in flight, a
damaged segment is ignored rather than fatal, and concurrent writers and a compaction
never lose a row or show one twice to a reader.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import stat
import tempfile
import time
import traceback

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from eggshell.search import vectors
from eggshell.core.identity import digest
from eggshell.search.vectors import VectorCache, committed_segments, model_key, sweep_orphans, window_key
from helpers.vectors import DIM, MODEL, vec_for, vecs_for


def cache(root, model: str = MODEL, dim: int = DIM, log=None) -> VectorCache:
    c = VectorCache(str(root), model, dim, log=log if log is not None else (lambda m: None))
    c.refresh()
    return c


def assert_has(c: VectorCache, texts, salt: str = "") -> np.ndarray:
    rows = c.lookup(texts)
    assert (rows >= 0).all(), "missing: %r" % [t for t, r in zip(texts, rows) if r < 0][:5]
    assert np.array_equal(c.matrix()[rows], vecs_for(texts, salt))  # bitwise, float32
    return rows


def model_dir(root, model: str = MODEL) -> str:
    return os.path.join(str(root), model_key(model))


# -- round trip and identity ------------------------------------------------------------


def test_round_trip_is_bitwise_and_persists_across_instances(tmp_path):
    texts = ["def late_fee(days):", "", "naïve café ☕ 日本語", "x" * 100_000, "line\nbreak\ttab"]
    c = cache(tmp_path)
    rows = c.put(texts, vecs_for(texts))
    assert rows.tolist() == c.lookup(texts).tolist() == list(range(len(texts)))
    assert_has(c, texts)
    fresh = cache(tmp_path)
    assert len(fresh) == len(texts)
    assert_has(fresh, texts)
    # the data root is private
    d = model_dir(tmp_path)
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    for n in os.listdir(d):
        assert stat.S_IMODE(os.stat(os.path.join(d, n)).st_mode) == 0o600, n


def test_put_is_idempotent_and_dedupes_within_a_batch(tmp_path):
    c = cache(tmp_path)
    c.put(["a", "b"], vecs_for(["a", "b"]))
    rows = c.put(["b", "c", "c", "a"], vecs_for(["1", "2", "3", "4"]))  # the first vector given for a text wins
    assert len(c) == 3
    assert rows[0] == c.lookup(["b"])[0] and rows[1] == rows[2] and rows[3] == c.lookup(["a"])[0]
    for view in (c, cache(tmp_path)):
        assert np.array_equal(view.matrix()[view.lookup(["a", "b", "c"])], vecs_for(["a", "b", "2"]))
    mdir = model_dir(tmp_path)
    assert [vectors.read_meta(mdir, n, MODEL, DIM).count for n in committed_segments(mdir)] == [2, 1]  # only "c" was new
    assert c.put(["a", "c"], vecs_for(["a", "c"])).tolist() == c.lookup(["a", "c"]).tolist()
    assert len(committed_segments(model_dir(tmp_path))) == 2  # nothing new: no segment written


def test_another_model_or_any_changed_text_is_a_miss(tmp_path):
    texts = ["return a + b", "caf\u00e9"]
    cache(tmp_path).put(texts, vecs_for(texts))
    assert cache(tmp_path, model="other-model").lookup(texts).tolist() == [-1, -1]
    assert cache(tmp_path, model=MODEL + " ").lookup(texts).tolist() == [-1, -1]
    c = cache(tmp_path)
    assert c.lookup(["return a + b ", "return a+b", "Return a + b", "cafe\u0301", "caf"]).tolist() == [-1] * 5
    assert (c.lookup(texts) >= 0).all()


def _forge(mdir: str, model: str, texts: list[bytes], keys: list[bytes], vecs: np.ndarray) -> str:
    """A segment that is internally consistent (valid digest) but whose .key lies."""
    name = "seg-%020d-1-forged00" % time.time_ns()
    f32 = np.ascontiguousarray(vecs, dtype="<f4").tobytes()
    txt = b"".join(texts)
    off = np.cumsum([0] + [len(t) for t in texts]).astype("<i8").tobytes()
    key = b"".join(keys)
    os.makedirs(mdir, mode=0o700, exist_ok=True)
    for ext, data in ((".f32", f32), (".txt", txt), (".off", off), (".key", key)):
        with open(os.path.join(mdir, name + ext), "wb") as f:
            f.write(data)
    dg = vectors._segment_digest(model, DIM, len(texts), f32, txt, off, key)
    meta = {"count": len(texts), "digest": dg, "dim": DIM, "model": model, "text_bytes": len(txt), "version": 1}
    with open(os.path.join(mdir, name + ".meta"), "w") as f:
        json.dump(meta, f)
    return name


def test_a_digest_match_with_other_stored_text_is_a_miss(tmp_path):
    mdir = model_dir(tmp_path)
    _forge(mdir, MODEL, [b"rm -rf /"], [window_key(MODEL, b"ls -la")], vecs_for(["evil"]))
    c = cache(tmp_path)
    assert len(c) == 1  # the row is loaded (its segment is well formed) ...
    assert c.lookup(["ls -la", "rm -rf /"]).tolist() == [-1, -1]  # ... but no text reaches it
    rows = c.put(["ls -la"], vecs_for(["ls -la"]))
    assert rows[0] >= 0 and rows[0] == c.lookup(["ls -la"])[0]  # the forged row does not shadow the real one
    assert_has(c, ["ls -la"])
    assert_has(cache(tmp_path), ["ls -la"])
    assert cache(tmp_path).compact() == 2
    after = cache(tmp_path)
    assert len(after) == 1  # compaction drops rows whose key does not match their text
    assert_has(after, ["ls -la"])


# -- validation and crash safety --------------------------------------------------------------


def test_put_rejects_non_finite_and_misshapen_vectors(tmp_path):
    c = cache(tmp_path)
    bad = vecs_for(["a", "b"])
    bad[1, 3] = np.nan
    for v in (bad, np.full((2, DIM), np.inf, np.float32), np.full((2, DIM), 1e300), np.zeros((2, DIM + 1), np.float32), np.zeros((3, DIM))):
        with pytest.raises(ValueError):
            c.put(["a", "b"], v)
    with pytest.raises(TypeError):
        c.put([b"bytes"], vecs_for(["x"]))
    assert len(c) == 0 and committed_segments(model_dir(tmp_path)) == []


def _put_then_die(root: str, wfd: int) -> None:
    """Child: commit one batch, then get killed after writing the next batch's data, before its meta."""
    try:
        c = VectorCache(root, MODEL, DIM)
        c.put(["kept %d" % i for i in range(10)], vecs_for(["kept %d" % i for i in range(10)]))

        def hang(*a, **k):
            os.write(wfd, b"ready\n")
            time.sleep(30)

        vectors._commit_meta = hang
        c.put(["lost %d" % i for i in range(10)], vecs_for(["lost %d" % i for i in range(10)]))
    finally:
        os._exit(3)


def test_a_writer_killed_between_data_and_meta_loses_only_its_batch(tmp_path):
    root = str(tmp_path)
    cache(root).put(["before"], vecs_for(["before"]))
    rfd, wfd = os.pipe()
    proc = multiprocessing.get_context("fork").Process(target=_put_then_die, args=(root, wfd))
    proc.start()
    os.close(wfd)
    with os.fdopen(rfd, "rb") as r:
        assert r.readline() == b"ready\n"
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(10)
    assert proc.exitcode == -signal.SIGKILL
    mdir = model_dir(root)
    stems = {os.path.splitext(n)[0] for n in os.listdir(mdir) if n.startswith("seg-")}
    assert len(stems) == 3 and len(committed_segments(mdir)) == 2  # one segment has data but no meta
    logs: list[str] = []
    c = cache(root, log=logs.append)
    assert logs == []  # an uncommitted segment is not an error
    assert_has(c, ["before"] + ["kept %d" % i for i in range(10)])
    assert c.lookup(["lost %d" % i for i in range(10)]).tolist() == [-1] * 10
    assert len(c) == 11
    # compaction leaves a young orphan alone (its writer may be alive) and an old one goes
    c.compact()
    assert len({os.path.splitext(n)[0] for n in os.listdir(mdir) if n.startswith("seg-")}) == 2
    assert sweep_orphans(mdir, now=time.time() + vectors.ORPHAN_AGE_S + 60) == 4
    assert len(os.listdir(mdir)) == 6  # the merged segment's five files and .lock
    assert_has(cache(root), ["before"] + ["kept %d" % i for i in range(10)])


def _damage(path: str, how: str) -> None:
    if how == "truncate":
        os.truncate(path, os.path.getsize(path) - 1)
    elif how == "flip":
        with open(path, "r+b") as f:
            b = f.read(1)
            f.seek(0)
            f.write(bytes([b[0] ^ 0x40]))
    elif how == "garbage":
        with open(path, "wb") as f:
            f.write(b"\x00{not json")
    elif how == "remove":
        os.unlink(path)
    elif how == "wild count":  # well-formed JSON that would ask for terabytes
        with open(path) as f:
            meta = json.load(f)
        with open(path, "w") as f:
            json.dump(dict(meta, count=10**12), f)


@pytest.mark.parametrize(
    "ext,how",
    [(".f32", "truncate"), (".f32", "flip"), (".txt", "flip"), (".off", "flip"), (".key", "flip"), (".key", "truncate"), (".meta", "garbage"), (".meta", "wild count"), (".txt", "remove"), (".f32", "remove")],
)
def test_a_damaged_segment_is_ignored_and_reported_once(tmp_path, ext, how):
    c = cache(tmp_path)
    c.put(["good"], vecs_for(["good"]))
    c.put(["doomed one", "doomed two"], vecs_for(["doomed one", "doomed two"]))
    mdir = model_dir(tmp_path)
    _damage(os.path.join(mdir, committed_segments(mdir)[1] + ext), how)
    logs: list[str] = []
    fresh = cache(tmp_path, log=logs.append)
    assert_has(fresh, ["good"])
    assert fresh.lookup(["doomed one", "doomed two"]).tolist() == [-1, -1]
    assert len(fresh) == 1 and len(logs) == 1 and "ignored" in logs[0]
    fresh.refresh()
    assert len(logs) == 1
    fresh.put(["doomed one"], vecs_for(["doomed one"]))  # the lost rows can simply be stored again
    assert_has(cache(tmp_path), ["good", "doomed one"])


def test_a_segment_of_another_dimension_or_model_is_ignored(tmp_path):
    mdir = model_dir(tmp_path)
    vectors.write_segment(mdir, MODEL, DIM * 2, np.ones((1, DIM * 2), np.float32), [b"wide"])
    vectors.write_segment(mdir, "a different model", DIM, np.ones((1, DIM), np.float32), [b"stranger"])
    vectors.write_segment(mdir, MODEL, DIM, vecs_for(["fine"]), [b"fine"])
    logs: list[str] = []
    c = cache(tmp_path, log=logs.append)
    assert len(c) == 1 and len(logs) == 2
    assert_has(c, ["fine"])
    assert c.lookup(["wide", "stranger"]).tolist() == [-1, -1]


def test_an_unwritable_cache_still_serves_this_process(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    logs: list[str] = []
    c = VectorCache(str(blocker / "vectors"), MODEL, DIM, log=logs.append)
    c.refresh()
    rows = c.put(["a", "b"], vecs_for(["a", "b"]))
    assert rows.tolist() == [0, 1] and len(logs) == 1
    assert_has(c, ["a", "b"])


# -- the matrix ------------------------------------------------------------------------------


def test_matrix_grows_incrementally_and_is_not_copied_per_call(tmp_path):
    a = cache(tmp_path)
    b = cache(tmp_path)
    first = ["a%d" % i for i in range(5)]
    a.put(first, vecs_for(first))
    m1 = a.matrix()
    assert a.matrix() is m1 and m1.dtype == np.float32 and m1.shape == (5, DIM)
    assert not m1.flags.writeable and m1.flags.c_contiguous
    snapshot = m1.copy()
    assert a.refresh() == 0 and a.matrix() is m1
    for k in range(40):  # many segments: the buffer is reallocated several times
        batch = ["b%d-%d" % (k, i) for i in range(20)]
        b.put(batch, vecs_for(batch))
    assert a.refresh() == 800
    m2 = a.matrix()
    assert m2 is a.matrix() and m2.shape == (805, DIM) and m2.flags.c_contiguous
    assert np.array_equal(m2[:5], snapshot) and np.array_equal(m1, snapshot)  # old rows unchanged, old view intact
    assert_has(a, first + ["b%d-%d" % (k, i) for k in range(40) for i in range(20)])
    q = vec_for("query")
    assert np.array_equal(a.matrix() @ q, np.stack([vec_for(t) for t in first] + [vec_for("b%d-%d" % (k, i)) for k in range(40) for i in range(20)]) @ q)


# -- several processes --------------------------------------------------------------------------


def _writer(root: str, k: int, go, batch: int, wfd: int | None = None) -> None:
    """Child: put 200 texts in batches, reporting each batch once put() has returned."""
    try:
        c = VectorCache(root, MODEL, DIM)
        texts = ["shared window %d" % i for i in range(k * 150, k * 150 + 200)]  # overlaps the next writer
        go.wait(10)
        for i in range(0, len(texts), batch):
            c.put(texts[i : i + batch], vecs_for(texts[i : i + batch]))
            if wfd is not None:
                os.write(wfd, b"%d %d\n" % (k * 150 + i, k * 150 + i + batch))
        os._exit(0)
    except BaseException:
        traceback.print_exc()
        os._exit(1)


def _compactor(root: str, stop) -> None:
    try:
        c = VectorCache(root, MODEL, DIM)
        while not stop.is_set():
            c.compact()
        os._exit(0)
    except BaseException:
        traceback.print_exc()
        os._exit(1)


def _start(target, *args):
    p = multiprocessing.get_context("fork").Process(target=target, args=args)
    p.start()
    return p


def test_concurrent_writers_then_compaction(tmp_path):
    root = str(tmp_path)
    go = multiprocessing.get_context("fork").Event()
    procs = [_start(_writer, root, k, go, 25) for k in range(4)]
    go.set()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    every = ["shared window %d" % i for i in range(3 * 150 + 200)]
    c = cache(root)
    assert len(c) == len(every)  # a text two writers both stored is still one row here
    rows = assert_has(c, every)
    assert len(set(rows.tolist())) == len(every)
    segments = len(committed_segments(model_dir(root)))
    assert 4 * 6 <= segments <= 4 * 8  # a batch another writer fully stored first is not written
    assert c.compact() == segments
    assert len(committed_segments(model_dir(root))) == 1
    assert len(c) == len(every) and c.lookup(every).tolist() == rows.tolist()  # this process's rows are stable
    fresh = cache(root)
    assert len(fresh) == len(every)
    assert_has(fresh, every)
    assert fresh.compact() == 0


def test_readers_lose_nothing_and_see_nothing_twice_while_another_process_compacts(tmp_path):
    root = str(tmp_path)
    early = ["early %d" % i for i in range(50)]
    cache(root).put(early, vecs_for(early))
    ctx = multiprocessing.get_context("fork")
    go, stop = ctx.Event(), ctx.Event()
    rfd, wfd = os.pipe()
    os.set_blocking(rfd, False)
    writers = [_start(_writer, root, k, go, 5, wfd) for k in (0, 1)]
    compactor = _start(_compactor, root, stop)
    os.close(wfd)
    go.set()
    reader = cache(root)
    reported: set[str] = set(early)
    pending = [b""]

    def check() -> None:
        try:
            pending[0] += os.read(rfd, 1 << 16)
        except BlockingIOError:
            pass
        *lines, pending[0] = pending[0].split(b"\n")
        for line in lines:
            a, b = map(int, line.split())
            reported.update("shared window %d" % i for i in range(a, b))
        reader.refresh()  # everything reported before this call must be visible after it
        known = sorted(reported)
        rows = reader.lookup(known)
        assert (rows >= 0).all(), "lost: %r" % [t for t, r in zip(known, rows) if r < 0][:3]
        assert np.array_equal(reader.matrix()[rows], vecs_for(known))
        everything = reader.lookup(early + ["shared window %d" % i for i in range(350)])
        assert len(reader) == (everything >= 0).sum()  # no row twice, nothing unexpected

    try:
        rounds = 0
        while any(p.is_alive() for p in writers) or rounds < 3:
            check()
            rounds += 1
        for p in writers:
            p.join(60)
            assert p.exitcode == 0
        check()
    finally:
        stop.set()
        compactor.join(60)
        os.close(rfd)
    assert compactor.exitcode == 0
    assert len(reported) == 50 + 350
    cache(root).compact()
    assert len(committed_segments(model_dir(root))) == 1
    fresh = cache(root)
    assert len(fresh) == len(reported)
    assert_has(fresh, sorted(reported))


@pytest.mark.parametrize("during", ["read_meta", "_read_segment"])
def test_a_segment_compacted_away_while_being_read_is_found_in_the_merge(tmp_path, monkeypatch, during):
    root = str(tmp_path)
    a, b = ["a%d" % i for i in range(5)], ["b%d" % i for i in range(5)]
    writer = cache(root)
    writer.put(a, vecs_for(a))
    writer.put(b, vecs_for(b))
    logs: list[str] = []
    reader = VectorCache(root, MODEL, DIM, log=logs.append)
    real = getattr(vectors, during)
    raced: list[int] = []

    def racing(*args):
        if not raced:  # the reader has listed the segments; now another process compacts them away
            raced.append(1)
            assert writer.compact() == 2
        return real(*args)

    monkeypatch.setattr(vectors, during, racing)
    assert reader.refresh() == 10 and raced
    assert len(reader) == 10 and logs == []
    assert_has(reader, a + b)


class _Crash(BaseException):
    pass


def test_a_compaction_that_dies_midway_loses_nothing_and_reports_nothing(tmp_path, monkeypatch):
    root = str(tmp_path)
    batches = [["s%d-%d" % (k, i) for i in range(4)] for k in range(3)]
    c = cache(root)
    for b in batches:
        c.put(b, vecs_for(b))
    real = vectors._unlink
    calls: list[str] = []

    def dying(path):
        if calls:
            raise _Crash(path)
        calls.append(path)
        real(path)

    monkeypatch.setattr(vectors, "_unlink", dying)
    with pytest.raises(_Crash):
        c.compact()
    monkeypatch.setattr(vectors, "_unlink", real)
    every = [t for b in batches for t in b]
    logs: list[str] = []
    fresh = cache(root, log=logs.append)
    assert logs == [] and len(fresh) == len(every)  # the merge and the old segments overlap: each row once
    assert_has(fresh, every)
    assert fresh.compact() == 3  # the merge and the two old segments still committed
    assert_has(cache(root), every)


# -- a property ---------------------------------------------------------------------------------

_texts = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["", " ", "\x00", "é", "e\u0301", "\ud800lone surrogate", "\U0001f600" * 3, "long " * 40_000]),
)


@given(batches=st.lists(st.lists(_texts, max_size=6), min_size=1, max_size=4), salts=st.lists(st.text(max_size=3), min_size=4, max_size=4))
def test_lookup_agrees_with_a_dictionary_of_first_puts(batches, salts):
    with tempfile.TemporaryDirectory() as root:
        c = cache(root)
        model: dict[str, np.ndarray] = {}
        for batch, salt in zip(batches, salts):
            vecs = vecs_for(batch, salt)
            rows = c.put(batch, vecs)
            for t, v in zip(batch, vecs):
                model.setdefault(t, v)  # the first vector stored for a text wins, within a batch too
            assert rows.tolist() == c.lookup(batch).tolist()
            assert len(c) == len(model)
        for view in (c, cache(root)):
            known = list(model)
            rows = view.lookup(known)
            assert (rows >= 0).all() and len(set(rows.tolist())) == len(known)
            assert np.array_equal(view.matrix()[rows], np.stack(list(model.values())) if known else np.zeros((0, DIM), np.float32))
            unknown = [t for t in (x + "\x01" for x in known + ["never stored"]) if t not in model]
            assert (view.lookup(unknown) == -1).all()
