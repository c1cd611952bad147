"""GPU kernels for MatMul and Gemm.

Two shaders do the work:
  * matmul_<f32|f16> (shaders/matmul.comp): register-blocked SIMT GEMM, fp32 accumulation,
    tile sizes chosen here per problem (specialization constants, so no recompiling);
  * matmul_coop_<acc> (shaders/matmul_coop.comp): float16 A/B on tensor cores through
    VK_KHR_cooperative_matrix, used when the device lists a suitable subgroup shape.

MatMul's batch broadcasting becomes per-operand batch strides (collapsed to rank <= 4); a
batch that only A has is folded into M when B is shared, so (B, S, K) @ (K, N) is one GEMM.

VKML_MATMUL_TILE="BM,BN,BK,TM,TN" forces the SIMT tiling (for tuning on a device).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from .. import config
from .common import PushBlock, broadcast_shape, broadcast_strides, collapse, dtype_name, require_dtypes
from . import matmul_coop
from .registry import Kernel, TensorSpec, Unsupported, register

FLOATS = ("f32", "f16")
MAX_BATCH_RANK = 4
MAX_DIM = (1 << 31) - 1
MAX_GROUPS_Z = 65535  # the shader loops over batches beyond this

# M, N, K, batch, brank, bshape[4], sab[4], sbb[4], lda, ldb, alpha, beta, scm, scn, KS, S, EPI,
# ELO, EHI: 112 bytes (matmul_coop.comp reads the first 100)
MATMUL_PUSH = PushBlock("IIIII4I4I4IIIffIIIIIff", "matmul")
# total, rows, cols, P, S, br, bc, beta, EPI, ELO, EHI: 44 bytes (shaders/splitk_reduce.comp)
SPLITK_PUSH = PushBlock("IIIIIIIfIff", "splitk_reduce")
# Epilogue flags (shaders/include/vkml_epilogue.glsl): add a residual laid out like the output,
# then Relu.
EPI_RESIDUAL = 1
EPI_RELU = 2
EPI_CLIP = 4   # Clip(lo, hi): the bounds travel with the flags as `clip`
EPI_SILU = 8   # x * Sigmoid(x)
NO_CLIP = (0.0, 0.0)
# Split K when a GEMM has fewer workgroups than this: a GPU has ~100 multiprocessors (an H100
# 132), each running several workgroups; a 512 x 49 output (ResNet-50's last 3x3 convs at batch
# 1) gives 8 of them, and walks K = 4608 alone. Each split keeps at least MIN_SPLIT_TILES K tiles.
SPLIT_BELOW_GROUPS = 128
SPLIT_TARGET_GROUPS = 256
MIN_SPLIT_TILES = 4
MAX_SPLITS = 32


# ---------------------------------------------------------------------------- tiling
@dataclass(frozen=True)
class Tiling:
    """SIMT block tile BM x BN, K step BK, per-invocation micro-tile TM x TN."""
    bm: int
    bn: int
    bk: int
    tm: int
    tn: int

    @property
    def threads(self) -> int:
        return (self.bm // self.tm) * (self.bn // self.tn)

    @property
    def shared_bytes(self) -> int:
        return 2 * self.bk * (self.bm + self.bn) * 4  # double-buffered float32 tiles

    def validate(self, device) -> None:
        """ValueError unless the shader can run this tiling on `device`."""
        if self.tm % 4 or self.tn % 4 or self.bk % 4 or self.bm % self.tm or self.bn % self.tn:
            raise ValueError(f"{self}: TM, TN, BK must be multiples of 4 dividing BM, BN")
        lim = device.limits
        if self.threads > lim["max_compute_work_group_invocations"] or self.threads > lim["max_compute_work_group_size"][0]:
            raise ValueError(f"{self}: {self.threads} invocations exceed the device limit")
        if self.shared_bytes > lim["max_compute_shared_memory_size"]:
            raise ValueError(f"{self}: {self.shared_bytes} bytes of shared memory exceed the device's "
                             f"{lim['max_compute_shared_memory_size']}")

    def spec(self) -> tuple:
        return (self.threads, self.bm, self.bn, self.bk, self.tm, self.tn)

    def blocks(self, m: int, n: int, batch: int) -> int:
        """Workgroups for an m x n output, `batch` times."""
        return -(-m // self.bm) * -(-n // self.bn) * batch


# Measured on an H100 at 4096^3 fp32 (bench/results/probe_gemm_core-h100-2026-11-25.jsonl,
# the k loop not unrolled, every pipeline compiled in 0.1-0.2 s): 64x128x8 8x8 36 TFLOPS,
# 128x64x16 8x4 36, 128x128x16 8x8 26, 64x64x16 4x4 28. On ResNet-50's convolutions at batch 1
# (bench/bench_conv.py, bench/results/checks/h100-2026-11-23-conv-tilings.md) 64x64x16 4x4
# with split K was the best or within 10% of it on every shape (model sum 1.05 ms; 32x32
# 1.77 ms); the 8x8 tilings were measured there while their stores spilled (2 TFLOPS), so
# that comparison is still to be redone.
BIG = (Tiling(64, 128, 8, 8, 8),)
MEDIUM = Tiling(64, 64, 16, 4, 4)
SMALL = Tiling(32, 32, 16, 4, 4)
BIG_MIN_BLOCKS = 264   # two waves of 64x128 blocks on a 132-SM GPU
BIG_MIN_K = 1024


def _fits(t: Tiling, device) -> bool:
    try:
        t.validate(device)
    except ValueError:
        return False
    return True


def _forced_tiling() -> Tiling | None:
    ints = config.matmul_tile()
    return Tiling(*ints) if ints else None


def choose_tiling(device, m: int, n: int, batch: int, k: int = 0) -> Tiling:
    """64x64 blocks (split K gives them parallelism when there are few), 64x128 8x8 only for
    big GEMMs with a long K (`k`; 0 never takes them), 32x32 when M or N is at most 32 and a
    64-wide block would be mostly empty."""
    forced = _forced_tiling()
    if forced is not None:
        forced.validate(device)
        return forced
    if k >= BIG_MIN_K:
        for t in BIG:
            if _fits(t, device) and t.blocks(m, n, batch) >= BIG_MIN_BLOCKS:
                return t
    if _fits(MEDIUM, device) and min(m, n) > SMALL.bm:
        return MEDIUM
    return SMALL


def split_k(blocks: int, k: int, bk: int, out_bytes: int, limit: int) -> tuple[int, int]:
    """(splits, k per split) for a GEMM of `blocks` workgroups over `k`: more workgroups when
    there are too few to fill a GPU, each split a whole number of K tiles; (1, k) when it does
    not pay or the partial sums (splits x out_bytes) would not fit in one buffer."""
    if blocks >= SPLIT_BELOW_GROUPS or k < 2 * MIN_SPLIT_TILES * bk:
        return 1, k
    s = min(-(-SPLIT_TARGET_GROUPS // blocks), k // (MIN_SPLIT_TILES * bk), MAX_SPLITS)
    while s > 1 and s * out_bytes > limit:
        s -= 1
    if s < 2:
        return 1, k
    ks = -(-(-(-k // s)) // bk) * bk
    return -(-k // ks), ks


def residual_view(epi: int, res, out):
    """The epilogue's residual binding: `res` where EPI_RESIDUAL asks for it, else the output
    (bound, never read)."""
    return res.view if res is not None and epi & EPI_RESIDUAL else out.view


def record_split_reduce(rec, part, splits: int, bias, has_bias: bool, out, res_view, rows: int, cols: int,
                        positions: int, bias_strides: tuple[int, int], beta: float, epi: int,
                        clip: tuple[float, float] = NO_CLIP) -> None:
    """The second pass of a split-K GEMM or convolution (shaders/splitk_reduce.comp): the
    `splits` partial sums in `part` ([splits][rows][cols] float32) plus beta * bias, then the
    epilogue, into `out` (positions: columns per image of an NCHW output, else cols)."""
    dt = dtype_name(out.dtype)
    red = rec.device.pipeline(f"splitk_reduce_{dt}", "rrwr", SPLITK_PUSH.size, (256, has_bias))
    total = rows * cols
    rec.dispatch(red, [part, bias, out.view, res_view],
                 SPLITK_PUSH.pack(total, rows, cols, positions, splits, *bias_strides, beta, epi, *clip),
                 red.groups_for(total))


# ---------------------------------------------------------------------------- problem
@dataclass
class Gemm:
    """One (batched) GEMM as the shader sees it: element strides, transposition, C."""
    m: int
    n: int
    k: int
    trans_a: bool
    trans_b: bool
    lda: int
    ldb: int
    bshape: list[int]
    sab: list[int]
    sbb: list[int]
    alpha: float = 1.0
    beta: float = 0.0
    c_strides: tuple[int, int] | None = None  # (scm, scn) when C is added

    @property
    def batch(self) -> int:
        return math.prod(self.bshape)


def _vec_ok(g: Gemm, a_side: bool) -> bool:
    """Whether the shader may read this operand's 4-value slots as single vec4 loads: the
    contiguous run is a multiple of 4 and every slot starts 4-aligned."""
    if a_side:
        run = g.m if g.trans_a else g.k
        ld, strides = g.lda, g.sab
    else:
        run = g.k if g.trans_b else g.n
        ld, strides = g.ldb, g.sbb
    return run % 4 == 0 and ld % 4 == 0 and all(s % 4 == 0 for s in strides)


def matmul_problem(a_shape: Sequence[int], b_shape: Sequence[int]) -> tuple[Gemm, tuple[int, ...]]:
    """MatMul (NumPy semantics) as a Gemm plus the output shape. ValueError if the shapes
    do not multiply."""
    if len(a_shape) == 0 or len(b_shape) == 0:
        raise ValueError(f"MatMul operands must have rank >= 1, got {tuple(a_shape)} and {tuple(b_shape)}")
    a2 = (1,) + tuple(a_shape) if len(a_shape) == 1 else tuple(a_shape)
    b2 = tuple(b_shape) + (1,) if len(b_shape) == 1 else tuple(b_shape)
    m, k = a2[-2:]
    k2, n = b2[-2:]
    if k != k2:
        raise ValueError(f"inner dimensions differ: {tuple(a_shape)} @ {tuple(b_shape)}")
    batch_shape = broadcast_shape(a2[:-2], b2[:-2])
    out = tuple(batch_shape) + ((m,) if len(a_shape) > 1 else ()) + ((n,) if len(b_shape) > 1 else ())
    sa = [s * m * k for s in broadcast_strides(a2[:-2], batch_shape)]
    sb = [s * k * n for s in broadcast_strides(b2[:-2], batch_shape)]
    shape, (sa, sb) = collapse(batch_shape, [sa, sb])
    g = Gemm(m, n, k, False, False, k, n, shape, sa, sb)
    # A batched against one shared B: stack A's batches into M (one bigger GEMM).
    if len(shape) == 1 and sb[0] == 0 and sa[0] == m * k and shape[0] > 1:
        g = Gemm(m * shape[0], n, k, False, False, k, n, [1], [0], [0])
    return g, out


def gemm_problem(attrs: Mapping[str, Any], a_shape, b_shape, c_shape) -> tuple[Gemm, tuple[int, int]]:
    """Gemm's attributes as a Gemm; ValueError for shapes that do not fit."""
    if len(a_shape) != 2 or len(b_shape) != 2:
        raise ValueError(f"Gemm's A and B must be matrices, got {tuple(a_shape)} and {tuple(b_shape)}")
    ta, tb = bool(attrs.get("transA", 0)), bool(attrs.get("transB", 0))
    m, k = (a_shape[1], a_shape[0]) if ta else tuple(a_shape)
    k2, n = (b_shape[1], b_shape[0]) if tb else tuple(b_shape)
    if k != k2:
        raise ValueError(f"inner dimensions differ: A {tuple(a_shape)} (transA={int(ta)}) and "
                         f"B {tuple(b_shape)} (transB={int(tb)})")
    alpha = float(attrs.get("alpha", 1.0))
    beta = float(attrs.get("beta", 1.0))
    cs = None
    if c_shape is not None and beta != 0.0:
        if len(c_shape) > 2 or broadcast_shape(c_shape, (m, n)) != (m, n):
            raise ValueError(f"C {tuple(c_shape)} does not broadcast to {(m, n)}")
        scm, scn = broadcast_strides(c_shape, (m, n))
        cs = (scm, scn)
    g = Gemm(m, n, k, ta, tb, a_shape[1], b_shape[1], [1], [0], [0], alpha, beta, cs)
    return g, (m, n)


# ---------------------------------------------------------------------------- recording
def _check_sizes(device, g: Gemm, specs: Sequence[TensorSpec | None]) -> None:
    for d in (g.m, g.n, g.k, g.batch):
        if d > MAX_DIM:
            raise Unsupported(f"dimension {d} exceeds the GPU GEMM limit of {MAX_DIM}")
    limit = device.max_storage_buffer_range
    for s in specs:
        if s is not None and math.prod(s.shape) * s.dtype.itemsize > limit:
            raise Unsupported(f"a {s.shape} {s.dtype} tensor exceeds the device's storage buffer "
                              f"range of {limit} bytes")
    if len(g.bshape) > MAX_BATCH_RANK:
        raise Unsupported(f"batch broadcast of rank {len(g.bshape)} (after collapsing) exceeds {MAX_BATCH_RANK}")


def _pad4(v: Sequence[int]) -> list[int]:
    return list(v) + [0] * (MAX_BATCH_RANK - len(v))


def gemm_push(g: Gemm, ks: int | None = None, splits: int = 1, epi: int = 0,
              clip: tuple[float, float] = NO_CLIP) -> bytes:
    scm, scn = g.c_strides or (0, 0)
    return MATMUL_PUSH.pack(g.m, g.n, g.k, g.batch, len(g.bshape), *_pad4(g.bshape), *_pad4(g.sab),
                            *_pad4(g.sbb), g.lda, g.ldb, g.alpha, g.beta, scm, scn,
                            g.k if ks is None else ks, splits, epi, *clip)


def dispatch_grid(device, g: Gemm, bm: int, bn: int) -> tuple[int, int, int]:
    """Workgroups: x over N blocks, y over M blocks, z over batches (the shaders loop past
    the z limit)."""
    gx, gy = -(-g.n // bn), -(-g.m // bm)
    max_groups = device.limits["max_compute_work_group_count"]
    if gx > max_groups[0] or gy > max_groups[1]:
        raise Unsupported(f"a {g.m} x {g.n} GEMM needs {gx} x {gy} workgroups, more than the device allows")
    return gx, gy, min(g.batch, MAX_GROUPS_Z, max_groups[2])


def record_gemm(rec, g: Gemm, a, b, c, out, tiling: Tiling | None = None, coop: bool = True,
                epi: int = 0, res=None, clip: tuple[float, float] = NO_CLIP) -> None:
    """Record out = alpha * op(a) @ op(b) (+ beta * c) for DeviceTensors a, b, c (or None),
    then the epilogue `epi` (EPI_RESIDUAL: + res, laid out like out; EPI_RELU; EPI_CLIP to
    `clip` = (lo, hi)).
    float16 runs on cooperative matrices where the device has them (unless coop=False or an
    epilogue asks for the SIMT shader's)."""
    if g.m == 0 or g.n == 0 or g.batch == 0:
        return
    dev = rec.device
    dt = dtype_name(out.dtype)
    if coop and not epi and tiling is None and dt == "f16" and matmul_coop.record_if_suitable(rec, g, a, b, c, out):
        return
    t = tiling or choose_tiling(dev, g.m, g.n, g.batch, g.k)
    t.validate(dev)
    vec_a = 4 if g.k and _vec_ok(g, True) and a.view.offset % 16 == 0 else 1
    vec_b = 4 if g.k and _vec_ok(g, False) and b.view.offset % 16 == 0 else 1
    has_c = g.c_strides is not None
    spec = t.spec() + (vec_a, vec_b, g.trans_a, g.trans_b, has_c)
    p = dev.pipeline(f"matmul_{dt}", "rrrwwr", MATMUL_PUSH.size, spec)
    vr = residual_view(epi, res, out)
    # Empty operands (K = 0) still need a binding: the output stands in, never read.
    va = a.view if g.k else out.view
    vb = b.view if g.k else out.view
    vc = c.view if has_c else out.view
    dispatch_gemm(rec, p, g, t, [va, vb, vc, out.view], out, vr, epi, clip)


def dispatch_gemm(rec, p, g: Gemm, t, views: list, out, res_view=None, epi: int = 0,
                  clip: tuple[float, float] = NO_CLIP) -> None:
    """Dispatch GEMM pipeline `p` (matmul.comp or matmul_coop.comp; bindings: `views` = A, B,
    C, O, then the split-K partials, then `res_view` when the shader has a residual binding)
    over the blocks of tiling `t`, splitting K when they would leave the GPU idle (split_k)
    and recording the reduce pass after (C, the epilogue and the rounding happen there)."""
    dev = rec.device
    has_c = g.c_strides is not None
    out_bytes = g.m * g.n * g.batch * 4
    splits, ks = split_k(t.blocks(g.m, g.n, g.batch), g.k, t.bk, out_bytes, dev.max_storage_buffer_range)
    if has_c and g.batch > 1:
        splits, ks = 1, g.k  # (the second pass adds C over (m, n) of one batch)
    part = dev.alloc(splits * out_bytes) if splits > 1 else out.view
    split_g = Gemm(g.m, g.n, g.k, g.trans_a, g.trans_b, g.lda, g.ldb, [g.batch * splits], [0], [0])
    grid = dispatch_grid(dev, split_g, t.bm, t.bn)
    binds = views + [part] + ([] if res_view is None else [res_view])
    rec.dispatch(p, binds, gemm_push(g, ks, splits, epi, clip), grid)
    if splits > 1:
        record_split_reduce(rec, part, splits, views[2], has_c, out, out.view if res_view is None else res_view,
                            g.m * g.batch, g.n, g.n, g.c_strides or (0, 0), g.beta, epi, clip)


def _float_dtypes(op_type: str, inputs: Sequence[TensorSpec | None]) -> str:
    dts = {np.dtype(t.dtype) for t in inputs if t is not None}
    if len(dts) != 1:
        raise Unsupported(f"{op_type} with mixed dtypes {sorted(str(d) for d in dts)}")
    dt = dtype_name(dts.pop())
    if dt not in FLOATS:
        raise Unsupported(f"{op_type} on the GPU supports float32 and float16, not {inputs[0].dtype}")
    return dt


@register
class MatMulKernel(Kernel):
    op_types = ("MatMul", "Gemm")

    def _problem(self, op_type, attrs, inputs):
        try:
            if op_type == "MatMul":
                if len(inputs) != 2 or inputs[0] is None or inputs[1] is None:
                    raise Unsupported("MatMul takes two inputs")
                return matmul_problem(inputs[0].shape, inputs[1].shape)
            if len(inputs) not in (2, 3) or inputs[0] is None or inputs[1] is None:
                raise Unsupported("Gemm takes A, B and an optional C")
            c = inputs[2].shape if len(inputs) == 3 and inputs[2] is not None else None
            return gemm_problem(attrs, inputs[0].shape, inputs[1].shape, c)
        except ValueError as e:
            raise Unsupported(str(e)) from None

    def check(self, device, op_type, attrs, inputs):
        _float_dtypes(op_type, inputs)
        require_dtypes(device, *[t.dtype for t in inputs if t is not None])
        g, out = self._problem(op_type, attrs, inputs)
        _check_sizes(device, g, list(inputs) + [TensorSpec(out, inputs[0].dtype)])

    def infer(self, op_type, attrs, inputs):
        _, out = self._problem(op_type, attrs, inputs)
        return [TensorSpec(tuple(out), np.dtype(inputs[0].dtype))]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        specs = [None if t is None else TensorSpec.of(t) for t in inputs]
        g, _ = self._problem(op_type, attrs, specs)
        c = inputs[2] if op_type == "Gemm" and len(inputs) == 3 else None
        if g.c_strides is None:
            c = None
        record_gemm(rec, g, inputs[0], inputs[1], c, outputs[0])
