"""The suite's models, rebuilt with onnx.helper and seeded random weights.

Every runtime in a run loads the same bytes, so the comparison is about execution, never about
weights or export quirks. BatchNorm is folded into the convolutions, as exporters do for
inference graphs, except in dbnet_like, which keeps its BatchNormalization nodes as real
detector exports carry them. When torch and torchvision are importable, resnet18 and mobilenet_v2 can come
from torchvision instead (`torchvision_model`); the builders here are the fallback and the default
on machines without them. BERT-base, GPT-2 small and ViT-B/16 exist only as PyTorch modules with
seeded random weights, exported to ONNX (`torch_transformer`; needs torch).
"""
from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Callable

import ml_dtypes
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
_NP_TO_ONNX = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float16): TensorProto.FLOAT16,
               np.dtype(ml_dtypes.bfloat16): TensorProto.BFLOAT16}


@dataclass
class BenchModel:
    """An ONNX model plus one feed for it; `flops` when it is meaningful (MatMul, MLP)."""

    name: str
    proto: onnx.ModelProto
    feed: dict[str, np.ndarray]
    flops: float | None = None
    source: str = "onnx.helper"
    meta: dict = field(default_factory=dict)

    def bytes(self) -> bytes:
        """Serialized once: every runtime loads the same bytes (an MLP's are 512 MB)."""
        if "_bytes" not in self.meta:
            self.meta["_bytes"] = self.proto.SerializeToString()
        return self.meta["_bytes"]


class _Graph:
    """A tiny graph writer: unique value names, initializers from arrays."""

    def __init__(self, seed: int = 0, dtype=np.float32):
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.rng = np.random.default_rng(seed)
        self.dtype = np.dtype(dtype)
        self._n = 0

    def name(self, stem: str) -> str:
        self._n += 1
        return f"{stem}_{self._n}"

    def const(self, stem: str, value: np.ndarray) -> str:
        n = self.name(stem)
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(value), n))
        return n

    def op(self, op_type: str, inputs: list[str], stem: str | None = None, out: str | None = None,
           **attrs) -> str:
        """One node; its output is `out` when given (a graph output's name), else a fresh name."""
        out = out or self.name(stem or op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def conv(self, x: str, cin: int, cout: int, k: int, stride: int = 1, pad: int | None = None,
             group: int = 1, bias: bool = True) -> str:
        pad = k // 2 if pad is None else pad
        fan_in = cin // group * k * k
        w = (self.rng.standard_normal((cout, cin // group, k, k)) * np.sqrt(2.0 / fan_in)).astype(self.dtype)
        ins = [x, self.const("w", w)]
        if bias:
            ins.append(self.const("b", (self.rng.standard_normal(cout) * 0.01).astype(self.dtype)))
        return self.op("Conv", ins, "conv", kernel_shape=[k, k], strides=[stride, stride],
                       pads=[pad] * 4, group=group)

    def relu6(self, x: str) -> str:
        lo = self.const("lo", np.array(0, self.dtype))
        hi = self.const("hi", np.array(6, self.dtype))
        return self.op("Clip", [x, lo, hi], "relu6")

    def bn(self, x: str, c: int, eps: float = 1e-5) -> str:
        """BatchNormalization (inference form) with random statistics near the identity."""
        r = self.rng
        scale = (1.0 + r.standard_normal(c) * 0.1).astype(self.dtype)
        bias = (r.standard_normal(c) * 0.1).astype(self.dtype)
        mean = (r.standard_normal(c) * 0.1).astype(self.dtype)
        var = (1.0 + np.abs(r.standard_normal(c)) * 0.1).astype(self.dtype)
        return self.op("BatchNormalization", [x, self.const("bn_scale", scale), self.const("bn_b", bias),
                                              self.const("bn_mean", mean), self.const("bn_var", var)],
                       "bn", epsilon=eps)

    def conv_transpose(self, x: str, cin: int, cout: int, k: int, stride: int, bias: bool = True) -> str:
        w = (self.rng.standard_normal((cin, cout, k, k)) * np.sqrt(2.0 / (cin * k * k / stride ** 2))
             ).astype(self.dtype)
        ins = [x, self.const("wt", w)]
        if bias:
            ins.append(self.const("b", (self.rng.standard_normal(cout) * 0.01).astype(self.dtype)))
        return self.op("ConvTranspose", ins, "deconv", kernel_shape=[k, k], strides=[stride, stride])

    def gemm(self, x: str, cin: int, cout: int) -> str:
        w = (self.rng.standard_normal((cout, cin)) / np.sqrt(cin)).astype(self.dtype)
        b = (self.rng.standard_normal(cout) * 0.01).astype(self.dtype)
        return self.op("Gemm", [x, self.const("fc_w", w), self.const("fc_b", b)], "fc", transB=1)

    def model(self, name: str, inputs: list[tuple], output: str, out_shape) -> onnx.ModelProto:
        """`inputs`: (name, shape) of the graph's dtype, or (name, shape, onnx element type)."""
        et = _NP_TO_ONNX[self.dtype]
        g = helper.make_graph(self.nodes, name,
                              [helper.make_tensor_value_info(i[0], i[2] if len(i) > 2 else et, list(i[1]))
                               for i in inputs],
                              [helper.make_tensor_value_info(output, et, out_shape)], self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="vkml-bench")
        m.ir_version = 8
        onnx.checker.check_model(m)
        return m


def symbolic_batch(bm: BenchModel, symbol: str = "N") -> BenchModel:
    """The same model with its inputs' and output's leading dimension named `symbol`: what
    dynamic batching needs (the builders' graphs take any batch there; mnist reshapes to -1)."""
    m = onnx.ModelProto()
    m.CopyFrom(bm.proto)
    for v in list(m.graph.input) + list(m.graph.output):
        d = v.type.tensor_type.shape.dim[0]
        d.Clear()
        d.dim_param = symbol
    onnx.checker.check_model(m)
    return BenchModel(bm.name, m, bm.feed, bm.flops, bm.source, {k: v for k, v in bm.meta.items() if k != "_bytes"})


def chain_add(n: int) -> BenchModel:
    """n Adds in a chain on a [1] float32 value with a [1] zero initializer: pure per-op overhead."""
    g = _Graph()
    zero = g.const("zero", np.zeros(1, np.float32))
    x = "x"
    for _ in range(n):
        x = g.op("Add", [x, zero], "add")
    m = g.model(f"chain_add_{n}", [("x", (1,))], x, [1])
    return BenchModel(f"chain_add_{n}", m, {"x": np.ones(1, np.float32)}, meta={"n": n})


def mnist(batch: int = 1) -> BenchModel:
    """The mnist-12 architecture (two 5x5 convs, pools, one MatMul), random weights."""
    g = _Graph(seed=12)
    r = g.rng
    x = g.op("Conv", ["Input3", g.const("w", (r.standard_normal((8, 1, 5, 5)) * 0.2).astype(np.float32))],
             "conv", kernel_shape=[5, 5], strides=[1, 1], pads=[2, 2, 2, 2])
    x = g.op("Relu", [g.op("Add", [x, g.const("b", (r.standard_normal((8, 1, 1)) * 0.1).astype(np.float32))])])
    x = g.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = g.op("Conv", [x, g.const("w", (r.standard_normal((16, 8, 5, 5)) * 0.07).astype(np.float32))],
             "conv", kernel_shape=[5, 5], strides=[1, 1], pads=[2, 2, 2, 2])
    x = g.op("Relu", [g.op("Add", [x, g.const("b", (r.standard_normal((16, 1, 1)) * 0.1).astype(np.float32))])])
    x = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[3, 3])
    x = g.op("Reshape", [x, g.const("shape", np.array([-1, 256], np.int64))])
    x = g.op("MatMul", [x, g.const("w", (r.standard_normal((256, 10)) * 0.06).astype(np.float32))])
    x = g.op("Add", [x, g.const("b", (r.standard_normal((1, 10)) * 0.1).astype(np.float32))], "Plus214_Output_0")
    m = g.model("mnist", [("Input3", (batch, 1, 28, 28))], x, [batch, 10])
    feed = {"Input3": np.random.default_rng(1).random((batch, 1, 28, 28), dtype=np.float32)}
    return BenchModel("mnist", m, feed, meta={"batch": batch})


def conv_cnn(batch: int = 1, size: int = 128) -> BenchModel:
    """Conv-heavy: a VGG-style stack of 3x3 convolutions (64..512 channels), 4 pools."""
    g = _Graph(seed=3)
    x, c = "x", 3
    for cout in (64, 128, 256, 512):
        for _ in range(2):
            x = g.op("Relu", [g.conv(x, c, cout, 3)])
            c = cout
        x = g.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = g.op("Flatten", [g.op("GlobalAveragePool", [x])])
    x = g.gemm(x, c, 10)
    m = g.model("conv_cnn", [("x", (batch, 3, size, size))], x, [batch, 10])
    feed = {"x": np.random.default_rng(1).standard_normal((batch, 3, size, size), dtype=np.float32)}
    flops = 0.0
    s, c = size, 3
    for cout in (64, 128, 256, 512):
        for _ in range(2):
            flops += 2.0 * batch * s * s * cout * c * 9
            c = cout
        s //= 2
    return BenchModel("conv_cnn", m, feed, flops=flops, meta={"batch": batch, "size": size})


def mlp(batch: int = 64, width: int = 4096, layers: int = 8, dtype=np.float32, linear: bool = False) -> BenchModel:
    """`layers` x (MatMul + Add + Relu) at `width`: GEMM throughput with little else. `linear`:
    Gemm(transB=1) with the bias instead, as torch exports nn.Linear (weights stored out x in)."""
    g = _Graph(seed=8, dtype=dtype)
    x = "x"
    for k in range(layers):
        w = (g.rng.standard_normal((width, width), dtype=np.float32) * np.sqrt(2.0 / width)).astype(dtype)
        if linear:
            x = g.op("Gemm", [x, g.const("w", np.ascontiguousarray(w.T)), g.const("b", np.zeros(width, dtype))],
                     transB=1)
        else:
            x = g.op("MatMul", [x, g.const("w", w)])
            x = g.op("Add", [x, g.const("b", np.zeros(width, dtype))])
        if k < layers - 1:
            x = g.op("Relu", [x])
    m = g.model("mlp", [("x", (batch, width))], x, [batch, width])
    feed = {"x": np.random.default_rng(1).standard_normal((batch, width), dtype=np.float32).astype(dtype)}
    return BenchModel(f"mlp_{'linear_' if linear else ''}{np.dtype(dtype).name}", m, feed,
                      flops=2.0 * batch * width * width * layers,
                      meta={"batch": batch, "width": width, "layers": layers, "dtype": np.dtype(dtype).name,
                            "linear": linear})


def matmul(n: int = 4096, dtype=np.float32) -> BenchModel:
    """One square MatMul of two graph inputs (no weights): TFLOPS = 2n³ / time."""
    g = _Graph(dtype=dtype)
    y = g.op("MatMul", ["a", "b"])
    m = g.model("matmul", [("a", (n, n)), ("b", (n, n))], y, [n, n])
    rng = np.random.default_rng(2)
    feed = {k: rng.standard_normal((n, n), dtype=np.float32).astype(dtype) for k in ("a", "b")}
    return BenchModel(f"matmul_{np.dtype(dtype).name}", m, feed, flops=2.0 * n ** 3,
                      meta={"n": n, "dtype": np.dtype(dtype).name})


def resnet18(batch: int = 1, size: int = 224) -> BenchModel:
    """torchvision's resnet18 structure (BasicBlocks [2,2,2,2]), BN folded, random weights."""
    g = _Graph(seed=18)
    x = g.op("Relu", [g.conv("x", 3, 64, 7, stride=2, pad=3)])
    x = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c = 64
    for stage, cout in enumerate((64, 128, 256, 512)):
        for block in range(2):
            stride = 2 if stage > 0 and block == 0 else 1
            y = g.op("Relu", [g.conv(x, c, cout, 3, stride=stride)])
            y = g.conv(y, cout, cout, 3)
            short = g.conv(x, c, cout, 1, stride=stride, pad=0) if (stride != 1 or c != cout) else x
            x = g.op("Relu", [g.op("Add", [y, short])])
            c = cout
    x = g.op("Flatten", [g.op("GlobalAveragePool", [x])])
    x = g.gemm(x, 512, 1000)
    m = g.model("resnet18", [("x", (batch, 3, size, size))], x, [batch, 1000])
    feed = {"x": np.random.default_rng(1).standard_normal((batch, 3, size, size), dtype=np.float32)}
    return BenchModel("resnet18", m, feed, meta={"batch": batch, "size": size})


_MBV2 = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))


def mobilenet_v2(batch: int = 1, size: int = 224) -> BenchModel:
    """torchvision's mobilenet_v2 structure (inverted residuals, ReLU6 as Clip), BN folded."""
    g = _Graph(seed=2)
    x = g.relu6(g.conv("x", 3, 32, 3, stride=2))
    c = 32
    for t, cout, n, s in _MBV2:
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = c * t
            y = x if t == 1 else g.relu6(g.conv(x, c, hidden, 1, pad=0))
            y = g.relu6(g.conv(y, hidden, hidden, 3, stride=stride, group=hidden))
            y = g.conv(y, hidden, cout, 1, pad=0)
            x = g.op("Add", [x, y]) if stride == 1 and c == cout else y
            c = cout
    x = g.relu6(g.conv(x, c, 1280, 1, pad=0))
    x = g.op("Flatten", [g.op("GlobalAveragePool", [x])])
    x = g.gemm(x, 1280, 1000)
    m = g.model("mobilenet_v2", [("x", (batch, 3, size, size))], x, [batch, 1000])
    feed = {"x": np.random.default_rng(1).standard_normal((batch, 3, size, size), dtype=np.float32)}
    return BenchModel("mobilenet_v2", m, feed, meta={"batch": batch, "size": size})


def dbnet_like(batch: int = 1, size: int = 640) -> BenchModel:
    """A DBNet-style text detector, BN kept as real exports have it: a strided Conv+BN+Relu
    backbone (stem, then stages of 16/32/64/128 channels at 1/4..1/32), an FPN neck (1x1 lateral
    convs, nearest Resize x2 and Add top-down, 3x3 smoothing convs, every level resized to 1/4 and
    concatenated), and the probability head: Conv3x3+BN+Relu, ConvTranspose(2,2)+BN+Relu,
    ConvTranspose(2,2) to one channel, HardSigmoid. Output "y" is (batch, 1, size, size)."""
    if size % 32 or size <= 0:
        raise ValueError(f"dbnet_like: size must be a positive multiple of 32, got {size}")
    g = _Graph(seed=7)
    flops = [0.0]

    def conv(x, cin, cout, k, hw_out, stride=1, bias=False):
        flops[0] += 2.0 * batch * hw_out * hw_out * cout * cin * k * k
        return g.conv(x, cin, cout, k, stride=stride, bias=bias)

    def cbr(x, cin, cout, k, hw_out, stride=1):
        return g.op("Relu", [g.bn(conv(x, cin, cout, k, hw_out, stride), cout)])

    def up(x, factor):  # torch.onnx's F.interpolate(mode="nearest"): Resize(X, "", scales)
        scales = g.const("scales", np.array([1, 1, factor, factor], np.float32))
        return g.op("Resize", [x, "", scales], "resize", mode="nearest",
                    coordinate_transformation_mode="asymmetric", nearest_mode="floor")

    hw = size // 2
    x = cbr("x", 3, 16, 3, hw, stride=2)  # stem, 1/2
    feats, c = [], 16
    for cout in (16, 32, 64, 128):  # 1/4, 1/8, 1/16, 1/32
        hw //= 2
        x = cbr(x, c, cout, 3, hw, stride=2)
        x = cbr(x, cout, cout, 3, hw)
        feats.append((x, cout, hw))
        c = cout
    inner, outc = 64, 16
    lat = [(conv(f, fc, inner, 1, fhw), fhw) for f, fc, fhw in feats]
    td = [lat[3][0]]
    for i in (2, 1, 0):  # top-down: in_i + up(out_{i+1})
        td.insert(0, g.op("Add", [lat[i][0], up(td[0], 2)]))
    levels = []
    for i, (t, (_, fhw)) in enumerate(zip(td, lat)):
        p = conv(t, inner, outc, 3, fhw)
        levels.append(up(p, 2 ** i) if i else p)
    x = g.op("Concat", levels, "fuse", axis=1)  # 4*16 = 64 channels at 1/4
    q = size // 4
    x = cbr(x, 4 * outc, outc, 3, q)
    x = g.conv_transpose(x, outc, outc, 2, 2, bias=False)
    flops[0] += 2.0 * batch * (2 * q) ** 2 * outc * outc
    x = g.op("Relu", [g.bn(x, outc)])
    x = g.conv_transpose(x, outc, 1, 2, 2)
    flops[0] += 2.0 * batch * size * size * outc
    g.op("HardSigmoid", [x], out="y", alpha=0.2, beta=0.5)  # the probability map
    m = g.model("dbnet_like", [("x", (batch, 3, size, size))], "y", [batch, 1, size, size])
    feed = {"x": np.random.default_rng(1).standard_normal((batch, 3, size, size), dtype=np.float32)}
    return BenchModel("dbnet_like", m, feed, flops=flops[0], meta={"batch": batch, "size": size})


def bert_like(batch: int = 1, seq: int = 128, hidden: int = 768, layers: int = 12, heads: int = 12,
              vocab: int = 30522) -> BenchModel:
    """A BERT-base-like encoder as exporters emit it, nothing fused: Gather word embeddings + a
    sliced position table, LayerNormalization, then per layer MatMul+Add Q/K/V, Reshape/Transpose
    to heads, Q·Kᵀ / sqrt(d) + mask, Softmax, ·V, back to (batch, seq, hidden), the output
    projection, residual + LayerNorm, the FFN with Gelu spelled with Erf, residual + LayerNorm.
    Input "input_ids" int64 (batch, seq); output "y" float32 (batch, seq, hidden)."""
    if hidden % heads:
        raise ValueError(f"bert_like: hidden ({hidden}) must be a multiple of heads ({heads})")
    d, ffn = hidden // heads, 4 * hidden
    g = _Graph(seed=11)
    r = g.rng

    def normal(*shape):
        return (r.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float32)

    def linear(x, cin, cout):
        return g.op("Add", [g.op("MatMul", [x, g.const("w", normal(cin, cout))]),
                            g.const("b", normal(cout))])

    def layer_norm(x, out=None):
        scale = (1.0 + r.standard_normal(hidden, dtype=np.float32) * 0.02).astype(np.float32)
        return g.op("LayerNormalization", [x, g.const("ln_scale", scale), g.const("ln_b", normal(hidden))],
                    "ln", out=out, axis=-1, epsilon=1e-12)

    heads_shape = g.const("shape_heads", np.array([batch, seq, heads, d], np.int64))
    flat_shape = g.const("shape_flat", np.array([batch, seq, hidden], np.int64))
    sqrt_d = g.const("sqrt_d", np.array(np.sqrt(d), np.float32))
    mask = g.const("mask", np.zeros((batch, 1, 1, seq), np.float32))
    sqrt2 = g.const("sqrt2", np.array(np.sqrt(2.0), np.float32))
    one = g.const("one", np.array(1.0, np.float32))
    half = g.const("half", np.array(0.5, np.float32))

    x = g.op("Gather", [g.const("word_emb", normal(vocab, hidden)), "input_ids"], "word", axis=0)
    pos_table = g.const("pos_emb", normal(max(512, seq), hidden))
    pos = g.op("Slice", [pos_table, g.const("starts", np.array([0], np.int64)),
                         g.const("ends", np.array([seq], np.int64)), g.const("axes", np.array([0], np.int64))],
               "pos")
    x = layer_norm(g.op("Add", [x, pos], "embed"), out="y" if layers == 0 else None)
    def split(t, perm):  # (b, s, hidden) -> (b, s, h, d) -> perm
        return g.op("Transpose", [g.op("Reshape", [t, heads_shape])], perm=perm)

    for i in range(layers):
        q = split(linear(x, hidden, hidden), [0, 2, 1, 3])  # (b, h, s, d)
        k = split(linear(x, hidden, hidden), [0, 2, 3, 1])  # (b, h, d, s)
        v = split(linear(x, hidden, hidden), [0, 2, 1, 3])
        att = g.op("Add", [g.op("Div", [g.op("MatMul", [q, k], "scores"), sqrt_d]), mask])
        ctx = g.op("MatMul", [g.op("Softmax", [att], axis=-1), v], "context")
        ctx = g.op("Reshape", [g.op("Transpose", [ctx], perm=[0, 2, 1, 3]), flat_shape])
        x = layer_norm(g.op("Add", [linear(ctx, hidden, hidden), x], "residual"))
        h = linear(x, hidden, ffn)
        erf = g.op("Erf", [g.op("Div", [h, sqrt2])])
        h = g.op("Mul", [g.op("Mul", [h, g.op("Add", [erf, one])]), half], "gelu")
        x = layer_norm(g.op("Add", [linear(h, ffn, hidden), x], "residual"),
                       out="y" if i == layers - 1 else None)
    m = g.model("bert_like", [("input_ids", (batch, seq), TensorProto.INT64)], "y", [batch, seq, hidden])
    feed = {"input_ids": np.random.default_rng(1).integers(0, vocab, (batch, seq), dtype=np.int64)}
    tokens = batch * seq
    flops = layers * (2.0 * tokens * hidden * hidden * 4 + 2.0 * tokens * hidden * ffn * 2
                      + 2.0 * 2 * batch * heads * seq * seq * d)
    return BenchModel("bert_like", m, feed, flops=flops,
                      meta={"batch": batch, "seq": seq, "hidden": hidden, "layers": layers, "heads": heads,
                            "vocab": vocab})


def torchvision_model(name: str, batch: int, size: int = 224):
    """(BenchModel exported from torchvision with weights=None, the torch module) or None when
    torch/torchvision are missing or the export fails (the reason is in the returned tuple)."""
    try:
        import torch
        import torchvision
    except Exception as e:  # missing, or broken CUDA libraries
        return None, f"torchvision not importable: {type(e).__name__}: {e}"
    try:
        net = getattr(torchvision.models, name)(weights=None).eval()
        x = torch.randn(batch, 3, size, size, generator=torch.Generator().manual_seed(1))
        buf = io.BytesIO()
        with torch.no_grad():
            torch.onnx.export(net, (x,), buf, input_names=["x"], output_names=["y"], opset_version=OPSET,
                              dynamo=False)
        proto = onnx.load_from_string(buf.getvalue())
    except Exception as e:
        return None, f"torchvision export failed: {type(e).__name__}: {e}"
    bm = BenchModel(name, proto, {"x": x.numpy()}, source=f"torchvision {torchvision.__version__}",
                    meta={"batch": batch, "size": size})
    bm.meta["torch_module"] = net
    return bm, None


# ------------------------------------------------------------------------ torch transformers
# name: (layers, hidden, heads, ffn, vocab, max positions). The text models are written here with
# torch.nn (HF's classes are not a dependency); ViT-B/16 is torchvision's.
TRANSFORMERS = {
    "bert_base": (12, 768, 12, 3072, 30522, 512),
    "gpt2_small": (12, 768, 12, 3072, 50257, 1024),
    "vit_b_16": (12, 768, 12, 3072, 0, 0),
}


def _transformer_flops(batch: int, tokens: int, layers: int, hidden: int, ffn: int) -> float:
    """2 x (weights of the layers' GEMMs) x tokens, plus Q·Kᵀ and ·V (the masked half counted too:
    it is computed)."""
    gemm = 2.0 * batch * tokens * (4 * hidden * hidden + 2 * hidden * ffn)
    attention = 2.0 * 2 * batch * tokens * tokens * hidden
    return layers * (gemm + attention)


def _torch_text_model(name: str, seq: int):
    """BERT-base or GPT-2 small as plain torch.nn modules, weights drawn from torch's global RNG
    (the caller seeds it). The classes are made here because torch is optional."""
    import math

    import torch
    from torch import nn

    layers, hidden, heads, ffn, vocab, max_pos = TRANSFORMERS[name]

    class Attention(nn.Module):
        """Q·Kᵀ/√d, softmax, ·V spelled out, as exports of HF's models show it (no
        nn.MultiheadAttention: its eval fast path has no ONNX export)."""

        def __init__(self, fused: bool, causal: bool):
            super().__init__()
            self.d = hidden // heads
            if fused:  # GPT-2's c_attn: one projection, split in three
                self.qkv = nn.Linear(hidden, 3 * hidden)
            else:  # BERT's query, key, value
                self.q, self.k, self.v = (nn.Linear(hidden, hidden) for _ in range(3))
            self.out = nn.Linear(hidden, hidden)
            self.fused = fused
            # True above the diagonal: the future a GPT-2 token may not see
            self.register_buffer("future", torch.ones(seq, seq, dtype=torch.bool).triu(1) if causal else None,
                                 persistent=False)

        def forward(self, x):
            b, s, _ = x.shape
            if self.fused:
                q, k, v = self.qkv(x).split(hidden, dim=-1)
            else:
                q, k, v = self.q(x), self.k(x), self.v(x)
            q, k, v = (t.reshape(b, s, heads, self.d).transpose(1, 2) for t in (q, k, v))
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.d)
            if self.future is not None:
                scores = scores.masked_fill(self.future, torch.finfo(scores.dtype).min)
            ctx = torch.matmul(torch.softmax(scores, dim=-1), v)
            return self.out(ctx.transpose(1, 2).reshape(b, s, hidden))

    class Block(nn.Module):
        """BERT's post-LayerNorm encoder layer (erf GELU) or GPT-2's pre-LayerNorm block (tanh GELU)."""

        def __init__(self, gpt2: bool):
            super().__init__()
            eps = 1e-5 if gpt2 else 1e-12
            self.gpt2 = gpt2
            self.attn = Attention(fused=gpt2, causal=gpt2)
            self.ln1, self.ln2 = nn.LayerNorm(hidden, eps=eps), nn.LayerNorm(hidden, eps=eps)
            self.mlp = nn.Sequential(nn.Linear(hidden, ffn), nn.GELU(approximate="tanh" if gpt2 else "none"),
                                     nn.Linear(ffn, hidden))

        def forward(self, x):
            if self.gpt2:
                x = x + self.attn(self.ln1(x))
                return x + self.mlp(self.ln2(x))
            x = self.ln1(x + self.attn(x))
            return self.ln2(x + self.mlp(x))

    class TextModel(nn.Module):
        """Token + position embeddings, the blocks; BERT: embedding LayerNorm first, output the last
        hidden state; GPT-2: final LayerNorm, then the tied LM head on the last position only."""

        def __init__(self, gpt2: bool):
            super().__init__()
            self.gpt2 = gpt2
            self.tok, self.pos = nn.Embedding(vocab, hidden), nn.Embedding(max_pos, hidden)
            self.ln = nn.LayerNorm(hidden, eps=1e-5 if gpt2 else 1e-12)
            self.blocks = nn.ModuleList(Block(gpt2) for _ in range(layers))

        def forward(self, input_ids):
            x = self.tok(input_ids) + self.pos.weight[: input_ids.shape[1]]
            if not self.gpt2:
                x = self.ln(x)
            for block in self.blocks:
                x = block(x)
            if not self.gpt2:
                return x
            return nn.functional.linear(self.ln(x)[:, -1:], self.tok.weight)  # (batch, 1, vocab)

    net = TextModel(gpt2=name == "gpt2_small")
    for m in net.modules():  # HF's initialization: N(0, 0.02), zero biases (LayerNorm stays 1, 0)
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear):
            nn.init.zeros_(m.bias)
    return net


def _onnx_export(torch, net, args: tuple, input_names: list[str]) -> onnx.ModelProto:
    """The TorchScript exporter, grad enabled and the MHA fast path off: under no_grad an eval
    nn.MultiheadAttention (ViT's) takes torch._native_multi_head_attention, which has no ONNX form."""
    import inspect
    import warnings

    kw = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    mha = getattr(torch.backends, "mha", None)
    fast = mha.get_fastpath_enabled() if hasattr(mha, "get_fastpath_enabled") else None
    buf = io.BytesIO()
    try:
        if fast is not None:
            mha.set_fastpath_enabled(False)
        with torch.enable_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # TracerWarnings on shapes, the exporter's deprecation notice
            torch.onnx.export(net, args, buf, input_names=input_names, output_names=["y"],
                              opset_version=OPSET, **kw)
    finally:
        if fast is not None:
            mha.set_fastpath_enabled(fast)
    return onnx.load_from_string(buf.getvalue())


def torch_transformer(name: str, batch: int = 1, seq: int = 128, size: int = 224):
    """(BenchModel exported from a real PyTorch architecture with seeded random weights, None) or
    (None, reason) when torch is missing or the export fails. name: bert_base, gpt2_small (`seq`
    tokens) or vit_b_16 (a `size`² image, torchvision's). meta["torch_module"] is the module in eval
    mode, which the torch peers run instead of the ONNX graph."""
    if name not in TRANSFORMERS:
        raise ValueError(f"torch_transformer: unknown {name!r}; one of {sorted(TRANSFORMERS)}")
    layers, hidden, heads, ffn, vocab, max_pos = TRANSFORMERS[name]
    if vocab and not 0 < seq <= max_pos:
        raise ValueError(f"torch_transformer: {name} takes 1..{max_pos} tokens, got seq={seq}")
    for lib in ("torch", "torchvision") if name == "vit_b_16" else ("torch",):
        try:
            __import__(lib)
        except Exception as e:  # missing, or broken CUDA libraries
            return None, f"{lib} not importable: {type(e).__name__}: {e}"
    import torch
    rng = np.random.default_rng(1)
    meta = {"batch": batch, "layers": layers, "hidden": hidden, "heads": heads, "ffn": ffn}
    try:
        torch.manual_seed(0)
        if name == "vit_b_16":
            import torchvision

            net = torchvision.models.vit_b_16(weights=None, image_size=size).eval()
            torch.nn.init.normal_(net.heads.head.weight, std=0.02)  # torchvision zeroes it: all-zero logits
            feed = {"x": rng.standard_normal((batch, 3, size, size), dtype=np.float32)}
            tokens = (size // 16) ** 2 + 1  # the patches and the class token
            flops = (_transformer_flops(batch, tokens, layers, hidden, ffn)
                     + 2.0 * batch * (tokens - 1) * hidden * 3 * 16 * 16 + 2.0 * batch * hidden * 1000)
            source = f"torchvision {torchvision.__version__} vit_b_16(weights=None), torch.manual_seed(0)"
            meta.update(size=size, seq=tokens, output="logits (batch, 1000)")
        else:
            net = _torch_text_model(name, seq).eval()
            feed = {"input_ids": rng.integers(0, vocab, (batch, seq), dtype=np.int64)}
            flops = _transformer_flops(batch, seq, layers, hidden, ffn)
            if name == "gpt2_small":
                flops += 2.0 * batch * hidden * vocab
                meta["output"] = "logits of the last position (batch, 1, vocab): final LayerNorm, tied LM head"
            else:
                meta["output"] = "last hidden state (batch, seq, hidden); no attention mask input"
            source = f"torch {torch.__version__} nn modules (vkml.benchmarks.models), torch.manual_seed(0)"
            meta.update(seq=seq, vocab=vocab)
        args = tuple(torch.from_numpy(v) for v in feed.values())
        proto = _onnx_export(torch, net, args, list(feed))
    except Exception as e:
        return None, f"{name} export failed: {type(e).__name__}: {e}"
    meta["params"] = sum(p.numel() for p in net.parameters())
    bm = BenchModel(name, proto, feed, flops=flops, source=source, meta=meta)
    bm.meta["torch_module"] = net
    return bm, None


BUILDERS: dict[str, Callable[..., BenchModel]] = {
    "chain_add": chain_add, "mnist": mnist, "conv_cnn": conv_cnn, "mlp": mlp, "matmul": matmul,
    "resnet18": resnet18, "mobilenet_v2": mobilenet_v2, "dbnet_like": dbnet_like, "bert_like": bert_like,
}
