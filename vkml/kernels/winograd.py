"""Winograd F(2x2, 3x3) for 3x3 convolutions of stride 1 (shaders/winograd.comp, kernels/conv.py).

Why: a 2x2 tile of a 3x3 convolution's output costs 36 multiply-adds per input channel done
directly and 16 through the transforms, and most of ResNet's multiply-adds are in such
convolutions. The work becomes three dispatches:
  1. winograd_in: each 4x4 input patch d -> v = B^T d B, stored as V (16, C, P), P = N x tiles;
  2. a batched GEMM on matmul.comp: M[xi] = U[xi] (Mout x C) @ V[xi] (C x P), for the 16 xi;
  3. winograd_out: each tile's 4x4 m -> the 2x2 outputs A^T m A, plus the bias and the fused
     epilogue (residual, activation), as conv.comp applies them.
U = G g G^T of each filter g is computed once on the host in float64, rounded once to float32,
and uploaded once per device for each weight array (the filters must be constants). V and M
live in the recording's shared scratch buffers (CommandRecorder.scratch), so a plan holds one
pair for all its Winograd convolutions.

The transforms only add and subtract (B, A) or halve (G), so the results differ from the
direct product by float32 rounding only, a few ulps of the sum of |products|
(tests/ops/test_gpu_winograd.py bounds it).

VKML_WINOGRAD (vkml/config.py): auto takes it for convolutions of at least MIN_CHANNELS input
and output channels; all for every eligible one (tests); off never.
"""
from __future__ import annotations

import threading
import weakref

import numpy as np

from .. import config
from ..vulkan.tensor import DeviceTensor
from . import gemm
from . import matmul as mm
from .common import PushBlock

# total, C, P, TH, TW, H, W, py, px, EPI, ELO, EHI: 48 bytes
PUSH = PushBlock("IIIIIiiiiIff", "winograd")
# auto: at least this many input and output channels (narrower convolutions give the 16 GEMMs
# too short a K, or too few rows, to pay for the transforms' memory traffic) and at least
# MIN_MACS multiply-adds done directly. H200, 3 interleaved rounds of 60 runs
# (bench/results/checks/h200-2026-12-03-winograd.jsonl): resnet18 at batch 32 6.12 -> 4.02 GPU ms,
# ResNet-50 at batch 32 14.07 -> 12.05; at batch 1 (every 3x3 convolution 115 M multiply-adds)
# resnet18 584 -> 594 us host->host and ResNet-50 even: the two transforms' dispatches cost ~6 us
# each there, as much as the GEMMs save.
MIN_CHANNELS = 32
MIN_MACS = 1 << 28
# The 16 GEMMs' SIMT tiling (None: matmul.choose_tiling's).
GEMM_TILING = None
MAX_INDEX = (1 << 31) - 1
_G = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]])


def transformed_weights(w: np.ndarray) -> np.ndarray:
    """U (16, M, C) float32 for weights W (M, C, 3, 3): U[4 a + b, m, c] = (G W[m, c] G^T)[a, b]."""
    m, c = w.shape[:2]
    u = np.einsum("ai,mcij,bj->abmc", _G, np.asarray(w, np.float64), _G)
    return np.ascontiguousarray(u.reshape(16, m, c), dtype=np.float32)


def tiles(geo) -> tuple[int, int]:
    """(tile rows, tile columns) per image: 2x2 output tiles covering the output."""
    return -(-geo.out_sp[1] // 2), -(-geo.out_sp[2] // 2)


def eligible(geo, dtype) -> bool:
    """Whether the transforms apply: a 2-D float32 Conv of 3x3 filters, stride 1, dilation 1,
    one group."""
    return (not geo.transposed and geo.rank == 2 and geo.group == 1 and geo.kernel == (1, 3, 3)
            and geo.strides == (1, 1, 1) and geo.dil == (1, 1, 1) and np.dtype(dtype) == np.float32
            and geo.c > 0 and geo.m > 0)


def _sizes(device, geo) -> tuple[int, int]:
    """(bytes of V, bytes of M); both must fit one binding and 32-bit indexing."""
    th, tw = tiles(geo)
    p = geo.n * th * tw
    return 16 * geo.c * p * 4, 16 * geo.m * p * 4


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
    return all(s <= limit for s in _sizes(device, geo))


_uploads: dict[tuple[int, int], DeviceTensor] = {}
_lock = threading.Lock()


def _weights_on(device, w: np.ndarray) -> DeviceTensor:
    """U of constant weights `w` on `device`: transformed and uploaded once while `w` lives."""
    key = (id(device), id(w))
    with _lock:
        t = _uploads.get(key)
    if t is None:
        t = DeviceTensor.from_numpy(device, transformed_weights(w))
        with _lock:
            if key not in _uploads:
                _uploads[key] = t
                weakref.finalize(w, _uploads.pop, key, None)
            t = _uploads[key]
    return t


def record(rec, geo, x, weights: np.ndarray, b, out, epi: int = 0, res=None,
           clip: tuple[float, float] = gemm.NO_CLIP) -> None:
    """Record the three passes for Conv(x, W = `weights` (host values), b) into `out`, then
    the epilogue `epi` (gemm.EPI_*; `res` the residual)."""
    dev = rec.device
    th, tw = tiles(geo)
    p = geo.n * th * tw
    h, w = geo.in_sp[1], geo.in_sp[2]
    oh, ow = geo.out_sp[1], geo.out_sp[2]
    u = _weights_on(dev, weights)
    vbytes, mbytes = _sizes(dev, geo)
    v = DeviceTensor(rec.scratch("winograd_v", vbytes), (16, geo.c, p), np.float32)
    mt = DeviceTensor(rec.scratch("winograd_m", mbytes), (16, geo.m, p), np.float32)

    pin = dev.pipeline("winograd_in_f32", "rw", PUSH.size, (256, False))
    total = geo.c * p
    rec.dispatch(pin, [x.view, v.view], PUSH.pack(total, geo.c, p, th, tw, h, w, geo.pads[1], geo.pads[2],
                                                  0, *gemm.NO_CLIP), pin.groups_for(total))
    g = gemm.Gemm(geo.m, p, geo.c, False, False, geo.c, p, [16], [geo.m * geo.c], [geo.c * p])
    mm.record_gemm(rec, g, u, v, None, mt, tiling=GEMM_TILING, narrow=False)
    pout = dev.pipeline("winograd_out_f32", "rrwr", PUSH.size, (256, b is not None))
    total = geo.m * p
    rec.dispatch(pout, [mt.view, b.view if b is not None else out.view, out.view, gemm.residual_view(epi, res, out)],
                 PUSH.pack(total, geo.m, p, th, tw, oh, ow, 0, 0, epi, *clip), pout.groups_for(total))
