"""GPU kernel for LSTM (every opset): one GEMM for the input projection, then shaders/lstm.comp.

What LSTM and GRU share (the projection GEMM, R transposed, the plan of the R·h products, the
kernel's check/infer/record) is in vkml/kernels/rnn_common.py; this module names LSTM's inputs,
outputs and shader flags, and keeps the tunables that tests and bench/probe_rnn.py patch. The
recurrence is one dispatch of shaders/lstm.comp, a workgroup per (direction, batch row), h in
shared memory; on a GPU, up to half the workgroup limit in hidden units, the k of the R·h
products is split into slices summed in shared memory (two barriers a step; one with a single
slice). Both biases are added in the shader, grouped as the CPU operator groups them, so the GPU
and the CPU differ only in summation order (and the activations' exp/tanh).

Supported: forward, reverse, bidirectional; layouts 0 and 1; B, sequence_lens (int32),
initial_h, initial_c and P present or not; any of Y, Y_h, Y_c; clip; input_forget; every
activation the CPU operator knows, with activation_alpha/beta consumed as the CPU operator
consumes them; float32 and float16. On the CPU instead (check() says why): other dtypes, hidden
sizes whose state (and the 4 floats of partial sums of one slice) does not fit the device's
shared memory, and what the CPU operator rejects (it reports the error). A length in
sequence_lens outside [0, seq] faults (vkml/runtime/faults.py), so the GPU run raises as the
CPU's does.
"""
from __future__ import annotations

import sys

from . import rnn_common as rnn
from .common import PushBlock
from .registry import register

# seq, batch, hidden, dirs, reverse, layout, flags, fault site, clip, act[6], alpha[6], beta[6]
LSTM_PUSH = PushBlock("8If6I6f6f", "lstm")
BINDINGS = "rrrrrrrwwwx"  # proj R B h0 c0 P lens | Y Y_h Y_c | fault
INPUTS = ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P")
GATES = 4
# shaders/lstm.comp's flags
(HAS_B, HAS_H0, HAS_C0, HAS_P, HAS_LENS, WANT_Y, WANT_YH, WANT_YC, CLIP,
 INPUT_FORGET, PLAIN) = (1 << i for i in range(11))
DEFAULT_ACTS = ("Sigmoid", "Tanh", "Tanh")
# plan()'s and the loop shape's tunables (vkml/kernels/rnn_common.py; tests and bench patch them here)
K_PER_SLICE = rnn.K_PER_SLICE
L1_BYTES = rnn.L1_BYTES
SLICE_CPU_DEVICES = rnn.SLICE_CPU_DEVICES
MAX_WG = rnn.MAX_WG
# shaders/lstm.comp declares sh_part[NPART] beside its 3 x HMAX floats of state whatever the plan;
# plan()'s one slice sets NPART = GATES (16 bytes: at HMAX 4096 the need is 49168 bytes, over a
# 48 KiB device's 49152), so check() counts it
ONE_SLICE_PART = GATES


def plan(device, hidden: int) -> tuple[int, int, int, int]:
    """(workgroup size, slices, HMAX, partial sums) of the recurrence for `hidden` units on
    `device`: rnn_common.plan() with this module's tunables."""
    return rnn.plan(device, hidden, GATES, K_PER_SLICE, MAX_WG, SLICE_CPU_DEVICES)


@register
class LSTMKernel(rnn.RecurrentKernel):
    op_types = ("LSTM",)
    op = "LSTM"
    gates = GATES
    input_names = INPUTS
    default_acts = DEFAULT_ACTS
    push = LSTM_PUSH
    bindings = BINDINGS
    input_flags = {3: HAS_B, 5: HAS_H0, 6: HAS_C0, 7: HAS_P, 4: HAS_LENS}
    output_flags = (WANT_Y, WANT_YH, WANT_YC)
    attr_flags = {"input_forget": INPUT_FORGET}
    clip_flag = CLIP
    plain_flag = PLAIN
    not_plain = CLIP | INPUT_FORGET
    one_slice_part = ONE_SLICE_PART
    tunables = sys.modules[__name__]
