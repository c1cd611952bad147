"""Ops without a GPU kernel of their own, written as ops that have one, in plans with a GPU.

Shrink, MeanVarianceNormalization and ai.onnx.ml's Binarizer on float32 tensors: Less/Greater,
Add/Sub and Where; ReduceMean, Sub, Mul, Sqrt, Add and Div; Greater and Where, each as the CPU
operator computes it in float32 (Shrink and Binarizer bit for bit; MVN's means sum in another
order than NumPy's). ReduceMax / ReduceMin of bools in int32 and MaxPool of 8-bit integers in
float32, cast back: exact.

STFT (opset 17): the frames are a Gather of the signal by a constant index table (frame f, tap
l reads sample f * frame_step + l), times the window when there is one (a Mul, broadcast along
frames and the real/imaginary pair), then DFT along the taps (onesided as the node says): the
GPU's Gather, Mul and DFT kernels (vkml/kernels/dft.py). Where the shapes and frame_step /
frame_length are known while planning (constants, or fed values the plans are made for:
Op.shape_from_values) and the signal and window are float32; else the node stays, and its
operator (vkml/ops/signal.py) runs it or says what is wrong. The CPU operator's onesided
transform is NumPy's rfft, the DFT kernel's NumPy's fft cut to n // 2 + 1 bins: the same
values to float32 rounding, not bit for bit.

The last of the nodes takes the STFT's name and output, so its placement row is theirs.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from ..ir.graph import Node, TensorDesc
from ..ops.registry import lookup
from .inline_if import fresh_name

ONNX = ("", "ai.onnx")
F32 = np.dtype(np.float32)


def decompose(live: Sequence[Node], values: dict[str, TensorDesc], consts: dict[str, np.ndarray],
              outputs: Sequence[str], keep: frozenset[str]) -> tuple[list[Node], dict[str, list[Node]]]:
    """The pass: (the new node list, {new node name: [the node it stands for]}); the values
    and constants the new nodes make are added to `values` and `consts`."""
    out: list[Node] = []
    more: dict[str, list[Node]] = {}
    taken = set(values)
    for node in live:
        makers = MAKERS if node.domain in ONNX else ML_MAKERS if node.domain == "ai.onnx.ml" else {}
        make = makers.get(node.op_type) if node.name not in keep else None
        made = make(node, values, consts, taken) if make is not None else None
        if made is None:
            out.append(node)
            continue
        out.extend(made)
        more.update((n.name, [node]) for n in made)
    return out, more


class _Writer:
    """New nodes and values under the rewritten node's name."""

    def __init__(self, node: Node, values: dict[str, TensorDesc], consts: dict[str, np.ndarray], taken: set[str]):
        self.node, self.values, self.consts, self.taken = node, values, consts, taken
        self.nodes: list[Node] = []

    def fresh(self, tag: str) -> str:
        return fresh_name(tag, f"{self.node.name}/", self.taken, True)

    def const(self, tag: str, value: np.ndarray) -> str:
        name = self.fresh(tag)
        self.consts[name] = value
        self.values[name] = TensorDesc(value.dtype, value.shape)
        return name

    def op(self, op: str, ins: list[str], desc: TensorDesc, opset: int = 13, last: bool = False, **attrs) -> str:
        """An ONNX node; the last one writes the rewritten node's output under its name."""
        o = self.node.outputs[0] if last else self.fresh(op.lower())
        if not last:
            self.values[o] = desc
        n = Node(self.node.name if last else self.fresh(f"{op.lower()}_node"), op, "", ins, [o], attrs, opset)
        n.op = lookup("", op, opset)(n)
        self.nodes.append(n)
        return o


def _known_int(name: str | None, consts: Mapping[str, np.ndarray]) -> int | None:
    if not name:
        return None
    v = consts.get(name)
    if v is None or np.asarray(v).size != 1 or np.asarray(v).dtype.kind not in "iu":
        return None
    return int(np.asarray(v).reshape(-1)[0])


def _stft(node: Node, values, consts, taken) -> list[Node] | None:
    ins = list(node.inputs) + [""] * (4 - len(node.inputs))
    x = values.get(ins[0])
    if x is None or not x.static or x.dtype != F32 or len(x.shape) != 3 or x.shape[2] not in (1, 2):
        return None
    if len(node.outputs) != 1 or not node.outputs[0]:
        return None
    b, n, c = x.shape
    onesided = int(node.attrs.get("onesided", 1))
    if onesided and c == 2:
        return None  # (the operator's error)
    step = _known_int(ins[1], consts)
    if step is None or step < 1:
        return None
    length = _known_int(ins[3], consts) if ins[3] else None
    if ins[3] and length is None:
        return None
    window = values.get(ins[2]) if ins[2] else None
    if ins[2]:
        if window is None or not window.static or window.dtype != F32 or len(window.shape) != 1:
            return None
        if length is not None and length != window.shape[0]:
            return None
        length = window.shape[0]
    if length is None:
        length = n
    if not 1 <= length <= n:
        return None
    frames = (n - length) // step + 1
    bins = length // 2 + 1 if onesided else length
    w = _Writer(node, values, consts, taken)
    idx = np.arange(frames, dtype=np.int64)[:, None] * step + np.arange(length, dtype=np.int64)[None, :]
    y = w.op("Gather", [ins[0], w.const("taps", idx)], TensorDesc(F32, (b, frames, length, c)), axis=1)
    if ins[2]:
        win = w.op("Reshape", [ins[2], w.const("window_shape", np.array([1, 1, length, 1], np.int64))],
                   TensorDesc(F32, (1, 1, length, 1)))
        y = w.op("Mul", [y, win], TensorDesc(F32, (b, frames, length, c)))
    w.op("DFT", [y], TensorDesc(F32, (b, frames, bins, 2)), opset=17, last=True, axis=2, onesided=onesided, inverse=0)
    return w.nodes


def _float32_unary(node: Node, values) -> TensorDesc | None:
    """The input's type where `node` is a one-input, one-output node of a static float32 tensor."""
    x = values.get(node.inputs[0]) if node.inputs and node.inputs[0] else None
    if x is None or not x.static or x.dtype != F32 or len(node.outputs) != 1 or not node.outputs[0]:
        return None
    return x


def _shrink(node: Node, values, consts, taken) -> list[Node] | None:
    """Where(x < -lambd, x + bias, Where(x > lambd, x - bias, 0)), float32 throughout as the CPU
    operator computes it (its attributes are float32 constants against a float32 input)."""
    x = _float32_unary(node, values)
    if x is None:
        return None
    lambd, bias = float(node.attrs.get("lambd", 0.5)), float(node.attrs.get("bias", 0.0))
    w = _Writer(node, values, consts, taken)
    f32 = lambda tag, v: w.const(tag, np.array(v, np.float32))  # noqa: E731
    b = TensorDesc(np.dtype(bool), x.shape)
    low = w.op("Less", [node.inputs[0], f32("minus_lambd", -np.float32(lambd))], b)
    high = w.op("Greater", [node.inputs[0], f32("lambd", lambd)], b)
    up = w.op("Add", [node.inputs[0], f32("bias", bias)], x)
    down = w.op("Sub", [node.inputs[0], f32("bias", bias)], x)
    inner = w.op("Where", [high, down, f32("zero", 0.0)], x)
    w.op("Where", [low, up, inner], x, last=True)
    return w.nodes


def _mvn(node: Node, values, consts, taken) -> list[Node] | None:
    """(x - mean) / (sqrt(mean((x - mean)^2)) + 1e-9) over the axes, float32 (the CPU operator's
    formula; its sums are NumPy's pairwise ones, the GPU's in another order)."""
    x = _float32_unary(node, values)
    if x is None:
        return None
    r = len(x.shape)
    axes = node.attrs.get("axes")
    axes = [0, 2, 3] if axes is None else list(axes)
    if any(not -r <= int(a) < r for a in axes):
        return None  # (the operator's error)
    axes = sorted({int(a) % r for a in axes})
    kept = tuple(1 if k in axes else d for k, d in enumerate(x.shape))
    w = _Writer(node, values, consts, taken)
    m = TensorDesc(F32, kept)
    mean = w.op("ReduceMean", [node.inputs[0]], m, axes=axes, keepdims=1)
    d = w.op("Sub", [node.inputs[0], mean], x)
    var = w.op("ReduceMean", [w.op("Mul", [d, d], x)], m, axes=axes, keepdims=1)
    den = w.op("Add", [w.op("Sqrt", [var], m), w.const("eps", np.array(1e-9, np.float32))], m)
    w.op("Div", [d, den], x, last=True)
    return w.nodes


def _binarizer(node: Node, values, consts, taken) -> list[Node] | None:
    """Where(x > threshold, 1, 0) in x's type (float32: NumPy compares with the threshold in
    float32 too)."""
    x = _float32_unary(node, values)
    if x is None:
        return None
    w = _Writer(node, values, consts, taken)
    above = w.op("Greater", [node.inputs[0], w.const("threshold", np.array(float(node.attrs.get("threshold", 0.0)),
                                                                              np.float32))],
                 TensorDesc(np.dtype(bool), x.shape))
    w.op("Where", [above, w.const("one", np.array(1, np.float32)), w.const("zero", np.array(0, np.float32))], x,
         last=True)
    return w.nodes


def _widened(node: Node, values, consts, taken, wide: np.dtype, dst: np.dtype) -> list[Node]:
    """`node` on its first input cast to `wide`, its one output cast back to `dst`."""
    x = values[node.inputs[0]]
    w = _Writer(node, values, consts, taken)
    xw = w.op("Cast", [node.inputs[0]], TensorDesc(wide, x.shape), to=_onnx_type(wide))
    y = values[node.outputs[0]]
    yw = w.fresh("wide")
    values[yw] = TensorDesc(wide, y.shape)
    n = Node(w.fresh("op_node"), node.op_type, node.domain, [xw] + list(node.inputs[1:]), [yw], dict(node.attrs),
             node.opset)
    n.op = type(node.op)(n)
    w.nodes.append(n)
    w.op("Cast", [yw], y, last=True, to=_onnx_type(dst))
    return w.nodes


def _onnx_type(dt: np.dtype) -> int:
    from onnx import helper

    return int(helper.np_dtype_to_tensor_dtype(np.dtype(dt)))


def _bool_extreme(node: Node, values, consts, taken) -> list[Node] | None:
    """ReduceMax / ReduceMin of bools ("any" / "all" of a mask) in int32, cast back: the GPU
    reduces int32. Not over empty inputs: int32's identities are no bools."""
    x = values.get(node.inputs[0]) if node.inputs and node.inputs[0] else None
    if x is None or not x.static or x.dtype != np.dtype(bool) or 0 in x.shape:
        return None
    if len(node.outputs) != 1 or not node.outputs[0] or values.get(node.outputs[0]) is None:
        return None
    return _widened(node, values, consts, taken, np.dtype(np.int32), np.dtype(bool))


def _small_int_pool(node: Node, values, consts, taken) -> list[Node] | None:
    """MaxPool of 8-bit integers in float32 (exact), cast back; only its values (no Indices
    output) and only where no window lies wholly in the padding."""
    x = values.get(node.inputs[0]) if node.inputs and node.inputs[0] else None
    if x is None or not x.static or x.dtype not in (np.dtype(np.uint8), np.dtype(np.int8)):
        return None
    if len([o for o in node.outputs if o]) != 1 or not node.outputs[0] or values.get(node.outputs[0]) is None:
        return None
    ks = list(node.attrs.get("kernel_shape") or [])
    pads = list(node.attrs.get("pads") or [0] * (2 * len(ks)))
    if not ks or any(p >= k for p, k in zip(pads, ks + ks)):
        return None
    return _widened(node, values, consts, taken, F32, x.dtype)


MAKERS = {"STFT": _stft, "Shrink": _shrink, "MeanVarianceNormalization": _mvn, "ReduceMax": _bool_extreme,
          "ReduceMin": _bool_extreme, "MaxPool": _small_int_pool}
ML_MAKERS = {"Binarizer": _binarizer}  # (ai.onnx.ml)
