"""GPU kernels for the reductions (ReduceSum ... ReduceLogSumExp) and ArgMax/ArgMin, plus the
helpers the other reducing families (softmax, pooling, normalization) share: whether the device
has subgroup arithmetic, workgroup sizes, and collapsing a tensor into kept and reduced dims.

Shader: shaders/reduce.comp, variants reduce_<op>_<mode>_<dtype> with mode
  wg / wgs  a workgroup per output (subgroup arithmetic / shared-memory tree),
  th        an invocation per output,
  p1(s)/p2(s) the two passes of a split reduction (few outputs, very long reductions).

Axes: the attribute, or (ReduceSum-13, the others from 18) the host value of the axes input
(TensorSpec.value, a host input); an axes input only known on the device is Unsupported.

dtypes: float32 and float16 (computed in float32), int32 for Max/Min; ReduceLogSumExp also
float64 where the device has shaderFloat64 (double arithmetic with the shader's own exp/log,
within 1 ulp each; modes th and wgs only), as the CPU operator computes it in float64;
ReduceSum and ReduceMax of float64 likewise (ReduceMax: NaN where any element is NaN, as
np.max). ReduceMax/ReduceMin of bfloat16 (every mode): the elements widened exactly to float32
and compared as float32 keys, so the result is bit-exact an input element (NaN where any is,
as np.max / np.min; +0 and -0 compare equal and either may come back).
"""
from __future__ import annotations

import functools
import logging
import math
from typing import Any, Mapping, Sequence

import numpy as np

from .. import config
from .common import BF16, F64, PushBlock, dtype_name, require_dtypes
from .registry import Kernel, TensorSpec, Unsupported, register

MAX_ELEMENTS = (1 << 31) - 1
log = logging.getLogger("vkml")

# ---------------------------------------------------------------------------- device helpers
_SUBGROUP_ARITHMETIC = 0x4   # VkSubgroupFeatureFlagBits
_STAGE_COMPUTE = 0x20        # VkShaderStageFlagBits


@functools.lru_cache(maxsize=None)
def _device_subgroup_arith(index: int) -> bool:
    from vkml.vulkan import _instance
    raw = _instance.instance().describe(index)
    return bool(raw.get("subgroup_operations", 0) & _SUBGROUP_ARITHMETIC
                and raw.get("subgroup_stages", 0) & _STAGE_COMPUTE)


def subgroup_arith(device) -> bool:
    """Whether compute shaders on `device` may use GL_KHR_shader_subgroup_arithmetic: asked when
    a kernel is recorded, so VKML_NO_SUBGROUPS (read here each time) applies to the recordings
    made after it is set (tests flip it through the vkml_env fixture)."""
    if config.no_subgroups():
        return False
    try:
        return _device_subgroup_arith(int(device.index))
    except Exception as e:
        # No raw description of the device (a stand-in device in tests, an instance that cannot
        # describe it): the shared-memory path runs everywhere, so take it.
        log.debug("vkml: subgroup support of %s unknown (%s: %s); reductions take the shared-memory path",
                  getattr(device, "name", device), type(e).__name__, e)
        return False


def wg_mode_name(device) -> str:
    """Variant infix of workgroup-reducing shaders on `device`."""
    return "wg" if subgroup_arith(device) else "wgs"


def max_invocations(device) -> int:
    return int(device.limits.get("max_compute_work_group_invocations", 128))


def wg_size(device, work: int, cap: int = 1024) -> int:
    """A power-of-two workgroup size (the shared-memory tree needs one) for a workgroup that
    shares `work` items: about 8 per invocation, at least 64 (and the subgroup size), at most
    `cap` and the device limit."""
    limit = 1
    while limit * 2 <= min(cap, max_invocations(device)):
        limit *= 2
    size = 64
    while size * 2 <= limit and size * 16 <= work:
        size *= 2
    sg = int(getattr(device.info, "subgroup_size", 1) or 1)
    return min(max(size, sg), limit)


def threads_wg(device) -> int:
    """Workgroup size of the one-item-per-invocation shaders."""
    return wg_size(device, 0, cap=256) if max_invocations(device) < 256 else 256


def group_count(device, n: int) -> int:
    """Workgroups along x for n work items of one workgroup each (shaders loop past the cap)."""
    cap = int(device.limits.get("max_compute_work_group_count", (65535,))[0])
    return max(1, min(n, cap))


def check_size(device, *specs: TensorSpec) -> None:
    """Unsupported when a tensor is too big for one storage-buffer binding or uint32 indexing."""
    for s in specs:
        n = math.prod(s.shape)
        if n > MAX_ELEMENTS:
            raise Unsupported(f"{n} elements exceed the GPU index limit of {MAX_ELEMENTS}")
        nbytes = n * np.dtype(s.dtype).itemsize
        if nbytes > device.max_storage_buffer_range:
            raise Unsupported(f"a {nbytes}-byte tensor exceeds {device.name}'s maxStorageBufferRange "
                              f"({device.max_storage_buffer_range})")


def float_or(dtype, allowed: tuple[str, ...], op_type: str) -> str:
    dt = dtype_name(dtype)
    if dt not in allowed:
        raise Unsupported(f"{op_type} on the GPU supports {', '.join(allowed)}, not {np.dtype(dtype)}")
    return dt


def normalize_axis(axis: int, rank: int, op_type: str) -> int:
    a = int(axis)
    if not -max(rank, 1) <= a < max(rank, 1):
        raise Unsupported(f"{op_type}: axis {axis} is out of range for rank {rank}")
    return a % max(rank, 1)


def split_dims(shape: Sequence[int], reduced: set[int]) -> tuple[list[int], list[int], list[int], list[int]]:
    """Kept and reduced dims of a C-contiguous `shape`, size-1 dims dropped and neighbours of
    one kind merged: (kept shape, kept strides, reduced shape, reduced strides), in elements."""
    strides = [0] * len(shape)
    acc = 1
    for d in range(len(shape) - 1, -1, -1):
        strides[d] = acc
        acc *= shape[d]
    ks: list[int] = []
    kst: list[int] = []
    rs: list[int] = []
    rst: list[int] = []
    prev = None
    for d, n in enumerate(shape):
        if n == 1:
            continue
        kind = d in reduced
        sh, st = (rs, rst) if kind else (ks, kst)
        if prev is kind:
            sh[-1] *= n
            st[-1] = strides[d]
        else:
            sh.append(n)
            st.append(strides[d])
        prev = kind
    return ks, kst, rs, rst


# ---------------------------------------------------------------------------- the reduction
REDUCE_PUSH = PushBlock("8I4I4I4I4I", "reduce")  # 96 bytes

OPS = {
    "ReduceSum": "sum", "ReduceMean": "mean", "ReduceMax": "max", "ReduceMin": "min",
    "ReduceProd": "prod", "ReduceL1": "l1", "ReduceL2": "l2", "ReduceSumSquare": "sumsq",
    "ReduceLogSum": "logsum", "ReduceLogSumExp": "logsumexp", "ArgMax": "argmax", "ArgMin": "argmin",
}
SPLITTABLE = {"sum", "mean", "max", "min", "prod", "l1", "l2", "sumsq", "logsum"}
INT_OK = {"max", "min", "argmax", "argmin"}  # int32 variants exist for these
ARG_DTYPES = ("f32", "f16", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")  # ArgMax/ArgMin's
F64_OK = {"logsumexp", "sum", "max"}  # float64 variants exist for these (shaders/reduce.comp, TX = 12)
BF16_OK = {"max", "min"}  # bfloat16 variants (TX = 13, stored as uint16 bits)

SPLIT_MIN = 16384      # reduce this many elements or more per output in two passes ...
SPLIT_OUTPUTS = 128    # ... when there are fewer outputs than this
CHUNK = 4096           # target elements per first-pass workgroup
TH_CHUNK = 16          # per-output invocations: at least this many elements per chunk ...
TH_THREADS = 262144    # ... and chunks until about this many invocations run (a GPU full)


def _pad4(v: Sequence[int]) -> list[int]:
    return list(v) + [0] * (4 - len(v))


def _push(n_out, n_red, chunks, chunk_len, count, flags, ks, kst, rs, rst) -> bytes:
    return REDUCE_PUSH.pack(n_out, n_red, chunks, chunk_len, count, flags, len(ks), len(rs),
                            *_pad4(ks), *_pad4(kst), *_pad4(rs), *_pad4(rst))


def record_reduce(rec, op: str, x, out, axes: Sequence[int], flags: int = 0) -> None:
    """Record out = reduce `op` (a shader op name) of x over `axes` (normalized, any order).
    `out` holds the kept dims in order (keepdims or not is only a shape). No axes: every
    element is its own reduction (n_red = 1), i.e. the op's elementwise transform."""
    device = rec.device
    shape = tuple(x.shape)
    n_out = math.prod(d for i, d in enumerate(shape) if i not in set(axes))
    n_red = math.prod(shape[a] for a in axes)
    if n_out == 0:
        return
    ks, kst, rs, rst = split_dims(shape, set(axes))
    if len(ks) > 4 or len(rs) > 4:
        raise Unsupported(f"reduction over axes {sorted(axes)} of shape {shape} needs more than 4 "
                          "kept or reduced dim groups")
    if not ks:
        ks, kst = [1], [0]
    if not rs:  # nothing (or only size-1 axes) reduced: each element on its own
        rs, rst = [1], [0]
    dt = ("f64" if np.dtype(x.dtype) == F64 and op in F64_OK
          else "bf16" if np.dtype(x.dtype) == BF16 and op in BF16_OK else dtype_name(x.dtype))
    red_inner = rst[-1] == 1 and n_red > 1
    split_ok = op in SPLITTABLE and dt != "f64"
    # ArgMax/ArgMin's 64-bit keys and float64 sums: shared-memory trees (no subgroup variant)
    sg = wg_mode_name(device) if dt not in ("i64", "u64", "f64") else "wgs"
    if n_red > 1 and (red_inner and n_red >= 32
                      or not split_ok and n_out < 1024 and n_red >= 256):
        # a workgroup per output (strided reads for the unsplittable ops' few long outputs)
        if split_ok and not one_pass_per_output(n_out, n_red):
            chunks = min(-(-n_red // CHUNK), max(2, 1024 // n_out))
            chunk_len = -(-n_red // chunks)
            chunks = -(-n_red // chunk_len)
            scratch = device.alloc(n_out * chunks * 4)
            s1 = "p1" if sg == "wg" else "p1s"
            p1 = device.pipeline(f"reduce_{op}_{s1}_{dt}", "rw", REDUCE_PUSH.size, (wg_size(device, chunk_len),))
            rec.dispatch(p1, [x.view, scratch], _push(n_out, n_red, chunks, chunk_len, n_red, flags, ks, kst, rs, rst),
                         group_count(device, n_out * chunks))
            s2 = "p2" if sg == "wg" else "p2s"
            p2 = device.pipeline(f"reduce_{op}_{s2}_{dt}", "rw", REDUCE_PUSH.size, (wg_size(device, chunks),))
            rec.dispatch(p2, [scratch, out.view],
                         _push(n_out, chunks, 1, chunks, n_red, flags, [n_out], [chunks], [chunks], [1]),
                         group_count(device, n_out))
            return
        wg = output_wg_size(device, n_out, n_red)
        p = device.pipeline(f"reduce_{op}_{sg}_{dt}", "rw", REDUCE_PUSH.size, (wg,))
        rec.dispatch(p, [x.view, out.view], _push(n_out, n_red, 1, n_red, n_red, flags, ks, kst, rs, rst),
                     group_count(device, n_out))
        return
    wg = threads_wg(device)
    chunks = min(-(-n_red // TH_CHUNK), -(-TH_THREADS // n_out)) if split_ok and n_red >= 4 * TH_CHUNK else 1
    if chunks > 1:
        # an invocation per (output, chunk), then per output over its chunks' partials
        chunk_len = -(-n_red // chunks)
        chunks = -(-n_red // chunk_len)
        scratch = device.alloc(n_out * chunks * 4)
        p1 = device.pipeline(f"reduce_{op}_p1t_{dt}", "rw", REDUCE_PUSH.size, (wg,))
        rec.dispatch(p1, [x.view, scratch], _push(n_out, n_red, chunks, chunk_len, n_red, flags, ks, kst, rs, rst),
                     group_count(device, -(-n_out * chunks // wg)))
        p2 = device.pipeline(f"reduce_{op}_p2t_{dt}", "rw", REDUCE_PUSH.size, (wg,))
        rec.dispatch(p2, [scratch, out.view],
                     _push(n_out, chunks, 1, chunks, n_red, flags, [n_out], [1], [chunks], [n_out]),
                     group_count(device, -(-n_out // wg)))
        return
    p = device.pipeline(f"reduce_{op}_th_{dt}", "rw", REDUCE_PUSH.size, (wg,))
    src = x.view if n_red else rec.constants(bytes(4))  # nothing is read: any buffer binds
    rec.dispatch(p, [src, out.view], _push(n_out, n_red, 1, n_red, n_red, flags, ks, kst, rs, rst),
                 group_count(device, -(-n_out // wg)))


def output_wg_size(device, n_out: int, n_red: int) -> int:
    """The workgroup size of a one-pass reduction with a workgroup per output: with many outputs
    256 wide (more of them resident per multiprocessor)."""
    return wg_size(device, n_red, cap=256 if n_out >= 1024 else 1024)


def one_pass_per_output(n_out: int, n_red: int) -> bool:
    """Whether record_reduce sums n_red contiguous float elements per output (a
    GlobalAveragePool's mean) with one workgroup per output in one pass (output_wg_size wide):
    the depthwise convolution that fuses such a pool (kernels/conv.py) adds in that order."""
    return n_red >= 32 and not (n_red >= SPLIT_MIN and n_out < SPLIT_OUTPUTS)


def _flag(attrs: Mapping[str, Any], name: str, default: int) -> int:
    v = attrs.get(name, default)
    return default if v is None else int(v)


def reduce_axes(op_type: str, attrs: Mapping[str, Any], inputs: Sequence[TensorSpec | None],
                consts: Mapping[int, np.ndarray] | None = None) -> tuple[int, ...]:
    """The normalized, sorted axes a Reduce* node reduces (() = none)."""
    rank = len(inputs[0].shape)
    axes = attrs.get("axes")
    has_input = len(inputs) > 1 and inputs[1] is not None
    if has_input:
        axes = consts.get(1) if consts and 1 in consts else getattr(inputs[1], "value", None)
        if axes is None:
            raise Unsupported(f"{op_type}: the axes input is not known on the host")
    axes = [] if axes is None else [int(a) for a in np.asarray(axes).reshape(-1)]
    if not axes:
        return () if _flag(attrs, "noop_with_empty_axes", 0) else tuple(range(rank))
    out = tuple(sorted(normalize_axis(a, rank, op_type) for a in axes))
    if len(set(out)) != len(out):
        raise Unsupported(f"{op_type}: repeated axes {axes}")
    return out


@register
class ReduceKernel(Kernel):
    op_types = tuple(k for k in OPS if k.startswith("Reduce"))
    host_inputs = {op: (1,) for op in op_types}

    def check(self, device, op_type, attrs, inputs):
        if not inputs or inputs[0] is None or len(inputs) > 2:
            raise Unsupported(f"{op_type} takes one or two inputs")
        op = OPS[op_type]
        dt = np.dtype(inputs[0].dtype)
        if (dt == F64 and op in F64_OK) or (dt == BF16 and op in BF16_OK):
            require_dtypes(device, dt, allowed=(F64, BF16), what=op_type)
        else:
            float_or(inputs[0].dtype, ("f32", "f16", "i32") if op in INT_OK else ("f32", "f16"), op_type)
            require_dtypes(device, inputs[0].dtype)
        reduce_axes(op_type, attrs, inputs)
        check_size(device, inputs[0])

    def infer(self, op_type, attrs, inputs):
        x = inputs[0]
        axes = reduce_axes(op_type, attrs, inputs)
        if _flag(attrs, "keepdims", 1):
            shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
        else:
            shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
        return [TensorSpec(shape, x.dtype)]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        axes = reduce_axes(op_type, attrs, [TensorSpec.of(inputs[0])] + list(inputs[1:]), consts or {})
        record_reduce(rec, OPS[op_type], inputs[0], outputs[0], axes)


@register
class ArgKernel(Kernel):
    """ArgMax/ArgMin: int64 indices; NaN counts as the extreme (as NumPy), ties give the first
    index or, with select_last_index, the last. float32/float16 and every integer dtype (64-bit
    ones compare uint64 keys in the shared-memory variants)."""

    op_types = ("ArgMax", "ArgMin")

    def check(self, device, op_type, attrs, inputs):
        if len(inputs) != 1 or inputs[0] is None:
            raise Unsupported(f"{op_type} takes one input")
        x = inputs[0]
        float_or(x.dtype, ARG_DTYPES, op_type)
        require_dtypes(device, x.dtype)
        ax = normalize_axis(_flag(attrs, "axis", 0), len(x.shape), op_type)
        if not x.shape or x.shape[ax] == 0:
            raise Unsupported(f"{op_type} over an empty axis (the CPU operator reports the error)")
        check_size(device, x, TensorSpec(x.shape, np.dtype(np.int64)))

    def infer(self, op_type, attrs, inputs):
        x = inputs[0]
        ax = normalize_axis(_flag(attrs, "axis", 0), len(x.shape), op_type)
        shape = list(x.shape)
        if _flag(attrs, "keepdims", 1):
            shape[ax] = 1
        else:
            del shape[ax]
        return [TensorSpec(tuple(shape), np.dtype(np.int64))]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        x = inputs[0]
        ax = normalize_axis(_flag(attrs, "axis", 0), len(x.shape), op_type)
        record_reduce(rec, OPS[op_type], x, outputs[0], (ax,), _flag(attrs, "select_last_index", 0) & 1)
