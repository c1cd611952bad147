"""Reshape, Flatten, Squeeze, Unsqueeze, Identity: the output is the input's bytes under a
new shape, so these kernels set Kernel.alias and record nothing when the runtime hands
them outputs[0] = inputs[0].reshape(shape). Handed a separate output buffer instead, they
copy (vkCmdCopyBuffer), so a runtime that ignores aliasing still gets right answers.

BitCast (opset 26) is the same kind of view: the input's bytes under another dtype of the
same width (the runtime's tensor for the output carries the output value's dtype over the
input's buffer). ONNX requires equal bit widths, and so does the CPU operator (it reports
the error), so other pairs are refused; so are dtypes a device tensor cannot hold (string,
complex) and constant inputs (a view of a constant would keep the constant's dtype).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from vkml.ops.shape import reshape_target

from .elem import HostInputs, require_elements
from .registry import Kernel, TensorSpec, Unsupported, register


class _Shim:
    """Stands in for the vkml.ops node that the shape helpers report errors through."""

    def __init__(self, op_type: str):
        self.op_type = op_type

    def fail(self, msg: str) -> Unsupported:
        return Unsupported(f"{self.op_type}: {msg}")


def _norm_axes(op_type: str, axes: Sequence[int], rank: int) -> list[int]:
    out = []
    for a in axes:
        if not -rank <= a < rank:
            raise Unsupported(f"{op_type}: axis {a} out of range for rank {rank}")
        out.append(a + rank if a < 0 else a)
    if len(set(out)) != len(out):
        raise Unsupported(f"{op_type}: axes {list(axes)} repeat an axis")
    return out


def _out_shape(op_type: str, attrs, inputs, hi: HostInputs) -> tuple[int, ...]:
    x = inputs[0]
    shape = tuple(x.shape)
    rank = len(shape)
    if op_type == "Identity":
        return shape
    if op_type == "Reshape":
        target = attrs.get("shape") if "shape" in attrs else hi.ints(1, "Reshape's shape")
        if target is None:
            raise Unsupported("Reshape needs a shape")
        return tuple(reshape_target(_Shim(op_type), shape, [int(v) for v in target],
                                    bool(attrs.get("allowzero", 0))))
    if op_type == "Flatten":
        a = int(attrs.get("axis", 1))
        if not -rank <= a <= rank:
            raise Unsupported(f"Flatten: axis {a} out of range for rank {rank}")
        a = a + rank if a < 0 else a
        outer = 1
        for d in shape[:a]:
            outer *= d
        inner = 1
        for d in shape[a:]:
            inner *= d
        return (outer, inner)
    if op_type == "Squeeze":
        axes = attrs.get("axes") if "axes" in attrs else hi.ints(1, "Squeeze's axes")
        if axes is None:
            return tuple(d for d in shape if d != 1)
        drop = _norm_axes(op_type, [int(a) for a in axes], rank)
        if any(shape[a] != 1 for a in drop):
            raise Unsupported(f"Squeeze: axes {list(axes)} of shape {list(shape)} are not all 1")
        return tuple(d for i, d in enumerate(shape) if i not in drop)
    # Unsqueeze
    axes = attrs.get("axes") if "axes" in attrs else hi.ints(1, "Unsqueeze's axes")
    if axes is None:
        raise Unsupported("Unsqueeze needs axes")
    new = set(_norm_axes(op_type, [int(a) for a in axes], rank + len(axes)))
    it = iter(shape)
    return tuple(1 if i in new else next(it) for i in range(rank + len(new)))


@register
class ViewKernel(Kernel):
    op_types = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity")
    alias = True
    host_inputs = {"Reshape": (1,), "Squeeze": (1,), "Unsqueeze": (1,)}

    def check(self, device, op_type, attrs, inputs):
        if not inputs or inputs[0] is None:
            raise Unsupported(f"{op_type} needs its data input")
        if op_type == "Identity" and len(inputs) != 1:
            raise Unsupported("Identity takes one input")
        require_elements(device, inputs[0].dtype)
        self.infer(op_type, attrs, inputs)

    def infer(self, op_type, attrs, inputs):
        return [TensorSpec(_out_shape(op_type, attrs, inputs, HostInputs(inputs)), inputs[0].dtype)]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        x, out = inputs[0], outputs[0]
        if out.view is x.view or not x.nbytes:
            return  # aliased (the normal case) or nothing to move
        rec.copy(x.view, out.view, x.nbytes)


def _bitcast_target(attrs) -> np.dtype:
    from vkml.ir.dtypes import np_dtype

    to = attrs.get("to")
    try:
        return np_dtype(int(to))
    except (KeyError, TypeError, ValueError):
        raise Unsupported(f"BitCast to ONNX type {to!r}") from None


@register
class BitCastKernel(Kernel):
    """BitCast: output 0 is input 0's bytes read as the target dtype (Kernel.alias)."""

    op_types = ("BitCast",)
    alias = True

    def check(self, device, op_type, attrs, inputs):
        if len(inputs) != 1 or inputs[0] is None:
            raise Unsupported("BitCast takes one input")
        x = inputs[0]
        from vkml.ops.cast import _bits  # bits per element as ONNX counts them (int4/float4 4, int2 2)

        to = _bitcast_target(attrs)
        require_elements(device, x.dtype, to)
        if _bits(x.dtype) != _bits(to):
            raise Unsupported(f"BitCast from {x.dtype} ({_bits(x.dtype)} bits) to {to} ({_bits(to)} bits): "
                              "ONNX requires equal widths (the CPU operator reports the error)")
        if getattr(x, "value", None) is not None:
            raise Unsupported("BitCast of a constant (folded or run on the CPU: a view of a device constant "
                              "keeps the constant's dtype)")

    def infer(self, op_type, attrs, inputs):
        return [TensorSpec(tuple(inputs[0].shape), _bitcast_target(attrs))]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        x, out = inputs[0], outputs[0]
        if out.view is x.view:
            return
        if x.nbytes:
            rec.copy(x.view, out.view, x.nbytes)


@register
class DropoutKernel(Kernel):
    """Dropout at inference (and training with ratio 0): the data unchanged, the optional mask
    all ones (bool from opset 10, the input's type before). Training with a ratio draws random
    numbers: that stays on the CPU."""

    op_types = ("Dropout",)
    host_inputs = {"Dropout": (1, 2)}

    def check(self, device, op_type, attrs, inputs):
        if not inputs or inputs[0] is None:
            raise Unsupported("Dropout needs its data input")
        require_elements(device, inputs[0].dtype)
        if attrs.get("_opset", 1) >= 12:
            hi = HostInputs(inputs)
            ratio = hi.array(1, "ratio")
            training = hi.array(2, "training_mode")
            if training is not None and bool(training.reshape(-1)[0]) and \
                    (ratio is None or float(ratio.reshape(-1)[0]) != 0.0):
                raise Unsupported("training-mode Dropout draws random numbers: it runs on the CPU")

    def infer(self, op_type, attrs, inputs):
        x = inputs[0]
        mask = x.dtype if attrs.get("_opset", 1) < 10 else np.dtype(np.bool_)
        return [TensorSpec(x.shape, x.dtype), TensorSpec(x.shape, mask)][: max(1, attrs.get("_num_outputs", 1))]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        x = inputs[0]
        if outputs[0] is not None and x.nbytes:
            rec.copy(x.view, outputs[0].view, x.nbytes)
        if len(outputs) > 1 and outputs[1] is not None and outputs[1].nbytes:
            ones = np.ones(outputs[1].shape, outputs[1].dtype)
            rec.copy(rec.constants(ones.reshape(-1).view(np.uint8)), outputs[1].view, outputs[1].nbytes)
