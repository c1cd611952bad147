"""GPU kernel for GRU (every opset): one GEMM for the input projection, then shaders/gru.comp.

As vkml/kernels/lstm.py, sharing its code where the two are the same (vkml/kernels/
rnn_common.py): the projection X·Wᵀ of every time step and direction is one batched GEMM
(matmul.record_gemm, the directions as its batch, X shared) into a float32 scratch
[dirs][rows][3H] (float16 X and W are cast to float32 first, a constant W once when the node is
recorded, as the CPU operator computes in float32). The recurrence reads R transposed,
[dirs][gate][k][j] in R's own type, so that the invocations of neighbouring hidden units read
neighbouring words (R's rows are H words apart; read in place, a warp's loads touch 32 cache
lines). When R is a constant the transposition is done on the host and uploaded once, when the
node is recorded (once per run slot); otherwise a small dispatch (gru_prep) writes it at each
run. The recurrence is one dispatch of shaders/gru.comp, a workgroup per (direction, batch row),
h in shared memory; up to half the workgroup limit in hidden units, the invocations of a GPU also
split the k of the R·h products into slices (plan(): SLICES x units, ~K_PER_SLICE k each) and sum
the slices in shared memory (linear_before_reset 1: two barriers a step, one with a single slice;
linear_before_reset 0, whose Rh·(r ⊙ h) waits for r: four, two with a single slice); the loop over
k takes the shape that suits R in the L1 cache or streaming from L2 (L1_BYTES). Both biases are
added in the shader, grouped as the CPU operator groups them.

Supported: forward, reverse, bidirectional (and opset 1's default spelling "foward"); layouts 0
and 1; linear_before_reset 0 and 1; B, sequence_lens (int32) and initial_h present or not; any
of Y, Y_h; clip; every activation the CPU operator knows (Relu, Tanh, Sigmoid, Affine, LeakyRelu,
ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign, Softplus) with activation_alpha/beta
consumed as the CPU operator consumes them. On the CPU instead (check() says why): dtypes other
than float32/float16, hidden sizes whose state does not fit the device's shared memory, and what
the CPU operator rejects (it reports the error). A length in sequence_lens outside [0, seq]
faults (vkml/runtime/faults.py), so the GPU run raises as the CPU's does.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from . import rnn_common as rnn
from .common import PushBlock, dtype_name, fault_binding
from .registry import Kernel, TensorSpec, register

# seq, batch, hidden, dirs, reverse, layout, flags, fault site, clip, act[4], alpha[4], beta[4]
GRU_PUSH = PushBlock("8If4I4f4f", "gru")
BINDINGS = "rrrrrwwx"  # proj R B h0 lens | Y Y_h | fault
INPUTS = ("X", "W", "R", "B", "sequence_lens", "initial_h")
GATES = 3
HAS_B, HAS_H0, HAS_LENS, WANT_Y, WANT_YH, LBR, CLIP, PLAIN = (1 << i for i in range(8))
ACTIVATIONS = rnn.ACTIVATIONS  # the shader's activation codes (shaders/gru.comp)
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


def _direction(attrs: Mapping[str, Any]) -> str:
    direction = rnn.text(rnn.attr(attrs, "direction", "forward"))
    return "forward" if direction == "foward" else direction  # opset 1's default is spelt so


def activations(attrs: Mapping[str, Any], dirs: int) -> list[tuple[int, float, float]]:
    """(shader code, alpha, beta) of f and g per direction (4 entries, the second direction's
    repeating the first's when there is one), as vkml/ops/rnn.py's _activations picks them."""
    return rnn.activations("GRU", attrs, dirs, DEFAULT_ACTS)


def geometry(attrs: Mapping[str, Any], inputs: Sequence[TensorSpec | None]) -> tuple[int, int, int, int, int, int]:
    """(layout, dirs, seq, batch, input size, hidden) of the node; Unsupported where the CPU
    operator raises."""
    return rnn.geometry("GRU", attrs, inputs, GATES, _direction(attrs), INPUTS)


@register
class GRUKernel(Kernel):
    op_types = ("GRU",)
    faults = True  # sequence_lens outside [0, seq]

    def check(self, device, op_type, attrs, inputs):
        geom = geometry(attrs, inputs)
        activations(attrs, geom[1])
        rnn.check_node("GRU", device, attrs, inputs, geom, GATES, 2, self.infer(op_type, attrs, inputs))

    def infer(self, op_type, attrs, inputs):
        return rnn.out_specs(geometry(attrs, inputs), inputs[0].dtype, rnn.num_outputs(attrs), 2)

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        specs = [None if t is None else TensorSpec.of(t) for t in inputs]
        layout, dirs, seq, batch, n_in, hidden = geometry(attrs, specs)
        outs = [o if o is not None and o.nbytes else None for o in list(outputs) + [None] * 2][:2]
        if batch == 0 or hidden == 0 or all(o is None for o in outs):
            return
        consts = consts or {}
        device = rec.device
        x, w, r = inputs[:3]
        b, lens, h0 = (rnn.input_at(inputs, k) for k in range(3, 6))
        proj = rnn.record_projection(rec, x, w, consts.get(1), dirs, seq * batch, GATES * hidden, n_in)
        stand_in = device.alloc(16)

        def view(t):
            return stand_in if t is None or t.nbytes == 0 else t.view

        clip = attrs.get("clip")
        flags = ((HAS_B if b is not None else 0) | (HAS_H0 if h0 is not None else 0)
                 | (HAS_LENS if lens is not None else 0) | (WANT_Y if outs[0] is not None else 0)
                 | (WANT_YH if outs[1] is not None else 0)
                 | (LBR if int(rnn.attr(attrs, "linear_before_reset", 0)) else 0)
                 | (CLIP if clip is not None else 0))
        acts = activations(attrs, dirs)
        if not flags & CLIP and rnn.plain(acts, DEFAULT_ACTS):
            flags |= PLAIN  # the shader's cell skips the general activations
        if lens is not None:
            fault, site = fault_binding(rec, attrs, "GRU sequence_lens", seq + 1)
        else:
            fault, site = rec.constants(bytes(32)), 0
        reverse = int(_direction(attrs) == "reverse")
        push = GRU_PUSH.pack(seq, batch, hidden, dirs, reverse, layout, flags, site,
                             float(clip) if clip is not None else 0.0,
                             *(a[0] for a in acts), *(a[1] for a in acts), *(a[2] for a in acts))
        # R transposed to [dirs][gate][k][j], so the recurrence reads it coalesced: a constant R
        # once (the host transposes it and uploads it with the recording), else at every run
        dt = dtype_name(inputs[0].dtype)
        rt = rnn.record_transposed_r(rec, r, consts.get(2), GATES, dirs, hidden, f"gru_prep_{dt}",
                                     GRU_PUSH.size, push)
        wg, slices, hmax, npart = plan(device, hidden)
        step = rnn.loop_step(GATES, hidden, r.dtype, L1_BYTES)
        pipe = device.pipeline(f"gru_{dt}", BINDINGS, GRU_PUSH.size, (wg, hmax, slices, npart, step))
        rec.dispatch(pipe, [proj.view, rt, view(b), view(h0), view(lens), view(outs[0]), view(outs[1]), fault],
                     push, dirs * batch)
