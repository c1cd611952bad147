"""GPU RoiAlign (vkml/kernels/roialign.py, shaders/roialign.comp) over hypothesis shapes, rois
(inside the image, partly or wholly outside it, of zero and of negative size, on a quarter-pixel
grid or anywhere), spatial scales, sampling ratios (0: adaptive), output sizes, both modes, both
coordinate transformation modes (opsets 10, 16, 22) and float32/float16, against onnx's
reference evaluator; and a batch index outside [0, N) raising the CPU operator's error.

Oracles and tolerances:
- onnx.reference computes in the inputs' dtype. Float32 cases use it as it is: the shader does
  the same float32 steps in the same order (no fma, correctly rounded divisions), so results
  are usually bitwise equal; rtol/atol 1e-5 cover the one path where the reference rounds
  differently (an output_half_pixel roi under 1 pixel becomes 1.0, a Python float, and its bin
  size is then float64 until added to a float32). Float16 cases compare with the reference run
  on the same data widened to float32 and rounded once to float16, as the shader does:
  rtol/atol 4e-3, a few float16 ulps.
- onnx.reference treats opset 10 as half_pixel; the specification (and onnxruntime) say
  output_half_pixel, so opset-10 cases take the reference of that mode at opset 16.
- vkml's CPU operator (a session on the "cpu" device) agrees within 1e-4 on every roi but
  two kinds, left out of that comparison: in half_pixel mode with adaptive sampling, a roi of
  zero or negative size has ceil(size / bins) <= 0 samples per bin, which the references make
  0 and the CPU operator makes 1 sample (see vkml/kernels/roialign.py); and with adaptive
  sampling, a roi whose size / bins is within rounding of an integer can get one sample more
  or fewer from the CPU operator, which computes sizes in float64 (the references and the
  shader: float32), or a sample within rounding of the edge (-1 or H), where a sample
  stops counting.
"""
from __future__ import annotations

import math
import os
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx.reference import ReferenceEvaluator

sys.path.insert(0, os.path.dirname(__file__))
from _gen import seeds  # noqa: E402
from _oracle import make_model  # noqa: E402

import vkml  # noqa: E402
from vkml.kernels import TensorSpec, Unsupported, get_kernel  # noqa: E402

HYP = settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", "10")), deadline=None,
               suppress_health_check=list(HealthCheck))
TOL = {np.dtype(np.float32): dict(rtol=1e-5, atol=1e-5), np.dtype(np.float16): dict(rtol=4e-3, atol=4e-3)}
SCALES = [1.0, 0.5, 0.25, 0.0625, 2.0, float(np.float32(1 / 3))]
# (opset, coordinate_transformation_mode attribute or None for the opset's default)
COORDS = [(10, None), (16, None), (16, "half_pixel"), (16, "output_half_pixel"), (22, "output_half_pixel")]


def half_pixel(opset: int, coord: str | None) -> bool:
    return opset >= 16 and coord in (None, "half_pixel")


@st.composite
def roi_sets(draw, r: int, h: int, w: int, scale: float, rng: np.random.Generator) -> np.ndarray:
    """r rois (x1, y1, x2, y2) in input coordinates (divided by spatial_scale)."""
    out = np.zeros((r, 4), np.float64)
    for k in range(r):
        kind = draw(st.sampled_from(["inside", "partly", "outside", "zero", "negative", "line"]))
        lo = [-0.5, -0.5] if kind == "inside" else [-4.0, -4.0]
        hi = [w - 0.5, h - 0.5] if kind == "inside" else [w + 4.0, h + 4.0]
        a = rng.uniform(lo, hi)
        b = rng.uniform(lo, hi)
        if kind == "outside":  # wholly beyond one edge
            a, b = a + [w + 2.0, 0.0], b + [w + 2.0, 0.0]
        p1, p2 = np.minimum(a, b), np.maximum(a, b)
        if kind == "zero":
            p2 = p1.copy()
        elif kind == "negative":
            p1, p2 = p2, p1
        elif kind == "line":  # zero height only
            p2[1] = p1[1]
        out[k] = [p1[0], p1[1], p2[0], p2[1]]
    if draw(st.booleans()):  # on a quarter-pixel grid (exact in float16 and float32)
        out = np.round(out * 4) / 4
    return out / scale


def reference(model_attrs: dict, opset: int, coord: str | None, x, rois, bi) -> np.ndarray:
    """onnx.reference's RoiAlign in float32 (opset 10 as output_half_pixel, see above)."""
    attrs = dict(model_attrs)
    attrs["coordinate_transformation_mode"] = "half_pixel" if half_pixel(opset, coord) else "output_half_pixel"
    feed = {"x": x.astype(np.float32), "rois": rois.astype(np.float32), "bi": bi}
    model = make_model("RoiAlign", feed, attrs, 16)
    return ReferenceEvaluator(model).run(None, feed)[0]


def run_gpu(gpu, model, feed):
    sess = vkml.InferenceSession(model, devices=[gpu])
    (got,) = sess.run(None, feed)
    (row,) = sess.placement()
    assert row["device"] == gpu and row.get("pipelines"), row  # it really ran on the GPU
    return got


def grids(rois, attrs, half: bool, dtype) -> tuple[np.ndarray, np.ndarray]:
    """Adaptive samples per bin along y and x of each roi, computed in `dtype` (float32 as the
    references and the shader, float64 as vkml's CPU operator)."""
    r = rois.astype(dtype) * dtype(np.float32(attrs["spatial_scale"])) - dtype(0.5 if half else 0.0)
    rh, rw = r[:, 3] - r[:, 1], r[:, 2] - r[:, 0]
    if not half:
        rh, rw = np.maximum(rh, 1), np.maximum(rw, 1)
    return np.ceil(rh / dtype(attrs["output_height"])), np.ceil(rw / dtype(attrs["output_width"]))


def on_edge(rois, attrs, half: bool, h: int, w: int) -> np.ndarray:
    """Rois with a sample within rounding of -1 or of H (W), where a sample stops counting."""
    r = rois.astype(np.float64) * float(np.float32(attrs["spatial_scale"])) - (0.5 if half else 0.0)
    out = np.zeros(len(rois), bool)
    for k, (x1, y1, x2, y2) in enumerate(r):
        for start, size, bins, limit in ((y1, y2 - y1, attrs["output_height"], h),
                                         (x1, x2 - x1, attrs["output_width"], w)):
            size = size if half else max(size, 1.0)
            g = attrs["sampling_ratio"] or max(math.ceil(size / bins), 1)
            pos = start + (np.arange(bins * g) + 0.5) * size / bins / g
            out[k] |= bool(np.any((np.abs(pos + 1) < 1e-3) | (np.abs(pos - limit) < 1e-3)))
    return out


def cpu_comparable(rois, attrs, half: bool, h: int, w: int) -> tuple[np.ndarray, np.ndarray]:
    """(rois to compare with the CPU operator, rois whose grid the references make empty).
    Left out: an empty adaptive grid (the CPU operator takes 1 sample), a grid that the CPU
    operator's float64 sizes make one sample larger or smaller than float32 does, and a
    sample on the edge (-1 or H) that float64 and float32 may put on either side."""
    edge = on_edge(rois, attrs, half, h, w)
    if attrs["sampling_ratio"]:
        return ~edge, np.zeros(len(rois), bool)
    gh, gw = grids(rois, attrs, half, np.float32)
    ch, cw = grids(rois, attrs, half, np.float64)
    empty = (gh <= 0) | (gw <= 0)
    return ~empty & (gh == ch) & (gw == cw) & ~edge, empty


@HYP
@given(nchw=st.tuples(st.integers(1, 3), st.integers(1, 4), st.integers(1, 9), st.integers(1, 9)),
       r=st.integers(1, 6), out=st.tuples(st.integers(1, 4), st.integers(1, 4)), sampling=st.integers(0, 3),
       scale=st.sampled_from(SCALES), mode=st.sampled_from(["avg", "max"]), coords=st.sampled_from(COORDS),
       dtype=st.sampled_from([np.float32, np.float16]), seed=seeds, data=st.data())
def test_roialign(gpu, nchw, r, out, sampling, scale, mode, coords, dtype, seed, data):
    rng = np.random.default_rng(seed)
    n, c, h, w = nchw
    opset, coord = coords
    x = rng.standard_normal(nchw).astype(dtype)
    rois = data.draw(roi_sets(r, h, w, scale, rng)).astype(dtype)
    bi = rng.integers(0, n, r).astype(np.int64)
    attrs = dict(mode=mode, output_height=out[0], output_width=out[1], sampling_ratio=sampling,
                 spatial_scale=scale)
    model_attrs = dict(attrs) if coord is None else dict(attrs, coordinate_transformation_mode=coord)
    feed = {"x": x, "rois": rois, "bi": bi}
    model = make_model("RoiAlign", feed, model_attrs, opset)
    got = run_gpu(gpu, model, feed)
    assert got.dtype == np.dtype(dtype) and got.shape == (r, c) + out

    want = reference(attrs, opset, coord, x, rois, bi).astype(dtype)
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), **TOL[np.dtype(dtype)])

    (cpu,) = vkml.InferenceSession(model, devices=["cpu"]).run(None, feed)
    keep, empty = cpu_comparable(rois, attrs, half_pixel(opset, coord), h, w)
    assert not np.any(want[empty])  # (the references' zeros for an empty grid)
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == np.float32 else TOL[np.dtype(dtype)]
    np.testing.assert_allclose(got[keep].astype(np.float32), cpu[keep].astype(np.float32), **tol)


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_large_offsets(gpu, mode, dtype):
    """Rois in the last batch item and channel of a 13.5M-element X: offsets well beyond
    float32's and float16's exact integers, read exactly."""
    n, c, h, w = 2, 3, 1500, 1500
    rng = np.random.default_rng(7)
    x = rng.standard_normal((n, c, h, w)).astype(dtype)
    rois = np.array([[1490, 1480, 1499, 1499], [0, 0, 1499, 1499], [700.25, 3.5, 710.75, 40.0],
                     [1495, 1495, 1510, 1510]], dtype)
    bi = np.array([1, 1, 0, 1], np.int64)
    attrs = dict(mode=mode, output_height=3, output_width=2, sampling_ratio=2, spatial_scale=1.0)
    feed = {"x": x, "rois": rois, "bi": bi}
    got = run_gpu(gpu, make_model("RoiAlign", feed, attrs, 16), feed)
    want = reference(attrs, 16, None, x, rois, bi).astype(dtype)
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), **TOL[np.dtype(dtype)])


def test_node_suite_shapes(gpu):
    """Adaptive sampling over a 10 x 10 map, both modes, as the ONNX node suite's cases."""
    rng = np.random.default_rng(3)
    x = rng.random((1, 1, 10, 10)).astype(np.float32)
    rois = np.array([[0, 0, 9, 9], [0, 5, 4, 9], [5, 5, 9, 9]], np.float32)
    bi = np.zeros(3, np.int64)
    feed = {"x": x, "rois": rois, "bi": bi}
    for mode in ("avg", "max"):
        for coord in ("half_pixel", "output_half_pixel"):
            attrs = dict(mode=mode, output_height=5, output_width=5, sampling_ratio=2, spatial_scale=1.0)
            model = make_model("RoiAlign", feed, dict(attrs, coordinate_transformation_mode=coord), 16)
            got = run_gpu(gpu, model, feed)
            np.testing.assert_array_equal(got, reference(attrs, 16, coord, x, rois, bi))


def _run(sess, feed):
    try:
        return sess.run(None, feed)[0], None
    except Exception as e:  # noqa: BLE001 - the error itself is what is compared
        return None, e


@pytest.mark.parametrize("bad", [
    [(0, 2)], [(3, -1)], [(5, 2), (300, -1), (599, 7)], [(513, 3), (512, 9)],  # the first named, as the CPU
    [(0, 2**40)], [(400, -(2**63))], [(599, 2**31)],  # beyond int32: out of range, not wrapped
])
def test_bad_batch_index_raises_as_on_the_cpu(gpu, bad):
    """A batch index outside [0, N) computed at run time: the GPU run raises the CPU
    operator's error (same type, same message: the first bad roi and its index), and the
    session goes on working."""
    x = np.random.default_rng(1).standard_normal((2, 3, 5, 5)).astype(np.float32)
    rois = np.tile(np.array([[0, 0, 3, 3]], np.float32), (600, 1))
    good = np.arange(600, dtype=np.int64) % 2
    feed = {"x": x, "rois": rois, "bi": good}
    model = make_model("RoiAlign", feed, {"output_height": 2, "output_width": 2}, 16)
    gpu_sess = vkml.InferenceSession(model, devices=[gpu])
    cpu_sess = vkml.InferenceSession(model, devices=["cpu"])
    bi = good.copy()
    for r, b in bad:
        bi[r] = b
    _, want = _run(cpu_sess, {**feed, "bi": bi})
    _, got = _run(gpu_sess, {**feed, "bi": bi})
    assert want is not None and got is not None
    assert type(got) is type(want) and str(got) == str(want), (got, want)
    assert "batch index" in str(got)
    (row,) = gpu_sess.placement()
    assert row["device"] == gpu and row.get("pipelines"), row
    y, err = _run(gpu_sess, feed)  # the next run is fine
    assert err is None
    np.testing.assert_allclose(y, cpu_sess.run(None, feed)[0], **TOL[np.dtype(np.float32)])


def test_bad_batch_index_known_on_the_host(gpu):
    """Batch indices that are an initializer and out of range keep the node on the CPU,
    which reports them."""
    x = np.ones((2, 1, 4, 4), np.float32)
    rois = np.array([[0, 0, 2, 2], [1, 1, 3, 3]], np.float32)
    model = make_model("RoiAlign", {"x": x, "rois": rois, "bi": np.array([0, 2], np.int64)}, {}, 16, consts=("bi",))
    sess = vkml.InferenceSession(model, devices=[gpu, "cpu"])
    (row,) = sess.placement()
    assert row["device"] == "cpu" and "batch indices" in str(row), row
    with pytest.raises(Exception, match=r"roi 1 has batch index 2 outside \[0, 2\)"):
        sess.run(None, {"x": x, "rois": rois})


def test_empty(gpu):
    """No rois, no channels or no batch: empty tensors (the batch indices are still checked,
    as the CPU operator checks them)."""
    x = np.ones((2, 0, 4, 4), np.float32)
    rois = np.array([[0, 0, 2, 2]], np.float32)
    model = make_model("RoiAlign", {"x": x, "rois": rois, "bi": np.array([0], np.int64)}, {}, 16)
    sess = vkml.InferenceSession(model, devices=[gpu])
    (y,) = sess.run(None, {"x": x, "rois": rois, "bi": np.array([1], np.int64)})
    assert y.shape == (1, 0, 1, 1)
    (row,) = sess.placement()
    assert row["device"] == gpu and row.get("pipelines"), row
    with pytest.raises(Exception, match=r"roi 0 has batch index 2 outside \[0, 2\)"):
        sess.run(None, {"x": x, "rois": rois, "bi": np.array([2], np.int64)})
    x = np.ones((0, 2, 4, 4), np.float32)  # N = 0: every batch index is out of range
    feed = {"x": x, "rois": rois, "bi": np.array([0], np.int64)}
    model = make_model("RoiAlign", feed, {}, 16)
    _, got = _run(vkml.InferenceSession(model, devices=[gpu]), feed)
    _, want = _run(vkml.InferenceSession(model, devices=["cpu"]), feed)
    assert want is not None and type(got) is type(want) and str(got) == str(want), (got, want)
    x = np.ones((2, 3, 4, 4), np.float32)
    none = np.zeros((0, 4), np.float32)
    model = make_model("RoiAlign", {"x": x, "rois": none, "bi": np.zeros(0, np.int64)}, {}, 16)
    (y,) = vkml.InferenceSession(model, devices=[gpu]).run(None, {"x": x, "rois": none, "bi": np.zeros(0, np.int64)})
    assert y.shape == (0, 3, 1, 1)


@pytest.mark.parametrize("case, reason", [
    (dict(dtype=np.float64), "float32 and float16"),
    (dict(bdtype=np.int32), "int64"),
    (dict(rdtype=np.float16), "rois of float16"),
    (dict(hw=(0, 4)), "empty H or W"),
    (dict(attrs={"sampling_ratio": (1 << 24) + 1}), "sampling_ratio"),
])
def test_refused(gpu, case, reason):
    """What the kernel leaves to the CPU, with its reason in placement(); the answer is the
    CPU operator's."""
    dtype = case.get("dtype", np.float32)
    x = np.random.default_rng(2).standard_normal((1, 2) + case.get("hw", (4, 4))).astype(dtype)
    rois = np.array([[0, 0, 2, 3]], case.get("rdtype", dtype))
    bi = np.array([0], case.get("bdtype", np.int64))
    feed = {"x": x, "rois": rois, "bi": bi}
    model = make_model("RoiAlign", feed, case.get("attrs", {}), 16)
    sess = vkml.InferenceSession(model, devices=[gpu, "cpu"])
    (row,) = sess.placement()
    assert row["device"] == "cpu" and reason in str(row), row
    if x.size and "attrs" not in case:  # (a 2^24 sampling ratio is slow on the CPU too)
        want = vkml.InferenceSession(model, devices=["cpu"]).run(None, feed)[0]
        np.testing.assert_array_equal(sess.run(None, feed)[0], want)


def test_too_big_for_uint32_offsets(gpu):
    """X or Y of 2^31 elements or more stays on the CPU (the shader's offsets are uint32)."""
    from vkml.runtime.devices import vulkan_device

    dev = vulkan_device(gpu)
    k = get_kernel("RoiAlign")
    f32, i64 = np.dtype(np.float32), np.dtype(np.int64)
    big = (2, 1024, 1024, 1024)  # 2^31 elements
    with pytest.raises(Unsupported):
        k.check(dev, "RoiAlign", {"_opset": 16}, [TensorSpec(big, f32), TensorSpec((4, 4), f32), TensorSpec((4,), i64)])
    many = 1 << 27  # Y = (2^27, 4, 2, 2): 2^31 elements
    with pytest.raises(Unsupported):
        k.check(dev, "RoiAlign", {"_opset": 16, "output_height": 2, "output_width": 2},
                [TensorSpec((1, 4, 8, 8), f32), TensorSpec((many, 4), f32), TensorSpec((many,), i64)])
    assert math.prod(k.infer("RoiAlign", {"output_height": 2, "output_width": 2},
                             [TensorSpec((1, 4, 8, 8), f32), TensorSpec((many, 4), f32),
                              TensorSpec((many,), i64)])[0].shape) == 1 << 31
