"""GPU NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (vkml/kernels/loss.py) against
vkml's CPU operators over hypothesis shapes (N, C, D...), dtypes, target dtypes, weights,
ignore_index and reductions; and an out-of-range target raising as on the CPU."""
from __future__ import annotations

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

HYP = settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", "10")), deadline=None,
               suppress_health_check=list(HealthCheck))
loss_shapes = st.tuples(st.integers(1, 5), st.integers(1, 7), st.lists(st.integers(1, 4), max_size=3).map(tuple))


def run_both(gpu, op, inputs, attrs, outputs=1):
    model = make_model(op, inputs, attrs, 13, outputs=outputs)
    feed = {k: v for k, v in inputs.items() if v is not None}
    got, want, sess = gpu_and_cpu(gpu, model, feed)
    (row,) = sess.placement()
    assert row["device"] == gpu and row.get("pipelines"), row
    return got, want


def case(rng, shape, dtype, tdtype, weighted, ignore):
    n, c, rest = shape
    x = rng.standard_normal((n, c) + rest).astype(dtype)
    t = rng.integers(0, c, (n,) + rest).astype(tdtype)
    if ignore is not None:
        t[rng.random(t.shape) < 0.3] = ignore
    w = rng.uniform(0.1, 2, c).astype(dtype) if weighted else None
    return x, t, w


@pytest.mark.parametrize("op", ["NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"])
@HYP
@given(shape=loss_shapes, dtype=st.sampled_from([np.float32, np.float16]), tdtype=st.sampled_from([np.int32, np.int64]),
       weighted=st.booleans(), ignore=st.sampled_from([None, 0, -1, 2, -(1 << 40)]),
       reduction=st.sampled_from(["none", "sum", "mean"]), log_prob=st.booleans(), seed=seeds)
def test_loss(gpu, op, shape, dtype, tdtype, weighted, ignore, reduction, log_prob, seed):
    if op == "SoftmaxCrossEntropyLoss" and dtype == np.float16:
        dtype = np.float32  # (float16 stays on the CPU: see vkml/kernels/loss.py)
    if tdtype == np.int32 and ignore is not None and ignore < -(1 << 31):
        ignore = -1
    x, t, w = case(np.random.default_rng(seed), shape, dtype, tdtype, weighted, ignore)
    attrs = {"reduction": reduction} | ({} if ignore is None else {"ignore_index": ignore})
    outs = 2 if op == "SoftmaxCrossEntropyLoss" and log_prob else 1
    got, want = run_both(gpu, op, {"x": x, "t": t, "w": w}, attrs, outs)
    tol = dict(rtol=2e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=2e-3, atol=2e-3)
    for g, r in zip(got, want):
        assert g.dtype == r.dtype and g.shape == r.shape
        np.testing.assert_allclose(g.astype(np.float64), r.astype(np.float64), equal_nan=True, **tol)


def test_target_out_of_range(gpu):
    x = np.zeros((2, 3), np.float32)
    t = np.array([1, 3], np.int64)
    model = make_model("NegativeLogLikelihoodLoss", {"x": x, "t": t}, {"reduction": "sum"}, 13)
    sess = vkml.InferenceSession(model, devices=[gpu])
    with pytest.raises(Exception, match="3"):
        sess.run(None, {"x": x, "t": t})
    (row,) = sess.placement()
    assert row["device"] == gpu, row
    ok = np.array([1, 2], np.int64)
    (y,) = sess.run(None, {"x": x - 1, "t": ok})  # the fault is cleared for the next run
    assert y == 2
