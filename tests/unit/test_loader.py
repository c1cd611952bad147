"""Loading: zero-copy initializers, external data, constants, validation errors that name the node."""
import numpy as np
import onnx
import pytest
from hypothesis import given, settings, strategies as st
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

import vkml
from vkml.ops.bind import load_model


def model(nodes, inputs, outputs, inits=(), opset=17, ir=8, **kw):
    g = h.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)], **kw)
    m.ir_version = ir
    return m


X = h.make_tensor_value_info("x", T.FLOAT, ["N", 3])
Y = h.make_tensor_value_info("y", T.FLOAT, None)


def add_model():
    w = numpy_helper.from_array(np.arange(3, dtype=np.float32), "w")
    return model([h.make_node("Add", ["x", "w"], ["y"], name="add")], [X], [Y], [w])


def test_initializer_is_read_only_view_over_model_bytes():
    m = load_model(add_model())
    w = m.weights["w"]
    assert not w.flags.writeable and not w.flags.owndata
    assert isinstance(w.base, (bytes, memoryview)) or w.base is not None
    np.testing.assert_array_equal(w, [0, 1, 2])


def test_external_data_is_read_into_private_memory(tmp_path):
    arr = np.arange(12, dtype=np.float32)
    (tmp_path / "w.bin").write_bytes(b"\0" * 16 + arr.tobytes())
    t = onnx.TensorProto(name="w", data_type=T.FLOAT, dims=[3, 4], data_location=T.EXTERNAL)
    for k, v in (("location", "w.bin"), ("offset", "16"), ("length", str(arr.nbytes))):
        t.external_data.add(key=k, value=v)
    m = model([h.make_node("Identity", ["w"], ["y"])], [], [Y], [t])
    path = tmp_path / "m.onnx"
    path.write_bytes(m.SerializeToString())
    loaded = load_model(str(path))
    w = loaded.weights["w"]
    assert not isinstance(w.base, np.memmap) and not isinstance(w, np.memmap)  # issue #19: no mapping
    assert not w.flags.writeable
    np.testing.assert_array_equal(w, arr.reshape(3, 4))


def test_external_data_outside_folder_is_refused(tmp_path):
    t = onnx.TensorProto(name="w", data_type=T.FLOAT, dims=[1], data_location=T.EXTERNAL)
    t.external_data.add(key="location", value="../../etc/passwd")
    m = model([h.make_node("Identity", ["w"], ["y"])], [], [Y], [t])
    (tmp_path / "m.onnx").write_bytes(m.SerializeToString())
    with pytest.raises(vkml.ModelError, match="leaves the model's folder"):
        load_model(str(tmp_path / "m.onnx"))


def test_constant_nodes_are_folded():
    c = h.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.float32([1, 2, 3])))
    m = load_model(model([c, h.make_node("Add", ["x", "c"], ["y"])], [X], [Y]))
    assert [n.op_type for n in m.graph.nodes] == ["Add"]
    assert "c" in m.graph.constants and m.weights["c"].tolist() == [1, 2, 3]


def test_overridable_initializer_defaults_and_can_be_fed():
    w = numpy_helper.from_array(np.float32([1, 1, 1]), "w")
    winfo = h.make_tensor_value_info("w", T.FLOAT, [3])
    s = vkml.InferenceSession(model([h.make_node("Add", ["x", "w"], ["y"])], [X, winfo], [Y], [w]), devices=["cpu"])
    assert [a.name for a in s.get_inputs()] == ["x"]
    assert [a.name for a in s.get_overridable_initializers()] == ["w"]
    x = np.zeros((2, 3), np.float32)
    np.testing.assert_array_equal(s.run(None, {"x": x})[0], np.ones((2, 3)))
    np.testing.assert_array_equal(s.run(None, {"x": x, "w": np.float32([5, 6, 7])})[0][0], [5, 6, 7])


def test_nodes_out_of_order_are_sorted():
    nodes = [h.make_node("Add", ["t", "x"], ["y"], name="second"), h.make_node("Add", ["x", "x"], ["t"], name="first")]
    m = load_model(model(nodes, [X], [Y]))
    assert [n.name for n in m.graph.nodes] == ["first", "second"]


@pytest.mark.parametrize(
    "nodes, match",
    [
        ([h.make_node("Add", ["x", "ghost"], ["y"], name="n1")], r"'n1'.*'ghost'"),
        ([h.make_node("Add", ["x", "x"], ["y"], name="a"), h.make_node("Add", ["x", "x"], ["y"], name="b")],
         r"'b'.*already produced by 'a'"),
        ([h.make_node("Add", ["x", "t2"], ["t1"], name="p"), h.make_node("Add", ["t1", "x"], ["t2"], name="q"),
          h.make_node("Add", ["t1", "t2"], ["y"], name="r")], r"cycle"),
        ([h.make_node("Add", ["x", "x"], ["y"], name="d", domain="com.example")], r"'d'.*unknown domain"),
    ],
)
def test_invalid_graphs_name_the_node(nodes, match):
    with pytest.raises(vkml.ModelError, match=match):
        vkml.InferenceSession(model(nodes, [X], [Y]), devices=["cpu"])


def test_output_produced_by_nobody():
    with pytest.raises(vkml.ModelError, match="'y'"):
        vkml.InferenceSession(model([h.make_node("Add", ["x", "x"], ["z"])], [X], [Y]), devices=["cpu"])


@pytest.mark.parametrize("ir, opset, match", [(99, 17, "IR version 99"), (8, 999, "opset 999")])
def test_versions_out_of_range(ir, opset, match):
    with pytest.raises(vkml.ModelError, match=match):
        vkml.InferenceSession(model([h.make_node("Add", ["x", "x"], ["y"])], [X], [Y], opset=opset, ir=ir),
                              devices=["cpu"])


def test_every_unsupported_op_is_listed_with_node_names():
    nodes = [
        h.make_node("NoSuchOpA", ["x"], ["a"], name="first_a"),
        h.make_node("NoSuchOpB", ["a"], ["b"], name="only_b"),
        h.make_node("NoSuchOpA", ["b"], ["y"], name="second_a"),
    ]
    with pytest.raises(vkml.UnsupportedOpsError) as e:
        vkml.InferenceSession(model(nodes, [X], [Y]), devices=["cpu"])
    msg = str(e.value)
    assert "NoSuchOpA" in msg and "NoSuchOpB" in msg
    assert all(n in msg for n in ("first_a", "second_a", "only_b"))
    assert len(e.value.missing) == 2


def test_unsupported_ops_of_subgraphs_are_listed_with_the_others():
    """Binding (vkml/ops/bind.py) walks the subgraphs too: one error names them all."""
    then = h.make_graph([h.make_node("NoSuchOpC", ["x"], ["t"], name="in_then")], "then", [],
                        [h.make_tensor_value_info("t", T.FLOAT, None)])
    other = h.make_graph([h.make_node("Neg", ["x"], ["o"], name="in_else")], "else", [],
                         [h.make_tensor_value_info("o", T.FLOAT, None)])
    nodes = [h.make_node("NoSuchOpA", ["x"], ["c"], name="top"),
             h.make_node("If", ["c"], ["y"], name="if", then_branch=then, else_branch=other)]
    with pytest.raises(vkml.UnsupportedOpsError) as e:
        load_model(model(nodes, [X], [Y]))
    assert set(e.value.missing) == {("", "NoSuchOpA", 17), ("", "NoSuchOpC", 17)}
    assert e.value.missing[("", "NoSuchOpC", 17)] == ["in_then"]


def test_the_loader_reads_unbound_and_bind_gives_operators_and_types():
    """ir reads (no operator known: Node.op None, only declared types); ops bind and infer."""
    from vkml.ir.onnx_loader import read_model
    from vkml.ops.bind import bind
    from vkml.ops.arith import Add

    m = read_model(add_model())
    (node,) = m.graph.nodes
    assert node.op is None and m.graph.values["y"].shape is None
    assert bind(m) is m
    assert isinstance(node.op, Add) and m.graph.values["y"].shape == ("N", 3)


def test_missing_required_attribute_and_unknown_attribute():
    # Gemm has no required attributes; use an invented attribute on Add instead.
    with pytest.raises(vkml.ModelError, match="unknown attribute"):
        vkml.InferenceSession(model([h.make_node("Add", ["x", "x"], ["y"], name="n", bogus=1)], [X], [Y]),
                              devices=["cpu"])


def test_model_from_path_bytes_and_proto(tmp_path):
    m = add_model()
    p = tmp_path / "m.onnx"
    p.write_bytes(m.SerializeToString())
    x = np.ones((1, 3), np.float32)
    outs = [vkml.InferenceSession(src, devices=["cpu"]).run(None, {"x": x})[0]
            for src in (m, m.SerializeToString(), str(p), p)]
    for o in outs:
        np.testing.assert_array_equal(o, [[1, 2, 3]])


def test_missing_file():
    with pytest.raises(vkml.ModelError, match="cannot read"):
        vkml.InferenceSession("/nonexistent/model.onnx", devices=["cpu"])


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=2000))
def test_random_bytes_are_a_model_error(data):
    try:
        vkml.InferenceSession(data, devices=["cpu"])
    except vkml.ModelError:
        pass


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_truncated_or_corrupted_model_is_a_model_error(data):
    raw = bytearray(add_model().SerializeToString())
    cut = data.draw(st.integers(0, len(raw) - 1))
    raw = raw[:cut]
    for _ in range(data.draw(st.integers(0, 3))):
        if raw:
            i = data.draw(st.integers(0, len(raw) - 1))
            raw[i] = data.draw(st.integers(0, 255))
    try:
        s = vkml.InferenceSession(bytes(raw), devices=["cpu"])
    except vkml.ModelError:
        return
    # It parsed into something valid: it must then run or fail with a clean Python error.
    try:
        s.run(None, {a.name: np.ones([d if isinstance(d, int) else 1 for d in a.shape or []], np.float32)
                     for a in s.get_inputs()})
    except (ValueError, RuntimeError):
        pass


def test_path_initializers_are_views_into_one_private_copy_of_the_file(tmp_path):
    import mmap

    big = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    w = numpy_helper.from_array(big, "w")
    m = model([h.make_node("Add", ["x", "w"], ["y"])], [h.make_tensor_value_info("x", T.FLOAT, [64, 64])], [Y], [w])
    p = tmp_path / "m.onnx"
    p.write_bytes(m.SerializeToString())
    loaded = load_model(str(p))
    arr = loaded.weights["w"]
    base = arr
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    if isinstance(base, memoryview):
        base = base.obj
    assert isinstance(base, mmap.mmap), type(base)  # the anonymous buffer the file was read into
    assert loaded.weights["w"].base is not None  # a view: the file is copied once, not per tensor
    np.testing.assert_array_equal(arr, big)
    # bytes input: a view over the caller's bytes, no copy.
    raw = m.SerializeToString()
    arr2 = load_model(raw).weights["w"]
    assert np.shares_memory(arr2, np.frombuffer(raw, np.uint8))


def test_sibling_subgraphs_may_reuse_an_initializer_name():
    def branch(value):
        c = numpy_helper.from_array(np.float32([value]), "k")
        return h.make_graph([h.make_node("Identity", ["k"], ["o"])], f"b{value}", [],
                            [h.make_tensor_value_info("o", T.FLOAT, [1])], [c])

    cond = h.make_tensor_value_info("c", T.BOOL, [])
    node = h.make_node("If", ["c"], ["y"], then_branch=branch(1), else_branch=branch(2))
    s = vkml.InferenceSession(model([node], [cond], [Y]), devices=["cpu"])
    assert s.run(None, {"c": np.array(True)})[0].tolist() == [1]
    assert s.run(None, {"c": np.array(False)})[0].tolist() == [2]
