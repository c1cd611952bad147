"""vkml/inference.py: load-time checks of the graph's types (issue #19: an input with no type)."""
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
        vkml.InferenceSession(model)


def test_typed_inputs_and_initializers_without_a_graph_input_type_load():
    """An overridable initializer takes its type from the initializer; untyped outputs are fine."""
    w = onnx.numpy_helper.from_array(np.ones(2, np.float32), "w")
    g = h.make_graph([h.make_node("Add", ["x", "w"], ["y"], name="a")], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [2]), onnx.ValueInfoProto(name="w")],
                     [h.make_value_info("y", onnx.TypeProto())], [w])
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()
    out = vkml.InferenceSession(model).run(None, {"x": np.zeros(2, np.float32)})[0]
    np.testing.assert_array_equal(out, [1, 1])
