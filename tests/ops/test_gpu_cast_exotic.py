"""GPU Cast and CastLike to and from float64, bfloat16, the float8 flavours, float8e8m0 (with float32,
float16 and bfloat16), float4e2m1, int4/uint4 and int2/uint2 (shaders/cast_ext.comp) against the
CPU device, bit for bit.

Hypothesis draws the pair of types, saturate (0/1, which float8 targets read), the length (odd
ones included: the 4- and 2-bit types are a byte per element) and the values: random bit
patterns of the source (NaNs with payloads, infinities, ±0, subnormals), the edges of each
float8's range (448, 464, 57344, ...) and values far beyond it. Float-to-integer casts draw
values whose truncation fits int32 only: for NaN, infinities and larger values the CPU returns
whatever its C conversion gives (undefined behaviour, not the same in NumPy's and ml_dtypes'
loops), which the GPU does not imitate.
"""
from __future__ import annotations

import os
import sys

import ml_dtypes
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
from _gen import seeds  # noqa: E402
from _oracle import gpu_and_cpu, make_model  # noqa: E402

import vkml  # noqa: E402
from vkml.ir import dtypes  # noqa: E402
from vkml.kernels.cast_ext import CODES, E8M0, E8M0_PEERS, EXOTIC, handles  # noqa: E402

HYP = settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", "10")) * 4, deadline=None,
               suppress_health_check=list(HealthCheck))
ALL = sorted(CODES, key=lambda d: CODES[d])
PAIRS = [(s, d) for s in ALL for d in ALL if s != d and (s in EXOTIC or d in EXOTIC) and handles(s, d)
         and E8M0 not in (s, d)]  # (float8e8m0: test_e8m0 below, Cast-24's round_mode)
NIBBLE = {np.dtype(t): bits for t, bits in ((ml_dtypes.int4, 4), (ml_dtypes.uint4, 4),
                                            (ml_dtypes.float4_e2m1fn, 4), (ml_dtypes.int2, 2),
                                            (ml_dtypes.uint2, 2))}
EDGES = [0.0, -0.0, 1.0, -1.0, 0.5, 1.5, 2.5, 6.0, 7.0, 240.0, 448.0, 464.0, 465.0, 480.0, 57344.0, 61440.0,
         65504.0, 65520.0, 1e10, -1e10, 3.4e38, 1e300, 2.0 ** -6, 2.0 ** -9, 2.0 ** -10, 2.0 ** -16,
         2.0 ** -17, 2.0 ** -24, 2.0 ** -25, 2.0 ** -126, 2.0 ** -133, 2.0 ** -149, 5e-324,
         float("inf"), float("-inf"), float("nan")]


def _is_float(dt: np.dtype) -> bool:
    return dt.kind == "f" or (dt.kind == "V" and "int" not in dt.name)


def source_values(rng: np.random.Generator, dt: np.dtype, n: int, to: np.dtype) -> np.ndarray:
    if dt == np.bool_:
        return rng.integers(0, 2, n).astype(bool)
    if dt in NIBBLE:
        return rng.integers(0, 1 << NIBBLE[dt], n, dtype=np.uint8).view(dt)
    if not _is_float(dt):
        info = np.iinfo(dt)
        x = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
        small = rng.integers(-300, 300, n).astype(dt)
        return np.where(rng.integers(0, 2, n) == 0, x, small)
    u = f"u{dt.itemsize}"
    bits = rng.integers(0, np.iinfo(u).max, n, dtype=u, endpoint=True).view(dt)
    with np.errstate(all="ignore"):
        edges = np.array(EDGES, np.float64)
        edges = np.concatenate([edges, -edges, edges * (1 + 2.0 ** -20), rng.normal(0, 300, 16)]).astype(dt)
        x = np.where(rng.integers(0, 2, n) == 0, bits, rng.choice(edges, n))
        if not _is_float(to) and to != np.bool_:  # keep float -> int defined (see the docstring)
            f = x.astype(np.float64)
            x = np.where(np.isfinite(f) & (np.abs(f) < 2.0 ** 31), x, np.zeros((), dt))
    return x.astype(dt)


def run_both(gpu: str, op: str, x: np.ndarray, to: np.dtype, saturate: int | None, round_mode: str | None = None):
    if op == "Cast":
        attrs = {"to": dtypes.onnx_type(to)}
        inputs = {"x": x}
    else:
        attrs = {}
        inputs = {"x": x, "like": np.zeros((1,), to)}
    if saturate is not None:
        attrs["saturate"] = saturate
    if round_mode is not None:
        attrs["round_mode"] = round_mode
    model = make_model(op, inputs, attrs, 24 if E8M0 in (x.dtype, np.dtype(to)) else 21)
    (got,), (want,), sess = gpu_and_cpu(gpu, model, inputs, quiet=True)
    (row,) = sess.placement()
    assert row["device"] == gpu, row
    if want.size:
        assert row.get("pipelines"), f"{op} on {gpu} dispatched nothing: {row}"
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    return got, want


@HYP
@given(pair=st.sampled_from(PAIRS), n=st.integers(1, 67), seed=seeds, saturate=st.sampled_from([None, 0, 1]),
       op=st.sampled_from(["Cast", "CastLike"]))
def test_cast_exotic_bitwise(gpu, pair, n, seed, saturate, op):
    src, dst = pair
    rng = np.random.default_rng(seed)
    x = source_values(rng, src, n, dst)
    got, want = run_both(gpu, op, x, dst, saturate)
    u = f"u{want.itemsize}"
    np.testing.assert_array_equal(got.view(u), want.view(u), err_msg=f"{src} -> {dst} saturate={saturate}: "
                                  f"{x.view(f'u{x.itemsize}')!r}")


@given(seed=seeds)
@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
def test_every_narrow_pattern(gpu, seed):
    """Every bit pattern of each 8/16-bit exotic type to float32 and back, both saturate modes."""
    for src in sorted(EXOTIC, key=lambda d: CODES[d]):
        if src.itemsize > 2:
            continue
        n = 1 << (8 * src.itemsize) if src not in NIBBLE else 1 << NIBBLE[src]
        x = np.arange(n, dtype=f"u{src.itemsize}").view(src)
        got, want = run_both(gpu, "Cast", x, np.dtype(np.float32), None)
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32), err_msg=str(src))
        f = np.random.default_rng(seed).integers(0, 2 ** 32, 4099, dtype=np.uint32).view(np.float32)
        for sat in (0, 1):
            got, want = run_both(gpu, "Cast", f, src, sat)
            np.testing.assert_array_equal(got.view(f"u{src.itemsize}"), want.view(f"u{src.itemsize}"),
                                          err_msg=f"float32 -> {src} saturate={sat}")


def test_feature_reason():
    """Without 64-bit integers the cast stays on the CPU and says which feature is missing."""
    from vkml.kernels import Unsupported, get_kernel
    from vkml.kernels.registry import TensorSpec

    class NoInt64:
        name = "fake"
        features = frozenset({"storage_8bit", "storage_16bit"})

    spec = TensorSpec((3,), np.dtype(np.float32))
    reason = get_kernel("Cast").supports(NoInt64(), "Cast", {"to": dtypes.onnx_type(ml_dtypes.bfloat16)}, [spec])
    assert reason and "int64" in reason
    NoInt64.features = frozenset({"int64"})
    reason = get_kernel("Cast").supports(NoInt64(), "Cast", {"to": dtypes.onnx_type(ml_dtypes.bfloat16)}, [spec])
    assert reason and "storage_16bit" in reason
    assert isinstance(Unsupported("x"), Exception)


@HYP
@given(peer=st.sampled_from(sorted(E8M0_PEERS, key=lambda d: CODES[d])), to_e8m0=st.booleans(), n=st.integers(1, 67),
       seed=seeds, saturate=st.sampled_from([None, 0, 1]), round_mode=st.sampled_from([None, "up", "down", "nearest"]))
def test_e8m0(gpu, peer, to_e8m0, n, seed, saturate, round_mode):
    """float8e8m0 (Cast-24): to it from float32/float16/bfloat16 in each round mode and saturate
    setting (random bit patterns: NaN, infinities, subnormals, the midpoints between powers of
    two), and from it (every code, 255 NaN)."""
    rng = np.random.default_rng(seed)
    if to_e8m0:
        x = source_values(rng, peer, n, E8M0)
        mids = (np.array([1.5, 0.75, 3.0, 2.0 ** -127, 1.5 * 2.0 ** -127, 2.0 ** 127 * 1.5]) *
                rng.choice([1, -1], 6)).astype(peer)
        x[: min(n, 6)] = mids[: min(n, 6)]
        got, want = run_both(gpu, "Cast", x, E8M0, saturate, round_mode)
    else:
        x = rng.integers(0, 256, n, dtype=np.uint8).view(E8M0)
        got, want = run_both(gpu, "Cast", x, peer, saturate, round_mode)
    u = f"u{want.itemsize}"
    np.testing.assert_array_equal(got.view(u), want.view(u), err_msg=f"{x.dtype} -> {want.dtype} {round_mode}")
