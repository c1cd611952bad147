"""GPU GRU (vkml/kernels/gru.py, shaders/gru.comp) against vkml's CPU operator (a session on the
device named "cpu") over hypothesis-generated nodes: sequence 1-7, batch 1-3, input 1-9, hidden
1-17 (sometimes 18-70); forward, reverse and bidirectional; layouts 0 and 1; linear_before_reset
0 and 1; B, sequence_lens and initial_h each present or absent; any subset of Y, Y_h; clip; the
default activations or any of the CPU operator's (with activation_alpha/beta); W and R fed or
initializers (a constant R is transposed on the host when the node is recorded, a fed one by the
gru_prep dispatch); both ways the recurrence splits its work (k slices summed in shared memory,
or one slice; forced on lavapipe, which plans one slice) and both shapes of its loop over k;
float32 and float16. The GPU session must have dispatched the node. Then onnx's reference
evaluator on the default activations, opsets 1 to 22, the plan itself, and the nodes the kernel
refuses: they run on the CPU with the kernel's reason in placement().

Tolerance (as tests/ops/test_gpu_lstm.py): both sides compute in float32 (float16 inputs are
widened before the projection GEMM, as the CPU operator widens them) and differ in summation
order (the GEMM's and the R·h dot products', the k slices') and in exp/tanh, a few float32 ulp
per step; the default gates pass through sigmoid/tanh (slope <= 1) and h' is a convex mix of h~
and h, so the error does not grow over 7 steps beyond ~1e-6 on values of magnitude <= ~1 (weights
scaled by 0.3 beyond 17 units). Activations without that bound (Relu, Affine, Elu, Softplus...)
can grow h by a few per step: weights are then scaled by 0.3 (and by sqrt(17 / hidden) beyond 17
units, so R·h keeps its magnitude), yet affine gates (z outside [0, 1]) still grow h as a product
over the steps (to ~1e11 in 7 at 18 units) with cancellations in its sums, so float32 is
compared there with rtol 1e-4 and atol 1e-5 of the largest value.
float16: both round the same float32 value once at the end, so they agree exactly unless that
value sits near a rounding boundary: one float16 ulp (rtol 1e-3, atol 1e-3).
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
import vkml.vulkan as vk  # noqa: E402
from vkml.kernels import get_kernel, gru as gru_kernel  # noqa: E402
from vkml.kernels.registry import TensorSpec  # noqa: E402

HYP = settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", "40")), deadline=None,
               suppress_health_check=list(HealthCheck))
INPUTS = ("X", "W", "R", "B", "sequence_lens", "initial_h")
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


def tolerance(dtype) -> dict:
    return {"rtol": 1e-3, "atol": 1e-3} if np.dtype(dtype) == np.float16 else {"rtol": 1e-5, "atol": 1e-5}


def run_both(gpu: str, inputs: dict, attrs: dict, outputs: list[str], opset: int = 14,
             consts=(), loose: bool = False) -> list[np.ndarray]:
    model = make_model("GRU", inputs, attrs, opset, outputs=outputs, consts=consts)
    feed = {k: v for k, v in inputs.items() if v is not None and k not in consts}
    got, want, sess = gpu_and_cpu(gpu, model, feed)
    (row,) = sess.placement()
    assert row["device"] == gpu and row.get("pipelines"), row
    names = [o for o in outputs if o]
    assert len(got) == len(want) == len(names)
    for name, g, w in zip(names, got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (name, g.dtype, g.shape, w.dtype, w.shape)
        tol = tolerance(w.dtype)
        if loose and w.dtype == np.float32:  # unbounded activations (see the module docstring)
            tol = {"rtol": 1e-4, "atol": 1e-5 * max(1.0, float(np.abs(w).max(initial=0)))}
        np.testing.assert_allclose(g.astype(np.float32), w.astype(np.float32), err_msg=name, **tol)
    return got


def gru_inputs(rng, dtype, direction, layout, seq, batch, n_in, hidden, present=frozenset(INPUTS), scale=1.0):
    d = 2 if direction == "bidirectional" else 1

    def t(*shape, s=1.0):
        return (rng.uniform(-1, 1, shape) * s).astype(dtype)

    state = (batch, d, hidden) if layout else (d, batch, hidden)
    values = {
        "X": t(batch, seq, n_in) if layout else t(seq, batch, n_in),
        "W": t(d, 3 * hidden, n_in, s=scale), "R": t(d, 3 * hidden, hidden, s=scale), "B": t(d, 6 * hidden, s=scale),
        "sequence_lens": rng.integers(0, seq + 1, batch).astype(np.int32), "initial_h": t(*state)}
    return {k: (v if k in present or k in ("X", "W", "R") else None) for k, v in values.items()}


@st.composite
def cases(draw):
    rng = np.random.default_rng(draw(seeds))
    dtype = draw(st.sampled_from([np.float32, np.float16]))
    direction = draw(st.sampled_from(["forward", "reverse", "bidirectional"]))
    layout = draw(st.sampled_from([0, 1]))
    seq, batch = draw(st.integers(1, 7)), draw(st.integers(1, 3))
    n_in = draw(st.integers(1, 9))
    hidden = draw(st.one_of(st.integers(1, 17), st.integers(18, 70)))
    present = frozenset(k for k in INPUTS[3:] if draw(st.booleans()))
    attrs = {"direction": direction, "hidden_size": hidden}
    if layout or draw(st.booleans()):
        attrs["layout"] = layout
    if draw(st.booleans()):
        attrs["linear_before_reset"] = draw(st.sampled_from([0, 1]))
    scale = 1.0 if hidden <= 17 else 0.3
    acts = draw(st.sampled_from(["none", "default", "any"]))
    if acts == "default":
        attrs["activations"] = ["Sigmoid", "Tanh"] * (2 if direction == "bidirectional" else 1)
    elif acts == "any":
        names = draw(st.lists(st.sampled_from(sorted(ACTS)), min_size=2, max_size=2))
        if direction == "bidirectional" and draw(st.booleans()):
            names += draw(st.lists(st.sampled_from(sorted(ACTS)), min_size=2, max_size=2))
        attrs["activations"] = names
        n_alpha = sum(ACTS[a][0] for a in names) * (2 if len(names) == 2 and direction == "bidirectional" else 1)
        n_beta = sum(ACTS[a][1] for a in names) * (2 if len(names) == 2 and direction == "bidirectional" else 1)
        if n_alpha and draw(st.booleans()):
            attrs["activation_alpha"] = [float(v) for v in rng.uniform(0.05, 1.0, draw(st.integers(1, n_alpha)))]
        if n_beta and draw(st.booleans()):
            attrs["activation_beta"] = [float(v) for v in rng.uniform(0.05, 1.0, draw(st.integers(1, n_beta)))]
        scale = 0.3 * min(1.0, (17 / hidden) ** 0.5)  # unbounded activations: keep h from growing
    if draw(st.booleans()):
        attrs["clip"] = float(draw(st.sampled_from([0.25, 1.0, 3.0])))
    inputs = gru_inputs(rng, dtype, direction, layout, seq, batch, n_in, hidden, present, scale)
    outs = draw(st.integers(1, 3))  # a non-empty subset of (Y, Y_h) as bits
    names = [n if outs >> k & 1 else "" for k, n in enumerate(("y", "y_h"))]
    while not names[-1]:  # trailing absent outputs are left off, not named ""
        names.pop()
    consts = tuple(k for k in ("W", "R", "B") if inputs[k] is not None and draw(st.booleans()))
    mode = draw(st.sampled_from(sorted(MODES)))
    return inputs, attrs, names, consts, mode, acts == "any"


@HYP
@given(case=cases())
def test_gru(gpu, case):
    inputs, attrs, names, consts, mode, loose = case
    with mock.patch.multiple(gru_kernel, **MODES[mode]):
        run_both(gpu, inputs, attrs, names, consts=consts, loose=loose)


@pytest.mark.parametrize("opset", [1, 3, 7, 14, 22])
@pytest.mark.parametrize("lbr", [0, 1])
def test_gru_against_onnx_reference(gpu, opset, lbr):
    """Every opset runs the same kernel and matches onnx's reference evaluator (default
    activations; opset 1 has no linear_before_reset, opsets before 14 no layout; the reference
    ignores sequence_lens, so there is none)."""
    if opset == 1 and lbr:
        pytest.skip("opset 1 has no linear_before_reset")
    rng = np.random.default_rng(opset + 10 * lbr)
    inputs = gru_inputs(rng, np.float32, "bidirectional", 0, 4, 2, 3, 5, present={"B", "initial_h"})
    attrs = {"direction": "bidirectional", "hidden_size": 5}
    if opset > 1:
        attrs["linear_before_reset"] = lbr
    got = run_both(gpu, inputs, attrs, ["y", "y_h"], opset)
    model = make_model("GRU", inputs, attrs, opset, outputs=["y", "y_h"])
    ref = ReferenceEvaluator(model).run(None, {k: v for k, v in inputs.items() if v is not None})
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5)


def test_opset1_default_direction(gpu):
    """Opset 1's direction default is spelt "foward"; a model that writes it out runs forward."""
    rng = np.random.default_rng(4)
    inputs = gru_inputs(rng, np.float32, "forward", 0, 3, 2, 3, 4)
    run_both(gpu, inputs, {"direction": "foward", "hidden_size": 4}, ["y", "y_h"], 1)


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("hidden", [64, 128, 300])
@pytest.mark.parametrize("lbr", [0, 1])
def test_gru_hidden_sizes(gpu, hidden, lbr, mode):
    """Hidden sizes of 8 k slices (64 and 128 units; the workgroup limit caps 128's at 8) and of 2
    (300 units in a 512-unit pipeline, those past 300 idle), each also with one slice, and with
    one slice in a workgroup of 64 invocations (each owns several units), with either loop shape,
    both linear_before_reset values; a long sequence, R constant (transposed on the host) and R
    fed (the prep dispatch), and float16 with W and R constant (widened, transposed on the
    host)."""
    rng = np.random.default_rng(hidden + lbr)
    inputs = gru_inputs(rng, np.float32, "bidirectional", 1, 20, 2, 12, hidden, scale=0.1)
    attrs = {"direction": "bidirectional", "hidden_size": hidden, "layout": 1, "linear_before_reset": lbr}
    with mock.patch.multiple(gru_kernel, **MODES[mode]):
        run_both(gpu, inputs, attrs, ["y", "y_h"], consts=("R",))
        if hidden == 128:
            run_both(gpu, inputs, attrs, ["y", "y_h"])
            inputs = {k: (v.astype(np.float16) if v is not None and v.dtype == np.float32 else v)
                      for k, v in inputs.items()}
            run_both(gpu, inputs, attrs, ["y", "y_h"], consts=("W", "R"))


def test_plan():
    """plan() (vkml/kernels/rnn_common.py, LSTM's): k slices of ~K_PER_SLICE while a slice per
    unit fits the workgroup twice and their partial sums (3 a unit: GRU's gates) fit the shared
    memory; else one slice over a workgroup of up to the limit; one slice on a CPU device unless
    SLICE_CPU_DEVICES."""
    class Dev:
        limits = {"max_compute_shared_memory_size": 49152, "max_compute_work_group_invocations": 1024}

    class Info:
        device_type = "cpu"

    with mock.patch.object(gru_kernel, "K_PER_SLICE", 8):
        assert gru_kernel.plan(Dev(), 5) == (128, 4, 32, 384)
        assert gru_kernel.plan(Dev(), 64) == (512, 8, 64, 1536)
        assert gru_kernel.plan(Dev(), 128) == (1024, 8, 128, 3072)
        assert gru_kernel.plan(Dev(), 256) == (1024, 4, 256, 3072)
        assert gru_kernel.plan(Dev(), 300) == (1024, 2, 512, 3072)
        assert gru_kernel.plan(Dev(), 600) == (1024, 1, 1024, 3)
        assert gru_kernel.plan(Dev(), 3000) == (1024, 1, 4096, 3)
        Dev.limits = {"max_compute_shared_memory_size": 8192, "max_compute_work_group_invocations": 1024}
        assert gru_kernel.plan(Dev(), 128) == (512, 4, 128, 1536)  # 8 slices' sums would not fit
        Dev.limits = {"max_compute_shared_memory_size": 8192, "max_compute_work_group_invocations": 256}
        assert gru_kernel.plan(Dev(), 128) == (256, 2, 128, 768)
        assert gru_kernel.plan(Dev(), 200) == (256, 1, 256, 3)
        Dev.info = Info()  # a CPU device: one slice
        assert gru_kernel.plan(Dev(), 128) == (128, 1, 128, 3)
        with mock.patch.object(gru_kernel, "SLICE_CPU_DEVICES", True):
            assert gru_kernel.plan(Dev(), 128) == (256, 2, 128, 768)


def test_pipeline_follows_plan(gpu):
    """The recurrence's pipeline carries plan() and the loop shape as its specialization
    constants (workgroup, HMAX, slices, partial sums, STEP), and a fed R adds the prep dispatch."""
    rng = np.random.default_rng(3)
    inputs = gru_inputs(rng, np.float32, "forward", 0, 3, 1, 4, 64, scale=0.1)
    with mock.patch.multiple(gru_kernel, SLICE_CPU_DEVICES=True, L1_BYTES=0):
        model = make_model("GRU", inputs, {"hidden_size": 64}, 14, outputs=["y"], consts=("W", "R"))
        sess = vkml.InferenceSession(model, devices=[gpu])
        (row,) = sess.placement()
        shaders = {p.get("shader"): p.get("spec") for p in row["pipelines"]}
        assert "gru_prep_f32" not in shaders, shaders
        wg, slices, hmax, npart = gru_kernel.plan(vk.device(int(gpu.split(":")[1])), 64)
        assert slices > 1
        assert tuple(shaders["gru_f32"]) == (wg, hmax, slices, npart, 1), shaders
        model = make_model("GRU", inputs, {"hidden_size": 64}, 14, outputs=["y"])
        (row,) = vkml.InferenceSession(model, devices=[gpu]).placement()
        assert "gru_prep_f32" in {p.get("shader") for p in row["pipelines"]}, row


def test_bad_sequence_lens_raises(gpu):
    """A length outside [0, seq] faults on the GPU, so the run raises as the CPU's does."""
    rng = np.random.default_rng(1)
    inputs = gru_inputs(rng, np.float32, "forward", 0, 3, 2, 2, 3)
    inputs["sequence_lens"] = np.array([1, 5], np.int32)
    model = make_model("GRU", inputs, {"hidden_size": 3}, 14, outputs=["y"])
    sess = vkml.InferenceSession(model, devices=[gpu])
    assert sess.placement()[0]["device"] == gpu
    with pytest.raises(Exception, match="sequence_lens"):
        sess.run(None, {k: v for k, v in inputs.items() if v is not None})


@pytest.mark.parametrize("change, reason", [
    ({"activations": ["Sigmoid", "Gelu"]}, "Gelu"),
    ({"clip": -1.0}, "clip"),
    ({"sequence_lens": np.array([3, 3], np.int64)}, "int32"),
])
def test_refused_on_cpu_with_reason(gpu, change, reason):
    """What the kernel refuses runs on the CPU (or fails there as the CPU operator does), with
    the kernel's reason in placement()."""
    rng = np.random.default_rng(2)
    inputs = gru_inputs(rng, np.float32, "forward", 0, 3, 2, 4, 5, present={"sequence_lens"})
    attrs = {"hidden_size": 5}
    for k, v in change.items():
        (inputs if k in INPUTS else attrs)[k] = v
    model = make_model("GRU", inputs, attrs, 14, outputs=["y", "y_h"])
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
    specs = [TensorSpec((3, 1, 4), f32), TensorSpec((1, 3 * 200, 4), f32), TensorSpec((1, 600, 200), f32)]
    reason = get_kernel("GRU").supports(Small(), "GRU", {"hidden_size": 200}, specs)
    assert reason and "shared memory" in reason and "200" in reason
