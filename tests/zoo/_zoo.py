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
_IR = {8: 3, 9: 4, 10: 5, 11: 6, 12: 7, 13: 7, 14: 7, 15: 8, 16: 8, 17: 8, 18: 8, 19: 9, 20: 9, 21: 10, 22: 10, 23: 11}


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
        if _IR[self.opset] < 4:  # before IR 4 every initializer is also a graph input
            inputs = inputs + [_vi(k, list(v.shape), h.np_dtype_to_tensor_dtype(v.dtype)) for k, v in self.inits.items()]
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


def mobilenetv3_block():
    """A torchvision MobileNetV3-small slice at opset 14 (the first opset with HardSwish): stem
    Conv/BN/HardSwish, an inverted residual (1x1 expand, depthwise 5x5, an SE block whose gate
    is HardSigmoid with torch's alpha 1/6, 1x1 project, residual Add), GlobalAveragePool,
    Flatten, Gemm, HardSwish, Gemm."""
    g = G(14, seed=31)
    x = g.op("HardSwish", [g.bn(g.conv("input", 3, 16, 3, stride=2, bias=False), 16)])          # 16x16
    y = g.op("HardSwish", [g.bn(g.conv(x, 16, 32, 1, bias=False), 32)])
    y = g.op("HardSwish", [g.bn(g.conv(y, 32, 32, 5, group=32, bias=False), 32)])               # depthwise
    se = g.op("Relu", [g.conv(g.op("GlobalAveragePool", [y]), 32, 8, 1)])
    y = g.op("Mul", [g.op("HardSigmoid", [g.conv(se, 8, 32, 1)], alpha=1 / 6, beta=0.5), y])
    x = g.op("Add", [g.bn(g.conv(y, 32, 16, 1, bias=False), 16), x])
    x = g.op("Flatten", [g.op("GlobalAveragePool", [x])], axis=1)
    x = g.op("HardSwish", [g.op("Gemm", [x, g.w(32, 16), g.w(32, scale=0.1)], transB=1)])
    g.op("Gemm", [x, g.w(10, 32), g.w(10, scale=0.1)], transB=1, name="classifier", outs=["output"])
    feeds = {"input": np.random.default_rng(31).standard_normal((2, 3, 32, 32)).astype(np.float32)}
    return g.model([_vi("input", ["batch_size", 3, 32, 32])], [_vi("output", ["batch_size", 10])],
                   "mobilenetv3_block"), feeds, (1e-4, 1e-5)


def efficientnet_mbconv():
    """An EfficientNet-B0-style MBConv stage at opset 12: SiLU spelled Sigmoid * x (ONNX has no
    SiLU op), stem Conv/BN, an MBConv (1x1 expand, depthwise 3x3, SE
    with SiLU then a Sigmoid gate, 1x1 project, residual Add with no drop-connect in
    inference), head 1x1 Conv/BN/SiLU, GlobalAveragePool, Flatten, Gemm."""
    g = G(12, seed=32)

    def silu(t):
        return g.op("Mul", [t, g.op("Sigmoid", [t])])

    x = silu(g.bn(g.conv("images", 3, 16, 3, stride=2, bias=False), 16))
    y = silu(g.bn(g.conv(x, 16, 64, 1, bias=False), 64))
    y = silu(g.bn(g.conv(y, 64, 64, 3, group=64, bias=False), 64))
    se = silu(g.conv(g.op("GlobalAveragePool", [y]), 64, 4, 1))
    y = g.op("Mul", [y, g.op("Sigmoid", [g.conv(se, 4, 64, 1)])])
    x = g.op("Add", [g.bn(g.conv(y, 64, 16, 1, bias=False), 16), x])
    x = silu(g.bn(g.conv(x, 16, 32, 1, bias=False), 32))
    x = g.op("Flatten", [g.op("GlobalAveragePool", [x])], axis=1)
    g.op("Gemm", [x, g.w(10, 32), g.w(10, scale=0.1)], transB=1, name="fc", outs=["logits"])
    feeds = {"images": np.random.default_rng(32).standard_normal((1, 3, 24, 24)).astype(np.float32)}
    return g.model([_vi("images", [1, 3, 24, 24])], [_vi("logits", [1, 10])], "efficientnet_mbconv"), \
        feeds, (1e-4, 1e-5)


def convnext_block():
    """A ConvNeXt (timm-shaped) stem and two blocks at opset 17: 4x4 stride-4 patchify Conv,
    LayerNorm over channels written Transpose / LayerNormalization / Transpose; each block a
    depthwise 7x7 Conv, Transpose to NHWC, LayerNormalization, MatMul MLP with Erf GELU,
    layer scale (Mul by gamma), Transpose back, residual Add; mean over H, W by ReduceMean,
    LayerNormalization, Gemm head."""
    g = G(17, seed=33)
    d = 16
    x = g.conv("pixel_values", 3, d, 4, stride=4, pad=0)                               # 8x8
    x = g.op("Transpose", [g.layer_norm(g.op("Transpose", [x], perm=[0, 2, 3, 1]), d)], perm=[0, 3, 1, 2])
    for _ in range(2):
        y = g.op("Transpose", [g.conv(x, d, d, 7, group=d)], perm=[0, 2, 3, 1])
        y = g.linear(g.gelu_erf(g.linear(g.layer_norm(y, d), d, 4 * d)), 4 * d, d)
        y = g.op("Mul", [y, g.const(0.5 + 0.1 * g.rng.standard_normal(d), "layer_scale")])
        x = g.op("Add", [x, g.op("Transpose", [y], perm=[0, 3, 1, 2])])
    x = g.layer_norm(g.op("ReduceMean", [x], axes=[-2, -1], keepdims=0), d)
    g.op("Gemm", [x, g.w(10, d), g.w(10, scale=0.1)], transB=1, name="head", outs=["logits"])
    feeds = {"pixel_values": np.random.default_rng(33).standard_normal((2, 3, 32, 32)).astype(np.float32)}
    return g.model([_vi("pixel_values", ["batch", 3, 32, 32])], [_vi("logits", ["batch", 10])],
                   "convnext_block"), feeds, (1e-4, 1e-4)


def swin_window_attn():
    """A Swin-T-like stage at opset 16: patch embedding, then two blocks of window attention on
    a 8x8 token map with 4x4 windows, the second shifted by 2 (torch.roll written as Slice +
    Concat, and the shift mask added to the scores through a Reshape to [B, windows, heads,
    N, N]); window partition and reverse by Reshape / Transpose (rank 6); qkv split by Gather
    on a Transposed [3, ...] tensor; the relative-position bias Gathered from its table by a
    constant index, Reshape, Transpose, Unsqueeze; LayerNorm spelled out (opset 16)."""
    g = G(16, seed=34)
    d, heads, hw, ws, shift, b = 16, 2, 8, 4, 2, 2
    n, dh, nw = ws * ws, d // heads, (hw // ws) ** 2
    x = g.conv("pixel_values", 3, d, 4, stride=4, pad=0)
    x = g.ln_spelled(g.op("Transpose", [g.op("Reshape", [x, g.const([b, d, -1], "s", np.int64)])], perm=[0, 2, 1]), d)
    coords = np.stack(np.meshgrid(np.arange(ws), np.arange(ws), indexing="ij")).reshape(2, -1)
    rel = (coords[:, :, None] - coords[:, None, :]).transpose(1, 2, 0) + (ws - 1)
    index = (rel[..., 0] * (2 * ws - 1) + rel[..., 1]).reshape(-1)
    img = np.zeros((hw, hw))
    cnt = 0
    for hs in (slice(0, -ws), slice(-ws, -shift), slice(-shift, None)):
        for wsl in (slice(0, -ws), slice(-ws, -shift), slice(-shift, None)):
            img[hs, wsl] = cnt
            cnt += 1
    mw = img.reshape(hw // ws, ws, hw // ws, ws).transpose(0, 2, 1, 3).reshape(nw, n)
    shift_mask = np.where(mw[:, None, :] != mw[:, :, None], -100.0, 0.0)[None, :, None]   # [1, nW, 1, N, N]

    def roll(t, s):   # torch.roll over H (axis 1) and W (axis 2) of [B, H, W, C]
        for ax in (1, 2):
            k = s % hw
            a = g.op("Slice", [t, g.const([hw - k], "st", np.int64), g.const([hw], "en", np.int64),
                               g.const([ax], "ax", np.int64)])
            c = g.op("Slice", [t, g.const([0], "st", np.int64), g.const([hw - k], "en", np.int64),
                               g.const([ax], "ax", np.int64)])
            t = g.op("Concat", [a, c], axis=ax)
        return t

    for blk in range(2):
        shortcut = x
        t = g.op("Reshape", [g.ln_spelled(x, d), g.const([b, hw, hw, d], "s", np.int64)])
        if blk:
            t = roll(t, -shift)
        t = g.op("Reshape", [t, g.const([b, hw // ws, ws, hw // ws, ws, d], "s", np.int64)])
        t = g.op("Reshape", [g.op("Transpose", [t], perm=[0, 1, 3, 2, 4, 5]), g.const([-1, n, d], "s", np.int64)])
        qkv = g.op("Reshape", [g.linear(t, d, 3 * d), g.const([-1, n, 3, heads, dh], "s", np.int64)])
        qkv = g.op("Transpose", [qkv], perm=[2, 0, 3, 1, 4])
        q, k, v = (g.op("Gather", [qkv, g.const(i, "i", np.int64)], axis=0) for i in range(3))
        q = g.op("Mul", [q, g.const(dh ** -0.5, "scale")])
        s = g.op("MatMul", [q, g.op("Transpose", [k], perm=[0, 1, 3, 2])])
        bias = g.op("Gather", [g.w((2 * ws - 1) ** 2, heads, scale=0.5, stem="relative_position_bias_table"),
                               g.const(index, "relative_position_index", np.int64)], axis=0)
        bias = g.op("Transpose", [g.op("Reshape", [bias, g.const([n, n, -1], "s", np.int64)])], perm=[2, 0, 1])
        s = g.op("Add", [s, g.op("Unsqueeze", [bias, g.const([0], "ax", np.int64)])])
        if blk:
            s = g.op("Reshape", [s, g.const([-1, nw, heads, n, n], "s", np.int64)])
            s = g.op("Reshape", [g.op("Add", [s, g.const(shift_mask, "attn_mask")]),
                                 g.const([-1, heads, n, n], "s", np.int64)])
        a = g.op("Transpose", [g.op("MatMul", [g.op("Softmax", [s], axis=-1), v])], perm=[0, 2, 1, 3])
        a = g.linear(g.op("Reshape", [a, g.const([-1, n, d], "s", np.int64)]), d, d)
        a = g.op("Reshape", [a, g.const([b, hw // ws, hw // ws, ws, ws, d], "s", np.int64)])
        a = g.op("Reshape", [g.op("Transpose", [a], perm=[0, 1, 3, 2, 4, 5]), g.const([b, hw, hw, d], "s", np.int64)])
        if blk:
            a = roll(a, shift)
        x = g.op("Add", [shortcut, g.op("Reshape", [a, g.const([b, hw * hw, d], "s", np.int64)])])
        x = g.op("Add", [x, g.linear(g.gelu_erf(g.linear(g.ln_spelled(x, d), d, 2 * d)), 2 * d, d)])
    x = g.op("ReduceMean", [g.ln_spelled(x, d)], axes=[1], keepdims=0)
    g.op("Gemm", [x, g.w(10, d), g.w(10, scale=0.1)], transB=1, name="head", outs=["logits"])
    feeds = {"pixel_values": np.random.default_rng(34).standard_normal((b, 3, 32, 32)).astype(np.float32)}
    return g.model([_vi("pixel_values", [b, 3, 32, 32])], [_vi("logits", [b, 10])], "swin_window_attn"), \
        feeds, (1e-4, 1e-4)


def deeplab_aspp():
    """A torchvision DeepLabV3-style head at opset 19: a strided Conv/BN/Relu backbone to 1/4,
    ASPP with a 1x1 branch, two dilated 3x3 branches (dilation 2 and 3) and a pooling branch
    (GlobalAveragePool, 1x1 Conv/BN/Relu, Resize linear back to the feature size, sizes built
    from Shape/Slice/Concat as TorchScript writes F.interpolate(size=...)), Concat, 1x1
    projection, 3x3 Conv head, and the logits upsampled to the input by Resize linear with
    align_corners."""
    g = G(19, seed=35)

    def cbr(x, cin, cout, k, **attrs):
        return g.op("Relu", [g.bn(g.conv(x, cin, cout, k, bias=False, **attrs), cout)])

    def size_of(t, like):
        nc = g.op("Slice", [g.op("Shape", [t]), g.const([0], "st", np.int64), g.const([2], "en", np.int64)])
        hw = g.op("Slice", [g.op("Shape", [like]), g.const([2], "st", np.int64), g.const([4], "en", np.int64)])
        return g.op("Concat", [nc, hw], axis=0)

    f = cbr(cbr("input", 3, 16, 3, stride=2), 16, 32, 3, stride=2)                       # 8x8
    br = [cbr(f, 32, 8, 1),
          cbr(f, 32, 8, 3, pad=2, dilations=[2, 2]),
          cbr(f, 32, 8, 3, pad=3, dilations=[3, 3])]
    p = cbr(g.op("GlobalAveragePool", [f]), 32, 8, 1)
    br.append(g.op("Resize", [p, "", "", size_of(p, f)], mode="linear",
                   coordinate_transformation_mode="pytorch_half_pixel"))
    y = cbr(g.op("Concat", br, axis=1), 32, 16, 1)
    y = g.conv(cbr(y, 16, 16, 3), 16, 4, 1)
    g.op("Resize", [y, "", "", size_of(y, "input")], mode="linear", coordinate_transformation_mode="align_corners",
         name="upsample", outs=["out"])
    feeds = {"input": np.random.default_rng(35).standard_normal((1, 3, 32, 32)).astype(np.float32)}
    return g.model([_vi("input", [1, 3, 32, 32])], [_vi("out", [1, 4, 32, 32])], "deeplab_aspp"), feeds, (1e-4, 1e-5)


def yolov8_head():
    """An Ultralytics YOLOv8-style detector at opset 17 as `yolo export` writes it (BN fused into
    Conv, SiLU as Sigmoid * x): a C2f block (Conv, Split into halves, a bottleneck on one,
    Concat, Conv), a neck with Resize nearest x2 (empty roi, scales) and Concat, and the
    decoupled head on two levels; box and class maps Concat'ed, Reshape to [B, 4*16+3, cells],
    Concat over levels, Split into box and class; DFL: Reshape [B, 4, 16, A], Transpose,
    Softmax over the 16 bins, a 1x1 Conv with arange weights; dist2bbox against the anchor
    points (Slice, Sub, Add, Div, Concat), Mul by the strides; Sigmoid class scores."""
    g = G(17, seed=36)
    reg, nc = 16, 3

    def cs(x, cin, cout, k=1, stride=1):
        t = g.conv(x, cin, cout, k, stride=stride)
        return g.op("Mul", [t, g.op("Sigmoid", [t])])

    def c2f(x, cin, cout):
        c = cout // 2
        a, b = g.op("Split", [cs(x, cin, cout), g.const([c, c], "split", np.int64)], outs=2, axis=1)
        m = g.op("Add", [b, cs(cs(b, c, c, 3), c, c, 3)])
        return cs(g.op("Concat", [a, b, m], axis=1), 3 * c, cout)

    p3 = c2f(cs(cs("images", 3, 8, 3, 2), 8, 16, 3, 2), 16, 16)                   # 8x8
    p4 = c2f(cs(p3, 16, 24, 3, 2), 24, 24)                                           # 4x4
    up = g.op("Resize", [p4, "", g.const([1, 1, 2, 2], "scales")], mode="nearest")
    n3 = c2f(g.op("Concat", [up, p3], axis=1), 40, 16)
    n4 = c2f(g.op("Concat", [cs(n3, 16, 16, 3, 2), p4], axis=1), 40, 24)
    levels = []
    for x, c in ((n3, 16), (n4, 24)):
        box = g.conv(cs(cs(x, c, 16, 3), 16, 16, 3), 16, 4 * reg, 1)
        cls = g.conv(cs(cs(x, c, 16, 3), 16, 16, 3), 16, nc, 1)
        flat = g.const([1, 4 * reg + nc, -1], "s", np.int64)
        levels.append(g.op("Reshape", [g.op("Concat", [box, cls], axis=1), flat]))
    cat = g.op("Concat", levels, axis=2)                                                # [1, 67, 80]
    box, cls = g.op("Split", [cat, g.const([4 * reg, nc], "split", np.int64)], outs=2, axis=1)
    a = 80
    t = g.op("Softmax", [g.op("Transpose", [g.op("Reshape", [box, g.const([1, 4, reg, a], "s", np.int64)])],
                                 perm=[0, 2, 1, 3])], axis=1)
    dfl = g.op("Conv", [t, g.const(np.arange(reg, dtype=np.float32).reshape(1, reg, 1, 1), "dfl")], kernel_shape=[1, 1])
    dist = g.op("Reshape", [dfl, g.const([1, 4, a], "s", np.int64)])
    anchors, strides = [], []
    for hw, s in ((8, 4), (4, 8)):
        yy, xx = np.meshgrid(np.arange(hw) + 0.5, np.arange(hw) + 0.5, indexing="ij")
        anchors.append(np.stack([xx.ravel(), yy.ravel()]))
        strides.append(np.full(hw * hw, s))
    anc = g.const(np.concatenate(anchors, 1)[None], "anchors")
    lt, rb = g.op("Split", [dist, g.const([2, 2], "split", np.int64)], outs=2, axis=1)
    x1y1, x2y2 = g.op("Sub", [anc, lt]), g.op("Add", [anc, rb])
    cxy = g.op("Div", [g.op("Add", [x1y1, x2y2]), g.const(2.0)])
    dbox = g.op("Mul", [g.op("Concat", [cxy, g.op("Sub", [x2y2, x1y1])], axis=1),
                        g.const(np.concatenate(strides)[None], "strides")])
    g.op("Concat", [dbox, g.op("Sigmoid", [cls])], axis=1, name="output_cat", outs=["output0"])
    feeds = {"images": np.random.default_rng(36).standard_normal((1, 3, 32, 32)).astype(np.float32)}
    return g.model([_vi("images", [1, 3, 32, 32])], [_vi("output0", [1, 4 + nc, a])], "yolov8_head", "main_graph"), \
        feeds, (1e-4, 1e-4)

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


def wav2vec2_encoder():
    """A wav2vec2-base-like feature encoder at opset 18 as TorchScript writes it: raw audio
    [B, N] Unsqueezed to [B, 1, N], Conv1d k10 stride 5 (no bias), GroupNorm(C, C) spelled
    Reshape [N, C, -1] / InstanceNormalization (ones, zeros) / Reshape back to the Shape of
    the input / Mul / Add, Erf GELU, two more Conv1d k3 stride 2 + GELU; Transpose to
    [B, T, C], LayerNormalization, feature projection, and the positional conv embedding (a
    grouped Conv1d k4 pad 2 whose extra last frame is cut by a Slice, GELU, Add), LayerNorm."""
    g = G(18, seed=41)
    c, d = 16, 24

    def conv1d(x, cin, cout, k, stride=1, pad=0, group=1, bias=False):
        ins = [x, g.w(cout, cin // group, k, scale=np.sqrt(2.0 / (cin // group * k)))]
        if bias:
            ins.append(g.w(cout, scale=0.05, stem="b"))
        return g.op("Conv", ins, kernel_shape=[k], strides=[stride], pads=[pad, pad], group=group)

    x = conv1d(g.op("Unsqueeze", ["input_values", g.const([1], "ax", np.int64)]), 1, c, 10, stride=5)
    t = g.op("Reshape", [x, g.const([0, c, -1], "s", np.int64)])
    t = g.op("InstanceNormalization", [t, g.const(np.ones(c), "ones"), g.const(np.zeros(c), "zeros")], epsilon=1e-5)
    t = g.op("Reshape", [t, g.op("Shape", [x])])
    x = g.op("Add", [g.op("Mul", [t, g.const(1 + 0.1 * g.rng.standard_normal((c, 1)), "gn_w")]),
                     g.const(0.1 * g.rng.standard_normal((c, 1)), "gn_b")])
    x = g.gelu_erf(x)
    for _ in range(2):
        x = g.gelu_erf(conv1d(x, c, c, 3, stride=2))
    x = g.layer_norm(g.op("Transpose", [x], perm=[0, 2, 1]), c)
    x = g.linear(x, c, d)                                                                   # [B, T, d]
    p = conv1d(g.op("Transpose", [x], perm=[0, 2, 1]), d, d, 4, pad=2, group=4, bias=True)
    p = g.op("Slice", [p, g.const([0], "st", np.int64), g.const([-1], "en", np.int64), g.const([2], "ax", np.int64)])
    x = g.op("Add", [x, g.op("Transpose", [g.gelu_erf(p)], perm=[0, 2, 1])])
    g.op("LayerNormalization", [x, g.gamma(d), g.w(d, scale=0.1)], axis=-1, epsilon=1e-5, name="encoder_ln",
         outs=["last_hidden_state"])
    feeds = {"input_values": np.random.default_rng(41).standard_normal((2, 400)).astype(np.float32)}
    return g.model([_vi("input_values", ["batch_size", "sequence_length"])],
                   [_vi("last_hidden_state", ["batch_size", "frames", d])], "wav2vec2_encoder"), feeds, (1e-4, 1e-4)


def conformer_block():
    """A Conformer encoder block (ESPnet/torchaudio-shaped) at opset 15: macaron half-step FFNs
    with Swish spelled Sigmoid * x, self-attention, and the convolution module: Transpose to
    [B, C, T], pointwise Conv1d to 2C, GLU spelled Split + Sigmoid + Mul, depthwise Conv1d k5,
    BatchNormalization, Swish, pointwise Conv1d, Transpose back; LayerNorm spelled out
    (opset 15) before each module and at the end."""
    g = G(15, seed=42)
    d, heads, t = 24, 3, 12

    def swish(v):
        return g.op("Mul", [v, g.op("Sigmoid", [v])])

    def ffn(v):
        f = g.linear(swish(g.linear(g.ln_spelled(v, d), d, 4 * d)), 4 * d, d)
        return g.op("Add", [v, g.op("Mul", [f, g.const(0.5, "half")])])

    def pconv(v, cin, cout):
        return g.op("Conv", [v, g.w(cout, cin, 1), g.w(cout, scale=0.05, stem="b")], kernel_shape=[1])

    x = ffn("xs")
    x = g.op("Add", [x, g.mha(g.ln_spelled(x, d), d, heads, t)])
    c = pconv(g.op("Transpose", [g.ln_spelled(x, d)], perm=[0, 2, 1]), d, 2 * d)
    a, b = g.op("Split", [c], outs=2, axis=1)
    c = g.op("Mul", [a, g.op("Sigmoid", [b])])
    c = g.op("Conv", [c, g.w(d, 1, 5, scale=0.5), g.w(d, scale=0.05, stem="b")], kernel_shape=[5], pads=[2, 2], group=d)
    c = pconv(swish(g.bn(c, d)), d, d)
    x = g.op("Add", [x, g.op("Transpose", [c], perm=[0, 2, 1])])
    x = g.ln_spelled(ffn(x), d)
    g.op("Identity", [x], name="out", outs=["ys"])
    feeds = {"xs": np.random.default_rng(42).standard_normal((2, t, d)).astype(np.float32)}
    return g.model([_vi("xs", ["B", t, d])], [_vi("ys", ["B", t, d])], "conformer_block"), feeds, (1e-4, 1e-4)

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


def gpt2_kv_step():
    """One GPT-2 decoding step with a KV cache, as HF optimum's TorchScript export writes it
    (opset 13): inputs input_ids [B, S], attention_mask [B, P+S] and per layer
    past_key_values.{i}.key/value [B, H, P, dh] with a symbolic past length; positions from
    Range(P, P+S) with P read by Shape; each layer Concat's its past key/value with the new
    ones (outputs present.{i}.*), the causal mask Sliced from the model's bias buffer at
    [P : P+S, : P+S] and applied by Where with finfo.min, the padding mask (1 - m) * finfo.min
    added; LayerNorm spelled out (no LayerNormalization before opset 17), tanh GELU."""
    g = G(13, seed=51)
    d, heads, layers, maxpos = 32, 4, 2, 16
    dh = d // heads
    pshape = g.op("Shape", ["past_key_values.0.key"])
    past = g.op("Gather", [pshape, g.const(2, "two", np.int64)], axis=0)
    seq = g.op("Gather", [g.op("Shape", ["input_ids"]), g.const(1, "one", np.int64)], axis=0)
    total = g.op("Add", [past, seq])
    pos = g.op("Range", [past, total, g.const(1, "one", np.int64)])
    wte = g.w(VOCAB, d, scale=0.1, stem="wte")
    x = g.op("Add", [g.op("Gather", [wte, "input_ids"], axis=0),
                     g.op("Gather", [g.w(maxpos, d, scale=0.1, stem="wpe"), pos], axis=0)])
    fmin = g.const(np.finfo(np.float32).min, "fmin")
    unsq = lambda v: g.op("Unsqueeze", [v, g.const([0], "ax", np.int64)])   # noqa: E731
    causal = g.op("Slice", [g.const(np.tril(np.ones((maxpos, maxpos), bool)), "bias", np.bool_),
                            g.op("Concat", [unsq(past), g.const([0], "z", np.int64)], axis=0),
                            g.op("Concat", [unsq(total), unsq(total)], axis=0), g.const([0, 1], "ax", np.int64)])
    m = g.op("Cast", [g.op("Unsqueeze", ["attention_mask", g.const([1, 2], "ax", np.int64)])], to=T.FLOAT)
    pad = g.op("Mul", [g.op("Sub", [g.const(1.0), m]), fmin])
    ins, outs = [], []
    for i in range(layers):
        qkv = g.linear(g.ln_spelled(x, d), d, 3 * d)
        parts = []
        for p in g.op("Split", [qkv, g.const([d, d, d], "split", np.int64)], outs=3, axis=2):
            parts.append(g.op("Transpose", [g.op("Reshape", [p, g.const([0, 0, heads, dh], "s", np.int64)])],
                              perm=[0, 2, 1, 3]))
        q, k, v = parts
        pk, pv = f"past_key_values.{i}.key", f"past_key_values.{i}.value"
        k = g.op("Concat", [pk, k], axis=2, name=f"present_key_{i}", outs=[f"present.{i}.key"])
        v = g.op("Concat", [pv, v], axis=2, name=f"present_value_{i}", outs=[f"present.{i}.value"])
        ins += [_vi(pk, ["batch_size", heads, "past_sequence_length", dh]),
                _vi(pv, ["batch_size", heads, "past_sequence_length", dh])]
        outs += [_vi(f"present.{i}.key", ["batch_size", heads, "total_sequence_length", dh]),
                 _vi(f"present.{i}.value", ["batch_size", heads, "total_sequence_length", dh])]
        s = g.op("Div", [g.op("MatMul", [q, g.op("Transpose", [k], perm=[0, 1, 3, 2])]), g.const(np.sqrt(dh))])
        s = g.op("Add", [g.op("Where", [causal, s, fmin]), pad])
        c = g.op("Transpose", [g.op("MatMul", [g.op("Softmax", [s], axis=-1), v])], perm=[0, 2, 1, 3])
        x = g.op("Add", [x, g.linear(g.op("Reshape", [c, g.const([0, 0, d], "s", np.int64)]), d, d)])
        f = g.linear(g.ln_spelled(x, d), d, 4 * d)
        inner = g.op("Mul", [g.op("Add", [f, g.op("Mul", [g.op("Pow", [f, g.const(3.0)]), g.const(0.044715)])]),
                             g.const(np.sqrt(2 / np.pi))])
        gel = g.op("Mul", [g.op("Mul", [f, g.const(0.5)]), g.op("Add", [g.op("Tanh", [inner]), g.const(1.0)])])
        x = g.op("Add", [x, g.linear(gel, 4 * d, d)])
    g.op("MatMul", [g.ln_spelled(x, d), g.op("Transpose", [wte], perm=[1, 0])], name="lm_head", outs=["logits"])
    rng = np.random.default_rng(51)
    b, s, p = 2, 3, 5
    mask = np.ones((b, p + s), np.int64)
    mask[1, :2] = 0                                                    # left padding in the second row
    feeds = {"input_ids": rng.integers(0, VOCAB, (b, s)).astype(np.int64), "attention_mask": mask}
    for i in range(layers):
        for kv in ("key", "value"):
            feeds[f"past_key_values.{i}.{kv}"] = rng.standard_normal((b, heads, p, dh)).astype(np.float32)
    return g.model([_vi("input_ids", ["batch_size", "sequence_length"], T.INT64),
                    _vi("attention_mask", ["batch_size", "total_sequence_length"], T.INT64)] + ins,
                   [_vi("logits", ["batch_size", "sequence_length", VOCAB])] + outs, "gpt2_kv_step", "main_graph"), \
        feeds, (1e-4, 1e-4)


def clip_text():
    """A CLIP-like text encoder (HF, TorchScript) at opset 12: token + position embeddings (the
    position_ids buffer Sliced to the Shape-read length), the causal mask built as HF's
    _make_causal_mask exports (Range, Add, Reshape, Less, Where, Unsqueeze), pre-norm layers
    with LayerNorm spelled out and quick GELU (x * Sigmoid(1.702 x)), final LayerNorm; the
    pooled token is the ArgMax over input_ids (the EOS id is the largest), picked by the
    flattened index arange(B) * S + argmax and a Gather from the [B*S, d] Reshape; then
    text_projection."""
    g = G(12, seed=52)
    d, heads, maxpos = 32, 4, 16
    shape = g.op("Shape", ["input_ids"])
    seq = g.op("Gather", [shape, g.const(1, "one", np.int64)], axis=0)
    pos_ids = g.op("Slice", [g.const(np.arange(maxpos)[None], "position_ids", np.int64),
                             g.const([0], "st", np.int64), g.op("Unsqueeze", [seq], axes=[0]),
                             g.const([1], "ax", np.int64)])
    x = g.op("Add", [g.op("Gather", [g.w(VOCAB, d, scale=0.1, stem="token_embedding"), "input_ids"]),
                     g.op("Gather", [g.w(maxpos, d, scale=0.1, stem="position_embedding"), pos_ids])])
    r = g.op("Range", [g.const(0, "zero", np.int64), seq, g.const(1, "one", np.int64)])
    cond = g.op("Less", [r, g.op("Reshape", [g.op("Add", [r, g.const(1, "one", np.int64)]),
                                             g.const([-1, 1], "s", np.int64)])])
    mask = g.op("Where", [cond, g.const(np.finfo(np.float32).min, "fmin"), g.const(0.0)])
    mask = g.op("Unsqueeze", [mask], axes=[0, 1])
    for _ in range(2):
        x = g.op("Add", [x, g.mha(g.ln_spelled(x, d), d, heads, None, mask=mask)])
        f = g.linear(g.ln_spelled(x, d), d, 2 * d)
        f = g.op("Mul", [f, g.op("Sigmoid", [g.op("Mul", [f, g.const(1.702, "quick")])])])
        x = g.op("Add", [x, g.linear(f, 2 * d, d)])
    x = g.ln_spelled(x, d)
    g.op("Identity", [x], name="last_hidden", outs=["last_hidden_state"])
    eos = g.op("ArgMax", ["input_ids"], axis=-1, keepdims=0)
    batch = g.op("Gather", [shape, g.const(0, "zero", np.int64)], axis=0)
    flat = g.op("Add", [g.op("Mul", [g.op("Range", [g.const(0, "zero", np.int64), batch,
                                                     g.const(1, "one", np.int64)]), seq]), eos])
    pooled = g.op("Gather", [g.op("Reshape", [x, g.const([-1, d], "s", np.int64)]), flat], axis=0)
    g.op("MatMul", [pooled, g.w(d, 16, stem="text_projection")], name="text_projection", outs=["text_embeds"])
    rng = np.random.default_rng(52)
    ids = rng.integers(1, VOCAB - 1, (3, 9)).astype(np.int64)
    for row, n in enumerate((9, 5, 2)):                  # EOS (the largest id) then padding zeros
        ids[row, n - 1], ids[row, n:] = VOCAB - 1, 0
    return g.model([_vi("input_ids", ["batch_size", "sequence_length"], T.INT64)],
                   [_vi("text_embeds", ["batch_size", 16]),
                    _vi("last_hidden_state", ["batch_size", "sequence_length", d])], "clip_text"), \
        {"input_ids": ids}, (1e-4, 1e-4)


def bert_token_type():
    """A BERT-base-like encoder as the TorchScript exporter wrote it at opset 11: input_ids,
    token_type_ids and attention_mask; word + position + token-type embeddings (three Gathers),
    LayerNorm spelled out with ReduceMean axes attributes; the extended mask Unsqueeze (axes
    attribute), Cast, Sub, Mul -10000; two post-norm layers with Softmax on axis 3 (opset 11
    coerces to 2-D) and Erf GELU; the pooler: [CLS] Gather, Gemm, Tanh."""
    g = G(11, seed=53)
    d, heads, s = 32, 4, 8
    x = g.op("Add", [g.op("Gather", [g.w(VOCAB, d, scale=0.1, stem="word_embeddings"), "input_ids"]),
                     g.w(s, d, scale=0.1, stem="position_embeddings")])
    x = g.op("Add", [x, g.op("Gather", [g.w(2, d, scale=0.1, stem="token_type_embeddings"), "token_type_ids"])])
    x = g.ln_spelled(x, d)
    m = g.op("Cast", [g.op("Unsqueeze", ["attention_mask"], axes=[1, 2])], to=T.FLOAT)
    mask = g.op("Mul", [g.op("Sub", [g.const(1.0), m]), g.const(-10000.0, "neg")])
    for _ in range(2):
        x = g.ln_spelled(g.op("Add", [x, g.mha(x, d, heads, s, mask=mask)]), d)
        x = g.ln_spelled(g.op("Add", [x, g.linear(g.gelu_erf(g.linear(x, d, 2 * d)), 2 * d, d)]), d)
    g.op("Identity", [x], name="last_hidden", outs=["last_hidden_state"])
    cls = g.op("Gather", [x, g.const(0, "idx", np.int64)], axis=1)
    g.op("Tanh", [g.op("Gemm", [cls, g.w(d, d), g.w(d, scale=0.1)], transB=1)], name="pooler", outs=["pooler_output"])
    rng = np.random.default_rng(53)
    tt = np.zeros((2, s), np.int64)
    tt[:, 4:] = 1
    mask_v = np.ones((2, s), np.int64)
    mask_v[1, 6:] = 0
    feeds = {"input_ids": rng.integers(0, VOCAB, (2, s)).astype(np.int64), "token_type_ids": tt,
             "attention_mask": mask_v}
    return g.model([_vi(n, ["batch", s], T.INT64) for n in ("input_ids", "token_type_ids", "attention_mask")],
                   [_vi("last_hidden_state", ["batch", s, d]), _vi("pooler_output", ["batch", d])],
                   "bert_token_type"), feeds, (1e-4, 1e-4)


# ---------------------------------------------------------------------------------------------
# More vision (zoo models 26-30)
# ---------------------------------------------------------------------------------------------

def resnext_bottleneck():
    """A torchvision ResNeXt-50 (32x4d)-style stage at opset 8, as the early (PyTorch 0.4-era)
    exporter wrote it: BatchNormalization-7 with its `spatial: 1` attribute (gone from opset 9)
    and IR 3; stem Conv 3x3 s2 / BN / Relu / MaxPool, two bottlenecks (1x1, grouped 3x3 with
    group=8, 1x1, each followed by BN), a projection shortcut (strided 1x1 Conv + BN) on the
    first, residual Add + Relu, GlobalAveragePool, Flatten, Gemm (transB, C required before
    opset 11)."""
    g = G(8, seed=61)

    def cbr(x, cin, cout, k, stride=1, group=1, relu=True):
        y = g.bn(g.conv(x, cin, cout, k, stride=stride, group=group, bias=False), cout, spatial=1)
        return g.op("Relu", [y]) if relu else y

    x = cbr("input", 3, 16, 3, stride=2)                                                # 16x16
    x = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])    # 8x8
    for cin, stride in ((16, 2), (32, 1)):
        y = cbr(x, cin, 32, 1)
        y = cbr(y, 32, 32, 3, stride=stride, group=8)
        y = cbr(y, 32, 32, 1, relu=False)
        sc = cbr(x, cin, 32, 1, stride=stride, relu=False) if cin != 32 else x
        x = g.op("Relu", [g.op("Add", [y, sc])])
    f = g.op("Flatten", [g.op("GlobalAveragePool", [x])], axis=1)
    g.op("Gemm", [f, g.w(10, 32, stem="fc_w"), g.w(10, scale=0.1, stem="fc_b")], name="fc", outs=["output"],
         transB=1)
    feeds = {"input": np.random.default_rng(61).standard_normal((2, 3, 32, 32)).astype(np.float32)}
    return g.model([_vi("input", [2, 3, 32, 32])], [_vi("output", [2, 10])], "resnext_bottleneck"), \
        feeds, (1e-4, 1e-4)


def squeezenet_fire():
    """A torchvision SqueezeNet-1.0-style net at opset 10 (the first opset whose MaxPool has
    `ceil_mode`; torchvision's SqueezeNet pools with ceil_mode=True): Conv 7x7 s2, Relu,
    MaxPool 3x3 s2 ceil_mode (16 -> 8, not 7), two Fire modules (squeeze 1x1, then expand 1x1
    and expand 3x3 Concat'ed on channels), MaxPool ceil_mode again (8 -> 4, not 3), a Fire,
    Dropout (opset-10 `ratio` attribute; identity at inference), final 1x1 Conv, Relu,
    GlobalAveragePool, Flatten."""
    g = G(10, seed=62)

    def fire(x, cin, sq, e1, e3):
        s = g.op("Relu", [g.conv(x, cin, sq, 1)])
        return g.op("Concat", [g.op("Relu", [g.conv(s, sq, e1, 1)]), g.op("Relu", [g.conv(s, sq, e3, 3)])], axis=1)

    def pool(x):
        return g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)

    x = pool(g.op("Relu", [g.conv("data", 3, 16, 7, stride=2, pad=0)]))   # 37 -> 16 -> 8
    x = fire(x, 16, 4, 8, 8)
    x = pool(fire(x, 16, 4, 8, 8))                                         # 8 -> 4
    x = fire(x, 16, 6, 12, 12)
    x = g.op("Dropout", [x], ratio=0.5)
    x = g.op("Relu", [g.conv(x, 24, 10, 1)])
    g.op("Flatten", [g.op("GlobalAveragePool", [x])], name="flatten", outs=["logits"], axis=1)
    feeds = {"data": np.random.default_rng(62).standard_normal((2, 3, 37, 37)).astype(np.float32)}
    return g.model([_vi("data", ["N", 3, 37, 37])], [_vi("logits", ["N", 10])], "squeezenet_fire"), \
        feeds, (1e-4, 1e-5)


def inception_v3_block():
    """A torchvision InceptionV3-style InceptionC block at opset 11: BasicConv2d (Conv without
    bias, BatchNormalization eps 1e-3, Relu) with asymmetric 1x7 and 7x1 kernels and pads
    [0,3,0,3] / [3,0,3,0], the double 7x7 branch (7x1, 1x7, 7x1, 1x7), the pool branch
    AveragePool 3x3 s1 pad 1 with count_include_pad=1 (F.avg_pool2d's default), Concat of the
    four branches, then GlobalAveragePool, Flatten, Gemm."""
    g = G(11, seed=63)

    def basic(x, cin, cout, kh, kw, stride=1):
        ph, pw = kh // 2, kw // 2
        w = g.w(cout, cin, kh, kw, scale=np.sqrt(2.0 / (cin * kh * kw)))
        y = g.op("Conv", [x, w], kernel_shape=[kh, kw], strides=[stride, stride], pads=[ph, pw, ph, pw])
        r = g.rng
        y = g.op("BatchNormalization", [y, g.gamma(cout), g.w(cout, scale=0.1, stem="beta"),
                                        g.const(0.1 * r.standard_normal(cout), "mean"),
                                        g.const(1 + 0.2 * np.abs(r.standard_normal(cout)), "var")], epsilon=1e-3)
        return g.op("Relu", [y])

    x = basic("x", 3, 16, 3, 3, stride=2)                                              # 12x12
    x = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2])                      # 5x5
    c7 = 8
    b1 = basic(x, 16, 12, 1, 1)
    b7 = basic(basic(basic(x, 16, c7, 1, 1), c7, c7, 1, 7), c7, 12, 7, 1)
    bd = basic(x, 16, c7, 1, 1)
    for kh, kw, cout in ((7, 1, c7), (1, 7, c7), (7, 1, c7), (1, 7, 12)):
        bd = basic(bd, c7, cout, kh, kw)
    bp = g.op("AveragePool", [x], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1], count_include_pad=1)
    bp = basic(bp, 16, 12, 1, 1)
    y = g.op("Concat", [b1, b7, bd, bp], axis=1)
    f = g.op("Flatten", [g.op("GlobalAveragePool", [y])], axis=1)
    g.op("Gemm", [f, g.w(10, 48, stem="fc_w"), g.w(10, scale=0.1, stem="fc_b")], name="fc", outs=["logits"],
         transB=1)
    feeds = {"x": np.random.default_rng(63).standard_normal((2, 3, 24, 24)).astype(np.float32)}
    return g.model([_vi("x", ["batch", 3, 24, 24])], [_vi("logits", ["batch", 10])], "inception_v3_block"), \
        feeds, (1e-4, 1e-4)


def maskrcnn_roi_heads():
    """Mask R-CNN-like RoI heads (torchvision-shaped) at opset 16: a strided Conv backbone to 1/2,
    RoiAlign (output 7x7, sampling_ratio 2, spatial_scale 0.5, opset-16 half_pixel = aligned)
    over `rois` [num_rois, 4] of symbolic count with batch_indices made in the graph
    (Shape/Gather/Unsqueeze/ConstantOfShape int64 zeros, as torchvision's export writes them),
    the box head (Flatten, Gemm transB + Relu twice, class Softmax and box-delta Gemm) and
    the mask head (Conv 3x3 + Relu, ConvTranspose 2x2 s2, Relu, 1x1 Conv, Sigmoid)."""
    g = G(16, seed=64)
    c, nc, r = 8, 3, 7
    x = g.op("Relu", [g.conv("image", 3, c, 3)])
    feat = g.op("Relu", [g.conv(x, c, c, 3, stride=2)])                                  # [1, 8, 12, 12]
    n = g.op("Unsqueeze", [g.op("Gather", [g.op("Shape", ["rois"]), g.const(0, "idx", np.int64)], axis=0),
                           g.const([0], "ax", np.int64)])
    bi = g.op("ConstantOfShape", [n], value=h.make_tensor("v", T.INT64, [1], [0]))
    pooled = g.op("RoiAlign", [feat, "rois", bi], output_height=r, output_width=r, sampling_ratio=2,
                  spatial_scale=0.5, mode="avg", coordinate_transformation_mode="half_pixel")   # [N, 8, 7, 7]
    f = g.op("Flatten", [pooled], axis=1)
    for din in (c * r * r, 32):
        f = g.op("Relu", [g.op("Gemm", [f, g.w(32, din), g.w(32, scale=0.1, stem="b")], transB=1)])
    cls = g.op("Gemm", [f, g.w(nc + 1, 32), g.w(nc + 1, scale=0.1, stem="b")], transB=1)
    g.op("Softmax", [cls], name="cls_prob", outs=["scores"], axis=-1)
    g.op("Gemm", [f, g.w(4 * (nc + 1), 32), g.w(4 * (nc + 1), scale=0.1, stem="b")], name="bbox_pred",
         outs=["box_deltas"], transB=1)
    m = g.op("Relu", [g.conv(pooled, c, c, 3)])
    m = g.op("Relu", [g.op("ConvTranspose", [m, g.w(c, c, 2, 2, scale=0.3), g.w(c, scale=0.05, stem="b")],
                           kernel_shape=[2, 2], strides=[2, 2])])                          # 14x14
    g.op("Sigmoid", [g.conv(m, c, nc, 1)], name="mask_prob", outs=["masks"])
    rng = np.random.default_rng(64)
    xy = rng.uniform(0, 14, (5, 2))
    wh = rng.uniform(3, 10, (5, 2))
    rois = np.concatenate([xy, np.minimum(xy + wh, 23.5)], 1).astype(np.float32)
    feeds = {"image": rng.standard_normal((1, 3, 24, 24)).astype(np.float32), "rois": rois}
    return g.model([_vi("image", [1, 3, 24, 24]), _vi("rois", ["num_rois", 4])],
                   [_vi("scores", ["num_rois", nc + 1]), _vi("box_deltas", ["num_rois", 4 * (nc + 1)]),
                    _vi("masks", ["num_rois", nc, 14, 14])], "maskrcnn_roi_heads"), feeds, (1e-4, 1e-4)


def detr_decoder():
    """A DETR decoder layer (HF DetrDecoderLayer-shaped, batch first) at opset 17, one of layers
    2-6: `hidden_states` [B, Q, d] from the layer before, backbone `features` through the 1x1
    input_proj Conv and flattened to the encoder memory [B, HW, d] (encoder omitted), and
    `pixel_mask` [B, H, W] (one image padded). The sine position embedding is computed in the
    graph from the mask (Cast, CumSum over H and W, normalize by the last row/column * 2pi, Div
    by dim_t, Sin of the even and Cos of the odd channels by Slice with step 2,
    Unsqueeze/Concat/Reshape interleave, Concat y|x); the learned query_embed initializer is
    Expand'ed over the batch (Shape/Gather/Concat); post-norm self-attention
    (q = k = hidden + query_pos), cross-attention (q = hidden + query_pos, k = memory + pos,
    v = memory) with the padded keys masked by (1 - mask) * -1e9, ReLU FFN, LayerNorms; class
    logits and a Sigmoid box MLP."""
    g = G(17, seed=65)
    d, heads, nq, hw, cin = 16, 2, 6, 4, 12
    npf = d // 2
    dh = d // heads

    def attn(q_in, k_in, v_in, mask=None):
        split = g.const([0, -1, heads, dh], "split", np.int64)
        q = g.op("Transpose", [g.op("Reshape", [g.linear(q_in, d, d), split])], perm=[0, 2, 1, 3])
        k = g.op("Transpose", [g.op("Reshape", [g.linear(k_in, d, d), split])], perm=[0, 2, 3, 1])
        v = g.op("Transpose", [g.op("Reshape", [g.linear(v_in, d, d), split])], perm=[0, 2, 1, 3])
        q = g.op("Mul", [q, g.const(1 / np.sqrt(dh), "scaling")])
        s = g.op("MatMul", [q, k])
        if mask is not None:
            s = g.op("Add", [s, mask])
        p = g.op("Softmax", [s], axis=-1)
        c = g.op("Transpose", [g.op("MatMul", [p, v])], perm=[0, 2, 1, 3])
        return g.linear(g.op("Reshape", [c, g.const([0, -1, d], "merge", np.int64)]), d, d)

    src = g.conv("features", cin, d, 1, pad=0)                                           # input_proj
    memory = g.op("Transpose", [g.op("Reshape", [src, g.const([0, d, -1], "s", np.int64)])], perm=[0, 2, 1])
    # sine position embedding (normalize=True, scale=2pi, temperature=10000)
    not_mask = g.op("Cast", ["pixel_mask"], to=T.FLOAT)                                  # [B, H, W]
    pos = []
    dim_t = 10000.0 ** (2 * (np.arange(npf) // 2) / npf)
    for axis in (1, 2):
        e = g.op("CumSum", [not_mask, g.const(axis, "axis", np.int64)])
        last = g.op("Slice", [e, g.const([-1], "st", np.int64), g.const([2 ** 31], "en", np.int64),
                              g.const([axis], "ax", np.int64)])
        e = g.op("Mul", [g.op("Div", [e, g.op("Add", [last, g.const(1e-6, "eps")])]), g.const(2 * np.pi, "scale")])
        p = g.op("Div", [g.op("Unsqueeze", [e, g.const([3], "ax", np.int64)]), g.const(dim_t, "dim_t")])
        ev = g.op("Sin", [g.op("Slice", [p, g.const([0], "st", np.int64), g.const([npf], "en", np.int64),
                                         g.const([3], "ax", np.int64), g.const([2], "step", np.int64)])])
        od = g.op("Cos", [g.op("Slice", [p, g.const([1], "st", np.int64), g.const([npf], "en", np.int64),
                                         g.const([3], "ax", np.int64), g.const([2], "step", np.int64)])])
        st = g.op("Concat", [g.op("Unsqueeze", [ev, g.const([4], "ax", np.int64)]),
                             g.op("Unsqueeze", [od, g.const([4], "ax", np.int64)])], axis=4)
        pos.append(g.op("Reshape", [st, g.const([0, 0, 0, -1], "s", np.int64)]))
    pe = g.op("Reshape", [g.op("Concat", pos, axis=3), g.const([0, -1, d], "s", np.int64)])   # [B, HW, d]
    key_mask = g.op("Reshape", [g.op("Mul", [g.op("Sub", [g.const(1.0), not_mask]), g.const(-1e9, "neg")]),
                                g.const([0, 1, 1, -1], "s", np.int64)])                  # [B, 1, 1, HW]
    # learned queries over the batch
    bq = g.op("Concat", [g.op("Gather", [g.op("Shape", ["hidden_states"]), g.const([0], "idx", np.int64)], axis=0),
                         g.const([nq, d], "s", np.int64)], axis=0)
    query_pos = g.op("Expand", [g.w(1, nq, d, scale=1.0, stem="query_embed"), bq])
    tgt = "hidden_states"
    qk = g.op("Add", [tgt, query_pos])
    tgt = g.layer_norm(g.op("Add", [tgt, attn(qk, qk, tgt)]), d)
    ca = attn(g.op("Add", [tgt, query_pos]), g.op("Add", [memory, pe]), memory, key_mask)
    tgt = g.layer_norm(g.op("Add", [tgt, ca]), d)
    ff = g.linear(g.op("Relu", [g.linear(tgt, d, 2 * d)]), 2 * d, d)
    hs = g.layer_norm(g.op("Add", [tgt, ff]), d)
    g.op("Add", [g.op("MatMul", [hs, g.w(d, 5)]), g.w(5, scale=0.1, stem="b")], name="class_embed",
         outs=["pred_logits"])
    b = g.op("Relu", [g.linear(hs, d, d)])
    g.op("Sigmoid", [g.linear(b, d, 4)], name="bbox_sigmoid", outs=["pred_boxes"])
    rng = np.random.default_rng(65)
    pm = np.ones((2, hw, hw), np.int64)
    pm[1, 3:, :] = 0
    pm[1, :, 2:] = 0                                   # image 2 padded to the bottom and right
    feeds = {"features": rng.standard_normal((2, cin, hw, hw)).astype(np.float32), "pixel_mask": pm,
             "hidden_states": rng.standard_normal((2, nq, d)).astype(np.float32)}
    return g.model([_vi("features", ["batch", cin, hw, hw]), _vi("pixel_mask", ["batch", hw, hw], T.INT64),
                    _vi("hidden_states", ["batch", nq, d])],
                   [_vi("pred_logits", ["batch", nq, 5]), _vi("pred_boxes", ["batch", nq, 4])],
                   "detr_decoder"), feeds, (1e-4, 1e-4)

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
# sr is a switch: plans are made per its value, the If takes its branch while planning and
# everything after it has static shapes again (vkml/compile/inline_if.py).
_VAD_CPU = {"Equal_0": FOLD + " (sr == 16000 for the fed sr: the If's condition, so the If runs its branch "
                              "in its place)"}

ZOO: dict[str, Entry] = {
    "vit_tiny": Entry(vit_tiny, 21, "vision: classification", "class token Shape/Expand/Concat; opset 21, IR 10", {
        "Shape_0": FOLD, "Concat_0": FOLD, "Expand_0": FOLD + " (the class token broadcast to the batch)"}),
    "unet_seg": Entry(unet_seg, 13, "vision: segmentation",
                      "ConvTranspose, Concat skips, Resize nearest + linear (scales and sizes)"),
    "yolo_head": Entry(yolo_head, 11, "vision: detection",
                       "box decode in graph, TopK + NonMaxSuppression (rows padded to their bound)"),
    "dbnet_det": Entry(dbnet_det, 10, "OCR: detector",
                       "Paddle2ONNX-style batch -1; opset-10 Resize (scales only), ConvTranspose"),
    "crnn_rec": Entry(crnn_rec, 12, "OCR: recognizer", "bidirectional LSTM, CTC greedy ArgMax"),
    "paddle_cls": Entry(paddle_cls, 11, "OCR: direction classifier",
                        "Paddle2ONNX: batch dim_value -1, hard-swish as HardSigmoid * x, SE block"),
    "tf2onnx_cnn": Entry(tf2onnx_cnn, 13, "vision: classification",
                         "tf2onnx: NHWC input, Transpose around Conv, Clip ReLU6, Squeeze axes input"),
    "opset9_cnn": Entry(opset9_cnn, 9, "vision: classification", "opset 9: ConstantOfShape + Add bias, Upsample", {
        "ConstantOfShape_0": FOLD, "Add_0": FOLD + " (the conv bias)"}),
    "mobilenetv3_block": Entry(mobilenetv3_block, 14, "vision: classification",
                               "HardSwish op, SE gate HardSigmoid(1/6), depthwise 5x5, residual"),
    "efficientnet_mbconv": Entry(efficientnet_mbconv, 12, "vision: classification",
                                 "SiLU as Sigmoid * x, MBConv with SE, no drop-connect"),
    "convnext_block": Entry(convnext_block, 17, "vision: classification",
                            "depthwise 7x7, channel LayerNorm via Transpose, Erf GELU, layer scale"),
    "swin_window_attn": Entry(swin_window_attn, 16, "vision: classification",
                              "rank-6 window partition, roll as Slice + Concat, shift mask, "
                              "relative-position bias Gather", {
                                  "Gather_3": FOLD + " (relative-position bias lookup, block 1)",
                                  "Reshape_5": FOLD, "Transpose_4": FOLD, "Unsqueeze_0": FOLD,
                                  "Gather_7": FOLD + " (relative-position bias lookup, block 2)",
                                  "Reshape_14": FOLD, "Transpose_10": FOLD, "Unsqueeze_1": FOLD}),
    "deeplab_aspp": Entry(deeplab_aspp, 19, "vision: segmentation",
                          "dilated Convs, pooling branch, Resize linear sizes from Shape, align_corners", {
                              "Shape_0": FOLD, "Slice_0": FOLD, "Shape_1": FOLD, "Slice_1": FOLD,
                              "Concat_0": FOLD + " (pooling branch Resize sizes)",
                              "Shape_2": FOLD, "Slice_2": FOLD, "Shape_3": FOLD, "Slice_3": FOLD,
                              "Concat_2": FOLD + " (final upsample sizes)"}),
    "yolov8_head": Entry(yolov8_head, 17, "vision: detection",
                         "C2f Split/Concat, SiLU, Resize nearest, DFL Softmax + arange Conv, dist2bbox"),
    "silero_vad": Entry(silero_vad, 16, "speech: VAD", "If on sr (then branch), LSTM with fed state", _VAD_CPU),
    "silero_vad_8k": Entry(silero_vad_8k, 16, "speech: VAD", "If on sr (else branch)", _VAD_CPU),
    "whisper_encoder": Entry(whisper_encoder, 20, "speech: encoder", "Conv1d, Gelu op (opset 20)"),
    "wav2vec2_encoder": Entry(wav2vec2_encoder, 18, "speech: encoder",
                              "Conv1d stack, GroupNorm as Reshape/InstanceNormalization/Reshape, "
                              "positional conv + Slice", {"Shape_0": FOLD + " (GroupNorm's Reshape back)"}),
    "conformer_block": Entry(conformer_block, 15, "speech: encoder",
                             "macaron FFN, GLU as Split + Sigmoid * x, depthwise Conv1d, BatchNorm, Swish"),
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
    "gpt2_kv_step": Entry(gpt2_kv_step, 13, "NLP: decoder step",
                          "past key/value inputs Concat'ed (symbolic past length), causal mask Sliced "
                          "from the bias buffer at P, finfo.min Where", {
                              "Shape_0": FOLD, "Gather_0": FOLD + " (past length)", "Shape_1": FOLD,
                              "Gather_1": FOLD + " (sequence length)", "Add_0": FOLD + " (total length)",
                              "Range_0": FOLD + " (position ids P..P+S)", "Gather_3": FOLD + " (position embeddings)",
                              "Unsqueeze_0": FOLD, "Concat_0": FOLD, "Unsqueeze_1": FOLD, "Unsqueeze_2": FOLD,
                              "Concat_1": FOLD, "Slice_0": FOLD + " (causal mask rows P..P+S)",
                              "Transpose_10": FOLD + " (tied embedding transposed for the head)"}),
    "clip_text": Entry(clip_text, 12, "NLP: text encoder",
                       "causal mask Range/Less/Where, quick GELU, EOS pooling by ArgMax over input_ids", {
                           "Shape_0": FOLD, "Gather_0": FOLD + " (sequence length)", "Unsqueeze_0": FOLD,
                           "Slice_0": FOLD + " (position_ids buffer)", "Gather_2": FOLD + " (position embeddings)",
                           "Range_0": FOLD, "Add_1": FOLD, "Reshape_0": FOLD, "Less_0": FOLD,
                           "Where_0": FOLD + " (causal mask)", "Unsqueeze_1": FOLD,
                           "Gather_3": FOLD + " (batch size)", "Range_1": FOLD,
                           "Mul_9": FOLD + " (row offsets B * S)"}),
    "bert_token_type": Entry(bert_token_type, 11, "NLP: encoder",
                             "token_type_ids embedding, Unsqueeze axes attribute, Softmax axis 3 (opset 11), "
                             "Erf GELU, Tanh pooler"),
    "resnext_bottleneck": Entry(resnext_bottleneck, 8, "vision: classification",
                                "opset 8 / IR 3 (initializers also graph inputs), BatchNormalization spatial=1, "
                                "grouped 3x3 Conv (group=8), Gemm transB with C"),
    "squeezenet_fire": Entry(squeezenet_fire, 10, "vision: classification",
                             "Fire expand Concat, MaxPool ceil_mode (opset 10), Dropout ratio attribute"),
    "inception_v3_block": Entry(inception_v3_block, 11, "vision: classification",
                                "asymmetric 1x7/7x1 Convs and pads, AveragePool count_include_pad=1, BN eps 1e-3"),
    "maskrcnn_roi_heads": Entry(maskrcnn_roi_heads, 16, "vision: instance segmentation",
                                "RoiAlign (half_pixel) over symbolic num_rois, batch_indices by ConstantOfShape, "
                                "box head + ConvTranspose mask head", {
                                    "Shape_0": FOLD, "Gather_0": FOLD + " (number of RoIs)", "Unsqueeze_0": FOLD,
                                    "ConstantOfShape_0": FOLD + " (batch_indices: zeros)"}),
    "detr_decoder": Entry(detr_decoder, 17, "vision: detection",
                          "learned queries Expand'ed over the batch, sine position embedding from pixel_mask "
                          "(CumSum, step-2 Slice), cross-attention with key padding mask", {
                              "Shape_0": FOLD, "Gather_0": FOLD + " (batch size)", "Concat_3": FOLD,
                              "Expand_0": FOLD + " (query_embed over the batch)"}),
}


def plan_signature(model, feeds: dict) -> tuple[dict, dict]:
    """(input types, known values) of `feeds` as vkml.compile.pipeline.compile_signature takes
    them for a bound model: the graph's inputs typed, and small integer feeds (shape-like, as a
    session would plan for their values) known."""
    from vkml.ir.graph import TensorDesc

    arrays = {k: np.asarray(v) for k, v in feeds.items()}
    descs = {k: TensorDesc(a.dtype, tuple(a.shape)) for k, a in arrays.items() if k in model.graph.inputs}
    known = {k: a for k, a in arrays.items() if a.size <= 8 and a.dtype.kind in "iu"}
    return descs, known
