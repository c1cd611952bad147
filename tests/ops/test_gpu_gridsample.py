"""GPU GridSample (vkml/kernels/gridsample.py, shaders/gridsample.comp) against vkml's CPU
operator (vkml/ops/detection.py): hypothesis shapes (1 to 3 spatial axes), grids inside and
outside [-1, 1] (up to 12 times beyond), on a quarter grid (exact pixel centres, edges and
half-way ties) or anywhere, every mode x padding_mode x align_corners, opsets 16 (old mode
names, 2-D only), 20 and 22, X and grid each float32 or float16; and what stays on the CPU.

Tolerances: the shader repeats the CPU operator's float32 steps in its order (no fma,
correctly rounded division), so results are bitwise equal wherever float32 add and multiply
are correctly rounded, as Vulkan requires (lavapipe: every case here). The checks allow:
- nearest: exact (the same pixel; ties round half to even, as np.rint);
- float32 linear/cubic: rtol 1e-6 and atol 1e-6 * max|X| (a few ulps of the terms summed),
  and test_bitwise_sweep asserts bit equality over every combination;
- float16 X: at most 1 float16 ulp (the one rounding of the float32 result).
Non-finite grid values are not compared: the CPU operator's int64 conversion of NaN/inf is
platform-dependent there.
"""
from __future__ import annotations

import itertools
import os
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
from _gen import seeds  # noqa: E402
from _oracle import gpu_and_cpu, make_model  # noqa: E402

import vkml  # noqa: E402
from vkml.kernels import TensorSpec, Unsupported, get_kernel  # noqa: E402

HYP = settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", "10")) * 6, deadline=None,
               suppress_health_check=list(HealthCheck))
MODES = ["nearest", "linear", "cubic"]
OLD_NAMES = {"nearest": "nearest", "linear": "bilinear", "cubic": "bicubic"}  # opset 16
PADDINGS = ["zeros", "border", "reflection"]
FLOATS = [np.float32, np.float16]


def model_of(x, grid, mode, padding, align, opset):
    attrs = {"mode": OLD_NAMES[mode] if opset < 20 else mode, "padding_mode": padding, "align_corners": align}
    return make_model("GridSample", {"x": x, "grid": grid}, attrs, opset)


def run_both(gpu, x, grid, mode, padding, align, opset):
    """(GPU output, CPU output), asserting the node ran on the GPU."""
    feed = {"x": x, "grid": grid}
    (got,), (want,), sess = gpu_and_cpu(gpu, model_of(x, grid, mode, padding, align, opset), feed)
    (row,) = sess.placement()
    assert row["device"] == gpu and row.get("pipelines"), row  # it really ran on the GPU
    assert got.dtype == want.dtype == x.dtype and got.shape == want.shape
    return got, want


def assert_close(got, want, x, mode):
    if mode == "nearest":
        np.testing.assert_array_equal(got, want)
    elif got.dtype == np.float16:
        np.testing.assert_array_max_ulp(got, want, maxulp=1)
    else:
        scale = float(np.max(np.abs(x), initial=1.0))
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6 * scale)


@st.composite
def cases(draw, rng):
    """(x, grid, opset): N, C, spatial sizes (1 to 7, so D = 1 and align_corners meet), grid
    points scaled by up to 12 (many folds in reflection mode), optionally on a quarter grid."""
    opset = draw(st.sampled_from([16, 20, 22]))
    r = 2 if opset == 16 else draw(st.sampled_from([1, 2, 2, 3]))
    n, c = draw(st.integers(1, 3)), draw(st.integers(1, 4))
    dims = tuple(draw(st.lists(st.integers(1, 7), min_size=r, max_size=r)))
    out = tuple(draw(st.lists(st.integers(1, 5), min_size=r, max_size=r)))
    xdt, gdt = draw(st.sampled_from(FLOATS)), draw(st.sampled_from(FLOATS))
    x = rng.standard_normal((n, c) + dims).astype(xdt)
    reach = draw(st.sampled_from([1.0, 1.2, 2.0, 12.0]))
    grid = rng.uniform(-reach, reach, (n,) + out + (r,))
    if draw(st.booleans()):  # exact pixel centres, edges and half-way ties
        grid = np.round(grid * 4) / 4
    return x, grid.astype(gdt), opset


@HYP
@given(mode=st.sampled_from(MODES), padding=st.sampled_from(PADDINGS), align=st.integers(0, 1), seed=seeds,
       data=st.data())
def test_gridsample(gpu, mode, padding, align, seed, data):
    x, grid, opset = data.draw(cases(np.random.default_rng(seed)))
    got, want = run_both(gpu, x, grid, mode, padding, align, opset)
    assert_close(got, want, x, mode)


@pytest.mark.parametrize("r", [1, 2, 3])
@pytest.mark.parametrize("mode", MODES)
def test_bitwise_sweep(gpu, mode, r):
    """Every padding x align_corners x X dtype x grid dtype: bitwise equal to the CPU operator."""
    rng = np.random.default_rng(r * 10 + MODES.index(mode))
    for padding, align, xdt, gdt in itertools.product(PADDINGS, (0, 1), FLOATS, FLOATS):
        dims = tuple(int(d) for d in rng.integers(1, 6, r))
        x = rng.standard_normal((2, 3) + dims).astype(xdt)
        grid = rng.uniform(-3, 3, (2,) + (4,) * r + (r,))
        grid[..., :2, :] = np.round(grid[..., :2, :] * 4) / 4
        got, want = run_both(gpu, x, grid.astype(gdt), mode, padding, align, 20)
        assert np.array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}")), \
            (padding, align, xdt, gdt, np.max(np.abs(got.astype(np.float64) - want)))


@pytest.mark.parametrize("padding, last", [("zeros", 0.0), ("border", 3.0), ("reflection", 3.0)])
def test_nearest_ties_round_half_to_even(gpu, padding, last):
    """Coordinates at exact halves (align_corners 0, W = 4: grid -1, -0.5, 0, 0.5, 1 gives
    -0.5, 0.5, 1.5, 2.5, 3.5) pick pixels 0, 0, 2, 2 and 4 (outside: padding decides)."""
    x = np.arange(4, dtype=np.float32).reshape(1, 1, 1, 4)
    gx = np.array([-1, -0.5, 0, 0.5, 1], np.float32)
    grid = np.stack([gx, np.zeros(5, np.float32)], -1).reshape(1, 1, 5, 2)
    got, want = run_both(gpu, x, grid, "nearest", padding, 0, 20)
    np.testing.assert_array_equal(got.reshape(-1), [0, 0, 2, 2, last])
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_large_offsets(gpu, mode, dtype):
    """Samples in the last batch item and channel of a 13.5M-element X: offsets beyond
    float32's and float16's exact integers, read exactly."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 1500, 1500)).astype(dtype)
    grid = rng.uniform(-1.05, 1.05, (2, 3, 4, 2)).astype(np.float32)
    grid[1, 0] = [[1, 1], [0.999, 0.998], [-1, 1], [1, -1]]
    got, want = run_both(gpu, x, grid, mode, "border", 0, 22)
    assert_close(got, want, x, mode)


@pytest.mark.parametrize("shape, gshape", [
    ((2, 3, 3, 3), (2, 0, 4, 2)),  # no output positions
    ((2, 3, 0, 3), (2, 0, 4, 2)),  # an empty input axis, with nothing to sample
])
def test_empty(gpu, shape, gshape):
    """No output positions: an empty output, on the GPU (nothing dispatched)."""
    x = np.ones(shape, np.float32)
    grid = np.zeros(gshape, np.float32)
    feed = {"x": x, "grid": grid}
    (got,), (want,), sess = gpu_and_cpu(gpu, model_of(x, grid, "linear", "zeros", 0, 20), feed)
    assert got.shape == want.shape == shape[:2] + gshape[1:-1]
    (row,) = sess.placement()
    assert row["device"] == gpu, row


@pytest.mark.parametrize("case, reason", [
    (dict(dtype=np.float64), "float32 and float16"),
    (dict(gdtype=np.float64), "float32 and float16"),
    (dict(spatial=4), "spatial axes"),
    (dict(opset=16, spatial=3), "GridSample-16"),
])
def test_refused(gpu, case, reason):
    """What the kernel leaves to the CPU, with its reason in placement(); the answer is the
    CPU operator's (or its error)."""
    r = case.get("spatial", 2)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 2) + (3,) * r).astype(case.get("dtype", np.float32))
    grid = rng.uniform(-1.2, 1.2, (1,) + (2,) * r + (r,)).astype(case.get("gdtype", np.float32))
    feed = {"x": x, "grid": grid}
    model = model_of(x, grid, "linear", "zeros", 0, case.get("opset", 20))
    sess = vkml.InferenceSession(model, devices=[gpu, "cpu"])
    (row,) = sess.placement()
    assert row["device"] == "cpu" and reason in str(row), row
    cpu = vkml.InferenceSession(model, devices=["cpu"])
    if case.get("opset") == 16:
        with pytest.raises(Exception, match="4-D"):
            cpu.run(None, feed)
        return
    np.testing.assert_array_equal(sess.run(None, feed)[0], cpu.run(None, feed)[0])


def test_refused_by_check(gpu):
    """Shapes the CPU operator rejects, an empty axis with samples to take, and axes too long
    for exact float32 tap positions."""
    from vkml.runtime.devices import vulkan_device

    dev = vulkan_device(gpu)
    k = get_kernel("GridSample")
    f32 = np.dtype(np.float32)

    def check(x, g, **attrs):
        with pytest.raises(Unsupported) as e:
            k.check(dev, "GridSample", {"_opset": 20, **attrs}, [TensorSpec(x, f32), TensorSpec(g, f32)])
        return str(e.value)

    assert "does not fit" in check((1, 1, 4, 4), (2, 3, 3, 2))  # batch mismatch
    assert "does not fit" in check((1, 1, 4, 4), (1, 3, 3, 3))  # coordinate count
    assert "empty batch" in check((0, 1, 4, 4), (0, 3, 3, 2))  # (the CPU operator fails on these two)
    assert "empty batch" in check((2, 0, 4, 4), (2, 3, 3, 2))
    assert "empty spatial axis" in check((1, 1, 0, 4), (1, 3, 3, 2))
    assert "spatial axis of" in check((1, 1, 1, 1 << 22), (1, 3, 3, 2))
    assert "mode" in check((1, 1, 4, 4), (1, 3, 3, 2), mode="bilinear")  # an opset-16 name at 20
    assert "padding_mode" in check((1, 1, 4, 4), (1, 3, 3, 2), padding_mode="wrap")
