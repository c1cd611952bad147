"""GPU Resize beyond nearest/linear (vkml/kernels/resize.py, shaders/resize.comp) against
vkml's CPU operator (vkml/ops/resize.py): cubic (cubic_coeff_a, exclude_outside), antialias
(linear and cubic), tf_crop_and_resize with roi and extrapolation_value (nearest, linear,
cubic), roi's effect on the identity-axis test, axes and keep_aspect_ratio_policy, and linear
or cubic resizing of int8/uint8/int16/uint16 data; hypothesis over shapes (rank 1 to 4),
modes, coordinate modes, scales or sizes; plus what stays on the CPU and why.

Tolerances: none. The host computes coordinates and weights with the CPU operator's own
functions (float64, cast to float32 as it casts them) and the shader sums each axis's taps
left to right in float32 without fma contraction, in the CPU's axis order, so every case is
bitwise equal wherever float32 add and multiply are correctly rounded, as Vulkan requires
(lavapipe: every case here). Integer outputs round half to even and clamp, as np.rint and
np.clip; float16 outputs are the one rounding of the float32 result. NaN results (inf
inputs times a zero weight) compare as NaN, not by payload.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
from _gen import seeds  # noqa: E402
from _oracle import gpu_and_cpu, make_model  # noqa: E402

import vkml  # noqa: E402
from vkml.kernels import TensorSpec, Unsupported, get_kernel  # noqa: E402

HYP = settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", "10")) * 8, deadline=None,
               suppress_health_check=list(HealthCheck))
COORDS = ["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
          "tf_half_pixel_for_nn", "tf_crop_and_resize"]
NEAREST = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
INTERP_DTYPES = [np.float32, np.float16, np.uint8, np.int8, np.uint16, np.int16]
NEAREST_DTYPES = [np.float32, np.float16, np.int64, np.uint8, np.bool_, np.int32, np.float64, np.int8]


def data_of(rng, shape, dtype) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, int(info.max) + 1, shape, dtype=np.int64).astype(dtype)
    x = rng.standard_normal(shape) * 10
    if x.size:
        x.reshape(-1)[rng.integers(0, x.size)] = -0.0  # signed zeros must survive as the CPU's
    return x.astype(dtype)


def same_bits(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    if got.dtype.kind == "f":
        nan = np.isnan(want)
        np.testing.assert_array_equal(np.isnan(got), nan)
        g, w = got[~nan], want[~nan]
        u = f"u{got.itemsize}"
        bad = g.view(u) != w.view(u)
        assert not bad.any(), f"{bad.sum()} of {g.size} differ: got {g[bad][:8]}, want {w[bad][:8]}"
    else:
        np.testing.assert_array_equal(got, want)


def run_both(gpu, x, attrs, roi=None, scales=None, sizes=None, opset=19, shader=None):
    """(GPU output, CPU output), asserting that the node ran on the GPU (with `shader` when
    given) and that the two are bitwise equal."""
    inputs = {"x": x, "roi": roi, "scales": scales, "sizes": sizes}
    if opset < 11:
        inputs = {"x": x, "scales": scales}
    model = make_model("Resize", inputs, attrs, opset, consts=("roi", "scales", "sizes"))
    (got,), (want,), sess = gpu_and_cpu(gpu, model, {"x": x}, quiet=True)
    (row,) = sess.placement()
    assert row["device"] == gpu, row
    if x.size and want.size:
        assert row.get("pipelines"), row  # it really ran on the GPU
        if shader is not None:
            assert [p["shader"] for p in row["pipelines"]] == [shader], row
    same_bits(got, want)
    return got, want


@st.composite
def cases(draw, rng):
    """(x, attrs, roi, scales, sizes): every mode and coordinate mode; cubic_coeff_a,
    exclude_outside, antialias; tf_crop_and_resize rois reaching outside [0, 1] with an
    extrapolation value; a roi in other modes too (it only changes the identity test);
    axes in any order, scales (up and down, 1 included) or sizes with every policy."""
    mode = draw(st.sampled_from(["nearest", "linear", "cubic", "cubic"]))
    dtype = draw(st.sampled_from(NEAREST_DTYPES if mode == "nearest" else INTERP_DTYPES + [np.float32] * 2))
    rank = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.integers(1, 7), min_size=rank, max_size=rank)))
    coord = draw(st.sampled_from(COORDS + ["tf_crop_and_resize"]))
    attrs = {"mode": mode, "coordinate_transformation_mode": coord}
    if mode == "nearest":
        attrs["nearest_mode"] = draw(st.sampled_from(NEAREST))
    else:
        if mode == "cubic":
            attrs["cubic_coeff_a"] = draw(st.sampled_from([-0.75, -0.5, -0.6]))
        attrs["exclude_outside"] = draw(st.integers(0, 1))
        attrs["antialias"] = draw(st.integers(0, 1))
    if coord == "tf_crop_and_resize":
        attrs["extrapolation_value"] = draw(st.sampled_from([0.0, 10.0, -3.5, 0.1]))
    axes = list(range(rank))
    if draw(st.booleans()):
        axes = draw(st.permutations(range(rank)))[:draw(st.integers(1, rank))]
        attrs["axes"] = list(axes)
    n = len(axes)
    scales = sizes = None
    if draw(st.booleans()):
        scales = np.array([draw(st.sampled_from([0.3, 0.5, 0.6, 0.8, 1.0, 1.0, 1.5, 2.0, 2.3, 3.0]))
                           for _ in range(n)], np.float32)
    else:
        sizes = np.array([draw(st.integers(1, 10)) for _ in range(n)], np.int64)
        attrs["keep_aspect_ratio_policy"] = draw(st.sampled_from(["stretch", "not_larger", "not_smaller"]))
    roi = None
    if coord == "tf_crop_and_resize" or draw(st.booleans()):
        lo = rng.uniform(-0.5, 0.8, n)
        hi = lo + rng.uniform(0.1, 1.2, n)
        if draw(st.booleans()):  # the default roi on some axes (identity axes stay identity)
            keep = rng.integers(0, 2, n).astype(bool)
            lo[keep], hi[keep] = 0.0, 1.0
        roi = np.concatenate([lo, hi]).astype(np.float32)
    return data_of(rng, shape, dtype), attrs, roi, scales, sizes


@HYP
@given(seed=seeds, data=st.data())
def test_resize(gpu, seed, data):
    x, attrs, roi, scales, sizes = data.draw(cases(np.random.default_rng(seed)))
    run_both(gpu, x, attrs, roi, scales, sizes)


@pytest.mark.parametrize("dtype", INTERP_DTYPES)
@pytest.mark.parametrize("attrs, scales", [
    ({"mode": "cubic"}, [1, 1, 2.0, 2.0]),
    ({"mode": "cubic"}, [1, 1, 0.8, 0.8]),
    ({"mode": "cubic", "coordinate_transformation_mode": "align_corners"}, [1, 1, 2.0, 1.5]),
    ({"mode": "cubic", "coordinate_transformation_mode": "asymmetric"}, [1, 1, 2.0, 2.0]),
    ({"mode": "cubic", "cubic_coeff_a": -0.5, "exclude_outside": 1}, [1, 1, 2.0, 0.8]),
    ({"mode": "linear", "exclude_outside": 1}, [1, 1, 2.0, 3.0]),
    ({"mode": "linear", "antialias": 1}, [1, 1, 0.6, 0.25]),
    ({"mode": "cubic", "antialias": 1}, [1, 1, 0.6, 0.3]),
    ({"mode": "cubic", "antialias": 1}, [1.5, 0.5, 0.6, 2.0]),  # four levels, 4 x 8 x 8 x 4 taps
    ({"mode": "linear"}, [0.5, 1.5, 2.0, 0.75]),  # plain linear: the 2-tap shader for floats
])
def test_modes(gpu, dtype, attrs, scales):
    """The node suite's cubic/antialias cases and more, on every interpolated dtype, through
    the general filter (2-tap linear on floats through the plain linear shader)."""
    x = data_of(np.random.default_rng(len(scales)), (2, 3, 9, 11), dtype)
    # 2-tap linear (exclude_outside only changes the weights) on floats: the plain shader
    plain = attrs["mode"] == "linear" and not attrs.get("antialias") and np.dtype(dtype).kind == "f"
    name = {np.float32: "f32", np.float16: "f16", np.uint8: "u8", np.int8: "i8", np.uint16: "u16",
            np.int16: "i16"}[dtype]
    shader = f"resize_linear_{name}" if plain else f"resize_interp_{name}"
    run_both(gpu, x, attrs, scales=np.array(scales, np.float32), shader=shader)


@pytest.mark.parametrize("mode, dtype", [("nearest", t) for t in NEAREST_DTYPES]
                         + [(m, t) for m in ("linear", "cubic") for t in (np.float32, np.float16, np.uint8)])
def test_tf_crop_and_resize(gpu, mode, dtype):
    """Rois reaching outside the input: those outputs take extrapolation_value (in the data's
    dtype for nearest, through float32 for linear and cubic); axes in reversed order."""
    x = data_of(np.random.default_rng(7), (2, 3, 6, 7), dtype)
    attrs = {"mode": mode, "coordinate_transformation_mode": "tf_crop_and_resize", "extrapolation_value": 10.0,
             "axes": [3, 2]}
    roi = np.array([-0.3, 0.4, 1.2, 1.7], np.float32)  # W from -0.3 to 1.2, H from 0.4 to 1.7
    kind = "nearest_x" if mode == "nearest" else "interp"
    shader = f"resize_{kind}_b{np.dtype(dtype).itemsize}" if mode == "nearest" else None
    got, _ = run_both(gpu, x, attrs, roi=roi, sizes=np.array([9, 5], np.int64), shader=shader)
    if dtype == np.float32 and mode == "nearest":
        assert (got == 10.0).any() and (got != 10.0).any()


def test_tf_crop_inside_takes_the_plain_shaders(gpu):
    """A roi inside the input needs no fill: the plain nearest and linear shaders."""
    x = data_of(np.random.default_rng(1), (1, 2, 5, 5), np.float32)
    roi = np.array([0, 0, 0.1, 0.2, 1, 1, 0.9, 0.8], np.float32)
    for mode, shader in [("nearest", "resize_nearest_b4"), ("linear", "resize_linear_f32")]:
        attrs = {"mode": mode, "coordinate_transformation_mode": "tf_crop_and_resize"}
        run_both(gpu, x, attrs, roi=roi, sizes=np.array([1, 2, 7, 3], np.int64), shader=shader)


def test_roi_identity_axis(gpu):
    """A roi that is not (0, 1) makes the CPU operator resample an axis kept at its length
    (x * 1 + x' * 0: -0.0 becomes +0.0 beside a positive neighbour); the GPU follows."""
    x = np.array([[-0.0, 1.0, -0.0, -2.0]], np.float32)
    roi = np.array([0.0, 0.25, 1.0, 0.75], np.float32)
    got, want = run_both(gpu, x, {"mode": "linear"}, roi=roi, scales=np.array([2.0, 1.0], np.float32))
    assert np.signbit(want[:, 0]).sum() == 0  # +0.0: the axis was resampled


def test_old_opsets(gpu):
    """Resize-10 (scales only) and Resize-11/13 cubic with a constant roi."""
    x = data_of(np.random.default_rng(2), (1, 2, 5, 6), np.float32)
    run_both(gpu, x, {"mode": "linear"}, scales=np.array([1, 1, 2, 0.5], np.float32), opset=10)
    roi = np.array([0, 0, 0.2, 0.1, 1, 1, 0.9, 1.1], np.float32)
    for opset in (11, 13):
        run_both(gpu, x, {"mode": "cubic", "coordinate_transformation_mode": "tf_crop_and_resize",
                          "extrapolation_value": -1.0}, roi=roi, scales=np.zeros(0, np.float32),
                 sizes=np.array([1, 2, 7, 4], np.int64), opset=opset)
        run_both(gpu, x, {"mode": "cubic", "cubic_coeff_a": -0.5}, roi=np.zeros(0, np.float32),
                 scales=np.array([1, 1, 1.7, 2.2], np.float32), opset=opset)


def test_large_input(gpu):
    """A 4K-wide image, bicubic and antialiased: offsets and tables at scale."""
    x = data_of(np.random.default_rng(3), (1, 3, 540, 960), np.float32)
    run_both(gpu, x, {"mode": "cubic"}, sizes=np.array([1, 3, 1080, 1920], np.int64),
             shader="resize_interp_f32")
    run_both(gpu, x, {"mode": "cubic", "antialias": 1}, sizes=np.array([1, 3, 135, 240], np.int64),
             shader="resize_interp_f32")


@pytest.mark.parametrize("case, reason", [
    (dict(dtype=np.float64), "Resize of float64"),
    (dict(dtype=np.int32, mode="linear"), "Resize of int32"),
    (dict(shape=(2, 2, 2, 2, 2), scales=[2.0] * 5), "over 5 axes"),
    (dict(shape=(1, 1, 4000, 4000), scales=[1, 1, 0.002, 0.002], antialias=1), "taps per output"),
    (dict(roi_computed=True), "computed at run time"),
])
def test_refused(gpu, case, reason):
    """What stays on the CPU, with the reason in placement(); the answer is the CPU
    operator's. (A roi fed as a graph input is known on the host: the GPU runs it.)"""
    shape = case.get("shape", (1, 2, 4, 4))
    x = data_of(np.random.default_rng(4), shape, case.get("dtype", np.float32))
    scales = np.array(case.get("scales", [1, 1, 2.0, 2.0]), np.float32)
    attrs = {"mode": case.get("mode", "cubic"), "antialias": case.get("antialias", 0)}
    model = make_model("Resize", {"x": x, "roi": None, "scales": scales}, attrs, 19, consts=("scales",))
    feed = {"x": x}
    if case.get("roi_computed"):  # roi = Abs(r[:8]) of a 100-element r: only known at run time
        g = model.graph
        g.node[0].input[1] = "roi"
        g.node[0].attribute.append(onnx.helper.make_attribute("coordinate_transformation_mode",
                                                              "tf_crop_and_resize"))
        g.node.insert(0, onnx.helper.make_node("Abs", ["r8"], ["roi"]))
        g.node.insert(0, onnx.helper.make_node("Slice", ["r", "s0", "s8"], ["r8"]))
        g.initializer.extend([onnx.numpy_helper.from_array(np.array([0], np.int64), "s0"),
                              onnx.numpy_helper.from_array(np.array([8], np.int64), "s8")])
        g.input.append(onnx.helper.make_tensor_value_info("r", onnx.TensorProto.FLOAT, (100,)))
        feed["r"] = np.concatenate([np.array([0, 0, 0.1, -0.1, 1, 1, 0.9, 1.2], np.float32),
                                    np.zeros(92, np.float32)])
    sess = vkml.InferenceSession(model, devices=[gpu, "cpu"])
    got = sess.run(None, feed)[0]
    row = next(r for r in sess.placement() if r["op"] == "Resize")
    assert row["device"] == "cpu" and reason in str(row), row
    same_bits(got, vkml.InferenceSession(model, devices=["cpu"]).run(None, feed)[0])


def test_roi_fed(gpu):
    """A roi fed at run time is known on the host: each value gets its plan, on the GPU."""
    x = data_of(np.random.default_rng(5), (1, 2, 4, 5), np.float32)
    attrs = {"mode": "cubic", "coordinate_transformation_mode": "tf_crop_and_resize", "extrapolation_value": 2.0}
    roi = np.zeros(8, np.float32)
    model = make_model("Resize", {"x": x, "roi": roi, "sizes": np.array([1, 2, 6, 3], np.int64)}, attrs, 19,
                       consts=("sizes",))
    gpu_sess = vkml.InferenceSession(model, devices=[gpu])
    cpu_sess = vkml.InferenceSession(model, devices=["cpu"])
    for r in ([0, 0, 0.1, 0.1, 1, 1, 0.9, 0.9], [0, 0, -0.5, 0.2, 1, 1, 1.3, 0.7]):
        feed = {"x": x, "roi": np.array(r, np.float32)}
        same_bits(gpu_sess.run(None, feed)[0], cpu_sess.run(None, feed)[0])
        (row,) = gpu_sess.placement()
        assert row["device"] == gpu and row.get("pipelines"), row


def test_check_reasons(gpu):
    """Unsupported reasons from check() itself."""
    from vkml.runtime.devices import vulkan_device

    dev = vulkan_device(gpu)
    k = get_kernel("Resize")
    x = TensorSpec((1, 1, 4, 4), np.dtype(np.float32))
    sc = np.array([1, 1, 0.5, 0.5], np.float32)

    def reason(attrs, scales=sc):
        with pytest.raises(Unsupported) as e:
            k.check(dev, "Resize", attrs, [x, None, TensorSpec.of(scales, scales)])
        return str(e.value)

    assert "antialias applies" in reason({"mode": "nearest", "antialias": 1})
    assert "mode 'bicubic'" in reason({"mode": "bicubic"})
    assert "coordinate_transformation_mode" in reason({"mode": "cubic", "coordinate_transformation_mode": "x"})
    assert "scales must be positive" in reason({"mode": "cubic"}, np.array([1, 1, 0, 1], np.float32))


VALIDATION_WORKLOAD = """
import numpy as np
import vkml.vulkan as vk
from vkml.vulkan import _instance
from vkml.runtime.testing import run_ops

assert _instance.instance().validation, "validation layer not enabled"
dev = vk.device(int(__import__("os").environ.get("VKML_TEST_DEVICE", "0")))
rng = np.random.default_rng(0)
feeds = {"x": rng.standard_normal((1, 2, 6, 7)).astype(np.float32), "u": rng.integers(0, 255, (1, 2, 6, 7), np.uint8),
         "h": rng.standard_normal((1, 2, 6, 7)).astype(np.float16),
         "l": rng.integers(-9, 9, (1, 2, 6, 7), np.int64), "sc": np.array([1, 1, 1.5, 0.5], np.float32),
         "roi": np.array([0, 0, -0.2, 0.1, 1, 1, 1.1, 1.4], np.float32), "sz": np.array([1, 2, 5, 9], np.int64)}
tf = {"coordinate_transformation_mode": "tf_crop_and_resize", "extrapolation_value": 3.0}
ops = [("Resize", {"mode": "cubic"}, ["x", "", "sc"], ["a"]),
       ("Resize", {"mode": "cubic", "antialias": 1}, ["h", "", "sc"], ["b"]),
       ("Resize", {"mode": "linear", "antialias": 1}, ["u", "", "sc"], ["c"]),
       ("Resize", {"mode": "linear", **tf}, ["x", "roi", "", "sz"], ["d"]),
       ("Resize", {"mode": "nearest", **tf}, ["l", "roi", "", "sz"], ["e"]),
       ("Resize", {"mode": "nearest", **tf}, ["u", "roi", "", "sz"], ["f"])]
out = run_ops(dev, ops, feeds)
assert out["e"].shape == (1, 2, 5, 9) and (out["e"] == 3).any()
vk.close_all()
print("VALIDATION-CLEAN")
"""


def test_validation_clean(gpu):
    """The new pipelines (resize_interp_*, resize_nearest_x_*) under the Khronos validation
    layer: push ranges, bindings and 8/16-bit storage as declared."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "vulkan"))
    from _validated import run_validated

    run_validated(VALIDATION_WORKLOAD)
