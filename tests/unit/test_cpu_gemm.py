"""vkml's own float32 GEMM (vkml/include/cpu_gemm.h) against NumPy in float64: every kernel set
the CPU has, every tile height, K in several blocks, ragged edges, B packed per call or whole
(a convolution's shared columns, read from a panel boundary), and the epilogue (bias per row,
residual, Relu with NaN kept and -0 made +0)."""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vkml.runtime import cpuprog

_cpuprog = cpuprog._cpuprog
pytestmark = pytest.mark.skipif(_cpuprog is None or _cpuprog.gemm_info()[0] == 0,
                                reason="no kernel set of the own GEMM on this CPU")


def _kernels():
    best = _cpuprog.gemm_info()[0] if _cpuprog is not None else 0
    out = []
    if best >= 1:
        out.append((1, 0))
    if best >= 2:
        out += [(2, 8), (2, 12), (2, 14)]
    return out


@pytest.fixture
def restore():
    saved = _cpuprog.set_gemm()
    yield
    _cpuprog.set_gemm(*saved)


@pytest.mark.parametrize("isa, mr", _kernels())
@settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", 40)), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # (restore: once a test, as meant)
@given(m=st.integers(1, 40), k=st.integers(0, 300), n=st.integers(1, 90), kc=st.sampled_from([256, 5, 64]),
       nc=st.sampled_from([512, 32]), packed=st.booleans(), skip=st.booleans(),
       epi=st.sampled_from(["none", "bias", "res", "all"]), seed=st.integers(0, 2 ** 16))
def test_the_kernel_matches_numpy(restore, isa, mr, m, k, n, kc, nc, packed, skip, epi, seed):
    _cpuprog.set_gemm(isa, kc, nc, mr)
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    nr = _cpuprog.gemm_info()[2]
    j0 = nr if packed and skip and n > nr else 0
    bias = rng.standard_normal(m).astype(np.float32) if epi in ("bias", "all") else None
    res = rng.standard_normal((m, n - j0)).astype(np.float32) if epi in ("res", "all") else None
    relu = epi == "all"
    want = a.astype(np.float64) @ b[:, j0:]
    if bias is not None:
        want += bias[:, None]
    if res is not None:
        want += res
    if relu:
        want = np.maximum(want, 0)
    got = _cpuprog.gemm(a, b, bias, res, relu, isa, packed_b=packed, j0=j0)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * max(1, k) ** 0.5)


@pytest.mark.parametrize("isa, mr", _kernels())
def test_relu_keeps_nan_and_makes_negative_zero_positive(restore, isa, mr):
    _cpuprog.set_gemm(isa, 0, 0, mr)
    a = np.array([[1.0], [-1.0], [np.nan], [0.0]], np.float32)
    b = np.array([[0.0, 2.0, -3.0]], np.float32)
    got = _cpuprog.gemm(a, b, None, np.array([[-0.0, 0, 0]] * 4, np.float32), True, isa)
    assert np.isnan(got[2]).all()
    assert not np.signbit(got[~np.isnan(got)]).any()
    np.testing.assert_array_equal(got[:2], [[0, 2, 0], [0, 0, 3]])


def test_weights_pack_into_zero_padded_panels():
    isa, mr, _ = _cpuprog.gemm_info()
    w = np.arange(2 * (mr + 1) * 3, dtype=np.float32).reshape(2, mr + 1, 3)
    p = _cpuprog.pack_weights(w, isa).reshape(2, 2, 3, mr)  # groups, panels, K, rows
    np.testing.assert_array_equal(p[1, 0], w[1, :mr].T)
    np.testing.assert_array_equal(p[1, 1, :, 0], w[1, mr])
    assert not p[:, 1, :, 1:].any()


def test_threads_that_end_leave_no_panels_behind():
    """Each calling thread's B panels are freed when it ends (a pthread key's destructor): a
    session run from many short-lived threads must not grow by half a megabyte a thread."""
    import resource
    import threading

    a = np.ones((64, 256), np.float32)
    b = np.ones((256, 4096), np.float32)
    _cpuprog.gemm(a, b)  # this thread's buffer, and the allocator's first pages
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for _ in range(200):
        t = threading.Thread(target=_cpuprog.gemm, args=(a, b))
        t.start()
        t.join()
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 40, f"{grown_mb:.0f} MB more after 200 threads"
