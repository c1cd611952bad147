"""Subgraphs that control flow calls at run time, on the GPU (vkml/runtime/subgraphs.py): a Loop
that decides when to stop from its data, a Scan too long to unroll, an If whose condition
planning leaves to the run. Each call of the body runs as a GPU plan of its own, values handed
from one iteration to the next stay on the device; every result equals the CPU device's."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto as T
from onnx import helper

import vkml
from _threads import hammer
from vkml.compile import guards
from vkml.runtime import subgraphs

vi = helper.make_tensor_value_info


@pytest.fixture
def any_size(monkeypatch):
    """Small bodies go to the GPU too (they stay on the CPU by default: MIN_ELEMENTS), and stay
    there untimed (no trial against NumPy, which lavapipe would lose)."""
    monkeypatch.setattr(subgraphs, "MIN_ELEMENTS", 0)
    monkeypatch.setattr(subgraphs, "TRIAL_CALLS", 0)


def _while(rows: int = 4, cols: int = 8, m: int = 40, slice_by_i: bool = False) -> bytes:
    """h = Relu(h @ w) + x while ReduceSum(h) < limit (at most m times); the stacked h's.
    slice_by_i: the body also slices x by its iteration number (a value its plans would be
    made per)."""
    body_nodes = [helper.make_node("MatMul", ["h", "w"], ["hw"]), helper.make_node("Relu", ["hw"], ["r"]),
                  helper.make_node("Add", ["r", "x"], ["h_out"]),
                  helper.make_node("ReduceSum", ["h_out"], ["s"], keepdims=0),
                  helper.make_node("Less", ["s", "limit"], ["cond_out"]), helper.make_node("Identity", ["h_out"], ["scan"])]
    if slice_by_i:
        body_nodes[2:3] = [helper.make_node("Unsqueeze", ["i", "ax0"], ["i1"]),
                           helper.make_node("Add", ["i1", "one"], ["i2"]),
                           helper.make_node("Slice", ["x", "i1", "i2", "ax0"], ["xs"]),
                           helper.make_node("Add", ["r", "xs"], ["h_out"])]
    body = helper.make_graph(body_nodes, "body", [vi("i", T.INT64, []), vi("cond", T.BOOL, []),
                                                  vi("h", T.FLOAT, [rows, cols])],
                             [vi("cond_out", T.BOOL, []), vi("h_out", T.FLOAT, [rows, cols]),
                              vi("scan", T.FLOAT, [rows, cols])],
                             [helper.make_tensor("ax0", T.INT64, [1], [0]), helper.make_tensor("one", T.INT64, [1], [1])])
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((cols, cols)) / np.sqrt(cols)).astype(np.float32)
    g = helper.make_graph([helper.make_node("Loop", ["M", "", "h0"], ["h", "hs"], name="loop", body=body)], "g",
                          [vi("x", T.FLOAT, [rows, cols]), vi("h0", T.FLOAT, [rows, cols]), vi("limit", T.FLOAT, [])],
                          [vi("h", T.FLOAT, [rows, cols]), vi("hs", T.FLOAT, None)],
                          [helper.make_tensor("M", T.INT64, [], [m]), helper.make_tensor("w", T.FLOAT, [cols, cols], w.ravel())])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()


def _feed(limit: float, rows: int = 4, cols: int = 8, seed: int = 1) -> dict:
    rng = np.random.default_rng(seed)
    return {"x": np.abs(rng.standard_normal((rows, cols))).astype(np.float32),
            "h0": np.zeros((rows, cols), np.float32), "limit": np.float32(limit)}


def _close(got, want) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


def _row(sess, name: str) -> dict:
    return next(r for r in sess.placement() if r["node"] == name)


def test_while_loop_body_on_the_gpu(gpu, any_size):
    model = _while()
    sess = vkml.InferenceSession(model, devices=[gpu])
    ref = vkml.InferenceSession(model, devices=["cpu"])
    lengths = set()
    for limit in (5.0, 30.0, 1e9, 5.0):  # stops after 1, after 3, at M (40)
        want = ref.run(None, _feed(limit))
        _close(sess.run(None, _feed(limit)), want)
        lengths.add(want[1].shape[0])
        row = _row(sess, "loop")
        assert row["device"] == gpu and row.get("subgraphs") and row.get("pipelines"), row
    assert len(lengths) == 3 and 40 in lengths


def test_small_bodies_stay_on_the_cpu(gpu):
    """By default a body whose GPU nodes make fewer than MIN_ELEMENTS elements a call runs in
    NumPy (a GPU run per iteration would cost more)."""
    model = _while()
    sess = vkml.InferenceSession(model, devices=[gpu])
    _close(sess.run(None, _feed(60.0)), vkml.InferenceSession(model, devices=["cpu"]).run(None, _feed(60.0)))
    assert _row(sess, "loop")["device"] == "cpu"


def test_iteration_numbers_the_plans_would_be_made_per_stay_on_the_cpu(gpu, any_size):
    """A body that slices by its iteration number needs that number's value while planning: a
    plan per iteration, so it runs on the CPU."""
    model = _while(slice_by_i=True, rows=50)
    sess = vkml.InferenceSession(model, devices=[gpu])
    feed = _feed(1e9, rows=50)
    _close(sess.run(None, feed), vkml.InferenceSession(model, devices=["cpu"]).run(None, feed))
    assert _row(sess, "loop")["device"] == "cpu"


def test_long_scan_body_on_the_gpu(gpu, any_size):
    """A Scan longer than compile/unroll.MAX_STEPS is not unrolled: its body runs per step as a
    GPU plan, the state staying on the device."""
    steps = 300
    body = helper.make_graph([helper.make_node("Mul", ["s", "a"], ["sa"]), helper.make_node("Add", ["sa", "xt"], ["s_out"]),
                              helper.make_node("Relu", ["s_out"], ["y"])],
                             "body", [vi("s", T.FLOAT, [8]), vi("xt", T.FLOAT, [8])],
                             [vi("s_out", T.FLOAT, [8]), vi("y", T.FLOAT, [8])])
    g = helper.make_graph([helper.make_node("Scan", ["s0", "xs"], ["s", "ys"], name="scan", body=body, num_scan_inputs=1)],
                          "g", [vi("s0", T.FLOAT, [8]), vi("xs", T.FLOAT, [steps, 8]), vi("a", T.FLOAT, [8])],
                          [vi("s", T.FLOAT, [8]), vi("ys", T.FLOAT, [steps, 8])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 16)]).SerializeToString()
    rng = np.random.default_rng(2)
    feed = {"s0": np.zeros(8, np.float32), "xs": rng.standard_normal((steps, 8)).astype(np.float32),
            "a": np.full(8, 0.5, np.float32)}
    sess = vkml.InferenceSession(model, devices=[gpu])
    _close(sess.run(None, feed), vkml.InferenceSession(model, devices=["cpu"]).run(None, feed))
    assert _row(sess, "scan")["device"] == gpu


def test_if_left_to_the_run_runs_its_branch_on_the_gpu(gpu, any_size, monkeypatch):
    """An If on data that is no guard (its condition shares too much with the rest): its branch
    is a subgraph called at run time, on the GPU."""
    monkeypatch.setattr(guards, "GUARD_SHARED_MAX", 0)
    then = helper.make_graph([helper.make_node("Mul", ["h", "h"], ["t"])], "then", [], [vi("t", T.FLOAT, [4, 8])])
    els = helper.make_graph([helper.make_node("Neg", ["h"], ["e"])], "else", [], [vi("e", T.FLOAT, [4, 8])])
    nodes = [helper.make_node("Relu", ["x"], ["h"], name="relu"),
             helper.make_node("ReduceSum", ["h"], ["s"], name="sum", keepdims=0),
             helper.make_node("Greater", ["s", "ten"], ["c"], name="cond"),
             helper.make_node("If", ["c"], ["z"], name="if", then_branch=then, else_branch=els)]
    g = helper.make_graph(nodes, "g", [vi("x", T.FLOAT, [4, 8])], [vi("z", T.FLOAT, [4, 8])],
                          [helper.make_tensor("ten", T.FLOAT, [], [10.0])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    sess = vkml.InferenceSession(model, devices=[gpu])
    ref = vkml.InferenceSession(model, devices=["cpu"])
    x = np.linspace(-3, 3, 32, dtype=np.float32).reshape(4, 8)
    for k in (1.0, -1.0, 4.0):
        np.testing.assert_array_equal(sess.run(None, {"x": x * k})[0], ref.run(None, {"x": x * k})[0])
        row = _row(sess, "if")
        assert row["device"] == gpu and row.get("subgraphs") and "a guard" not in row["reason"], row


def test_threads_share_the_subgraph_runner(gpu, any_size):
    model = _while()
    sess = vkml.InferenceSession(model, devices=[gpu])
    ref = vkml.InferenceSession(model, devices=["cpu"])
    cases = [(lim, ref.run(None, _feed(lim))) for lim in (5.0, 20.0, 60.0, 1e9)]
    errors = hammer(sess, cases, threads=4, runs=6, run=lambda lim: sess.run(None, _feed(lim)), compare=_close)
    assert not errors, errors[:3]


def test_a_failing_body_raises_the_cpu_error(gpu, any_size):
    """A Gather in the body whose index runs out of range at the third iteration: the GPU
    session raises what the CPU device raises."""
    body = helper.make_graph([helper.make_node("Gather", ["table", "i"], ["row"], axis=0),
                              helper.make_node("Add", ["acc", "row"], ["acc_out"]),
                              helper.make_node("Identity", ["cond"], ["cond_out"])],
                             "body", [vi("i", T.INT64, []), vi("cond", T.BOOL, []), vi("acc", T.FLOAT, [8])],
                             [vi("cond_out", T.BOOL, []), vi("acc_out", T.FLOAT, [8])])
    g = helper.make_graph([helper.make_node("Loop", ["M", "go", "acc0"], ["acc"], name="loop", body=body)], "g",
                          [vi("M", T.INT64, []), vi("go", T.BOOL, []), vi("acc0", T.FLOAT, [8]), vi("table", T.FLOAT, [2, 8])],
                          [vi("acc", T.FLOAT, [8])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    feed = {"M": np.array(3, np.int64), "go": np.array(True), "acc0": np.zeros(8, np.float32),
            "table": np.ones((2, 8), np.float32)}
    with pytest.raises(Exception) as cpu:
        vkml.InferenceSession(model, devices=["cpu"]).run(None, feed)
    with pytest.raises(type(cpu.value)) as got:
        vkml.InferenceSession(model, devices=[gpu]).run(None, feed)
    assert "out of range" in str(got.value) and "out of range" in str(cpu.value), (got.value, cpu.value)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(limit=st.floats(0.5, 200), rows=st.integers(1, 6), cols=st.sampled_from([1, 4, 8]), m=st.integers(0, 12),
       seed=st.integers(0, 2**31))
def test_while_loops_equal_the_cpu(gpu, monkeypatch, limit, rows, cols, m, seed):
    monkeypatch.setattr(subgraphs, "MIN_ELEMENTS", 0)
    monkeypatch.setattr(subgraphs, "TRIAL_CALLS", 0)
    model = _while(rows, cols, m)
    feed = _feed(limit, rows, cols, seed)
    want = vkml.InferenceSession(model, devices=["cpu"]).run(None, feed)
    _close(vkml.InferenceSession(model, devices=[gpu]).run(None, feed), want)


def test_outer_values_the_body_plans_per_stay_on_the_host(gpu, any_size):
    """A body that reshapes by a shape fed to the model (a value its plans are made per): the
    shape is handed to the body's runs as an array, so its Reshape runs on the GPU too."""
    body = helper.make_graph([helper.make_node("Reshape", ["h", "shape"], ["flat"]),
                              helper.make_node("Relu", ["flat"], ["r"]),
                              helper.make_node("Reshape", ["r", "back"], ["rr"]),
                              helper.make_node("Add", ["rr", "x"], ["h_out"]),
                              helper.make_node("ReduceSum", ["h_out"], ["s"], keepdims=0),
                              helper.make_node("Less", ["s", "limit"], ["cond_out"])],
                             "body", [vi("i", T.INT64, []), vi("cond", T.BOOL, []), vi("h", T.FLOAT, [4, 8])],
                             [vi("cond_out", T.BOOL, []), vi("h_out", T.FLOAT, [4, 8])],
                             [helper.make_tensor("back", T.INT64, [2], [4, 8])])
    g = helper.make_graph([helper.make_node("Loop", ["M", "", "h0"], ["h"], name="loop", body=body)], "g",
                          [vi("x", T.FLOAT, [4, 8]), vi("h0", T.FLOAT, [4, 8]), vi("limit", T.FLOAT, []),
                           vi("shape", T.INT64, [2])],
                          [vi("h", T.FLOAT, [4, 8])], [helper.make_tensor("M", T.INT64, [], [10])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    feed = {**_feed(50.0), "shape": np.array([2, 16], np.int64)}
    sess = vkml.InferenceSession(model, devices=[gpu])
    _close(sess.run(None, feed), vkml.InferenceSession(model, devices=["cpu"]).run(None, feed))
    assert _row(sess, "loop")["device"] == gpu
    (sub,) = [r for _, r in sess._gpu.subs._runners.values()]
    assert {row["node"]: row["device"] for row in sub.last.report} == dict.fromkeys(
        [n.name for n in sub.graph.nodes], gpu)


def test_trial_calls_settle_where_the_body_is_quicker(gpu, monkeypatch, caplog):
    """Without the size-only shortcut, the body's calls after the first go two by two to NumPy
    and to the GPU, the second of each pair timed; after TRIAL_CALLS each way the subgraph stays
    on the side whose median call was quicker. The clock is the test's: first the GPU's calls
    look slower (the body goes back to NumPy, and says why), then quicker (it stays on the
    GPU). Every run of the loop, its trial calls mixing both sides, equals the CPU device."""
    import logging

    monkeypatch.setattr(subgraphs, "MIN_ELEMENTS", 0)
    monkeypatch.setattr(subgraphs, "TRIAL_CALLS", 2)
    model = _while(m=40)
    ref = vkml.InferenceSession(model, devices=["cpu"])
    real = subgraphs.Subgraphs.timed
    for gpu_wins in (False, True):
        sides = []

        def timed(self, graph, side, seconds):  # the GPU's calls 1 ms, NumPy's 2 ms (or the reverse)
            sides.append(side)
            real(self, graph, side, 1e-3 if (side == "gpu") == gpu_wins else 2e-3)

        monkeypatch.setattr(subgraphs.Subgraphs, "timed", timed)
        sess = vkml.InferenceSession(model, devices=[gpu])
        with caplog.at_level(logging.INFO, logger="vkml"):
            for lim in (1e9, 60.0, 1e9):
                _close(sess.run(None, _feed(lim)), ref.run(None, _feed(lim)))
        assert sides == ["cpu", "gpu", "cpu", "gpu"], sides  # (40 calls a run: settled in the first)
        row = _row(sess, "loop")
        said = [r.getMessage() for r in caplog.records if "subgraph 'body'" in r.getMessage()]
        if gpu_wins:
            assert row["device"] == gpu and row.get("subgraphs"), row
            assert any("runs on the GPU: 1.000 ms a call there, 2.000 ms in NumPy" in m for m in said), said
        else:
            assert any("NumPy took 1.000 ms a call, the GPU 2.000 ms" in m for m in said), said
        caplog.clear()


def test_a_trial_spread_over_runs(gpu, monkeypatch):
    """A loop of two iterations a run: its trial goes on across runs (a pair each run) and
    settles after TRIAL_CALLS timed calls each way, results equal to the CPU's throughout."""
    monkeypatch.setattr(subgraphs, "MIN_ELEMENTS", 0)
    monkeypatch.setattr(subgraphs, "TRIAL_CALLS", 2)
    model = _while(m=3)
    sess = vkml.InferenceSession(model, devices=[gpu])
    ref = vkml.InferenceSession(model, devices=["cpu"])
    for _ in range(6):
        _close(sess.run(None, _feed(1e9)), ref.run(None, _feed(1e9)))
    subs = [s for s in _subgraph_tables(sess)]
    assert subs and all(not s._trials and s._settled for s in subs), [(s._trials, s._settled) for s in subs]


def _subgraph_tables(sess):
    """The session's Subgraphs objects (its runtime's, by attribute walk: none is public)."""
    seen, todo, found = set(), [sess], []
    while todo:
        o = todo.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        if isinstance(o, subgraphs.Subgraphs):
            found.append(o)
            continue
        for v in getattr(o, "__dict__", {}).values():
            if hasattr(v, "__dict__") and type(v).__module__.startswith("vkml"):
                todo.append(v)
    return found


def test_threads_share_a_trial(gpu, monkeypatch):
    """Four threads running the loop while its body's trial goes on (calls on both sides, from
    several threads at once): every result equals the CPU's, and the trial settles once."""
    monkeypatch.setattr(subgraphs, "MIN_ELEMENTS", 0)
    monkeypatch.setattr(subgraphs, "TRIAL_CALLS", 3)
    model = _while(m=12)
    sess = vkml.InferenceSession(model, devices=[gpu])
    ref = vkml.InferenceSession(model, devices=["cpu"])
    cases = [(lim, ref.run(None, _feed(lim))) for lim in (5.0, 20.0, 1e9)]
    errors = hammer(sess, cases, threads=4, runs=4, run=lambda lim: sess.run(None, _feed(lim)), compare=_close)
    assert not errors, errors[:3]
    tables = _subgraph_tables(sess)
    assert tables and all(not t._trials and t._settled for t in tables), [(t._trials, t._settled) for t in tables]
