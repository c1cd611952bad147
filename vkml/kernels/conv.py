"""GPU kernels for Conv and ConvTranspose (1-3 spatial dims, float32 and float16).

Four routes, picked per node:
  * pointwise Conv (1x1 kernel, unit strides, no padding, one group): a batched MatMul
    W (M, C) @ X[n] (C, S) on matmul.py's shader, bias added as Gemm's C;
  * one input channel per group (depthwise, with or without a channel multiplier):
    conv_dw_<t> (shaders/conv_dw.comp), a direct window loop per output element;
  * "direct": conv_small_<t> (shaders/conv_small.comp), for convolutions too small to fill
    the GPU through GEMM tiles (at most DIRECT_MAX_MACS multiply-adds, K = channels x taps
    at most DIRECT_MAX_K): 32 invocations share each output's K, their sums added in shared
    memory; one dispatch, no split-K reduction pass;
  * everything else, ConvTranspose included: conv_<t> (shaders/conv.comp), an implicit GEMM
    whose load stage gathers input columns through a per-k table built here. ConvTranspose
    runs in gather form: output o takes input (o + pad - tap * dilation) / stride where
    that divides exactly. Big float16 Convs run the same GEMM on tensor cores instead
    (conv_coop_<shape>_f16, shaders/conv_coop.comp) where the device has cooperative
    matrices: conv_coop.py says which.
Attributes follow vkml.ops.conv (the NumPy operators): auto_pad, pads, strides, dilations,
group, kernel_shape; ConvTranspose also output_padding and output_shape.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from vkml.ops._window import AUTO_PADS, auto_pad_name, resolve

from . import conv_coop, gemm, winograd
from . import matmul as mm
from . import reduce
from .common import PushBlock, dtype_name, require_dtypes
from .registry import Kernel, TensorSpec, Unsupported, register

MAX_INDEX = (1 << 31) - 1
# Mg, N*P, K, G, P, C*S, Cg*S, wg, wm, Mtot, OD, OH, OW, D, H, W, strides, pads, KS, S, EPI, ELO,
# EHI: 108 bytes
CONV_PUSH = PushBlock("IIIIIIIIIIIII3i3i3iIIIff", "conv")
# total, M, mg, cg, P, OD, OH, OW, D, H, W, kernel, strides, pads, dilations, EPI, ELO, EHI: 104 bytes
DW_PUSH = PushBlock("IIIIIIII3i3i3i3i3iIff", "conv_dw")
# The direct route's bounds: mnist-12's second convolution (3136 outputs x K 200 = 0.63 M) took
# 15.5 us as an implicit GEMM plus 3.9 us of split-K reduction on the H100.
DIRECT_MAX_MACS = 1 << 21
DIRECT_MAX_K = 1024
# ... and with one input channel per group (depthwise; mnist-12's first conv, C = 1) only while
# the outputs are too few to fill the GPU at one invocation each. Since f526a36 sent every
# depthwise convolution of at most 2^21 multiply-adds there, MobileNetV2 b1 went 0.61-0.65 ->
# 1.07-1.13 ms on the H100/H200 (bench/results: h200-2026-11-25 against h100-s6-2026-11-25):
# its 28k-113k-output 3x3 depthwise layers ran as 3.5k-14k workgroups of 32 lanes per output,
# 23 of them idle, with a shared-memory sum each. bench/probe_conv_routes.py is the A/B.
DIRECT_DW_MAX_OUTPUTS = 16384
SMALL_PER_GROUP = 8  # outputs per workgroup in shaders/conv_small.comp (256 / 32 lanes)


@dataclass(frozen=True)
class Geometry:
    """One convolution as the shaders see it; spatial tuples are padded to 3 dims."""
    transposed: bool
    n: int
    c: int
    m: int                      # output channels, all groups
    group: int
    in_sp: tuple[int, int, int]
    out_sp: tuple[int, int, int]
    kernel: tuple[int, int, int]
    strides: tuple[int, int, int]
    pads: tuple[int, int, int]  # at the beginning
    dil: tuple[int, int, int]
    rank: int                   # real spatial rank

    @property
    def cg(self) -> int:
        return self.c // self.group

    @property
    def mg(self) -> int:
        return self.m // self.group

    @property
    def taps(self) -> int:
        return math.prod(self.kernel)

    @property
    def out_shape(self) -> tuple[int, ...]:
        return (self.n, self.m) + self.out_sp[3 - self.rank:]


def _pad3(v: Sequence[int], fill: int) -> tuple[int, int, int]:
    v = tuple(int(e) for e in v)
    return (fill,) * (3 - len(v)) + v


def _ints(attrs, name):
    v = attrs.get(name)
    return None if v is None else [int(e) for e in v]


def geometry(op_type: str, attrs: Mapping[str, Any], x_shape, w_shape) -> Geometry:
    """The convolution's geometry (the same rules as vkml.ops.conv); ValueError if the
    shapes or attributes do not fit together."""
    if len(x_shape) < 3 or len(w_shape) != len(x_shape):
        raise ValueError(f"input {tuple(x_shape)} and weights {tuple(w_shape)} must be (N, C, ...) of one rank >= 3")
    rank = len(x_shape) - 2
    if rank > 3:
        raise ValueError(f"{rank} spatial dimensions (the GPU kernels take 1 to 3)")
    auto_pad = auto_pad_name(attrs.get("auto_pad", "NOTSET"))
    if auto_pad not in AUTO_PADS:
        raise ValueError(f"auto_pad must be one of {AUTO_PADS}, got {auto_pad!r}")
    group = int(attrs.get("group", 1))
    if group < 1:
        raise ValueError(f"group must be >= 1, got {group}")
    n, c = int(x_shape[0]), int(x_shape[1])
    spatial = tuple(int(s) for s in x_shape[2:])
    kernel = tuple(int(k) for k in w_shape[2:])
    ks = _ints(attrs, "kernel_shape")
    if ks is not None and tuple(ks) != kernel:
        raise ValueError(f"kernel_shape {tuple(ks)} does not match the weights' {kernel}")
    strides, dil, pads = _ints(attrs, "strides"), _ints(attrs, "dilations"), _ints(attrs, "pads")
    for name, v in (("strides", strides), ("dilations", dil), ("kernel", kernel)):
        if v is not None and any(e < 1 for e in v):
            raise ValueError(f"{name} must be positive, got {v}")
    if op_type == "Conv":
        if c % group or w_shape[0] % group or w_shape[1] * group != c:
            raise ValueError(f"weights {tuple(w_shape)} do not fit {c} input channels in {group} groups")
        win = resolve(spatial, kernel, strides, dil, pads, auto_pad)
        return Geometry(False, n, c, int(w_shape[0]), group, _pad3(spatial, 1), _pad3(win.out, 1),
                        _pad3(kernel, 1), _pad3(win.strides, 1), _pad3(win.pad_begin, 0),
                        _pad3(win.dilations, 1), rank)
    # ConvTranspose: weights (C, M/group, *kernel)
    if c % group or w_shape[0] != c:
        raise ValueError(f"weights {tuple(w_shape)} need {w_shape[0]} input channels divisible by group {group}, got {c}")
    strides = tuple(strides) if strides else (1,) * rank
    dil = tuple(dil) if dil else (1,) * rank
    opad = tuple(_ints(attrs, "output_padding") or (0,) * rank)
    if len(strides) != rank or len(dil) != rank or len(opad) != rank:
        raise ValueError("strides, dilations and output_padding must have one value per spatial dim")
    full = tuple(s * (i - 1) + o + (k - 1) * d + 1 for s, i, o, k, d in zip(strides, spatial, opad, kernel, dil))
    out_shape_attr = _ints(attrs, "output_shape")
    if out_shape_attr:
        out = tuple(out_shape_attr[-rank:])
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = tuple(i * s for i, s in zip(spatial, strides))
    else:
        out = None
    if out is not None:
        begin = []
        for f, o in zip(full, out):
            total = f - o
            half = total // 2
            begin.append(half if auto_pad == "SAME_UPPER" else total - half)
    else:
        p = tuple(pads) if pads and auto_pad == "NOTSET" else (0,) * (2 * rank)
        if len(p) != 2 * rank:
            raise ValueError(f"pads {p} must have {2 * rank} values")
        out = tuple(f - p[i] - p[i + rank] for i, f in enumerate(full))
        begin = list(p[:rank])
    if any(o < 0 for o in out):
        raise ValueError(f"negative output size {out}")
    return Geometry(True, n, c, int(w_shape[1]) * group, group, _pad3(spatial, 1), _pad3(out, 1),
                    _pad3(kernel, 1), _pad3(strides, 1), _pad3(begin, 0), _pad3(dil, 1), rank)


def k_table(geo: Geometry) -> np.ndarray:
    """conv.comp's per-k table: int32 (K, 2, 4) (see the shader's header)."""
    d, h, w = geo.in_sp
    s = d * h * w
    tz, ty, tx = np.meshgrid(*(np.arange(k) for k in geo.kernel), indexing="ij")
    dz, dy, dx = (t.reshape(-1) * dl for t, dl in zip((tz, ty, tx), geo.dil))
    c = np.arange(geo.cg)[:, None]
    t = np.arange(geo.taps)[None, :]
    tab = np.zeros((geo.cg, geo.taps, 2, 4), np.int64)
    tab[:, :, 0, 0] = c * s + (0 if geo.transposed else (dz * h * w + dy * w + dx)[None, :])
    tab[:, :, 0, 1], tab[:, :, 0, 2], tab[:, :, 0, 3] = dz[None, :], dy[None, :], dx[None, :]
    tab[:, :, 1, 0] = (c * geo.mg * geo.taps + t) if geo.transposed else (c * geo.taps + t)
    return tab.reshape(-1, 2, 4).astype(np.int32)


def _sizes_ok(device, geo: Geometry, specs) -> None:
    limit = device.max_storage_buffer_range
    for s in specs:
        if s is not None and math.prod(s.shape) * np.dtype(s.dtype).itemsize > limit:
            raise Unsupported(f"a {tuple(s.shape)} {np.dtype(s.dtype)} tensor exceeds the device's storage "
                              f"buffer range of {limit} bytes")
    p = math.prod(geo.out_sp)
    for v in (geo.n * geo.m * p, geo.n * geo.c * math.prod(geo.in_sp), geo.cg * geo.taps * geo.mg * geo.group):
        if v > MAX_INDEX:
            raise Unsupported(f"{v} elements exceed the GPU convolution's 32-bit indexing")


def _route(geo: Geometry) -> str:
    if not geo.transposed:
        pointwise = (geo.group == 1 and geo.taps == 1 and geo.strides == (1, 1, 1)
                     and geo.pads == (0, 0, 0) and geo.in_sp == geo.out_sp)
        k = geo.cg * geo.taps
        # small ones first, depthwise too (mnist's first conv, 6272 outputs x 25 taps: 7.1 us
        # as one invocation per output on the H100)
        outputs = geo.n * geo.m * math.prod(geo.out_sp)
        if (not pointwise and k <= DIRECT_MAX_K and outputs * k <= DIRECT_MAX_MACS
                and (geo.cg > 1 or outputs <= DIRECT_DW_MAX_OUTPUTS)):
            return "direct"
        if geo.cg == 1:
            return "dw"
        if pointwise:
            return "pointwise"
    return "gemm"


def _conv_tiling(device, geo: Geometry) -> mm.Tiling:
    # No k: the 8x8 tilings were 7-8x slower than 64x64 on every ResNet-50 convolution.
    t = mm.choose_tiling(device, geo.mg, geo.n * math.prod(geo.out_sp), geo.group, narrow=False)
    if t.threads % (t.bn // 4):  # conv.comp keeps each invocation's B columns fixed
        t = mm.MEDIUM
    return t


def _record_pointwise(rec, geo: Geometry, x, w, b, out, epi: int = 0, res=None, clip=gemm.NO_CLIP,
                      scale=None) -> None:
    """`scale`: X's channels multiplied first by this (N, C, 1, 1) or (1, C, 1, 1) tensor, as
    the GEMM reads them (the Mul of a squeeze-excitation block)."""
    s = math.prod(geo.in_sp)
    g = gemm.Gemm(geo.m, s, geo.c, False, False, geo.c, s, [geo.n], [0], [geo.c * s],
                1.0, 1.0, (1, 0) if b is not None else None)
    kscale = None if scale is None else (scale, scale.shape[0] != 1)
    mm.record_gemm(rec, g, w, x, b, out, epi=epi, res=res, clip=clip, narrow=False, kscale=kscale)


def scalable_input(attrs: Mapping[str, Any], x_shape, w_shape, s_shape) -> bool:
    """Whether the GPU kernel can multiply this Conv's input by a tensor of shape `s_shape` as
    it reads it: a pointwise convolution (the GEMM route that reads X as is) and a scale per
    channel, per image ((N, C, 1, 1)) or shared ((1, C, 1, 1))."""
    try:
        geo = geometry("Conv", attrs, x_shape, w_shape)
    except ValueError:
        return False
    return (len(x_shape) == 4 and not geo.transposed and _route(geo) == "pointwise"
            and tuple(s_shape) in ((geo.n, geo.c, 1, 1), (1, geo.c, 1, 1)))


def _record_dw(rec, geo: Geometry, x, w, b, out, epi: int = 0, res=None, clip=gemm.NO_CLIP,
               small: bool = False, pool: int = 1, mean=None) -> None:
    """The depthwise route, or with `small` the direct route (shaders/conv_small.comp: one
    workgroup of 256 per SMALL_PER_GROUP outputs), there with a fused `pool` x `pool` max pool
    of stride `pool` (outputs: the pooled ones). `mean`: also each output plane's mean into it
    (a fused GlobalAveragePool, fusable_mean: a workgroup per plane)."""
    dev = rec.device
    out_sp = (geo.out_sp[0], geo.out_sp[1] // pool, geo.out_sp[2] // pool)  # (D, H, W); D = 1 when pooled
    p = math.prod(out_sp)
    total = geo.n * geo.m * p
    t = dtype_name(out.dtype)
    views = [x.view, w.view, b.view if b is not None else out.view, out.view, gemm.residual_view(epi, res, out)]
    if mean is not None and (small or pool != 1):
        raise Unsupported("a fused GlobalAveragePool needs the depthwise route")
    if small:
        pipe = dev.pipeline(f"conv_small_{t}", "rrrwr", DW_PUSH.size, (256, b is not None, pool))
        groups = pipe.groups_for(total * 256 // SMALL_PER_GROUP)  # 256 invocations per SMALL_PER_GROUP outputs
    elif mean is not None:
        rw, wg = _mean_workgroups(dev, geo)
        pipe = dev.pipeline(f"conv_dw_mean_{reduce.wg_mode_name(dev)}_{t}", "rrrwrw", DW_PUSH.size,
                            (wg, b is not None, rw, p))
        groups = reduce.group_count(dev, geo.n * geo.m)
        views.append(mean.view)
    else:
        pipe = dev.pipeline(f"conv_dw_{t}", "rrrwr", DW_PUSH.size, (256, b is not None))
        groups = pipe.groups_for(total)
    push = DW_PUSH.pack(total, geo.m, geo.mg, geo.cg, p, *out_sp, *geo.in_sp, *geo.kernel, *geo.strides,
                        *geo.pads, *geo.dil, epi, *clip)
    rec.dispatch(pipe, views, push, groups)


def _record_gemm(rec, geo: Geometry, x, w, b, out, epi: int = 0, res=None, clip=gemm.NO_CLIP,
                 w_host=None) -> None:
    """The implicit GEMM: conv_coop.comp on tensor cores where conv_coop.plan takes it (float16
    Conv), else conv.comp; both with the same push constants, k table and split K. A 3x3
    convolution of stride 1 whose filters are known on the host (`w_host`) takes Winograd's
    transforms instead where winograd.chosen says so."""
    dev = rec.device
    if winograd.chosen(dev, geo, out.dtype, w_host):
        winograd.record(rec, geo, x, w_host, b, out, epi, res, clip)
        return
    s = math.prod(geo.in_sp)
    p = math.prod(geo.out_sp)
    k = geo.cg * geo.taps
    if geo.transposed:
        wg, wm = geo.cg * geo.mg * geo.taps, geo.taps
    else:
        wg, wm = geo.mg * k, k
    coop = conv_coop.plan(dev, geo, out.dtype, w.view.offset)
    if coop is not None:
        t = coop.tiling
        name, spec = conv_coop.variant(dev, coop, b is not None)
    else:
        t = _conv_tiling(dev, geo)
        t.validate(dev)
        vec_a = 4 if not geo.transposed and k % 4 == 0 and w.view.offset % 16 == 0 else 1
        name, spec = f"conv_{dtype_name(out.dtype)}", t.spec() + (vec_a, b is not None, geo.transposed)
    pipe = dev.pipeline(name, "rrrwrwr", CONV_PUSH.size, spec)
    vr = gemm.residual_view(epi, res, out)
    table = rec.constants(k_table(geo).tobytes())
    splits, ks = gemm.split_k(t.blocks(geo.mg, geo.n * p, geo.group), k, t.bk, geo.m * geo.n * p * 4,
                            dev.max_storage_buffer_range)
    part = dev.alloc(splits * geo.m * geo.n * p * 4) if splits > 1 else out.view
    push = CONV_PUSH.pack(geo.mg, geo.n * p, k, geo.group, p, geo.c * s, geo.cg * s, wg, wm, geo.m,
                          *geo.out_sp, *geo.in_sp, *geo.strides, *geo.pads, ks, splits, epi, *clip)
    g = gemm.Gemm(geo.mg, geo.n * p, k, False, False, 0, 0, [geo.group * splits], [0], [0])
    grid = gemm.dispatch_grid(dev, g, t.bm, t.bn)
    bias = b.view if b is not None else out.view
    rec.dispatch(pipe, [x.view, w.view, bias, out.view, table, part, vr], push, grid)
    if splits > 1:
        gemm.record_split_reduce(rec, part, splits, bias, b is not None, out, vr, geo.m, geo.n * p, p, (1, 0),
                               1.0, epi, clip)


@register
class ConvKernel(Kernel):
    op_types = ("Conv", "ConvTranspose")

    def _geo(self, op_type, attrs, inputs) -> Geometry:
        if len(inputs) not in (2, 3) or inputs[0] is None or inputs[1] is None:
            raise Unsupported(f"{op_type} takes X, W and an optional B")
        try:
            geo = geometry(op_type, attrs, inputs[0].shape, inputs[1].shape)
        except ValueError as e:
            raise Unsupported(str(e)) from None
        b = inputs[2] if len(inputs) == 3 else None
        if b is not None and tuple(b.shape) != (geo.m,):
            raise Unsupported(f"bias {tuple(b.shape)} must have shape ({geo.m},)")
        return geo

    def check(self, device, op_type, attrs, inputs):
        dts = {np.dtype(t.dtype) for t in inputs if t is not None}
        if len(dts) != 1:
            raise Unsupported(f"{op_type} with mixed dtypes {sorted(str(d) for d in dts)}")
        dt = dtype_name(dts.pop())
        if dt not in mm.FLOATS:
            raise Unsupported(f"{op_type} on the GPU supports float32 and float16, not {inputs[0].dtype}")
        require_dtypes(device, inputs[0].dtype)
        geo = self._geo(op_type, attrs, inputs)
        if geo.c == 0:
            raise Unsupported(f"{op_type} with no input channels")
        _sizes_ok(device, geo, list(inputs) + [TensorSpec(geo.out_shape, inputs[0].dtype)])
        if _route(geo) == "gemm" and geo.cg * geo.taps * 2 * 16 > device.max_storage_buffer_range:
            raise Unsupported("the convolution's k table exceeds the storage buffer range")

    def infer(self, op_type, attrs, inputs):
        geo = self._geo(op_type, attrs, inputs)
        return [TensorSpec(geo.out_shape, np.dtype(inputs[0].dtype))]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        x, w = inputs[0], inputs[1]
        b = inputs[2] if len(inputs) == 3 else None
        out = outputs[0]
        geo = self._geo(op_type, attrs, [TensorSpec.of(t) if t is not None else None for t in inputs])
        if out.size == 0:
            return
        route = _route(geo)
        if route == "pointwise":
            _record_pointwise(rec, geo, x, w, b, out)
        elif route in ("dw", "direct"):
            _record_dw(rec, geo, x, w, b, out, small=route == "direct")
        else:
            _record_gemm(rec, geo, x, w, b, out, w_host=(consts or {}).get(1))


FUSED_CONV = "FusedConv"  # vkml/compile/epilogue.py: Conv [+ Add residual] [+ Relu]


def fusable_route(op_type: str, attrs: Mapping[str, Any], x_shape, w_shape) -> bool:
    """Whether a Conv's GPU route applies an epilogue in its own dispatch (every route does:
    implicit GEMM, pointwise and depthwise)."""
    try:
        geometry(op_type, attrs, x_shape, w_shape)
    except ValueError:
        return False
    return True


# A GlobalAveragePool after a depthwise convolution (a squeeze-excitation block's) joins it
# (conv_dw.comp PLANE_MEAN: a workgroup per output plane) from this many planes (images x
# channels): fewer workgroups would leave most of the GPU idle while they walk their planes.
MEAN_MIN_PLANES = 64
# ... and planes of at most this many outputs (at most MEAN_PLANE_LIMIT, the shader's shared
# memory). A plane's workgroup has MEAN_WORKGROUP invocations (fewer for small planes), each
# computing one output at a time. H200, host medians of the last two of 4 rounds of 100 runs
# (bench/results/mean_fusion3-h200-2026-11-28.jsonl): EfficientNet-B0 872 us unfused, 834 with
# planes up to 14x14 fused (256), 850 up to 28x28 (1024), 866-871 up to 56x56; MobileNetV3-Large
# 630, 619, 634, 634 (a workgroup walks a big plane longer than the separate pool costs). The
# first version computed the outputs in the pool's own workgroup (64 wide below 2048 elements),
# P / 64 of them one after another per invocation: only 7x7 planes paid
# (mean_fusion2-h200-2026-11-28.jsonl).
MEAN_MAX_PLANE = 256
MEAN_PLANE_LIMIT = 3072  # (with 256 invocations, 13 KiB of shared memory: under Vulkan's 16 KiB minimum)
MEAN_WORKGROUP = 256


def fusable_mean(conv_attrs: Mapping[str, Any], x_shape, w_shape) -> bool:
    """Whether a GlobalAveragePool of this Conv's output can be computed in the Conv's dispatch:
    a 2-D convolution on the depthwise route, at least MEAN_MIN_PLANES output planes of at most
    MEAN_MAX_PLANE outputs, which kernels/reduce.py would average with one workgroup each in one
    pass (the fused mean adds in that order: the same bits)."""
    try:
        geo = geometry("Conv", conv_attrs, x_shape, w_shape)
    except ValueError:
        return False
    return (len(x_shape) == 4 and not geo.transposed and _route(geo) == "dw"
            and geo.n * geo.m >= MEAN_MIN_PLANES and math.prod(geo.out_sp) <= min(MEAN_MAX_PLANE, MEAN_PLANE_LIMIT)
            and reduce.one_pass_per_output(geo.n * geo.m, math.prod(geo.out_sp)))


def _mean_workgroups(device, geo: Geometry) -> tuple[int, int]:
    """(the GlobalAveragePool's workgroup size, whose sums the fused mean repeats; the fused
    workgroup's size); Unsupported where the plane and the workgroup do not fit in the device's
    shared memory (4 bytes each)."""
    p = math.prod(geo.out_sp)
    rw = reduce.output_wg_size(device, geo.n * geo.m, p)
    wg = max(rw, min(MEAN_WORKGROUP, 1 << (p - 1).bit_length()))
    if 4 * (p + wg) > device.limits["max_compute_shared_memory_size"]:
        raise Unsupported(f"a fused GlobalAveragePool of {p}-output planes needs {4 * (p + wg)} bytes of shared "
                          f"memory; the device has {device.limits['max_compute_shared_memory_size']}")
    return rw, wg


POOLS = (2, 3)  # the max pools conv_small.comp fuses: k x k windows with stride k


def fusable_pool(conv_attrs: Mapping[str, Any], x_shape, w_shape, pool_attrs: Mapping[str, Any],
                 pool_opset: int) -> int:
    """The window side k when a MaxPool after this Conv can run in the Conv's dispatch, else 0:
    the Conv takes the direct route (shaders/conv_small.comp) and is 2-D, the pool's window is
    k x k (k in POOLS) with stride k, no padding or dilation, floor rounding (or sizes k
    divides). mnist-12 pools 2x2 then 3x3."""
    try:
        geo = geometry("Conv", conv_attrs, x_shape, w_shape)
    except ValueError:
        return 0
    if len(x_shape) != 4 or geo.transposed or _route(geo) != "direct":
        return 0
    a = pool_attrs
    ks = list(a.get("kernel_shape") or ())
    if len(ks) != 2 or ks[0] != ks[1] or ks[0] not in POOLS or list(a.get("strides") or ()) != ks:
        return 0
    k = ks[0]
    if any(a.get("pads") or ()) or str(a.get("auto_pad", "NOTSET")) not in ("NOTSET", "VALID"):
        return 0
    if any(d != 1 for d in (a.get("dilations") or ())):
        return 0
    oh, ow = geo.out_sp[1], geo.out_sp[2]
    if oh < k or ow < k or (pool_opset >= 10 and a.get("ceil_mode", 0) and (oh % k or ow % k)):
        return 0
    return k


@register
class FusedConvKernel(ConvKernel):
    """A Conv whose following Add (a residual of the output's shape) and/or Relu run in its
    own epilogue, and a k x k / stride k max pool after them where `pool` (k) says so: inputs X, W, B (or
    absent), R (or absent), S (or absent: X's per-channel scale, scalable_input); attrs: the
    Conv's plus `epilogue` (EPI_* flags), `pool` and `mean` (not None: a second output, the
    GlobalAveragePool of the first, fusable_mean)."""
    op_types = (FUSED_CONV,)

    def check(self, device, op_type, attrs, inputs):
        super().check(device, "Conv", attrs, list(inputs[:3]))
        geo = self._geo("Conv", attrs, list(inputs[:3]))
        sc = inputs[4] if len(inputs) > 4 else None
        if sc is not None and (np.dtype(sc.dtype) != np.dtype(inputs[0].dtype)
                               or not scalable_input(attrs, inputs[0].shape, inputs[1].shape, sc.shape)):
            raise Unsupported(f"an input scale {tuple(sc.shape)} {sc.dtype} needs a pointwise convolution and "
                              f"one {inputs[0].dtype} value per channel (and image)")
        r = inputs[3] if len(inputs) > 3 else None
        if r is not None and (tuple(r.shape) != geo.out_shape or np.dtype(r.dtype) != np.dtype(inputs[0].dtype)):
            raise Unsupported(f"residual {tuple(r.shape)} {r.dtype} does not match the output {geo.out_shape}")
        if attrs.get("pool") and (r is not None or _route(geo) != "direct" or len(geo.out_shape) != 4
                                  or int(attrs["pool"]) not in POOLS):
            raise Unsupported("a fused max pool needs the direct route, 2-D, no residual, a 2x2 or 3x3 window")
        if attrs.get("mean") is not None:
            if attrs.get("pool") or sc is not None or not fusable_mean(attrs, inputs[0].shape, inputs[1].shape):
                raise Unsupported("a fused GlobalAveragePool needs a 2-D depthwise convolution of enough planes")
            _mean_workgroups(device, geo)  # (its shared memory)

    def infer(self, op_type, attrs, inputs):
        (spec,) = super().infer("Conv", attrs, list(inputs[:3]))
        k = int(attrs.get("pool") or 0)
        if k:
            n, m, h, w = spec.shape
            spec = TensorSpec((n, m, h // k, w // k), spec.dtype)
        if attrs.get("mean") is not None:
            return [spec, TensorSpec(spec.shape[:2] + (1, 1), spec.dtype)]
        return [spec]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        x, w, out = inputs[0], inputs[1], outputs[0]
        b = inputs[2] if len(inputs) > 2 else None
        res = inputs[3] if len(inputs) > 3 else None
        scale = inputs[4] if len(inputs) > 4 else None
        geo = self._geo("Conv", attrs, [TensorSpec.of(t) if t is not None else None for t in inputs[:3]])
        if out.size == 0:
            return
        epi = int(attrs["epilogue"])
        clip = tuple(float(v) for v in attrs.get("clip") or gemm.NO_CLIP)
        route = _route(geo)
        if attrs.get("pool"):
            _record_dw(rec, geo, x, w, b, out, epi, res, clip, small=True, pool=int(attrs["pool"]))
        elif route == "pointwise":
            _record_pointwise(rec, geo, x, w, b, out, epi, res, clip, scale)
        elif scale is not None:
            raise Unsupported("an input scale needs the pointwise route")
        elif route in ("dw", "direct"):
            _record_dw(rec, geo, x, w, b, out, epi, res, clip, small=route == "direct",
                       mean=outputs[1] if len(outputs) > 1 else None)
        else:
            _record_gemm(rec, geo, x, w, b, out, epi, res, clip, w_host=(consts or {}).get(1))
