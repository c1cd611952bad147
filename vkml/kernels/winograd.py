"""Winograd convolutions F(T x T, 3x3), T = 4 or 2, for 3x3 convolutions of stride 1
(shaders/winograd.comp, kernels/conv.py).

Why: a T x T tile of a 3x3 convolution's output costs 9 T^2 multiply-adds per input channel done
directly and (T + 2)^2 through the transforms (4x fewer at T = 4, 2.25x at T = 2), and most of
ResNet's multiply-adds are in such convolutions. With A = T + 2 the work becomes three dispatches:
  1. winograd_in: each A x A input patch d -> v = B^T d B, stored as V (A^2, C, P), P = N x tiles;
  2. a batched GEMM on matmul.comp: M[xi] = U[xi] (Mout x C) @ V[xi] (C x P), for the A^2 xi;
  3. winograd_out: each tile's A x A m -> the T x T outputs A^T m A, plus the bias and the fused
     epilogue (residual, activation), as conv.comp applies them.
U = G g G^T of each filter g is computed once on the host (vkml/ops/_winograd.py), in float64,
rounded once to float32, and uploaded once per device for each weight array (the filters must
be constants). V and M live in the recording's shared scratch buffers (CommandRecorder.scratch),
so a plan holds one pair for all its Winograd convolutions. float16 convolutions read and write
float16 tensors around float32 transforms and GEMMs.

Accuracy: the results differ from the direct product by float32 rounding of the transformed
values, which an output shares with the others of its tile (tests/vulkan/test_kernels_winograd.py
bounds it by 1e-5 of the tile's sum of |products|). On whole models it stays close to the direct
kernel's: resnet18 at batch 2 against onnxruntime's CPU float32, the largest difference relative
to the largest logit was 3.9e-7 direct, 4.4e-7 at T = 2 and 5.8e-7 at T = 4 (lavapipe).

VKML_WINOGRAD (vkml/config.py): auto takes it for convolutions of at least MIN_CHANNELS input
and output channels and MIN_MACS multiply-adds; all for every eligible one (tests); off never.
"""
from __future__ import annotations

import threading
import weakref

import numpy as np

from .. import config
from ..ops._winograd import transformed_weights
from ..vulkan.tensor import DeviceTensor
from . import gemm
from . import matmul as mm
from .common import PushBlock, dtype_name

# total, C, P, TH, TW, H, W, py, px, EPI, ELO, EHI: 48 bytes
PUSH = PushBlock("IIIIIiiiiIff", "winograd")
# auto: at least this many input and output channels (narrower convolutions give the GEMMs too
# short a K, or too few rows, to pay for the transforms' memory traffic) and at least MIN_MACS
# multiply-adds done directly. H200, interleaved rounds, host medians: at batch 1 (each 3x3
# convolution 115 M multiply-adds) every 3x3 convolution on it made resnet18 555 -> 571 us at
# T = 2 and 663 at T = 4, ResNet-50 1204 -> 1206 and 1302: the two transforms' dispatches cost
# ~5-7 us each there, as much as the GEMMs save (bench/results/checks/h200-2026-12-03-winograd-tiles.jsonl).
# resnet18 at batch 2 (231 M) 815-824 -> 779-800 us; batch 4 1378 -> 1057-1072, batch 8 2341 ->
# 1574-1592; ResNet-50 at batch 4 3389-3409 -> 3117-3136, batch 8 5082-5114 -> 4336-4348
# (bench/results/checks/h200-2026-12-03-winograd-batches.jsonl).
MIN_CHANNELS = 32
MIN_MACS = 1 << 27
# The transformed products' GEMM tiling (None: matmul.choose_tiling's).
GEMM_TILING = None
MAX_INDEX = (1 << 31) - 1
# The output tile's side T: F(T x T, 3x3) (shaders/winograd.comp's WINO_T). H200, 3 interleaved
# rounds of 30 runs at batch 32 (bench/results/checks/h200-2026-12-03-winograd-tiles.jsonl): resnet18
# 6.13 GPU ms direct, 4.03 at T = 2, 3.28 at T = 4; ResNet-50 14.04, 12.04, 11.39 (the 64x128 8x8
# GEMM tiling changed T = 4 by less than 0.1%, T = 2 by 2-3%).
TILE = 4
SHADERS = {2: "winograd", 4: "winograd4"}


def tiles(geo, t: int) -> tuple[int, int]:
    """(tile rows, tile columns) per image: t x t output tiles covering the output."""
    return -(-geo.out_sp[1] // t), -(-geo.out_sp[2] // t)


def eligible(geo, dtype) -> bool:
    """Whether the transforms apply: a 2-D float32 or float16 Conv of 3x3 filters, stride 1,
    dilation 1, one group (float16 tensors are transformed and multiplied in float32)."""
    return (not geo.transposed and geo.rank == 2 and geo.group == 1 and geo.kernel == (1, 3, 3)
            and geo.strides == (1, 1, 1) and geo.dil == (1, 1, 1)
            and np.dtype(dtype) in (np.dtype(np.float32), np.dtype(np.float16)) and geo.c > 0 and geo.m > 0)


def _sizes(geo, t: int) -> tuple[int, int]:
    """(bytes of V, bytes of M); both must fit one binding and 32-bit indexing."""
    th, tw = tiles(geo, t)
    p = geo.n * th * tw
    a2 = (t + 2) ** 2
    return a2 * geo.c * p * 4, a2 * geo.m * p * 4


def chosen(device, geo, dtype, weights) -> bool:
    """Whether this convolution takes the Winograd route (VKML_WINOGRAD, the channel rule, the
    filters known on the host, the scratch within a binding's range)."""
    mode = config.winograd()
    if mode == "off" or weights is None or not eligible(geo, dtype):
        return False
    if mode == "auto" and (min(geo.c, geo.m) < MIN_CHANNELS
                           or geo.n * geo.m * geo.c * 9 * geo.out_sp[1] * geo.out_sp[2] < MIN_MACS):
        return False
    limit = min(device.max_storage_buffer_range, 4 * MAX_INDEX)
    return all(s <= limit for s in _sizes(geo, TILE))


_uploads: dict[tuple[int, int, int], DeviceTensor] = {}
_lock = threading.Lock()


def _forget(wid: int) -> None:
    """Drop the uploads of a weight array that has died."""
    with _lock:
        for k in [k for k in _uploads if k[1] == wid]:
            del _uploads[k]


def _weights_on(device, w: np.ndarray, tile: int) -> DeviceTensor:
    """U of constant weights `w` on `device`: transformed and uploaded once while `w` lives."""
    key = (id(device), id(w), tile)
    with _lock:
        t = _uploads.get(key)
    if t is not None and not t.view.alive:  # (the device was closed and opened again)
        t = None
        with _lock:
            _uploads.pop(key, None)
    if t is None:
        t = DeviceTensor.from_numpy(device, transformed_weights(w, tile))
        with _lock:
            if key not in _uploads:
                if not any(k[1] == key[1] for k in _uploads):  # (one finalizer for all of w's entries)
                    weakref.finalize(w, _forget, id(w))
                _uploads[key] = t
            t = _uploads[key]
    return t


def record(rec, geo, x, weights: np.ndarray, b, out, epi: int = 0, res=None,
           clip: tuple[float, float] = gemm.NO_CLIP) -> None:
    """Record the three passes for Conv(x, W = `weights` (host values), b) into `out`, then
    the epilogue `epi` (gemm.EPI_*; `res` the residual)."""
    dev = rec.device
    tile = TILE
    a2 = (tile + 2) ** 2
    th, tw = tiles(geo, tile)
    p = geo.n * th * tw
    h, w = geo.in_sp[1], geo.in_sp[2]
    oh, ow = geo.out_sp[1], geo.out_sp[2]
    u = _weights_on(dev, weights, tile)
    vbytes, mbytes = _sizes(geo, tile)
    v = DeviceTensor(rec.scratch("winograd_v", vbytes), (a2, geo.c, p), np.float32)
    mt = DeviceTensor(rec.scratch("winograd_m", mbytes), (a2, geo.m, p), np.float32)

    dt = dtype_name(out.dtype)
    pin = dev.pipeline(f"{SHADERS[tile]}_in_{dt}", "rw", PUSH.size, (256, False))
    total = geo.c * p
    rec.dispatch(pin, [x.view, v.view], PUSH.pack(total, geo.c, p, th, tw, h, w, geo.pads[1], geo.pads[2],
                                                  0, *gemm.NO_CLIP), pin.groups_for(total))
    g = gemm.Gemm(geo.m, p, geo.c, False, False, geo.c, p, [a2], [geo.m * geo.c], [geo.c * p])
    mm.record_gemm(rec, g, u, v, None, mt, tiling=GEMM_TILING, narrow=False)
    pout = dev.pipeline(f"{SHADERS[tile]}_out_{dt}", "rrwr", PUSH.size, (256, b is not None))
    total = geo.m * p
    rec.dispatch(pout, [mt.view, b.view if b is not None else out.view, out.view, gemm.residual_view(epi, res, out)],
                 PUSH.pack(total, geo.m, p, th, tw, oh, ow, 0, 0, epi, *clip), pout.groups_for(total))
