"""GPU kernel for GRU (every opset): one GEMM for the input projection, then shaders/gru.comp.

As vkml/kernels/lstm.py, sharing its code (vkml/kernels/rnn_common.py: the projection GEMM, R
transposed, the plan of the R·h products, the kernel's check/infer/record); this module names
GRU's inputs, outputs and shader flags, and keeps the tunables that tests and bench patch. The
slices of the R·h products are summed in shared memory: linear_before_reset 1, two barriers a
step (one with a single slice); linear_before_reset 0, whose Rh·(r ⊙ h) waits for r, four (two
with a single slice).

Supported: forward, reverse, bidirectional (and opset 1's default spelling "foward"); layouts 0
and 1; linear_before_reset 0 and 1; B, sequence_lens (int32) and initial_h present or not; any
of Y, Y_h; clip; every activation the CPU operator knows, with activation_alpha/beta consumed as
the CPU operator consumes them. On the CPU instead (check() says why): dtypes other than
float32/float16, hidden sizes whose state does not fit the device's shared memory, and what the
CPU operator rejects (it reports the error). A length in sequence_lens outside [0, seq] faults
(vkml/runtime/faults.py), so the GPU run raises as the CPU's does.
"""
from __future__ import annotations

import sys
from typing import Any, Mapping

from . import rnn_common as rnn
from .common import PushBlock
from .registry import register

# seq, batch, hidden, dirs, reverse, layout, flags, fault site, clip, act[4], alpha[4], beta[4]
GRU_PUSH = PushBlock("8If4I4f4f", "gru")
BINDINGS = "rrrrrwwx"  # proj R B h0 lens | Y Y_h | fault
INPUTS = ("X", "W", "R", "B", "sequence_lens", "initial_h")
GATES = 3
# shaders/gru.comp's flags
HAS_B, HAS_H0, HAS_LENS, WANT_Y, WANT_YH, LBR, CLIP, PLAIN = (1 << i for i in range(8))
DEFAULT_ACTS = ("Sigmoid", "Tanh")
# plan()'s and the loop shape's tunables (vkml/kernels/rnn_common.py; tests and bench patch them here)
K_PER_SLICE = rnn.K_PER_SLICE
L1_BYTES = rnn.L1_BYTES
SLICE_CPU_DEVICES = rnn.SLICE_CPU_DEVICES
MAX_WG = rnn.MAX_WG


def plan(device, hidden: int) -> tuple[int, int, int, int]:
    """(workgroup size, slices, HMAX, partial sums) of the recurrence for `hidden` units on
    `device`: rnn_common.plan() with this module's tunables."""
    return rnn.plan(device, hidden, GATES, K_PER_SLICE, MAX_WG, SLICE_CPU_DEVICES)


@register
class GRUKernel(rnn.RecurrentKernel):
    op_types = ("GRU",)
    op = "GRU"
    gates = GATES
    input_names = INPUTS
    default_acts = DEFAULT_ACTS
    push = GRU_PUSH
    bindings = BINDINGS
    input_flags = {3: HAS_B, 5: HAS_H0, 4: HAS_LENS}
    output_flags = (WANT_Y, WANT_YH)
    attr_flags = {"linear_before_reset": LBR}
    clip_flag = CLIP
    plain_flag = PLAIN
    not_plain = CLIP
    tunables = sys.modules[__name__]

    def direction(self, attrs: Mapping[str, Any]) -> str:
        direction = super().direction(attrs)
        return "forward" if direction == "foward" else direction  # opset 1's default is spelt so
