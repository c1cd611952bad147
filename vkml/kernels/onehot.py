"""GPU kernels for OneHot (shaders/onehot.comp) and EyeLike (shaders/eyelike.comp): index-built
tensors whose elements are the bits of one of two values, so every output dtype works (the
shaders move ESIZE-byte words, like the data-movement kernels) and the results equal the CPU
operators' (vkml/ops/gather.py) bit for bit.

OneHot (opsets 9, 11): depth must be known on the host (it sets the output shape:
Kernel.host_inputs), values may be fed (read on the device). Indices int8/16/32/64, uint8/16/32/64,
float16/float32 (truncated toward zero as the CPU operator truncates; uint64 wraps to int64 as its
astype does), negative ones from the end once, out-of-range ones matching no class. On the CPU
instead: depth unknown on the host or not one value, depth < 1 or above 2^30, values not two
elements, float64 or other index dtypes, string values.

EyeLike: the input's shape only (Kernel.shape_inputs: never bound), dtype attribute or the
input's, any k. On the CPU instead: inputs not 2-D (the CPU operator reports the error), string
dtypes.
"""
from __future__ import annotations

import math

import numpy as np

from ..ir import dtypes
from .common import PushBlock
from .elem import HostInputs, elem_name, require_bindable, require_elements, specs_of
from .reduce import normalize_axis
from .registry import Kernel, TensorSpec, Unsupported, register

ONEHOT_PUSH = PushBlock("3I", "onehot")  # n, depth, inner
EYELIKE_PUSH = PushBlock("2Ii2I", "eyelike")  # n, cols, k, one's bits (low, high)
# index dtype -> the shader's variant suffix
INDEX_SUFFIX = {np.dtype(np.int8): "i8", np.dtype(np.int16): "i16", np.dtype(np.int32): "i32",
                np.dtype(np.uint8): "u8", np.dtype(np.uint16): "u16", np.dtype(np.uint32): "u32",
                np.dtype(np.float16): "f16", np.dtype(np.float32): "f32",
                np.dtype(np.int64): "x64", np.dtype(np.uint64): "x64"}
INDEX_FEATURE = {1: "storage_8bit", 2: "storage_16bit"}
MAX_DEPTH = 1 << 30


def _depth(inputs, consts=None) -> int:
    v = HostInputs(inputs, consts).array(1, "OneHot's depth")
    if v is None:
        raise Unsupported("OneHot needs its depth")
    v = np.asarray(v).reshape(-1)
    if v.size != 1:
        raise Unsupported(f"OneHot: depth of {v.size} values (the CPU operator reports the error)")
    d = int(v[0])
    if d < 1:
        raise Unsupported(f"OneHot: depth {d} (the CPU operator reports the error)")
    if d > MAX_DEPTH:
        raise Unsupported(f"OneHot: depth {d} over {MAX_DEPTH}")
    return d


@register
class OneHotKernel(Kernel):
    op_types = ("OneHot",)
    host_inputs = {"OneHot": (1,)}

    def plan(self, attrs, inputs, consts=None) -> tuple[int, int, tuple[int, ...]]:
        """(axis, depth, output shape)."""
        if len(inputs) != 3 or any(t is None for t in inputs):
            raise Unsupported("OneHot takes indices, depth and values")
        idx = tuple(inputs[0].shape)
        d = _depth(inputs, consts)
        a = normalize_axis(int(attrs.get("axis", -1)), len(idx) + 1, "OneHot")
        return a, d, idx[:a] + (d,) + idx[a:]

    def check(self, device, op_type, attrs, inputs):
        _, _, out = self.plan(attrs, inputs)
        idx, _, values = inputs
        it = np.dtype(idx.dtype)
        if it not in INDEX_SUFFIX:
            raise Unsupported(f"OneHot indices of dtype {it}")
        feat = INDEX_FEATURE.get(it.itemsize)
        if feat and feat not in device.features:
            raise Unsupported(f"{it} indices need {feat}, which {device.name} lacks")
        if math.prod(values.shape) != 2:
            raise Unsupported(f"OneHot: values of shape {tuple(values.shape)}, not two (the CPU operator reports the error)")
        require_elements(device, values.dtype)
        require_bindable(device, idx, values, TensorSpec(out, values.dtype))

    def infer(self, op_type, attrs, inputs):
        return [TensorSpec(self.plan(attrs, inputs)[2], np.dtype(inputs[2].dtype))]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        idx, _, values = inputs
        out = outputs[0]
        a, d, shape = self.plan(attrs, specs_of(inputs, consts), consts)
        n = math.prod(shape)
        if n == 0:
            return
        inner = math.prod(idx.shape[a:])
        name = f"onehot_{elem_name(values.dtype)}_{INDEX_SUFFIX[np.dtype(idx.dtype)]}"
        p = rec.device.pipeline(name, "rrw", ONEHOT_PUSH.size)
        rec.dispatch(p, [idx.view, values.view, out.view], ONEHOT_PUSH.pack(n, d, inner), p.groups_for(n))


def _eyelike_dtype(attrs, x) -> np.dtype:
    dt = attrs.get("dtype")
    if dt is None:
        return np.dtype(x.dtype)
    try:
        return np.dtype(dtypes.np_dtype(int(dt)))
    except KeyError:
        raise Unsupported(f"EyeLike dtype {dt} (the CPU operator reports the error)") from None


@register
class EyeLikeKernel(Kernel):
    op_types = ("EyeLike",)
    shape_inputs = {"EyeLike": (0,)}

    def check(self, device, op_type, attrs, inputs):
        if len(inputs) != 1 or inputs[0] is None:
            raise Unsupported("EyeLike takes one input")
        x = inputs[0]
        if len(x.shape) != 2:
            raise Unsupported(f"EyeLike of an input of rank {len(x.shape)} (the CPU operator reports the error)")
        dt = _eyelike_dtype(attrs, x)
        require_elements(device, dt)
        require_bindable(device, TensorSpec(tuple(x.shape), dt))

    def infer(self, op_type, attrs, inputs):
        return [TensorSpec(tuple(inputs[0].shape), _eyelike_dtype(attrs, inputs[0]))]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        out = outputs[0]
        rows, cols = out.shape
        n = rows * cols
        if n == 0:
            return
        dt = np.dtype(out.dtype)
        one = np.zeros(8, np.uint8)
        one[:dt.itemsize] = np.ones((), np.float32).astype(dt).reshape(1).view(np.uint8)
        lo, hi = (int(w) for w in one.view(np.uint32))
        k = int(attrs.get("k", 0) or 0)
        k = max(-(1 << 31), min(k, (1 << 31) - 1))  # (beyond any row or column: all zeros either way)
        p = rec.device.pipeline(f"eyelike_{elem_name(dt)}", "w", EYELIKE_PUSH.size)
        rec.dispatch(p, [out.view], EYELIKE_PUSH.pack(n, cols, k, lo, hi), p.groups_for(n))
