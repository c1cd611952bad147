"""GPU Mod (vkml/kernels/elementwise.py, shaders/binary.comp) against vkml's CPU operator.

Floats (float32, float16, float64; fmod=1: C's fmod, fmod=0: NumPy's remainder) are computed
on the operands' bits with integer operations, so the results are bitwise equal to the CPU's,
subnormals, infinities, zero divisors and signed zeros included. Values mix random bit
patterns (every exponent), ordinary numbers, subnormals and the special values. NaN results
must be NaN where the CPU's are; their payloads are compared too on x86-64, where NumPy's
rules are the ones the shader follows (elsewhere a CPU may pick another NaN of two).

Integers (every width, signed and unsigned) include zero divisors and MIN % -1: the CPU
operator (NumPy) gives 0 for both, and so does the GPU.

Each example checks that the GPU session really dispatched the node.
"""
from __future__ import annotations

import os
import platform
import sys
import types

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
from _gen import broadcast_pair, seeds  # noqa: E402
from _oracle import gpu_and_cpu, make_model  # noqa: E402

from vkml.kernels import Unsupported, get_kernel  # noqa: E402
from vkml.kernels.registry import TensorSpec  # noqa: E402

FLOATS = [np.dtype(t) for t in (np.float32, np.float16, np.float64)]
INTS = [np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64)]
X86 = platform.machine().lower() in ("x86_64", "amd64")
HYP = settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", "10")), deadline=None,
               suppress_health_check=list(HealthCheck))


def _bits(dtype: np.dtype) -> np.dtype:
    return np.dtype(f"u{np.dtype(dtype).itemsize}")


def float_values(rng: np.random.Generator, shape, dtype: np.dtype) -> np.ndarray:
    """Random bit patterns, ordinary and subnormal numbers, and the special values, mixed."""
    dtype = np.dtype(dtype)
    u = _bits(dtype)
    n = int(np.prod(shape, dtype=np.int64))
    fi = np.finfo(dtype)
    raw = rng.integers(0, np.iinfo(u).max, n, dtype=u, endpoint=True).view(dtype)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1, -1, 0.5, -2.5, 3, -3, fi.tiny, -fi.tiny,
                        fi.smallest_subnormal, -fi.smallest_subnormal, fi.max, -fi.max, fi.eps, 7.25], dtype)
    ordinary = (rng.standard_normal(n) * 10.0 ** rng.integers(-2, 3, n)).astype(dtype)
    subnormal = (rng.standard_normal(n) * float(fi.tiny) * 8).astype(dtype)
    pick = rng.integers(0, 4, n)
    out = np.choose(pick, [raw, rng.choice(special, n), ordinary, subnormal])
    return out.astype(dtype).reshape(shape)


def run_mod(gpu: str, a: np.ndarray, b: np.ndarray, fmod: int) -> tuple[np.ndarray, np.ndarray]:
    model = make_model("Mod", {"a": a, "b": b}, {"fmod": fmod}, 13)
    (got,), (want,), sess = gpu_and_cpu(gpu, model, {"a": a, "b": b}, quiet=True)
    (row,) = sess.placement()
    assert row["device"] == gpu and row.get("pipelines"), row
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    return got, want


def assert_bitwise(got: np.ndarray, want: np.ndarray, nan_payloads: bool = X86) -> None:
    if got.dtype.kind != "f":
        np.testing.assert_array_equal(got, want)
        return
    u = _bits(got.dtype)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg="NaN positions")
    keep = np.ones(want.shape, bool) if nan_payloads else ~np.isnan(want)
    np.testing.assert_array_equal(got.view(u)[keep], want.view(u)[keep], err_msg="bits")


@pytest.mark.parametrize("fmod", [0, 1])
@HYP
@given(dtype=st.sampled_from(FLOATS), pair=broadcast_pair(), seed=seeds)
def test_mod_floats(gpu, fmod, dtype, pair, seed):
    rng = np.random.default_rng(seed)
    a, b = float_values(rng, pair[0], dtype), float_values(rng, pair[1], dtype)
    got, want = run_mod(gpu, a, b, fmod)
    assert_bitwise(got, want)


@pytest.mark.parametrize("fmod", [0, 1])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_mod_floats_many(gpu, fmod, dtype):
    """Many values in one run: every exponent distance the long division walks, the rounding
    of fmod=0's correction (subnormal results included), every pairing of special values."""
    rng = np.random.default_rng(1234 + fmod)
    a, b = float_values(rng, (20000,), dtype), float_values(rng, (20000,), dtype)
    got, want = run_mod(gpu, a, b, fmod)
    assert_bitwise(got, want)
    special = float_values(rng, (64,), dtype)
    got, want = run_mod(gpu, special[:, None], special[None, :], fmod)
    assert_bitwise(got, want)


@pytest.mark.skipif(not X86, reason="NaN payload rules of NumPy on x86-64")
@pytest.mark.parametrize("fmod", [0, 1])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_mod_nan_payloads(gpu, fmod, dtype):
    """NaN operands with random payloads (signalling and quiet, both signs, equal payloads):
    the GPU returns the NaN the CPU does."""
    rng = np.random.default_rng(99)
    u = _bits(dtype)
    bits = u.itemsize * 8
    frac = np.finfo(dtype).nmant
    n = 4000

    def nans():
        pay = rng.integers(1, 1 << min(frac, 62), n, dtype=np.uint64) & np.uint64((1 << frac) - 1)
        pay = np.where(rng.integers(0, 3, n) == 0, pay & np.uint64(3), pay)  # frequent ties
        pay = np.maximum(pay, np.uint64(1))
        sign = rng.integers(0, 2, n, dtype=np.uint64) << np.uint64(bits - 1)
        exp = np.uint64(((1 << (bits - 1 - frac)) - 1) << frac)
        return (sign | exp | pay).astype(u).view(dtype)

    a, b = nans(), nans()
    ordinary = float_values(rng, (n,), dtype)
    for x, y in ((a, b), (a, ordinary), (ordinary, b)):
        got, want = run_mod(gpu, x, y, fmod)
        assert_bitwise(got, want, nan_payloads=True)


def int_values(rng: np.random.Generator, shape, dtype: np.dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    special = np.array([info.min, info.max, 0, 1, 2, 3, 7, info.max - 1] + ([-1, -2, -7] if dtype.kind == "i" else []),
                       dtype)
    pick = rng.integers(0, 2, shape) == 0
    return np.where(pick, rng.choice(special, shape), x).astype(dtype)


@pytest.mark.parametrize("fmod", [0, 1])
@HYP
@given(dtype=st.sampled_from(INTS), pair=broadcast_pair(), seed=seeds)
def test_mod_ints_with_zero_divisors(gpu, fmod, dtype, pair, seed):
    """x % 0 and MIN % -1 included: 0, as the CPU operator gives."""
    rng = np.random.default_rng(seed)
    a, b = int_values(rng, pair[0], dtype), int_values(rng, pair[1], dtype)
    got, want = run_mod(gpu, a, b, fmod)
    assert_bitwise(got, want)


def test_mod_int_edges(gpu):
    """Every pairing of each integer dtype's edge values (zero divisors, MIN % -1...)."""
    for dtype in INTS:
        info = np.iinfo(dtype)
        cand = [info.min, info.min + 1, 0, 1, 7, info.max - 1, info.max] + ([-7, -1] if dtype.kind == "i" else [])
        vals = np.array(sorted(set(int(v) for v in cand)), dtype)
        for fmod in (0, 1):
            got, want = run_mod(gpu, vals[:, None], vals[None, :], fmod)
            assert_bitwise(got, want)


def test_mod_refusals():
    """Mixed dtypes stay on the CPU; float64 needs shaderInt64 only (its bits are integers)."""
    k = get_kernel("Mod")
    f64 = TensorSpec((4,), np.dtype(np.float64))
    f32 = TensorSpec((4,), np.dtype(np.float32))
    k.check(types.SimpleNamespace(name="int64 only", features=frozenset({"int64"})), "Mod", {"fmod": 1}, [f64, f64])
    with pytest.raises(Unsupported, match="int64"):
        k.check(types.SimpleNamespace(name="bare", features=frozenset()), "Mod", {"fmod": 0}, [f64, f64])
    with pytest.raises(Unsupported):
        k.check(types.SimpleNamespace(name="full", features=frozenset({"int64"})), "Mod", {}, [f32, f64])
    with pytest.raises(Unsupported, match="fmod"):
        k.check(types.SimpleNamespace(name="full", features=frozenset({"int64"})), "Mod", {"fmod": 2}, [f32, f32])
