"""vkml/ir/inference.py: load-time checks of the graph's types (issue #19: an input with no type)."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import vkml
from vkml.errors import ModelError

UNTYPED = {
    "no type": onnx.ValueInfoProto(name="x"),
    "empty TypeProto": h.make_value_info("x", onnx.TypeProto()),
    "element type 0": h.make_tensor_value_info("x", T.UNDEFINED, [2]),
}


@pytest.mark.parametrize("case", sorted(UNTYPED))
def test_an_input_without_a_type_is_a_model_error(case):
    g = h.make_graph([h.make_node("Relu", ["x"], ["y"], name="r")], "g", [UNTYPED[case]],
                     [h.make_tensor_value_info("y", T.FLOAT, None)])
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()
    with pytest.raises(ModelError, match="graph input 'x' has no type"):
        vkml.InferenceSession(model, devices=["cpu"])


def test_typed_inputs_and_initializers_without_a_graph_input_type_load():
    """An overridable initializer takes its type from the initializer; untyped outputs are fine."""
    w = onnx.numpy_helper.from_array(np.ones(2, np.float32), "w")
    g = h.make_graph([h.make_node("Add", ["x", "w"], ["y"], name="a")], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [2]), onnx.ValueInfoProto(name="w")],
                     [h.make_value_info("y", onnx.TypeProto())], [w])
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()
    out = vkml.InferenceSession(model, devices=["cpu"]).run(None, {"x": np.zeros(2, np.float32)})[0]
    np.testing.assert_array_equal(out, [1, 1])


def test_a_scalar_gather_of_a_shape_folds_while_planning():
    """Shape -> Gather(0-d index) -> Range -> Gather: the GPT-2 position ids (tests/zoo). The
    scalar Gather returned a NumPy scalar, not an array, so planning did not fold it, and Range,
    the position Gather and everything after it stayed on the CPU with unknown shapes."""
    from vkml.ir.graph import TensorDesc
    from vkml.ops.bind import load_model
    from vkml.compile.specialize import concretize

    n = h.make_node
    inits = [onnx.numpy_helper.from_array(np.array(v, np.int64), k) for k, v in (("one", 1), ("zero", 0))]
    inits.append(onnx.numpy_helper.from_array(np.arange(32, dtype=np.float32).reshape(16, 2), "wpe"))
    g = h.make_graph([n("Shape", ["x"], ["s"], name="shape"),
                      n("Gather", ["s", "one"], ["seq"], name="seq", axis=0),
                      n("Range", ["zero", "seq", "one"], ["pos"], name="range"),
                      n("Gather", ["wpe", "pos"], ["pe"], name="pos_embed", axis=0),
                      n("Add", ["x", "pe"], ["y"], name="add")], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, ["B", "S", 2])],
                     [h.make_tensor_value_info("y", T.FLOAT, ["B", "S", 2])], inits)
    blob = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8).SerializeToString()
    m = load_model(blob)
    c = concretize(m.graph, m.weights, {"x": TensorDesc(np.dtype(np.float32), (3, 5, 2))})
    assert {"s", "seq", "pos", "pe"} <= c.folded
    assert isinstance(c.consts["seq"], np.ndarray) and c.consts["seq"].shape == () and c.consts["seq"] == 5
    assert [nd.name for nd in c.live] == ["add"]
    (v,) = m.graph.nodes[1].op.run(np.array([3, 5]), np.array(1))
    assert isinstance(v, np.ndarray)
    x = np.random.default_rng(0).standard_normal((3, 5, 2)).astype(np.float32)
    sess = vkml.InferenceSession(blob, devices=["cpu"])
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], x + np.arange(10, dtype=np.float32).reshape(5, 2))
