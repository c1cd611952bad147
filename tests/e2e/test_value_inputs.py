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


def _float_loop() -> bytes:
    """Range's function expansion around data: steps = Ceil((limit - start) / delta) computed
    from fed float scalars is a Loop's trip count (its condition: steps cast to bool); the body
    carries h = h * 0.5 + x (x: a fed [2, 3] tensor) and stacks each step's h."""
    vi = helper.make_tensor_value_info
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond"], ["cond_out"]),
         helper.make_node("Mul", ["h", "half"], ["hh"]),
         helper.make_node("Add", ["hh", "x"], ["h_out"]),
         helper.make_node("Identity", ["h_out"], ["scan"])],
        "body", [vi("i", T.INT64, []), vi("cond", T.BOOL, []), vi("h", T.FLOAT, [2, 3])],
        [vi("cond_out", T.BOOL, []), vi("h_out", T.FLOAT, [2, 3]), vi("scan", T.FLOAT, [2, 3])],
        [helper.make_tensor("half", T.FLOAT, [], [0.5])])
    nodes = [helper.make_node("Sub", ["limit", "start"], ["span"], name="span"),
             helper.make_node("Div", ["span", "delta"], ["q"], name="q"),
             helper.make_node("Ceil", ["q"], ["c"], name="ceil"),
             helper.make_node("Relu", ["c"], ["steps_f"], name="relu"),
             helper.make_node("Cast", ["steps_f"], ["steps"], name="steps", to=T.INT64),
             helper.make_node("Cast", ["steps_f"], ["go"], name="go", to=T.BOOL),
             helper.make_node("Loop", ["steps", "go", "h0"], ["h", "hs"], name="loop", body=body)]
    g = helper.make_graph(nodes, "g", [vi(n, T.FLOAT, []) for n in ("start", "limit", "delta")]
                          + [vi("x", T.FLOAT, [2, 3]), vi("h0", T.FLOAT, [2, 3])],
                          [vi("h", T.FLOAT, [2, 3]), vi("hs", T.FLOAT, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()


def test_loop_trip_count_from_float_inputs_unrolls(gpu):
    """A Loop's trip count and condition decide its scan output's length as Range's bounds
    decide Range's, so the float inputs they are computed from are plan values too: the count
    is folded while planning, the Loop unrolls and its steps run on the GPU (it ran on the CPU
    before, its count computed on the GPU and read back every run)."""
    model = _float_loop()
    sess = vkml.InferenceSession(model, devices=[gpu])
    ref = vkml.InferenceSession(model, devices=["cpu"])
    assert set(_value_inputs(sess._gpu.graph)) == {"start", "limit", "delta"}  # not x, h0 (data)
    rng = np.random.default_rng(3)
    for start, limit, delta in ((0.0, 3.0, 1.0), (1.0, 5.0, 2.0), (2.0, 1.0, 1.0), (0.0, 3.0, 1.0)):
        feed = {"start": np.float32(start), "limit": np.float32(limit), "delta": np.float32(delta),
                "x": rng.standard_normal((2, 3), dtype=np.float32),
                "h0": rng.standard_normal((2, 3), dtype=np.float32)}
        got, want = sess.run(None, feed), ref.run(None, feed)
        for g_, w_ in zip(got, want):
            np.testing.assert_array_equal(g_, w_)
        rows = sess.placement()
        assert not [r for r in rows if r["device"] == "cpu" and not r["reason"].startswith("constant")], rows
        if limit > start:  # (no steps: the stack is empty and h is h0, nothing to dispatch)
            assert any(r["device"] == gpu and r.get("pipelines") for r in rows), rows


def test_inputs_read_inside_an_if_branch_are_plan_values(gpu):
    """As AffineGrid's function expansion does: a fed size (int64 [2]) is split into h and w
    inside the branches of an If whose condition is known (Size(size) == 2), and h, w make a
    ConstantOfShape's shape: `size` reaches that shape only through what the branches read,
    and is a plan value all the same, so everything after the If has static shapes and runs on
    the GPU (it ran on the CPU before, shapes unknown)."""
    vi = helper.make_tensor_value_info
    split = lambda tag: helper.make_graph(  # noqa: E731
        [helper.make_node("Split", ["size"], [f"h_{tag}", f"w_{tag}"], axis=0, num_outputs=2)],
        tag, [], [vi(f"h_{tag}", T.INT64, [1]), vi(f"w_{tag}", T.INT64, [1])])
    nodes = [helper.make_node("Size", ["size"], ["n"], name="n"),
             helper.make_node("Equal", ["n", "two"], ["is2"], name="is2"),
             helper.make_node("If", ["is2"], ["h", "w"], name="if", then_branch=split("then"),
                              else_branch=split("else")),
             helper.make_node("Concat", ["h", "w"], ["hw"], name="hw", axis=0),
             helper.make_node("ConstantOfShape", ["hw"], ["z"], name="zeros",
                              value=helper.make_tensor("v", T.FLOAT, [1], [1.5])),
             helper.make_node("Add", ["z", "x"], ["y"], name="add")]
    g = helper.make_graph(nodes, "g", [vi("size", T.INT64, [2]), vi("x", T.FLOAT, [1])], [vi("y", T.FLOAT, None)],
                          [helper.make_tensor("two", T.INT64, [], [2])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]).SerializeToString()
    sess = vkml.InferenceSession(model, devices=[gpu])
    assert _value_inputs(sess._gpu.graph) == ("size",)
    for size in ((2, 3), (4, 1), (2, 3)):
        x = np.array([0.25], np.float32)
        got = sess.run(None, {"size": np.array(size, np.int64), "x": x})[0]
        np.testing.assert_array_equal(got, np.full(size, 1.75, np.float32))
        rows = {r["node"]: r for r in sess.placement()}
        assert rows["add"]["device"] == gpu and rows["add"].get("pipelines"), rows["add"]
        assert not [r for r in rows.values() if r["device"] == "cpu" and not r["reason"].startswith(("constant", "inlined"))], rows
