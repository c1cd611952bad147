"""GPU kernel for TopK (opsets 1, 10, 11): shaders/topk.comp, a bitonic top-k per row.

K is the attribute (opset 1) or the host value of input 1 (a constant, or a fed value the plan
is specialized for: Kernel.host_inputs); unknown, the node stays on the CPU. The output is
always sorted (sorted=0 leaves the order free; the CPU operator sorts too). Ties keep the lower
index first and NaN counts above +inf, as the CPU operator's stable argsort (onnxruntime puts
NaN first for largest too). float32/float16 and every integer dtype; values are copied from X
bit for bit.

A workgroup sorts a chunk of M entries (M a power of two: the row rounded up, at most what the
device's shared memory holds, 4096 for 32-bit keys on 32 KiB) and keeps the P = 2^ceil(log2 k)
smallest; rows longer than M take passes that keep P per chunk and merge M / P chunks' survivors
per workgroup, so each pass divides a row's candidates by M / P >= 2 (a row of 100 000 with
k = 1000 on 32 KiB: 4 passes). Such rows need 2P <= M (k <= 2048 on 32 KiB, 1024 for 64-bit
integers); larger k over longer rows is refused (Unsupported, with the sizes).
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from .common import PushBlock, dtype_name, require_dtypes
from .reduce import check_size, group_count, max_invocations, normalize_axis
from .registry import Kernel, TensorSpec, Unsupported, register

# rows, n, inner, k, p_log, count, chunks, flags: 32 bytes
TOPK_PUSH = PushBlock("8I", "topk")
BINDINGS = "rrwww"  # X, src | dst, values, indices
DTYPES = ("f32", "f16", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")
FIRST, LARGEST = 1, 2
MIN_M = 64      # smallest chunk (fewer pipelines for short rows)
MAX_M = 4096    # largest chunk, when shared memory allows
WG_MAX = 512


def _attr(attrs: Mapping[str, Any], name: str, default):
    v = attrs.get(name, default)
    return default if v is None else v


def _pow2(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


def max_chunk(device, dtype) -> int:
    """The largest M whose entries (key words + index) fit the device's shared memory."""
    words = 3 if dtype_name(dtype) in ("i64", "u64") else 2
    limit = int(device.limits.get("max_compute_shared_memory_size", 16384))
    m = MAX_M
    while m > MIN_M and m * words * 4 > limit:
        m //= 2
    return m


def k_value(attrs: Mapping[str, Any], inputs: Sequence, consts: Mapping[int, np.ndarray] | None = None) -> int:
    """K: input 1's host value (opset 10+) or the `k` attribute (opset 1); Unsupported when unknown."""
    if len(inputs) > 1 and inputs[1] is not None:
        v = consts.get(1) if consts and 1 in consts else getattr(inputs[1], "value", None)
        if v is None:
            raise Unsupported("TopK: K is computed at run time; the GPU kernel needs its value")
        v = np.asarray(v).reshape(-1)
        if v.size != 1 or v.dtype.kind not in "iu":
            raise Unsupported(f"TopK: K must be one integer, got {v.dtype}{list(v.shape)} "
                              "(the CPU operator reports the error)")
        return int(v[0])
    k = attrs.get("k")
    if k is None:
        raise Unsupported("TopK without K (the CPU operator reports the error)")
    return int(k)


def geometry(attrs, inputs, consts=None) -> tuple[int, int, int, int, int]:
    """(outer, n, inner, axis, k) of the node; Unsupported where the CPU operator raises."""
    x = inputs[0]
    shape = tuple(x.shape)
    if not shape:
        raise Unsupported("TopK of a scalar (the CPU operator reports the error)")
    axis = normalize_axis(_attr(attrs, "axis", -1), len(shape), "TopK")
    k = k_value(attrs, inputs, consts)
    n = shape[axis]
    if not 0 <= k <= n:
        raise Unsupported(f"TopK: k={k} is outside [0, {n}] (the CPU operator reports the error)")
    return math.prod(shape[:axis]), n, math.prod(shape[axis + 1:]), axis, k


def plan(m_max: int, n: int, k: int) -> tuple[int, list[tuple[int, int, int]]]:
    """(P, the passes as (M, entries per row read, chunks per row)) for rows of n with this k.
    Every pass but the last takes chunks of m_max; the last takes what is left, rounded up."""
    p = _pow2(max(k, 1))
    if n > m_max and 2 * p > m_max:
        raise Unsupported(f"TopK with k={k} over rows of {n}: rows longer than {m_max} (the shared memory "
                          f"of one workgroup) take k <= {m_max // 2} on the GPU")
    passes, count = [], n
    while count > m_max:
        chunks = -(-count // m_max)
        passes.append((m_max, count, chunks))
        count = chunks * p
    passes.append((max(MIN_M, _pow2(max(count, p))), count, 1))
    return p, passes


@register
class TopKKernel(Kernel):
    op_types = ("TopK",)
    host_inputs = {"TopK": (1,)}

    def check(self, device, op_type, attrs, inputs):
        if not inputs or inputs[0] is None:
            raise Unsupported("TopK needs X")
        x = inputs[0]
        dt = dtype_name(x.dtype)
        if dt not in DTYPES:
            raise Unsupported(f"TopK on the GPU supports {', '.join(DTYPES)}, not {np.dtype(x.dtype)}")
        require_dtypes(device, x.dtype)
        outer, n, inner, _, k = geometry(attrs, inputs)
        if n >= (1 << 31) - 1:
            raise Unsupported(f"TopK over rows of {n} elements")
        plan(max_chunk(device, x.dtype), n, k)
        check_size(device, x, *self.infer(op_type, attrs, inputs))

    def infer(self, op_type, attrs, inputs):
        x = inputs[0]
        _, _, _, axis, k = geometry(attrs, inputs)
        shape = tuple(x.shape[:axis]) + (k,) + tuple(x.shape[axis + 1:])
        return [TensorSpec(shape, np.dtype(x.dtype)), TensorSpec(shape, np.dtype(np.int64))]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        x = inputs[0]
        outer, n, inner, _, k = geometry(attrs, [TensorSpec.of(x)] + list(inputs[1:]), consts)
        rows = outer * inner
        if k == 0 or rows == 0:
            return
        device = rec.device
        p, passes = plan(max_chunk(device, x.dtype), n, k)
        largest = int(_attr(attrs, "largest", 1)) != 0
        outs = [o if o is not None and o.nbytes else None for o in list(outputs) + [None, None]][:2]
        stand_in = [device.alloc(16) for _ in range(4)]  # bindings a pass does not use
        src, flags = stand_in[0], FIRST | (LARGEST if largest else 0)
        for m, count, chunks in passes:
            last = chunks == 1
            wg = max(32, min(m // 2, WG_MAX, max_invocations(device)))
            pipe = device.pipeline(f"topk_{dtype_name(x.dtype)}", BINDINGS, TOPK_PUSH.size, (wg, m))
            dst = stand_in[1] if last else device.alloc(rows * chunks * p * 4)
            y = outs[0].view if last and outs[0] is not None else stand_in[2]
            yi = outs[1].view if last and outs[1] is not None else stand_in[3]
            rec.dispatch(pipe, [x.view, src, dst, y, yi],
                         TOPK_PUSH.pack(rows, n, inner, k, p.bit_length() - 1, count, chunks, flags),
                         group_count(device, rows * chunks))
            src, flags = dst, flags & ~FIRST
