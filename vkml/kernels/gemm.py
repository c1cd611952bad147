"""The GEMM machinery that the SIMT kernel (kernels/matmul.py, shaders/matmul.comp) and the
cooperative-matrix one (kernels/matmul_coop.py, shaders/matmul_coop.comp) share, and that the
convolutions reuse (kernels/conv.py): the problem as the shaders see it (Gemm), their push
constants, the workgroup grid, split K and its reduce pass, the epilogue flags. Both kernel
modules import it; it imports neither.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .common import BF16, PushBlock, dtype_name
from .registry import Unsupported

MAX_BATCH_RANK = 4       # batch dims the shaders take (push constants bshape/sab/sbb[4])
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
EPI_GELU = 16  # GELU, erf form (only the GEMM shaders: include/vkml_epilogue.glsl)
EPI_GELU_TANH = 32  # GELU, tanh form (the same)
EPI_DIV = 64   # / a constant, first (the same; its divisor in the Clip bounds' place)
# The activations CNNs put after convolutions, as shaders/unary.comp computes them; the
# parameters travel in the Clip bounds' place (ELO, EHI): alpha (and beta).
EPI_SIGMOID = 128
EPI_HARD_SIGMOID = 256  # (alpha, beta)
EPI_HARD_SWISH = 512    # (1/6, 0.5)
EPI_LEAKY_RELU = 1024   # (alpha, 0)
NO_CLIP = (0.0, 0.0)
# Split K when a GEMM has fewer workgroups than this: a GPU has ~100 multiprocessors (an H100
# 132), each running several workgroups; a 512 x 49 output (ResNet-50's last 3x3 convs at batch
# 1) gives 8 of them, and walks K = 4608 alone. Each split keeps at least MIN_SPLIT_TILES K tiles.
SPLIT_BELOW_GROUPS = 128
SPLIT_TARGET_GROUPS = 256
MIN_SPLIT_TILES = 4
MAX_SPLITS = 32
# Partials the reduce pass (shaders/splitk_reduce.comp) loads per round, all in flight at once.
# 16 or 32 (every split of ResNet's 32-way convolutions in one round) changed nothing or lost
# (H200, 2 rounds of 80 runs: resnet18 0.56-0.58 ms either way, ResNet-50 1.20-1.22 against
# 1.23 with 32, BERT-base 2.61-2.65 against 2.69; bench/results/checks/h200-2026-12-04-splitk-run.jsonl):
# the pass waits on its launch and the barrier before it, not on its loads.
SPLITK_RUN = 8


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


def shader_dtype(dtype) -> str:
    """The shader suffix of a GEMM's dtype: dtype_name's, and "bf16" for bfloat16, which only
    the GEMM shaders take (shaders/include/vkml_gemm_types.glsl)."""
    return "bf16" if np.dtype(dtype) == BF16 else dtype_name(dtype)


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
    dt = shader_dtype(out.dtype)
    red = rec.device.pipeline(f"splitk_reduce_{dt}", "rrwr", SPLITK_PUSH.size, (256, has_bias, SPLITK_RUN))
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


def dispatch_gemm(rec, p, g: Gemm, t, views: list, out, res_view=None, epi: int = 0,
                  clip: tuple[float, float] = NO_CLIP, more: list | None = None) -> None:
    """Dispatch GEMM pipeline `p` (matmul.comp or matmul_coop.comp; bindings: `views` = A, B,
    C, O, then the split-K partials, then `res_view` when the shader has a residual binding,
    then `more`)
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
    binds = views + [part] + ([] if res_view is None else [res_view]) + (more or [])
    rec.dispatch(p, binds, gemm_push(g, ks, splits, epi, clip), grid)
    if splits > 1:
        record_split_reduce(rec, part, splits, views[2], has_c, out, out.view if res_view is None else res_view,
                            g.m * g.batch, g.n, g.n, g.c_strides or (0, 0), g.beta, epi, clip)
