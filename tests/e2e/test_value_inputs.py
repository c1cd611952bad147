"""Graph inputs whose values the plans are made for (vkml/runtime/gpurun.py _value_inputs):
those a GPU kernel needs on the host directly, and small integer inputs that shape arithmetic
turns into such values (a target shape fed as an input, made into Pad's pads): planning folds
the arithmetic and the Pad runs on the GPU, one plan per value; and inputs whose values decide
an output's shape (Range's bounds: Op.shape_from_values), evaluated while planning. Never a
float input that only feeds data, nor an input read only through Shape."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto as T
from onnx import helper

import vkml
from vkml.runtime.gpurun import _value_inputs


def _pad_to() -> bytes:
    """y = Pad(x, pads = [0, 0, target - shape(x)]) + bias: `target` (int64 [2]) reaches Pad's
    pads through Shape/Sub/Concat; `bias` (float [1]) is data; `z` is read only by Shape."""
    vi = helper.make_tensor_value_info
    nodes = [helper.make_node("Shape", ["x"], ["sx"], name="shape"),
             helper.make_node("Sub", ["target", "sx"], ["grow"], name="grow"),
             helper.make_node("Shape", ["z"], ["sz"], name="shape_z"),
             helper.make_node("Sub", ["grow", "sz"], ["grow2"], name="grow2"),
             helper.make_node("Concat", ["zeros", "grow2"], ["pads"], name="pads", axis=0),
             helper.make_node("Pad", ["x", "pads"], ["p"], name="pad"),
             helper.make_node("Add", ["p", "bias"], ["y"], name="add")]
    g = helper.make_graph(nodes, "g", [vi("x", T.FLOAT, [3, 4]), vi("target", T.INT64, [2]), vi("bias", T.FLOAT, [1]),
                                       vi("z", T.INT64, [1, 1])],
                          [vi("y", T.FLOAT, None)], [helper.make_tensor("zeros", T.INT64, [2], [0, 0])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()


def test_shape_arithmetic_inputs_are_plan_values(gpu):
    model = _pad_to()
    sess = vkml.InferenceSession(model, devices=[gpu])
    assert _value_inputs(sess._gpu.graph) == ("target",)  # not bias (float data), not z (a shape)
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for target in ([4, 6], [5, 5], [7, 9], [4, 6]):
        feed = {"x": x, "target": np.array(target, np.int64), "bias": np.array([0.5], np.float32),
                "z": np.zeros((1, 1), np.int64)}
        got = sess.run(None, feed)[0]
        want = np.pad(x, [(0, target[0] - 4), (0, target[1] - 5)]) + 0.5
        np.testing.assert_array_equal(got, want)
        rows = {r["node"]: r["device"] for r in sess.placement()}
        assert rows["pad"] == gpu and rows["add"] == gpu, rows


def test_fed_range_bounds_are_evaluated_while_planning(gpu):
    """positions = Range(0, n, 1) with `n` fed (int64 scalar), then an embedding Gather from a
    fed table: `n` decides Range's shape by its value (Op.shape_from_values), so the plans are
    made per value, Range is evaluated while planning and the Gather runs on the GPU without a
    CPU node before it."""
    vi = helper.make_tensor_value_info
    emb = np.arange(80, dtype=np.float32).reshape(10, 8)
    nodes = [helper.make_node("Range", ["zero", "n", "one"], ["pos"], name="range"),
             helper.make_node("Gather", ["emb", "pos"], ["y"], name="embed", axis=0)]
    g = helper.make_graph(nodes, "g", [vi("n", T.INT64, []), vi("emb", T.FLOAT, [10, 8])], [vi("y", T.FLOAT, None)],
                          [helper.make_tensor("zero", T.INT64, [], [0]), helper.make_tensor("one", T.INT64, [], [1])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    sess = vkml.InferenceSession(model, devices=[gpu])
    assert _value_inputs(sess._gpu.graph) == ("n",)
    for n in (3, 7, 1, 3):
        np.testing.assert_array_equal(sess.run(None, {"n": np.array(n, np.int64), "emb": emb})[0], emb[:n])
        rows = {r["node"]: r for r in sess.placement()}
        assert rows["embed"]["device"] == gpu, rows
        assert rows["range"]["reason"].startswith("constant for these input shapes"), rows["range"]
