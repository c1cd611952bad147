"""Elementwise fusion (vkml/compile/fusion.py): chains of float32 elementwise ops with scalar constants
run as one dispatch on the GPU and give what the unfused ops give, on the GPU and on the CPU."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import vkml
import vkml.compile.fusion

UNARY = ["Relu", "Neg", "Abs", "Exp", "Log", "Sqrt", "Sigmoid", "Tanh", "Reciprocal"]
BINARY = ["Add", "Sub", "Mul", "Div"]


def chain_model(steps, shape, extra_outputs=(), twice=None, opset=17) -> bytes:
    """steps: [(op, constant or None, constant first?)]; extra_outputs: step indices whose
    results are graph outputs too; twice: a step whose result a second node also reads."""
    nodes, inits, outputs = [], [], []
    cur = "x"
    for k, (op, c, first) in enumerate(steps):
        out = f"v{k}"
        if c is None:
            nodes.append(helper.make_node(op, [cur], [out], name=f"n{k}"))
        else:
            cname = f"c{k}"
            inits.append(numpy_helper.from_array(np.asarray(c, np.float32), cname))
            nodes.append(helper.make_node(op, [cname, cur] if first else [cur, cname], [out], name=f"n{k}"))
        cur = out
    outputs.append(helper.make_tensor_value_info(cur, TensorProto.FLOAT, list(shape)))
    for k in extra_outputs:
        outputs.append(helper.make_tensor_value_info(f"v{k}", TensorProto.FLOAT, list(shape)))
    if twice is not None:
        nodes.append(helper.make_node("Neg", [f"v{twice}"], ["side"], name="side"))
        outputs.append(helper.make_tensor_value_info("side", TensorProto.FLOAT, list(shape)))
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                          outputs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]).SerializeToString()


def run(env, blob, x, devices, fuse=True, placement=None):
    """Runs blob on devices with fusion on or off; env: the vkml_env fixture."""
    env(VKML_FUSE="1" if fuse else "0")  # read when the session is made
    s = vkml.InferenceSession(blob, devices=devices, placement=placement)
    return s.run(None, {"x": x}), s


def test_a_chain_of_adds_is_one_dispatch(gpu, vkml_env):
    blob = chain_model([("Add", np.zeros(1), False)] * 200, (1,))
    x = np.array([1.5], np.float32)
    (y,), s = run(vkml_env, blob, x, [gpu])
    assert y.tolist() == [1.5]
    rows = s.placement()
    assert len(rows) == 200 and all(r["device"] == gpu and r["reason"].startswith("fused into n0..n199")
                                    for r in rows), rows[:2]
    gpu_nodes = [n for n in s._gpu.last.concrete.live]
    assert [n.op_type for n in gpu_nodes] == ["FusedElementwise"]


def test_chain_breaks_at_outputs_shared_values_and_forced_nodes(gpu, vkml_env):
    steps = [("Mul", np.float32(2), False), ("Add", np.float32(1), True), ("Relu", None, False),
             ("Sub", np.float32(3), True), ("Tanh", None, False), ("Div", np.float32(4), False)]
    x = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    want = vkml.InferenceSession(chain_model(steps, (3, 5), extra_outputs=[1], twice=3),
                                 devices=["cpu"]).run(None, {"x": x})
    got, s = run(vkml_env, chain_model(steps, (3, 5), extra_outputs=[1], twice=3), x, [gpu])
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
    fused = sorted(s._gpu.last.concrete.fused)
    assert fused == ["n0..n1", "n2..n3", "n4..n5"], fused  # v1 is an output, v3 has two readers
    _, s2 = run(vkml_env, chain_model(steps, (3, 5)), x, [gpu], placement={"n2": gpu})
    assert sorted(s2._gpu.last.concrete.fused) == ["n0..n1", "n3..n5"]  # the user's node stays itself


def test_fused_node_on_the_cpu_replays_the_ops(gpu, vkml_env):
    steps = [("Add", np.float32(0.5), False), ("Exp", None, False), ("Mul", np.float32(3), True)]
    x = np.linspace(-2, 2, 7, dtype=np.float32)
    # The reference is the NumPy ops a GPU session's CPU units run: a native program computes
    # Exp with libm's, whose last bits may differ.
    vkml_env(VKML_CPU_NATIVE="0")
    want, = vkml.InferenceSession(chain_model(steps, (7,)), devices=["cpu"]).run(None, {"x": x})
    vkml_env(VKML_CPU_NATIVE=None)
    # No room on the GPU: the fused node goes to the CPU and must still be right.
    s = vkml.InferenceSession(chain_model(steps, (7,)), devices=[gpu], memory_caps={gpu: 0})
    got, = s.run(None, {"x": x})
    np.testing.assert_array_equal(got, want)
    assert {r["device"] for r in s.placement()} == {"cpu"}
    assert list(s._gpu.last.concrete.fused) == ["n0..n2"]


_step = st.one_of(
    st.tuples(st.sampled_from(UNARY), st.none(), st.just(False)),
    st.tuples(st.sampled_from(BINARY), st.floats(-3, 3, width=32).map(lambda v: np.float32(v)),
              st.booleans()),
    st.tuples(st.sampled_from(BINARY), st.floats(-3, 3, width=32).map(lambda v: np.full((1, 1), v, np.float32)),
              st.booleans()),
)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(steps=st.lists(_step, min_size=2, max_size=12), shape=st.sampled_from([(1,), (4,), (2, 3), (3, 1, 5)]),
       seed=st.integers(0, 2**31))
def test_fused_matches_unfused(gpu, vkml_env, steps, shape, seed):
    if any(isinstance(c, np.ndarray) and c.ndim > len(shape) for _, c, _ in steps):
        return  # a rank-2 constant would change a rank-1 chain's shape: not this test's subject
    x = (np.random.default_rng(seed).standard_normal(shape) * 2).astype(np.float32)
    blob = chain_model(steps, shape)
    with np.errstate(all="ignore"):
        want, = vkml.InferenceSession(blob, devices=["cpu"]).run(None, {"x": x})
        unfused, = run(vkml_env, blob, x, [gpu], fuse=False)[0]
        fused, s = run(vkml_env, blob, x, [gpu])
    assert s._gpu.last.concrete.fused, "expected a fused chain"
    # The same formulas as the separate kernels, each step rounded to float32.
    np.testing.assert_allclose(fused[0], unfused, rtol=2e-6, atol=1e-6, equal_nan=True)
    close = np.isclose(fused[0], want, rtol=1e-4, atol=1e-5, equal_nan=True)
    finite = np.isfinite(want)
    assert close[finite].all(), (fused[0], want)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(steps=st.lists(_step, min_size=2, max_size=12), shape=st.sampled_from([(1,), (), (1, 1), (4,), (2, 3)]),
       seed=st.integers(0, 2**31), special=st.sampled_from([None, 0.0, -0.0, np.nan, np.inf, -np.inf]))
def test_cpu_fused_is_bit_identical(vkml_env, steps, shape, seed, special):
    """The CPU's shortcuts (in-place ufuncs, float32 scalars for one element) change nothing."""
    if any(isinstance(c, np.ndarray) and c.ndim > len(shape) for _, c, _ in steps):
        return
    x = (np.random.default_rng(seed).standard_normal(shape) * 2).astype(np.float32)
    if special is not None:
        x.reshape(-1)[0] = special
    blob = chain_model(steps, shape)
    with np.errstate(all="ignore"):
        (want,), _ = run(vkml_env, blob, x, ["cpu"], fuse=False)
        (got,), s = run(vkml_env, blob, x, ["cpu"])
    assert [st.node.op_type for st in s._plan.steps] == ["FusedElementwise"]
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    assert (np.signbit(got) == np.signbit(want)).all()
