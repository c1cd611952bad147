"""The tensor-core path of Conv: float16 convolutions as implicit GEMMs on cooperative matrices
(shaders/conv_coop.comp, the core of matmul_coop.comp through include/vkml_coop.glsl),
float32 accumulation.

conv.py consults `plan` on its implicit-GEMM route (not the direct, depthwise or pointwise
ones; pointwise convolutions are MatMuls, which take matmul_coop.py's path themselves) and
records the pipeline it names with conv.comp's push constants, k table, split K and reduce
pass. A convolution takes it when all of these hold, else conv.comp's SIMT kernel runs:
  * float16, Conv (not ConvTranspose);
  * the device has a usable cooperative-matrix shape (matmul_coop.device_shape: the feature,
    float16 storage and arithmetic, an f16 x f16 + f32 subgroup shape; VKML_COOP=1);
  * at least one matrix tile of output channels per group and of output columns (Mg >= CM,
    N * P >= CN), and at least MIN_MACS multiply-adds over all groups;
  * a tiling (matmul_coop.TILINGS, or VKML_COOP_TILE) fits the device, with a workgroup
    size that is a multiple of BN (each invocation gathers one input column).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import config
from .gemm import SPLIT_BELOW_GROUPS
from .matmul_coop import TILINGS, CoopShape, CoopTiling, device_shape

VEC = 8  # shared-memory vectors of 8 halves (the shader variants' VEC)
# Below this many multiply-adds a convolution runs in a few microseconds on either path (launch
# and latency bound), where conv.comp's tilings were measured; above it tensor cores pay.
# ResNet-50's smallest implicit-GEMM convolution (512 channels, 7 x 7, 3 x 3 taps at batch 1)
# has 116 M.
MIN_MACS = 1 << 24


@dataclass(frozen=True)
class CoopConv:
    """How a convolution runs on cooperative matrices: the device's matrix shape, the tiling,
    and whether weight rows are read as 16-byte vectors (K % 8 == 0, aligned binding)."""
    shape: CoopShape
    tiling: CoopTiling
    a_vec: bool


def _fits(device, t: CoopTiling, shape: CoopShape) -> bool:
    lim = device.limits
    threads = t.warps * device.info.subgroup_size
    return (threads <= lim["max_compute_work_group_invocations"]
            and threads <= lim["max_compute_work_group_size"][0]
            and threads % t.bn == 0  # one input column per invocation
            and t.shared_bytes(shape, False, True, VEC) <= lim["max_compute_shared_memory_size"])


def choose(device, geo, shape: CoopShape) -> CoopTiling | None:
    """The tiling for convolution `geo`: VKML_COOP_TILE when set (None when this shader cannot
    take it on the device: conv.comp runs then), else among matmul_coop.TILINGS those that pad
    the group's output channels least (64 channels take 64-row blocks, not half-empty 128-row
    ones), the biggest that still gives a wave of workgroups (split K fills in below that),
    else the smallest."""
    forced = config.coop_tile()
    if forced:
        t = CoopTiling(*forced)
        if t.problem(shape) is not None:
            raise ValueError(f"VKML_COOP_TILE {t}: {t.problem(shape)}")
        return t if _fits(device, t, shape) else None
    fitting = [t for t in TILINGS if t.problem(shape) is None and _fits(device, t, shape)]
    if not fitting:
        return None
    rows = {t: -(-geo.mg // t.bm) * t.bm for t in fitting}
    fitting = [t for t in fitting if rows[t] == min(rows.values())]
    cols = geo.n * math.prod(geo.out_sp)
    for t in fitting:
        if t.blocks(geo.mg, cols, geo.group) >= SPLIT_BELOW_GROUPS:
            return t
    return fitting[-1]


def plan(device, geo, dtype, w_offset: int = 0) -> CoopConv | None:
    """How convolution `geo` (conv.Geometry) of `dtype` runs on cooperative matrices, or None
    for conv.comp (the rules in the module's docstring); `w_offset`: the weights' byte offset
    in their buffer."""
    if geo.transposed or np.dtype(dtype) != np.float16:
        return None
    shape = device_shape(device)
    if shape is None:
        return None
    cols = geo.n * math.prod(geo.out_sp)
    k = geo.cg * geo.taps
    if geo.mg < shape.m or cols < shape.n or geo.mg * cols * k * geo.group < MIN_MACS:
        return None
    t = choose(device, geo, shape)
    if t is None:
        return None
    return CoopConv(shape, t, k % VEC == 0 and w_offset % (2 * VEC) == 0)


def variant(device, p: CoopConv, has_bias: bool) -> tuple[str, tuple]:
    """(shader variant, specialization constants) of conv_coop.comp for plan `p`."""
    t, s = p.tiling, p.shape
    sg = device.info.subgroup_size
    # ids 0-10; 8 is unused (matmul_coop.comp's HAS_C in the shared numbering)
    spec = (t.warps * sg, t.bm, t.bn, t.bk, t.wm, t.wn, p.a_vec, has_bias, False, sg, t.stages)
    return f"conv_coop_{s.m}x{s.n}x{s.k}_f16", spec
