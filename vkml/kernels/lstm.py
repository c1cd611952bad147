"""GPU kernel for LSTM (every opset): one GEMM for the input projection, then shaders/lstm.comp.

The projection X·Wᵀ of every time step and direction is one batched GEMM (matmul.record_gemm,
the directions as its batch, X shared) into a float32 scratch [dirs][rows][4H]. float16 X and W
are first cast to float32 (a constant W once, when the node is recorded), so the projection is
summed in float32 like the CPU operator's (vkml/ops/rnn.py computes float16 nodes in float32 and
rounds only the outputs). The recurrence reads R transposed, [dirs][gate][k][j] in R's own type,
so that the invocations of neighbouring hidden units read neighbouring words (R's rows are H
words apart: read in place, a warp's loads touch 32 cache lines). When R is a constant the
transposition is done on the host and uploaded once, when the node is recorded (once per run
slot); otherwise a small dispatch (lstm_prep) writes it at each run. The recurrence is one
dispatch of shaders/lstm.comp, a workgroup per (direction, batch row), h in shared memory; up to
half the workgroup limit in hidden units, the invocations of a GPU also split the k of the R·h
products into slices (plan(): SLICES x units, ~K_PER_SLICE k each), so a step has many more loads
in flight, and sum the slices in shared memory (two barriers a step; one with a single slice); the
loop over k takes the shape that suits R in the L1 cache or streaming from L2 (L1_BYTES). Both
biases are added in the shader, grouped as the CPU operator groups them. The GPU and the CPU then
differ only in summation order (and the activations' exp/tanh).

Supported: forward, reverse, bidirectional; layouts 0 and 1; B, sequence_lens (int32),
initial_h, initial_c and P present or not; any of Y, Y_h, Y_c; clip; input_forget; every
activation the CPU operator knows (Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu,
ScaledTanh, HardSigmoid, Elu, Softsign, Softplus) with activation_alpha/beta consumed as the CPU
operator consumes them; float32 and float16. On the CPU instead (check() says why): other dtypes,
hidden sizes whose state (and the 4 floats of partial sums of one slice) does not fit the device's
shared memory, and what the CPU operator rejects (it reports the error). A length in
sequence_lens outside [0, seq] faults (vkml/runtime/faults.py), so the GPU run raises as the
CPU's does.

What GRU's kernel does the same (the node's reading, the projection, R's transposition, the
plan) is in vkml/kernels/rnn_common.py.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from . import rnn_common as rnn
from .common import PushBlock, dtype_name, fault_binding
from .registry import Kernel, TensorSpec, register

# seq, batch, hidden, dirs, reverse, layout, flags, fault site, clip, act[6], alpha[6], beta[6]
LSTM_PUSH = PushBlock("8If6I6f6f", "lstm")
BINDINGS = "rrrrrrrwwwx"  # proj R B h0 c0 P lens | Y Y_h Y_c | fault
INPUTS = ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P")
GATES = 4
(HAS_B, HAS_H0, HAS_C0, HAS_P, HAS_LENS, WANT_Y, WANT_YH, WANT_YC, CLIP,
 INPUT_FORGET, PLAIN) = (1 << i for i in range(11))
ACTIVATIONS = rnn.ACTIVATIONS  # the shader's activation codes (shaders/lstm.comp)
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


def _direction(attrs: Mapping[str, Any]) -> str:
    return rnn.text(rnn.attr(attrs, "direction", "forward"))


def activations(attrs: Mapping[str, Any], dirs: int) -> list[tuple[int, float, float]]:
    """(shader code, alpha, beta) of f, g and h per direction (6 entries, the second direction's
    repeating the first's when there is one), as vkml/ops/rnn.py's _activations picks them."""
    return rnn.activations("LSTM", attrs, dirs, DEFAULT_ACTS)


def geometry(attrs: Mapping[str, Any], inputs: Sequence[TensorSpec | None]) -> tuple[int, int, int, int, int, int]:
    """(layout, dirs, seq, batch, input size, hidden) of the node; Unsupported where the CPU
    operator raises."""
    return rnn.geometry("LSTM", attrs, inputs, GATES, _direction(attrs), INPUTS)


@register
class LSTMKernel(Kernel):
    op_types = ("LSTM",)
    faults = True  # sequence_lens outside [0, seq]

    def check(self, device, op_type, attrs, inputs):
        geom = geometry(attrs, inputs)
        activations(attrs, geom[1])
        rnn.check_node("LSTM", device, attrs, inputs, geom, GATES, 3, self.infer(op_type, attrs, inputs),
                       ONE_SLICE_PART)

    def infer(self, op_type, attrs, inputs):
        return rnn.out_specs(geometry(attrs, inputs), inputs[0].dtype, rnn.num_outputs(attrs), 3)

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        specs = [None if t is None else TensorSpec.of(t) for t in inputs]
        layout, dirs, seq, batch, n_in, hidden = geometry(attrs, specs)
        outs = [o if o is not None and o.nbytes else None for o in list(outputs) + [None] * 3][:3]
        if batch == 0 or hidden == 0 or all(o is None for o in outs):
            return
        consts = consts or {}
        device = rec.device
        x, w, r = inputs[:3]
        b, lens, h0, c0, p = (rnn.input_at(inputs, k) for k in range(3, 8))
        proj = rnn.record_projection(rec, x, w, consts.get(1), dirs, seq * batch, GATES * hidden, n_in)
        stand_in = device.alloc(16)

        def view(t):
            return stand_in if t is None or t.nbytes == 0 else t.view

        clip = attrs.get("clip")
        flags = ((HAS_B if b is not None else 0) | (HAS_H0 if h0 is not None else 0)
                 | (HAS_C0 if c0 is not None else 0) | (HAS_P if p is not None else 0)
                 | (HAS_LENS if lens is not None else 0) | (WANT_Y if outs[0] is not None else 0)
                 | (WANT_YH if outs[1] is not None else 0) | (WANT_YC if outs[2] is not None else 0)
                 | (CLIP if clip is not None else 0)
                 | (INPUT_FORGET if int(rnn.attr(attrs, "input_forget", 0)) else 0))
        acts = activations(attrs, dirs)
        if not flags & (CLIP | INPUT_FORGET) and rnn.plain(acts, DEFAULT_ACTS):
            flags |= PLAIN  # the shader's cell skips the general activations
        if lens is not None:
            fault, site = fault_binding(rec, attrs, "LSTM sequence_lens", seq + 1)
        else:
            fault, site = rec.constants(bytes(32)), 0
        reverse = int(_direction(attrs) == "reverse")
        push = LSTM_PUSH.pack(seq, batch, hidden, dirs, reverse, layout, flags, site,
                              float(clip) if clip is not None else 0.0,
                              *(a[0] for a in acts), *(a[1] for a in acts), *(a[2] for a in acts))
        # R transposed to [dirs][gate][k][j], so the recurrence reads it coalesced: a constant R
        # once (the host transposes it and uploads it with the recording), else at every run
        dt = dtype_name(inputs[0].dtype)
        rt = rnn.record_transposed_r(rec, r, consts.get(2), GATES, dirs, hidden, f"lstm_prep_{dt}",
                                     LSTM_PUSH.size, push)
        wg, slices, hmax, npart = plan(device, hidden)
        step = rnn.loop_step(GATES, hidden, r.dtype, L1_BYTES)
        pipe = device.pipeline(f"lstm_{dt}", BINDINGS, LSTM_PUSH.size, (wg, hmax, slices, npart, step))
        rec.dispatch(pipe, [proj.view, rt, view(b), view(h0), view(c0), view(p), view(lens),
                            view(outs[0]), view(outs[1]), view(outs[2]), fault], push, dirs * batch)
