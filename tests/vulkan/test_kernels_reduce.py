"""Reduction kernels (Reduce*, ArgMax/ArgMin) against the NumPy operators, on hypothesis shapes,
axes and attributes, through every shader path: an invocation per output, a workgroup per
output (with subgroup arithmetic and with the shared-memory fallback) and the two-pass split.

Tolerances (GPU vs the CPU operator's own result, per element):
  * exact: ReduceMax, ReduceMin, ArgMax, ArgMin (any dtype), every int32 result.
  * float32: |got - ref| <= 2e-6 |ref| + 2e-6 * S, where S is the same reduction of |x|
    (summation order differs; S bounds the cancellation), ReduceProd 1e-5 * n relative.
  * float16: both round one float32 result, so 1 float16 ulp: 1e-3 |ref| + 1e-3 * S.
"""
import os
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from vkml.kernels import TensorSpec, get_kernel
from vkml.runtime.testing import run_ops

sys.path.insert(0, os.path.dirname(__file__))
from _cpu_op import cpu_op  # noqa: E402
from _validated import run_validated  # noqa: E402

_N = int(os.environ.get("VKML_TEST_EXAMPLES", "12"))
HYP = settings(max_examples=_N, deadline=None, suppress_health_check=list(HealthCheck))

REDUCE = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
          "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]
EXACT = {"ReduceMax", "ReduceMin"}
# |x| under the same reduction: the scale of rounding errors
SCALE = {"ReduceSum": "ReduceL1", "ReduceMean": None, "ReduceL1": "ReduceL1", "ReduceL2": "ReduceL2",
         "ReduceSumSquare": "ReduceSumSquare", "ReduceLogSum": None, "ReduceLogSumExp": None,
         "ReduceProd": None}


def _since(op: str) -> int:
    return 13 if op == "ReduceSum" else 18


def _values(op: str, dtype, shape, rng) -> np.ndarray:
    if op == "ReduceProd":
        x = rng.uniform(0.8, 1.25, shape)
    elif op == "ReduceLogSum":
        x = rng.uniform(0.1, 4.0, shape)
    else:
        x = rng.uniform(-10, 10, shape)
        x = np.where(rng.random(shape) < 0.2, np.round(x), x)  # ties for max/min/arg
    return x.astype(dtype)


def assert_reduced(op, got, ref, x, axes, keepdims, dtype):
    assert got.dtype == ref.dtype and got.shape == ref.shape, (got.dtype, got.shape, ref.dtype, ref.shape)
    if op in EXACT or np.dtype(dtype).kind != "f":
        np.testing.assert_array_equal(got, ref, err_msg=op)
        return
    g, r = got.astype(np.float64), ref.astype(np.float64)
    eps = 1e-3 if dtype == np.float16 else 2e-6
    if op == "ReduceProd":
        n = max(1, x.size // max(1, ref.size))
        np.testing.assert_allclose(g, r, rtol=eps if dtype == np.float16 else 1e-5 * n, err_msg=op)
        return
    a64 = np.abs(x.astype(np.float64))
    if SCALE[op] == "ReduceL1":
        s = np.sum(a64, axis=axes, keepdims=keepdims) if axes != () else a64
    elif SCALE[op] == "ReduceSumSquare":
        s = np.sum(a64 * a64, axis=axes, keepdims=keepdims) if axes != () else a64 * a64
    elif SCALE[op] == "ReduceL2":
        s = np.sqrt(np.sum(a64 * a64, axis=axes, keepdims=keepdims)) if axes != () else a64
    else:
        s = np.zeros_like(r)
    err = np.abs(g - r)
    bound = eps * np.abs(r) + eps * s + (eps if op in ("ReduceMean", "ReduceLogSum", "ReduceLogSumExp") else 0)
    bad = ~(err <= bound) & ~(np.isnan(g) & np.isnan(r)) & ~(g == r)
    assert not bad.any(), f"{op}: got {g[bad][:5]}, want {r[bad][:5]} (bound {np.broadcast_to(bound, r.shape)[bad][:5]})"


def _gpu(op, attrs, x, axes_in=None, opset=None):
    feeds = {"x": x}
    names = ["x"]
    if axes_in is not None:
        feeds["axes"] = np.asarray(axes_in, np.int64)
        names.append("axes")
    return run_ops(0, [(op, attrs, names, ["y"])], feeds)["y"]



# ---------------------------------------------------------------- hypothesis: Reduce*
@st.composite
def reduce_case(draw):
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=13))
    rank = len(shape)
    axes = draw(st.lists(st.integers(-rank, rank - 1), unique_by=lambda a: a % rank, max_size=rank))
    keepdims = draw(st.integers(0, 1))
    noop = draw(st.integers(0, 1))
    as_input = draw(st.booleans())
    seed = draw(st.integers(0, 2**31))
    return shape, axes, keepdims, noop, as_input, seed


@pytest.mark.parametrize("op", REDUCE)
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@HYP
@given(case=reduce_case())
def test_reduce(dev, op, dtype, case):
    shape, axes, keepdims, noop, as_input, seed = case
    x = _values(op, np.dtype(dtype), shape, np.random.default_rng(seed))
    if as_input:
        opset = _since(op)
        attrs = {"keepdims": keepdims, "noop_with_empty_axes": noop}
        ref = cpu_op(op, opset, attrs, x, np.asarray(axes, np.int64))[0]
        got = _gpu(op, attrs, x, axes_in=axes)
    else:
        attrs = {"keepdims": keepdims}
        if axes:
            attrs["axes"] = axes
        ref = cpu_op(op, 11, attrs, x)[0]
        got = _gpu(op, attrs, x)
    if as_input and noop and not axes:
        red = ()
    else:
        red = tuple(sorted(a % len(shape) for a in axes)) or tuple(range(len(shape)))
    assert_reduced(op, got, ref, x, red, bool(keepdims), np.dtype(dtype))


# ---------------------------------------------------------------- the long paths
LONG = [((3, 5000), [1]), ((2, 40000), [1]), ((70001,), [0]), ((300, 3), [0]), ((2, 700, 3), [1]),
        ((5, 33), [1]), ((20000, 2), [0]), ((4, 3, 2000), [0, 2])]


@pytest.mark.parametrize("op", REDUCE)
@pytest.mark.parametrize("shape,axes", LONG, ids=[f"{s}-{a}" for s, a in LONG])
def test_reduce_long(dev, path, op, shape, axes):
    dtype = np.float32
    x = _values(op, dtype, shape, np.random.default_rng(len(shape) * 7 + shape[0]))
    if op == "ReduceProd":
        x = np.random.default_rng(1).uniform(0.999, 1.001, shape).astype(dtype)
    attrs = {"axes": axes, "keepdims": 0}
    ref = cpu_op(op, 11, attrs, x)[0]
    got = _gpu(op, attrs, x)
    assert_reduced(op, got, ref, x, tuple(axes), False, np.dtype(dtype))


@pytest.mark.parametrize("dtype", ["float16"])
@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceL2"])
def test_reduce_long_f16(dev, path, op, dtype):
    x = np.random.default_rng(3).uniform(-2, 2, (3, 30000)).astype(dtype)
    attrs = {"axes": [1], "keepdims": 1}
    assert_reduced(op, _gpu(op, attrs, x), cpu_op(op, 11, attrs, x)[0], x, (1,), True, np.dtype(dtype))


# ---------------------------------------------------------------- special values, empty, ints
@pytest.mark.parametrize("op", REDUCE)
def test_reduce_empty_axis(dev, op):
    """Reducing over zero elements gives the op's identity (as the CPU operator)."""
    x = np.zeros((3, 0, 2), np.float32)
    attrs = {"axes": [1], "keepdims": 0}
    ref = cpu_op(op, 11, attrs, x)[0]
    got = _gpu(op, attrs, x)
    np.testing.assert_array_equal(got, ref)


def test_reduce_empty_output(dev):
    x = np.zeros((0, 4), np.float32)
    got = _gpu("ReduceSum", {"axes": [1], "keepdims": 1}, x)
    assert got.shape == (0, 1)


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin", "ReduceSum", "ReduceLogSumExp"])
@pytest.mark.parametrize("n", [7, 5000])
def test_reduce_nan_inf(dev, op, n):
    x = np.random.default_rng(0).standard_normal((4, n)).astype(np.float32)
    x[0, n // 2] = np.nan
    x[1, n // 3] = np.inf
    x[2, :] = -np.inf
    x[3, 1] = -np.inf
    attrs = {"axes": [1], "keepdims": 0}
    with np.errstate(all="ignore"):
        ref = cpu_op(op, 11, attrs, x)[0]
    got = _gpu(op, attrs, x)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-4 if op == "ReduceSum" else 0, equal_nan=True)


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
@HYP
@given(data=st.data())
def test_reduce_int32(dev, op, data):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=9))
    axes = data.draw(st.lists(st.integers(0, len(shape) - 1), unique=True, min_size=1))
    x = data.draw(hnp.arrays(np.int32, shape, elements=st.integers(-2**31, 2**31 - 1)))
    attrs = {"axes": axes, "keepdims": 1}
    np.testing.assert_array_equal(_gpu(op, attrs, x), cpu_op(op, 11, attrs, x)[0])


# ---------------------------------------------------------------- ArgMax / ArgMin
@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
@HYP
@given(data=st.data())
def test_arg(dev, op, dtype, data):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=13))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    keepdims = data.draw(st.integers(0, 1))
    last = data.draw(st.integers(0, 1))
    # few distinct values: many ties
    x = data.draw(hnp.arrays(np.dtype(dtype), shape, elements=st.integers(-3, 3)))
    attrs = {"axis": axis, "keepdims": keepdims, "select_last_index": last}
    ref = cpu_op(op, 13, attrs, x)[0]
    got = _gpu(op, attrs, x)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("last", [0, 1])
@pytest.mark.parametrize("n", [9, 3000])
def test_arg_long_and_special(dev, path, op, last, n):
    rng = np.random.default_rng(n)
    x = np.round(rng.standard_normal((5, n)) * 2).astype(np.float32)
    x[1, [3, n - 2]] = np.nan            # NaN wins (first, or last with select_last_index)
    x[2, :] = -np.inf
    x[3, :] = 0.0
    x[3, ::2] = -0.0                     # -0 == +0: a tie
    x[4, [1, n - 1]] = np.float32(1e30)
    attrs = {"axis": 1, "keepdims": 0, "select_last_index": last}
    np.testing.assert_array_equal(_gpu(op, attrs, x), cpu_op(op, 13, attrs, x)[0])
    xt = np.ascontiguousarray(x.T)       # reduce the outer axis (strided reads)
    attrs = {"axis": 0, "keepdims": 1, "select_last_index": last}
    np.testing.assert_array_equal(_gpu(op, attrs, xt), cpu_op(op, 13, attrs, xt)[0])


# ---------------------------------------------------------------- what is refused
def test_unsupported(dev):
    k = get_kernel("ReduceSum")
    f32 = TensorSpec((3, 4), np.dtype(np.float32))
    assert k.supports(dev, "ReduceSum", {}, [f32, TensorSpec((1,), np.dtype(np.int64))]) is not None  # axes unknown
    assert k.supports(dev, "ReduceSum", {}, [f32, TensorSpec((1,), np.dtype(np.int64), np.array([1]))]) is None
    assert k.supports(dev, "ReduceSum", {"axes": [2]}, [f32]) is not None
    assert k.supports(dev, "ReduceSum", {}, [TensorSpec((3,), np.dtype(np.complex64))]) is not None
    assert k.supports(dev, "ReduceSum", {}, [TensorSpec((3,), np.dtype(np.int32))]) is not None
    assert get_kernel("ArgMax").supports(dev, "ArgMax", {"axis": 1}, [TensorSpec((3, 0), np.dtype(np.float32))])
    assert get_kernel("ReduceMax").supports(dev, "ReduceMax", {}, [TensorSpec((3,), np.dtype(np.int32))]) is None


def test_no_subgroups_applies_to_the_plans_made_after_it(gpu, vkml_env):
    """VKML_NO_SUBGROUPS is read when a plan's kernels are recorded: a session's next input
    shape takes the shared-memory tree once it is set, and subgroup arithmetic (where the
    device has it) once it is unset."""
    import onnx.helper as h
    from onnx import TensorProto as T

    import vkml
    from vkml.kernels.reduce import subgroup_arith
    from vkml.runtime.devices import vulkan_device

    g = h.make_graph([h.make_node("Softmax", ["x"], ["y"], axis=-1, name="sm")], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, ["n", "k"])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)])
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 13)]).SerializeToString()
    vkml_env(VKML_NO_SUBGROUPS=None)
    sess = vkml.InferenceSession(model, devices=[gpu], warmup=False)
    rng = np.random.default_rng(0)

    def shader(k, setting):
        vkml_env(VKML_NO_SUBGROUPS=setting)
        x = rng.standard_normal((4, k)).astype(np.float32)
        y = sess.run(None, {"x": x})[0]
        e = np.exp(x - x.max(1, keepdims=True))
        np.testing.assert_allclose(y, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)
        (row,) = sess.placement()
        return row["pipelines"][0]["shader"]

    assert shader(256, "1") == "softmax_wgs_f32"
    with_sg = shader(512, None)
    assert with_sg == ("softmax_wg_f32" if subgroup_arith(vulkan_device(gpu)) else "softmax_wgs_f32")
    assert shader(1024, "1") == "softmax_wgs_f32"


# ---------------------------------------------------------------- validation layer
VALIDATION_WORKLOAD = """
import os
import numpy as np
import vkml.kernels  # registers every family
from vkml.vulkan import _instance
from vkml.runtime.testing import run_ops
assert _instance.instance().validation, "validation layer not enabled"
rng = np.random.default_rng(0)
x = rng.standard_normal((3, 40000)).astype(np.float32)
img = rng.standard_normal((2, 3, 9, 9)).astype(np.float16)
c = rng.uniform(0.5, 2, 3).astype(np.float16)
ops = [("ReduceSum", {"axes": [1]}, ["x"], ["split"]), ("ReduceMean", {"axes": [0]}, ["x"], ["strided"]),
       ("ReduceLogSumExp", {"axes": [1]}, ["x"], ["lse"]), ("ArgMax", {"axis": 1}, ["x"], ["am"]),
       ("ReduceMax", {"axes": [0, 1]}, ["img"], ["thread"]),
       ("Softmax", {"axis": 1, "_opset": 13}, ["x"], ["sm"]), ("LogSoftmax", {"axis": 1, "_opset": 13}, ["img"], ["lsm"]),
       ("MaxPool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "_num_outputs": 2}, ["img"], ["mp", "mi"]),
       ("AveragePool", {"kernel_shape": [2, 2], "count_include_pad": 1, "pads": [1, 1, 0, 0]}, ["img"], ["ap"]),
       ("GlobalAveragePool", {}, ["img"], ["gap"]),
       ("LayerNormalization", {"axis": 1, "_num_outputs": 3}, ["x", "s1"], ["ln", "lm", "li"]),
       ("InstanceNormalization", {}, ["img", "c", "c"], ["inn"]),
       ("GroupNormalization", {"num_groups": 3, "_opset": 21}, ["img", "c", "c"], ["gn"]),
       ("BatchNormalization", {}, ["img", "c", "c", "c", "c"], ["bn"])]
feeds = {"x": x, "img": img, "c": c, "s1": np.ones(40000, np.float32)}
for no_sg in ("0", "1"):
    os.environ["VKML_NO_SUBGROUPS"] = no_sg  # (read as each kernel is recorded)
    out = run_ops(0, ops, feeds)
    assert np.allclose(out["split"], x.sum(1, keepdims=True), atol=1e-2)
print("VALIDATION-CLEAN")
"""


def test_validation_clean(dev):
    """Every family and shader path under the Khronos validation layer (synchronization
    validation included): no messages (they would raise)."""
    run_validated(VALIDATION_WORKLOAD)
