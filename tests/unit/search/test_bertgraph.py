"""The ONNX graph install.sh writes over the fp32 weights (search/bertgraph.py).

Checked against a BERT written out here in numpy from the same safetensors file, so a wrong
wire field, a swapped transpose or a missing mask shows as a different vector; and against
the manifest, so the graph install.sh writes is the one pinned.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import struct

import numpy as np
import pytest

from eggshell.search.bertgraph import GraphError, build, read_header, write
from eggshell.search.installed import default_model_dir

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
MANIFEST = os.path.join(REPO, "lib", "eggshell", "models", "all-MiniLM-L6-v2.sha256")


@pytest.fixture(scope="module")
def model_dir() -> str:
    d = default_model_dir()
    assert os.path.isfile(os.path.join(d, "model.safetensors")), "the offline default model is not installed (./install.sh)"
    return d


def _tensors(path: str) -> dict[str, np.ndarray]:
    with open(path, "rb") as f:
        blob = f.read()
    table, start = read_header(blob[:1 << 20])
    out = {}
    for name, t in table.items():
        a, b = t["data_offsets"]
        dtype = {"F32": np.float32, "I64": np.int64}[t["dtype"]]
        out[name] = np.frombuffer(blob, dtype=dtype, count=(b - a) // np.dtype(dtype).itemsize, offset=start + a).reshape(t["shape"])
    return out


def _reference(w: dict[str, np.ndarray], ids: np.ndarray, mask: np.ndarray, heads: int = 12, eps: float = 1e-12) -> np.ndarray:
    """BertModel's last_hidden_state, computed in float64 the textbook way."""
    from math import erf

    def ln(x, p):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + eps) * w[p + ".weight"] + w[p + ".bias"]

    def lin(x, p):
        return x @ w[p + ".weight"].astype(np.float64).T + w[p + ".bias"]

    n, s = ids.shape
    x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:s] + w["embeddings.token_type_embeddings.weight"][0]
    x = ln(x.astype(np.float64), "embeddings.LayerNorm")
    hidden = x.shape[-1]
    d = hidden // heads
    bias = (1.0 - mask[:, None, None, :]) * -1e30
    verf = np.vectorize(erf)
    for i in range(6):
        p = "encoder.layer.%d." % i
        split = lambda t: t.reshape(n, s, heads, d).transpose(0, 2, 1, 3)  # noqa: E731
        q, k, v = (split(lin(x, p + "attention.self." + m)) for m in ("query", "key", "value"))
        a = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d) + bias
        a = np.exp(a - a.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        ctx = (a @ v).transpose(0, 2, 1, 3).reshape(n, s, hidden)
        x = ln(lin(ctx, p + "attention.output.dense") + x, p + "attention.output.LayerNorm")
        h = lin(x, p + "intermediate.dense")
        h = h * 0.5 * (1.0 + verf(h / math.sqrt(2.0)))
        x = ln(lin(h, p + "output.dense") + x, p + "output.LayerNorm")
    return x


def test_the_graph_computes_bert_as_written_out(model_dir, tmp_path):
    """The embedding the product makes from the graph equals the written-out BERT, mean-pooled."""
    from tokenizers import Tokenizer

    from eggshell.search.embed import Encoder

    texts = ["the late fee is rounded half up in billing.py", "def parse_config(path):\n    return toml.load(path)",
             "a longer line: " + "rounding rules for invoices and refunds, " * 12]
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tok.enable_padding()
    enc = tok.encode_batch(texts)
    ids = np.array([e.ids for e in enc])
    mask = np.array([e.attention_mask for e in enc], dtype=np.float64)
    h = _reference(_tensors(os.path.join(model_dir, "model.safetensors")), ids, mask)
    want = (h * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
    want /= np.linalg.norm(want, axis=1, keepdims=True)
    got = Encoder(model_dir=model_dir, threads=1).embed(texts)
    assert got.shape == want.shape == (3, 384)
    assert float(np.abs(got - want).max()) < 1e-4
    assert (got * want).sum(1).min() > 0.99999
    # and it is not a constant: the three texts are three different vectors
    assert float((got[0] * got[1]).sum()) < 0.9


def test_install_writes_the_pinned_graph(model_dir, tmp_path):
    """The same weights and config always give the bytes the manifest pins (install.sh checks them)."""
    for f in ("model.safetensors", "config.json"):
        os.symlink(os.path.join(model_dir, f), tmp_path / f)
    path = write(str(tmp_path))
    pinned = dict(reversed(line.split()) for line in open(MANIFEST) if line.strip())
    assert hashlib.sha256(open(path, "rb").read()).hexdigest() == pinned["model.onnx"]
    assert os.path.getsize(path) < 100_000  # structure only: the weights stay in model.safetensors
    assert not os.path.exists(path + ".tmp")


def _tiny(tmp_path, tensors: dict, config: dict | None = None) -> str:
    header = json.dumps(tensors).encode()
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header)
    (tmp_path / "config.json").write_text(json.dumps(config or {"hidden_size": 4, "num_attention_heads": 2, "num_hidden_layers": 1,
                                                                 "intermediate_size": 8}))
    return str(tmp_path)


def test_weights_that_are_not_a_bert_encoder_are_refused_by_name(model_dir, tmp_path):
    with pytest.raises(GraphError, match="no tensor embeddings.position_embeddings.weight"):
        write(_tiny(tmp_path, {}))
    table, start = read_header(open(os.path.join(model_dir, "model.safetensors"), "rb").read(1 << 20))
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    bad = dict(table, **{"encoder.layer.3.output.dense.weight": dict(table["encoder.layer.3.output.dense.weight"], shape=[384, 384])})
    with pytest.raises(GraphError, match="encoder.layer.3.output.dense.weight is F32 \\[384, 384\\], expected F32 \\[384, 1536\\]"):
        build(bad, start, cfg)
    with pytest.raises(GraphError, match="exact GELU"):
        build(table, start, dict(cfg, hidden_act="relu"))
    with pytest.raises(GraphError, match="hidden_size"):
        build(table, start, dict(cfg, num_attention_heads=5))
    with pytest.raises(GraphError, match="shorter than its 8-byte header length"):
        read_header(b"abc")
    with pytest.raises(GraphError, match="not JSON"):
        read_header(struct.pack("<Q", 3) + b"{{{")


def test_a_cut_short_weights_file_is_named(model_dir, tmp_path):
    src = os.path.join(model_dir, "model.safetensors")
    with open(src, "rb") as f, open(tmp_path / "model.safetensors", "wb") as out:
        out.write(f.read(5_000_000))
    shutil.copy(os.path.join(model_dir, "config.json"), tmp_path / "config.json")
    with pytest.raises(GraphError, match="model.safetensors is cut short"):
        write(str(tmp_path))
    assert not (tmp_path / "model.onnx").exists()
    with pytest.raises(GraphError, match="cannot read .*config.json"):
        os.unlink(tmp_path / "config.json")
        write(str(tmp_path))


def test_a_dir_left_by_the_int8_install_is_not_taken_for_the_model(tmp_path, monkeypatch):
    """model.onnx alone is the install of before 4 Dec 2026: SessionStart and doctor say what is missing,
    and the encoder refuses it instead of keying int8 vectors as the fp32 model's."""
    from eggshell import config
    from eggshell.search import installed
    from eggshell.search.embed import Encoder, ModelError

    d = tmp_path / "share" / "eggshell" / "models" / "all-MiniLM-L6-v2"
    d.mkdir(parents=True)
    (d / "model.onnx").write_bytes(b"int8")
    monkeypatch.setattr(installed, "default_model_dir", lambda prefix=None: str(d))
    assert installed.missing_file(str(d)) == "model.safetensors"
    m = installed.in_force(config.Config(mode="hybrid"))
    assert m.problem == ('the built-in model all-MiniLM-L6-v2 is not installed at %s (no model.safetensors): run ./install.sh, '
                         'or set mode = "lexical"' % d)
    with pytest.raises(ModelError, match=r"not installed at .* \(no model.safetensors\); run ./install.sh"):
        Encoder(model_dir=str(d)).load()
    (d / "model.safetensors").write_bytes(b"")
    assert installed.missing_file(str(d)) is None
