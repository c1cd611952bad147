"""Casts to and from the dtypes the elementwise shaders lack: float64, bfloat16, the four float8
flavours, float8e8m0 (to and from float32, float16 and bfloat16), float4e2m1, int4/uint4 and
int2/uint2 (shaders/cast_ext.comp).

The shader decodes each element into sign * m * 2^e with integer operations and re-encodes it
rounding to nearest even, so results are bit-exact with vkml/ops/cast.py (NumPy and ml_dtypes)
and float64 needs no shaderFloat64, only 64-bit integers. Types travel as codes in push
constants: one variant per pair of storage sizes (castx_b<in>_b<out>). The narrow types are
one byte per element, as ml_dtypes stores them on the host (int4 -1 is the byte 0x0F), so
device tensors hold the host's bytes unchanged and odd element counts need no care.
CastKernel (elementwise.py) hands a node here when either side is one of these dtypes.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from .common import PushBlock, element_count, require_dtypes
from .registry import Unsupported

# dtype -> the shader's type code (shaders/cast_ext.comp)
CODES = {np.dtype(t): c for t, c in (
    (np.float32, 1), (np.float16, 2), (np.int32, 3), (np.int64, 4), (np.bool_, 5), (np.int8, 6),
    (np.int16, 7), (np.uint8, 8), (np.uint16, 9), (np.uint32, 10), (np.uint64, 11), (np.float64, 12),
    (ml_dtypes.bfloat16, 13), (ml_dtypes.float8_e4m3fn, 14), (ml_dtypes.float8_e4m3fnuz, 15),
    (ml_dtypes.float8_e5m2, 16), (ml_dtypes.float8_e5m2fnuz, 17), (ml_dtypes.float4_e2m1fn, 18),
    (ml_dtypes.int4, 19), (ml_dtypes.uint4, 20), (ml_dtypes.int2, 21), (ml_dtypes.uint2, 22),
    (ml_dtypes.float8_e8m0fnu, 23))}
E8M0 = np.dtype(ml_dtypes.float8_e8m0fnu)
# float8e8m0 casts on the GPU: to and from these (the node suite's, and MX scales' usual types)
E8M0_PEERS = frozenset(np.dtype(t) for t in (np.float32, np.float16, ml_dtypes.bfloat16))
ROUND_MODES = {"up": 0, "down": 1, "nearest": 2}
EXOTIC = frozenset(d for d, c in CODES.items() if c >= 12)
CAST_PUSH = PushBlock("IIIII", "cast_ext")  # n, src, dst, saturate, round (float8e8m0)
_SIZE_FEATURE = {1: "storage_8bit", 2: "storage_16bit"}


def handles(src, dst) -> bool:
    """Whether this kernel casts src -> dst (one of them exotic, both known)."""
    src, dst = np.dtype(src), np.dtype(dst)
    if E8M0 in (src, dst) and ({src, dst} - {E8M0}) - E8M0_PEERS:
        return False
    return (src in EXOTIC or dst in EXOTIC) and src in CODES and dst in CODES


def check(device, src, dst) -> None:
    """Unsupported unless `device` has what the castx variant for src -> dst needs."""
    # every variant decodes and encodes with 64-bit integer operations, whatever the two dtypes
    require_dtypes(device, np.int64, what=f"casts from {np.dtype(src)} to {np.dtype(dst)}")
    for dt in (np.dtype(src), np.dtype(dst)):
        feat = _SIZE_FEATURE.get(dt.itemsize)
        if feat and feat not in device.features:
            raise Unsupported(f"{dt} needs {feat}, which {device.name} lacks")


def record(rec, x, out, saturate: bool, round_mode: str = "up") -> None:
    n = element_count(out.shape)
    if n == 0:
        return
    src, dst = np.dtype(x.dtype), np.dtype(out.dtype)
    p = rec.device.pipeline(f"castx_b{src.itemsize}_b{dst.itemsize}", "rw", CAST_PUSH.size)
    push = CAST_PUSH.pack(n, CODES[src], CODES[dst], 1 if saturate else 0, ROUND_MODES.get(round_mode, 0))
    rec.dispatch(p, [x.view, out.view], push, p.groups_for(n))
