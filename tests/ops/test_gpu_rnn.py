"""GPU RNN (vkml/kernels/rnn.py, shaders/rnn.comp) against vkml's CPU operator (a session on the
device named "cpu") over hypothesis-generated nodes: sequence 1-7, batch 1-3, input 1-9, hidden
1-17 (sometimes 18-70); forward, reverse and bidirectional; layouts 0 and 1; B, sequence_lens
and initial_h each present or absent; any subset of Y, Y_h; clip; the default activation or any
of the CPU operator's (with activation_alpha/beta); W and R fed or initializers (a constant R is
transposed on the host when the node is recorded, a fed one by the rnn_prep dispatch); both ways
the recurrence splits its work (k slices summed in shared memory, or one slice; forced on
lavapipe, which plans one slice) and both shapes of its loop over k; float32 and float16. The GPU
session must have dispatched the node. Then onnx's reference evaluator on the default
activation, opsets 1 to 22, the plan, and the nodes the kernel refuses: they run on the CPU with
the kernel's reason in placement(). The comparison and its tolerances are
_rnn_gpu_common.py's: the default Tanh has slope <= 1, so the error stays a few float32 ulp a
step (rtol = atol = 1e-5); unbounded activations (Relu, Affine...) grow h as |R|^steps with
weights scaled by 0.3 x sqrt(17 / hidden) (the loose comparison, relative to the largest value).
"""
from __future__ import annotations

import os
import sys
from unittest import mock

import numpy as np
import pytest
from hypothesis import given

sys.path.insert(0, os.path.dirname(__file__))
from _oracle import device_of, make_model  # noqa: E402
from _rnn_gpu_common import (HYP, MODES, Rnn, cases, check_against_reference, check_bad_sequence_lens,  # noqa: E402
                             check_hidden_sizes, check_plan, check_refused, check_shared_memory_reason,
                             rnn_inputs, run_both, run_case)

import vkml  # noqa: E402
from vkml.kernels import rnn as rnn_kernel  # noqa: E402

RNN = Rnn("RNN", rnn_kernel, 1, ("X", "W", "R", "B", "sequence_lens", "initial_h"), ("y", "y_h"),
          ("Tanh",), ())


@HYP
@given(case=cases(RNN))
def test_rnn(gpu, case):
    run_case(gpu, RNN, case)


@pytest.mark.parametrize("opset", [7, 14, 22])
def test_rnn_against_onnx_reference(gpu, opset):
    """Every opset runs the same kernel and matches onnx's reference evaluator (default
    activation; opsets before 14 have no layout; the evaluator has no RNN-1)."""
    check_against_reference(gpu, RNN, opset, opset)


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("hidden", [64, 128, 300])
def test_rnn_hidden_sizes(gpu, hidden, mode):
    """Hidden sizes of 8 k slices (64 and 128 units) and of 2 (300 units in a 512-unit pipeline,
    those past 300 idle), each also with one slice, and with one slice in a workgroup of 64
    invocations (each owns several units), with either loop shape."""
    check_hidden_sizes(gpu, RNN, hidden, mode, hidden)


def test_plan():
    """plan() (vkml/kernels/rnn_common.py) for one gate: k slices of ~K_PER_SLICE while a slice
    per unit fits the workgroup twice and their partial sums (one a unit) fit the shared memory;
    else one slice; one slice on a CPU device unless SLICE_CPU_DEVICES."""
    check_plan(RNN, [
        ((49152, 1024, False, False, 5), (128, 4, 32, 128)),
        ((49152, 1024, False, False, 64), (512, 8, 64, 512)),
        ((49152, 1024, False, False, 128), (1024, 8, 128, 1024)),
        ((49152, 1024, False, False, 300), (1024, 2, 512, 1024)),
        ((49152, 1024, False, False, 600), (1024, 1, 1024, 1)),
        ((8192, 256, True, False, 128), (128, 1, 128, 1)),  # a CPU device: one slice
        ((8192, 256, True, True, 128), (256, 2, 128, 256)),
    ])


def test_pipeline_follows_plan(gpu):
    """The recurrence's pipeline carries plan() and the loop shape as its specialization
    constants (workgroup, HMAX, slices, partial sums, STEP), and a fed R adds the prep dispatch."""
    rng = np.random.default_rng(3)
    inputs = rnn_inputs(RNN, rng, np.float32, "forward", 0, 3, 1, 4, 64, scale=0.1)
    with mock.patch.multiple(rnn_kernel, SLICE_CPU_DEVICES=True, L1_BYTES=0):
        model = make_model("RNN", inputs, {"hidden_size": 64}, 14, outputs=["y"], consts=("W", "R"))
        (row,) = vkml.InferenceSession(model, devices=[gpu]).placement()
        shaders = {p.get("shader"): p.get("spec") for p in row["pipelines"]}
        assert "rnn_prep_f32" not in shaders, shaders
        wg, slices, hmax, npart = rnn_kernel.plan(device_of(gpu), 64)
        assert slices > 1
        assert tuple(shaders["rnn_f32"]) == (wg, hmax, slices, npart, 1), shaders
        model = make_model("RNN", inputs, {"hidden_size": 64}, 14, outputs=["y"])
        (row,) = vkml.InferenceSession(model, devices=[gpu]).placement()
        assert "rnn_prep_f32" in {p.get("shader") for p in row["pipelines"]}, row


def test_bad_sequence_lens_raises(gpu):
    check_bad_sequence_lens(gpu, RNN)


@pytest.mark.parametrize("change, reason", [
    ({"activations": ["Gelu"]}, "Gelu"),
    ({"clip": -1.0}, "clip"),
    ({"sequence_lens": np.array([3, 3], np.int64)}, "int32"),
])
def test_refused_on_cpu_with_reason(gpu, change, reason):
    check_refused(gpu, RNN, change, reason)


def test_shared_memory_limit_reason(gpu):
    check_shared_memory_reason(RNN)


def test_opset1(gpu):
    """RNN-1 (output_sequence, no layout) runs the same kernel, against the CPU operator."""
    rng = np.random.default_rng(5)
    inputs = rnn_inputs(RNN, rng, np.float32, "bidirectional", 0, 4, 2, 3, 5)
    run_both(gpu, RNN, inputs, {"direction": "bidirectional", "hidden_size": 5}, ["y", "y_h"], 1)
