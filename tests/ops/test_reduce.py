"""Reductions, ArgMax/ArgMin and CumSum/CumProd against onnx.reference."""
import os
import sys

import numpy as np
import pytest
from onnx.reference import ReferenceEvaluator
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
from _gen import BF16, FLOATS, INTS, run_node, seeds, shapes, tol, values  # noqa: E402
from _oracle import check_node, make_model  # noqa: E402

REDUCE = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
          "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"]
_POSITIVE = {"ReduceLogSum"}  # logs of sums: keep the sums positive


def _input_since(op: str) -> int:
    return 13 if op == "ReduceSum" else 18


@st.composite
def reduce_case(draw, op):
    shape = draw(shapes)
    if op == "ReduceLogSumExp" and not shape:
        shape = (1,)  # the reference's LogSumExp rejects 0-d inputs
    rank = len(shape)
    axes = draw(st.none() | st.lists(st.integers(-rank, rank - 1), unique_by=lambda a: a % rank, max_size=rank)
                if rank else st.none() | st.just([]))
    return shape, axes, draw(st.sampled_from([0, 1]))


@pytest.mark.parametrize("op", REDUCE)
@settings(deadline=None, max_examples=15)
@given(dtype=st.sampled_from(FLOATS + [np.dtype(np.int32), np.dtype(np.int64)]), data=st.data(), seed=seeds,
       as_input=st.booleans(), noop=st.sampled_from([0, 1]))
def test_reduce(op, dtype, data, seed, as_input, noop):
    shape, axes, keepdims = data.draw(reduce_case(op))
    if op in ("ReduceLogSum", "ReduceLogSumExp") and dtype.kind == "i":
        dtype = np.dtype(np.float32)
    rng = np.random.default_rng(seed)
    lo, hi = (0.1, 3) if op in _POSITIVE else (-3, 3)
    if op == "ReduceProd":
        lo, hi = (-2, 2) if dtype.kind == "i" else (0.6, 1.4)
    x = values(rng, shape, dtype, lo, hi)
    t = tol(dtype)
    if dtype == BF16 or dtype == np.float16:
        # The reference accumulates in the narrow type (vkml in float32): errors grow with size.
        t = {"rtol": 1e-1, "atol": 5e-2}
    if as_input:
        attrs = {"keepdims": keepdims, "noop_with_empty_axes": noop}
        ins = {"x": x, "axes": None if axes is None else np.array(axes, np.int64)}
        opset = _input_since(op)
    else:
        attrs = {"keepdims": keepdims} if not axes else {"keepdims": keepdims, "axes": axes}
        ins = {"x": x}
        opset = 11 if op == "ReduceSum" else 13
    if op == "ReduceSumSquare" and dtype.kind == "i":
        # The reference promotes int32 to int64 here; ONNX keeps the input's type.
        (got,) = run_node(op, ins, attrs, opset)
        (want,) = ReferenceEvaluator(make_model(op, ins, attrs, opset)).run(
            None, {k: v for k, v in ins.items() if v is not None})
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, want.astype(dtype))
    else:
        check_node(op, ins, attrs, opset=opset, consts=("axes",), **t)


@pytest.mark.parametrize("op", REDUCE)
def test_reduce_empty_set(op):
    """Reducing zero elements gives the op's identity."""
    x = np.zeros((2, 0, 4), np.float32)
    check_node(op, {"x": x, "axes": np.array([1], np.int64)}, {"keepdims": 1}, opset=_input_since(op),
               consts=("axes",))


@pytest.mark.parametrize("op,dtype", [("ReduceMax", np.int32), ("ReduceMin", np.uint8), ("ReduceMax", np.bool_),
                                      ("ReduceMin", np.bool_)])
def test_reduce_max_min_empty_integers(op, dtype):
    x = np.zeros((3, 0), dtype)
    (got,) = run_node(op, {"x": x, "axes": np.array([1], np.int64)}, {"keepdims": 0}, 20)
    if dtype is np.bool_:
        want = op == "ReduceMin"
    else:
        want = np.iinfo(dtype).min if op == "ReduceMax" else np.iinfo(dtype).max
    assert got.dtype == dtype and got.shape == (3,)
    np.testing.assert_array_equal(got, np.full(3, want, dtype))


def test_reduce_max_bool():
    x = np.array([[True, False], [False, False]])
    check_node("ReduceMax", {"x": x, "axes": np.array([1], np.int64)}, {"keepdims": 0}, opset=20, consts=("axes",))
    check_node("ReduceMin", {"x": x, "axes": np.array([0], np.int64)}, {"keepdims": 1}, opset=20, consts=("axes",))


def test_reduce_axes_not_constant():
    """Axes fed at run time: inference can't know the shape, the run still must be right."""
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    check_node("ReduceSum", {"x": x, "axes": np.array([0, 2], np.int64)}, {"keepdims": 0}, opset=13)
    check_node("ReduceMean", {"x": x, "axes": np.array([-1], np.int64)}, {"keepdims": 1}, opset=18)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@settings(deadline=None, max_examples=25)
@given(dtype=st.sampled_from(FLOATS + INTS), shape=st.lists(st.integers(1, 4), min_size=1, max_size=4).map(tuple),
       seed=seeds, data=st.data(), keepdims=st.sampled_from([0, 1]), last=st.sampled_from([0, 1]))
def test_arg(op, dtype, shape, seed, data, keepdims, last):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = values(np.random.default_rng(seed), shape, dtype, 0, 3)  # few distinct values: many ties
    check_node(op, {"x": x}, {"axis": axis, "keepdims": keepdims, "select_last_index": last}, opset=13)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_arg_opset1(op):
    x = np.array([[1, 5, 5], [7, 0, 7]], np.float32)
    check_node(op, {"x": x}, {"axis": 1, "keepdims": 0}, opset=1)


@pytest.mark.parametrize("op,since", [("CumSum", 14), ("CumProd", 26)])
@settings(deadline=None, max_examples=30)
@given(dtype=st.sampled_from(FLOATS + [np.dtype(t) for t in (np.int32, np.int64, np.uint32, np.uint64)]),
       shape=st.lists(st.integers(0, 4), min_size=1, max_size=4).map(tuple), seed=seeds, data=st.data(),
       exclusive=st.sampled_from([0, 1]), reverse=st.sampled_from([0, 1]),
       axis_dtype=st.sampled_from([np.int32, np.int64]))
def test_cumulative(op, since, dtype, shape, seed, data, exclusive, reverse, axis_dtype):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    lo = 0 if dtype.kind == "u" else -2
    x = values(np.random.default_rng(seed), shape, dtype, lo, 2)
    t = tol(dtype)
    if dtype == BF16 or dtype == np.float16:
        t = {"rtol": 3e-2, "atol": 5e-2}
    ins = {"x": x, "axis": np.array(axis, axis_dtype)}
    check_node(op, ins, {"exclusive": exclusive, "reverse": reverse}, opset=since, **t)
