"""GPU LSTM (vkml/kernels/lstm.py, shaders/lstm.comp) against vkml's CPU operator (a session on
the device named "cpu") over hypothesis-generated nodes: sequence 1-7, batch 1-3, input 1-9,
hidden 1-17; forward, reverse and bidirectional; layouts 0 and 1; B, sequence_lens, initial_h,
initial_c and P each present or absent; any subset of Y, Y_h, Y_c; float32 and float16. The GPU
session must have dispatched the node. Then the nodes the kernel refuses: they run on the CPU
with the kernel's reason in placement().

Tolerance: both sides compute in float32 (float16 inputs are widened before the projection GEMM,
as the CPU operator widens them) and differ in summation order (the GEMM's and the R·h dot
products') and in exp/tanh (the shader's vkml_tanh and exp against NumPy's), a few float32 ulp per
step; gates pass through sigmoid/tanh (slope <= 1) and c through f < 1, so the error does not grow
over 7 steps beyond ~1e-6 on values of magnitude <= ~4. float32: rtol = atol = 1e-5. float16: both
round the same float32 value once at the end, so they agree exactly unless that value sits near a
rounding boundary: one float16 ulp (rtol 1e-3, atol 1e-3 for |values| < 1).
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
from _gen import seeds  # noqa: E402
from _oracle import gpu_and_cpu, make_model  # noqa: E402

import vkml  # noqa: E402

HYP = settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", "40")), deadline=None,
               suppress_health_check=list(HealthCheck))
INPUTS = ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P")


def run_both(gpu: str, inputs: dict, attrs: dict, outputs: list[str], opset: int = 14) -> None:
    model = make_model("LSTM", inputs, attrs, opset, outputs=outputs)
    feed = {k: v for k, v in inputs.items() if v is not None}
    got, want, sess = gpu_and_cpu(gpu, model, feed)
    (row,) = sess.placement()
    assert row["device"] == gpu and row.get("pipelines"), row
    names = [o for o in outputs if o]
    assert len(got) == len(want) == len(names)
    for name, g, w in zip(names, got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (name, g.dtype, g.shape, w.dtype, w.shape)
        tol = {"rtol": 1e-3, "atol": 1e-3} if w.dtype == np.float16 else {"rtol": 1e-5, "atol": 1e-5}
        np.testing.assert_allclose(g.astype(np.float32), w.astype(np.float32), err_msg=name, **tol)


def lstm_inputs(rng, dtype, direction, layout, seq, batch, n_in, hidden, present=frozenset(INPUTS)):
    d = 2 if direction == "bidirectional" else 1

    def t(*shape):
        return rng.uniform(-1, 1, shape).astype(dtype)

    state = (batch, d, hidden) if layout else (d, batch, hidden)
    values = {
        "X": t(batch, seq, n_in) if layout else t(seq, batch, n_in),
        "W": t(d, 4 * hidden, n_in), "R": t(d, 4 * hidden, hidden), "B": t(d, 8 * hidden),
        "sequence_lens": rng.integers(0, seq + 1, batch).astype(np.int32),
        "initial_h": t(*state), "initial_c": t(*state), "P": t(d, 3 * hidden)}
    return {k: (v if k in present or k in ("X", "W", "R") else None) for k, v in values.items()}


@st.composite
def cases(draw):
    rng = np.random.default_rng(draw(seeds))
    dtype = draw(st.sampled_from([np.float32, np.float16]))
    direction = draw(st.sampled_from(["forward", "reverse", "bidirectional"]))
    layout = draw(st.sampled_from([0, 1]))
    seq, batch = draw(st.integers(1, 7)), draw(st.integers(1, 3))
    n_in, hidden = draw(st.integers(1, 9)), draw(st.integers(1, 17))
    present = frozenset(k for k in INPUTS[3:] if draw(st.booleans()))
    inputs = lstm_inputs(rng, dtype, direction, layout, seq, batch, n_in, hidden, present)
    outs = draw(st.integers(1, 7))  # a non-empty subset of (Y, Y_h, Y_c) as bits
    names = [n if outs >> k & 1 else "" for k, n in enumerate(("y", "y_h", "y_c"))]
    while not names[-1]:  # trailing absent outputs are left off, not named ""
        names.pop()
    attrs = {"direction": direction, "hidden_size": hidden}
    if layout or draw(st.booleans()):
        attrs["layout"] = layout
    if draw(st.booleans()):
        attrs["activations"] = ["Sigmoid", "Tanh", "Tanh"] * (2 if direction == "bidirectional" else 1)
    return inputs, attrs, names


@HYP
@given(case=cases())
def test_lstm(gpu, case):
    inputs, attrs, names = case
    run_both(gpu, inputs, attrs, names)


@pytest.mark.parametrize("opset", [7, 22])
def test_lstm_opsets(gpu, opset):
    """Opset 7 (no layout attribute) and 22 run the same kernel."""
    rng = np.random.default_rng(opset)
    inputs = lstm_inputs(rng, np.float32, "bidirectional", 0, 4, 2, 3, 5)
    run_both(gpu, inputs, {"direction": "bidirectional", "hidden_size": 5}, ["y", "y_h", "y_c"], opset)


def test_lstm_hidden_beyond_workgroup(gpu):
    """A hidden size above the workgroup size (each invocation owns several units) and a long
    sequence."""
    rng = np.random.default_rng(7)
    inputs = lstm_inputs(rng, np.float32, "bidirectional", 1, 20, 2, 12, 300)
    inputs["W"] *= 0.1
    inputs["R"] *= 0.1
    run_both(gpu, inputs, {"direction": "bidirectional", "hidden_size": 300, "layout": 1}, ["y", "y_h", "y_c"])


def test_bad_sequence_lens_raises(gpu):
    """A length outside [0, seq] faults on the GPU, so the run raises as the CPU's does."""
    rng = np.random.default_rng(1)
    inputs = lstm_inputs(rng, np.float32, "forward", 0, 3, 2, 2, 3)
    inputs["sequence_lens"] = np.array([1, 5], np.int32)
    model = make_model("LSTM", inputs, {"hidden_size": 3}, 14, outputs=["y"])
    sess = vkml.InferenceSession(model, devices=[gpu])
    assert sess.placement()[0]["device"] == gpu
    with pytest.raises(Exception, match="sequence_lens"):
        sess.run(None, inputs)


@pytest.mark.parametrize("attrs, reason", [
    ({"activations": ["Sigmoid", "Tanh", "Relu"]}, "activations"),
    ({"activations": ["HardSigmoid", "Tanh", "Tanh"]}, "activations"),
    ({"clip": 2.0}, "clip"),
    ({"input_forget": 1}, "input_forget"),
])
def test_refused_on_cpu_with_reason(gpu, attrs, reason):
    """What the kernel refuses runs on the CPU, with the kernel's reason in placement()."""
    rng = np.random.default_rng(2)
    inputs = lstm_inputs(rng, np.float32, "forward", 0, 3, 2, 4, 5)
    model = make_model("LSTM", inputs, {"hidden_size": 5, **attrs}, 14, outputs=["y", "y_h"])
    sess = vkml.InferenceSession(model, devices=[gpu])
    (row,) = sess.placement()
    assert row["device"] == "cpu", row
    assert reason in str(row), row
    want = vkml.InferenceSession(model, devices=["cpu"]).run(None, inputs)
    for g, w in zip(sess.run(None, inputs), want):
        np.testing.assert_array_equal(g, w)


def test_shared_memory_limit_reason(gpu):
    """A hidden size whose state does not fit the device's shared memory is refused with the sizes."""
    from vkml.kernels import get_kernel
    from vkml.kernels.registry import TensorSpec

    class Small:
        limits = {"max_compute_shared_memory_size": 1024, "max_compute_work_group_count": (65535, 65535, 65535)}
        features = frozenset()
        max_storage_buffer_range = 1 << 30
        name = "small"

    f32 = np.dtype(np.float32)
    specs = [TensorSpec((3, 1, 4), f32), TensorSpec((1, 4 * 200, 4), f32), TensorSpec((1, 800, 200), f32)]
    reason = get_kernel("LSTM").supports(Small(), "LSTM", {"hidden_size": 200}, specs)
    assert reason and "shared memory" in reason and "200" in reason
