"""What tests/ops/test_gpu_lstm.py and test_gpu_gru.py share: the node's inputs, the hypothesis
strategy, the comparison of the GPU with vkml's CPU operator, and the checks both kernels pass
the same way. Each test file binds them to its op (an Rnn), so a fix to one op's test reaches
the other's.

Tolerance: both sides compute in float32 (float16 inputs are widened before the projection GEMM,
as the CPU operator widens them) and differ in summation order (the GEMM's and the R·h dot
products', the k slices') and in exp/tanh (the shader's vkml_tanh and exp against NumPy's), a
few float32 ulp per step; the default gates keep the error near 1e-6 over 7 steps: float32 rtol =
atol = 1e-5. Activations without a bound (Relu, Affine, Elu, Softplus...) grow the state as a
product over the steps (each test file says how far), with cancellations in its sums: weights
are then scaled by 0.3 (and by sqrt(17 / hidden) beyond 17 units, so R·h keeps its magnitude)
and float32 is compared with rtol 1e-4 and atol 1e-5 of the largest value ("loose"). float16:
both round the same float32 value once at the end, so they agree exactly unless that value sits
near a rounding boundary: one float16 ulp (rtol 1e-3, atol 1e-3).
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from types import ModuleType, SimpleNamespace
from typing import Sequence
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from onnx.reference import ReferenceEvaluator

sys.path.insert(0, os.path.dirname(__file__))
from _gen import seeds  # noqa: E402
from _oracle import gpu_and_cpu, make_model  # noqa: E402

import vkml  # noqa: E402
from vkml.kernels import get_kernel  # noqa: E402
from vkml.kernels.registry import TensorSpec  # noqa: E402

HYP = settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", "40")), deadline=None,
               suppress_health_check=list(HealthCheck))
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
F32 = np.dtype(np.float32)


@dataclass(frozen=True)
class Rnn:
    """One recurrent op as its tests see it (written out here, not read from the kernel)."""
    op: str
    kernel: ModuleType  # vkml.kernels.lstm: the module whose tunables (MODES) are patched
    gates: int
    inputs: tuple[str, ...]  # X, W, R, B, sequence_lens, initial_h and the op's own
    outputs: tuple[str, ...]  # the output names the tests give, all of them
    default_acts: tuple[str, ...]
    flag_attrs: tuple[str, ...]  # the op's 0/1 attributes (input_forget, linear_before_reset)


def tolerance(dtype) -> dict:
    return {"rtol": 1e-3, "atol": 1e-3} if np.dtype(dtype) == np.float16 else {"rtol": 1e-5, "atol": 1e-5}


def run_both(gpu: str, rnn: Rnn, inputs: dict, attrs: dict, outputs: Sequence[str], opset: int = 14,
             consts: Sequence[str] = (), loose: bool = False) -> list[np.ndarray]:
    """The node on the GPU (which must have dispatched it) and on the CPU, compared."""
    model = make_model(rnn.op, inputs, attrs, opset, outputs=list(outputs), consts=consts)
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


def rnn_inputs(rnn: Rnn, rng, dtype, direction: str, layout: int, seq: int, batch: int, n_in: int,
               hidden: int, present: Sequence[str] | None = None, scale: float = 1.0) -> dict:
    """The node's inputs in ONNX order, those not in `present` (default: all) None but X, W, R."""
    d = 2 if direction == "bidirectional" else 1
    g = rnn.gates

    def t(*shape, s=1.0):
        return (rng.uniform(-1, 1, shape) * s).astype(dtype)

    state = (batch, d, hidden) if layout else (d, batch, hidden)
    values = {
        "X": t(batch, seq, n_in) if layout else t(seq, batch, n_in),
        "W": t(d, g * hidden, n_in, s=scale), "R": t(d, g * hidden, hidden, s=scale),
        "B": t(d, 2 * g * hidden, s=scale),
        "sequence_lens": rng.integers(0, seq + 1, batch).astype(np.int32), "initial_h": t(*state)}
    if "initial_c" in rnn.inputs:
        values["initial_c"] = t(*state)
    if "P" in rnn.inputs:
        values["P"] = t(d, 3 * hidden, s=scale)
    present = rnn.inputs if present is None else present
    return {k: (v if k in present or k in ("X", "W", "R") else None) for k, v in values.items()}


@st.composite
def cases(draw, rnn: Rnn):
    """(inputs, attrs, output names, constant inputs, MODES key, loose) of a random node."""
    rng = np.random.default_rng(draw(seeds))
    dtype = draw(st.sampled_from([np.float32, np.float16]))
    direction = draw(st.sampled_from(["forward", "reverse", "bidirectional"]))
    dirs = 2 if direction == "bidirectional" else 1
    layout = draw(st.sampled_from([0, 1]))
    seq, batch = draw(st.integers(1, 7)), draw(st.integers(1, 3))
    n_in = draw(st.integers(1, 9))
    hidden = draw(st.one_of(st.integers(1, 17), st.integers(18, 70)))
    present = frozenset(k for k in rnn.inputs[3:] if draw(st.booleans()))
    attrs = {"direction": direction, "hidden_size": hidden}
    if layout or draw(st.booleans()):
        attrs["layout"] = layout
    for name in rnn.flag_attrs:
        if draw(st.booleans()):
            attrs[name] = draw(st.sampled_from([0, 1]))
    scale = 1.0 if hidden <= 17 else 0.3
    n_acts = len(rnn.default_acts)
    acts = draw(st.sampled_from(["none", "default", "any"]))
    if acts == "default":
        attrs["activations"] = list(rnn.default_acts) * dirs
    elif acts == "any":
        names = draw(st.lists(st.sampled_from(sorted(ACTS)), min_size=n_acts, max_size=n_acts))
        if dirs == 2 and draw(st.booleans()):
            names += draw(st.lists(st.sampled_from(sorted(ACTS)), min_size=n_acts, max_size=n_acts))
        attrs["activations"] = names
        reps = 2 if len(names) == n_acts and dirs == 2 else 1
        n_alpha = sum(ACTS[a][0] for a in names) * reps
        n_beta = sum(ACTS[a][1] for a in names) * reps
        if n_alpha and draw(st.booleans()):
            attrs["activation_alpha"] = [float(v) for v in rng.uniform(0.05, 1.0, draw(st.integers(1, n_alpha)))]
        if n_beta and draw(st.booleans()):
            attrs["activation_beta"] = [float(v) for v in rng.uniform(0.05, 1.0, draw(st.integers(1, n_beta)))]
        scale = 0.3 * min(1.0, (17 / hidden) ** 0.5)  # unbounded activations: keep the state from growing
    if draw(st.booleans()):
        attrs["clip"] = float(draw(st.sampled_from([0.25, 1.0, 3.0])))
    inputs = rnn_inputs(rnn, rng, dtype, direction, layout, seq, batch, n_in, hidden, present, scale)
    outs = draw(st.integers(1, (1 << len(rnn.outputs)) - 1))  # a non-empty subset of the outputs as bits
    names = [n if outs >> k & 1 else "" for k, n in enumerate(rnn.outputs)]
    while not names[-1]:  # trailing absent outputs are left off, not named ""
        names.pop()
    consts = tuple(k for k in ("W", "R", "B") if inputs[k] is not None and draw(st.booleans()))
    mode = draw(st.sampled_from(sorted(MODES)))
    return inputs, attrs, names, consts, mode, acts == "any"


def run_case(gpu: str, rnn: Rnn, case: tuple) -> None:
    inputs, attrs, names, consts, mode, loose = case
    with mock.patch.multiple(rnn.kernel, **MODES[mode]):
        run_both(gpu, rnn, inputs, attrs, names, consts=consts, loose=loose)


def check_against_reference(gpu: str, rnn: Rnn, opset: int, seed: int, **attrs) -> None:
    """A bidirectional node with every input but sequence_lens (which onnx's reference evaluator
    ignores) and the default activations, against that evaluator."""
    rng = np.random.default_rng(seed)
    inputs = rnn_inputs(rnn, rng, np.float32, "bidirectional", 0, 4, 2, 3, 5,
                        present=[k for k in rnn.inputs if k != "sequence_lens"])
    attrs = {"direction": "bidirectional", "hidden_size": 5, **attrs}
    got = run_both(gpu, rnn, inputs, attrs, rnn.outputs, opset)
    model = make_model(rnn.op, inputs, attrs, opset, outputs=list(rnn.outputs))
    ref = ReferenceEvaluator(model).run(None, {k: v for k, v in inputs.items() if v is not None})
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5)


def check_hidden_sizes(gpu: str, rnn: Rnn, hidden: int, mode: str, seed: int, **attrs) -> None:
    """A long bidirectional sequence of `hidden` units in `mode`, R constant (transposed on the
    host); at 128 units also R fed (the prep dispatch), and float16 with W and R constant
    (widened, transposed on the host)."""
    rng = np.random.default_rng(seed)
    inputs = rnn_inputs(rnn, rng, np.float32, "bidirectional", 1, 20, 2, 12, hidden, scale=0.1)
    attrs = {"direction": "bidirectional", "hidden_size": hidden, "layout": 1, **attrs}
    with mock.patch.multiple(rnn.kernel, **MODES[mode]):
        run_both(gpu, rnn, inputs, attrs, rnn.outputs, consts=("R",))
        if hidden == 128:
            run_both(gpu, rnn, inputs, attrs, rnn.outputs)
            inputs = {k: (v.astype(np.float16) if v is not None and v.dtype == np.float32 else v)
                      for k, v in inputs.items()}
            run_both(gpu, rnn, inputs, attrs, rnn.outputs, consts=("W", "R"))


def fake_device(shared: int, invocations: int = 1024, cpu: bool = False, name: str = "fake") -> SimpleNamespace:
    """What check() and plan() read of a device, with `shared` bytes of shared memory."""
    return SimpleNamespace(
        limits={"max_compute_shared_memory_size": shared, "max_compute_work_group_count": (65535, 65535, 65535),
                "max_compute_work_group_invocations": invocations},
        info=SimpleNamespace(device_type="cpu" if cpu else "discrete_gpu"),
        features=frozenset(), max_storage_buffer_range=1 << 31, name=name)


def check_plan(rnn: Rnn, rows: Sequence[tuple[tuple[int, int, bool, bool, int], tuple[int, int, int, int]]]) -> None:
    """plan() at K_PER_SLICE 8: rows of ((shared memory, invocations, a CPU device,
    SLICE_CPU_DEVICES, hidden), (workgroup, slices, HMAX, partial sums))."""
    for (shared, invocations, cpu, slice_cpu, hidden), want in rows:
        with mock.patch.multiple(rnn.kernel, K_PER_SLICE=8, SLICE_CPU_DEVICES=slice_cpu):
            got = rnn.kernel.plan(fake_device(shared, invocations, cpu), hidden)
        assert got == want, (shared, invocations, cpu, slice_cpu, hidden, got, want)


def node_specs(gates: int, hidden: int) -> list[TensorSpec]:
    """X, W and R of a one-direction float32 node of `hidden` units (sequence 3, input 4)."""
    return [TensorSpec((3, 1, 4), F32), TensorSpec((1, gates * hidden, 4), F32),
            TensorSpec((1, gates * hidden, hidden), F32)]


def check_bad_sequence_lens(gpu: str, rnn: Rnn) -> None:
    """A length outside [0, seq] faults on the GPU, so the run raises as the CPU's does."""
    rng = np.random.default_rng(1)
    inputs = rnn_inputs(rnn, rng, np.float32, "forward", 0, 3, 2, 2, 3)
    inputs["sequence_lens"] = np.array([1, 5], np.int32)
    model = make_model(rnn.op, inputs, {"hidden_size": 3}, 14, outputs=["y"])
    sess = vkml.InferenceSession(model, devices=[gpu])
    assert sess.placement()[0]["device"] == gpu
    with pytest.raises(Exception, match="sequence_lens"):
        sess.run(None, {k: v for k, v in inputs.items() if v is not None})


def check_refused(gpu: str, rnn: Rnn, change: dict, reason: str) -> None:
    """What the kernel refuses runs on the CPU (or fails there as the CPU operator does), with
    the kernel's reason in placement()."""
    rng = np.random.default_rng(2)
    inputs = rnn_inputs(rnn, rng, np.float32, "forward", 0, 3, 2, 4, 5, present={"sequence_lens"})
    attrs = {"hidden_size": 5}
    for k, v in change.items():
        (inputs if k in rnn.inputs else attrs)[k] = v
    model = make_model(rnn.op, inputs, attrs, 14, outputs=["y", "y_h"])
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


def check_shared_memory_reason(rnn: Rnn) -> None:
    """A hidden size whose state does not fit the device's shared memory is refused with the sizes."""
    reason = get_kernel(rnn.op).supports(fake_device(1024, name="small"), rnn.op, {"hidden_size": 200},
                                          node_specs(rnn.gates, 200))
    assert reason and "shared memory" in reason and "200" in reason
