"""GPU elementwise kernels on every integer dtype (int8 ... uint64), and the float unary ops
added beside them (IsNaN, IsInf, trigonometric and hyperbolic functions, ThresholdedRelu, Celu,
Swish), Mean, Hardmax and LpNormalization, against vkml's CPU operators over hypothesis-generated shapes, dtypes and broadcasts.

Each example runs one node in a session on the first usable Vulkan device and in one on the
CPU (named: devices=["cpu"]), checks that the GPU session dispatched the node (its placement
row names the device and lists pipelines), and compares: integers, bools and exact float ops
bitwise, the transcendental ones within a few float32 ulp or one float16 ulp. Integer values
span each dtype's whole range, so wrap-around (8/16-bit values computed in 32 bits and stored
narrow) is covered.
"""
from __future__ import annotations

import os
import sys
import types

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
from _gen import broadcast_pair, nonempty_shapes, seeds  # noqa: E402
from _oracle import gpu_and_cpu, make_model  # noqa: E402

import vkml  # noqa: E402
from vkml.kernels import Unsupported, get_kernel  # noqa: E402
from vkml.kernels.registry import TensorSpec  # noqa: E402

NARROW = [np.dtype(t) for t in (np.int8, np.int16, np.uint8, np.uint16, np.uint32, np.uint64)]
INTS = NARROW + [np.dtype(np.int32), np.dtype(np.int64)]
SIGNED = [d for d in INTS if d.kind == "i"]
FLOATS = [np.dtype(np.float32), np.dtype(np.float16)]
HYP = settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", "10")), deadline=None,
               suppress_health_check=list(HealthCheck))


def full_range(rng: np.random.Generator, shape, dtype: np.dtype) -> np.ndarray:
    """Integers over the dtype's whole range, with its extremes and small values mixed in."""
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    special = np.array([info.min, info.max, 0, 1, 2, info.max - 1] + ([-1, -2] if dtype.kind == "i" else []),
                       dtype)
    pick = rng.integers(0, 3, shape) == 0
    return np.where(pick, rng.choice(special, shape), x).astype(dtype)


def run_both(gpu: str, op: str, inputs: dict, attrs: dict | None = None, opset: int = 21,
             consts: tuple = ()) -> tuple[np.ndarray, np.ndarray]:
    """(GPU result, CPU result) of one node; asserts the GPU session dispatched it."""
    model = make_model(op, inputs, attrs or {}, opset, consts=consts)
    feed = {k: np.asarray(v) for k, v in inputs.items() if v is not None and k not in consts}
    (got,), (want,), sess = gpu_and_cpu(gpu, model, feed)
    (row,) = sess.placement()
    assert row["device"] == gpu, row
    if want.size:
        assert row.get("pipelines"), f"{op} on {gpu} dispatched nothing: {row}"
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    return got, want


def exact(got: np.ndarray, want: np.ndarray, msg: str = "") -> None:
    if got.dtype.kind == "f":
        np.testing.assert_array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"), err_msg=msg)
    else:
        np.testing.assert_array_equal(got, want, err_msg=msg)


# ---------------------------------------------------------------- binary
ARITH = ["Add", "Sub", "Mul", "Div", "Max", "Min", "Mod", "BitwiseAnd", "BitwiseOr", "BitwiseXor"]
COMPARE = ["Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"]


@pytest.mark.parametrize("op", ARITH + COMPARE)
@HYP
@given(dtype=st.sampled_from(INTS), pair=broadcast_pair(), seed=seeds, fmod=st.sampled_from([0, 1]))
def test_binary_ints(gpu, op, dtype, pair, seed, fmod):
    rng = np.random.default_rng(seed)
    a, b = full_range(rng, pair[0], dtype), full_range(rng, pair[1], dtype)
    if op in ("Div", "Mod"):
        b = np.where(b == 0, np.array(3, dtype), b).astype(dtype)  # x/0 differs (0 here, UB there)
        if dtype.kind == "i":  # MIN / -1 overflows: the CPU's result is not defined either
            a = np.where(a == np.iinfo(dtype).min, np.array(5, dtype), a).astype(dtype)
    attrs = {"fmod": fmod} if op == "Mod" else {}
    got, want = run_both(gpu, op, {"a": a, "b": b}, attrs, opset=18)
    exact(got, want, f"{op} {dtype}")


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
@HYP
@given(dtype=st.sampled_from(INTS), pair=broadcast_pair(), seed=seeds)
def test_bitshift(gpu, direction, dtype, pair, seed):
    """Shift amounts from negative to beyond the width: those out of range give the fill
    (0, or -1 for negative values shifted right), as vkml's CPU BitShift does."""
    rng = np.random.default_rng(seed)
    bits = dtype.itemsize * 8
    x = full_range(rng, pair[0], dtype)
    lo = -3 if dtype.kind == "i" else 0
    y = rng.integers(lo, bits + 3, pair[1]).astype(dtype)
    got, want = run_both(gpu, "BitShift", {"x": x, "y": y}, {"direction": direction}, opset=11)
    exact(got, want, f"BitShift {direction} {dtype}")


@HYP
@given(base=st.sampled_from(FLOATS + [np.dtype(np.int32), np.dtype(np.int64)]),
       exp=st.sampled_from(NARROW), pair=broadcast_pair(), seed=seeds)
def test_pow_integer_exponents(gpu, base, exp, pair, seed):
    rng = np.random.default_rng(seed)
    if base.kind == "f":
        a = rng.uniform(0.1, 3, pair[0]).astype(base)
    else:
        a = rng.integers(-6, 7, pair[0]).astype(base)
    b = rng.integers(0, 6, pair[1]).astype(exp)
    got, want = run_both(gpu, "Pow", {"a": a, "b": b}, opset=15)
    if base.kind == "f":
        np.testing.assert_allclose(got, want, rtol=2e-5 if base == np.float32 else 1e-3)
    else:
        exact(got, want)


@pytest.mark.parametrize("op", ["Max", "Min", "Sum"])
@HYP
@given(dtype=st.sampled_from(NARROW), n=st.integers(2, 3), shape=nonempty_shapes, seed=seeds)
def test_variadic_ints(gpu, op, dtype, n, shape, seed):
    if op == "Sum":
        dtype = np.dtype(np.float32)  # Sum is float-only in ONNX; it shares Add's shaders
    rng = np.random.default_rng(seed)
    ins = {f"x{i}": (full_range(rng, shape, dtype) if dtype.kind != "f" else rng.normal(size=shape).astype(dtype))
           for i in range(n)}
    got, want = run_both(gpu, op, ins, opset=13)
    exact(got, want, f"{op} {dtype}")


# ---------------------------------------------------------------- unary, Clip, Where, Trilu
@pytest.mark.parametrize("op", ["Abs", "Neg", "Sign", "Relu", "BitwiseNot"])
@HYP
@given(dtype=st.sampled_from(INTS), shape=nonempty_shapes, seed=seeds)
def test_unary_ints(gpu, op, dtype, shape, seed):
    if op in ("Neg", "Relu") and dtype.kind == "u":
        dtype = np.dtype(np.int8)  # ONNX defines them on signed types only
    x = full_range(np.random.default_rng(seed), shape, dtype)
    got, want = run_both(gpu, op, {"x": x}, opset=18)
    exact(got, want, f"{op} {dtype}")


@HYP
@given(dtype=st.sampled_from(INTS), shape=nonempty_shapes, seed=seeds, const=st.booleans())
def test_clip_ints(gpu, dtype, shape, seed, const):
    """Bounds known when recording (one unary dispatch) or fed at run time (Max then Min)."""
    rng = np.random.default_rng(seed)
    x = full_range(rng, shape, dtype)
    lo, hi = np.sort(full_range(rng, (2,), dtype))
    ins = {"x": x, "lo": np.array(lo, dtype), "hi": np.array(hi, dtype)}
    got, want = run_both(gpu, "Clip", ins, opset=13, consts=("lo", "hi") if const else ())
    exact(got, want, f"Clip {dtype}")


@HYP
@given(dtype=st.sampled_from(INTS), pair=broadcast_pair(), seed=seeds)
def test_where_ints(gpu, dtype, pair, seed):
    rng = np.random.default_rng(seed)
    c = rng.integers(0, 2, pair[0]).astype(bool)
    x, y = full_range(rng, pair[1], dtype), full_range(rng, pair[0], dtype)
    got, want = run_both(gpu, "Where", {"c": c, "x": x, "y": y}, opset=16)
    exact(got, want, f"Where {dtype}")


@HYP
@given(dtype=st.sampled_from(NARROW), rows=st.integers(1, 5), cols=st.integers(1, 5),
       k=st.integers(-3, 3), upper=st.sampled_from([0, 1]), seed=seeds)
def test_trilu_ints(gpu, dtype, rows, cols, k, upper, seed):
    x = full_range(np.random.default_rng(seed), (2, rows, cols), dtype)
    got, want = run_both(gpu, "Trilu", {"x": x, "k": np.array([k], np.int64)}, {"upper": upper}, opset=14,
                         consts=("k",))
    exact(got, want, f"Trilu {dtype}")


# ---------------------------------------------------------------- Cast
ALL = INTS + FLOATS + [np.dtype(np.bool_)]


def _cast_source(rng, shape, src: np.dtype, dst: np.dtype) -> np.ndarray:
    """Values whose conversion both sides define: integers over their whole range (wrapping
    into narrower integers; large ones rounding into floats), floats within dst's range."""
    if src == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if src.kind in "iu":
        return full_range(rng, shape, src)
    if dst.kind in "iu":
        info = np.iinfo(dst)
        lo, hi = max(float(info.min), -60000.0), min(float(info.max), 60000.0)
        x = rng.uniform(lo, hi, shape)
        x = np.where(rng.integers(0, 2, shape) == 0, np.round(x), x)  # whole numbers too
        return np.clip(x, lo, hi).astype(src)
    x = rng.normal(0, 100, shape).astype(src)
    return np.where(rng.integers(0, 4, shape) == 0, np.zeros((), src), x).astype(src)


@HYP
@given(src=st.sampled_from(ALL), dst=st.sampled_from(ALL), shape=nonempty_shapes, seed=seeds,
       like=st.booleans())
def test_cast(gpu, src, dst, shape, seed, like):
    if src == dst:
        dst = np.dtype(np.uint8) if src != np.uint8 else np.dtype(np.int16)
    x = _cast_source(np.random.default_rng(seed), shape, src, dst)
    if like:
        got, want = run_both(gpu, "CastLike", {"x": x, "t": np.zeros((1,), dst)}, opset=21)
    else:
        from vkml.ir import dtypes

        got, want = run_both(gpu, "Cast", {"x": x}, {"to": dtypes.onnx_type(dst)}, opset=21)
    exact(got, want, f"Cast {src} -> {dst}")


# ---------------------------------------------------------------- float unary ops
def _specials(dtype):
    return np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 65504.0], dtype)


@pytest.mark.parametrize("op,attrs", [("IsNaN", {}), ("IsInf", {}), ("IsInf", {"detect_negative": 0}),
                                      ("IsInf", {"detect_positive": 0})])
@HYP
@given(dtype=st.sampled_from(FLOATS), shape=nonempty_shapes, seed=seeds)
def test_isnan_isinf(gpu, op, attrs, dtype, shape, seed):
    rng = np.random.default_rng(seed)
    x = np.where(rng.integers(0, 2, shape) == 0, rng.choice(_specials(dtype), shape),
                 rng.normal(0, 1e4, shape)).astype(dtype)
    got, want = run_both(gpu, op, {"x": x}, attrs, opset=20)
    exact(got, want, f"{op} {attrs} {dtype}")


# op -> (domain, float32 rtol, atol): a few float32 ulp beyond the driver's builtins
# (asin/acos/atan/tan are GLSL's own) or vkml's log1p/expm1 (sinh, asinh, acosh, atanh).
FLOAT_UNARY = {
    "Tan": ((-1.4, 1.4), 4e-6, 1e-6), "Asin": ((-1, 1), 2e-6, 1e-6), "Acos": ((-1, 1), 2e-6, 1e-6),
    "Atan": ((-1e3, 1e3), 2e-6, 1e-6), "Sinh": ((-80, 80), 4e-6, 1e-30), "Cosh": ((-80, 80), 4e-6, 1e-30),
    "Asinh": ((-1e4, 1e4), 2e-6, 1e-30), "Acosh": ((1, 1e4), 2e-6, 1e-30), "Atanh": ((-1, 1), 4e-6, 1e-30),
    "ThresholdedRelu": ((-5, 5), 0, 0), "Celu": ((-20, 20), 2e-6, 1e-7), "Swish": ((-80, 80), 4e-6, 1e-30),
}


@pytest.mark.parametrize("op", sorted(FLOAT_UNARY))
@HYP
@given(dtype=st.sampled_from(FLOATS), shape=nonempty_shapes, seed=seeds, alpha=st.sampled_from([0.5, 1.0, 2.0]))
def test_float_unary(gpu, op, dtype, shape, seed, alpha):
    (lo, hi), rtol, atol = FLOAT_UNARY[op]
    rng = np.random.default_rng(seed)
    if dtype == np.float16:
        hi, lo = min(hi, 10), max(lo, -10)
    x = rng.uniform(lo, hi, shape).astype(dtype)
    attrs = {"alpha": alpha} if op in ("ThresholdedRelu", "Celu", "Swish") else {}
    got, want = run_both(gpu, op, {"x": x}, attrs, opset=24 if op == "Swish" else 12)
    if dtype == np.float16:
        rtol, atol = 1e-3, 1e-4
    if rtol == 0:
        exact(got, want, op)
    else:
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol,
                                   equal_nan=True, err_msg=f"{op} {dtype}")


# ---------------------------------------------------------------- devices without the features
@pytest.mark.parametrize("dtype,feature", [(np.int8, "storage_8bit"), (np.uint8, "storage_8bit"),
                                           (np.int16, "storage_16bit"), (np.uint16, "storage_16bit"),
                                           (np.uint64, "int64")])
def test_missing_storage_feature_keeps_the_node_on_the_cpu(dtype, feature):
    """A device without 8/16-bit storage (or shaderInt64) refuses those dtypes and says which
    feature it lacks; uint32 needs nothing."""
    everything = frozenset({"storage_8bit", "storage_16bit", "int64"})
    dev = types.SimpleNamespace(name="fake GPU", features=everything - {feature})
    spec = TensorSpec((4,), np.dtype(dtype))
    for op, attrs, ins in (("Add", {}, [spec, spec]), ("Abs", {}, [spec]), ("Cast", {"to": 1}, [spec]),
                           ("BitShift", {"direction": "LEFT"}, [spec, spec])):
        with pytest.raises(Unsupported, match=feature):
            get_kernel(op).check(dev, op, attrs, ins)
        get_kernel(op).check(types.SimpleNamespace(name="full", features=everything), op, attrs, ins)
    u32 = TensorSpec((4,), np.dtype(np.uint32))
    get_kernel("Add").check(types.SimpleNamespace(name="bare", features=frozenset({"storage_8bit"})),
                            "Add", {}, [u32, u32])


# ---------------------------------------------------------------- Mean, Hardmax, LpNormalization
@HYP
@given(dtype=st.sampled_from(FLOATS), n=st.integers(1, 3), pair=broadcast_pair(), seed=seeds)
def test_mean(gpu, dtype, n, pair, seed):
    """The sum in the dtype, then one division by n, as the CPU operator: bitwise equal."""
    rng = np.random.default_rng(seed)
    ins = {f"x{i}": rng.normal(0, 10, pair[i % 2]).astype(dtype) for i in range(n)}
    got, want = run_both(gpu, "Mean", ins, opset=13)
    exact(got, want, f"Mean {dtype}")


def _rows_input(rng, shape, dtype, ties: bool):
    x = rng.normal(0, 3, shape)
    if ties:  # repeated maxima and NaNs: the first maximum / first NaN wins
        x = np.round(x)
        x = np.where(rng.integers(0, 12, shape) == 0, np.nan, x)
    return x.astype(dtype)


@HYP
@given(dtype=st.sampled_from(FLOATS), shape=nonempty_shapes.filter(len), seed=seeds, data=st.data(),
       ties=st.booleans())
def test_hardmax(gpu, dtype, shape, seed, data, ties):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = _rows_input(np.random.default_rng(seed), shape, dtype, ties)
    got, want = run_both(gpu, "Hardmax", {"x": x}, {"axis": axis}, opset=13)
    exact(got, want, f"Hardmax axis {axis}")


@HYP
@given(dtype=st.sampled_from(FLOATS), shape=nonempty_shapes.filter(len), seed=seeds, data=st.data(),
       p=st.sampled_from([1, 2]), zeros=st.booleans())
def test_lp_normalization(gpu, dtype, shape, seed, data, p, zeros):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 3, shape).astype(dtype)
    if zeros:  # rows of zeros give zeros
        x = np.where(rng.integers(0, 2, shape[:1] + (1,) * (len(shape) - 1)) == 0, np.zeros((), dtype), x)
    got, want = run_both(gpu, "LpNormalization", {"x": x}, {"axis": axis, "p": p}, opset=1)
    rtol = 1e-5 if dtype == np.float32 else 1e-3
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=1e-6,
                               err_msg=f"LpNormalization p={p} axis {axis}")
