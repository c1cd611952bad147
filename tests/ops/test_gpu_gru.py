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
refuses: they run on the CPU with the kernel's reason in placement(). What test_gpu_lstm.py
tests the same way is in _rnn_gpu_common.py, with the tolerances: GRU's default gates pass
through sigmoid/tanh (slope <= 1) and h' is a convex mix of h~ and h, so the error stays near
1e-6 on values of magnitude <= ~1; affine gates (z outside [0, 1]) grow h to ~1e11 in 7 steps at
18 units (the loose comparison).
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
from vkml.kernels import gru as gru_kernel  # noqa: E402

GRU = Rnn("GRU", gru_kernel, 3, ("X", "W", "R", "B", "sequence_lens", "initial_h"), ("y", "y_h"),
          ("Sigmoid", "Tanh"), ("linear_before_reset",))


@HYP
@given(case=cases(GRU))
def test_gru(gpu, case):
    run_case(gpu, GRU, case)


@pytest.mark.parametrize("opset", [1, 3, 7, 14, 22])
@pytest.mark.parametrize("lbr", [0, 1])
def test_gru_against_onnx_reference(gpu, opset, lbr):
    """Every opset runs the same kernel and matches onnx's reference evaluator (default
    activations; opset 1 has no linear_before_reset, opsets before 14 no layout)."""
    if opset == 1 and lbr:
        pytest.skip("opset 1 has no linear_before_reset")
    check_against_reference(gpu, GRU, opset, opset + 10 * lbr, **({"linear_before_reset": lbr} if opset > 1 else {}))


def test_opset1_default_direction(gpu):
    """Opset 1's direction default is spelt "foward"; a model that writes it out runs forward."""
    rng = np.random.default_rng(4)
    inputs = rnn_inputs(GRU, rng, np.float32, "forward", 0, 3, 2, 3, 4)
    run_both(gpu, GRU, inputs, {"direction": "foward", "hidden_size": 4}, ["y", "y_h"], 1)


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("hidden", [64, 128, 300])
@pytest.mark.parametrize("lbr", [0, 1])
def test_gru_hidden_sizes(gpu, hidden, lbr, mode):
    """Hidden sizes of 8 k slices (64 and 128 units; the workgroup limit caps 128's at 8) and of 2
    (300 units in a 512-unit pipeline, those past 300 idle), each also with one slice, and with
    one slice in a workgroup of 64 invocations (each owns several units), with either loop shape,
    both linear_before_reset values."""
    check_hidden_sizes(gpu, GRU, hidden, mode, hidden + lbr, linear_before_reset=lbr)


def test_plan():
    """plan() (vkml/kernels/rnn_common.py, LSTM's): k slices of ~K_PER_SLICE while a slice per
    unit fits the workgroup twice and their partial sums (3 a unit: GRU's gates) fit the shared
    memory; else one slice over a workgroup of up to the limit; one slice on a CPU device unless
    SLICE_CPU_DEVICES."""
    check_plan(GRU, [
        ((49152, 1024, False, False, 5), (128, 4, 32, 384)),
        ((49152, 1024, False, False, 64), (512, 8, 64, 1536)),
        ((49152, 1024, False, False, 128), (1024, 8, 128, 3072)),
        ((49152, 1024, False, False, 256), (1024, 4, 256, 3072)),
        ((49152, 1024, False, False, 300), (1024, 2, 512, 3072)),
        ((49152, 1024, False, False, 600), (1024, 1, 1024, 3)),
        ((49152, 1024, False, False, 3000), (1024, 1, 4096, 3)),
        ((8192, 1024, False, False, 128), (512, 4, 128, 1536)),  # 8 slices' sums would not fit
        ((8192, 256, False, False, 128), (256, 2, 128, 768)),
        ((8192, 256, False, False, 200), (256, 1, 256, 3)),
        ((8192, 256, True, False, 128), (128, 1, 128, 3)),  # a CPU device: one slice
        ((8192, 256, True, True, 128), (256, 2, 128, 768)),
    ])


def test_pipeline_follows_plan(gpu):
    """The recurrence's pipeline carries plan() and the loop shape as its specialization
    constants (workgroup, HMAX, slices, partial sums, STEP), and a fed R adds the prep dispatch."""
    rng = np.random.default_rng(3)
    inputs = rnn_inputs(GRU, rng, np.float32, "forward", 0, 3, 1, 4, 64, scale=0.1)
    with mock.patch.multiple(gru_kernel, SLICE_CPU_DEVICES=True, L1_BYTES=0):
        model = make_model("GRU", inputs, {"hidden_size": 64}, 14, outputs=["y"], consts=("W", "R"))
        sess = vkml.InferenceSession(model, devices=[gpu])
        (row,) = sess.placement()
        shaders = {p.get("shader"): p.get("spec") for p in row["pipelines"]}
        assert "gru_prep_f32" not in shaders, shaders
        wg, slices, hmax, npart = gru_kernel.plan(device_of(gpu), 64)
        assert slices > 1
        assert tuple(shaders["gru_f32"]) == (wg, hmax, slices, npart, 1), shaders
        model = make_model("GRU", inputs, {"hidden_size": 64}, 14, outputs=["y"])
        (row,) = vkml.InferenceSession(model, devices=[gpu]).placement()
        assert "gru_prep_f32" in {p.get("shader") for p in row["pipelines"]}, row


def test_bad_sequence_lens_raises(gpu):
    check_bad_sequence_lens(gpu, GRU)


@pytest.mark.parametrize("change, reason", [
    ({"activations": ["Sigmoid", "Gelu"]}, "Gelu"),
    ({"clip": -1.0}, "clip"),
    ({"sequence_lens": np.array([3, 3], np.int64)}, "int32"),
])
def test_refused_on_cpu_with_reason(gpu, change, reason):
    check_refused(gpu, GRU, change, reason)


def test_shared_memory_limit_reason(gpu):
    check_shared_memory_reason(GRU)
