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
hidden sizes whose state does not fit the device's shared memory, and what the CPU operator
rejects (it reports the error). A length in sequence_lens outside [0, seq] faults
(vkml/runtime/faults.py), so the GPU run raises as the CPU's does.
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

# seq, batch, hidden, dirs, reverse, layout, flags, fault site, clip, act[6], alpha[6], beta[6]
LSTM_PUSH = PushBlock("8If6I6f6f", "lstm")
BINDINGS = "rrrrrrrwwwx"  # proj R B h0 c0 P lens | Y Y_h Y_c | fault
FLOATS = ("f32", "f16")
(HAS_B, HAS_H0, HAS_C0, HAS_P, HAS_LENS, WANT_Y, WANT_YH, WANT_YC, CLIP,
 INPUT_FORGET, PLAIN) = (1 << i for i in range(11))
# the shader's activation codes (shaders/lstm.comp), by the CPU operator's names
ACTIVATIONS = {name: code for code, name in enumerate(
    ("relu", "tanh", "sigmoid", "affine", "leakyrelu", "thresholdedrelu", "scaledtanh", "hardsigmoid",
     "elu", "softsign", "softplus"))}
DEFAULT_ACTS = ("Sigmoid", "Tanh", "Tanh")
MIN_HMAX = 32
K_PER_SLICE = 8  # the k of R·h an invocation sums per step, about (plan())
L1_BYTES = 128 << 10  # R of one direction up to this: the products' plain loop (shaders/lstm.comp STEP)
SLICE_CPU_DEVICES = False  # plan(): slices on CPU devices too (the tests set it, to run them on lavapipe)
MAX_WG = 1024


def _attr(attrs: Mapping[str, Any], name: str, default):
    v = attrs.get(name, default)
    return default if v is None else v


def _input(inputs: Sequence, k: int):
    return inputs[k] if len(inputs) > k else None


def _text(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _hmax(hidden: int) -> int:
    """The shared-memory size (in units) of the pipeline for `hidden`: a power of two, so a model
    needs few pipelines."""
    h = MIN_HMAX
    while h < hidden:
        h *= 2
    return h


def _shared_bytes(hmax: int, npart: int = 0) -> int:
    return (3 * hmax + npart) * 4  # h twice (swapped each step), c, the slices' partial sums: float32


def plan(device, hidden: int) -> tuple[int, int, int, int]:
    """(workgroup size, slices, HMAX, partial sums) of the recurrence for `hidden` units on
    `device`. Slices > 1 (each invocation one unit and ~K_PER_SLICE of its k) while a slice per
    unit fits the workgroup twice and the partial sums fit the shared memory; else one slice,
    each invocation owning units lid, lid + wg, ... One slice on CPU devices (lavapipe: the
    wider workgroup and the second barrier cost it more than the shorter sums save, 1.5-2x)
    unless SLICE_CPU_DEVICES."""
    hmax = _hmax(hidden)
    limit = 32
    while limit * 2 <= min(MAX_WG, max_invocations(device)):
        limit *= 2
    shared = device.limits["max_compute_shared_memory_size"]
    cpu = getattr(getattr(device, "info", None), "device_type", None) == "cpu"
    slices = 1
    while ((SLICE_CPU_DEVICES or not cpu) and slices * 2 * hmax <= limit and slices * 2 * K_PER_SLICE <= hmax
           and _shared_bytes(hmax, 4 * slices * 2 * hmax) <= shared):
        slices *= 2
    if slices > 1:
        return slices * hmax, slices, hmax, 4 * slices * hmax
    wg = 32
    while wg < min(hidden, limit):
        wg *= 2
    return wg, 1, hmax, 4


def _direction(attrs: Mapping[str, Any]) -> str:
    return _text(_attr(attrs, "direction", "forward"))


def activations(attrs: Mapping[str, Any], dirs: int) -> list[tuple[int, float, float]]:
    """(shader code, alpha, beta) of f, g and h per direction (6 entries, the second direction's
    repeating the first's when there is one), as vkml/ops/rnn.py's _activations picks them."""
    names = [_text(a) for a in attrs.get("activations") or []] or list(DEFAULT_ACTS) * dirs
    if len(names) == 3 and dirs == 2:
        names = names * 2
    if len(names) != 3 * dirs:
        raise Unsupported(f"LSTM activations needs {3 * dirs} names, got {len(names)} "
                          "(the CPU operator reports the error)")
    alphas = [float(a) for a in attrs.get("activation_alpha") or []]
    betas = [float(b) for b in attrs.get("activation_beta") or []]
    out = []
    for name in names:
        key = name.lower()
        if key not in _ACTIVATIONS or key not in ACTIVATIONS:
            raise Unsupported(f"LSTM activation {name!r} (the CPU operator reports the error)")
        _, da, db = _ACTIVATIONS[key]
        a = alphas.pop(0) if da is not None and alphas else da
        b = betas.pop(0) if db is not None and betas else db
        out.append((ACTIVATIONS[key], float(a or 0.0), float(b or 0.0)))
    return (out * 2)[:6]


def geometry(attrs: Mapping[str, Any], inputs: Sequence[TensorSpec | None]) -> tuple[int, int, int, int, int, int]:
    """(layout, dirs, seq, batch, input size, hidden) of the node; Unsupported where the CPU
    operator raises."""
    if len(inputs) < 3 or any(t is None for t in inputs[:3]):
        raise Unsupported("LSTM needs X, W and R")
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
    if len(w) != 3 or w[0] != dirs or w[2] != n_in or w[1] % 4:
        raise Unsupported(f"W {w} does not fit {dirs} direction(s) and input size {n_in} "
                          "(the CPU operator reports the error)")
    hidden = w[1] // 4
    hs = attrs.get("hidden_size")
    if hs is not None and int(hs) != hidden:
        raise Unsupported(f"hidden_size {hs} but W implies {hidden} (the CPU operator reports the error)")
    if r != (dirs, 4 * hidden, hidden):
        raise Unsupported(f"R {r} is not {(dirs, 4 * hidden, hidden)} (the CPU operator reports the error)")
    state = (batch, dirs, hidden) if layout else (dirs, batch, hidden)
    optional = {3: ("B", (dirs, 8 * hidden)), 4: ("sequence_lens", (batch,)), 5: ("initial_h", state),
                6: ("initial_c", state), 7: ("P", (dirs, 3 * hidden))}
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


def transposed_r(r: np.ndarray) -> np.ndarray:
    """R [dirs][4H][H] as the shader reads it: [dirs][gate][k][j], in R's own dtype."""
    d, g4, h = r.shape
    return np.ascontiguousarray(np.asarray(r).reshape(d, 4, g4 // 4, h).transpose(0, 1, 3, 2))


@register
class LSTMKernel(Kernel):
    op_types = ("LSTM",)
    faults = True  # sequence_lens outside [0, seq]

    def check(self, device, op_type, attrs, inputs):
        layout, dirs, seq, batch, n_in, hidden = geometry(attrs, inputs)
        activations(attrs, dirs)
        clip = attrs.get("clip")
        if clip is not None and not float(clip) > 0:
            raise Unsupported(f"LSTM clip {clip} (the CPU operator reports the error)")
        floats = [t for k, t in enumerate(inputs) if t is not None and k != 4]
        dts = {np.dtype(t.dtype) for t in floats}
        if len(dts) != 1:
            raise Unsupported(f"LSTM with mixed dtypes {sorted(str(d) for d in dts)}")
        dt = dts.pop()
        if dtype_name(dt) not in FLOATS:
            raise Unsupported(f"LSTM on the GPU supports float32 and float16, not {dt}")
        lens = _input(inputs, 4)
        if lens is not None and np.dtype(lens.dtype) != np.int32:
            raise Unsupported(f"sequence_lens of dtype {lens.dtype}, not int32")
        if _num_outputs(attrs) > 3:
            raise Unsupported(f"LSTM with {_num_outputs(attrs)} outputs")
        require_dtypes(device, dt)
        lim = device.limits
        shared = _shared_bytes(_hmax(hidden))
        if shared > lim["max_compute_shared_memory_size"]:
            raise Unsupported(f"LSTM hidden size {hidden}: its state needs {shared} bytes of shared memory, "
                              f"the device has {lim['max_compute_shared_memory_size']}")
        if dirs * batch > lim["max_compute_work_group_count"][0]:
            raise Unsupported(f"LSTM over {dirs * batch} (direction, batch) rows exceeds the workgroup count limit")
        proj = TensorSpec((dirs, seq * batch, 4 * hidden), np.dtype(np.float32))
        w32 = TensorSpec((dirs, 4 * hidden, n_in), np.dtype(np.float32))
        check_size(device, proj, w32, *floats, *self.infer(op_type, attrs, inputs))

    def infer(self, op_type, attrs, inputs):
        layout, dirs, seq, batch, _, hidden = geometry(attrs, inputs)
        dt = np.dtype(inputs[0].dtype)
        if layout:
            y, yh = (batch, seq, dirs, hidden), (batch, dirs, hidden)
        else:
            y, yh = (seq, dirs, batch, hidden), (dirs, batch, hidden)
        outs = [TensorSpec(y, dt), TensorSpec(yh, dt), TensorSpec(yh, dt)]
        return outs[:_num_outputs(attrs)]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        specs = [None if t is None else TensorSpec.of(t) for t in inputs]
        layout, dirs, seq, batch, n_in, hidden = geometry(attrs, specs)
        outs = [o if o is not None and o.nbytes else None for o in list(outputs) + [None] * 3][:3]
        if batch == 0 or hidden == 0 or all(o is None for o in outs):
            return
        consts = consts or {}
        device = rec.device
        x, w, r = inputs[:3]
        b, lens, h0, c0, p = (_input(inputs, k) for k in range(3, 8))
        rows = seq * batch
        g4 = 4 * hidden
        proj = DeviceTensor(device.alloc(max(16, dirs * rows * g4 * 4)), (dirs, rows, g4), np.float32)
        if rows:
            if x.dtype != np.float32:  # float16: project in float32, as the CPU operator does
                xs = DeviceTensor(device.alloc(max(16, x.nbytes * 2)), x.shape, np.float32)
                _record_unary(rec, "cast_f16_f32", "f16", x, xs)
                if consts.get(1) is not None:  # a constant W: widened once, here
                    ws = DeviceTensor.from_numpy(device, np.asarray(consts[1], np.float32))
                else:
                    ws = DeviceTensor(device.alloc(max(16, w.nbytes * 2)), w.shape, np.float32)
                    _record_unary(rec, "cast_f16_f32", "f16", w, ws)
                x, w = xs, ws
            gemm = Gemm(rows, g4, n_in, False, True, n_in, n_in, [dirs], [0], [g4 * n_in])
            record_gemm(rec, gemm, x, w, None, proj)
        stand_in = device.alloc(16)

        def view(t):
            return stand_in if t is None or t.nbytes == 0 else t.view

        clip = attrs.get("clip")
        flags = ((HAS_B if b is not None else 0) | (HAS_H0 if h0 is not None else 0)
                 | (HAS_C0 if c0 is not None else 0) | (HAS_P if p is not None else 0)
                 | (HAS_LENS if lens is not None else 0) | (WANT_Y if outs[0] is not None else 0)
                 | (WANT_YH if outs[1] is not None else 0) | (WANT_YC if outs[2] is not None else 0)
                 | (CLIP if clip is not None else 0)
                 | (INPUT_FORGET if int(_attr(attrs, "input_forget", 0)) else 0))
        acts = activations(attrs, dirs)
        plain = [ACTIVATIONS[a.lower()] for a in DEFAULT_ACTS]
        if not flags & (CLIP | INPUT_FORGET) and all(a[0] == plain[k % 3] for k, a in enumerate(acts)):
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
        if consts.get(2) is not None:
            rt = DeviceTensor.from_numpy(device, transposed_r(np.asarray(consts[2], r.dtype))).view
        else:
            n_rt = dirs * 4 * hidden * hidden
            rt = device.alloc(max(16, r.nbytes))
            prep = device.pipeline(f"lstm_prep_{dt}", "rw", LSTM_PUSH.size, (256,))
            rec.dispatch(prep, [r.view, rt], push, prep.groups_for(n_rt))
        wg, slices, hmax, npart = plan(device, hidden)
        step = int(4 * hidden * hidden * np.dtype(r.dtype).itemsize > L1_BYTES)
        pipe = device.pipeline(f"lstm_{dt}", BINDINGS, LSTM_PUSH.size, (wg, hmax, slices, npart, step))
        rec.dispatch(pipe, [proj.view, rt, view(b), view(h0), view(c0), view(p), view(lens),
                            view(outs[0]), view(outs[1]), view(outs[2]), fault], push, dirs * batch)
