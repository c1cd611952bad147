"""GPU kernels for MatMul and Gemm.

These shaders do the work:
  * matmul_<f32|f16> (shaders/matmul.comp): register-blocked SIMT GEMM, fp32 accumulation,
    tile sizes chosen here per problem (specialization constants, so no recompiling);
  * matmul_coop_<acc> (shaders/matmul_coop.comp): float16 A/B on tensor cores through
    VK_KHR_cooperative_matrix, used when the device lists a suitable subgroup shape;
  * matmul_cm2_f16 (shaders/matmul_cm2.comp): the same on VK_NV_cooperative_matrix2's
    workgroup-scope matrices (kernels/matmul_cm2.py), opt-in (VKML_CM2=1): then taken first for
    plain float16 products where the driver has them;
  * gemv_<f32|f16|bf16> (shaders/gemv.comp): products of at most GEMV_ROWS rows (a batch of one),
    B read once (either layout), K spread over invocation groups.
bfloat16 and float64 (MatMul, Gemm; no fused epilogue): float64, and bfloat16 products of
at most BF16_DIRECT_MAX_MACS multiply-adds, take matmul_direct_<bf16|f64>
(shaders/matmul_direct.comp): one invocation per output summing its K products in order
(fma), float64 in double (devices with shaderFloat64 only). Bigger bfloat16 products take
matmul.comp's tilings and split K (matmul_bf16, matmul_unrolled_bf16, splitk_reduce_bf16).
Either way bfloat16 is widened exactly to float32, summed in float32 and rounded once to
nearest even on the bits at the end. NumPy's BLAS sums in another order (blocked,
vectorized partial sums), so the results differ from the CPU operator by at most the two
orders' rounding: |err| <= 2 K eps sum_k |a_k b_k| (eps = 2^-24 or 2^-53), plus for bfloat16
one bfloat16 ulp where the two float32 sums round to neighbouring bfloat16 values
(tests/ops/test_gpu_matmul_bf16_f64.py).

MatMul's batch broadcasting becomes per-operand batch strides (collapsed to rank <= 4); a
batch that only A has is folded into M when B is shared, so (B, S, K) @ (K, N) is one GEMM.

VKML_MATMUL_TILE="BM,BN,BK,TM,TN" forces the SIMT tiling (for tuning on a device).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

import numpy as np

from .. import config
from .common import BF16, F64, broadcast_shape, broadcast_strides, collapse, dtype_name, require_dtypes
from . import matmul_cm2, matmul_coop
from .gemm import (MATMUL_PUSH, MAX_BATCH_RANK, NO_CLIP, Gemm, dispatch_gemm, gemm_push, residual_view,
                   shader_dtype)
from .registry import Kernel, TensorSpec, Unsupported, register

FLOATS = ("f32", "f16")
# Wider/narrower floats the direct shader takes (dtype -> variant suffix).
DIRECT = {F64: "f64", BF16: "bf16"}
# bfloat16 products up to this many multiply-adds take the direct shader (as matmul_small's
# bound for float32); bigger ones the tiled SIMT shader, whose blocks pay from there
BF16_DIRECT_MAX_MACS = 1 << 21
DTYPES = (np.dtype(np.float32), np.dtype(np.float16), *DIRECT)  # what MatMul and Gemm take
MAX_DIM = (1 << 31) - 1


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
# 1.77 ms); the 8x8 tilings were measured there while their stores spilled (2 TFLOPS). Redone
# at batch 32 on an H200 with the stores fixed (every MEDIUM GEMM and convolution on the tiling;
# bench/results/checks/h200-2026-11-28-conv-tilings-b32.jsonl): resnet18 8.19 ms on 64x64 4x4,
# 9.25-9.84 on 128x64 8x4, 9.66-10.66 on 64x128 8x8, 11.1-13.5 on 128x128 8x8; ResNet-50
# 16.4-16.7 ms, 17.1-17.5, 19.5-21.0, 21.3-23.6; conv.comp's k loop unrolled changed nothing.
BIG = (Tiling(64, 128, 16, 8, 8),)
# BIG tilings run on a build of matmul.comp with the k loop unrolled (GEMM_KSTEP=0): 4096^3
# float32 on an H200, 64x128x8 as before 35.5 TFLOPS, 64x128x16 unrolled 40.7, compiled in
# 0.23 s against 0.14 (bench/results/probe_gemm_core-h200-2026-11-28.jsonl, which has the
# other variants: unrolled by 2 or 4, the next k's shared reads issued before the FMAs).
BIG_SHADER = "matmul_unrolled"
MEDIUM = Tiling(64, 64, 16, 4, 4)
SMALL = Tiling(32, 32, 16, 4, 4)
# 32-row blocks where 64-row ones would pad M by at least NARROW_MIN_SAVING x M more: ViT-B/16's
# 197 tokens fill 256 rows of 64-row blocks and 224 of 32-row ones. H200, all of ViT's GEMMs on
# 32x64 blocks: b1 4.19 -> 3.77 ms, while BERT-base and GPT-2 (M = 128, no padding either way)
# lost 11-12% and ResNet-50 27% with them (bench/results/knobs-transformers2-h200-2026-11-28.jsonl,
# knobs-tilings-h200-2026-11-28.jsonl): the saving in padded rows, not the smaller block, pays.
NARROW = Tiling(32, 64, 16, 4, 4)
NARROW_MIN_SAVING = 0.1
BIG_MIN_BLOCKS = 264   # two waves of 64x128 blocks on a 132-SM GPU
BIG_MIN_K = 1024
# ... and every GEMM with K of at least BIG_LONG_K and rows to fill a block, however few its
# blocks: split K still gives them a GPU's worth of workgroups, each walking enough K for the
# 8x8 tile to pay (products of fewer rows keep the blocks they had: not measured). H200, 3
# interleaved rounds (bench/results/checks/h200-2026-12-02-big-long-k.jsonl): the MLP's 64 x 4096
# x 4096 layers (32 blocks, 8 splits) 1055 -> 815 us host->host for 8 layers, BERT-base, GPT-2
# small, ViT-B/16, ResNet-50 and resnet18 within 0.4% (none has K >= 4096); from K = 1024 or 2048
# instead, BERT-base (K = 3072) lost 2.2%, GPT-2 3.9%, ResNet-50 1.6-4.5%.
BIG_LONG_K = 4096


def _fits(t: Tiling, device) -> bool:
    try:
        t.validate(device)
    except ValueError:
        return False
    return True


def _forced_tiling() -> Tiling | None:
    ints = config.matmul_tile()
    return Tiling(*ints) if ints else None


def choose_tiling(device, m: int, n: int, batch: int, k: int = 0, narrow: bool = True) -> Tiling:
    """64x64 blocks (split K gives them parallelism when there are few), 64x128 8x8 only for
    big GEMMs with a long K and for those of at least a block's rows with a very long K (`k`; 0
    never takes them), 32x32 when M or N is at most 32 and a 64-wide block would be mostly
    empty, 32x64 where 64-row blocks would pad M much more (NARROW_MIN_SAVING) unless `narrow`
    is off (convolutions: MobileNetV2's 96- and 144-channel pointwise convolutions lost 3-5% on
    32-row blocks, bench/results/narrow_ab-h200-2026-11-28.jsonl)."""
    forced = _forced_tiling()
    if forced is not None:
        forced.validate(device)
        return forced
    if k >= BIG_MIN_K:
        for t in BIG:
            if _fits(t, device) and ((k >= BIG_LONG_K and m >= t.bm) or t.blocks(m, n, batch) >= BIG_MIN_BLOCKS):
                return t
    if _fits(MEDIUM, device) and min(m, n) > SMALL.bm:
        padded = -(-m // MEDIUM.bm) * MEDIUM.bm - -(-m // NARROW.bm) * NARROW.bm
        if narrow and padded >= NARROW_MIN_SAVING * m and _fits(NARROW, device):
            return NARROW
        return MEDIUM
    return SMALL


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


def _view(shape: Sequence[int], perm: Sequence[int] | None) -> tuple[tuple[int, ...], list[int]]:
    """(shape, element strides) of a C-contiguous `shape` tensor read through Transpose(perm)."""
    st = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        st[d] = st[d + 1] * shape[d + 1]
    if perm is None:
        return tuple(shape), st
    return tuple(shape[p] for p in perm), [st[p] for p in perm]


def _matrix(shape, strides, rows: int, cols: int) -> tuple[bool, int] | None:
    """(transposed, leading dimension) of the matrix in the last two dims of a strided operand;
    None when neither of them is contiguous."""
    if len(shape) < 2:
        return False, cols
    sr, sc = strides[-2], strides[-1]
    if sc == 1 or cols == 1:
        return False, max(sr, cols) if rows > 1 else cols
    if sr == 1 or rows == 1:
        return True, max(sc, rows) if cols > 1 else rows
    return None


def matmul_problem(a_shape: Sequence[int], b_shape: Sequence[int], a_perm: Sequence[int] | None = None,
                   b_perm: Sequence[int] | None = None) -> tuple[Gemm, tuple[int, ...]]:
    """MatMul (NumPy semantics) as a Gemm plus the output shape. ValueError if the shapes
    do not multiply. `a_perm` / `b_perm`: the operand is read through that Transpose of the
    given (pre-transpose) shape, in place (ValueError when its last two dims have no unit stride)."""
    if len(a_shape) == 0 or len(b_shape) == 0:
        raise ValueError(f"MatMul operands must have rank >= 1, got {tuple(a_shape)} and {tuple(b_shape)}")
    if (a_perm is not None and len(a_shape) < 2) or (b_perm is not None and len(b_shape) < 2):
        raise ValueError("a transposed MatMul operand needs rank >= 2")
    (a_shape, sa_full), (b_shape, sb_full) = _view(a_shape, a_perm), _view(b_shape, b_perm)
    a2 = (1,) + tuple(a_shape) if len(a_shape) == 1 else tuple(a_shape)
    b2 = tuple(b_shape) + (1,) if len(b_shape) == 1 else tuple(b_shape)
    m, k = a2[-2:]
    k2, n = b2[-2:]
    if k != k2:
        raise ValueError(f"inner dimensions differ: {tuple(a_shape)} @ {tuple(b_shape)}")
    batch_shape = broadcast_shape(a2[:-2], b2[:-2])
    out = tuple(batch_shape) + ((m,) if len(a_shape) > 1 else ()) + ((n,) if len(b_shape) > 1 else ())
    if a_perm is None and b_perm is None:
        sa = [s * m * k for s in broadcast_strides(a2[:-2], batch_shape)]
        sb = [s * k * n for s in broadcast_strides(b2[:-2], batch_shape)]
        ta, tb, lda, ldb = False, False, k, n
    else:
        ma, mb = _matrix(a2, sa_full, m, k), _matrix(b2, sb_full, k, n)
        if ma is None or mb is None:
            raise ValueError("a transposed MatMul operand with no unit stride in its last two dims")
        (ta, lda), (tb, ldb) = ma, mb
        sa = _batch_strides(a2, sa_full if len(a_shape) > 1 else [0] + sa_full, batch_shape)
        sb = _batch_strides(b2, sb_full if len(b_shape) > 1 else sb_full + [0], batch_shape)
    shape, (sa, sb) = collapse(batch_shape, [sa, sb])
    g = Gemm(m, n, k, ta, tb, lda, ldb, shape, sa, sb)
    # A batched against one shared B: stack A's batches into M (one bigger GEMM).
    if not ta and lda == k and len(shape) == 1 and sb[0] == 0 and sa[0] == m * k and shape[0] > 1:
        g = Gemm(m * shape[0], n, k, False, tb, k, ldb, [1], [0], [0])
    return g, out


def _batch_strides(shape2, strides, batch_shape) -> list[int]:
    """An operand's element strides over the output's batch dims (0 where it broadcasts)."""
    dims, st = shape2[:-2], strides[:-2]
    pad = len(batch_shape) - len(dims)
    return [0] * pad + [0 if d == 1 else s for d, s in zip(dims, st)]


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


# Small GEMMs (shaders/matmul_small.comp: 32 invocations per output share its K): at most
# SMALL_MAX_MACS multiply-adds (so at most 2^15 outputs) and K of at least SMALL_MIN_K. mnist-12's
# 1x256 @ 256x10 took 7.8 us tiled plus 3.6 us of split-K reduction on the H100. Below K = 64
# half the lanes or more idle, and still: the second FC layer of a squeeze-excitation block
# (1152 outputs over K = 48 in EfficientNet-B0) took ~8.8 us on 32x32 tiles, where a K of 16 or
# more on this shader gave EfficientNet-B0 1080 -> 1047 GPU us and MobileNetV3-Large 784 -> 738
# (H200, bench/results/small_min_k-h200-2026-11-28.jsonl; K of 1 or more: 1057 and 738).
SMALL_MAX_MACS = 1 << 21
SMALL_MIN_K = 16


def is_small(g: Gemm) -> bool:
    return g.k >= SMALL_MIN_K and g.m * g.n * g.batch * g.k <= SMALL_MAX_MACS


# Products of at most GEMV_ROWS rows (one batch, A not transposed) past the small bound take
# shaders/gemv.comp, where GEMM blocks would be 31 or 63 padded rows walking K alone: B (K x N) read
# once in vec4 rows, 4 GEMV_COLS columns a workgroup, K over 256 / GEMV_COLS invocation groups; or,
# B stored N x K (Gemm transB = 1: torch's nn.Linear), 256 / GEMV_LANES columns of GEMV_LANES
# invocations along K. GEMV_UNROLL loads of B in flight per invocation. (Powers of two.) H200, the
# MLP 8 x 4096^2 at batch 1, 2 rounds of 60 runs (bench/results/checks/h200-2026-12-04-gemv-shape.jsonl):
# float32 227 -> 204 us host->host with 8 loads in flight instead of 4, float16 and B transposed
# even; 2 or 8 columns a group along n instead of 4, 32 or 128 lanes instead of 64: even or slower.
GEMV_ROWS = 4
GEMV_COLS = 4
GEMV_LANES = 64
GEMV_UNROLL = 8
GEMV_TRANS_B = True  # (a module switch for A/Bs: False sends transposed B back to the GEMM blocks)


def is_gemv(g: Gemm) -> bool:
    """Few rows of one batch, A not transposed, more multiply-adds than the small kernel takes
    (smaller products, K < SMALL_MIN_K ones included, keep the tiles)."""
    return (g.m <= GEMV_ROWS and g.batch == 1 and not g.trans_a and (GEMV_TRANS_B or not g.trans_b)
            and g.m * g.n * g.k > SMALL_MAX_MACS)


def _record_gemv(rec, g: Gemm, a, b, c, out, dt: str, epi: int, res, clip) -> None:
    dev = rec.device
    has_c = g.c_strides is not None
    vec_b = _vec_ok(g, False) and b.view.offset % 16 == 0
    vec_a = g.trans_b and _vec_ok(g, True) and a.view.offset % 16 == 0
    p = dev.pipeline(f"gemv_{dt}", "rrrwwrr", MATMUL_PUSH.size,
                     (256, g.m, vec_b, has_c, g.trans_b, vec_a, GEMV_COLS, GEMV_LANES, GEMV_UNROLL))
    views = [a.view, b.view, c.view if has_c else out.view, out.view, out.view, residual_view(epi, res, out),
             out.view]
    cols = 256 // GEMV_LANES if g.trans_b else 4 * GEMV_COLS  # per workgroup
    rec.dispatch(p, views, gemm_push(g, epi=epi, clip=clip), -(-g.n // cols))


def _record_small(rec, g: Gemm, a, b, c, out, epi: int, res, clip, kscale=None) -> None:
    dev = rec.device
    has_c = g.c_strides is not None
    p = dev.pipeline(f"matmul_small_{dtype_name(out.dtype)}", "rrrwwrr", MATMUL_PUSH.size,
                     (256, g.trans_a, g.trans_b, has_c, _kscale_mode(kscale)))
    total = g.m * g.n * g.batch
    views = [a.view, b.view, c.view if has_c else out.view, out.view, out.view, residual_view(epi, res, out),
             out.view if kscale is None else kscale[0].view]
    rec.dispatch(p, views, gemm_push(g, g.k, 1, epi, clip), p.groups_for(total * 32))


def _record_direct(rec, g: Gemm, a, b, c, out, suffix: str) -> None:
    """bfloat16 / float64: an invocation per output (shaders/matmul_direct.comp)."""
    dev = rec.device
    has_c = g.c_strides is not None
    p = dev.pipeline(f"matmul_direct_{suffix}", "rrrw", MATMUL_PUSH.size, (256, g.trans_a, g.trans_b, has_c))
    # Empty operands (K = 0) still need a binding: the output stands in, never read.
    views = [a.view if g.k else out.view, b.view if g.k else out.view, c.view if has_c else out.view, out.view]
    rec.dispatch(p, views, gemm_push(g), p.groups_for(g.m * g.n * g.batch))


def _kscale_mode(kscale) -> int:
    """matmul.comp's KSCALE: 0 none, 1 a scale per (batch, k), 2 per k."""
    return 0 if kscale is None else 1 if kscale[1] else 2


def record_gemm(rec, g: Gemm, a, b, c, out, tiling: Tiling | None = None, coop: bool = True,
                epi: int = 0, res=None, clip: tuple[float, float] = NO_CLIP, narrow: bool = True,
                kscale: tuple | None = None) -> None:
    """Record out = alpha * op(a) @ op(b) (+ beta * c) for DeviceTensors a, b, c (or None),
    then the epilogue `epi` (EPI_RESIDUAL: + res, laid out like out; EPI_RELU; EPI_CLIP to
    `clip` = (lo, hi)).
    float16 runs on cooperative matrices where the device has them (unless coop=False); `narrow`:
    choose_tiling's 32-row blocks where they pad M less (off for convolutions). `kscale`:
    (DeviceTensor s, per batch) scales B's row k by s[z * K + k] (per batch) or s[k] as it is
    read, rounded to B's type: a Mul before a pointwise convolution (the SIMT shaders only)."""
    if g.m == 0 or g.n == 0 or g.batch == 0:
        return
    dev = rec.device
    direct = DIRECT.get(np.dtype(out.dtype))
    if direct is not None:
        if epi or kscale is not None:
            raise Unsupported(f"no fused epilogue or scale for {np.dtype(out.dtype)} GEMMs")
        if direct != "bf16" or (tiling is None and g.m * g.n * g.batch * g.k <= BF16_DIRECT_MAX_MACS):
            _record_direct(rec, g, a, b, c, out, direct)
            return
    dt = shader_dtype(out.dtype)
    if direct is None and tiling is None and is_small(g):
        _record_small(rec, g, a, b, c, out, epi, res, clip, kscale)
        return
    if tiling is None and kscale is None and is_gemv(g):
        _record_gemv(rec, g, a, b, c, out, dt, epi, res, clip)
        return
    if coop and kscale is None and tiling is None and dt == "f16" and \
            (matmul_cm2.record_if_suitable(rec, g, a, b, c, out, epi, res, clip)
             or matmul_coop.record_if_suitable(rec, g, a, b, c, out, epi, res, clip)):
        return
    t = tiling or choose_tiling(dev, g.m, g.n, g.batch, g.k, narrow)
    t.validate(dev)
    vec_a = 4 if g.k and _vec_ok(g, True) and a.view.offset % 16 == 0 else 1
    vec_b = 4 if g.k and _vec_ok(g, False) and b.view.offset % 16 == 0 else 1
    has_c = g.c_strides is not None
    spec = t.spec() + (vec_a, vec_b, g.trans_a, g.trans_b, has_c, _kscale_mode(kscale))
    p = dev.pipeline(f"{BIG_SHADER if t in BIG else 'matmul'}_{dt}", "rrrwwrr", MATMUL_PUSH.size, spec)
    vr = residual_view(epi, res, out)
    # Empty operands (K = 0) still need a binding: the output stands in, never read.
    va = a.view if g.k else out.view
    vb = b.view if g.k else out.view
    vc = c.view if has_c else out.view
    dispatch_gemm(rec, p, g, t, [va, vb, vc, out.view], out, vr, epi, clip,
                  [out.view if kscale is None else kscale[0].view])


def _float_dtypes(op_type: str, inputs: Sequence[TensorSpec | None]) -> str:
    dts = {np.dtype(t.dtype) for t in inputs if t is not None}
    if len(dts) != 1:
        raise Unsupported(f"{op_type} with mixed dtypes {sorted(str(d) for d in dts)}")
    only = dts.pop()
    if only in DIRECT:
        return DIRECT[only]
    dt = dtype_name(only)
    if dt not in FLOATS:
        raise Unsupported(f"{op_type} on the GPU supports float32, float16, bfloat16 and float64, "
                          f"not {inputs[0].dtype}")
    return dt


@register
class MatMulKernel(Kernel):
    op_types = ("MatMul", "Gemm")

    def _problem(self, op_type, attrs, inputs):
        try:
            if op_type == "MatMul":
                if len(inputs) != 2 or inputs[0] is None or inputs[1] is None:
                    raise Unsupported("MatMul takes two inputs")
                # (a FusedGemm's operands may be read through Transposes: attrs a_perm / b_perm)
                return matmul_problem(inputs[0].shape, inputs[1].shape, attrs.get("a_perm"), attrs.get("b_perm"))
            if len(inputs) not in (2, 3) or inputs[0] is None or inputs[1] is None:
                raise Unsupported("Gemm takes A, B and an optional C")
            c = inputs[2].shape if len(inputs) == 3 and inputs[2] is not None else None
            return gemm_problem(attrs, inputs[0].shape, inputs[1].shape, c)
        except ValueError as e:
            raise Unsupported(str(e)) from None

    def check(self, device, op_type, attrs, inputs):
        _float_dtypes(op_type, inputs)
        require_dtypes(device, *[t.dtype for t in inputs if t is not None], allowed=DTYPES, what=op_type)
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


FUSED_GEMM = "FusedGemm"  # vkml/compile/epilogue.py: Gemm or MatMul [+ Add residual] [+ activation]


@register
class FusedGemmKernel(MatMulKernel):
    """A Gemm or MatMul (attrs["base"]) whose following Adds (a constant bias along the last
    axis, a residual of the output's shape) and/or activation run in its epilogue: inputs A, B,
    C (Gemm's C, or a MatMul's bias; absent if none), R (or absent); attrs: the base op's plus
    `epilogue` (EPI_* flags) and `clip` (Clip's bounds; GELU's divisor and factor)."""
    op_types = (FUSED_GEMM,)

    def _base(self, attrs, inputs):
        base = attrs["base"]
        return base, list(inputs[:3]) if base == "Gemm" and len(inputs) > 2 and inputs[2] is not None \
            else list(inputs[:2])

    def _bias(self, attrs, inputs, g: Gemm) -> Gemm:
        """A MatMul's problem with its bias (inputs[2]) added along the last axis."""
        c = inputs[2] if attrs["base"] == "MatMul" and len(inputs) > 2 else None
        if c is None:
            return g
        size = math.prod(c.shape)
        if g.batch != 1 or size not in (1, g.n) or any(d != 1 for d in tuple(c.shape)[:-1]):
            raise Unsupported(f"bias {tuple(c.shape)} does not run along the last axis of one {g.m}x{g.n} GEMM")
        return replace(g, beta=1.0, c_strides=(0, 1 if size == g.n and g.n > 1 else 0))

    def check(self, device, op_type, attrs, inputs):
        base, ins = self._base(attrs, inputs)
        if any(t is not None and np.dtype(t.dtype) in DIRECT for t in inputs):
            raise Unsupported(f"no fused epilogue for {np.dtype(inputs[0].dtype)} GEMMs")
        super().check(device, base, attrs, ins)
        (spec,) = super().infer(base, attrs, ins)
        g, _ = self._problem(base, attrs, ins)
        self._bias(attrs, inputs, g)
        c = inputs[2] if len(inputs) > 2 else None
        if c is not None and np.dtype(c.dtype) != spec.dtype:
            raise Unsupported(f"C / bias {c.dtype} differs from the output's {spec.dtype}")
        r = inputs[3] if len(inputs) > 3 else None
        if r is not None and (tuple(r.shape) != tuple(spec.shape) or np.dtype(r.dtype) != spec.dtype):
            raise Unsupported(f"residual {tuple(r.shape)} {r.dtype} does not match the output {tuple(spec.shape)}")

    def infer(self, op_type, attrs, inputs):
        base, ins = self._base(attrs, inputs)
        return super().infer(base, attrs, ins)

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        base, ins = self._base(attrs, inputs)
        g, _ = self._problem(base, attrs, [None if t is None else TensorSpec.of(t) for t in ins])
        g = self._bias(attrs, [None if t is None else TensorSpec.of(t) for t in inputs], g)
        c = inputs[2] if len(inputs) > 2 and g.c_strides is not None else None
        res = inputs[3] if len(inputs) > 3 else None
        clip = tuple(float(v) for v in attrs.get("clip") or NO_CLIP)
        record_gemm(rec, g, ins[0], ins[1], c, outputs[0], epi=int(attrs["epilogue"]), res=res, clip=clip)
