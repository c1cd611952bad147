"""GPU kernel for the simple RNN (every opset): one GEMM for the input projection, then
shaders/rnn.comp.

As vkml/kernels/lstm.py and gru.py, sharing their code (vkml/kernels/rnn_common.py: the
projection GEMM, R transposed, the plan of the R·h products, the kernel's check/infer/record);
this module names RNN's inputs, outputs and shader flags, and keeps the tunables that tests patch.
One gate: h' = f(clip(((X·Wᵀ + Wb) + R·h) + Rb)), the CPU operator's order (vkml/ops/rnn.py
_RNN._cell); the slices of R·h are summed in shared memory (two barriers a step, one with a
single slice).

Supported: forward, reverse, bidirectional; layouts 0 and 1; B, sequence_lens (int32) and
initial_h present or not; any of Y, Y_h; clip; every activation the CPU operator knows, with
activation_alpha/beta consumed as the CPU operator consumes them; float32 and float16. On the CPU
instead (check() says why): other dtypes, hidden sizes whose state does not fit the device's
shared memory (counted as the other recurrences count it, 3 x HMAX floats: RNN uses 2 x HMAX + the
partial sums, so the check is conservative), and what the CPU operator rejects (it reports the
error). A length in sequence_lens outside [0, seq] faults (vkml/runtime/faults.py), so the GPU run
raises as the CPU's does.
"""
from __future__ import annotations

import sys

from . import rnn_common as rnn
from .common import PushBlock
from .registry import register

# seq, batch, hidden, dirs, reverse, layout, flags, fault site, clip, act[2], alpha[2], beta[2]
RNN_PUSH = PushBlock("8If2I2f2f", "rnn")
BINDINGS = "rrrrrwwx"  # proj R B h0 lens | Y Y_h | fault
INPUTS = ("X", "W", "R", "B", "sequence_lens", "initial_h")
GATES = 1
# shaders/rnn.comp's flags
HAS_B, HAS_H0, HAS_LENS, WANT_Y, WANT_YH, CLIP, PLAIN = (1 << i for i in range(7))
DEFAULT_ACTS = ("Tanh",)
# plan()'s and the loop shape's tunables (vkml/kernels/rnn_common.py; tests patch them here)
K_PER_SLICE = rnn.K_PER_SLICE
L1_BYTES = rnn.L1_BYTES
SLICE_CPU_DEVICES = rnn.SLICE_CPU_DEVICES
MAX_WG = rnn.MAX_WG


def plan(device, hidden: int) -> tuple[int, int, int, int]:
    """(workgroup size, slices, HMAX, partial sums) of the recurrence for `hidden` units on
    `device`: rnn_common.plan() with this module's tunables."""
    return rnn.plan(device, hidden, GATES, K_PER_SLICE, MAX_WG, SLICE_CPU_DEVICES)


@register
class RNNKernel(rnn.RecurrentKernel):
    op_types = ("RNN",)
    op = "RNN"
    gates = GATES
    input_names = INPUTS
    default_acts = DEFAULT_ACTS
    push = RNN_PUSH
    bindings = BINDINGS
    input_flags = {3: HAS_B, 5: HAS_H0, 4: HAS_LENS}
    output_flags = (WANT_Y, WANT_YH)
    attr_flags = {}
    clip_flag = CLIP
    plain_flag = PLAIN
    not_plain = CLIP
    tunables = sys.modules[__name__]
