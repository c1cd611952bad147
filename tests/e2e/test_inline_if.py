"""An If whose condition is known while planning runs its branch in its place on the GPU
(vkml/compile/inline_if.py): conditions that are constants, folded from the input shapes, or
fed switches (part of the plan's signature); both branches; branch outputs read downstream;
branches reading outer values, with their own initializers and Constants, with the same local
names as the other branch and as a sibling If's; nested Ifs, inlined or left as they are; and
Ifs whose condition is data, whose conditions are computed before the run (compile/guards.py). Each against onnxruntime (onnx.reference
where onnxruntime cannot load the model: a branch output that is an outer value, or one value
given as two outputs) and the CPU device, in GPU sessions (lavapipe on CI)."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh
from onnx.reference import ReferenceEvaluator

import vkml
from vkml.compile import pipeline
from vkml.ir.graph import TensorDesc, condition_inputs
from vkml.ops.bind import load_model
from vkml.runtime.devices import gpu_facts

F = T.FLOAT
KINDS = ("const", "shape", "fed", "data")  # what the top Ifs' condition is computed from
INNER = (None, "const", "fed", "data")  # an If inside the then branch, and its condition


def _vi(name, elem=F, shape=None):
    return h.make_tensor_value_info(name, elem, shape)


def _then(src: str, inner: str | None, second: str, rng) -> onnx.GraphProto:
    """[N, 4]: (src * w + k) [+ an inner If's result]; the second output per `second`."""
    w = nh.from_array(rng.standard_normal(4).astype(np.float32), "w")  # the branch's initializer
    nodes = [h.make_node("Constant", [], ["k"], value=nh.from_array(rng.standard_normal(4).astype(np.float32), "k")),
             h.make_node("Mul", [src, "w"], ["u"]), h.make_node("Add", ["u", "k"], ["v"])]
    out = "v"
    if inner is not None:
        cond = {"const": "ic_const", "fed": "ic", "data": "ic"}[inner]
        if inner == "fed":  # computed in the branch from a fed switch
            nodes.append(h.make_node("Equal", ["mode", "one"], ["ic"]))
        elif inner == "data":
            nodes += [h.make_node("Abs", ["x"], ["ax"]), h.make_node("ReduceSum", ["ax"], ["sx"], keepdims=0),
                      h.make_node("Greater", ["sx", "thr"], ["ic"])]
        # both inner branches read the outermost x or src, and this branch's u
        it = h.make_graph([h.make_node("Add", ["u", "x"], ["p"])], "inner_then", [], [_vi("p")])
        ie = h.make_graph([h.make_node("Sub", ["u", src], ["p"])], "inner_else", [], [_vi("p")])
        nodes += [h.make_node("If", [cond], ["q"], then_branch=it, else_branch=ie),
                  h.make_node("Add", ["v", "q"], ["vq"])]
        out = "vq"
    outs = [out, {"outer": src, "const": "w", "dup": out}[second]]
    return h.make_graph(nodes, "then", [], [_vi(outs[0]), _vi(outs[1])], [w])


def _else(src: str, second: str, rng) -> onnx.GraphProto:
    """[N, 8]: Concat(src, src) * w, the same local names as the then branch."""
    w = nh.from_array(rng.standard_normal(8).astype(np.float32), "w")
    nodes = [h.make_node("Concat", [src, src], ["u"], axis=1), h.make_node("Mul", ["u", "w"], ["v"])]
    return h.make_graph(nodes, "else", [], [_vi("v"), _vi({"outer": src, "const": "w", "dup": "v"}[second])], [w])


def _model(kind: str, inner: str | None, second: str, seed: int, c: bool = True, n0: int = 1,
           ic: bool = True) -> bytes:
    """Two sibling Ifs on one condition (If_a on relu(x), If_b on -x), each followed by
    Sigmoid -> ReduceSum (and a Relu of its second output). The condition per `kind`: the
    constant `c`, N == n0, sr == 16000 or ReduceSum(x) > 0; the inner If's: the constant `ic`,
    mode == 1, or sum(|x|) > (0 if ic else 1e9)."""
    rng = np.random.default_rng(seed)
    inits = [nh.from_array(np.array(1, np.int64), "one"), nh.from_array(np.array(16000, np.int64), "sr16k"),
             nh.from_array(np.array(n0, np.int64), "n0"), nh.from_array(np.array(0, np.int64), "zero"),
             nh.from_array(np.array([1], np.int64), "axis1"), nh.from_array(np.array(ic), "ic_const"),
             nh.from_array(np.array(0.0 if ic else 1e9, np.float32), "thr")]
    nodes = [h.make_node("Relu", ["x"], ["t"], name="relu"), h.make_node("Neg", ["x"], ["t2"], name="neg")]
    if kind == "const":
        inits.append(nh.from_array(np.array(c), "c"))
    elif kind == "shape":  # folded from x's shape
        nodes += [h.make_node("Shape", ["x"], ["sh"], name="shape"),
                  h.make_node("Gather", ["sh", "zero"], ["n"], axis=0, name="gather"),
                  h.make_node("Equal", ["n", "n0"], ["c"], name="is_n0")]
    elif kind == "fed":
        nodes.append(h.make_node("Equal", ["sr", "sr16k"], ["c"], name="is16k"))
    else:
        nodes += [h.make_node("ReduceSum", ["x"], ["s"], keepdims=0, name="sum"),
                  h.make_node("Greater", ["s", "fzero"], ["c"], name="positive")]
        inits.append(nh.from_array(np.array(0, np.float32), "fzero"))
    outs = []
    for tag, src in (("a", "t"), ("b", "t2")):
        nodes += [h.make_node("If", ["c"], [f"{tag}0", f"{tag}1"], name=f"If_{tag}",
                              then_branch=_then(src, inner, second, rng), else_branch=_else(src, second, rng)),
                  h.make_node("Sigmoid", [f"{tag}0"], [f"{tag}s"], name=f"sigmoid_{tag}"),
                  h.make_node("ReduceSum", [f"{tag}s", "axis1"], [f"y{tag}"], keepdims=0, name=f"sum_{tag}"),
                  h.make_node("Relu", [f"{tag}1"], [f"z{tag}"], name=f"relu_{tag}")]
        outs += [f"y{tag}", f"z{tag}"]
    g = h.make_graph(nodes, "g", [_vi("x", F, ["N", 4]), _vi("sr", T.INT64, []), _vi("mode", T.INT64, [])],
                     [_vi(o) for o in outs], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8).SerializeToString()


def ort_run(model: bytes, feeds: dict) -> list[np.ndarray]:
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"]).run(None, feeds)


def _oracle(model: bytes, feeds: dict, second: str) -> list[np.ndarray]:
    """onnxruntime where it loads the model: it refuses a branch output that is an outer value
    (graph.cc, "outer scope value") and one value given as two outputs of a branch."""
    if second == "const":
        return ort_run(model, feeds)
    return ReferenceEvaluator(onnx.load_from_string(model)).run(None, feeds)


def _feeds(n: int, sr: int, mode: int, sign: float, seed: int) -> dict:
    x = np.abs(np.random.default_rng(seed).standard_normal((n, 4)).astype(np.float32)) * sign
    return {"x": x, "sr": np.array(sr, np.int64), "mode": np.array(mode, np.int64)}


def _same(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def _rows(sess) -> dict[str, dict]:
    return {r["node"]: r for r in sess.placement()}


@settings(deadline=None, max_examples=30, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(KINDS), st.booleans(), st.sampled_from(INNER), st.booleans(),
       st.sampled_from(("outer", "const", "dup")), st.integers(1, 3), st.integers(0, 2**31 - 1))
def test_inlined_if_matches_onnxruntime(gpu, kind, cond, inner, inner_cond, second, n, seed):
    """The top Ifs take `cond`'s branch and the inner If (in the then branch) `inner_cond`'s.
    Where the top condition is known while planning, the Ifs' rows are on the GPU (their
    branches inlined), and every other computed node is on the GPU. A condition on data, the
    top Ifs' or the inner If's, is a guard (compile/guards.py): computed first, then the plan
    made for its value runs, the Ifs inlined the same way."""
    model = _model(kind, inner, second, seed, c=cond, n0=n if cond else n + 1, ic=inner_cond)
    feeds = _feeds(n, 16000 if cond else 8000, 1 if inner_cond else 0, 1.0 if cond else -1.0, seed)
    want = _oracle(model, feeds, second)
    _same(vkml.InferenceSession(model, devices=["cpu"]).run(None, feeds), want)
    sess = vkml.InferenceSession(model, devices=[gpu])
    for _ in range(2):  # the second run reuses the plan and its recorded slot
        _same(sess.run(None, feeds), want)
    rows = _rows(sess)
    branch = "then_branch" if cond else "else_branch"
    for name in ("If_a", "If_b"):
        # (a condition on data, the top Ifs' or the inner If's, is a guard: compile/guards.py)
        r = rows[name]
        assert r["device"] == gpu and f"its {branch} runs" in r["reason"], r
        assert ("a guard" in r["reason"]) == (kind == "data"), r
    computed_cpu = {k for k, r in rows.items() if r["device"] == "cpu" and not r["reason"].startswith("constant")}
    assert computed_cpu == set(), computed_cpu
    assert rows["sigmoid_a"]["device"] == gpu  # static shapes after the If again


def test_fed_switch_alternating_in_one_session(gpu):
    """sr is part of the plan's signature: the same session alternates between the branches
    (different front-end shapes), on the GPU and on the CPU device, each answer right."""
    model = _model("fed", "fed", "dup", 7)
    sessions = {"cpu": vkml.InferenceSession(model, devices=["cpu"]),
                gpu: vkml.InferenceSession(model, devices=[gpu])}
    for sr, mode in [(16000, 1), (8000, 1), (16000, 0), (8000, 0), (16000, 1), (22050, 0)]:
        feeds = _feeds(2, sr, mode, 1.0, sr + mode)
        want = _oracle(model, feeds, "dup")
        for sess in sessions.values():
            _same(sess.run(None, feeds), want)
        rows = _rows(sessions[gpu])
        branch = "then_branch" if sr == 16000 else "else_branch"
        assert all(rows[k]["device"] == gpu and branch in rows[k]["reason"] for k in ("If_a", "If_b")), rows
        assert all(r["device"] == gpu for r in rows.values() if not r["reason"].startswith("constant")), rows
        assert sessions[gpu]._gpu.last.concrete.values["a0"].shape == ((2, 4) if sr == 16000 else (2, 8))


def test_condition_inputs_are_the_fed_switches():
    g = load_model(_model("fed", "fed", "outer", 0)).graph
    assert condition_inputs(g) == ["sr", "mode"]  # mode: read in a branch, for the inner If
    assert condition_inputs(load_model(_model("data", None, "outer", 0)).graph) == []  # x is data
    assert condition_inputs(load_model(_model("shape", None, "outer", 0)).graph) == []  # Shape reads no value


def _only(nodes, prefix, op):
    found = [n for n in nodes if n.name.startswith(prefix) and n.op_type == op]
    assert len(found) == 1, [n.name for n in found]
    return found[0]


def test_plan_names_and_graph_left_alone(gpu):
    """Compiling inlines on new nodes (the graph serves every signature): node names carry
    the If's, local names that the sibling If's branch took are renamed, the If's outputs are
    written by the branch's nodes (or an Identity of an outer value), and an inner If left as
    it is (its condition is data) reads the renamed value of its enclosing branch."""
    model = load_model(_model("fed", "data", "outer", 3))
    g = model.graph
    before = [(n.name, list(n.inputs), list(n.outputs)) for n in g.nodes]
    f32, i64 = np.dtype(np.float32), np.dtype(np.int64)
    c = pipeline.compile_signature(g, model.weights, {"x": TensorDesc(f32, (2, 4)), "sr": TensorDesc(i64, ()),
                                                      "mode": TensorDesc(i64, ())},
                                   known={"sr": np.array(16000), "mode": np.array(0)},
                                   devices=(gpu, "cpu"), gpus={gpu: gpu_facts(gpu)}, fuse=False)
    assert [(n.name, list(n.inputs), list(n.outputs)) for n in g.nodes] == before
    assert c.concrete.inlined == {"If_a": "then_branch", "If_b": "then_branch"}
    live = c.concrete.live
    assert not {"If_a", "If_b"} & {n.name for n in live}
    assert _only(live, "If_a/", "Mul").outputs == ["u"] and _only(live, "If_b/", "Mul").outputs == ["If_b/u"]
    orig = {n.name: n for n in g.nodes}
    inner_a, inner_b = _only(live, "If_a/", "If"), _only(live, "If_b/", "If")
    orig_inner = _only(orig["If_a"].attrs["then_branch"].nodes, "", "If")
    assert inner_a.attrs["then_branch"] is orig_inner.attrs["then_branch"]  # nothing it reads was renamed
    assert inner_b.attrs["then_branch"].outer == ["If_b/u", "x"]  # a renamed copy
    assert inner_b.attrs["else_branch"].outer == ["If_b/u", "t2"]
    last = [n for n in live if n.outputs == ["a0"]]
    assert len(last) == 1 and last[0].op_type == "Add"  # the branch's last Add writes the If's output
    assert c.concrete.fused[last[0].name] == [orig["If_a"]]
    ident = [n for n in live if n.outputs == ["a1"]]
    assert len(ident) == 1 and ident[0].op_type == "Identity" and ident[0].inputs == ["t"]


def test_forced_if_stays_an_if(gpu):
    model = _model("fed", None, "const", 5)
    feeds = _feeds(2, 16000, 0, 1.0, 5)
    sess = vkml.InferenceSession(model, devices=[gpu], placement={"If_a": "cpu"})
    _same(sess.run(None, feeds), ort_run(model, feeds))
    rows = _rows(sess)
    assert rows["If_a"]["device"] == "cpu" and rows["If_b"]["device"] == gpu


@pytest.mark.parametrize("big", [False, True])
def test_branch_of_constants(gpu, big):
    """A branch that only hands out its own constant: folded (small), or copied on the GPU."""
    n = 5000 if big else 3
    k = nh.from_array(np.arange(n, dtype=np.float32), "k")
    then = h.make_graph([], "then", [], [_vi("k")], [k])
    other = h.make_graph([h.make_node("Neg", ["x"], ["y"])], "else", [], [_vi("y")])
    g = h.make_graph([h.make_node("Equal", ["sr", "s"], ["c"]),
                      h.make_node("If", ["c"], ["o"], name="If_k", then_branch=then, else_branch=other),
                      h.make_node("Relu", ["o"], ["r"], name="relu")], "g",
                     [_vi("x", F, [n]), _vi("sr", T.INT64, [])], [_vi("r")],
                     [nh.from_array(np.array(1, np.int64), "s")])
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8).SerializeToString()
    sess = vkml.InferenceSession(model, devices=[gpu])
    for sr in (1, 0, 1):
        feeds = {"x": np.linspace(-1, 1, n, dtype=np.float32), "sr": np.array(sr, np.int64)}
        _same(sess.run(None, feeds), ort_run(model, feeds))
        rows = _rows(sess)
        assert rows["relu"]["device"] == gpu or rows["relu"]["reason"].startswith("constant"), rows


def test_names_taken_get_the_if_name_then_a_number():
    """A local name the plan has gets `<If>/<name>`, and `<If>/<name>#k` where that is taken too;
    node names always carry the If's; an output no branch node makes goes through an Identity."""
    from vkml.compile.inline_if import inline_if

    then = h.make_graph([h.make_node("Neg", ["x"], ["u"], name="n1"), h.make_node("Abs", ["u"], ["v"], name="n2")],
                        "then", [], [_vi("v"), _vi("x")])
    other = h.make_graph([h.make_node("Relu", ["x"], ["v"])], "else", [], [_vi("v"), _vi("v")])
    g = h.make_graph([h.make_node("If", ["c"], ["o1", "o2"], name="I", then_branch=then, else_branch=other)], "g",
                     [_vi("x", F, [2]), _vi("c", T.BOOL, [])], [_vi("o1"), _vi("o2")])
    m = load_model(h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8).SerializeToString())
    node = m.graph.nodes[0]
    values, nodes = {"x", "c", "o1", "o2", "u", "I/u"}, {"I", "I/n1"}
    got = inline_if(node, True, m.weights, values, nodes)
    assert got.branch == "then_branch"
    assert [(n.name, n.op_type, n.inputs, n.outputs) for n in got.nodes] == [
        ("I/n1#1", "Neg", ["x"], ["I/u#2"]), ("I/n2", "Abs", ["I/u#2"], ["o1"]),
        ("I/then_branch:o2", "Identity", ["x"], ["o2"])]
    assert {"I/u#2"} <= values and {"I/n1#1", "I/n2"} <= nodes
    got = inline_if(node, False, m.weights, values, nodes)  # one value as both outputs
    assert [(n.op_type, n.inputs, n.outputs) for n in got.nodes] == [("Relu", ["x"], ["o1"]),
                                                                     ("Identity", ["o1"], ["o2"])]
