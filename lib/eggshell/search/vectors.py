"""The shared embedding-vector cache: one per data root, keyed by model and exact text.

Sharing it across chats and projects is safe because a row is reused only when both the
model id and the full window text are byte-for-byte equal: the window digest only finds
a candidate row, the stored text decides. Vectors live in immutable segments, one per
`put` batch, each written by one process and committed by renaming its `.meta` into
place after the data is fsynced, so concurrent writers need no lock and a crash loses at
most the batch in flight. Only `compact` and `purge` take a lock. A process keeps everything it can
see in one growing float32 matrix, so ranking is one matrix product with no copy per
query; row numbers only ever grow, so they stay valid for the life of a `VectorCache` (until
a purge: see `epoch`).

Layout (format version 1, all numbers little-endian, all files 0600):

    <root>/<model key>/.lock                     compact's lock
    <root>/<model key>/seg-<ns>-<pid>-<rand>.f32  count x dim float32 rows
                                          .txt  the window texts, UTF-8, concatenated
                                          .off  count+1 int64 offsets into .txt
                                          .key  count x 32-byte window digests
                                          .meta {"count","digest","dim","model","text_bytes","version"}

A segment exists once its `.meta` does; the meta's digest covers the model, dim, count and
all four files, so a segment that is torn, truncated or garbled is ignored (and reported
once), never loaded.

`purge` (from `egg compact --purge`) rewrites, under compact's lock, every segment holding
a window the user forgot, without it, and then replaces `<model key>/.purged`; a process
that sees that file change drops everything it loaded and reads the cache again, so purged
rows leave its memory too.
"""

from __future__ import annotations

import io
import json
import mmap
import os
import sys
import time
from array import array
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import numpy as np

from eggshell.errors import EggshellError
from eggshell.core.identity import digest
from eggshell.paths import fsync_dir, private_dir, write_all

VERSION = 1
MODEL_DOMAIN = "eggshell.vectors.model"
WINDOW_DOMAIN = "eggshell.vectors.window"
SEGMENT_DOMAIN = "eggshell.vectors.segment"
DATA_EXTS = (".f32", ".txt", ".off", ".key")
META, META_TMP, PREFIX = ".meta", ".meta-tmp", "seg-"
PURGED = ".purged"  # replaced by every purge that removed rows: readers reload
PURGE_ORPHAN_AGE_S = 10.0  # a purge removes uncommitted files older than this (a live writer commits in milliseconds)
ORPHAN_AGE_S = 3600.0  # an uncommitted segment older than this has no live writer
LOCK_TIMEOUT_S = 30.0
MMAP_MIN_BYTES = 1 << 20  # smaller texts are read into memory: one fd per small segment would not scale
RELISTS = 8
_LITTLE = sys.byteorder == "little"
_F32 = np.dtype("<f4")


class SegmentError(EggshellError, ValueError):
    """A committed segment that cannot be trusted; it is ignored, never loaded."""


class _Vanished(EggshellError):
    """A segment removed (by a compaction) between listing and reading it."""


def vectors_root(data_root: str) -> str:
    return os.path.join(data_root, "semantic", "vectors")


def model_key(model_id: str) -> str:
    """The directory name for a model: ids may hold any character, file names may not."""
    return digest(MODEL_DOMAIN, model_id).hex()[:32]


def encode_text(text: str) -> bytes:
    """The exact bytes stored and compared; lone surrogates (valid in JSON) pass through, injectively."""
    if not isinstance(text, str):
        raise TypeError("window texts must be str, not %s" % type(text).__name__)
    return text.encode("utf-8", "surrogatepass")


def window_key(model_id: str, text: bytes) -> bytes:
    return digest(WINDOW_DOMAIN, model_id, text)


@dataclass(frozen=True, slots=True)
class SegmentMeta:
    name: str
    model: str
    dim: int
    count: int
    text_bytes: int
    digest: str


@dataclass(frozen=True, slots=True, eq=False)
class _Texts:
    """One segment's window texts: bytes, or a read-only map when large."""

    data: bytes | mmap.mmap
    offsets: array  # 'q', count + 1

    def same(self, i: int, text: bytes) -> bool:
        a, b = self.offsets[i], self.offsets[i + 1]
        return b - a == len(text) and self.data[a:b] == text

    def get(self, i: int) -> bytes:
        return bytes(self.data[self.offsets[i] : self.offsets[i + 1]])


@dataclass(frozen=True, slots=True, eq=False)
class _Segment:
    meta: SegmentMeta
    vectors: np.ndarray  # (count, dim) float32, native order
    texts: _Texts
    keys: bytes  # count * 32


def _stderr(msg: str) -> None:
    print("eggshell.vectors: %s" % msg, file=sys.stderr, flush=True)


class VectorCache:
    """This process's view of one model's vectors; not thread-safe (one per thread, or lock it)."""

    def __init__(self, root: str, model_id: str, dim: int, log: Callable[[str], None] | None = None):
        if not isinstance(model_id, str) or not model_id:
            raise ValueError("model_id must be a non-empty string")
        if type(dim) is not int or dim < 1:
            raise ValueError("dim must be a positive int, got %r" % (dim,))
        self.root = root
        self.model_id = model_id
        self.dim = dim
        self.dir = os.path.join(root, model_key(model_id))
        self.log = log or _stderr
        self.epoch = 0  # counts reloads after a purge: row numbers of an earlier epoch are void
        self._mark: bytes | None = read_purge_mark(self.dir)  # read before anything is listed
        self._clear()

    def _clear(self) -> None:
        self._buf = np.empty((0, self.dim), dtype=np.float32)
        self._n = 0
        self._view: np.ndarray | None = None
        self._texts: list[_Texts] = []
        self._row_seg = array("i")  # row -> index into _texts
        self._row_idx = array("q")  # row -> window within that segment
        self._first: dict[bytes, int] = {}  # window digest -> first row with it
        self._more: dict[bytes, list[int]] = {}  # further rows with a digest seen before but other text
        self._seen: set[str] = set()  # segments loaded or ignored

    def check_purge(self) -> bool:
        """Drop every row (a new epoch) if a purge ran since this cache last looked; one small read."""
        mark = read_purge_mark(self.dir)
        if mark == self._mark:
            return False
        self._mark = mark
        self._clear()
        self.epoch += 1
        return True

    # -- reading -------------------------------------------------------------------------

    def __len__(self) -> int:
        return self._n

    def matrix(self) -> np.ndarray:
        """Every visible row, read-only; the same object until rows are added (no copy per call)."""
        if self._view is None:
            v = self._buf[: self._n]
            v.flags.writeable = False
            self._view = v
        return self._view

    def lookup(self, texts: Iterable[str]) -> np.ndarray:
        """The row of each text in `matrix()`, or -1; sees only what refresh/put made visible."""
        if isinstance(texts, str):
            raise TypeError("lookup takes a list of texts, not one str")
        out = [self._find(window_key(self.model_id, b), b) for b in map(encode_text, texts)]
        return np.asarray(out, dtype=np.int64)

    def refresh(self) -> int:
        """Load segments other processes committed since the last call; returns rows added.

        After a purge everything is loaded again (see check_purge): compare `epoch`.
        """
        self.check_purge()
        added = 0
        for _ in range(RELISTS):
            names = committed_segments(self.dir)
            self._seen.intersection_update(names)
            metas: list[SegmentMeta] = []
            vanished = False
            for name in names:
                if name in self._seen:
                    continue
                try:
                    metas.append(read_meta(self.dir, name, self.model_id, self.dim))
                except _Vanished:
                    vanished = True
                except SegmentError as e:
                    self._ignore(name, e)
            if metas:
                self._reserve(self._n + sum(m.count for m in metas))
            for m in metas:
                try:
                    seg = _read_segment(self.dir, m, self.model_id, self.dim, self._buf[self._n : self._n + m.count])
                except _Vanished:
                    vanished = True
                    continue
                except SegmentError as e:
                    self._ignore(m.name, e)
                    continue
                added += self._adopt(seg.texts, seg.keys, m.count)
                self._seen.add(m.name)
            if not vanished:
                break
            # A compaction removed a segment after committing its merge; the merge is listed now.
        return added

    # -- writing -------------------------------------------------------------------------

    def put(self, texts: Sequence[str], vectors: np.ndarray, gate: Callable[[], bool] | None = None) -> np.ndarray:
        """Store vectors for texts not yet present; returns the row of every text.

        Vectors are kept as float32, exactly as given (callers normalize). Rows are written
        as one new segment; if the disk refuses it, they are still used in this process.
        With `gate`, the segment is written under the lock a purge holds, and only if
        `gate()` says so right then (graph/tombstones.Gate: the texts' turns are still
        live); else nothing is kept, here or on disk, and the new texts' rows are -1.
        """
        if isinstance(texts, str):
            raise TypeError("put takes a list of texts, not one str")
        encoded = [encode_text(t) for t in texts]
        v = np.asarray(vectors)
        if v.ndim != 2 or v.shape != (len(encoded), self.dim) or not (np.issubdtype(v.dtype, np.floating) or np.issubdtype(v.dtype, np.integer)):
            raise ValueError("vectors must be a real (%d, %d) array, got %s %s" % (len(encoded), self.dim, v.dtype, v.shape))
        with np.errstate(over="ignore", invalid="ignore"):  # too large for float32: caught just below
            v32 = np.ascontiguousarray(v, dtype=_F32)
        bad = ~np.isfinite(v32).all(axis=1)
        if bad.any():
            raise ValueError("vectors hold NaN or infinity (as float32) in rows %s" % np.flatnonzero(bad)[:10].tolist())
        if not encoded:
            return np.zeros(0, dtype=np.int64)
        self.refresh()
        keys = [window_key(self.model_id, b) for b in encoded]
        rows = [self._find(k, b) for k, b in zip(keys, encoded)]
        pick: dict[bytes, int] = {}  # text -> first index in this batch, for the missing ones
        for i, b in enumerate(encoded):
            if rows[i] < 0 and b not in pick:
                pick[b] = i
        if pick:
            idx = list(pick.values())
            new_texts = [encoded[i] for i in idx]
            new_keys = b"".join(keys[i] for i in idx)
            new_vecs = v32[idx]
            name = None
            try:
                meta = self._write(new_vecs, new_texts, gate)
                if meta is None:
                    return np.asarray(rows, dtype=np.int64)
                name = meta.name
            except OSError as e:
                self.log("cannot write to the vector cache %s (%s); %d vectors kept in memory only" % (self.dir, e, len(idx)))
            self._reserve(self._n + len(idx))
            self._buf[self._n : self._n + len(idx)] = new_vecs
            self._adopt(_Texts(b"".join(new_texts), _offsets_of(new_texts)), new_keys, len(idx))
            if name is not None:
                self._seen.add(name)
            rows = [self._find(k, b) for k, b in zip(keys, encoded)]
        return np.asarray(rows, dtype=np.int64)

    def _write(self, vecs: np.ndarray, texts: list[bytes], gate: Callable[[], bool] | None) -> SegmentMeta | None:
        """Write one segment; with `gate`, under the purge's lock and only if the gate is open (None: it was not)."""
        if gate is None:
            return write_segment(self.dir, self.model_id, self.dim, vecs, texts)
        private_dir(self.dir)
        with _Lock(os.path.join(self.dir, ".lock")):
            if not gate():
                return None
            return write_segment(self.dir, self.model_id, self.dim, vecs, texts)

    def compact(self) -> int:
        """Merge every committed segment into one, dropping duplicates; returns segments merged.

        Readers never see a row twice or miss one: the merge is committed before the old
        metas are removed, and then their data; a process that mapped a removed file keeps
        reading it. Also removes uncommitted leftovers older than ORPHAN_AGE_S.
        """
        if not os.path.isdir(self.dir):
            return 0
        with _Lock(os.path.join(self.dir, ".lock")):
            sweep_orphans(self.dir)
            segs: list[_Segment] = []
            for name in committed_segments(self.dir):
                try:
                    m = read_meta(self.dir, name, self.model_id, self.dim)
                    segs.append(_read_segment(self.dir, m, self.model_id, self.dim, None))
                except _Vanished:
                    continue
                except SegmentError as e:
                    self._ignore(name, e)
            if len(segs) < 2:
                return 0
            keep_vecs: list[np.ndarray] = []
            keep_texts: list[bytes] = []
            have: dict[bytes, list[bytes]] = {}
            for s in segs:
                take = []
                for i in range(s.meta.count):
                    key, text = s.keys[32 * i : 32 * i + 32], s.texts.get(i)
                    if key != window_key(self.model_id, text) or text in have.get(key, ()):
                        continue  # unreachable (a forged or damaged key) or a duplicate
                    have.setdefault(key, []).append(text)
                    take.append(i)
                    keep_texts.append(text)
                keep_vecs.append(s.vectors[take])
            if keep_texts:
                write_segment(self.dir, self.model_id, self.dim, np.concatenate(keep_vecs), keep_texts)
            for s in segs:
                _unlink(os.path.join(self.dir, s.meta.name + META))
            fsync_dir(self.dir)
            for s in segs:
                for ext in DATA_EXTS:
                    _unlink(os.path.join(self.dir, s.meta.name + ext))
            fsync_dir(self.dir)
        self.refresh()
        return len(segs)

    # -- internals -------------------------------------------------------------------------

    def _find(self, key: bytes, text: bytes) -> int:
        r = self._first.get(key)
        if r is None:
            return -1
        if self._texts[self._row_seg[r]].same(self._row_idx[r], text):
            return r
        for r in self._more.get(key, ()):
            if self._texts[self._row_seg[r]].same(self._row_idx[r], text):
                return r
        return -1

    def _adopt(self, texts: _Texts, keys: bytes, count: int) -> int:
        """Make rows _n.._n+count (already in _buf) visible, dropping ones already present."""
        s = len(self._texts)
        self._texts.append(texts)
        keep: list[int] = []
        row = self._n
        for i in range(count):
            key = keys[32 * i : 32 * i + 32]
            r = self._first.get(key)
            if r is not None:
                if self._find(key, texts.get(i)) >= 0:
                    continue
                self._more.setdefault(key, []).append(row)
            else:
                self._first[key] = row
            self._row_seg.append(s)
            self._row_idx.append(i)
            keep.append(i)
            row += 1
        if len(keep) < count:
            self._buf[self._n : self._n + len(keep)] = self._buf[self._n : self._n + count][keep]
        if not keep:
            self._texts.pop()
        self._n += len(keep)
        if keep:
            self._view = None
        return len(keep)

    def _reserve(self, rows: int) -> None:
        cap = len(self._buf)
        if rows <= cap:
            return
        new = np.empty((max(rows, cap + cap // 2, 256), self.dim), dtype=np.float32)
        new[: self._n] = self._buf[: self._n]
        self._buf = new  # views handed out earlier keep the old buffer: still correct, never changed

    def _ignore(self, name: str, why: Exception) -> None:
        self._seen.add(name)
        self.log("vector cache %s: segment %s ignored: %s" % (self.dir, name, why))


# -- purging (egg compact --purge) -------------------------------------------------------------


def read_purge_mark(model_dir: str) -> bytes | None:
    try:
        with open(os.path.join(model_dir, PURGED), "rb") as f:
            return f.read(256)
    except OSError:
        return None


def _write_purge_mark(model_dir: str) -> None:
    tmp = os.path.join(model_dir, PURGED + "-tmp-%d" % os.getpid())
    _unlink(tmp)
    _write_file(tmp, b"%d-%d-%s" % (time.time_ns(), os.getpid(), os.urandom(8).hex().encode("ascii")))
    os.replace(tmp, os.path.join(model_dir, PURGED))
    fsync_dir(model_dir)


def _segment_model(model_dir: str, name: str) -> tuple[str, int]:
    """(model id, dim) a segment's meta claims, so a purge can read segments of every model."""
    try:
        with open(os.path.join(model_dir, name + META), "rb") as f:
            m = json.loads(f.read(1 << 16))
    except FileNotFoundError:
        raise _Vanished(name) from None
    except (OSError, ValueError, UnicodeDecodeError) as e:
        raise SegmentError("its meta is unreadable (%s)" % e) from None
    if not isinstance(m, dict) or not isinstance(m.get("model"), str) or type(m.get("dim")) is not int or m["dim"] < 1:
        raise SegmentError("its meta names no model and dimension")
    return m["model"], m["dim"]


def _remove_segment(model_dir: str, name: str) -> None:
    """Meta first (the segment is gone for readers), then its data, as compact does."""
    _unlink(os.path.join(model_dir, name + META))
    fsync_dir(model_dir)
    for ext in DATA_EXTS + (META_TMP,):
        _unlink(os.path.join(model_dir, name + ext))
    fsync_dir(model_dir)


def purge(root: str, drop: Callable[[str], bool], log: Callable[[str], None] | None = None) -> tuple[int, int]:
    """Remove every window `drop(text)` selects, from every model's segments; (windows removed, segments rewritten).

    Each segment holding one is rewritten without it (a new segment, then the old one is
    removed); a segment that cannot be verified is removed whole, since its text cannot be
    checked; uncommitted leftovers older than PURGE_ORPHAN_AGE_S go too. A model directory
    that lost rows gets a new purge mark, so every process holding the cache reloads it.
    """
    log = log or _stderr
    try:
        keys = sorted(os.listdir(root))
    except FileNotFoundError:
        return 0, 0
    removed = rewritten = 0
    for key in keys:
        d = os.path.join(root, key)
        if os.path.islink(d) or not os.path.isdir(d):
            continue
        with _Lock(os.path.join(d, ".lock")):
            changed = sweep_orphans(d, PURGE_ORPHAN_AGE_S) > 0
            for name in committed_segments(d):
                try:
                    model, dim = _segment_model(d, name)
                    seg = _read_segment(d, read_meta(d, name, model, dim), model, dim, None)
                except _Vanished:
                    continue
                except SegmentError as e:
                    log("vector cache %s: segment %s removed: it cannot be verified (%s), so its text cannot be checked" % (d, name, e))
                    _remove_segment(d, name)
                    changed = True
                    rewritten += 1
                    continue
                texts = [seg.texts.get(i) for i in range(seg.meta.count)]
                keep = [i for i, t in enumerate(texts) if not drop(t.decode("utf-8", "surrogatepass"))]
                if len(keep) == len(texts):
                    continue
                if keep:
                    write_segment(d, model, dim, seg.vectors[keep], [texts[i] for i in keep])
                _remove_segment(d, name)
                removed += len(texts) - len(keep)
                rewritten += 1
                changed = True
            if changed:
                _write_purge_mark(d)
    return removed, rewritten


# -- segment files (pure over a directory; no cache state) -------------------------------------


def committed_segments(model_dir: str) -> list[str]:
    """Names of the segments whose meta exists, oldest first."""
    try:
        names = os.listdir(model_dir)
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(n[: -len(META)] for n in names if n.startswith(PREFIX) and n.endswith(META))


def read_meta(model_dir: str, name: str, model_id: str, dim: int) -> SegmentMeta:
    try:
        fd = os.open(os.path.join(model_dir, name + META), os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise _Vanished(name) from None
    except OSError as e:
        raise SegmentError("cannot open its meta: %s" % e.strerror) from None
    with os.fdopen(fd, "rb") as f:
        raw = f.read(1 << 16)
    try:
        m = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise SegmentError("its meta is not JSON") from None
    if not isinstance(m, dict) or m.get("version") != VERSION:
        raise SegmentError("its meta is not version %d" % VERSION)
    if m.get("model") != model_id:
        raise SegmentError("it belongs to model %r, not %r" % (m.get("model"), model_id))
    if m.get("dim") != dim or type(m.get("dim")) is not int:
        raise SegmentError("its vectors have %r dimensions, not %d" % (m.get("dim"), dim))
    count, size, dg = m.get("count"), m.get("text_bytes"), m.get("digest")
    if type(count) is not int or count < 0 or type(size) is not int or size < 0:
        raise SegmentError("its meta has a bad count or text size")
    if not isinstance(dg, str) or len(dg) != 64:
        raise SegmentError("its meta has no digest")
    try:  # checked before anything is allocated for it: a wild count must not exhaust memory
        f32_size = os.stat(os.path.join(model_dir, name + ".f32")).st_size
    except FileNotFoundError:
        raise _missing(model_dir, name, ".f32") from None
    if f32_size != count * dim * 4:
        raise SegmentError(".f32 holds %d bytes, its meta says %d" % (f32_size, count * dim * 4))
    return SegmentMeta(name, model_id, dim, count, size, dg)


def _missing(model_dir: str, name: str, ext: str) -> Exception:
    """A data file is gone: compacted away if the meta is gone too (compaction removes it first), else damage."""
    if os.path.exists(os.path.join(model_dir, name + META)):
        return SegmentError("its %s file is missing" % ext)
    return _Vanished(name)


def _segment_digest(model_id: str, dim: int, count: int, f32, txt, off, key) -> str:
    return digest(SEGMENT_DOMAIN, model_id, str(dim), str(count), f32, txt, off, key).hex()


def _read_segment(model_dir: str, m: SegmentMeta, model_id: str, dim: int, out: np.ndarray | None) -> _Segment:
    """Read and verify one segment; its vectors go into `out` (count x dim) when given."""
    base = os.path.join(model_dir, m.name)
    fds: dict[str, int] = {}
    try:
        for ext in DATA_EXTS:  # open all first: once open, a compaction's unlink cannot hurt
            try:
                fds[ext] = os.open(base + ext, os.O_RDONLY | os.O_NOFOLLOW)
            except FileNotFoundError:
                raise _missing(model_dir, m.name, ext) from None
            except OSError as e:
                raise SegmentError("cannot open %s: %s" % (ext, e.strerror)) from None
        want = {".f32": m.count * dim * 4, ".txt": m.text_bytes, ".off": (m.count + 1) * 8, ".key": m.count * 32}
        for ext, size in want.items():
            have = os.fstat(fds[ext]).st_size
            if have != size:
                raise SegmentError("%s holds %d bytes, its meta says %d" % (ext, have, size))
        vecs = np.empty((m.count, dim), dtype=np.float32) if out is None else out
        raw = memoryview(vecs).cast("B") if m.count else memoryview(b"")
        _read_into(fds[".f32"], raw)
        off = _read_all(fds[".off"], want[".off"])
        key = _read_all(fds[".key"], want[".key"])
        if m.text_bytes >= MMAP_MIN_BYTES:
            txt: bytes | mmap.mmap = mmap.mmap(fds[".txt"], 0, access=mmap.ACCESS_READ)
        else:
            txt = _read_all(fds[".txt"], m.text_bytes)
    except OSError as e:
        raise SegmentError("cannot read it: %s" % e.strerror) from None
    finally:
        for fd in fds.values():
            os.close(fd)
    if _segment_digest(model_id, dim, m.count, raw, txt, off, key) != m.digest:
        raise SegmentError("its files do not match the digest in its meta (torn or damaged)")
    o = np.frombuffer(off, dtype="<i8")
    if o[0] != 0 or o[-1] != m.text_bytes or (np.diff(o) < 0).any():
        raise SegmentError("its text offsets are out of order")
    offsets = array("q", o.tolist())  # plain ints: fast to index one at a time
    if not _LITTLE:
        vecs.byteswap(inplace=True)
    if m.count and not np.isfinite(vecs).all():
        raise SegmentError("it holds NaN or infinite vectors")
    return _Segment(m, vecs, _Texts(txt, offsets), key)


def write_segment(model_dir: str, model_id: str, dim: int, vectors: np.ndarray, texts: list[bytes]) -> SegmentMeta:
    """Write and commit one segment: data files fsynced, then the meta renamed into place."""
    count = len(texts)
    f32 = np.ascontiguousarray(vectors, dtype=_F32).tobytes()
    txt = b"".join(texts)
    off = np.asarray(_offsets_of(texts), dtype="<i8").tobytes()
    key = b"".join(window_key(model_id, t) for t in texts)
    name = "%s%020d-%d-%s" % (PREFIX, time.time_ns(), os.getpid(), os.urandom(4).hex())
    meta = SegmentMeta(name, model_id, dim, count, len(txt), _segment_digest(model_id, dim, count, f32, txt, off, key))
    private_dir(model_dir)
    base = os.path.join(model_dir, name)
    try:
        for ext, data in ((".f32", f32), (".txt", txt), (".off", off), (".key", key)):
            _write_file(base + ext, data)
        body = {"count": count, "digest": meta.digest, "dim": dim, "model": model_id, "text_bytes": len(txt), "version": VERSION}
        _commit_meta(model_dir, name, json.dumps(body, sort_keys=True, separators=(",", ":")).encode("ascii"))
    except BaseException:
        for ext in DATA_EXTS + (META_TMP,):
            _unlink(base + ext)
        raise
    return meta


def _commit_meta(model_dir: str, name: str, data: bytes) -> None:
    base = os.path.join(model_dir, name)
    _write_file(base + META_TMP, data)
    os.rename(base + META_TMP, base + META)
    fsync_dir(model_dir)


def sweep_orphans(model_dir: str, max_age_s: float = ORPHAN_AGE_S, now: float | None = None) -> int:
    """Remove files of segments never committed (or half removed) once old enough; returns files removed."""
    now = time.time() if now is None else now
    try:
        names = os.listdir(model_dir)
    except FileNotFoundError:
        return 0
    committed = {n[: -len(META)] for n in names if n.startswith(PREFIX) and n.endswith(META)}
    removed = 0
    for n in names:
        if not n.startswith(PREFIX):
            continue
        stem, ext = os.path.splitext(n)
        if ext == META or stem in committed and ext in DATA_EXTS:
            continue
        p = os.path.join(model_dir, n)
        try:
            if now - os.lstat(p).st_mtime > max_age_s:
                os.unlink(p)
                removed += 1
        except FileNotFoundError:
            pass
    return removed


def _offsets_of(texts: list[bytes]) -> array:
    out = array("q", [0])
    total = 0
    for t in texts:
        total += len(t)
        out.append(total)
    return out


def _read_into(fd: int, buf: memoryview) -> None:
    f = io.FileIO(fd, closefd=False)
    pos = 0
    while pos < len(buf):
        n = f.readinto(buf[pos:])
        if not n:
            raise SegmentError("a file ended early")
        pos += n


def _read_all(fd: int, size: int) -> bytes:
    data = bytearray(size)
    _read_into(fd, memoryview(data))
    return bytes(data)


def _write_file(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


class _Lock:
    """An exclusive portalocker lock on a file, waiting up to LOCK_TIMEOUT_S."""

    def __init__(self, path: str):
        self.path = path
        self.f = None

    def __enter__(self):
        import portalocker  # imported here: readers never pay for it

        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        self.f = os.fdopen(fd, "r+b")
        deadline = time.monotonic() + LOCK_TIMEOUT_S
        while True:
            try:
                portalocker.lock(self.f, portalocker.LOCK_EX | portalocker.LOCK_NB)
                return self
            except portalocker.LockException:
                if time.monotonic() > deadline:
                    self.f.close()
                    raise TimeoutError("timed out after %.0f s waiting for the lock %s" % (LOCK_TIMEOUT_S, self.path)) from None
                time.sleep(0.005)

    def __exit__(self, *exc):
        import portalocker

        try:
            portalocker.unlock(self.f)
        finally:
            self.f.close()
        return False
