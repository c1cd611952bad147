"""Placement rows count the GPU commands each node recorded (`gpu_commands`: dispatches,
buffer copies and fills), so a node done as copies (Concat, Split) shows as GPU work, while
a view (Reshape) that records nothing shows none."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

import vkml


def test_copies_count_views_do_not(gpu):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [24])
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, [3, 4])
    shape = onnx.numpy_helper.from_array(np.array([24], np.int64), "shape")
    g = helper.make_graph([
        helper.make_node("Concat", ["x", "x"], ["c"], axis=0, name="concat"),
        helper.make_node("Reshape", ["c", "shape"], ["y"], name="reshape"),
        helper.make_node("Relu", ["x"], ["z"], name="relu"),
    ], "g", [x], [y, z], initializer=[shape])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)
    sess = vkml.InferenceSession(model, devices=[gpu])
    a = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    y_, z_ = sess.run(None, {"x": a})
    np.testing.assert_array_equal(y_, np.concatenate([a, a]).reshape(24))
    np.testing.assert_array_equal(z_, np.maximum(a, 0))
    rows = {r["node"]: r for r in sess.placement()}
    assert all(r["device"] == gpu for r in rows.values()), rows
    assert rows["concat"].get("gpu_commands") == 2 and not rows["concat"].get("pipelines"), rows["concat"]
    assert not rows["reshape"].get("gpu_commands") and not rows["reshape"].get("pipelines"), rows["reshape"]
    assert rows["relu"].get("gpu_commands") == 1 and len(rows["relu"]["pipelines"]) == 1, rows["relu"]
