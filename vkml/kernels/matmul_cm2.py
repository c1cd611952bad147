"""The VK_NV_cooperative_matrix2 path of float16 MatMul/Gemm (shaders/matmul_cm2.comp): one
workgroup-scope accumulator per block, operands loaded by tensor layout, float32 accumulation.

Opt-in (VKML_CM2=1): then taken before matmul_coop.py's subgroup-scope shader where the device
offers workgroup-scope matrices of flexible sizes with tensor addressing (NVIDIA drivers), for
plain products: alpha * op(A) @ op(B), batched, split K for skinny ones; beta * C and the
fused epilogues stay on matmul_coop.py. VKML_CM2_TILE forces a tiling.

Why not by default (H200, driver 580, bench/results/checks/h200-2026-12-02-cm2.txt): a 4096^3
product ran at 208-248 TFLOPS on the best tilings against matmul_coop's 278-280. The driver
stages the tensor loads itself; without 16-byte alignment hints on the strides and offsets it
ran at 45-68 TFLOPS.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import config
from .gemm import MATMUL_PUSH, NO_CLIP, dispatch_gemm
from .matmul_coop import WAVE

FEATURES = ("cooperative_matrix2", "fp16_arithmetic", "storage_16bit")
SHADER = "matmul_cm2_f16"


@dataclass(frozen=True)
class Cm2Tiling:
    """A BM x BN block per workgroup of `threads` invocations, K in BK steps, `unroll` steps a
    trip of the main loop."""
    bm: int
    bn: int
    bk: int
    threads: int
    unroll: int = 2

    def blocks(self, m: int, n: int, batch: int) -> int:
        return -(-m // self.bm) * -(-n // self.bn) * batch


# Candidates, biggest first; the first that yields about a wave of workgroups (matmul_coop.WAVE)
# is taken, else the last.
TILINGS = (Cm2Tiling(128, 256, 32, 256), Cm2Tiling(128, 128, 32, 256), Cm2Tiling(64, 128, 32, 128),
           Cm2Tiling(64, 64, 32, 128))


def _granule(device, threads: int):
    """The flexible-size granule (m, n, k) for float16 x float16 + float32 at workgroup scope
    with `threads` invocations, or None."""
    for f in device.info.coop_flexible:
        if (f.scope == "workgroup" and f.invocations == threads and f.a_type == "f16" and f.b_type == "f16"
                and f.c_type == "f32" and f.result_type == "f32" and not f.saturating):
            return f.m, f.n, f.k
    return None


def fits(device, t: Cm2Tiling) -> bool:
    """Whether tiling `t` is a size the device's workgroup-scope matrices may take."""
    g = _granule(device, t.threads)
    if g is None:
        return False
    lim = device.info.coop2_limits
    if t.threads > lim.get("max_workgroup_size", 0) or max(t.bm, t.bn, t.bk) > lim.get("max_dimension", 0):
        return False
    pow2 = t.bk & (t.bk - 1) == 0  # (the shader rounds each split's start down to a multiple of BK)
    return t.bm % g[0] == 0 and t.bn % g[1] == 0 and t.bk % g[2] == 0 and pow2 and t.unroll >= 1


def usable(device) -> bool:
    """Whether GEMMs on `device` may take this path now (VKML_CM2, VKML_COOP, the device's
    features)."""
    return config.cm2() and config.coop() and all(f in device.features for f in FEATURES)


def choose(device, g) -> Cm2Tiling | None:
    forced = config.cm2_tile()
    if forced:
        t = Cm2Tiling(*forced)
        if not fits(device, t):
            raise ValueError(f"VKML_CM2_TILE {t}: not a size this device's workgroup-scope matrices take")
        return t
    fitting = [t for t in TILINGS if fits(device, t)]
    for t in fitting:
        if t.blocks(g.m, g.n, g.batch) >= WAVE:
            return t
    return fitting[-1] if fitting else None


def record_if_suitable(rec, g, a, b, c, out, epi: int = 0, res=None, clip: tuple[float, float] = NO_CLIP) -> bool:
    """Record the float16 GEMM on workgroup-scope cooperative matrices when the device has
    them and the product is a plain one (no C, no epilogue); False to fall back."""
    dev = rec.device
    if not usable(dev) or epi or g.c_strides is not None or g.k == 0:
        return False
    # 16-byte rows keep the driver's loads vectorized (and are what the other paths assume)
    if any(s % 8 for s in (g.lda, g.ldb, *g.sab, *g.sbb)) or a.view.offset % 16 or b.view.offset % 16:
        return False
    t = choose(dev, g)
    if t is None:
        return False
    aligned = g.m % t.bm == 0 and g.n % t.bn == 0 and g.k % t.bk == 0
    # constant ids 0-3, 6, 7, 11, 12 (the others are matmul_coop.comp's and unused here)
    spec = (t.threads, t.bm, t.bn, t.bk, 0, 0, g.trans_a, g.trans_b, False, 0, 0, aligned, t.unroll)
    p = dev.pipeline(SHADER, "rrrww", MATMUL_PUSH.size, spec)
    dispatch_gemm(rec, p, g, t, [a.view, b.view, out.view, out.view], out, None, 0, NO_CLIP)
    return True
