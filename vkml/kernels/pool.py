"""GPU kernels for pooling: MaxPool (with its optional Indices output), AveragePool, LpPool
(any p > 0) over 1-D to 3-D windows (shaders/pool.comp), and GlobalAveragePool,
GlobalMaxPool, GlobalLpPool (p = 1 or 2) as reductions over the spatial axes
(shaders/reduce.comp).

LpPool: p = 1 and 2 sum |v| and v * v in the CPU operator's tap order (then sqrt for 2); other p
(pool_lpp variants) sum |v|^p, by repeated multiplication for an integer p up to LP_INT_MAX and
by vkml_pow (exp2(p log2 |v|)) otherwise, then take the sum to the power float32(1 / p) with
vkml_pow, where the CPU operator calls powf both times: each term within (p - 1) u (integer p)
or about p 2^-21 (Vulkan's log2/exp2) relative of powf's, a sum of non-negative terms adding k u
over k taps, the root dividing the relative error by p: float32 results within rtol 1e-5 of the
CPU's for windows up to ~100 taps (tests/ops/test_gpu_lppool.py), float16 one float16 rounding
apart.

Window geometry (auto_pad, ceil_mode, pads, dilations) comes from the CPU operators' own
vkml.ops._window.resolve, so both agree on output sizes and padding. MaxPool's Indices output
is produced when the caller says the node has two outputs (attrs["_num_outputs"] = 2).
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from vkml.ops._window import AUTO_PADS, Window, auto_pad_name, resolve

from .common import PushBlock, dtype_name, require_dtypes
from .reduce import check_size, float_or, group_count, record_reduce, threads_wg
from .registry import Kernel, TensorSpec, Unsupported, register

POOL_PUSH = PushBlock("2I3I3I3I3I3I3I3I", "pool")  # 92 bytes
SHADER = {"MaxPool": "max", "AveragePool": "avg"}


def _ints(attrs: Mapping[str, Any], name: str) -> list[int] | None:
    v = attrs.get(name)
    return None if v is None else [int(e) for e in v]


def _num_outputs(attrs: Mapping[str, Any]) -> int:
    return int(attrs.get("_num_outputs", 1) or 1)


def _lp_p(op_type: str, attrs: Mapping[str, Any]) -> int:
    p = float(attrs.get("p", 2))
    if p not in (1.0, 2.0):
        raise Unsupported(f"{op_type} with p={p} (the GPU does p = 1 and 2)")
    return int(p)


LP_INT_MAX = 16  # LpPool: integer p up to this are raised by repeated multiplication
LPP_PUSH = PushBlock("2I3I3I3I3I3I3I3I2fI", "pool_lpp")  # POOL_PUSH, then p, float32(1 / p), integer p or 0


def _lpool_p(attrs: Mapping[str, Any]) -> float:
    """LpPool's p (any positive value; the CPU operator reports the others)."""
    p = float(attrs.get("p", 2))
    if not p > 0 or not np.isfinite(p):
        raise Unsupported(f"LpPool with p={p} (the CPU operator reports the error)")
    return p


def window(op_type: str, attrs: Mapping[str, Any], shape: Sequence[int]) -> Window:
    """The window geometry of a pool node on an input of `shape`; Unsupported where the GPU
    kernel does not go (or the CPU operator would report an error)."""
    if not 3 <= len(shape) <= 5:
        raise Unsupported(f"{op_type} on the GPU takes 1-D to 3-D windows, not an input of rank {len(shape)}")
    kernel = _ints(attrs, "kernel_shape")
    if kernel is None:
        if op_type == "LpPool":  # LpPool-1: the whole spatial extent
            kernel = list(shape[2:])
        else:
            raise Unsupported(f"{op_type} without kernel_shape")
    if len(kernel) != len(shape) - 2:
        raise Unsupported(f"kernel_shape {kernel} does not fit an input of shape {tuple(shape)}")
    auto_pad = auto_pad_name(attrs.get("auto_pad", "NOTSET"))
    if auto_pad not in AUTO_PADS:
        raise Unsupported(f"auto_pad {auto_pad!r}")
    try:
        w = resolve(shape[2:], kernel, _ints(attrs, "strides"), _ints(attrs, "dilations"), _ints(attrs, "pads"),
                    auto_pad, bool(int(attrs.get("ceil_mode", 0) or 0)))
    except ValueError as e:
        raise Unsupported(f"{op_type}: {e}") from None
    if any(p < 0 for p in w.pad_begin + w.explicit_end):
        raise Unsupported(f"{op_type} with negative pads")
    return w


def _pad3(v: Sequence[int], fill: int) -> list[int]:
    return [fill] * (3 - len(v)) + list(v)


@register
class PoolKernel(Kernel):
    op_types = ("MaxPool", "AveragePool", "LpPool")

    def check(self, device, op_type, attrs, inputs):
        if len(inputs) != 1 or inputs[0] is None:
            raise Unsupported(f"{op_type} takes one input")
        x = inputs[0]
        float_or(x.dtype, ("f32", "f16"), op_type)
        require_dtypes(device, x.dtype)
        if op_type == "LpPool":
            _lpool_p(attrs)
        if _num_outputs(attrs) > (2 if op_type == "MaxPool" else 1):
            raise Unsupported(f"{op_type} with {_num_outputs(attrs)} outputs")
        window(op_type, attrs, x.shape)
        out = self.infer(op_type, attrs, inputs)
        check_size(device, x, *out)

    def infer(self, op_type, attrs, inputs):
        x = inputs[0]
        w = window(op_type, attrs, x.shape)
        shape = tuple(x.shape[:2]) + tuple(w.out)
        outs = [TensorSpec(shape, x.dtype)]
        if op_type == "MaxPool" and _num_outputs(attrs) == 2:
            outs.append(TensorSpec(shape, np.dtype(np.int64)))
        return outs

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        x, y = inputs[0], outputs[0]
        idx = outputs[1] if len(outputs) > 1 else None
        w = window(op_type, attrs, x.shape)
        n = int(np.prod(y.shape))
        if n == 0:
            return
        device = rec.device
        dt = dtype_name(x.dtype)
        op = SHADER.get(op_type)
        if op is None:  # LpPool: p = 1, 2 as before, other p in pool_lpp
            p = _lpool_p(attrs)
            op = f"lp{int(p)}" if p in (1.0, 2.0) else "lpp"
        flags = int(bool(int(attrs.get("count_include_pad", 0) or 0)))
        flags |= 2 * int(bool(int(attrs.get("storage_order", 0) or 0)))
        geometry = (n, flags, *_pad3(x.shape[2:], 1), *_pad3(w.out, 1), *_pad3(w.kernel, 1),
                    *_pad3(w.strides, 1), *_pad3(w.dilations, 1), *_pad3(w.pad_begin, 0),
                    *_pad3(w.explicit_end, 0))
        push = POOL_PUSH.pack(*geometry)
        push_size = POOL_PUSH.size
        if op == "lpp":  # p as the CPU takes it (float32), the root's exponent float32(1.0 / p)
            pi = int(p) if p == int(p) and p <= LP_INT_MAX else 0
            push = LPP_PUSH.pack(*geometry, float(np.float32(p)), float(np.float32(1.0 / p)), pi)
            push_size = LPP_PUSH.size
        wg = threads_wg(device)
        groups = group_count(device, -(-n // wg))
        src = x.view if x.nbytes else rec.constants(bytes(4))  # empty input: only padding is read
        if idx is not None:
            p = device.pipeline(f"pool_maxidx_{dt}", "rww", POOL_PUSH.size, (wg,))
            rec.dispatch(p, [src, y.view, idx.view], push, groups)
        else:
            pipe = device.pipeline(f"pool_{op}_{dt}", "rw", push_size, (wg,))
            rec.dispatch(pipe, [src, y.view], push, groups)


GLOBAL = {"GlobalAveragePool": "mean", "GlobalMaxPool": "max", "GlobalLpPool": None}


@register
class GlobalPoolKernel(Kernel):
    op_types = tuple(GLOBAL)

    def check(self, device, op_type, attrs, inputs):
        if len(inputs) != 1 or inputs[0] is None:
            raise Unsupported(f"{op_type} takes one input")
        x = inputs[0]
        float_or(x.dtype, ("f32", "f16"), op_type)
        require_dtypes(device, x.dtype)
        if len(x.shape) < 2:
            raise Unsupported(f"{op_type} needs an input of rank >= 2, not {len(x.shape)}")
        if op_type == "GlobalMaxPool" and any(d == 0 for d in x.shape[2:]):
            raise Unsupported("GlobalMaxPool of an empty spatial extent")
        if op_type == "GlobalLpPool":
            _lp_p(op_type, attrs)
        check_size(device, x)

    def infer(self, op_type, attrs, inputs):
        x = inputs[0]
        return [TensorSpec(tuple(x.shape[:2]) + (1,) * (len(x.shape) - 2), x.dtype)]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        x = inputs[0]
        op = GLOBAL[op_type] or f"l{_lp_p(op_type, attrs)}"
        record_reduce(rec, op, x, outputs[0], tuple(range(2, len(x.shape))))
