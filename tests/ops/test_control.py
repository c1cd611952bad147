"""If and SequenceMap against onnx.reference; Loop and Scan against onnxruntime (the reference
stacks scalar scan outputs as [N, 1], fails on zero iterations and only scans axis 0 forward)."""
import os
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(__file__))
from test_sequence import assert_same, check, model, tensor_in  # noqa: E402

import vkml  # noqa: E402

FAST = settings(deadline=None, max_examples=25)
F = TensorProto.FLOAT


def check_ort(m, feed):
    ort = pytest.importorskip("onnxruntime")
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed)
    got = vkml.InferenceSession(m, devices=["cpu"]).run(None, feed)
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        if isinstance(w, np.ndarray) and w.dtype.kind == "f":
            assert g.dtype == w.dtype and g.shape == w.shape, f"output {k}: {g.dtype}{g.shape} vs {w.dtype}{w.shape}"
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
        else:
            assert_same(g, w, f"output {k}")
    return got


def vi(name, elem=F, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def _const(name, value, dtype=TensorProto.INT64):
    arr = np.asarray(value)
    return helper.make_node("Constant", [], [name], value=helper.make_tensor(name, dtype, arr.shape,
                                                                                arr.reshape(-1).tolist()))


@FAST
@given(st.booleans(), st.integers(1, 4), st.integers(0, 2**31 - 1))
def test_if_reads_outer_scope(cond, n, seed):
    rng = np.random.default_rng(seed)
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    then_g = helper.make_graph([helper.make_node("Add", ["x", "y"], ["t"])], "then", [], [vi("t")])
    # the else branch nests another If that also reads the outermost x
    inner = helper.make_graph([helper.make_node("Neg", ["x"], ["u"])], "inner", [], [vi("u")])
    inner_else = helper.make_graph([helper.make_node("Identity", ["y"], ["v"])], "inner_else", [], [vi("v")])
    else_g = helper.make_graph([helper.make_node("If", ["c"], ["e"], then_branch=inner, else_branch=inner_else)],
                               "else", [], [vi("e")])
    nodes = [helper.make_node("If", ["c"], ["out"], then_branch=then_g, else_branch=else_g)]
    ins = [vi("c", TensorProto.BOOL, []), tensor_in("x", x), tensor_in("y", y)]
    check(model(nodes, ins, ["out"]), {"c": np.array(cond), "x": x, "y": y})


def _loop_body():
    """body(i, cond, acc) -> (cond', acc + x * i, acc as a scan output, i); stops once acc > limit."""
    nodes = [
        helper.make_node("Cast", ["i"], ["fi"], to=F),
        helper.make_node("Mul", ["x", "fi"], ["xi"]),
        helper.make_node("Add", ["acc", "xi"], ["acc2"]),
        helper.make_node("ReduceSum", ["acc2"], ["tot"], keepdims=0),
        helper.make_node("Less", ["tot", "limit"], ["go"]),
        helper.make_node("Identity", ["acc"], ["scan"]),
        helper.make_node("Identity", ["i"], ["iters"]),
    ]
    return helper.make_graph(nodes, "body", [vi("i", TensorProto.INT64, []), vi("cin", TensorProto.BOOL, []),
                                             vi("acc", F, None)],
                             [vi("go", TensorProto.BOOL, []), vi("acc2", F, None), vi("scan", F, None),
                              vi("iters", TensorProto.INT64, [])])


@FAST
@given(st.integers(1, 3), st.sampled_from([None, 0, 1, 4, 7]), st.sampled_from([None, True, False]),
       st.floats(-5, 60), st.integers(0, 2**31 - 1))
def test_loop(n, trip, cond, limit, seed):
    x = np.random.default_rng(seed).uniform(0, 2, n).astype(np.float32)
    if trip is None and cond is None:
        trip = 5  # an unbounded loop needs one of the two
    feed = {"x": x, "limit": np.array(limit, np.float32), "acc0": np.zeros(n, np.float32)}
    ins = [tensor_in("x", x), vi("limit", F, []), tensor_in("acc0", feed["acc0"])]
    loop_in = ["", "", "acc0"]
    if trip is not None:
        feed["M"] = np.array(trip, np.int64)
        ins.append(vi("M", TensorProto.INT64, []))
        loop_in[0] = "M"
    if cond is not None:
        feed["C"] = np.array(cond)
        ins.append(vi("C", TensorProto.BOOL, []))
        loop_in[1] = "C"
    nodes = [helper.make_node("Loop", loop_in, ["acc_out", "scans", "iters"], body=_loop_body())]
    got = check_ort(model(nodes, ins, ["acc_out", "scans", "iters"]), feed)
    assert got[1].shape[0] == got[2].shape[0]


def test_loop_zero_iterations_scan_shape():
    nodes = [helper.make_node("Loop", ["M", "", "acc0"], ["acc_out", "scans", "iters"], body=_loop_body())]
    ins = [vi("x", F, [3]), vi("limit", F, []), vi("acc0", F, [3]), vi("M", TensorProto.INT64, [])]
    feed = {"x": np.ones(3, np.float32), "limit": np.array(9, np.float32), "acc0": np.zeros(3, np.float32),
            "M": np.array(0, np.int64)}
    got = vkml.InferenceSession(model(nodes, ins, ["acc_out", "scans", "iters"]), devices=["cpu"]).run(None, feed)
    assert_same(got[0], feed["acc0"])
    assert got[1].shape[0] == 0 and got[2].shape == (0,) and got[2].dtype == np.int64


def test_loop_sequence_carried():
    # A sequence as loop-carried value: append the iteration number each time.
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["c2"]), helper.make_node("SequenceInsert", ["s", "i"], ["s2"])],
        "body", [vi("i", TensorProto.INT64, []), vi("c", TensorProto.BOOL, []),
                 helper.make_tensor_sequence_value_info("s", TensorProto.INT64, None)],
        [vi("c2", TensorProto.BOOL, []), helper.make_tensor_sequence_value_info("s2", TensorProto.INT64, None)])
    nodes = [helper.make_node("SequenceEmpty", [], ["s0"], dtype=TensorProto.INT64),
             helper.make_node("Loop", ["M", "", "s0"], ["out"], body=body)]
    got = vkml.InferenceSession(model(nodes, [vi("M", TensorProto.INT64, [])], ["out"]), devices=["cpu"]).run(
        None, {"M": np.array(4, np.int64)})
    assert_same(got[0], [np.array(i, np.int64) for i in range(4)])


def _scan_body(n_in):
    """state += sum of the slices; outputs the running state and the first slice * 2."""
    nodes = [helper.make_node("Identity", ["s"], ["acc_in"])]
    prev = "acc_in"
    for k in range(n_in):
        nodes.append(helper.make_node("Add", [prev, f"x{k}"], [f"a{k}"]))
        prev = f"a{k}"
    nodes += [helper.make_node("Identity", [prev], ["s2"]), helper.make_node("Identity", [prev], ["y0"]),
              helper.make_node("Add", ["x0", "x0"], ["y1"])]
    return helper.make_graph(nodes, "body", [vi("s", F, None)] + [vi(f"x{k}", F, None) for k in range(n_in)],
                             [vi("s2", F, None), vi("y0", F, None), vi("y1", F, None)])


@FAST
@given(st.data())
def test_scan(data):
    n_in = data.draw(st.integers(1, 2))
    t = data.draw(st.integers(1, 4))
    w = data.draw(st.integers(1, 3))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31 - 1)))
    in_axes = [data.draw(st.integers(-2, 1)) for _ in range(n_in)]
    xs = []
    for a in in_axes:
        shape = [t, w] if a % 2 == 0 else [w, t]
        xs.append(rng.standard_normal(shape).astype(np.float32))
    attrs = {"num_scan_inputs": n_in, "scan_input_axes": in_axes,
             "scan_input_directions": [data.draw(st.integers(0, 1)) for _ in range(n_in)],
             "scan_output_axes": [data.draw(st.integers(-2, 1)) for _ in range(2)],
             "scan_output_directions": [data.draw(st.integers(0, 1)) for _ in range(2)]}
    feed = {"s0": np.zeros(w, np.float32), **{f"in{k}": x for k, x in enumerate(xs)}}
    node = helper.make_node("Scan", ["s0"] + [f"in{k}" for k in range(n_in)], ["s_final", "ys0", "ys1"],
                            body=_scan_body(n_in), **attrs)
    check_ort(model([node], [tensor_in(k, v) for k, v in feed.items()], ["s_final", "ys0", "ys1"]), feed)
    if not any(attrs["scan_input_axes"] + attrs["scan_output_axes"] + attrs["scan_input_directions"]
               + attrs["scan_output_directions"]):
        check(model([node], [tensor_in(k, v) for k, v in feed.items()], ["s_final", "ys0", "ys1"]), feed)


def test_scan8_batched_with_lengths():
    ort = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 4, 3)).astype(np.float32)
    s0 = np.zeros((2, 3), np.float32)
    lens = np.array([4, 2], np.int64)
    node = helper.make_node("Scan", ["lens", "s0", "x"], ["s_final", "ys0", "ys1"], body=_scan_body(1),
                            num_scan_inputs=1, directions=[1])
    m = model([node], [tensor_in("lens", lens), tensor_in("s0", s0), tensor_in("x", x)], ["s_final", "ys0", "ys1"],
              opset=8)
    m.ir_version = 3
    for k in range(3):
        m.graph.output[k].CopyFrom(vi(m.graph.output[k].name, F, None))
    feed = {"lens": lens, "s0": s0, "x": x}
    want = ort.InferenceSession(m.SerializeToString()).run(None, feed)
    got = vkml.InferenceSession(m, devices=["cpu"]).run(None, feed)
    for g, w_ in zip(got, want):
        assert g.shape == w_.shape
        np.testing.assert_allclose(g[0], w_[0], rtol=1e-6)  # full-length item
        np.testing.assert_allclose(g[1, :2], w_[1, :2], rtol=1e-6) if g.ndim == 3 else \
            np.testing.assert_allclose(g[1], w_[1], rtol=1e-6)


@FAST
@given(st.integers(0, 3), st.booleans(), st.integers(0, 2**31 - 1))
def test_sequence_map(n, with_tensor, seed):
    rng = np.random.default_rng(seed)
    xs = [rng.standard_normal(k + 1).astype(np.float32) for k in range(n)]
    ys = [rng.standard_normal(k + 1).astype(np.float32) for k in range(n)]
    t = rng.standard_normal(1).astype(np.float32)
    body = helper.make_graph([helper.make_node("Add", ["a", "b"], ["c"]), helper.make_node("Shape", ["a"], ["d"])],
                             "body", [vi("a"), vi("b")], [vi("c"), vi("d", TensorProto.INT64)])
    seq = helper.make_tensor_sequence_value_info
    second = "t" if with_tensor else "ys"
    node = helper.make_node("SequenceMap", ["xs", second], ["sum", "shapes"], body=body)
    ins = [seq("xs", F, None), tensor_in("t", t) if with_tensor else seq("ys", F, None)]
    feed = {"xs": xs, second: t if with_tensor else ys}
    if n == 0:  # the reference cannot type an empty result; vkml returns empty sequences
        got = vkml.InferenceSession(model([node], ins, ["sum", "shapes"], opset=17), devices=["cpu"]).run(None, feed)
        assert got == [[], []]
        return
    check(model([node], ins, ["sum", "shapes"], opset=17), feed)


def test_if_condition_must_be_scalar():
    g = helper.make_graph([_const("k", 1)], "b", [], [vi("k", TensorProto.INT64, [])])
    m = model([helper.make_node("If", ["c"], ["o"], then_branch=g, else_branch=g)],
              [vi("c", TensorProto.BOOL, [2])], ["o"])
    with pytest.raises(Exception, match="one value"):
        vkml.InferenceSession(m, devices=["cpu"]).run(None, {"c": np.array([True, False])})
