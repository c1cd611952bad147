"""Sequence and Optional ops against onnx.reference, on small graphs chaining them."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import vkml

FAST = settings(deadline=None, max_examples=30)
DTYPES = {np.float32: TensorProto.FLOAT, np.int64: TensorProto.INT64, np.float16: TensorProto.FLOAT16}


def model(nodes, inputs, outputs, opset=21):
    g = helper.make_graph(nodes, "g", inputs, [helper.make_value_info(o, helper.TypeProto()) for o in outputs])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def tensor_in(name, x):
    return helper.make_tensor_value_info(name, DTYPES[x.dtype.type], x.shape)


def assert_same(got, want, where="output"):
    if isinstance(want, list):
        assert isinstance(got, list), f"{where}: expected a sequence, got {type(got).__name__}"
        assert len(got) == len(want), f"{where}: {len(got)} elements, expected {len(want)}"
        for k, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, f"{where}[{k}]")
    elif want is None:
        assert got is None, f"{where}: expected an empty optional"
    else:
        want = np.asarray(want)
        assert isinstance(got, np.ndarray) and got.dtype == want.dtype and got.shape == want.shape, \
            f"{where}: {getattr(got, 'dtype', None)}{getattr(got, 'shape', None)} vs {want.dtype}{want.shape}"
        np.testing.assert_array_equal(got, want, err_msg=where)


def check(m, feed):
    want = ReferenceEvaluator(m).run(None, feed)
    got = vkml.InferenceSession(m.SerializeToString(), devices=["cpu"]).run(None, feed)
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        assert_same(g, w, f"output {k}")
    return got


@st.composite
def tensors(draw, n_min=1):
    n = draw(st.integers(n_min, 4))
    dtype = draw(st.sampled_from(list(DTYPES)))
    shape = tuple(draw(st.lists(st.integers(1, 3), min_size=1, max_size=3)))
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    return [rng.integers(-9, 9, shape).astype(dtype) for _ in range(n)]


@FAST
@given(tensors(), st.data())
def test_construct_insert_erase_at_length(xs, data):
    n = len(xs)
    names = [f"x{i}" for i in range(n)]
    feed = dict(zip(names, xs))
    ins = [tensor_in(k, v) for k, v in feed.items()]
    # (onnx.reference inserts position n at the front, not at the end: see test_insert_at_end)
    pos_ins = data.draw(st.integers(-n, n - 1))
    pos_erase = data.draw(st.integers(-(n + 1), n))
    pos_at = data.draw(st.integers(-n, n - 1))
    consts = [helper.make_node("Constant", [], [f"p{i}"], value=helper.make_tensor(f"p{i}", TensorProto.INT64, [], [v]))
              for i, v in enumerate((pos_ins, pos_erase, pos_at))]
    nodes = consts + [
        helper.make_node("SequenceConstruct", names, ["s"]),
        helper.make_node("SequenceInsert", ["s", "x0", "p0"], ["s1"]),
        helper.make_node("SequenceInsert", ["s1", names[-1]], ["s2"]),  # append
        helper.make_node("SequenceErase", ["s2", "p1"], ["s3"]),
        helper.make_node("SequenceErase", ["s3"], ["s4"]),  # erase last
        helper.make_node("SequenceAt", ["s", "p2"], ["e"]),
        helper.make_node("SequenceLength", ["s4"], ["n"]),
    ]
    check(model(nodes, ins, ["s", "s1", "s2", "s3", "s4", "e", "n"]), feed)


@FAST
@given(tensors(), st.data())
def test_concat_from_sequence(xs, data):
    names = [f"x{i}" for i in range(len(xs))]
    feed = dict(zip(names, xs))
    new_axis = data.draw(st.integers(0, 1))
    r = xs[0].ndim + new_axis
    axis = data.draw(st.integers(-r, r - 1))
    nodes = [helper.make_node("SequenceConstruct", names, ["s"]),
             helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=axis, new_axis=new_axis)]
    check(model(nodes, [tensor_in(k, v) for k, v in feed.items()], ["y"]), feed)


@FAST
@given(tensors(), st.data())
def test_split_to_sequence(xs, data):
    x = xs[0]
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    n = x.shape[axis]
    kind = data.draw(st.sampled_from(["none", "scalar", "sizes"]))
    feed = {"x": x}
    ins = [tensor_in("x", x)]
    node_in = ["x"]
    if kind == "scalar":
        feed["sp"] = np.array(data.draw(st.integers(1, n)), np.int64)
    elif kind == "sizes":
        cuts = sorted(data.draw(st.lists(st.integers(0, n), max_size=3)))
        feed["sp"] = np.diff([0] + cuts + [n]).astype(np.int64)
    if kind != "none":
        ins.append(helper.make_tensor_value_info("sp", TensorProto.INT64, feed["sp"].shape))
        node_in.append("sp")
    keepdims = data.draw(st.integers(0, 1))
    nodes = [helper.make_node("SplitToSequence", node_in, ["s"], axis=axis, keepdims=keepdims)]
    check(model(nodes, ins, ["s"]), feed)


def test_insert_at_end():
    x, y = np.zeros(2, np.float32), np.ones(2, np.float32)
    nodes = [helper.make_node("Constant", [], ["p"], value=helper.make_tensor("p", TensorProto.INT64, [], [1])),
             helper.make_node("SequenceConstruct", ["x"], ["s"]),
             helper.make_node("SequenceInsert", ["s", "y", "p"], ["s1"])]
    got = vkml.InferenceSession(model(nodes, [tensor_in("x", x), tensor_in("y", y)], ["s1"]), devices=["cpu"]).run(
        None, {"x": x, "y": y})[0]
    assert_same(got, [x, y])


def test_sequence_graph_input_and_empty():
    seq_in = helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, None)
    nodes = [helper.make_node("SequenceLength", ["s"], ["n"]),
             helper.make_node("SequenceEmpty", [], ["e"], dtype=TensorProto.INT64),
             helper.make_node("SequenceLength", ["e"], ["m"])]
    m = model(nodes, [seq_in], ["n", "e", "m"])
    got = check(m, {"s": [np.zeros(2, np.float32), np.ones((3, 1), np.float32)]})
    assert got[0] == 2 and got[1] == [] and got[2] == 0
    with pytest.raises(ValueError, match="sequence"):
        vkml.InferenceSession(m, devices=["cpu"]).run(None, {"s": np.zeros(2, np.float32)})


def test_sequence_position_out_of_range():
    x = np.zeros(2, np.float32)
    nodes = [helper.make_node("Constant", [], ["p"], value=helper.make_tensor("p", TensorProto.INT64, [], [3])),
             helper.make_node("SequenceConstruct", ["x", "x"], ["s"]),
             helper.make_node("SequenceAt", ["s", "p"], ["y"])]
    sess = vkml.InferenceSession(model(nodes, [tensor_in("x", x)], ["y"]), devices=["cpu"])
    with pytest.raises(Exception, match="out of range"):
        sess.run(None, {"x": x})


@FAST
@given(tensors(), st.booleans())
def test_optional(xs, full):
    # onnx.reference's Optional ops are unreliable (an empty Optional reports an element,
    # OptionalGetElement wraps tensors in a list), so the spec's answers are spelled out here.
    x = xs[0]
    if full:
        nodes = [helper.make_node("Optional", ["x"], ["o"])]
    else:
        tp = helper.make_tensor_type_proto(DTYPES[x.dtype.type], x.shape)
        nodes = [helper.make_node("Optional", [], ["o"], type=tp)]
    nodes += [helper.make_node("OptionalHasElement", ["o"], ["h"]),
              helper.make_node("SequenceConstruct", ["x", "x"], ["s"]),
              helper.make_node("Optional", ["s"], ["os"]),
              helper.make_node("OptionalGetElement", ["os"], ["s2"]),
              helper.make_node("OptionalGetElement", ["x"], ["x2"])]  # a plain tensor passes (opset 18)
    outs = ["h", "s2", "x2", "o"]
    if full:
        nodes.append(helper.make_node("OptionalGetElement", ["o"], ["y"]))
        outs.append("y")
    got = vkml.InferenceSession(model(nodes, [tensor_in("x", x)], outs, opset=18), devices=["cpu"]).run(None, {"x": x})
    assert got[0].dtype == np.bool_ and bool(got[0]) == full
    assert_same(got[1], [x, x])
    assert_same(got[2], x)
    assert_same(got[3], x if full else None)
    if full:
        assert_same(got[4], x)


def test_optional_get_element_empty_raises():
    tp = helper.make_tensor_type_proto(TensorProto.FLOAT, [2])
    nodes = [helper.make_node("Optional", [], ["o"], type=tp), helper.make_node("OptionalGetElement", ["o"], ["y"])]
    sess = vkml.InferenceSession(model(nodes, [], ["y"], opset=18), devices=["cpu"])
    with pytest.raises(Exception, match="empty"):
        sess.run(None, {})


def test_optional_has_element_no_input():
    node = helper.make_node("OptionalHasElement", [""], ["h"])
    got = vkml.InferenceSession(model([node], [], ["h"], opset=18), devices=["cpu"]).run(None, {})
    assert got[0].dtype == np.bool_ and not got[0]
