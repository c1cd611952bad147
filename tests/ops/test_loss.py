"""NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss against onnx.reference."""
import os
import sys

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
from _oracle import check_node  # noqa: E402

import vkml  # noqa: E402

FLOATS = [np.float32, np.float64, np.float16]


@st.composite
def loss_case(draw):
    n = draw(st.integers(1, 3))
    c = draw(st.integers(1, 5))
    extra = tuple(draw(st.lists(st.integers(1, 3), max_size=3)))
    dtype = draw(st.sampled_from(FLOATS))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c) + extra).astype(dtype)
    labels = rng.integers(0, c, (n,) + extra).astype(draw(st.sampled_from([np.int32, np.int64])))
    # -1 is left to test_ignore_minus_one: onnx.reference special-cases it (see there).
    ignore = draw(st.sampled_from([None, 0, -4, c + 2]))
    if ignore is not None and labels.size > 1:
        labels.flat[rng.integers(0, labels.size)] = ignore
    weight = rng.uniform(0.2, 2.0, c).astype(dtype) if draw(st.booleans()) else None
    attrs = {"reduction": draw(st.sampled_from(["none", "sum", "mean"]))}
    if ignore is not None:
        attrs["ignore_index"] = ignore
    return x, labels, weight, attrs


def _tol(dtype):
    return (2e-2, 2e-2) if dtype == np.float16 else (1e-5, 1e-6)


@settings(deadline=None, max_examples=40)
@given(loss_case())
def test_nll(case):
    x, labels, weight, attrs = case
    rtol, atol = _tol(x.dtype)
    check_node("NegativeLogLikelihoodLoss", {"x": x, "t": labels, "w": weight}, attrs, opset=22,
               rtol=rtol, atol=atol)


@settings(deadline=None, max_examples=40)
@given(loss_case(), st.booleans())
def test_sce(case, log_prob):
    x, labels, weight, attrs = case
    rtol, atol = _tol(x.dtype)
    check_node("SoftmaxCrossEntropyLoss", {"x": x, "t": labels, "w": weight}, attrs, opset=13,
               outputs=2 if log_prob else 1, rtol=rtol, atol=atol)


def test_ignore_minus_one_mean_counts_only_kept_samples():
    # onnx.reference averages over every sample when ignore_index == -1 and there is no weight;
    # the schema's function body (and any other ignore_index) divides by the kept samples.
    from _oracle import make_model
    x = np.log(np.array([[0.2, 0.8], [0.5, 0.5], [0.9, 0.1]], np.float32))
    t = np.array([1, -1, 0], np.int64)
    m = make_model("NegativeLogLikelihoodLoss", {"x": x, "t": t}, {"ignore_index": -1}, 22)
    out = vkml.InferenceSession(m.SerializeToString(), devices=["cpu"]).run(None, {"x": x, "t": t})[0]
    np.testing.assert_allclose(out, -(x[0, 1] + x[2, 0]) / 2, rtol=1e-6)


def test_bfloat16_runs_in_float32():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    t = np.array([0, 3, 1], np.int64)
    got = check_node("NegativeLogLikelihoodLoss", {"x": x, "t": t}, {"reduction": "none"}, opset=22)[0]
    from _oracle import make_model
    m = make_model("NegativeLogLikelihoodLoss", {"x": x.astype(ml_dtypes.bfloat16), "t": t},
                   {"reduction": "none"}, 22)
    out = vkml.InferenceSession(m.SerializeToString(), devices=["cpu"]).run(
        None, {"x": x.astype(ml_dtypes.bfloat16), "t": t})[0]
    assert out.dtype == ml_dtypes.bfloat16
    np.testing.assert_allclose(out.astype(np.float32), got, rtol=1e-2)


def test_label_out_of_range_is_a_clear_error():
    from _oracle import make_model
    x = np.zeros((2, 3), np.float32)
    t = np.array([0, 7], np.int64)
    m = make_model("NegativeLogLikelihoodLoss", {"x": x, "t": t}, {}, 22)
    with pytest.raises(Exception, match="outside"):
        vkml.InferenceSession(m.SerializeToString(), devices=["cpu"]).run(None, {"x": x, "t": t})


def test_bad_reduction_rejected_at_load():
    from _oracle import make_model
    x = np.zeros((2, 3), np.float32)
    t = np.array([0, 1], np.int64)
    m = make_model("NegativeLogLikelihoodLoss", {"x": x, "t": t}, {"reduction": "avg"}, 22)
    with pytest.raises(vkml.ModelError, match="reduction"):
        vkml.InferenceSession(m.SerializeToString(), devices=["cpu"])
