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
reason in placement(). What test_gpu_gru.py tests the same way is in _rnn_gpu_common.py, with
the tolerances: LSTM's gates pass through sigmoid/tanh (slope <= 1) and c through f < 1, so with
the default activations the error stays near 1e-6 on values of magnitude <= ~4; with affine
gates c' = f c + i g(...) grows to ~100 in 7 steps (the loose comparison).
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from hypothesis import given

sys.path.insert(0, os.path.dirname(__file__))
from _rnn_gpu_common import (HYP, MODES, Rnn, cases, check_against_reference, check_bad_sequence_lens,  # noqa: E402
                             check_hidden_sizes, check_plan, check_refused, check_shared_memory_reason,
                             fake_device, node_specs, run_case)

from vkml.kernels import get_kernel, lstm as lstm_kernel  # noqa: E402

LSTM = Rnn("LSTM", lstm_kernel, 4, ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"),
           ("y", "y_h", "y_c"), ("Sigmoid", "Tanh", "Tanh"), ("input_forget",))


@HYP
@given(case=cases(LSTM))
def test_lstm(gpu, case):
    run_case(gpu, LSTM, case)


@pytest.mark.parametrize("opset", [1, 7, 14, 22])
def test_lstm_against_onnx_reference(gpu, opset):
    """Every opset runs the same kernel (opset 7 has no layout attribute, opset 1 an unused
    output_sequence) and matches onnx's reference evaluator (default activations, peepholes)."""
    check_against_reference(gpu, LSTM, opset, opset)


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("hidden", [64, 128, 300])
def test_lstm_hidden_sizes(gpu, hidden, mode):
    """Hidden sizes of 8 k slices (64 and 128 units; the workgroup limit caps 128's at 8) and of 2
    (300 units in a 512-unit pipeline, those past 300 idle), each also with one slice, and with
    one slice in a workgroup of 64 invocations (each owns several units), with either loop shape."""
    check_hidden_sizes(gpu, LSTM, hidden, mode, hidden)


def test_plan():
    """plan(): k slices of ~K_PER_SLICE while a slice per unit fits the workgroup twice and their
    partial sums fit the shared memory; else one slice over a workgroup of up to the limit; one
    slice on a CPU device unless SLICE_CPU_DEVICES."""
    check_plan(LSTM, [
        ((49152, 1024, False, False, 5), (128, 4, 32, 512)),
        ((49152, 1024, False, False, 64), (512, 8, 64, 2048)),
        ((49152, 1024, False, False, 128), (1024, 8, 128, 4096)),
        ((49152, 1024, False, False, 256), (1024, 4, 256, 4096)),
        ((49152, 1024, False, False, 300), (1024, 2, 512, 4096)),
        ((49152, 1024, False, False, 600), (1024, 1, 1024, 4)),
        ((49152, 1024, False, False, 3000), (1024, 1, 4096, 4)),
        ((8192, 1024, False, False, 128), (256, 2, 128, 1024)),  # 4 slices' sums would not fit
        ((8192, 256, False, False, 128), (256, 2, 128, 1024)),
        ((8192, 256, False, False, 200), (256, 1, 256, 4)),
        ((8192, 256, True, False, 128), (128, 1, 128, 4)),  # a CPU device: one slice
        ((8192, 256, True, True, 128), (256, 2, 128, 1024)),
    ])


def test_bad_sequence_lens_raises(gpu):
    check_bad_sequence_lens(gpu, LSTM)


@pytest.mark.parametrize("change, reason", [
    ({"activations": ["Sigmoid", "Tanh", "Gelu"]}, "Gelu"),
    ({"activations": ["Sigmoid", "Tanh"]}, "activations"),
    ({"clip": -1.0}, "clip"),
    ({"sequence_lens": np.array([3, 3], np.int64)}, "int32"),
    ({"P": np.zeros((1, 15), np.float16)}, "mixed dtypes"),
])
def test_refused_on_cpu_with_reason(gpu, change, reason):
    check_refused(gpu, LSTM, change, reason)


def test_shared_memory_limit_reason(gpu):
    check_shared_memory_reason(LSTM)


def test_shared_memory_check_counts_the_partial_sums():
    """check() admits a hidden size only where the shader's shared arrays fit with the plan it
    then gets: sh_h[2 x HMAX], sh_c[HMAX] and sh_part[NPART] (shaders/lstm.comp; NPART = 4 with
    one slice). On a 48 KiB device HMAX 4096 (hidden 2049-4096) needs 49152 + 16 bytes: refused,
    so the node runs on the CPU. GRU's one-slice shader has no partial sums and takes them."""
    dev48 = fake_device(49152, name="48 KiB")
    for hidden, fits in ((2048, True), (2049, False), (3000, False), (4096, False)):
        reason = get_kernel("LSTM").supports(dev48, "LSTM", {"hidden_size": hidden}, node_specs(4, hidden))
        _, _, hm, npart = lstm_kernel.plan(dev48, hidden)
        need = (2 * hm + hm + npart) * 4  # the shader's sh_h, sh_c and sh_part
        assert (reason is None) == fits == (need <= 49152), (hidden, need, reason)
        if not fits:
            assert "shared memory" in reason and "49168" in reason and str(hidden) in reason, reason
    for hidden in (3000, 4096):
        assert get_kernel("GRU").supports(dev48, "GRU", {"hidden_size": hidden}, node_specs(3, hidden)) is None
