"""GPU kernel for GRU (every opset): one GEMM for the input projection, then shaders/gru.comp.

As vkml/kernels/lstm.py: the projection X·Wᵀ of every time step and direction is one batched
GEMM (matmul.record_gemm, the directions as its batch, X shared) into a float32 scratch
[dirs][rows][3H] (float16 X and W are cast to float32 first, as the CPU operator computes in
float32). A small dispatch (gru_prep) writes R transposed, [dirs][gate][k][j] in float32, so
that the invocations of neighbouring hidden units read neighbouring words (R's rows are H words
apart; read in place, a warp's loads touch 32 cache lines: the recurrence ran 3.5-6x slower on an
H100). The recurrence is one dispatch of shaders/gru.comp, a workgroup per (direction, batch
row), h in shared memory, two barriers per step. Both biases are added in the shader, grouped as
the CPU operator groups them.

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

import math
from typing import Any, Mapping, Sequence

import numpy as np

from ..ops.rnn import _ACTIVATIONS
from ..vulkan.tensor import DeviceTensor
from .common import PushBlock, dtype_name, fault_binding, require_dtypes
from .elementwise import _record_unary
from .gemm import Gemm
from .matmul import record_gemm
from .reduce import check_size, max_invocations
from .registry import Kernel, TensorSpec, Unsupported, register

# seq, batch, hidden, dirs, reverse, layout, flags, fault site, clip, act[4], alpha[4], beta[4]
GRU_PUSH = PushBlock("8If4I4f4f", "gru")
BINDINGS = "rrrrrwwx"  # proj R B h0 lens | Y Y_h | fault
FLOATS = ("f32", "f16")
HAS_B, HAS_H0, HAS_LENS, WANT_Y, WANT_YH, LBR, CLIP = (1 << i for i in range(7))
# the shader's activation codes (shaders/gru.comp), by the CPU operator's names
ACTIVATIONS = {name: code for code, name in enumerate(
    ("relu", "tanh", "sigmoid", "affine", "leakyrelu", "thresholdedrelu", "scaledtanh", "hardsigmoid",
     "elu", "softsign", "softplus"))}
DEFAULT_ACTS = ("Sigmoid", "Tanh")
MIN_HMAX = 32


def _attr(attrs: Mapping[str, Any], name: str, default):
    v = attrs.get(name, default)
    return default if v is None else v


def _input(inputs: Sequence, k: int):
    return inputs[k] if len(inputs) > k else None


def _text(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _hmax(hidden: int) -> int:
    """The shared-memory size (in units) of the pipeline for `hidden`: a power of two."""
    h = MIN_HMAX
    while h < hidden:
        h *= 2
    return h


def _shared_bytes(hmax: int) -> int:
    return 3 * hmax * 4  # h, r ⊙ h (or h'), z: float32


def _direction(attrs: Mapping[str, Any]) -> str:
    direction = _text(_attr(attrs, "direction", "forward"))
    return "forward" if direction == "foward" else direction  # opset 1's default is spelt so


def activations(attrs: Mapping[str, Any], dirs: int) -> list[tuple[int, float, float]]:
    """(shader code, alpha, beta) of f and g per direction (4 entries, the second direction's
    repeating the first's when there is one), as vkml/ops/rnn.py's _activations picks them."""
    names = [_text(a) for a in attrs.get("activations") or []] or list(DEFAULT_ACTS) * dirs
    if len(names) == 2 and dirs == 2:
        names = names * 2
    if len(names) != 2 * dirs:
        raise Unsupported(f"GRU activations needs {2 * dirs} names, got {len(names)} "
                          "(the CPU operator reports the error)")
    alphas = [float(a) for a in attrs.get("activation_alpha") or []]
    betas = [float(b) for b in attrs.get("activation_beta") or []]
    out = []
    for name in names:
        key = name.lower()
        if key not in _ACTIVATIONS or key not in ACTIVATIONS:
            raise Unsupported(f"GRU activation {name!r} (the CPU operator reports the error)")
        _, da, db = _ACTIVATIONS[key]
        a = alphas.pop(0) if da is not None and alphas else da
        b = betas.pop(0) if db is not None and betas else db
        out.append((ACTIVATIONS[key], float(a or 0.0), float(b or 0.0)))
    return (out * 2)[:4]


def geometry(attrs: Mapping[str, Any], inputs: Sequence[TensorSpec | None]) -> tuple[int, int, int, int, int, int]:
    """(layout, dirs, seq, batch, input size, hidden) of the node; Unsupported where the CPU
    operator raises."""
    if len(inputs) < 3 or any(t is None for t in inputs[:3]):
        raise Unsupported("GRU needs X, W and R")
    direction = _direction(attrs)
    if direction not in ("forward", "reverse", "bidirectional"):
        raise Unsupported(f"direction {direction!r} (the CPU operator reports the error)")
    layout = int(_attr(attrs, "layout", 0))
    if layout not in (0, 1):
        raise Unsupported(f"layout {layout} (the CPU operator reports the error)")
    dirs = 2 if direction == "bidirectional" else 1
    x, w, r = (tuple(t.shape) for t in inputs[:3])
    if len(x) != 3:
        raise Unsupported(f"X of shape {x}, not 3-D (the CPU operator reports the error)")
    seq, batch, n_in = (x[1], x[0], x[2]) if layout else x
    if len(w) != 3 or w[0] != dirs or w[2] != n_in or w[1] % 3:
        raise Unsupported(f"W {w} does not fit {dirs} direction(s) and input size {n_in} "
                          "(the CPU operator reports the error)")
    hidden = w[1] // 3
    hs = attrs.get("hidden_size")
    if hs is not None and int(hs) != hidden:
        raise Unsupported(f"hidden_size {hs} but W implies {hidden} (the CPU operator reports the error)")
    if r != (dirs, 3 * hidden, hidden):
        raise Unsupported(f"R {r} is not {(dirs, 3 * hidden, hidden)} (the CPU operator reports the error)")
    state = (batch, dirs, hidden) if layout else (dirs, batch, hidden)
    optional = {3: ("B", (dirs, 6 * hidden)), 4: ("sequence_lens", (batch,)), 5: ("initial_h", state)}
    for k, (name, shape) in optional.items():
        t = _input(inputs, k)
        if t is None:
            continue
        have = tuple(t.shape)
        if have != shape and not (k == 4 and math.prod(have) == batch):  # the CPU reshapes lengths to 1-D
            raise Unsupported(f"{name} {have} is not {shape} (the CPU operator reports the error)")
    return layout, dirs, seq, batch, n_in, hidden


def _num_outputs(attrs: Mapping[str, Any]) -> int:
    return int(attrs.get("_num_outputs", 1) or 1)


@register
class GRUKernel(Kernel):
    op_types = ("GRU",)
    faults = True  # sequence_lens outside [0, seq]

    def check(self, device, op_type, attrs, inputs):
        layout, dirs, seq, batch, n_in, hidden = geometry(attrs, inputs)
        activations(attrs, dirs)
        clip = attrs.get("clip")
        if clip is not None and not float(clip) > 0:
            raise Unsupported(f"GRU clip {clip} (the CPU operator reports the error)")
        floats = [t for k, t in enumerate(inputs) if t is not None and k != 4]
        dts = {np.dtype(t.dtype) for t in floats}
        if len(dts) != 1:
            raise Unsupported(f"GRU with mixed dtypes {sorted(str(d) for d in dts)}")
        dt = dts.pop()
        if dtype_name(dt) not in FLOATS:
            raise Unsupported(f"GRU on the GPU supports float32 and float16, not {dt}")
        lens = _input(inputs, 4)
        if lens is not None and np.dtype(lens.dtype) != np.int32:
            raise Unsupported(f"sequence_lens of dtype {lens.dtype}, not int32")
        if _num_outputs(attrs) > 2:
            raise Unsupported(f"GRU with {_num_outputs(attrs)} outputs")
        require_dtypes(device, dt)
        lim = device.limits
        shared = _shared_bytes(_hmax(hidden))
        if shared > lim["max_compute_shared_memory_size"]:
            raise Unsupported(f"GRU hidden size {hidden}: its state needs {shared} bytes of shared memory, "
                              f"the device has {lim['max_compute_shared_memory_size']}")
        if dirs * batch > lim["max_compute_work_group_count"][0]:
            raise Unsupported(f"GRU over {dirs * batch} (direction, batch) rows exceeds the workgroup count limit")
        proj = TensorSpec((dirs, seq * batch, 3 * hidden), np.dtype(np.float32))
        rt = TensorSpec((dirs, 3 * hidden, hidden), np.dtype(np.float32))
        check_size(device, proj, rt, *floats, *self.infer(op_type, attrs, inputs))

    def infer(self, op_type, attrs, inputs):
        layout, dirs, seq, batch, _, hidden = geometry(attrs, inputs)
        dt = np.dtype(inputs[0].dtype)
        if layout:
            y, yh = (batch, seq, dirs, hidden), (batch, dirs, hidden)
        else:
            y, yh = (seq, dirs, batch, hidden), (dirs, batch, hidden)
        return [TensorSpec(y, dt), TensorSpec(yh, dt)][:_num_outputs(attrs)]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        specs = [None if t is None else TensorSpec.of(t) for t in inputs]
        layout, dirs, seq, batch, n_in, hidden = geometry(attrs, specs)
        outs = [o if o is not None and o.nbytes else None for o in list(outputs) + [None] * 2][:2]
        if batch == 0 or hidden == 0 or all(o is None for o in outs):
            return
        device = rec.device
        x, w, r = inputs[:3]
        b, lens, h0 = (_input(inputs, k) for k in range(3, 6))
        rows = seq * batch
        g3 = 3 * hidden
        proj = DeviceTensor(device.alloc(max(16, dirs * rows * g3 * 4)), (dirs, rows, g3), np.float32)
        if rows:
            if x.dtype != np.float32:  # float16: project in float32, as the CPU operator does
                xs = DeviceTensor(device.alloc(max(16, x.nbytes * 2)), x.shape, np.float32)
                ws = DeviceTensor(device.alloc(max(16, w.nbytes * 2)), w.shape, np.float32)
                _record_unary(rec, "cast_f16_f32", "f16", x, xs)
                _record_unary(rec, "cast_f16_f32", "f16", w, ws)
                x, w = xs, ws
            gemm = Gemm(rows, g3, n_in, False, True, n_in, n_in, [dirs], [0], [g3 * n_in])
            record_gemm(rec, gemm, x, w, None, proj)
        stand_in = device.alloc(16)

        def view(t):
            return stand_in if t is None or t.nbytes == 0 else t.view

        clip = attrs.get("clip")
        flags = ((HAS_B if b is not None else 0) | (HAS_H0 if h0 is not None else 0)
                 | (HAS_LENS if lens is not None else 0) | (WANT_Y if outs[0] is not None else 0)
                 | (WANT_YH if outs[1] is not None else 0)
                 | (LBR if int(_attr(attrs, "linear_before_reset", 0)) else 0)
                 | (CLIP if clip is not None else 0))
        if lens is not None:
            fault, site = fault_binding(rec, attrs, "GRU sequence_lens", seq + 1)
        else:
            fault, site = rec.constants(bytes(32)), 0
        acts = activations(attrs, dirs)
        reverse = int(_direction(attrs) == "reverse")
        hmax = _hmax(hidden)
        wg = 32
        while wg < min(hidden, 256, max_invocations(device)):
            wg *= 2
        push = GRU_PUSH.pack(seq, batch, hidden, dirs, reverse, layout, flags, site,
                             float(clip) if clip is not None else 0.0,
                             *(a[0] for a in acts), *(a[1] for a in acts), *(a[2] for a in acts))
        # R transposed to [dirs][gate][k][j] float32, so the recurrence reads it coalesced
        dt = dtype_name(inputs[0].dtype)
        n_rt = dirs * 3 * hidden * hidden
        rt = device.alloc(max(16, n_rt * 4))
        prep = device.pipeline(f"gru_prep_{dt}", "rw", GRU_PUSH.size, (256,))
        rec.dispatch(prep, [r.view, rt], push, prep.groups_for(n_rt))
        pipe = device.pipeline(f"gru_{dt}", BINDINGS, GRU_PUSH.size, (wg, hmax))
        rec.dispatch(pipe, [proj.view, rt, view(b), view(h0), view(lens), view(outs[0]), view(outs[1]), fault],
                     push, dirs * batch)
