"""Ifs on data conditions in GPU sessions (vkml/compile/guards.py): the condition is computed
by a plan of its own and read back, and the run takes the plan made for its value, the If
replaced by the branch it takes, on the GPU. Every result equals the CPU device's."""
from __future__ import annotations

import numpy as np
import onnx
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from onnx import TensorProto as T
from onnx import helper

import vkml
from _threads import hammer
from vkml.compile import guards

vi = helper.make_tensor_value_info
SHAPE = [4, 8]
_RECIPE = st.lists(st.tuples(st.sampled_from(["Relu", "Neg", "Abs", "Add", "Sub", "Mul", "Max", "AddBias", "MulScalar",
                                              "MatMul", "ReshapeRelu", "TransposeTwice", "Softmax", "Where"]),
                             st.integers(0, 7), st.integers(0, 7), st.integers(0, 7)), min_size=1, max_size=5)


def _branch(name: str, nodes: list, out: str, inits=()) -> "helper.GraphProto":
    return helper.make_graph(nodes, name, [], [vi(out, T.FLOAT, SHAPE)], list(inits))


def _model(nodes, inputs=("x",), outputs=("z",), inits=(), cond_type=None) -> bytes:
    g = helper.make_graph(nodes, "g", [vi(n, T.FLOAT, SHAPE) for n in inputs],
                          [vi(n, T.FLOAT, SHAPE) for n in outputs], list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()


def _sign_if(cond_op: str = "Greater") -> bytes:
    """z = If(ReduceSum(x) > 0, Relu(x) * 2, x - 1) + x."""
    then = _branch("then", [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Mul", ["r", "two"], ["t"])],
                   "t", [helper.make_tensor("two", T.FLOAT, [], [2.0])])
    els = _branch("else", [helper.make_node("Sub", ["x", "one"], ["e"])], "e", [helper.make_tensor("one", T.FLOAT, [], [1.0])])
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], name="sum", keepdims=0),
             helper.make_node(cond_op, ["s", "zero"], ["c"], name="cond"),
             helper.make_node("If", ["c"], ["y"], name="if", then_branch=then, else_branch=els),
             helper.make_node("Add", ["y", "x"], ["z"], name="add")]
    return _model(nodes, inits=[helper.make_tensor("zero", T.FLOAT, [], [0.0])])


def _rows(sess) -> dict:
    return {r["node"]: r for r in sess.placement()}


def _check(sess, ref, feed) -> None:
    for got, want in zip(sess.run(None, feed), ref.run(None, feed)):
        np.testing.assert_array_equal(got, want)


def test_data_condition_runs_its_branch_on_the_gpu(gpu):
    model = _sign_if()
    sess = vkml.InferenceSession(model, devices=[gpu])
    ref = vkml.InferenceSession(model, devices=["cpu"])
    rng = np.random.default_rng(0)
    taken = set()
    for i in range(6):
        x = rng.standard_normal(SHAPE, dtype=np.float32) + (2.0 if i % 2 else -2.0)
        _check(sess, ref, {"x": x})
        rows = _rows(sess)
        assert not [r for r in rows.values() if r["device"] == "cpu"], rows
        assert "a guard" in rows["if"]["reason"] and rows["if"].get("pipelines"), rows["if"]
        assert rows["sum"].get("pipelines") and "a guard" in rows["sum"]["reason"], rows["sum"]
        taken.add(rows["if"]["reason"].split("its ")[-1].split(" runs")[0])
    assert taken == {"then_branch", "else_branch"}
    # the base plan, the conditions' plan and one plan per branch: no new plan once both were taken
    plans = set(map(id, sess._gpu._plans.values()))
    assert len(plans) == 4
    for i in range(4):
        _check(sess, ref, {"x": rng.standard_normal(SHAPE, dtype=np.float32) + (2.0 if i % 2 else -2.0)})
    assert set(map(id, sess._gpu._plans.values())) == plans


def test_nested_data_conditions(gpu):
    """An If on data inside the branch of another: found when that branch is planned, and
    resolved in a second round; each of the three paths equals the CPU device."""
    inner_then = _branch("it", [helper.make_node("Neg", ["x"], ["n"])], "n")
    inner_else = _branch("ie", [helper.make_node("Abs", ["x"], ["a"])], "a")
    then = _branch("then", [helper.make_node("ReduceMax", ["x"], ["m"], keepdims=0),
                            helper.make_node("Greater", ["m", "three"], ["c2"]),
                            helper.make_node("If", ["c2"], ["t"], then_branch=inner_then, else_branch=inner_else)],
                   "t", [helper.make_tensor("three", T.FLOAT, [], [3.0])])
    els = _branch("else", [helper.make_node("Mul", ["x", "x"], ["e"])], "e")
    nodes = [helper.make_node("ReduceMean", ["x"], ["s"], name="mean", keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["c"], name="cond"),
             helper.make_node("If", ["c"], ["z"], name="if", then_branch=then, else_branch=els)]
    model = _model(nodes, inits=[helper.make_tensor("zero", T.FLOAT, [], [0.0])])
    sess = vkml.InferenceSession(model, devices=[gpu])
    ref = vkml.InferenceSession(model, devices=["cpu"])
    base = np.linspace(-1, 1, 32, dtype=np.float32).reshape(SHAPE)
    for x in (base + 0.5, base * 5 + 0.5, base - 0.5, base + 0.5):  # then/else inside, then, else
        _check(sess, ref, {"x": x})
        rows = _rows(sess)
        assert rows["if"]["device"] == gpu and "a guard" in rows["if"]["reason"], rows["if"]


def test_shared_nodes_past_the_bound_keep_the_if_on_the_cpu(gpu, monkeypatch):
    """Where the condition and the rest share nodes beyond GUARD_SHARED_MAX elements (they would
    run twice), the If stays on the CPU as before, with the same results."""
    monkeypatch.setattr(guards, "GUARD_SHARED_MAX", 8)
    then = _branch("then", [helper.make_node("Mul", ["h", "h"], ["t"])], "t")
    els = _branch("else", [helper.make_node("Neg", ["h"], ["e"])], "e")
    nodes = [helper.make_node("Relu", ["x"], ["h"], name="relu"),  # 32 elements, read by the condition and the branches
             helper.make_node("ReduceSum", ["h"], ["s"], name="sum", keepdims=0),
             helper.make_node("Greater", ["s", "ten"], ["c"], name="cond"),
             helper.make_node("If", ["c"], ["z"], name="if", then_branch=then, else_branch=els)]
    model = _model(nodes, inits=[helper.make_tensor("ten", T.FLOAT, [], [10.0])])
    sess = vkml.InferenceSession(model, devices=[gpu])
    ref = vkml.InferenceSession(model, devices=["cpu"])
    x = np.linspace(-3, 3, 32, dtype=np.float32).reshape(SHAPE)
    _check(sess, ref, {"x": x})
    assert _rows(sess)["if"]["device"] == "cpu"
    monkeypatch.setattr(guards, "GUARD_SHARED_MAX", 1 << 20)
    sess = vkml.InferenceSession(model, devices=[gpu])
    for k in (1.0, -1.0):
        _check(sess, ref, {"x": x * k})
        assert _rows(sess)["if"]["device"] == gpu


def test_threads_with_both_branches(gpu):
    """Eight threads on one session, each alternating between the branches: every result is
    its own input's."""
    model = _sign_if()
    sess = vkml.InferenceSession(model, devices=[gpu])
    ref = vkml.InferenceSession(model, devices=["cpu"])
    rng = np.random.default_rng(1)
    feeds = [rng.standard_normal(SHAPE, dtype=np.float32) + (2.0 if i % 2 else -2.0) for i in range(16)]
    cases = [(x, ref.run(None, {"x": x})[0]) for x in feeds]
    errors = hammer(sess, cases, threads=8, runs=12, compare=np.testing.assert_array_equal)
    assert not errors, errors[:3]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shift=st.floats(-3, 3), scale=st.floats(0.01, 4), op=st.sampled_from(["Greater", "Less", "Equal"]),
       seed=st.integers(0, 2**31))
def test_conditions_from_data_equal_the_cpu(gpu, shift, scale, op, seed):
    """Drawn data around the condition's edge (Equal: mostly false, true where the sum is 0)."""
    model = _sign_if(op)
    x = (np.random.default_rng(seed).standard_normal(SHAPE) * scale + shift).astype(np.float32)
    if seed % 5 == 0:
        x = np.zeros(SHAPE, np.float32)  # the sum exactly 0: Equal true, Greater/Less false
    sess = vkml.InferenceSession(model, devices=[gpu])
    ref = vkml.InferenceSession(model, devices=["cpu"])
    _check(sess, ref, {"x": x})
    assert _rows(sess)["if"]["device"] == gpu


def test_warmup_prepares_both_branches(gpu):
    """warmup() makes the conditions' plan and one plan per value of the guard, slots
    recorded: the first runs of both branches compile and record nothing more."""
    model = _sign_if()
    sess = vkml.InferenceSession(model, devices=[gpu])  # (static shapes: warmed up at creation)
    runner = sess._gpu
    plans = dict(runner._plans)
    assert len(plans) == 4 and all(cp.pool._free for cp in plans.values() if cp.guards == ()), plans
    ref = vkml.InferenceSession(model, devices=["cpu"])
    for sign in (1.0, -1.0):
        _check(sess, ref, {"x": np.full(SHAPE, sign, np.float32)})
    assert dict(runner._plans) == plans  # no plan made by the runs
    assert sum(len(cp.pool._free) for cp in plans.values()) == 3  # conditions, then, else: one slot each


def _renamed(model: bytes, prefix: str, outer: dict[str, str]) -> tuple[list, list, list[str]]:
    """A tests/e2e/_graphs.py model's nodes and initializers with every local name prefixed and
    its inputs read as `outer` says: (nodes, initializers, its output names)."""
    g = onnx.load_from_string(model).graph
    local = {n.name for n in g.node} | {o for n in g.node for o in n.output} | {i.name for i in g.initializer}

    def name(v: str) -> str:
        return outer.get(v, prefix + v if v in local else v)
    nodes = [helper.make_node(n.op_type, [name(i) for i in n.input], [name(o) for o in n.output],
                              name=prefix + n.name, **{a.name: helper.get_attribute_value(a) for a in n.attribute})
             for n in g.node]
    inits = [onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(t), prefix + t.name) for t in g.initializer]
    return nodes, inits, [name(o.name) for o in g.output]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pre=_RECIPE, then=_RECIPE, els=_RECIPE, c=st.sampled_from([1, 3, 8]), n=st.integers(1, 4),
       thr=st.floats(-4, 4), seed=st.integers(0, 3))
def test_random_branches_on_data(gpu, pre, then, els, c, n, thr, seed):
    """Random graphs (tests/e2e/_graphs.py) before an If and in both its branches, which read
    the values before it (shared with the condition: ReduceSum(v) > thr of the last of them):
    the GPU session (the If guarded) equals the CPU device's, whichever branch the data picks."""
    from _graphs import build, feeds

    p_nodes, p_inits, p_outs = _renamed(build(pre, c, ["cpu"], seed=seed)[0], "p_", {})
    src = p_outs[0]
    branches = {}
    for tag, recipe in (("t_", then), ("e_", els)):
        nodes, inits, outs = _renamed(build(recipe, c, ["cpu"], seed=seed + 1)[0], tag, {"x0": src})
        branches[tag] = helper.make_graph(nodes, tag + "branch", [], [vi(outs[0], T.FLOAT, ["N", c])], inits)
    nodes = p_nodes + [helper.make_node("ReduceSum", [src], ["s"], name="sum", keepdims=0),
                       helper.make_node("Greater", ["s", "thr"], ["cond"], name="cond"),
                       helper.make_node("If", ["cond"], ["y"], name="if", then_branch=branches["t_"],
                                        else_branch=branches["e_"]),
                       helper.make_node("Add", ["y", src], ["z"], name="add")]
    g = helper.make_graph(nodes, "g", [vi(f"x{i}", T.FLOAT, ["N", c]) for i in range(2)],
                          [vi("z", T.FLOAT, ["N", c]), vi("s", T.FLOAT, [])],
                          p_inits + [helper.make_tensor("thr", T.FLOAT, [], [thr])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()
    x = feeds(np.random.default_rng(seed), n, c)
    want = vkml.InferenceSession(model, devices=["cpu"]).run(None, x)
    s = float(want[1])
    assume(np.isfinite(s) and abs(s - thr) > 1e-3 * max(1.0, abs(s)))  # (GPU sums round otherwise)
    sess = vkml.InferenceSession(model, devices=[gpu])
    for _ in range(2):
        got = sess.run(None, x)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-5)
    row = _rows(sess)["if"]
    assert row["device"] == gpu and "a guard" in row["reason"], row
