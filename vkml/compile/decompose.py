"""Ops without a GPU kernel of their own, written as ops that have one, in plans with a GPU.

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
        make = MAKERS.get(node.op_type) if node.domain in ONNX and node.name not in keep else None
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
        name, k = f"{self.node.name}/{tag}", 1
        while name in self.taken:
            name, k = f"{self.node.name}/{tag}#{k}", k + 1
        self.taken.add(name)
        return name

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


MAKERS = {"STFT": _stft}
