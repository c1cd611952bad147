"""A GPU session keeps PLAN_CACHE plans with their run slots and, past those, COMPILED_CACHE
compiled plans without slots (vkml/runtime/gpurun.py): a signature seen again after its plan
was evicted makes a slot but does not compile again, and runs as before."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto as T
from onnx import helper

import vkml
from vkml.runtime import gpurun


def _model() -> bytes:
    """y = Softmax(x @ w + b) over a symbolic row count."""
    vi = helper.make_tensor_value_info
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Add", ["h", "b"], ["a"], name="add"),
             helper.make_node("Softmax", ["a"], ["y"], name="softmax", axis=-1)]
    g = helper.make_graph(nodes, "g", [vi("x", T.FLOAT, ["n", 8])], [vi("y", T.FLOAT, ["n", 4])],
                          [helper.make_tensor("w", T.FLOAT, [8, 4], rng.standard_normal(32).astype(np.float32)),
                           helper.make_tensor("b", T.FLOAT, [4], rng.standard_normal(4).astype(np.float32))])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()


def test_evicted_plans_are_not_compiled_again(gpu, monkeypatch):
    monkeypatch.setattr(gpurun, "PLAN_CACHE", 3)
    monkeypatch.setattr(gpurun, "COMPILED_CACHE", 4)
    model = _model()
    sess = vkml.InferenceSession(model, devices=[gpu])
    ref = vkml.InferenceSession(model, devices=["cpu"])
    compiles = []
    real = sess._gpu._compile
    monkeypatch.setattr(sess._gpu, "_compile", lambda d, *a, **k: compiles.append(d["x"].shape) or real(d, *a, **k))
    rng = np.random.default_rng(1)
    feeds = {n: rng.standard_normal((n, 8), dtype=np.float32) for n in range(1, 9)}

    def check(n):
        np.testing.assert_allclose(sess.run(None, {"x": feeds[n]})[0], ref.run(None, {"x": feeds[n]})[0],
                                   rtol=1e-5, atol=1e-6)
        assert {r["device"] for r in sess.placement()} == {gpu}

    for n in range(1, 9):
        check(n)
    assert compiles == [(n, 8) for n in range(1, 9)]
    assert len(sess._gpu._plans) == 3 and len(sess._gpu._compiled) == 4  # (n = 6..8; 2..5)
    for n in (5, 4, 3, 2):  # evicted, compiles kept: slots only
        check(n)
    assert len(compiles) == 8
    check(1)  # evicted past COMPILED_CACHE: compiled again
    assert compiles[-1] == (1, 8) and len(compiles) == 9
