"""TreeEnsemble (ai.onnx.ml 5) on random trees.

Oracles: onnxruntime for the raw scores (onnx.reference mis-evaluates BRANCH_MEMBER and leaves
its +-FLT_MAX seed in MIN/MAX targets no leaf reached), the spec's formulas for post_transform
(the reference ignores it; onnxruntime's SOFTMAX is not a softmax over the targets).
"""
import os
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(__file__))

import vkml  # noqa: E402


@st.composite
def ensembles(draw):
    """Random trees in the TreeEnsemble encoding: interior nodes, then leaves."""
    n_features = draw(st.integers(1, 4))
    n_targets = draw(st.integers(1, 3))
    nodes = {k: [] for k in ("feat", "mode", "split", "tid", "tleaf", "fid", "fleaf", "miss")}
    members: list[float] = []
    leaf_t, leaf_w = [], []
    roots = []

    def leaf() -> int:
        leaf_t.append(draw(st.integers(0, n_targets - 1)))
        leaf_w.append(draw(st.floats(-4, 4, width=32)))
        return len(leaf_t) - 1

    def node(depth: int) -> int:
        k = len(nodes["feat"])
        for key in nodes:
            nodes[key].append(0)
        mode = draw(st.integers(0, 6))
        nodes["feat"][k] = draw(st.integers(0, n_features - 1))
        nodes["mode"][k] = mode
        nodes["split"][k] = draw(st.sampled_from([-1.0, -0.5, 0.0, 0.5, 1.0]))
        nodes["miss"][k] = draw(st.integers(0, 1))
        if mode == 6:
            members.extend(draw(st.lists(st.sampled_from([-1.0, 0.0, 1.0, 2.0]), min_size=1, max_size=3)))  # integers: onnxruntime's limit
            members.append(float("nan"))
        for side in ("t", "f"):
            if depth >= 3 or draw(st.booleans()):
                nodes[side + "leaf"][k], nodes[side + "id"][k] = 1, leaf()
            else:
                nodes[side + "leaf"][k], nodes[side + "id"][k] = 0, node(depth + 1)
        return k

    for _ in range(draw(st.integers(1, 4))):
        roots.append(node(0))
    attrs = dict(
        tree_roots=roots, nodes_featureids=nodes["feat"],
        nodes_modes=numpy_helper.from_array(np.array(nodes["mode"], np.uint8)),
        nodes_splits=numpy_helper.from_array(np.array(nodes["split"], np.float32)),
        nodes_truenodeids=nodes["tid"], nodes_trueleafs=nodes["tleaf"],
        nodes_falsenodeids=nodes["fid"], nodes_falseleafs=nodes["fleaf"],
        nodes_missing_value_tracks_true=nodes["miss"],
        leaf_targetids=leaf_t, leaf_weights=numpy_helper.from_array(np.array(leaf_w, np.float32)),
        n_targets=n_targets,
        aggregate_function=draw(st.integers(0, 3)),
    )
    if members:
        attrs["membership_values"] = numpy_helper.from_array(np.array(members, np.float32))
    # onnxruntime casts features to int32 for BRANCH_MEMBER (-0.5 "is" 0): integer features then.
    values = [-1.0, 0.0, 1.0, 2.0, float("nan")] if members else [-1.0, -0.5, 0.0, 0.25, 0.5, 1.0, float("nan")]
    x = np.array(draw(st.lists(st.lists(st.sampled_from(values),
                                        min_size=n_features, max_size=n_features), min_size=1, max_size=6)),
                 np.float32)
    return attrs, x


def _softmax(y, zero_stays=False):
    keep = (y != 0) if zero_stays else np.ones_like(y, bool)
    e = np.where(keep, np.exp(y - np.max(np.where(keep, y, -np.inf), axis=1, keepdims=True)), 0)
    s = e.sum(axis=1, keepdims=True)
    return np.divide(e, s, out=np.zeros_like(e), where=s > 0)


SPEC_TRANSFORMS = {
    1: _softmax,
    2: lambda y: 1 / (1 + np.exp(-y)),
    3: lambda y: _softmax(y, zero_stays=True),
}


@settings(max_examples=40, deadline=None)
@given(ensembles(), st.sampled_from([0, 1, 2, 3]))
def test_tree_ensemble_matches_reference(case, post_transform):
    import onnxruntime as ort

    from _oracle import make_model

    attrs, x = case
    raw_model = make_model("TreeEnsemble", {"x": x}, {**attrs, "post_transform": 0}, 5, domain="ai.onnx.ml")
    (raw,) = vkml.InferenceSession(raw_model, devices=["cpu"]).run(None, {"x": x})
    (ref,) = ort.InferenceSession(raw_model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_allclose(raw, ref, rtol=1e-5, atol=1e-5)
    if post_transform:
        model = make_model("TreeEnsemble", {"x": x}, {**attrs, "post_transform": post_transform}, 5,
                           domain="ai.onnx.ml")
        (got,) = vkml.InferenceSession(model, devices=["cpu"]).run(None, {"x": x})
        want = SPEC_TRANSFORMS[post_transform](raw.astype(np.float64))
        np.testing.assert_allclose(got, want.astype(np.float32), rtol=1e-5, atol=1e-6)


def test_probit_is_refused_at_load():
    from _oracle import make_model

    attrs = dict(tree_roots=[0], nodes_featureids=[0],
                 nodes_modes=numpy_helper.from_array(np.array([0], np.uint8)),
                 nodes_splits=numpy_helper.from_array(np.array([0.0], np.float32)),
                 nodes_truenodeids=[0], nodes_trueleafs=[1], nodes_falsenodeids=[1], nodes_falseleafs=[1],
                 leaf_targetids=[0, 0], leaf_weights=numpy_helper.from_array(np.array([1, 2], np.float32)),
                 post_transform=4)
    with pytest.raises(vkml.ModelError, match="PROBIT"):
        vkml.InferenceSession(make_model("TreeEnsemble", {"x": np.zeros((1, 1), np.float32)}, attrs, 5,
                                         domain="ai.onnx.ml"), devices=["cpu"])
