"""GPU AffineGrid (vkml/kernels/affine_grid.py, shaders/affine_grid.comp) against vkml's CPU
operator (vkml/ops/detection.py): hypothesis sizes (2-D and 3-D, axes of 1 to 9 so a single
position meets align_corners), both align_corners, theta float32 or float16, size fed at run
time (planned per value) or an initializer. Tolerance: none. The base coordinates are the CPU
operator's own (a host table) and the shader sums in NumPy's einsum order without fma, so
results are bitwise equal; float16 rounds once on the bits, as NumPy.
"""
from __future__ import annotations

import os
import sys

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
from _gen import seeds  # noqa: E402
from _oracle import gpu_and_cpu, make_model  # noqa: E402

import vkml  # noqa: E402

HYP = settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", "10")) * 6, deadline=None,
               suppress_health_check=list(HealthCheck))


def run_both(gpu, theta, size, align, const=False):
    feed = {"theta": theta, "size": size}
    model = make_model("AffineGrid", feed, {"align_corners": align}, 20, consts=("size",) if const else ())
    if const:
        feed = {"theta": theta}
    (got,), (want,), sess = gpu_and_cpu(gpu, model, feed)
    (row,) = sess.placement()
    assert row["device"] == gpu and row.get("pipelines"), row  # it really ran on the GPU
    assert got.dtype == want.dtype == theta.dtype and got.shape == want.shape
    return got, want


def assert_bitwise(got, want):
    assert np.array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}")), \
        np.max(np.abs(got.astype(np.float64) - want))


@HYP
@given(r=st.sampled_from([2, 3]), align=st.integers(0, 1), dtype=st.sampled_from([np.float32, np.float16]),
       const=st.booleans(), seed=seeds, data=st.data())
def test_affine_grid(gpu, r, align, dtype, const, seed, data):
    rng = np.random.default_rng(seed)
    n = data.draw(st.integers(1, 3))
    dims = data.draw(st.lists(st.integers(1, 9), min_size=r, max_size=r))
    scale = data.draw(st.sampled_from([1.0, 10.0, 1000.0]))
    theta = (rng.standard_normal((n, r, r + 1)) * scale).astype(dtype)
    size = np.array([n, data.draw(st.integers(1, 3))] + dims, np.int64)
    got, want = run_both(gpu, theta, size, align, const)
    assert_bitwise(got, want)


def test_identity_theta(gpu):
    """The identity transform gives the base grid: pixel centres (align_corners 0)."""
    theta = np.array([[[1, 0, 0], [0, 1, 0]]], np.float32)
    got, want = run_both(gpu, theta, np.array([1, 1, 2, 4], np.int64), 0)
    assert_bitwise(got, want)
    np.testing.assert_array_equal(got[0, 0, :, 0], [-0.75, -0.25, 0.25, 0.75])
    np.testing.assert_array_equal(got[0, :, 0, 1], [-0.5, 0.5])


def test_size_changes_per_run(gpu):
    """A fed size: each value gets its own plan, every one on the GPU."""
    theta = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    model = make_model("AffineGrid", {"theta": theta, "size": np.array([2, 1, 2, 3, 4], np.int64)}, {}, 20)
    sess = vkml.InferenceSession(model, devices=[gpu])
    cpu = vkml.InferenceSession(model, devices=["cpu"])
    for dims in ([2, 3, 4], [5, 1, 2], [1, 1, 1]):
        feed = {"theta": theta, "size": np.array([2, 1] + dims, np.int64)}
        (got,), (want,) = sess.run(None, feed), cpu.run(None, feed)
        assert got.shape == (2, *dims, 3)
        assert_bitwise(got, want)
        (row,) = sess.placement()
        assert row["device"] == gpu and row.get("pipelines"), row


def test_float64_stays_on_the_cpu(gpu):
    theta = np.zeros((1, 2, 3))
    model = make_model("AffineGrid", {"theta": theta, "size": np.array([1, 1, 2, 2], np.int64)}, {}, 20,
                       consts=("size",))
    sess = vkml.InferenceSession(model, devices=[gpu, "cpu"])
    (row,) = sess.placement()
    assert row["device"] == "cpu", row
