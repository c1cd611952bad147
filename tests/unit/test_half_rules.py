"""vkml/compile/half.py's rules on small graphs: what goes to float16, what stays float32 and
why (masks, Softmax, user-placed nodes), constants converted once, outputs float32."""
import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import vkml
from vkml.compile import half
from vkml.ir.graph import TensorDesc
from vkml.ops.bind import load_model

F32, F16 = np.dtype(np.float32), np.dtype(np.float16)


def _graph(mask_value: float):
    """x @ w -> Add(mask const) -> Softmax -> Mul(scale) -> y; plus Relu(x) -> r."""
    w = np.full((4, 4), 0.5, np.float32)
    mask = np.zeros((1, 4), np.float32)
    mask[0, 3] = mask_value
    nodes = [h.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
             h.make_node("Add", ["m", "mask"], ["a"], name="masked"),
             h.make_node("Softmax", ["a"], ["p"], name="softmax", axis=-1),
             h.make_node("Mul", ["p", "two"], ["y"], name="scale"),
             h.make_node("Relu", ["x"], ["r"], name="relu")]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [2, 4])],
                     [h.make_tensor_value_info("y", T.FLOAT, None), h.make_tensor_value_info("r", T.FLOAT, None)],
                     [nh.from_array(w, "w"), nh.from_array(mask, "mask"), nh.from_array(np.float32(2.0), "two")])
    model = load_model(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString())
    values = dict(model.graph.values)
    values["x"] = TensorDesc(F32, (2, 4))
    for v in ("m", "a", "p", "y", "r"):
        values[v] = TensorDesc(F32, (2, 4))
    consts = {k: np.asarray(v) for k, v in model.weights.items()}
    return model.graph, values, consts


def _half(mask_value: float, keep=frozenset()):
    g, values, consts = _graph(mask_value)
    live, fused = half.to_half(list(g.nodes), values, consts, g.inputs, g.outputs, keep)
    dtype = {n.name: values[n.outputs[0]].dtype for n in live}
    return live, fused, dtype, values, consts


def test_what_goes_to_float16():
    live, fused, dtype, values, consts = _half(-1.0)
    assert dtype["mm"] == dtype["masked"] == dtype["relu"] == F16
    assert dtype["softmax"] == F32  # (always: a fully masked row)
    assert dtype["scale"] == F32  # (it reads Softmax's float32 result: no Cast into a Mul)
    assert consts["w::f16"].dtype == F16 and consts["mask::f16"].dtype == F16
    casts = [n for n in live if n.op_type == "Cast"]
    # x cast once (read by MatMul and Relu), the masked scores back to float32 for Softmax, r for the output
    assert sorted((n.inputs[0], n.outputs[0]) for n in casts) == [
        ("a::f16", "a"), ("r::f16", "r"), ("x", "x::f16")]
    assert all(fused[n.name] == [] for n in casts)
    assert all(values[o].dtype == F32 for o in ("y", "r"))


def test_a_mask_beyond_float16_keeps_its_add_in_float32():
    _, _, dtype, _, consts = _half(float(np.finfo(np.float32).min))
    assert dtype["mm"] == F16 and dtype["masked"] == F32 and "mask::f16" not in consts


def test_placed_nodes_stay_as_they_are():
    _, _, dtype, _, _ = _half(-1.0, keep=frozenset({"mm"}))
    assert dtype["mm"] == F32 and dtype["relu"] == F16


def test_sessions_take_the_setting(gpu):
    blob = _model_bytes()
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    full = vkml.InferenceSession(blob, devices=[gpu]).run(None, {"x": x})
    got = vkml.InferenceSession(blob, devices=[gpu], precision="fp16").run(None, {"x": x})
    for a, b in zip(got, full):
        assert a.dtype == np.float32
        np.testing.assert_allclose(a, b, rtol=2e-3, atol=2e-3)
    with pytest.raises(ValueError, match="precision"):
        vkml.InferenceSession(blob, devices=[gpu], precision="bf16")


def _model_bytes() -> bytes:
    w = np.full((4, 4), 0.5, np.float32)
    nodes = [h.make_node("MatMul", ["x", "w"], ["m"], name="mm"), h.make_node("Relu", ["m"], ["y"], name="relu")]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [2, 4])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)], [nh.from_array(w, "w")])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()


def test_an_if_body_reads_the_float32_value(gpu):
    """A value computed in float16 that an If's branch reads from the enclosing graph (by name,
    not as an input) is made float32 again before the If runs."""
    w = np.full((4, 4), 0.25, np.float32)
    then_g = h.make_graph([h.make_node("Relu", ["m"], ["t"], name="then_relu")], "then", [],
                          [h.make_tensor_value_info("t", T.FLOAT, [2, 4])])
    else_g = h.make_graph([h.make_node("Neg", ["m"], ["e"], name="else_neg")], "else", [],
                          [h.make_tensor_value_info("e", T.FLOAT, [2, 4])])
    # (the condition computed from x, so the If is decided at run time, not inlined while planning)
    nodes = [h.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
             h.make_node("ReduceSum", ["x"], ["sum"], name="sum", keepdims=0),
             h.make_node("Greater", ["sum", "zero"], ["c"], name="positive"),
             h.make_node("If", ["c"], ["y"], name="branch", then_branch=then_g, else_branch=else_g)]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [2, 4])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)],
                     [nh.from_array(w, "w"), nh.from_array(np.float32(0.0), "zero")])
    blob = h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()
    rng = np.random.default_rng(1)
    s = vkml.InferenceSession(blob, devices=[gpu, "cpu"], precision="fp16")
    for sign in (1.0, -1.0):
        x = (np.abs(rng.standard_normal((2, 4))) * sign).astype(np.float32)
        got = s.run(None, {"x": x})[0]
        want = np.maximum(x @ w, 0) if sign > 0 else -(x @ w)
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3)
    assert {r["node"]: r["device"] for r in s.placement()}["mm"] == gpu  # (in float16 there)
