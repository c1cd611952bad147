"""The tensor-core path of MatMul/Gemm: float16 GEMMs through VK_KHR_cooperative_matrix
(shaders/matmul_coop.comp), float32 accumulation.

Chosen at record time when the device enabled cooperative matrices and lists a subgroup
shape with float16 A and B and a float32 accumulator; otherwise (and for operands whose
layout the shader's 8-byte loads cannot read) matmul.py's SIMT shader runs instead.

VKML_COOP=0 turns the path off; VKML_COOP_TILE="BM,BN,BK,WM,WN" forces a tiling.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import config
from .gemm import (EPI_DIV, EPI_GELU, EPI_GELU_TANH, EPI_HARD_SIGMOID, EPI_HARD_SWISH, EPI_LEAKY_RELU, EPI_SIGMOID,
                   MATMUL_PUSH, NO_CLIP, dispatch_gemm, residual_view)

FEATURES = ("cooperative_matrix", "fp16_arithmetic", "storage_16bit")
SHAPES = ((16, 16, 16), (16, 8, 16), (16, 8, 8))  # the shader variants built (tools/build_shaders.py)
VECS = (8, 4)  # access widths in halves (16- or 8-byte vectors), one shader variant each


@dataclass(frozen=True)
class CoopShape:
    m: int
    n: int
    k: int


@dataclass(frozen=True)
class CoopTiling:
    """Block BM x BN x BK; each subgroup owns a WM x WN warp tile; `stages` shared buffers
    per operand (2: double-buffered, 1: half the shared memory for a bigger BK)."""
    bm: int
    bn: int
    bk: int
    wm: int
    wn: int
    stages: int = 2

    @property
    def warps(self) -> int:
        return (self.bm // self.wm) * (self.bn // self.wn)

    def shared_bytes(self, shape: CoopShape, trans_a: bool, trans_b: bool, vec: int = 8) -> int:
        """`stages` buffers of each operand's tile (one vector of padding per row); the
        epilogue's per-subgroup float32 staging tiles reuse A's (see `problem`)."""
        return self.stages * 2 * (self._a_halves(trans_a, vec) + self._b_halves(trans_b, vec))

    def _a_halves(self, trans_a: bool, vec: int) -> int:
        return (self.bk * (self.bm + vec)) if trans_a else (self.bm * (self.bk + vec))

    def _b_halves(self, trans_b: bool, vec: int) -> int:
        return (self.bn * (self.bk + vec)) if trans_b else (self.bk * (self.bn + vec))

    def blocks(self, m: int, n: int, batch: int) -> int:
        """Workgroups for an m x n output, `batch` times."""
        return -(-m // self.bm) * -(-n // self.bn) * batch

    def problem(self, shape: CoopShape) -> str | None:
        """Why this tiling cannot use `shape`, or None."""
        if self.stages not in (1, 2):
            return f"stages must be 1 or 2, got {self.stages}"
        if self.bm % self.wm or self.bn % self.wn:
            return "block not a multiple of the warp tile"
        if self.wm % shape.m or self.wn % shape.n or self.bk % shape.k:
            return f"warp tile {self.wm}x{self.wn}x{self.bk} not a multiple of {shape}"
        if self.bk % 8 or self.bm % 8 or self.bn % 8:
            return "tile sides must be multiples of 8"
        if self.warps * shape.m * shape.n * 4 > self.stages * 2 * self.bm * self.bk:
            return "the epilogue's staging tiles do not fit in A's shared buffers"
        return None


# Candidates, biggest first: 4 subgroups of 64 x 64 on a 128 x 128 block with K steps of 32,
# double-buffered, run a 4096^3 float16 product at 247 TFLOPS on an H100 against 180 for the
# former 128 x 256 x 16 block and 218 single-buffered (bench/results/checks/
# h100-2026-11-25-coop-tilings.txt; bench/bench_matmul.py --coop-tiles sweeps others). Smaller
# blocks when the big ones would leave multiprocessors idle.
TILINGS = (CoopTiling(128, 128, 32, 64, 64), CoopTiling(128, 64, 32, 64, 32), CoopTiling(64, 64, 32, 32, 32))
# Skinny products (at most 64 rows: a batch of 64 through a wide layer) stream B once and are
# bound by how much of it is in flight: K steps of 128 through one shared buffer moved a
# 64 x 4096 x 4096 float16 product in 22 us against 31 with steps of 32 (H100,
# bench/results/checks/h100-2026-11-25-skinny-gemm.txt).
SKINNY = CoopTiling(64, 64, 128, 32, 32, 1)
# Short products (K <= SHORT_K: the pointwise convolutions of CNNs, batched per image) spend
# little time in the K loop, and big blocks leave more of their tiles half-used and fewer
# workgroups per multiprocessor: 64 x 64 blocks through one shared buffer beat the 128 x 128
# default 1.5-3.5x on every pointwise convolution of ResNet-50 at batch 32 (GPU timestamps on an
# H200, bench/results/checks/h200-2026-11-25-coop-short-k.jsonl) and tie at batch 1.
SHORT_K = 1024
# Epilogues only the matmul_coop_*_epi_f16 variants compute (shaders/matmul_coop.comp EPI_GEMM;
# the plain ones keep residual, Relu, Clip and SiLU: every activation compiled in slows them)
HEAVY_EPILOGUES = (EPI_GELU | EPI_GELU_TANH | EPI_DIV | EPI_SIGMOID | EPI_HARD_SIGMOID | EPI_HARD_SWISH
                   | EPI_LEAKY_RELU)
SHORT = CoopTiling(64, 64, 32, 32, 32, 1)
# About a wave of workgroups: an H100 has 132 multiprocessors (matmul_cm2.py picks by it too)
WAVE = 128
# Whole blocks and K a multiple of BK: the shader's ALIGNED variant, whose fetches skip the
# bounds checks (4096^3 float16 on an H200: 250 -> 278 TFLOPS,
# bench/results/checks/h200-2026-11-28-coop-aligned.txt). A module switch for A/Bs, e.g.
# bench/probe_knobs.py --variant "checked=matmul_coop.ALIGNED:False".
ALIGNED = True


def device_shape(device) -> CoopShape | None:
    """The cooperative-matrix shape to use on `device` (f16 x f16 + f32), or None."""
    if not config.coop():
        return None
    if any(f not in device.features for f in FEATURES):
        return None
    cands = [c for c in device.info.cooperative_matrix
             if c.scope == "subgroup" and c.a_type == "f16" and c.b_type == "f16"
             and c.c_type == "f32" and c.result_type == "f32" and not c.saturating
             and (c.m, c.n, c.k) in SHAPES]
    if not cands:
        return None
    best = min(cands, key=lambda c: ((c.m, c.n, c.k) != (16, 16, 16), -(c.m * c.n * c.k)))
    return CoopShape(best.m, best.n, best.k)


def _forced() -> CoopTiling | None:
    ints = config.coop_tile()
    return CoopTiling(*ints) if ints else None


def choose(device, g, shape: CoopShape, vec: int = 8) -> CoopTiling | None:
    """A tiling for GEMM `g` on `device`, or None when none fits the device's limits."""
    lim = device.limits
    sg = device.info.subgroup_size
    forced = _forced()
    options = (forced,) if forced else TILINGS
    if not forced and g.k <= SHORT_K:
        options = (SHORT,) + TILINGS
    elif not forced and g.m <= SKINNY.bm and g.k >= 2 * SKINNY.bk:
        options = (SKINNY,) + TILINGS
    fitting = []
    for t in options:
        if t.problem(shape) is not None:
            if forced:
                raise ValueError(f"VKML_COOP_TILE {t}: {t.problem(shape)}")
            continue
        threads = t.warps * sg
        if threads > lim["max_compute_work_group_invocations"] or threads > lim["max_compute_work_group_size"][0]:
            continue
        if t.shared_bytes(shape, g.trans_a, g.trans_b, vec) > lim["max_compute_shared_memory_size"]:
            continue
        fitting.append(t)
    if not fitting:
        return None
    if forced:
        return fitting[0]
    if fitting[0] is SKINNY or fitting[0] is SHORT:
        return fitting[0]
    # The biggest block that still yields about a wave of workgroups, else the smallest.
    for t in fitting:
        if t.blocks(g.m, g.n, g.batch) >= WAVE:
            return t
    return fitting[-1]


def access_width(g) -> int | None:
    """The widest vector (in halves) the shader may read A and B with: every contiguous run,
    leading stride and batch stride a multiple of it; None when not even 4 fits."""
    run_a = g.m if g.trans_a else g.k
    run_b = g.k if g.trans_b else g.n
    sizes = (run_a, run_b, g.lda, g.ldb, *g.sab, *g.sbb)
    for vec in VECS:
        if all(s % vec == 0 for s in sizes):
            return vec
    return None


def plan(device, g, a, b) -> tuple[CoopShape, CoopTiling, int] | None:
    """(shape, tiling, access width) when this float16 GEMM should run on cooperative matrices."""
    shape = device_shape(device)
    vec = access_width(g)
    if shape is None or vec is None or g.k == 0:
        return None
    if a.view.offset % (2 * vec) or b.view.offset % (2 * vec):
        vec = 4
        if a.view.offset % 8 or b.view.offset % 8:
            return None
    if g.m < shape.m or g.n < shape.n:
        return None
    t = choose(device, g, shape, vec)
    return None if t is None else (shape, t, vec)


def record_if_suitable(rec, g, a, b, c, out, epi: int = 0, res=None, clip: tuple[float, float] = NO_CLIP) -> bool:
    """Record the GEMM on cooperative matrices if `plan` allows; False to fall back. Skinny
    GEMMs whose blocks would leave most of the GPU idle split K as the SIMT kernel does
    (kernels/matmul.py split_k: float32 partials, shaders/splitk_reduce.comp adds them and
    beta * C). The epilogue `epi` (gemm.EPI_*: + res, an activation) runs before the store,
    or in the reduce pass when K is split."""
    dev = rec.device
    chosen = plan(dev, g, a, b)
    if chosen is None:
        return False
    shape, t, vec = chosen
    has_c = g.c_strides is not None
    threads = t.warps * dev.info.subgroup_size
    aligned = ALIGNED and g.m % t.bm == 0 and g.n % t.bn == 0 and g.k % t.bk == 0
    spec = (threads, t.bm, t.bn, t.bk, t.wm, t.wn, g.trans_a, g.trans_b, has_c, dev.info.subgroup_size, t.stages,
            aligned)
    # GELU, the division and the CNN activations need the variant that has their code (HEAVY_EPILOGUES)
    heavy = "_epi" if epi & HEAVY_EPILOGUES else ""
    p = dev.pipeline(f"matmul_coop_{shape.m}x{shape.n}x{shape.k}_v{vec}{heavy}_f16", "rrrwwr", MATMUL_PUSH.size, spec)
    dispatch_gemm(rec, p, g, t, [a.view, b.view, c.view if has_c else out.view, out.view], out,
                  residual_view(epi, res, out), epi, clip)
    return True
