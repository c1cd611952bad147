"""Convolutions split over vkml's intra-op threads (vkml/ops/_parallel.py, ops/conv.py _split)
against the same convolution whole, on random geometries, groups, batches and widths; the
chunk runner's errors and its fork reset."""
import os
import sys
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
from _gen import seeds, window_geometry  # noqa: E402

from vkml.ops import _parallel, conv, matmul  # noqa: E402
from vkml.ops._window import resolve  # noqa: E402

pytestmark = pytest.mark.skipif(conv._windowed is None, reason="native extension not built")


@pytest.fixture(autouse=True, scope="module")
def numpy_gemm():
    """NumPy's own cblas GEMMs, which the chunks call (the runtime's limiter registers them)."""
    from vkml.runtime import blas

    found = blas.find_blas()
    if found is None or found.gemm is None:
        pytest.skip("NumPy's BLAS exports no cblas GEMM vkml can reach")
    _parallel.set_gemm(*found.gemm)


geometry = window_geometry(max_kernel=4, max_dilation=2, max_size=14, max_pad=3, ceil=False)


@settings(deadline=None, max_examples=80)
@given(g=geometry, seed=seeds, group=st.sampled_from([1, 2, 3]), batch=st.integers(1, 3), bias=st.booleans(),
       ways=st.integers(2, 5), axis=st.sampled_from(["rows", "channels"]),
       dtype=st.sampled_from([np.float32, np.float64]))
def test_split_matches_whole(g, seed, group, batch, bias, ways, axis, dtype):
    with pytest.MonkeyPatch.context() as m:
        # chunks of any size, so that the small shapes hypothesis draws split
        m.setattr(_parallel, "SPLIT_MACS", 1)
        m.setattr(conv, "SPLIT_MIN_POSITIONS", 1 if axis == "rows" else 10 ** 9)
        m.setattr(conv, "SPLIT_MIN_CHANNELS", 1)
        try:
            _check_split(g, seed, group, batch, bias, ways, dtype)
        finally:
            _parallel.set_width(1)


def _check_split(g, seed, group, batch, bias, ways, dtype):
    spatial, w = g
    rng = np.random.default_rng(seed)
    cin, cout = 2 * group, 4 * group
    x = rng.standard_normal([batch, cin] + spatial).astype(dtype)
    wt = rng.standard_normal([cout, cin // group] + list(w.kernel)).astype(dtype)
    b = rng.standard_normal(cout).astype(dtype) if bias else None
    _parallel.set_width(1)
    whole = conv.conv_core(x, wt, group, w, np.dtype(dtype), b)
    _parallel.set_width(ways)
    split = conv.conv_core(x, wt, group, w, np.dtype(dtype), b)
    assert split.shape == whole.shape and split.dtype == whole.dtype
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(split, whole, rtol=tol, atol=tol)


@settings(deadline=None, max_examples=60)
@given(seed=seeds, lead=st.lists(st.integers(1, 5), min_size=0, max_size=2), m=st.integers(1, 70),
       k=st.integers(1, 40), n=st.integers(1, 40), ways=st.integers(2, 6),
       dtype=st.sampled_from([np.float32, np.float64]))
def test_split_matmul_matches_numpy(seed, lead, m, k, n, ways, dtype):
    """A MatMul by a 2-D matrix in row chunks (matmul.split_matmul) equals NumPy's matmul."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(lead + [m, k]).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_parallel, "SPLIT_MACS", 1)
        mp.setattr(matmul, "SPLIT_MIN_ROWS", 1)
        _parallel.set_width(ways)
        try:
            got = matmul.split_matmul(a, b)
        finally:
            _parallel.set_width(1)
    rows = int(np.prod(lead + [m]))
    if rows < 2:
        assert got is None  # one row: nothing to split
        return
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, np.matmul(a, b), rtol=tol, atol=tol)


def test_big_convolution_splits_on_the_workers(monkeypatch):
    """At the real chunk size: a resnet-sized layer runs as `ways` chunks, its rows on the
    workers, and equals the whole convolution."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 128, 28, 28)).astype(np.float32)
    wt = rng.standard_normal((128, 128, 3, 3)).astype(np.float32)
    w = resolve([28, 28], [3, 3], [1, 1], [1, 1], [1, 1, 1, 1], "NOTSET", False)
    whole = conv.conv_core(x, wt, 1, w, np.dtype(np.float32), None)
    seen = []
    real = _parallel.run_chunks
    monkeypatch.setattr(_parallel, "run_chunks", lambda fn, n, ways: (seen.append((n, ways)), real(fn, n, ways)))
    _parallel.set_width(4)
    try:
        split = conv.conv_core(x, wt, 1, w, np.dtype(np.float32), None)
    finally:
        _parallel.set_width(1)
    assert seen == [(4, 4)]
    np.testing.assert_allclose(split, whole, rtol=1e-5, atol=1e-4)


def test_chunks_run_on_several_threads_and_errors_reach_the_caller():
    threads, lock = set(), threading.Lock()

    def fn(i):
        with lock:
            threads.add(threading.get_ident())
        if i == 3:
            raise KeyError("chunk 3")

    with pytest.raises(KeyError, match="chunk 3"):
        _parallel.run_chunks(fn, 6, 3)
    assert len(threads) >= 2 and threading.get_ident() in threads  # (one worker may take two shares)
    order = []
    _parallel.run_chunks(order.append, 5, 1)  # one way: all on the calling thread, in order
    assert order == [0, 1, 2, 3, 4]
    assert _parallel.bounds(10, 3) == [(0, 4), (4, 7), (7, 10)]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_runs_chunks():
    _parallel.run_chunks(lambda i: None, 4, 4)  # the parent's workers exist
    pid = os.fork()
    if pid == 0:
        ok = 1
        try:
            got = []
            _parallel.run_chunks(lambda i: got.append(i), 4, 4)
            ok = 0 if sorted(got) == [0, 1, 2, 3] and _parallel.width() == 1 else 1
        finally:
            os._exit(ok)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
