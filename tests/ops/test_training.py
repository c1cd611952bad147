"""Adagrad, Adam and Momentum (ai.onnx.preview.training) against onnx.reference."""
import os
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
from _oracle import check_node, make_model  # noqa: E402

import vkml  # noqa: E402

DOMAIN = "ai.onnx.preview.training"
coef = st.floats(0.0, 0.5)


def _vars(rng, n_vars, n_groups, dtype):
    shapes = [tuple(rng.integers(1, 4, rng.integers(0, 3))) for _ in range(n_vars)]
    groups = []
    for g in range(n_groups):
        arrs = [rng.standard_normal(s).astype(dtype) for s in shapes]
        if g == n_groups - 1:  # squared-gradient state must be non-negative
            arrs = [np.abs(a) for a in arrs]
        groups.append(arrs)
    return {f"t{g}_{i}": a for g, arrs in enumerate(groups) for i, a in enumerate(arrs)}


def _run_case(op, attrs, n_groups, n_vars, t, seed, dtype):
    rng = np.random.default_rng(seed)
    inputs = {"R": np.array(0.1, dtype), "T": np.array(t, np.int64)}
    inputs.update(_vars(rng, n_vars, n_groups, dtype))
    check_node(op, inputs, attrs, opset=1, outputs=n_vars * (n_groups - 1), domain=DOMAIN, rtol=1e-5, atol=1e-6)


@settings(deadline=None, max_examples=20)
@given(coef, coef, st.integers(1, 3), st.integers(0, 5), st.integers(0, 999), st.sampled_from([np.float32, np.float64]))
def test_adagrad(decay, norm, n_vars, t, seed, dtype):
    _run_case("Adagrad", {"decay_factor": decay, "norm_coefficient": norm, "epsilon": 1e-5}, 3, n_vars, t, seed, dtype)


@settings(deadline=None, max_examples=20)
@given(st.floats(0.5, 0.99), st.floats(0.5, 0.999), coef, coef, st.integers(1, 3), st.integers(0, 5),
       st.integers(0, 999), st.sampled_from([np.float32, np.float64]))
def test_adam(alpha, beta, norm, post, n_vars, t, seed, dtype):
    # onnx.reference's Adam output dtype drifts with T (float64 math on float32 tensors and back),
    # so values come from it and the dtype from the schema (T3: the optimized tensors' type).
    from onnx.reference import ReferenceEvaluator
    attrs = {"alpha": alpha, "beta": beta, "norm_coefficient": norm, "norm_coefficient_post": post}
    rng = np.random.default_rng(seed)
    inputs = {"R": np.array(0.1, dtype), "T": np.array(t, np.int64)}
    inputs.update(_vars(rng, n_vars, 4, dtype))
    m = make_model("Adam", inputs, attrs, 1, outputs=3 * n_vars, domain=DOMAIN)
    ref = ReferenceEvaluator(m).run(None, inputs)
    got = vkml.InferenceSession(m.SerializeToString(), devices=["cpu"]).run(None, inputs)
    for g, r in zip(got, ref):
        assert g.dtype == dtype and g.shape == np.shape(r)
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-6)


@settings(deadline=None, max_examples=20)
@given(st.floats(0.1, 0.99), st.floats(0.1, 1.0), coef, st.sampled_from(["standard", "nesterov"]),
       st.integers(1, 3), st.integers(0, 5), st.integers(0, 999), st.sampled_from([np.float32, np.float64]))
def test_momentum(alpha, beta, norm, mode, n_vars, t, seed, dtype):
    attrs = {"alpha": alpha, "beta": beta, "norm_coefficient": norm, "mode": mode}
    _run_case("Momentum", attrs, 3, n_vars, t, seed, dtype)


def test_momentum_bad_mode_fails_at_load():
    inputs = {"R": np.array(0.1, np.float32), "T": np.array(0, np.int64), "X": np.zeros(2, np.float32),
              "G": np.zeros(2, np.float32), "V": np.zeros(2, np.float32)}
    m = make_model("Momentum", inputs, {"alpha": 0.9, "beta": 1.0, "norm_coefficient": 0.0, "mode": "heavy"},
                   1, outputs=2, domain=DOMAIN)
    with pytest.raises(vkml.ModelError, match="mode"):
        vkml.InferenceSession(m.SerializeToString(), devices=["cpu"])


def test_mismatched_state_count_is_an_error():
    inputs = {"R": np.array(0.1, np.float32), "T": np.array(0, np.int64), "X": np.zeros(2, np.float32),
              "G": np.zeros(2, np.float32)}
    m = make_model("Adagrad", inputs, {}, 1, outputs=2, domain=DOMAIN)
    feed = {k: v for k, v in inputs.items()}
    with pytest.raises(Exception, match="per optimized variable"):
        vkml.InferenceSession(m.SerializeToString(), devices=["cpu"]).run(None, feed)
