"""GPU LSTM (vkml/kernels/lstm.py, shaders/lstm.comp) against vkml's CPU operator (a session on
the device named "cpu") over hypothesis-generated nodes: sequence 1-7, batch 1-3, input 1-9,
hidden 1-17 (sometimes 18-70); forward, reverse and bidirectional; layouts 0 and 1; B,
sequence_lens, initial_h, initial_c and P each present or absent; any subset of Y, Y_h, Y_c;
clip; input_forget; the default activations or any of the CPU operator's (with
activation_alpha/beta); W and R fed or initializers (a constant R is transposed on the host when
the node is recorded, a fed one by the lstm_prep dispatch); both ways the recurrence splits its
work (k slices summed in shared memory, or one slice) and both shapes of its loop over k; float32
and float16. The GPU session must have dispatched the node. Then onnx's reference evaluator on
the default activations, and the nodes the kernel refuses: they run on the CPU with the kernel's
reason in placement().

Tolerance: both sides compute in float32 (float16 inputs are widened before the projection GEMM,
as the CPU operator widens them) and differ in summation order (the GEMM's and the R·h dot
products') and in exp/tanh (the shader's vkml_tanh and exp against NumPy's), a few float32 ulp per
step; gates pass through sigmoid/tanh (slope <= 1) and c through f < 1, so the error does not grow
over 7 steps beyond ~1e-6 on values of magnitude <= ~4: float32 rtol = atol = 1e-5. Activations
without that bound (Relu, Affine, Elu, Softplus...) can grow c and h by a few per step: weights
are then scaled by 0.3 (and by sqrt(17 / hidden) beyond 17 units, so R·h keeps its magnitude),
yet c' = f c + i g(...) of affine gates still grows as a product over the steps (to ~100 in 7)
with cancellations in its sums, so float32 is compared there with rtol 1e-4 and atol 1e-5 of the
largest value. float16: both round the same float32 value once at the end, so they agree exactly
unless that value sits near a rounding boundary: one float16 ulp (rtol 1e-3, atol 1e-3 for
|values| < 1).
"""
from __future__ import annotations

import os
import sys
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx.reference import ReferenceEvaluator

sys.path.insert(0, os.path.dirname(__file__))
from _gen import seeds  # noqa: E402
from _oracle import gpu_and_cpu, make_model  # noqa: E402

import vkml  # noqa: E402
from vkml.kernels import get_kernel, lstm as lstm_kernel  # noqa: E402
from vkml.kernels.registry import TensorSpec  # noqa: E402

HYP = settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", "40")), deadline=None,
               suppress_health_check=list(HealthCheck))
INPUTS = ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P")
# activation -> how many of activation_alpha / activation_beta it takes
ACTS = {"Relu": (0, 0), "Tanh": (0, 0), "Sigmoid": (0, 0), "Affine": (1, 1), "LeakyRelu": (1, 0),
        "ThresholdedRelu": (1, 0), "ScaledTanh": (1, 1), "HardSigmoid": (1, 1), "Elu": (1, 0),
        "Softsign": (0, 0), "Softplus": (0, 0)}
ONE_SLICE = 1 << 30  # K_PER_SLICE that makes plan() pick one slice
# the ways the recurrence splits its work (plan()), on any device (lavapipe too)
# and the two shapes of its loop over k (L1_BYTES 0: the stepwise one at every size)
MODES = {"sliced": {"SLICE_CPU_DEVICES": True, "L1_BYTES": 128 << 10},
         "sliced, stepwise loop": {"SLICE_CPU_DEVICES": True, "L1_BYTES": 0},
         "one slice": {"K_PER_SLICE": ONE_SLICE, "L1_BYTES": 1 << 40},
         "one slice, stepwise loop": {"K_PER_SLICE": ONE_SLICE, "L1_BYTES": 0},
         "one slice of 64 invocations": {"K_PER_SLICE": ONE_SLICE, "MAX_WG": 64}}


def run_both(gpu: str, inputs: dict, attrs: dict, outputs: list[str], opset: int = 14,
             consts=(), loose: bool = False) -> list[np.ndarray]:
    model = make_model("LSTM", inputs, attrs, opset, outputs=outputs, consts=consts)
    feed = {k: v for k, v in inputs.items() if v is not None and k not in consts}
    got, want, sess = gpu_and_cpu(gpu, model, feed)
    (row,) = sess.placement()
    assert row["device"] == gpu and row.get("pipelines"), row
    names = [o for o in outputs if o]
    assert len(got) == len(want) == len(names)
    for name, g, w in zip(names, got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (name, g.dtype, g.shape, w.dtype, w.shape)
        tol = {"rtol": 1e-3, "atol": 1e-3} if w.dtype == np.float16 else {"rtol": 1e-5, "atol": 1e-5}
        if loose and w.dtype == np.float32:  # unbounded activations (see the module docstring)
            tol = {"rtol": 1e-4, "atol": 1e-5 * max(1.0, float(np.abs(w).max(initial=0)))}
        np.testing.assert_allclose(g.astype(np.float32), w.astype(np.float32), err_msg=name, **tol)
    return got


def lstm_inputs(rng, dtype, direction, layout, seq, batch, n_in, hidden, present=frozenset(INPUTS), scale=1.0):
    d = 2 if direction == "bidirectional" else 1

    def t(*shape, s=1.0):
        return (rng.uniform(-1, 1, shape) * s).astype(dtype)

    state = (batch, d, hidden) if layout else (d, batch, hidden)
    values = {
        "X": t(batch, seq, n_in) if layout else t(seq, batch, n_in),
        "W": t(d, 4 * hidden, n_in, s=scale), "R": t(d, 4 * hidden, hidden, s=scale),
        "B": t(d, 8 * hidden, s=scale),
        "sequence_lens": rng.integers(0, seq + 1, batch).astype(np.int32),
        "initial_h": t(*state), "initial_c": t(*state), "P": t(d, 3 * hidden, s=scale)}
    return {k: (v if k in present or k in ("X", "W", "R") else None) for k, v in values.items()}


@st.composite
def cases(draw):
    rng = np.random.default_rng(draw(seeds))
    dtype = draw(st.sampled_from([np.float32, np.float16]))
    direction = draw(st.sampled_from(["forward", "reverse", "bidirectional"]))
    dirs = 2 if direction == "bidirectional" else 1
    layout = draw(st.sampled_from([0, 1]))
    seq, batch = draw(st.integers(1, 7)), draw(st.integers(1, 3))
    n_in = draw(st.integers(1, 9))
    hidden = draw(st.one_of(st.integers(1, 17), st.integers(18, 70)))
    present = frozenset(k for k in INPUTS[3:] if draw(st.booleans()))
    attrs = {"direction": direction, "hidden_size": hidden}
    if layout or draw(st.booleans()):
        attrs["layout"] = layout
    scale = 1.0 if hidden <= 17 else 0.3
    acts = draw(st.sampled_from(["none", "default", "any"]))
    if acts == "default":
        attrs["activations"] = ["Sigmoid", "Tanh", "Tanh"] * dirs
    elif acts == "any":
        names = draw(st.lists(st.sampled_from(sorted(ACTS)), min_size=3, max_size=3))
        if dirs == 2 and draw(st.booleans()):
            names += draw(st.lists(st.sampled_from(sorted(ACTS)), min_size=3, max_size=3))
        attrs["activations"] = names
        reps = 2 if len(names) == 3 and dirs == 2 else 1
        n_alpha = sum(ACTS[a][0] for a in names) * reps
        n_beta = sum(ACTS[a][1] for a in names) * reps
        if n_alpha and draw(st.booleans()):
            attrs["activation_alpha"] = [float(v) for v in rng.uniform(0.05, 1.0, draw(st.integers(1, n_alpha)))]
        if n_beta and draw(st.booleans()):
            attrs["activation_beta"] = [float(v) for v in rng.uniform(0.05, 1.0, draw(st.integers(1, n_beta)))]
        scale = 0.3 * min(1.0, (17 / hidden) ** 0.5)  # unbounded activations: keep c and h from growing
    if draw(st.booleans()):
        attrs["clip"] = float(draw(st.sampled_from([0.25, 1.0, 3.0])))
    if draw(st.booleans()):
        attrs["input_forget"] = draw(st.sampled_from([0, 1]))
    inputs = lstm_inputs(rng, dtype, direction, layout, seq, batch, n_in, hidden, present, scale)
    outs = draw(st.integers(1, 7))  # a non-empty subset of (Y, Y_h, Y_c) as bits
    names = [n if outs >> k & 1 else "" for k, n in enumerate(("y", "y_h", "y_c"))]
    while not names[-1]:  # trailing absent outputs are left off, not named ""
        names.pop()
    consts = tuple(k for k in ("W", "R", "B") if inputs[k] is not None and draw(st.booleans()))
    mode = draw(st.sampled_from(sorted(MODES)))
    return inputs, attrs, names, consts, mode, acts == "any"


@HYP
@given(case=cases())
def test_lstm(gpu, case):
    inputs, attrs, names, consts, mode, loose = case
    with mock.patch.multiple(lstm_kernel, **MODES[mode]):
        run_both(gpu, inputs, attrs, names, consts=consts, loose=loose)


@pytest.mark.parametrize("opset", [1, 7, 14, 22])
def test_lstm_against_onnx_reference(gpu, opset):
    """Every opset runs the same kernel (opset 7 has no layout attribute, opset 1 an unused
    output_sequence) and matches onnx's reference evaluator (default activations, peepholes; the
    reference ignores sequence_lens, so there is none)."""
    rng = np.random.default_rng(opset)
    inputs = lstm_inputs(rng, np.float32, "bidirectional", 0, 4, 2, 3, 5,
                         present={"B", "initial_h", "initial_c", "P"})
    attrs = {"direction": "bidirectional", "hidden_size": 5}
    got = run_both(gpu, inputs, attrs, ["y", "y_h", "y_c"], opset)
    model = make_model("LSTM", inputs, attrs, opset, outputs=["y", "y_h", "y_c"])
    ref = ReferenceEvaluator(model).run(None, {k: v for k, v in inputs.items() if v is not None})
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("hidden", [64, 128, 300])
def test_lstm_hidden_sizes(gpu, hidden, mode):
    """Hidden sizes of 8 k slices (64 and 128 units; the workgroup limit caps 128's at 8) and of 2
    (300 units in a 512-unit pipeline, those past 300 idle), each also with one slice, and with
    one slice in a workgroup of 64 invocations (each owns several units), with either loop shape;
    a long sequence, R constant (transposed on the host), and float16 with W constant too
    (widened on the host)."""
    rng = np.random.default_rng(hidden)
    inputs = lstm_inputs(rng, np.float32, "bidirectional", 1, 20, 2, 12, hidden, scale=0.1)
    attrs = {"direction": "bidirectional", "hidden_size": hidden, "layout": 1}
    with mock.patch.multiple(lstm_kernel, **MODES[mode]):
        run_both(gpu, inputs, attrs, ["y", "y_h", "y_c"], consts=("R",))
        if hidden == 128:
            inputs = {k: (v.astype(np.float16) if v is not None and v.dtype == np.float32 else v)
                      for k, v in inputs.items()}
            run_both(gpu, inputs, attrs, ["y", "y_h", "y_c"], consts=("W", "R"))


def test_plan():
    """plan(): k slices of ~K_PER_SLICE while a slice per unit fits the workgroup twice and their
    partial sums fit the shared memory; else one slice over a workgroup of up to the limit; one
    slice on a CPU device unless SLICE_CPU_DEVICES."""
    class Dev:
        limits = {"max_compute_shared_memory_size": 49152, "max_compute_work_group_invocations": 1024}

    class Info:
        device_type = "cpu"

    with mock.patch.object(lstm_kernel, "K_PER_SLICE", 8):
        assert lstm_kernel.plan(Dev(), 5) == (128, 4, 32, 512)
        assert lstm_kernel.plan(Dev(), 64) == (512, 8, 64, 2048)
        assert lstm_kernel.plan(Dev(), 128) == (1024, 8, 128, 4096)
        assert lstm_kernel.plan(Dev(), 256) == (1024, 4, 256, 4096)
        assert lstm_kernel.plan(Dev(), 300) == (1024, 2, 512, 4096)
        assert lstm_kernel.plan(Dev(), 600) == (1024, 1, 1024, 4)
        assert lstm_kernel.plan(Dev(), 3000) == (1024, 1, 4096, 4)
        Dev.limits = {"max_compute_shared_memory_size": 8192, "max_compute_work_group_invocations": 1024}
        assert lstm_kernel.plan(Dev(), 128) == (256, 2, 128, 1024)  # 4 slices' sums would not fit
        Dev.limits = {"max_compute_shared_memory_size": 8192, "max_compute_work_group_invocations": 256}
        assert lstm_kernel.plan(Dev(), 128) == (256, 2, 128, 1024)
        assert lstm_kernel.plan(Dev(), 200) == (256, 1, 256, 4)
        Dev.info = Info()  # a CPU device: one slice
        assert lstm_kernel.plan(Dev(), 128) == (128, 1, 128, 4)
        with mock.patch.object(lstm_kernel, "SLICE_CPU_DEVICES", True):
            assert lstm_kernel.plan(Dev(), 128) == (256, 2, 128, 1024)


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


@pytest.mark.parametrize("change, reason", [
    ({"activations": ["Sigmoid", "Tanh", "Gelu"]}, "Gelu"),
    ({"activations": ["Sigmoid", "Tanh"]}, "activations"),
    ({"clip": -1.0}, "clip"),
    ({"sequence_lens": np.array([3, 3], np.int64)}, "int32"),
    ({"P": np.zeros((1, 15), np.float16)}, "mixed dtypes"),
])
def test_refused_on_cpu_with_reason(gpu, change, reason):
    """What the kernel refuses runs on the CPU (or fails there as the CPU operator does), with
    the kernel's reason in placement()."""
    rng = np.random.default_rng(2)
    inputs = lstm_inputs(rng, np.float32, "forward", 0, 3, 2, 4, 5, present={"sequence_lens"})
    attrs = {"hidden_size": 5}
    for k, v in change.items():
        (inputs if k in INPUTS else attrs)[k] = v
    model = make_model("LSTM", inputs, attrs, 14, outputs=["y", "y_h"])
    feed = {k: v for k, v in inputs.items() if v is not None}
    try:
        sess = vkml.InferenceSession(model, devices=[gpu])
    except Exception as e:  # the CPU operator rejects the node when the session is made
        assert "activation" in str(e) or "clip" in str(e), e
        return
    (row,) = sess.placement()
    assert row["device"] == "cpu", row
    assert reason in str(row), row
    want = vkml.InferenceSession(model, devices=["cpu"]).run(None, feed)
    for g, w in zip(sess.run(None, feed), want):
        np.testing.assert_array_equal(g, w)


def test_shared_memory_limit_reason(gpu):
    """A hidden size whose state does not fit the device's shared memory is refused with the sizes."""
    class Small:
        limits = {"max_compute_shared_memory_size": 1024, "max_compute_work_group_count": (65535, 65535, 65535)}
        features = frozenset()
        max_storage_buffer_range = 1 << 30
        name = "small"

    f32 = np.dtype(np.float32)
    specs = [TensorSpec((3, 1, 4), f32), TensorSpec((1, 4 * 200, 4), f32), TensorSpec((1, 800, 200), f32)]
    reason = get_kernel("LSTM").supports(Small(), "LSTM", {"hidden_size": 200}, specs)
    assert reason and "shared memory" in reason and "200" in reason


def test_shared_memory_check_counts_the_partial_sums():
    """check() admits a hidden size only where the shader's shared arrays fit with the plan it
    then gets: sh_h[2 x HMAX], sh_c[HMAX] and sh_part[NPART] (shaders/lstm.comp; NPART = 4 with
    one slice). On a 48 KiB device HMAX 4096 (hidden 2049-4096) needs 49152 + 16 bytes: refused,
    so the node runs on the CPU. GRU's one-slice shader has no partial sums and takes them."""
    class Dev48:
        limits = {"max_compute_shared_memory_size": 49152, "max_compute_work_group_count": (65535, 65535, 65535),
                  "max_compute_work_group_invocations": 1024}
        features = frozenset()
        max_storage_buffer_range = 1 << 31
        name = "48 KiB"

    f32 = np.dtype(np.float32)

    def specs(gates, hidden):
        return [TensorSpec((3, 1, 4), f32), TensorSpec((1, gates * hidden, 4), f32),
                TensorSpec((1, gates * hidden, hidden), f32)]

    for hidden, fits in ((2048, True), (2049, False), (3000, False), (4096, False)):
        reason = get_kernel("LSTM").supports(Dev48(), "LSTM", {"hidden_size": hidden}, specs(4, hidden))
        _, _, hm, npart = lstm_kernel.plan(Dev48(), hidden)
        need = (2 * hm + hm + npart) * 4  # the shader's sh_h, sh_c and sh_part
        assert (reason is None) == fits == (need <= 49152), (hidden, need, reason)
        if not fits:
            assert "shared memory" in reason and "49168" in reason and str(hidden) in reason, reason
    for hidden in (3000, 4096):
        assert get_kernel("GRU").supports(Dev48(), "GRU", {"hidden_size": hidden}, specs(3, hidden)) is None
