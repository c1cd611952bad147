"""GPU kernel for LSTM (every opset): one GEMM for the input projection, then shaders/lstm.comp.

The projection X·Wᵀ of every time step and direction is one batched GEMM (matmul.record_gemm,
the directions as its batch, X shared) into a float32 scratch [dirs][rows][4H]. float16 X and W
are first cast to float32 scratch copies, so the projection is summed in float32 like the CPU
operator's (vkml/ops/rnn.py computes float16 nodes in float32 and rounds only the outputs). The
recurrence is one dispatch of shaders/lstm.comp: a workgroup per (direction, batch row) walks the
time steps, h_{t-1} in shared memory, a barrier per step; both biases are added there. The GPU
and the CPU then differ only in summation order (and the tanh/exp implementations).

On the CPU instead (check() says why): activations other than the defaults (Sigmoid, Tanh,
Tanh), `clip`, `input_forget=1`, hidden sizes whose state does not fit the device's shared
memory, dtypes other than float32/float16, and shapes the CPU operator rejects (it reports the
error). sequence_lens (int32) is supported: a length outside [0, seq] faults (vkml/runtime/
faults.py), so the GPU run raises as the CPU's does.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from ..vulkan.tensor import DeviceTensor
from .common import PushBlock, dtype_name, fault_binding, require_dtypes
from .elementwise import _record_unary
from .gemm import Gemm
from .matmul import record_gemm
from .reduce import check_size, max_invocations
from .registry import Kernel, TensorSpec, Unsupported, register

# seq, batch, hidden, dirs, reverse, layout, flags, fault site: 32 bytes
LSTM_PUSH = PushBlock("8I", "lstm")
BINDINGS = "rrrrrrrwwwx"  # proj R B h0 c0 P lens | Y Y_h Y_c | fault
FLOATS = ("f32", "f16")
DEFAULT_ACTS = ("sigmoid", "tanh", "tanh")
HAS_B, HAS_H0, HAS_C0, HAS_P, HAS_LENS, WANT_Y, WANT_YH, WANT_YC = (1 << i for i in range(8))
MIN_HMAX = 32


def _attr(attrs: Mapping[str, Any], name: str, default):
    v = attrs.get(name, default)
    return default if v is None else v


def _input(inputs: Sequence, k: int):
    return inputs[k] if len(inputs) > k else None


def _hmax(hidden: int) -> int:
    """The shared-memory size (in units) of the pipeline for `hidden`: a power of two, so a model
    needs few pipelines."""
    h = MIN_HMAX
    while h < hidden:
        h *= 2
    return h


def _shared_bytes(hmax: int) -> int:
    return 3 * hmax * 4  # h twice (swapped each step) and c, float32


def geometry(attrs: Mapping[str, Any], inputs: Sequence[TensorSpec | None]) -> tuple[int, int, int, int, int, int]:
    """(layout, dirs, seq, batch, input size, hidden) of the node; Unsupported where the CPU
    operator raises."""
    if len(inputs) < 3 or any(t is None for t in inputs[:3]):
        raise Unsupported("LSTM needs X, W and R")
    direction = _attr(attrs, "direction", "forward")
    if isinstance(direction, bytes):
        direction = direction.decode()
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


@register
class LSTMKernel(Kernel):
    op_types = ("LSTM",)
    faults = True  # sequence_lens outside [0, seq]

    def check(self, device, op_type, attrs, inputs):
        acts = attrs.get("activations")
        if acts:
            names = tuple((a.decode() if isinstance(a, bytes) else str(a)).lower() for a in acts)
            if names not in (DEFAULT_ACTS, DEFAULT_ACTS * 2):
                raise Unsupported(f"LSTM activations {list(acts)}: the GPU kernel has the defaults "
                                  "(Sigmoid, Tanh, Tanh) only")
        if attrs.get("clip") is not None:
            raise Unsupported("LSTM with clip: the GPU kernel does not clip the gates")
        if int(_attr(attrs, "input_forget", 0)):
            raise Unsupported("LSTM with input_forget=1: the GPU kernel couples no gates")
        layout, dirs, seq, batch, n_in, hidden = geometry(attrs, inputs)
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
        check_size(device, proj, *floats, *self.infer(op_type, attrs, inputs))

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
        device = rec.device
        x, w, r = inputs[:3]
        b, lens, h0, c0, p = (_input(inputs, k) for k in range(3, 8))
        rows = seq * batch
        g4 = 4 * hidden
        proj = DeviceTensor(device.alloc(max(16, dirs * rows * g4 * 4)), (dirs, rows, g4), np.float32)
        if rows:
            if x.dtype != np.float32:  # float16: project in float32, as the CPU operator does
                xs = DeviceTensor(device.alloc(max(16, x.nbytes * 2)), x.shape, np.float32)
                ws = DeviceTensor(device.alloc(max(16, w.nbytes * 2)), w.shape, np.float32)
                _record_unary(rec, "cast_f16_f32", "f16", x, xs)
                _record_unary(rec, "cast_f16_f32", "f16", w, ws)
                x, w = xs, ws
            gemm = Gemm(rows, g4, n_in, False, True, n_in, n_in, [dirs], [0], [g4 * n_in])
            record_gemm(rec, gemm, x, w, None, proj)
        stand_in = device.alloc(16)

        def view(t):
            return stand_in if t is None or t.nbytes == 0 else t.view

        flags = ((HAS_B if b is not None else 0) | (HAS_H0 if h0 is not None else 0)
                 | (HAS_C0 if c0 is not None else 0) | (HAS_P if p is not None else 0)
                 | (HAS_LENS if lens is not None else 0) | (WANT_Y if outs[0] is not None else 0)
                 | (WANT_YH if outs[1] is not None else 0) | (WANT_YC if outs[2] is not None else 0))
        if lens is not None:
            fault, site = fault_binding(rec, attrs, "LSTM sequence_lens", seq + 1)
        else:
            fault, site = rec.constants(bytes(32)), 0
        direction = _attr(attrs, "direction", "forward")
        reverse = int(direction in ("reverse", b"reverse"))
        hmax = _hmax(hidden)
        wg = 32
        while wg < min(hidden, 256, max_invocations(device)):
            wg *= 2
        pipe = device.pipeline(f"lstm_{dtype_name(inputs[0].dtype)}", BINDINGS, LSTM_PUSH.size, (wg, hmax))
        rec.dispatch(pipe, [proj.view, view(r), view(b), view(h0), view(c0), view(p), view(lens),
                            view(outs[0]), view(outs[1]), view(outs[2]), fault],
                     LSTM_PUSH.pack(seq, batch, hidden, dirs, reverse, layout, flags, site), dirs * batch)
