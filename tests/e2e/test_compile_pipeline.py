"""Compiling one input signature (vkml/compile/pipeline.py) apart from running it: the stages
and what passes between them, and each GPU node's kernel resolved once per plan (checked and
inferred at placement, then used as it is by the unit plan and by every slot's recording)."""
from __future__ import annotations

import collections

import numpy as np
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import vkml
from vkml.compile import pipeline
from vkml.ir.graph import TensorDesc
from vkml.ops.bind import load_model
from vkml.kernels import get_kernel
from vkml.runtime.devices import gpu_facts


def _model() -> bytes:
    w = np.linspace(-1, 1, 16 * 8, dtype=np.float32).reshape(16, 8)
    g = h.make_graph([h.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
                      h.make_node("Relu", ["m"], ["r"], name="relu"),
                      h.make_node("Softmax", ["r"], ["y"], name="sm", axis=-1),
                      h.make_node("Shape", ["y"], ["s"], name="shape")], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, ["N", 16])],
                     [h.make_tensor_value_info("y", T.FLOAT, None), h.make_tensor_value_info("s", T.INT64, None)],
                     [nh.from_array(w, "w")])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()


def test_compile_signature_runs_the_stages_and_leaves_the_graph_alone(gpu):
    model = load_model(_model())
    nodes = list(model.graph.nodes)
    c = pipeline.compile_signature(model.graph, model.weights, {"x": TensorDesc(np.dtype(np.float32), (3, 16))},
                                   devices=(gpu, "cpu"), gpus={gpu: gpu_facts(gpu)}, fuse=False)
    assert model.graph.nodes == nodes  # (the rewrites work on the Concrete, never the graph)
    assert c.signature.output_device is None and c.concrete.values["y"].shape == (3, 8)
    assert "s" in c.concrete.consts  # the Shape folded for these inputs
    live = [n.name for n in c.concrete.live]
    assert live == ["mm", "relu", "sm"]
    assert c.placement.devices == [gpu, gpu, gpu]
    assert {r["node"]: r["device"] for r in c.report} == {"mm": gpu, "relu": gpu, "sm": gpu, "shape": "cpu"}
    # One NodeKernel per GPU node, carried by the unit plan: the kernel and its inferred outputs.
    assert set(c.kernels) == {id(n) for n in c.concrete.live}
    for n in c.concrete.live:
        nk = c.kernels[id(n)]
        assert nk.kernel is get_kernel(n.op_type)
        assert [tuple(s.shape) for s in nk.outputs] == [(3, 8)]
    assert [u.kind for u in c.units.units] == ["upload", "gpu", "readback"]


def test_a_cpu_placement_resolves_no_kernel(gpu):
    model = load_model(_model())
    c = pipeline.compile_signature(model.graph, model.weights, {"x": TensorDesc(np.dtype(np.float32), (3, 16))},
                                   devices=(gpu, "cpu"), gpus={gpu: gpu_facts(gpu)}, forced={"relu": "cpu"})
    assert {r["node"]: r["device"] for r in c.report}["relu"] == "cpu"
    assert {n.name for n in c.concrete.live if id(n) in c.kernels} == {"mm", "sm"}


def test_each_gpu_node_is_checked_and_inferred_once_per_plan(gpu, monkeypatch, vkml_env):
    """Placement checks a node's kernel and infers its outputs; the unit plan and the slots'
    recording use that (they used to look the kernel up and infer again). (Fusion off: it
    would make MatMul + Relu one FusedGemm node.)"""
    vkml_env(VKML_FUSE="0")
    calls = collections.Counter()
    for op in ("MatMul", "Relu", "Softmax"):
        k = get_kernel(op)
        for method in ("check", "infer"):
            real = getattr(k, method)

            def counted(*a, _real=real, _method=method, **kw):
                op_type = a[1] if _method == "check" else a[0]
                calls[(_method, op_type)] += 1
                return _real(*a, **kw)
            monkeypatch.setattr(k, method, counted)
    sess = vkml.InferenceSession(_model(), devices=[gpu], max_slots=2)
    x = np.linspace(-1, 1, 3 * 16, dtype=np.float32).reshape(3, 16)
    want = vkml.InferenceSession(_model(), devices=["cpu"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], want, rtol=1e-5, atol=1e-6)
    plan = sess._gpu.last
    plan.pool.release(plan.pool.acquire())  # (the slot of the run is free again: this reuses it)
    a, b = plan.pool.acquire(), plan.pool.acquire()  # a second slot: recorded again, no new lookup
    plan.pool.release(a)
    plan.pool.release(b)
    assert calls == {(m, op): 1 for m in ("check", "infer") for op in ("MatMul", "Relu", "Softmax")}
    sess.run(None, {"x": np.zeros((5, 16), np.float32)})  # a new signature: a new plan, checked anew
    assert calls == {(m, op): 2 for m in ("check", "infer") for op in ("MatMul", "Relu", "Softmax")}
