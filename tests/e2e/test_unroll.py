"""A Scan whose length, or a Loop whose trip count, is known while planning is unrolled into its
steps on the GPU (vkml/compile/unroll.py): states carried from step to step, several scan inputs
and outputs, input and output axes (negative too) and directions, a body reading an outer value
and its own initializer, a Loop's iteration number and a fed trip count; against onnxruntime and
the CPU device. What it cannot unroll (too many steps, a Loop body that decides when to stop)
stays on the CPU and still agrees."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import vkml
from vkml.compile import unroll

F = T.FLOAT
HYP = settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))


def _model(steps: int, n_state: int, m: int, k: int, in_axes, in_rev, out_axes, out_rev, opset: int = 16) -> bytes:
    """Scan over m inputs xs{j} of shape [steps, 3] (the scan axis moved to in_axes[j]); states
    s{i} [3]; the body: u = sum of the slices * w (its initializer) + o (an outer value), each
    state s{i} + u, and k outputs: u * (j + 1) + the first state (or u)."""
    w = nh.from_array(np.array([0.5, -1.0, 2.0], np.float32), "w")
    sl = [f"x{j}" for j in range(m)]
    nodes = [h.make_node("Mul", [sl[0], "w"], ["u0"])]
    acc = "u0"
    for j in range(1, m):
        nodes.append(h.make_node("Add", [acc, sl[j]], [f"u{j}"]))
        acc = f"u{j}"
    nodes.append(h.make_node("Add", [acc, "o"], ["u"]))
    outs = []
    for i in range(n_state):
        nodes.append(h.make_node("Add", [f"s{i}", "u"], [f"s{i}n"]))
        outs.append(f"s{i}n")
    for j in range(k):
        nodes.append(h.make_node("Mul", ["u", f"c{j}"], [f"y{j}a"]))
        nodes.append(h.make_node("Add", [f"y{j}a", "s0n" if n_state else "u"], [f"y{j}"]))
        outs.append(f"y{j}")
    consts = [w] + [nh.from_array(np.full(3, j + 1, np.float32), f"c{j}") for j in range(k)]
    body = h.make_graph(nodes, "body", [h.make_tensor_value_info(f"s{i}", F, [3]) for i in range(n_state)]
                        + [h.make_tensor_value_info(s, F, [3]) for s in sl],
                        [h.make_tensor_value_info(o, F, [3]) for o in outs], consts)
    ins = [f"init{i}" for i in range(n_state)] + [f"xs{j}" for j in range(m)]
    scan = h.make_node("Scan", ins, [f"final{i}" for i in range(n_state)] + [f"ys{j}" for j in range(k)], name="scan",
                       body=body, num_scan_inputs=m, scan_input_axes=in_axes, scan_input_directions=in_rev,
                       scan_output_axes=out_axes, scan_output_directions=out_rev)
    after = h.make_node("Neg", ["ys0"], ["z"])  # a GPU node reading the Scan's output
    shapes = {0: [steps, 3], 1: [3, steps], -1: [3, steps], -2: [steps, 3]}
    g = h.make_graph([scan, after], "g",
                     [h.make_tensor_value_info(f"init{i}", F, [3]) for i in range(n_state)]
                     + [h.make_tensor_value_info(f"xs{j}", F, shapes[in_axes[j]]) for j in range(m)]
                     + [h.make_tensor_value_info("o", F, [3])],
                     [h.make_tensor_value_info(f"final{i}", F, None) for i in range(n_state)]
                     + [h.make_tensor_value_info(f"ys{j}", F, None) for j in range(k)]
                     + [h.make_tensor_value_info("z", F, None)])
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)], ir_version=8).SerializeToString()


def _feeds(model: bytes, rng) -> dict:
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    return {i.name: rng.standard_normal(i.shape).astype(np.float32) for i in sess.get_inputs()}


def _check(gpu, model: bytes, feed: dict, unrolled: bool, head: str = "scan") -> None:
    want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feed)
    cpu = vkml.InferenceSession(model, devices=["cpu"]).run(None, feed)
    sess = vkml.InferenceSession(model, devices=[gpu])
    got = sess.run(None, feed)
    for g, c, w in zip(got, cpu, want, strict=True):
        assert g.shape == w.shape, (g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(c, w, rtol=1e-5, atol=1e-5)
    rows = {r["node"]: r for r in sess.placement()}
    if unrolled:
        assert rows[head]["device"] == gpu and "fused into" in rows[head]["reason"], rows[head]
        assert all(r["device"] == gpu for r in rows.values()), rows
    else:
        assert rows[head]["device"] == "cpu", rows[head]


@HYP
@given(steps=st.integers(1, 6), n_state=st.integers(0, 2), m=st.integers(1, 2), k=st.integers(1, 2),
       data=st.data(), seed=st.integers(0, 2**16))
def test_scans_unroll_on_the_gpu(gpu, steps, n_state, m, k, data, seed):
    in_axes = data.draw(st.lists(st.sampled_from([0, 1, -1, -2]), min_size=m, max_size=m))
    in_rev = data.draw(st.lists(st.integers(0, 1), min_size=m, max_size=m))
    out_axes = data.draw(st.lists(st.sampled_from([0, 1, -1, -2]), min_size=k, max_size=k))
    out_rev = data.draw(st.lists(st.integers(0, 1), min_size=k, max_size=k))
    model = _model(steps, n_state, m, k, in_axes, in_rev, out_axes, out_rev)
    _check(gpu, model, _feeds(model, np.random.default_rng(seed)), unrolled=True)


def test_a_scan_longer_than_the_limit_stays_on_the_cpu(gpu, monkeypatch):
    monkeypatch.setattr(unroll, "MAX_STEPS", 3)
    model = _model(4, 1, 1, 1, [0], [0], [0], [0])
    _check(gpu, model, _feeds(model, np.random.default_rng(1)), unrolled=False)
    model = _model(3, 1, 1, 1, [0], [0], [0], [0])
    _check(gpu, model, _feeds(model, np.random.default_rng(2)), unrolled=True)


@pytest.mark.parametrize("opset", [11, 16])
def test_opsets(gpu, opset):
    model = _model(5, 2, 2, 2, [1, 0], [1, 0], [-1, 0], [0, 1], opset=opset)
    _check(gpu, model, _feeds(model, np.random.default_rng(opset)), unrolled=True)


def _loop_model(trip: int | None, body_decides: bool = False) -> bytes:
    """Loop over M steps (an initializer when `trip` is given, else the fed int64 `m`) carrying
    s [3]: s + x * (iteration + 1), with a scan output s * 2 per step; the body's condition
    passes through an Identity, or (body_decides) is computed from s."""
    nodes = [h.make_node("Cast", ["i"], ["fi"], to=F),
             h.make_node("Add", ["fi", "one"], ["f1"]),
             h.make_node("Mul", ["x", "f1"], ["d"]),
             h.make_node("Add", ["s", "d"], ["s2"]),
             h.make_node("Mul", ["s2", "two"], ["y"])]
    if body_decides:
        nodes += [h.make_node("ReduceSum", ["s2"], ["tot"], keepdims=0), h.make_node("Less", ["tot", "lim"], ["c2"])]
    else:
        nodes.append(h.make_node("Identity", ["c"], ["c2"]))
    consts = [nh.from_array(np.array(1.0, np.float32), "one"), nh.from_array(np.array(2.0, np.float32), "two"),
              nh.from_array(np.array(1e9, np.float32), "lim")]
    body = h.make_graph(nodes, "body", [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("c", T.BOOL, []),
                                        h.make_tensor_value_info("s", F, [3])],
                        [h.make_tensor_value_info("c2", T.BOOL, []), h.make_tensor_value_info("s2", F, [3]),
                         h.make_tensor_value_info("y", F, [3])], consts)
    ins = [h.make_tensor_value_info("s0", F, [3]), h.make_tensor_value_info("x", F, [3]),
           h.make_tensor_value_info("go", T.BOOL, [])]
    inits = []
    if trip is None:
        ins.append(h.make_tensor_value_info("m", T.INT64, []))
    else:
        inits.append(nh.from_array(np.array(trip, np.int64), "m"))
    loop = h.make_node("Loop", ["m", "go", "s0"], ["sf", "ys"], name="loop", body=body)
    g = h.make_graph([loop, h.make_node("Neg", ["ys"], ["z"])], "g", ins,
                     [h.make_tensor_value_info("sf", F, None), h.make_tensor_value_info("ys", F, None),
                      h.make_tensor_value_info("z", F, None)], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 16)], ir_version=8).SerializeToString()


def _loop_feed(rng, m: int | None = None) -> dict:
    feed = {"s0": rng.standard_normal(3).astype(np.float32), "x": rng.standard_normal(3).astype(np.float32),
            "go": np.array(True)}
    if m is not None:
        feed["m"] = np.array(m, np.int64)
    return feed


def test_loops_with_known_trip_counts_unroll(gpu):
    """A constant trip count, and a fed one (the plan is made for its value: two values, two
    plans, both unrolled); the Loop's node and its scan outputs run on the GPU."""
    rng = np.random.default_rng(7)
    model = _loop_model(4)
    _check(gpu, model, _loop_feed(rng), unrolled=True, head="loop")
    model = _loop_model(None)
    for m in (3, 6):
        _check(gpu, model, _loop_feed(rng, m), unrolled=True, head="loop")


def test_a_loop_whose_body_decides_stays_on_the_cpu(gpu):
    model = _loop_model(4, body_decides=True)
    _check(gpu, model, _loop_feed(np.random.default_rng(8)), unrolled=False, head="loop")
