"""The model zoo suite (issue #15): small, architecture-faithful rebuilds of real models with
onnx.helper and seeded NumPy weights, each in the graph shape its exporter writes.

Every builder returns (model bytes, feeds, (rtol, atol)); `ZOO` registers it with its opset,
the exporter quirk it reproduces, and the nodes expected to stay on the CPU in a GPU session
(node name -> why). Widths and sizes are tiny so each model runs in well under a second on
two CPU cores and on lavapipe.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

# The IR version each opset first needs (onnxruntime refuses IRs newer than it knows).
_IR = {9: 4, 10: 5, 11: 6, 12: 7, 13: 7, 14: 7, 15: 8, 16: 8, 17: 8, 18: 8, 19: 9, 20: 9, 21: 10, 22: 10, 23: 11}


class G:
    """A graph writer: named nodes, seeded initializers, a checked model at the end."""

    def __init__(self, opset: int, seed: int, prefix: str = ""):
        self.opset, self.prefix = opset, prefix
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: dict[str, np.ndarray] = {}
        self._count: dict[str, int] = {}

    def _fresh(self, stem: str) -> str:
        self._count[stem] = self._count.get(stem, 0) + 1
        return f"{self.prefix}{stem}_{self._count[stem] - 1}"

    def const(self, value, stem: str = "c", dtype=np.float32) -> str:
        name = self._fresh(stem)
        self.inits[name] = np.asarray(value, dtype=dtype)
        return name

    def w(self, *shape, scale: float | None = None, stem: str = "w") -> str:
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        scale = 1.0 / np.sqrt(fan_in) if scale is None else scale
        return self.const(self.rng.standard_normal(shape) * scale, stem)

    def gamma(self, n: int, stem: str = "gamma") -> str:
        return self.const(1 + 0.1 * self.rng.standard_normal(n), stem)

    def op(self, op_type: str, inputs: list[str], name: str | None = None, outs: int | list[str] = 1,
           domain: str = "", **attrs):
        """One node named `name` (else `<OpType>_<k>`, TorchScript-style); returns its output
        name, or a list when `outs` asks for several."""
        name = name or self._fresh(op_type)
        names = outs if isinstance(outs, list) else [f"{name}_out{i}" if outs > 1 else f"{name}_out"
                                                      for i in range(outs)]
        self.nodes.append(h.make_node(op_type, inputs, names, name=name, domain=domain or None, **attrs))
        return names[0] if len(names) == 1 else names

    def model(self, inputs, outputs, name: str, graph_name: str | None = None) -> bytes:
        g = h.make_graph(self.nodes, graph_name or name, inputs, outputs,
                         [nh.from_array(v, k) for k, v in self.inits.items()])
        m = h.make_model(g, opset_imports=[h.make_opsetid("", self.opset)], ir_version=_IR[self.opset],
                         producer_name=name)
        onnx.checker.check_model(m, full_check=True)
        return m.SerializeToString()

    # -- shared pieces ----------------------------------------------------------------------
    def linear(self, x: str, din: int, dout: int, bias: bool = True) -> str:
        y = self.op("MatMul", [x, self.w(din, dout, scale=1 / np.sqrt(din))])
        return self.op("Add", [y, self.w(dout, scale=0.1, stem="b")]) if bias else y

    def layer_norm(self, x: str, d: int) -> str:
        return self.op("LayerNormalization", [x, self.gamma(d), self.w(d, scale=0.1, stem="beta")],
                       axis=-1, epsilon=1e-5)

    def ln_spelled(self, t: str, d: int) -> str:
        """LayerNorm as the TorchScript exporter writes it before opset 17 (and dynamo for
        some modules): ReduceMean, Sub, Pow, ReduceMean, Add eps, Sqrt, Div, Mul, Add; from
        opset 18 ReduceMean takes its axes as an input."""
        if self.opset >= 18:
            axes = self.const([-1], "axes", np.int64)
            mean = lambda v: self.op("ReduceMean", [v, axes])  # noqa: E731
        else:
            mean = lambda v: self.op("ReduceMean", [v], axes=[-1])  # noqa: E731
        dt = self.op("Sub", [t, mean(t)])
        var = mean(self.op("Pow", [dt, self.const(2.0)]))
        n = self.op("Div", [dt, self.op("Sqrt", [self.op("Add", [var, self.const(1e-5, "eps")])])])
        return self.op("Add", [self.op("Mul", [n, self.gamma(d)]), self.w(d, scale=0.1, stem="beta")])

    def gelu_erf(self, x: str) -> str:
        """x * 0.5 * (1 + erf(x / sqrt 2)), as torch.onnx writes nn.GELU before opset 20."""
        e = self.op("Erf", [self.op("Div", [x, self.const(np.sqrt(2.0))])])
        return self.op("Mul", [self.op("Mul", [x, self.op("Add", [e, self.const(1.0)])]), self.const(0.5)])

    def mha(self, x: str, d: int, heads: int, seq, mask: str | None = None, bias: str | None = None,
            scale: bool = True) -> str:
        """Multi-head self-attention on x[B,S,d]; `mask`/`bias` are added to the scores."""
        dh = d // heads
        split = self.const([0, -1, heads, dh], "split", np.int64)
        qkv = []
        for p, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])):
            t = self.op("Reshape", [self.linear(x, d, d), split])
            qkv.append(self.op("Transpose", [t], perm=perm))
        s = self.op("MatMul", qkv[:2])
        if scale:
            s = self.op("Div", [s, self.const(np.sqrt(dh))])
        if bias is not None:
            s = self.op("Add", [s, bias])
        if mask is not None:
            s = self.op("Add", [s, mask])
        p = self.op("Softmax", [s], axis=-1 if self.opset >= 13 else 3)
        c = self.op("Transpose", [self.op("MatMul", [p, qkv[2]])], perm=[0, 2, 1, 3])
        c = self.op("Reshape", [c, self.const([0, -1, d], "merge", np.int64)])
        return self.linear(c, d, d)

    def conv(self, x: str, cin: int, cout: int, k: int, stride: int = 1, group: int = 1, bias: bool = True,
             pad: int | None = None, **attrs) -> str:
        pad = k // 2 if pad is None else pad
        ins = [x, self.w(cout, cin // group, k, k, scale=np.sqrt(2.0 / (cin // group * k * k)))]
        if bias:
            ins.append(self.w(cout, scale=0.05, stem="b"))
        return self.op("Conv", ins, kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4,
                       group=group, **attrs)

    def bn(self, x: str, c: int, **attrs) -> str:
        r = self.rng
        return self.op("BatchNormalization", [x, self.gamma(c), self.w(c, scale=0.1, stem="beta"),
                                              self.const(0.1 * r.standard_normal(c), "mean"),
                                              self.const(1 + 0.2 * np.abs(r.standard_normal(c)), "var")],
                       epsilon=1e-5, **attrs)


def _vi(name, dims, dtype=T.FLOAT):
    return h.make_tensor_value_info(name, dtype, dims)


def _vi_raw(name, dims, dtype=T.FLOAT):
    """A value info whose dims are written as given: ints as dim_value (even -1), strs as dim_param."""
    vi = h.make_tensor_value_info(name, dtype, None)
    shape = vi.type.tensor_type.shape
    for d in dims:
        dim = shape.dim.add()
        if isinstance(d, str):
            dim.dim_param = d
        else:
            dim.dim_value = d
    return vi


# ---------------------------------------------------------------------------------------------
# Vision
# ---------------------------------------------------------------------------------------------

def vit_tiny():
    """ViT (timm/HF-shaped) at opset 21: 4x4 patch Conv, flatten + Transpose to tokens, a class
    token Concat'ed in front (Expand to the batch), position embedding, two pre-norm encoder
    layers (LayerNormalization, attention, Erf GELU MLP), final LayerNorm, class token Gather,
    head Gemm."""
    g = G(21, seed=11)
    d, heads, size, patch = 32, 4, 16, 4
    n = (size // patch) ** 2
    x = g.conv("pixel_values", 3, d, patch, stride=patch, pad=0)
    t = g.op("Transpose", [g.op("Reshape", [x, g.const([0, d, -1], "s", np.int64)])], perm=[0, 2, 1])
    shape = g.op("Shape", ["pixel_values"], start=0, end=1)
    cls = g.op("Expand", [g.w(1, 1, d, scale=0.02, stem="cls_token"),
                          g.op("Concat", [shape, g.const([1, d], "s", np.int64)], axis=0)])
    t = g.op("Add", [g.op("Concat", [cls, t], axis=1), g.w(1, n + 1, d, scale=0.02, stem="pos_embed")])
    for _ in range(2):
        t = g.op("Add", [t, g.mha(g.layer_norm(t, d), d, heads, n + 1)])
        m = g.linear(g.gelu_erf(g.linear(g.layer_norm(t, d), d, 2 * d)), 2 * d, d)
        t = g.op("Add", [t, m])
    t = g.layer_norm(t, d)
    c = g.op("Gather", [t, g.const(0, "idx", np.int64)], axis=1)
    g.op("Gemm", [c, g.w(10, d, stem="head_w"), g.w(10, scale=0.1, stem="head_b")], name="head",
         outs=["logits"], transB=1)
    rng = np.random.default_rng(1)
    feeds = {"pixel_values": rng.standard_normal((2, 3, size, size)).astype(np.float32)}
    return g.model([_vi("pixel_values", ["batch", 3, size, size])], [_vi("logits", ["batch", 10])],
                   "vit_tiny"), feeds, (1e-4, 1e-4)


def unet_seg():
    """UNet-like segmentation at opset 13: two down stages (Conv/BN/Relu, MaxPool), a bottleneck,
    up stages by ConvTranspose (stride 2) and by Resize (nearest, then linear with
    half_pixel), Concat skips, a 1x1 Conv head, Resize linear back to the input size, Softmax
    over classes."""
    g = G(13, seed=12)
    empty = g.const([], "roi")
    scale2 = g.const([1, 1, 2, 2], "scales")

    def block(x, cin, cout):
        return g.op("Relu", [g.bn(g.conv(x, cin, cout, 3, bias=False), cout)])

    e1 = block("image", 3, 8)                                            # 24
    e2 = block(g.op("MaxPool", [e1], kernel_shape=[2, 2], strides=[2, 2]), 8, 12)   # 12
    b = block(g.op("MaxPool", [e2], kernel_shape=[2, 2], strides=[2, 2]), 12, 16)   # 6
    up2 = g.op("Resize", [b, empty, scale2], mode="nearest", coordinate_transformation_mode="asymmetric",
               nearest_mode="floor")                                      # 12, nearest
    d2 = block(g.op("Concat", [up2, e2], axis=1), 28, 12)
    up1 = g.op("ConvTranspose", [d2, g.w(12, 8, 2, 2, scale=0.3), g.w(8, scale=0.05, stem="b")],
               kernel_shape=[2, 2], strides=[2, 2])                       # 24
    d1 = block(g.op("Concat", [up1, e1], axis=1), 16, 8)
    head = g.conv(d1, 8, 3, 1)
    half = g.op("Resize", [head, empty, g.const([1, 1, 0.5, 0.5], "scales")], mode="linear",
                coordinate_transformation_mode="half_pixel")              # 12, linear down
    full = g.op("Resize", [half, empty, g.const([], "scales"), g.const([1, 3, 24, 24], "sizes", np.int64)],
                mode="linear", coordinate_transformation_mode="half_pixel")
    g.op("Softmax", [full], outs=["mask"], axis=1)
    feeds = {"image": np.random.default_rng(2).standard_normal((1, 3, 24, 24)).astype(np.float32)}
    return g.model([_vi("image", [1, 3, 24, 24])], [_vi("mask", [1, 3, 24, 24])], "unet_seg"), feeds, (1e-4, 1e-5)


def yolo_head():
    """A YOLO-like detector at opset 11 with its post-processing in the graph: a strided Conv
    backbone, a 1x1 head (4 box + 1 obj + 3 class per cell), Reshape/Transpose to [B, cells, 8],
    Sigmoid, grid-offset box decoding (Slice, Add, Mul), xywh -> corners, scores = obj * cls,
    ReduceMax, TopK of the best candidates, then NonMaxSuppression and Gather of the kept boxes."""
    g = G(11, seed=13)
    x = g.op("LeakyRelu", [g.conv("images", 3, 8, 3, stride=2)], alpha=0.1)
    x = g.op("LeakyRelu", [g.conv(x, 8, 16, 3, stride=2)], alpha=0.1)        # 8x8 grid
    p = g.conv(x, 16, 8, 1)
    p = g.op("Transpose", [g.op("Reshape", [p, g.const([1, 8, 64], "s", np.int64)])], perm=[0, 2, 1])
    p = g.op("Sigmoid", [p])
    ii, jj = np.meshgrid(np.arange(8), np.arange(8), indexing="ij")
    grid = np.stack([jj, ii], -1).reshape(1, 64, 2).astype(np.float32)

    def sl(t, a, b):
        return g.op("Slice", [t, g.const([a], "st", np.int64), g.const([b], "en", np.int64),
                              g.const([2], "ax", np.int64)])

    xy = g.op("Mul", [g.op("Add", [g.op("Sub", [g.op("Mul", [sl(p, 0, 2), g.const(2.0)]), g.const(0.5)]),
                                   g.const(grid, "grid")]), g.const(4.0, "stride")])
    wh = g.op("Mul", [g.op("Pow", [g.op("Mul", [sl(p, 2, 4), g.const(2.0)]), g.const(2.0)]),
                      g.const([[[6.0, 8.0]]], "anchor")])
    half = g.op("Mul", [wh, g.const(0.5)])
    boxes = g.op("Concat", [g.op("Sub", [xy, half]), g.op("Add", [xy, half])], axis=2)   # [1,64,4] xyxy
    scores = g.op("Mul", [sl(p, 5, 8), sl(p, 4, 5)])                                       # [1,64,3]
    best = g.op("ReduceMax", [scores], axes=[2], keepdims=0)                               # [1,64]
    _, idx = g.op("TopK", [best, g.const([32], "k", np.int64)], outs=2, axis=1)            # [1,32]
    idx0 = g.op("Squeeze", [idx], axes=[0])
    cand = g.op("Gather", [boxes, idx0], axis=1)                                           # [1,32,4]
    cs = g.op("Transpose", [g.op("Gather", [scores, idx0], axis=1)], perm=[0, 2, 1])       # [1,3,32]
    sel = g.op("NonMaxSuppression", [cand, cs, g.const([10], "max_out", np.int64), g.const([0.5], "iou"),
                                     g.const([0.2], "score_thr")], name="nms", outs=["selected"])
    keep = g.op("Gather", [sel, g.const(2, "col", np.int64)], axis=1)
    g.op("Gather", [g.op("Squeeze", [cand], axes=[0]), keep], axis=0, name="kept", outs=["det_boxes"])
    feeds = {"images": np.random.default_rng(3).standard_normal((1, 3, 32, 32)).astype(np.float32)}
    return g.model([_vi("images", [1, 3, 32, 32])],
                   [_vi("selected", [None, 3], T.INT64), _vi("det_boxes", [None, 4])], "yolo_head"), \
        feeds, (1e-4, 1e-4)


def paddle_cls():
    """A Paddle2ONNX PP-LCNet-style classifier (also the shape of PaddleOCR's text-direction
    classifier) at opset 11, batch declared as `dim_value: -1` (Paddle2ONNX's quirk, issue #15):
    Conv/BatchNormalization, hard_swish spelled HardSigmoid * x (no HardSwish before opset 14),
    a depthwise Conv, an SE block (GlobalAveragePool, Conv, Relu, Conv, HardSigmoid, Mul),
    Flatten, MatMul + Add, Softmax."""
    g = G(11, seed=14)

    def hswish(t):
        return g.op("Mul", [t, g.op("HardSigmoid", [t], alpha=1 / 6, beta=0.5)])

    x = hswish(g.bn(g.conv("x", 3, 8, 3, stride=2, bias=False), 8))
    x = hswish(g.bn(g.conv(x, 8, 8, 3, group=8, bias=False), 8))                  # depthwise
    se = g.op("GlobalAveragePool", [x])
    se = g.op("HardSigmoid", [g.conv(g.op("Relu", [g.conv(se, 8, 4, 1)]), 4, 8, 1)], alpha=0.2, beta=0.5)
    x = g.op("Mul", [x, se])
    x = hswish(g.bn(g.conv(x, 8, 16, 1, bias=False), 16))
    x = g.op("Flatten", [g.op("GlobalAveragePool", [x])], axis=1)
    y = g.op("Add", [g.op("MatMul", [x, g.w(16, 4)]), g.w(4, scale=0.1, stem="b")])
    g.op("Softmax", [y], axis=1, name="softmax", outs=["save_infer_model/scale_0.tmp_1"])
    feeds = {"x": np.random.default_rng(4).standard_normal((2, 3, 16, 32)).astype(np.float32)}
    return g.model([_vi_raw("x", [-1, 3, 16, 32])], [_vi_raw("save_infer_model/scale_0.tmp_1", [-1, 4])],
                   "paddle_cls", "Model from PaddlePaddle."), feeds, (1e-4, 1e-5)


def tf2onnx_cnn():
    """A tf2onnx-converted Keras MobileNet-ish CNN at opset 13: an NHWC input, Transpose to NCHW
    around every Conv (tf2onnx leaves pairs its optimizer cannot cancel), ReLU6 as Clip with
    min/max inputs, a depthwise Conv, Keras GlobalAveragePooling as ReduceMean over H,W in NHWC,
    Squeeze with an axes input (opset 13), Identity nodes, MatMul + Add, Softmax; node names
    are TF scopes."""
    g = G(13, seed=15)
    lo, hi = g.const(0.0, "clip_lo"), g.const(6.0, "clip_hi")
    nchw = g.op("Transpose", ["input_1:0"], name="StatefulPartitionedCall/model/conv1/Conv2D__6", perm=[0, 3, 1, 2])
    x = g.op("Clip", [g.conv(nchw, 3, 8, 3, stride=2), lo, hi], name="StatefulPartitionedCall/model/conv1_relu/Relu6")
    x = g.op("Transpose", [x], name="StatefulPartitionedCall/model/conv1/Conv2D__9", perm=[0, 2, 3, 1])
    x = g.op("Identity", [x], name="StatefulPartitionedCall/model/Identity_1")
    x = g.op("Transpose", [x], name="StatefulPartitionedCall/model/dw/depthwise__12", perm=[0, 3, 1, 2])
    x = g.op("Clip", [g.conv(x, 8, 8, 3, group=8), lo, hi], name="StatefulPartitionedCall/model/dw_relu/Relu6")
    x = g.op("Clip", [g.conv(x, 8, 16, 1), lo, hi], name="StatefulPartitionedCall/model/pw_relu/Relu6")
    x = g.op("Transpose", [x], name="StatefulPartitionedCall/model/pw/Conv2D__15", perm=[0, 2, 3, 1])
    x = g.op("ReduceMean", [x], name="StatefulPartitionedCall/model/gap/Mean", axes=[1, 2], keepdims=1)
    x = g.op("Squeeze", [x, g.const([1, 2], "sq_axes", np.int64)], name="StatefulPartitionedCall/model/gap/Squeeze")
    x = g.op("Add", [g.op("MatMul", [x, g.w(16, 5)], name="StatefulPartitionedCall/model/dense/MatMul"),
                     g.w(5, scale=0.1, stem="b")], name="StatefulPartitionedCall/model/dense/BiasAdd")
    g.op("Softmax", [x], axis=-1, name="StatefulPartitionedCall/model/dense/Softmax", outs=["dense"])
    feeds = {"input_1:0": np.random.default_rng(5).standard_normal((3, 20, 20, 3)).astype(np.float32)}
    return g.model([_vi("input_1:0", ["unk__18", 20, 20, 3])], [_vi("dense", ["unk__19", 5])],
                   "tf2onnx_cnn", "tf2onnx"), feeds, (1e-4, 1e-5)


def opset9_cnn():
    """An old zoo-style CNN at opset 9 (as Caffe2/CNTK-era converters wrote them): a bias built in
    the graph from ConstantOfShape + Add, BatchNormalization, Upsample (opset 9's scales input),
    MaxPool, AveragePool, Flatten, Gemm."""
    g = G(9, seed=16)
    bias = g.op("Add", [g.op("ConstantOfShape", [g.const([8], "shape", np.int64)],
                             value=h.make_tensor("v", T.FLOAT, [1], [0.05])), g.w(8, scale=0.05)])
    x = g.op("Conv", ["data", g.w(8, 3, 3, 3, scale=0.3), bias], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    x = g.op("Relu", [g.bn(x, 8)])
    x = g.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])                       # 8
    x = g.op("Upsample", [x, g.const([1, 1, 2, 2], "scales")], mode="nearest")          # 16
    x = g.op("Relu", [g.conv(x, 8, 8, 3)])
    x = g.op("AveragePool", [x], kernel_shape=[4, 4], strides=[4, 4])                    # 4
    x = g.op("Flatten", [x], axis=1)
    g.op("Gemm", [x, g.w(128, 10), g.w(10, scale=0.1)], outs=["prob"])
    feeds = {"data": np.random.default_rng(6).standard_normal((1, 3, 16, 16)).astype(np.float32)}
    return g.model([_vi("data", [1, 3, 16, 16])], [_vi("prob", [1, 10])], "opset9_cnn"), feeds, (1e-4, 1e-5)


def dbnet_det():
    """A PaddleOCR DBNet-style text detector at opset 10: a small FPN (strided Convs), top-down
    merge by Resize (opset 10: scales only, nearest) and Add, Concat of the levels upsampled,
    the probability head Conv/BN/Relu, two ConvTranspose x2 and a Sigmoid."""
    g = G(10, seed=17)

    def cbr(x, cin, cout, stride=1):
        return g.op("Relu", [g.bn(g.conv(x, cin, cout, 3, stride=stride, bias=False), cout)])

    c1 = cbr(cbr("x", 3, 8, 2), 8, 8, 2)   # 1/4: 8
    c2 = cbr(c1, 8, 12, 2)                 # 4
    c3 = cbr(c2, 12, 16, 2)                # 2
    l3 = g.conv(c3, 16, 8, 1)
    l2 = g.op("Add", [g.conv(c2, 12, 8, 1), g.op("Resize", [l3, g.const([1, 1, 2, 2], "sc")], mode="nearest")])
    l1 = g.op("Add", [g.conv(c1, 8, 8, 1), g.op("Resize", [l2, g.const([1, 1, 2, 2], "sc")], mode="nearest")])
    p3 = g.op("Resize", [g.conv(l3, 8, 4, 3), g.const([1, 1, 4, 4], "sc")], mode="nearest")
    p2 = g.op("Resize", [g.conv(l2, 8, 4, 3), g.const([1, 1, 2, 2], "sc")], mode="nearest")
    f = g.op("Concat", [g.conv(l1, 8, 4, 3), p2, p3], axis=1)     # [1,12,8,8]
    y = cbr(f, 12, 4)
    y = g.op("Relu", [g.bn(g.op("ConvTranspose", [y, g.w(4, 4, 2, 2, scale=0.3), g.w(4, scale=0.05)],
                                kernel_shape=[2, 2], strides=[2, 2]), 4)])
    y = g.op("ConvTranspose", [y, g.w(4, 1, 2, 2, scale=0.3), g.w(1, scale=0.05)], kernel_shape=[2, 2], strides=[2, 2])
    g.op("Sigmoid", [y], outs=["maps"])
    feeds = {"x": np.random.default_rng(7).standard_normal((1, 3, 32, 32)).astype(np.float32)}
    return g.model([_vi_raw("x", [-1, 3, 32, 32])], [_vi_raw("maps", [-1, 1, 32, 32])], "dbnet_det"), feeds, (1e-4, 1e-5)


# ---------------------------------------------------------------------------------------------
# OCR and speech
# ---------------------------------------------------------------------------------------------

def _lstm_weights(g: G, din: int, hid: int, dirs: int):
    s = 1 / np.sqrt(hid)
    return [g.w(dirs, 4 * hid, din, scale=s, stem="W"), g.w(dirs, 4 * hid, hid, scale=s, stem="R"),
            g.w(dirs, 8 * hid, scale=s, stem="B")]


def crnn_rec():
    """A CRNN text recognizer (PaddleOCR/EasyOCR-shaped) at opset 12: Conv/BN/Relu/MaxPool down
    to height 1, Squeeze H, Transpose to [T, B, C], a bidirectional LSTM, the two directions
    merged by Transpose/Reshape, MatMul + Add to the charset, Softmax and ArgMax (CTC greedy)."""
    g = G(12, seed=18)
    hid, ncls = 12, 11
    x = g.op("Relu", [g.bn(g.conv("x", 1, 8, 3, bias=False), 8)])
    x = g.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])                    # 4 x 16
    x = g.op("Relu", [g.bn(g.conv(x, 8, 16, 3, bias=False), 16)])
    x = g.op("MaxPool", [x], kernel_shape=[8, 1], strides=[8, 1])                    # 1 x 16
    x = g.op("Transpose", [g.op("Squeeze", [x], axes=[2])], perm=[2, 0, 1])         # [T=16, B, 16]
    y, _, _ = g.op("LSTM", [x, *_lstm_weights(g, 16, hid, 2)], outs=3, hidden_size=hid, direction="bidirectional")
    y = g.op("Reshape", [g.op("Transpose", [y], perm=[0, 2, 1, 3]), g.const([0, 0, -1], "s", np.int64)])
    y = g.op("Add", [g.op("MatMul", [y, g.w(2 * hid, ncls)]), g.w(ncls, scale=0.1, stem="b")])
    p = g.op("Softmax", [g.op("Transpose", [y], perm=[1, 0, 2])], axis=2, outs=["probs"], name="softmax")
    g.op("ArgMax", [p], axis=2, keepdims=0, outs=["labels"], name="argmax")
    feeds = {"x": np.random.default_rng(8).standard_normal((2, 1, 16, 32)).astype(np.float32)}
    return g.model([_vi("x", ["batch", 1, 16, 32])],
                   [_vi("probs", ["batch", 16, ncls]), _vi("labels", ["batch", 16], T.INT64)], "crnn_rec"), \
        feeds, (1e-4, 1e-5)


def silero_vad():
    """A Silero-VAD-style model at opset 16: inputs audio [B, N], sr (int64 scalar) and the LSTM
    state [2, B, H]; an If on sr == 16000 picks one of two front-ends (different strided Conv1d
    feature extractors, both ending in [B, C, T]); then Conv1d/Relu, Transpose to [T, B, C],
    an LSTM fed the state (Split into h and c), a Conv1d decoder, Sigmoid, ReduceMean over time;
    outputs the speech probability and the new state."""
    g = G(16, seed=19)
    hid, c = 8, 8

    def frontend(k, stride, seed):
        sub = G(16, seed, prefix=f"b{seed}/")
        a = sub.op("Unsqueeze", ["audio", g.const([1], "ax", np.int64)])
        w = sub.w(c, 1, k, scale=0.3)
        a = sub.op("Conv", [a, w], kernel_shape=[k], strides=[stride], pads=[k // 2, k // 2])
        a = sub.op("Abs", [a])
        out = sub.op("Relu", [sub.op("Conv", [a, sub.w(c, c, 3, scale=0.3)], kernel_shape=[3], pads=[1, 1])])
        # subgraph initializers become Constants: If branches carry their weights that way
        nodes = [h.make_node("Constant", [], [k2], value=nh.from_array(v, k2), name=f"{k2}_const")
                 for k2, v in sub.inits.items()] + sub.nodes
        return h.make_graph(nodes, f"branch_{seed}", [], [_vi(out, ["B", c, "T"])])

    is16k = g.op("Equal", ["sr", g.const(16000, "sr16k", np.int64)])
    feat = g.op("If", [is16k], name="If_sr", then_branch=frontend(8, 4, 100), else_branch=frontend(4, 2, 101))
    feat = g.op("Relu", [g.op("Conv", [feat, g.w(c, c, 3, scale=0.3), g.w(c, scale=0.05)], kernel_shape=[3],
                              pads=[1, 1])])
    seq = g.op("Transpose", [feat], perm=[2, 0, 1])
    h0, c0 = g.op("Split", ["state", g.const([1, 1], "split", np.int64)], outs=2, axis=0)
    y, hn, cn = g.op("LSTM", [seq, *_lstm_weights(g, c, hid, 1), "", h0, c0], outs=3, hidden_size=hid)
    g.op("Concat", [hn, cn], axis=0, outs=["stateN"], name="state_out")
    y = g.op("Transpose", [g.op("Squeeze", [y, g.const([1], "ax", np.int64)])], perm=[1, 2, 0])   # [B, H, T]
    y = g.op("Sigmoid", [g.op("Conv", [g.op("Relu", [y]), g.w(1, hid, 1, scale=0.5), g.w(1, scale=0.05)],
                              kernel_shape=[1])])
    g.op("ReduceMean", [y], axes=[1, 2], keepdims=0, outs=["output"], name="prob")
    rng = np.random.default_rng(9)
    feeds = {"audio": rng.standard_normal((2, 128)).astype(np.float32), "sr": np.array(16000, np.int64),
             "state": (0.1 * rng.standard_normal((2, 2, hid))).astype(np.float32)}
    return g.model([_vi("audio", ["B", "N"]), _vi("sr", [], T.INT64), _vi("state", [2, "B", hid])],
                   [_vi("output", ["B"]), _vi("stateN", [2, "B", hid])], "silero_vad"), feeds, (1e-4, 1e-5)


def silero_vad_8k():
    """The same VAD fed sr = 8000: the If's else branch."""
    blob, feeds, tol = silero_vad()
    return blob, dict(feeds, sr=np.array(8000, np.int64)), tol


def whisper_encoder():
    """A Whisper-like audio encoder at opset 20: log-mel [B, 16, 40] through Conv1d k3 + Gelu and
    Conv1d k3 stride 2 + Gelu (the Gelu op of opset 20), Transpose to [B, T, d], sinusoidal
    position embedding Add, one pre-norm transformer layer (unscaled-q style: q scaled before
    the product), final LayerNormalization."""
    g = G(20, seed=20)
    d, heads, t = 24, 3, 20

    def conv1d(x, cin, cout, stride):
        return g.op("Gelu", [g.op("Conv", [x, g.w(cout, cin, 3, scale=1 / np.sqrt(3 * cin)), g.w(cout, scale=0.05)],
                                  kernel_shape=[3], strides=[stride], pads=[1, 1])])

    x = conv1d(conv1d("input_features", 16, d, 1), d, d, 2)
    x = g.op("Transpose", [x], perm=[0, 2, 1])
    pos = np.arange(t)[:, None] / 10000 ** (np.arange(d // 2)[None] / (d // 2 - 1))
    x = g.op("Add", [x, g.const(np.concatenate([np.sin(pos), np.cos(pos)], 1), "embed_positions")])
    x = g.op("Add", [x, g.mha(g.layer_norm(x, d), d, heads, t)])
    m = g.linear(g.op("Gelu", [g.linear(g.layer_norm(x, d), d, 4 * d)]), 4 * d, d)
    x = g.op("Add", [x, m])
    g.op("LayerNormalization", [x, g.gamma(d), g.w(d, scale=0.1)], axis=-1, epsilon=1e-5, name="ln_post",
         outs=["last_hidden_state"])
    feeds = {"input_features": np.random.default_rng(10).standard_normal((1, 16, 40)).astype(np.float32)}
    return g.model([_vi("input_features", ["batch", 16, 40])], [_vi("last_hidden_state", ["batch", t, d])],
                   "whisper_encoder"), feeds, (1e-4, 1e-4)


# ---------------------------------------------------------------------------------------------
# NLP
# ---------------------------------------------------------------------------------------------

VOCAB = 50


def gpt2_like():
    """A GPT-2-like decoder as the torch dynamo exporter writes it (opset 18): symbolic batch
    and sequence dims; token and position embeddings by Gather, positions from Shape -> Range;
    the causal mask built in the graph with Trilu on a ConstantOfShape of [S, S] and Where;
    LayerNorm spelled out (ReduceMean with an axes *input*, Sub, Pow, Add eps, Sqrt, Div);
    fused QKV projection Split with num_outputs (opset 18); tanh-GELU (Pow, Tanh); tied
    embedding head (MatMul by the transposed wte)."""
    g = G(18, seed=21)
    d, heads = 32, 4
    dh = d // heads
    wte = g.w(VOCAB, d, scale=0.1, stem="wte")
    shape = g.op("Shape", ["input_ids"])
    seq = g.op("Gather", [shape, g.const(1, "one", np.int64)], axis=0)
    pos = g.op("Range", [g.const(0, "zero", np.int64), seq, g.const(1, "one", np.int64)])
    x = g.op("Add", [g.op("Gather", [wte, "input_ids"], axis=0),
                     g.op("Gather", [g.w(16, d, scale=0.1, stem="wpe"), pos], axis=0)])
    ss = g.op("Concat", [g.op("Unsqueeze", [seq, g.const([0], "ax", np.int64)])] * 2, axis=0)
    ones = g.op("ConstantOfShape", [ss], value=h.make_tensor("v", T.BOOL, [1], [True]))
    causal = g.op("Trilu", [ones], upper=0)
    mask = g.op("Where", [causal, g.const(0.0), g.const(-1e4, "neg")])               # [S, S]

    def ln(t):
        return g.ln_spelled(t, d)

    for _ in range(2):
        qkv = g.linear(ln(x), d, 3 * d)
        parts = []
        for i, p in enumerate(g.op("Split", [qkv], outs=3, axis=-1, num_outputs=3)):
            t = g.op("Reshape", [p, g.const([0, 0, heads, dh], "s", np.int64)])
            parts.append(g.op("Transpose", [t], perm=[0, 2, 3, 1] if i == 1 else [0, 2, 1, 3]))
        s = g.op("Mul", [g.op("MatMul", parts[:2]), g.const(1 / np.sqrt(dh))])
        p = g.op("Softmax", [g.op("Add", [s, mask])], axis=-1)
        c = g.op("Reshape", [g.op("Transpose", [g.op("MatMul", [p, parts[2]])], perm=[0, 2, 1, 3]),
                             g.const([0, 0, d], "s", np.int64)])
        x = g.op("Add", [x, g.linear(c, d, d)])
        m = g.linear(ln(x), d, 4 * d)
        inner = g.op("Mul", [g.op("Add", [m, g.op("Mul", [g.op("Pow", [m, g.const(3.0)]), g.const(0.044715)])]),
                             g.const(np.sqrt(2 / np.pi))])
        gel = g.op("Mul", [g.op("Mul", [m, g.const(0.5)]), g.op("Add", [g.op("Tanh", [inner]), g.const(1.0)])])
        x = g.op("Add", [x, g.linear(gel, 4 * d, d)])
    g.op("MatMul", [ln(x), g.op("Transpose", [wte], perm=[1, 0])], name="lm_head", outs=["logits"])
    feeds = {"input_ids": np.random.default_rng(11).integers(0, VOCAB, (2, 7)).astype(np.int64)}
    return g.model([_vi("input_ids", ["batch", "sequence"], T.INT64)],
                   [_vi("logits", ["batch", "sequence", VOCAB])], "gpt2_like", "main_graph"), feeds, (1e-4, 1e-4)


def distilbert_like():
    """A DistilBERT-like encoder as the TorchScript exporter writes it (opset 14): input_ids and
    attention_mask (int64, symbolic dims); word + position embeddings (Gather), LayerNorm spelled out (no
    LayerNormalization before opset 17); the
    extended mask (1 - mask) * -big, spelled Unsqueeze, Cast, Sub, Mul, and added to the scores;
    two layers (post-norm, Erf GELU); the [CLS] row through a pre-classifier, Relu, classifier."""
    g = G(14, seed=22)
    d, heads, s = 32, 4, 8
    x = g.op("Add", [g.op("Gather", [g.w(VOCAB, d, scale=0.1, stem="word_embeddings"), "input_ids"]),
                     g.w(s, d, scale=0.1, stem="position_embeddings")])
    x = g.ln_spelled(x, d)
    m = g.op("Cast", [g.op("Unsqueeze", ["attention_mask", g.const([1, 2], "ax", np.int64)])], to=T.FLOAT)
    mask = g.op("Mul", [g.op("Sub", [g.const(1.0), m]), g.const(-3.4028234663852886e38, "fmin")])
    for _ in range(2):
        x = g.ln_spelled(g.op("Add", [x, g.mha(x, d, heads, s, mask=mask)]), d)
        f = g.linear(g.gelu_erf(g.linear(x, d, 2 * d)), 2 * d, d)
        x = g.ln_spelled(g.op("Add", [x, f]), d)
    cls = g.op("Gather", [x, g.const(0, "idx", np.int64)], axis=1)
    y = g.op("Relu", [g.op("Gemm", [cls, g.w(d, d), g.w(d, scale=0.1)], transB=1)])
    g.op("Gemm", [y, g.w(2, d), g.w(2, scale=0.1)], transB=1, name="classifier", outs=["logits"])
    rng = np.random.default_rng(12)
    mask_v = np.ones((3, s), np.int64)
    mask_v[1, 5:] = 0
    mask_v[2, 2:] = 0
    feeds = {"input_ids": rng.integers(0, VOCAB, (3, s)).astype(np.int64), "attention_mask": mask_v}
    return g.model([_vi("input_ids", ["batch", s], T.INT64), _vi("attention_mask", ["batch", s], T.INT64)],
                   [_vi("logits", ["batch", 2])], "distilbert_like"), feeds, (1e-4, 1e-4)


def t5_encoder():
    """A T5-like encoder at opset 15: shared embedding Gather, RMSNorm spelled Pow, ReduceMean,
    Add eps, Sqrt, Div, Mul by weight (no mean, no bias); unscaled attention scores plus a
    relative-position bias looked up by Gather from a bucket table (fixed for the sequence
    length, as the exporter folds it) and Transposed to [1, H, S, S]; Relu FFN without biases;
    final RMSNorm."""
    g = G(15, seed=23)
    d, heads, s = 32, 4, 8
    x = g.op("Gather", [g.w(VOCAB, d, scale=1.0, stem="shared"), "input_ids"])

    def rms(t):
        var = g.op("ReduceMean", [g.op("Pow", [t, g.const(2.0)])], axes=[-1], keepdims=1)
        n = g.op("Div", [t, g.op("Sqrt", [g.op("Add", [var, g.const(1e-6, "eps")])])])
        return g.op("Mul", [g.gamma(d, "rms_w"), n])

    rel = np.arange(s)[None] - np.arange(s)[:, None]                       # memory - query
    buckets = np.where(rel > 0, 8, 0) + np.minimum(np.abs(rel), 7)         # bidirectional, 16 buckets
    bias = g.op("Gather", [g.w(16, heads, scale=0.5, stem="relative_attention_bias"),
                           g.const(buckets, "buckets", np.int64)])          # [S, S, H]
    bias = g.op("Unsqueeze", [g.op("Transpose", [bias], perm=[2, 0, 1]), g.const([0], "ax", np.int64)])
    for _ in range(2):
        x = g.op("Add", [x, g.mha(rms(x), d, heads, s, bias=bias, scale=False)])
        f = g.op("MatMul", [g.op("Relu", [g.op("MatMul", [rms(x), g.w(d, 2 * d)])]), g.w(2 * d, d)])
        x = g.op("Add", [x, f])
    g.op("Identity", [rms(x)], name="final", outs=["last_hidden_state"])
    feeds = {"input_ids": np.random.default_rng(13).integers(0, VOCAB, (2, s)).astype(np.int64)}
    return g.model([_vi("input_ids", ["batch", s], T.INT64)], [_vi("last_hidden_state", ["batch", s, d])],
                   "t5_encoder"), feeds, (1e-4, 1e-4)


def onnx_attention():
    """A decoder block at opset 23 with the ONNX Attention op (GQA: 4 query heads, 2 kv heads,
    is_causal), its 3-D input form with q_num_heads/kv_num_heads, RMSNormalization (opset 23)
    and a SiLU MLP: what newer exporters emit for Llama-style models."""
    g = G(23, seed=24)
    d, hq, hkv, s = 32, 4, 2, 6
    dh = d // hq
    n = g.op("RMSNormalization", ["hidden", g.gamma(d)], axis=-1, epsilon=1e-6)
    q = g.op("MatMul", [n, g.w(d, d)])
    k = g.op("MatMul", [n, g.w(d, hkv * dh)])
    v = g.op("MatMul", [n, g.w(d, hkv * dh)])
    a = g.op("Attention", [q, k, v], name="attn", is_causal=1, q_num_heads=hq, kv_num_heads=hkv)
    x = g.op("Add", ["hidden", g.op("MatMul", [a, g.w(d, d)])])
    n = g.op("RMSNormalization", [x, g.gamma(d)], axis=-1, epsilon=1e-6)
    gate = g.op("MatMul", [n, g.w(d, 2 * d)])
    up = g.op("MatMul", [n, g.w(d, 2 * d)])
    act = g.op("Mul", [g.op("Mul", [gate, g.op("Sigmoid", [gate])]), up])
    g.op("Add", [x, g.op("MatMul", [act, g.w(2 * d, d)])], name="residual_out", outs=["out"])
    feeds = {"hidden": np.random.default_rng(14).standard_normal((2, s, d)).astype(np.float32)}
    return g.model([_vi("hidden", ["batch", "seq", d])], [_vi("out", ["batch", "seq", d])], "onnx_attention"), \
        feeds, (1e-4, 1e-4)


# ---------------------------------------------------------------------------------------------

@dataclass
class Entry:
    build: Callable
    opset: int
    domain: str
    quirk: str
    on_cpu: dict[str, str] = field(default_factory=dict)   # node -> why it stays on the CPU (GPU session)
    xfail: str | None = None


FOLD = "folded while planning: constant for the input shapes (no GPU work needed)"
_VAD_CPU = {
    "If_sr": "no GPU kernel for If (subgraphs run on the CPU)",
    "Conv_0": "after the If: its output's time dim depends on which branch ran, so no static shape before the run",
    "Relu_0": "unknown time dim (downstream of the If)",
    "Transpose_0": "unknown time dim (downstream of the If)",
    "LSTM_0": "unknown time dim (downstream of the If; with a static one the GPU LSTM kernel runs it)",
    "Squeeze_0": "unknown time dim (downstream of the If)",
    "Transpose_1": "unknown time dim (downstream of the If)",
    "Relu_1": "unknown time dim (downstream of the If)",
    "Conv_1": "unknown time dim (downstream of the If)",
    "Sigmoid_0": "unknown time dim (downstream of the If)",
    "prob": "unknown time dim (downstream of the If)",
}

ZOO: dict[str, Entry] = {
    "vit_tiny": Entry(vit_tiny, 21, "vision: classification", "class token Shape/Expand/Concat; opset 21, IR 10", {
        "Shape_0": FOLD, "Concat_0": FOLD, "Expand_0": FOLD + " (the class token broadcast to the batch)"}),
    "unet_seg": Entry(unet_seg, 13, "vision: segmentation",
                      "ConvTranspose, Concat skips, Resize nearest + linear (scales and sizes)"),
    "yolo_head": Entry(yolo_head, 11, "vision: detection", "box decode in graph, TopK + NonMaxSuppression", {
        "TopK_0": "no GPU kernel for TopK",
        "nms": "no GPU kernel for NonMaxSuppression",
        "Gather_2": "data-dependent shape: the number of boxes NMS keeps",
        "kept": "data-dependent shape: the number of boxes NMS keeps"}),
    "dbnet_det": Entry(dbnet_det, 10, "OCR: detector",
                       "Paddle2ONNX-style batch -1; opset-10 Resize (scales only), ConvTranspose"),
    "crnn_rec": Entry(crnn_rec, 12, "OCR: recognizer", "bidirectional LSTM, CTC greedy ArgMax"),
    "paddle_cls": Entry(paddle_cls, 11, "OCR: direction classifier",
                        "Paddle2ONNX: batch dim_value -1, hard-swish as HardSigmoid * x, SE block"),
    "tf2onnx_cnn": Entry(tf2onnx_cnn, 13, "vision: classification",
                         "tf2onnx: NHWC input, Transpose around Conv, Clip ReLU6, Squeeze axes input"),
    "opset9_cnn": Entry(opset9_cnn, 9, "vision: classification", "opset 9: ConstantOfShape + Add bias, Upsample", {
        "ConstantOfShape_0": FOLD, "Add_0": FOLD + " (the conv bias)"}),
    "silero_vad": Entry(silero_vad, 16, "speech: VAD", "If on sr (then branch), LSTM with fed state", _VAD_CPU),
    "silero_vad_8k": Entry(silero_vad_8k, 16, "speech: VAD", "If on sr (else branch)", _VAD_CPU),
    "whisper_encoder": Entry(whisper_encoder, 20, "speech: encoder", "Conv1d, Gelu op (opset 20)"),
    "gpt2_like": Entry(gpt2_like, 18, "NLP: decoder",
                       "torch dynamo: dim_param batch/seq, Shape/Range positions, Trilu causal mask, "
                       "ReduceMean axes input, Split num_outputs", {
                           "Shape_0": FOLD, "Gather_0": FOLD + " (sequence length)",
                           "Range_0": FOLD + " (position ids)", "Gather_2": FOLD + " (position embeddings)",
                           "Unsqueeze_0": FOLD, "Concat_0": FOLD, "ConstantOfShape_0": FOLD,
                           "Trilu_0": FOLD + " (causal mask)", "Where_0": FOLD + " (additive mask)",
                           "Transpose_8": FOLD + " (tied embedding transposed for the head)"}),
    "distilbert_like": Entry(distilbert_like, 14, "NLP: encoder",
                             "TorchScript: attention_mask Cast/Sub/Mul, LayerNorm spelled out"),
    "t5_encoder": Entry(t5_encoder, 15, "NLP: encoder", "RMSNorm spelled out, relative-position bias Gather", {
        "Gather_1": FOLD + " (relative-position bias lookup)", "Transpose_0": FOLD, "Unsqueeze_0": FOLD}),
    "onnx_attention": Entry(onnx_attention, 23, "NLP: decoder block",
                            "Attention op (GQA, causal), RMSNormalization; opset 23, IR 11"),
}
