"""What the recurrent kernels (vkml/kernels/lstm.py, gru.py) share.

Both read a node as the CPU operator (vkml/ops/rnn.py) reads it (geometry(), activations(),
check_node(): Unsupported where the CPU operator raises, or where the GPU cannot run it), project
the inputs with one batched GEMM into a float32 scratch [dirs][rows][gates x H]
(record_projection()), and give their recurrence R transposed, [dirs][gate][k][j] in R's own
dtype, so that the invocations of neighbouring hidden units read neighbouring words
(record_transposed_r(): a constant R transposed on the host and uploaded once, when the node is
recorded, i.e. once per run slot; a fed R by the op's prep dispatch at each run). Their shaders
(shaders/lstm.comp, gru.comp) split the R·h products of a step the same way, chosen here: plan()
(k slices summed in shared memory, or one slice) and loop_step() (the shape of the loop over k,
by R's size against the L1 cache). The tunables (K_PER_SLICE, L1_BYTES, MAX_WG,
SLICE_CPU_DEVICES) are the defaults: each kernel module keeps its own copy, which its tests and
bench/probe_rnn.py patch, and passes it in. RecurrentKernel is both kernels' check(), infer() and
record(): the kernels differ only in the class attributes it reads (inputs, outputs, flags).
"""
from __future__ import annotations

import math
from types import ModuleType
from typing import Any, Mapping, Sequence

import numpy as np

from ..ops.rnn import _ACTIVATIONS
from ..vulkan.tensor import DeviceTensor
from .common import PushBlock, dtype_name, fault_binding, require_dtypes
from .elementwise import _record_unary
from .gemm import Gemm
from .matmul import record_gemm
from .reduce import check_size, max_invocations
from .registry import Kernel, TensorSpec, Unsupported

FLOATS = ("f32", "f16")
# the shaders' activation codes (shaders/lstm.comp, gru.comp), by the CPU operator's names
ACTIVATIONS = {name: code for code, name in enumerate(
    ("relu", "tanh", "sigmoid", "affine", "leakyrelu", "thresholdedrelu", "scaledtanh", "hardsigmoid",
     "elu", "softsign", "softplus"))}
MIN_HMAX = 32
K_PER_SLICE = 8  # the k of R·h an invocation sums per step, about (plan())
L1_BYTES = 128 << 10  # R of one direction up to this: the products' plain loop (loop_step())
SLICE_CPU_DEVICES = False  # plan(): slices on CPU devices too (tests set it, to run them on lavapipe)
MAX_WG = 1024


def attr(attrs: Mapping[str, Any], name: str, default):
    v = attrs.get(name, default)
    return default if v is None else v


def input_at(inputs: Sequence, k: int):
    return inputs[k] if len(inputs) > k else None


def text(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def num_outputs(attrs: Mapping[str, Any]) -> int:
    return int(attrs.get("_num_outputs", 1) or 1)


def hmax(hidden: int) -> int:
    """The shared-memory size (in units) of the pipeline for `hidden`: a power of two, so a model
    needs few pipelines."""
    h = MIN_HMAX
    while h < hidden:
        h *= 2
    return h


def shared_bytes(hmax: int, npart: int = 0) -> int:
    """Shared memory of a recurrence: 3 x HMAX floats of state (LSTM: h twice, swapped each step,
    and c; GRU: h, and r ⊙ h and z or h' swapped with h) and the slices' partial sums (npart
    floats; shaders/lstm.comp declares its sh_part[NPART] with one slice too, where plan() gives
    NPART = gates: its kernel passes that as check_node()'s one_slice_part)."""
    return (3 * hmax + npart) * 4


def plan(device, hidden: int, gates: int, k_per_slice: int = K_PER_SLICE, max_wg: int = MAX_WG,
         slice_cpu_devices: bool = SLICE_CPU_DEVICES) -> tuple[int, int, int, int]:
    """(workgroup size, slices, HMAX, partial sums) of a recurrence of `gates` gates for `hidden`
    units on `device`. Slices > 1 (each invocation one unit and ~k_per_slice of its k) while a
    slice per unit fits the workgroup twice and the partial sums (gates per invocation) fit the
    shared memory; else one slice, each invocation owning units lid, lid + wg, ... (partial sums:
    `gates`, unused). One slice on CPU devices (lavapipe: the wider workgroup and the extra
    barriers cost it more than the shorter sums save, 1.5-2x) unless slice_cpu_devices."""
    hm = hmax(hidden)
    limit = 32
    while limit * 2 <= min(max_wg, max_invocations(device)):
        limit *= 2
    shared = device.limits["max_compute_shared_memory_size"]
    cpu = getattr(getattr(device, "info", None), "device_type", None) == "cpu"
    slices = 1
    while ((slice_cpu_devices or not cpu) and slices * 2 * hm <= limit and slices * 2 * k_per_slice <= hm
           and shared_bytes(hm, gates * slices * 2 * hm) <= shared):
        slices *= 2
    if slices > 1:
        return slices * hm, slices, hm, gates * slices * hm
    wg = 32
    while wg < min(hidden, limit):
        wg *= 2
    return wg, 1, hm, gates


def loop_step(gates: int, hidden: int, dtype, l1_bytes: int = L1_BYTES) -> int:
    """The shaders' STEP: 0 (a plain loop over k, which the driver unrolls) while R of one
    direction fits `l1_bytes`, else 1 (the loads of each k issued before its products, the loop
    kept rolled: best while R streams from L2). See shaders/lstm.comp products()."""
    return int(gates * hidden * hidden * np.dtype(dtype).itemsize > l1_bytes)


def activations(op: str, attrs: Mapping[str, Any], dirs: int, defaults: Sequence[str]) -> list[tuple[int, float, float]]:
    """(shader code, alpha, beta) of each activation per direction (2 x len(defaults) entries,
    the second direction's repeating the first's when there is one), as vkml/ops/rnn.py's
    _activations picks them."""
    n = len(defaults)
    names = [text(a) for a in attrs.get("activations") or []] or list(defaults) * dirs
    if len(names) == n and dirs == 2:
        names = names * 2
    if len(names) != n * dirs:
        raise Unsupported(f"{op} activations needs {n * dirs} names, got {len(names)} "
                          "(the CPU operator reports the error)")
    alphas = [float(a) for a in attrs.get("activation_alpha") or []]
    betas = [float(b) for b in attrs.get("activation_beta") or []]
    out = []
    for name in names:
        key = name.lower()
        if key not in _ACTIVATIONS or key not in ACTIVATIONS:
            raise Unsupported(f"{op} activation {name!r} (the CPU operator reports the error)")
        _, da, db = _ACTIVATIONS[key]
        a = alphas.pop(0) if da is not None and alphas else da
        b = betas.pop(0) if db is not None and betas else db
        out.append((ACTIVATIONS[key], float(a or 0.0), float(b or 0.0)))
    return (out * 2)[:2 * n]


def plain(acts: Sequence[tuple[int, float, float]], defaults: Sequence[str]) -> bool:
    """Whether every activation is its default (the shaders' PLAIN cell skips the general ones)."""
    codes = [ACTIVATIONS[a.lower()] for a in defaults]
    return all(a[0] == codes[k % len(codes)] for k, a in enumerate(acts))


def geometry(op: str, attrs: Mapping[str, Any], inputs: Sequence[TensorSpec | None], gates: int,
             direction: str, names: Sequence[str]) -> tuple[int, int, int, int, int, int]:
    """(layout, dirs, seq, batch, input size, hidden) of the node (inputs named `names`: X, W, R,
    B, sequence_lens, initial_h and the op's own); Unsupported where the CPU operator raises."""
    if len(inputs) < 3 or any(t is None for t in inputs[:3]):
        raise Unsupported(f"{op} needs X, W and R")
    if direction not in ("forward", "reverse", "bidirectional"):
        raise Unsupported(f"direction {direction!r} (the CPU operator reports the error)")
    layout = int(attr(attrs, "layout", 0))
    if layout not in (0, 1):
        raise Unsupported(f"layout {layout} (the CPU operator reports the error)")
    dirs = 2 if direction == "bidirectional" else 1
    x, w, r = (tuple(t.shape) for t in inputs[:3])
    if len(x) != 3:
        raise Unsupported(f"X of shape {x}, not 3-D (the CPU operator reports the error)")
    seq, batch, n_in = (x[1], x[0], x[2]) if layout else x
    if len(w) != 3 or w[0] != dirs or w[2] != n_in or w[1] % gates:
        raise Unsupported(f"W {w} does not fit {dirs} direction(s) and input size {n_in} "
                          "(the CPU operator reports the error)")
    hidden = w[1] // gates
    hs = attrs.get("hidden_size")
    if hs is not None and int(hs) != hidden:
        raise Unsupported(f"hidden_size {hs} but W implies {hidden} (the CPU operator reports the error)")
    if r != (dirs, gates * hidden, hidden):
        raise Unsupported(f"R {r} is not {(dirs, gates * hidden, hidden)} (the CPU operator reports the error)")
    state = (batch, dirs, hidden) if layout else (dirs, batch, hidden)
    shapes = {"B": (dirs, 2 * gates * hidden), "sequence_lens": (batch,), "initial_h": state,
              "initial_c": state, "P": (dirs, 3 * hidden)}
    for k, name in enumerate(names[3:], 3):
        t = input_at(inputs, k)
        if t is None:
            continue
        have, shape = tuple(t.shape), shapes[name]
        if have != shape and not (k == 4 and math.prod(have) == batch):  # the CPU reshapes lengths to 1-D
            raise Unsupported(f"{name} {have} is not {shape} (the CPU operator reports the error)")
    return layout, dirs, seq, batch, n_in, hidden


def out_specs(geom: tuple[int, int, int, int, int, int], dtype, n: int, max_outputs: int) -> list[TensorSpec]:
    """Y, Y_h (and the LSTM's Y_c): the first n of the op's max_outputs."""
    layout, dirs, seq, batch, _, hidden = geom
    dt = np.dtype(dtype)
    if layout:
        y, yh = (batch, seq, dirs, hidden), (batch, dirs, hidden)
    else:
        y, yh = (seq, dirs, batch, hidden), (dirs, batch, hidden)
    return ([TensorSpec(y, dt)] + [TensorSpec(yh, dt)] * (max_outputs - 1))[:n]


def check_node(op: str, device, attrs: Mapping[str, Any], inputs: Sequence[TensorSpec | None],
               geom: tuple[int, int, int, int, int, int], gates: int, max_outputs: int,
               outputs: Sequence[TensorSpec], one_slice_part: int = 0) -> None:
    """Kernel.check's part common to the recurrences, after geometry() and activations().
    one_slice_part: the floats of partial sums the shader declares with plan()'s one-slice plan
    (the plan every admitted hidden size can fall back to; sliced plans fit by construction),
    beyond its 3 x HMAX of state: LSTM's `gates`, GRU's 0."""
    layout, dirs, seq, batch, n_in, hidden = geom
    clip = attrs.get("clip")
    if clip is not None and not float(clip) > 0:
        raise Unsupported(f"{op} clip {clip} (the CPU operator reports the error)")
    floats = [t for k, t in enumerate(inputs) if t is not None and k != 4]
    dts = {np.dtype(t.dtype) for t in floats}
    if len(dts) != 1:
        raise Unsupported(f"{op} with mixed dtypes {sorted(str(d) for d in dts)}")
    dt = dts.pop()
    if dtype_name(dt) not in FLOATS:
        raise Unsupported(f"{op} on the GPU supports float32 and float16, not {dt}")
    lens = input_at(inputs, 4)
    if lens is not None and np.dtype(lens.dtype) != np.int32:
        raise Unsupported(f"sequence_lens of dtype {lens.dtype}, not int32")
    if num_outputs(attrs) > max_outputs:
        raise Unsupported(f"{op} with {num_outputs(attrs)} outputs")
    require_dtypes(device, dt)
    lim = device.limits
    shared = shared_bytes(hmax(hidden), one_slice_part)
    if shared > lim["max_compute_shared_memory_size"]:
        raise Unsupported(f"{op} hidden size {hidden}: its state needs {shared} bytes of shared memory, "
                          f"the device has {lim['max_compute_shared_memory_size']}")
    if dirs * batch > lim["max_compute_work_group_count"][0]:
        raise Unsupported(f"{op} over {dirs * batch} (direction, batch) rows exceeds the workgroup count limit")
    proj = TensorSpec((dirs, seq * batch, gates * hidden), np.dtype(np.float32))
    w32 = TensorSpec((dirs, gates * hidden, n_in), np.dtype(np.float32))
    check_size(device, proj, w32, *floats, *outputs)


def record_projection(rec, x, w, w_const, dirs: int, rows: int, gh: int, n_in: int) -> DeviceTensor:
    """The float32 scratch [dirs][rows][gh] of X·Wᵀ for every time step and direction: one
    batched GEMM (the directions as its batch, X shared). float16 X and W are cast to float32
    first (a constant W, `w_const`, once, on the host), so the projection is summed in float32
    like the CPU operator's (vkml/ops/rnn.py computes float16 nodes in float32 and rounds only
    the outputs)."""
    device = rec.device
    proj = DeviceTensor(device.alloc(max(16, dirs * rows * gh * 4)), (dirs, rows, gh), np.float32)
    if rows:
        if x.dtype != np.float32:  # float16: project in float32, as the CPU operator does
            xs = DeviceTensor(device.alloc(max(16, x.nbytes * 2)), x.shape, np.float32)
            _record_unary(rec, "cast_f16_f32", "f16", x, xs)
            if w_const is not None:  # a constant W: widened once, here
                ws = DeviceTensor.from_numpy(device, np.asarray(w_const, np.float32))
            else:
                ws = DeviceTensor(device.alloc(max(16, w.nbytes * 2)), w.shape, np.float32)
                _record_unary(rec, "cast_f16_f32", "f16", w, ws)
            x, w = xs, ws
        gemm = Gemm(rows, gh, n_in, False, True, n_in, n_in, [dirs], [0], [gh * n_in])
        record_gemm(rec, gemm, x, w, None, proj)
    return proj


def transposed_r(r: np.ndarray, gates: int) -> np.ndarray:
    """R [dirs][gates x H][H] as the shaders read it: [dirs][gate][k][j], in R's own dtype."""
    d, gh, h = r.shape
    return np.ascontiguousarray(np.asarray(r).reshape(d, gates, gh // gates, h).transpose(0, 1, 3, 2))


def record_transposed_r(rec, r, r_const, gates: int, dirs: int, hidden: int, prep: str,
                        push_size: int, push: bytes):
    """The buffer of R transposed ([dirs][gate][k][j], R's dtype) for the recurrence: a constant R
    (`r_const`) transposed on the host and uploaded with the recording (once per run slot), a fed
    one written at each run by the pipeline `prep` (the shader's PREP variant: R's buffer in, the
    transposition out, the recurrence's push constants)."""
    device = rec.device
    if r_const is not None:
        return DeviceTensor.from_numpy(device, transposed_r(np.asarray(r_const, r.dtype), gates)).view
    n_rt = dirs * gates * hidden * hidden
    rt = device.alloc(max(16, r.nbytes))
    pipe = device.pipeline(prep, "rw", push_size, (256,))
    rec.dispatch(pipe, [r.view, rt], push, pipe.groups_for(n_rt))
    return rt


class RecurrentKernel(Kernel):
    """check(), infer() and record() of a recurrence (LSTM, GRU). A subclass sets the attributes
    below; its module keeps the tunables (plan(), L1_BYTES) that tests and bench patch, so they
    are read from `tunables` at each call."""

    faults = True  # sequence_lens outside [0, seq]
    op: str  # "LSTM", "GRU"; lowercased, the shaders' prefix (lstm_f32, lstm_prep_f32)
    gates: int
    input_names: tuple[str, ...]  # X, W, R, B, sequence_lens, initial_h and the op's own
    default_acts: tuple[str, ...]
    push: PushBlock
    bindings: str
    # the optional inputs by position, in the order the shader binds them (after proj and R),
    # each with the flag that says it is present
    input_flags: Mapping[int, int]
    output_flags: tuple[int, ...]  # the flag of each output wanted (Y, Y_h, ...)
    attr_flags: Mapping[str, int]  # the flag of each integer attribute that is nonzero
    clip_flag: int
    plain_flag: int  # the shader's PLAIN cell: every activation its default...
    not_plain: int  # ...and none of these flags
    one_slice_part: int = 0  # check_node()'s
    tunables: ModuleType

    def direction(self, attrs: Mapping[str, Any]) -> str:
        return text(attr(attrs, "direction", "forward"))

    def node_geometry(self, attrs: Mapping[str, Any],
                      inputs: Sequence[TensorSpec | None]) -> tuple[int, int, int, int, int, int]:
        return geometry(self.op, attrs, inputs, self.gates, self.direction(attrs), self.input_names)

    def node_activations(self, attrs: Mapping[str, Any], dirs: int) -> list[tuple[int, float, float]]:
        return activations(self.op, attrs, dirs, self.default_acts)

    def check(self, device, op_type: str, attrs: Mapping[str, Any], inputs: Sequence[TensorSpec | None]) -> None:
        geom = self.node_geometry(attrs, inputs)
        self.node_activations(attrs, geom[1])
        check_node(self.op, device, attrs, inputs, geom, self.gates, len(self.output_flags),
                   self.infer(op_type, attrs, inputs), self.one_slice_part)

    def infer(self, op_type: str, attrs: Mapping[str, Any], inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        return out_specs(self.node_geometry(attrs, inputs), inputs[0].dtype, num_outputs(attrs),
                         len(self.output_flags))

    def record(self, rec, op_type: str, attrs: Mapping[str, Any], inputs: Sequence, outputs: Sequence,
               consts: Mapping[int, np.ndarray] | None = None) -> None:
        specs = [None if t is None else TensorSpec.of(t) for t in inputs]
        layout, dirs, seq, batch, n_in, hidden = self.node_geometry(attrs, specs)
        n_out = len(self.output_flags)
        outs = [o if o is not None and o.nbytes else None for o in list(outputs) + [None] * n_out][:n_out]
        if batch == 0 or hidden == 0 or all(o is None for o in outs):
            return
        consts = consts or {}
        device = rec.device
        x, w, r = inputs[:3]
        proj = record_projection(rec, x, w, consts.get(1), dirs, seq * batch, self.gates * hidden, n_in)
        stand_in = device.alloc(16)

        def view(t):
            return stand_in if t is None or t.nbytes == 0 else t.view

        clip = attrs.get("clip")
        flags = self.clip_flag if clip is not None else 0
        for k, flag in self.input_flags.items():
            flags |= flag if input_at(inputs, k) is not None else 0
        for o, flag in zip(outs, self.output_flags):
            flags |= flag if o is not None else 0
        for key, flag in self.attr_flags.items():
            flags |= flag if int(attr(attrs, key, 0)) else 0
        acts = self.node_activations(attrs, dirs)
        if not flags & self.not_plain and plain(acts, self.default_acts):
            flags |= self.plain_flag  # the shader's cell skips the general activations
        if input_at(inputs, 4) is not None:
            fault, site = fault_binding(rec, attrs, f"{self.op} sequence_lens", seq + 1)
        else:
            fault, site = rec.constants(bytes(32)), 0
        reverse = int(self.direction(attrs) == "reverse")
        push = self.push.pack(seq, batch, hidden, dirs, reverse, layout, flags, site,
                              float(clip) if clip is not None else 0.0,
                              *(a[0] for a in acts), *(a[1] for a in acts), *(a[2] for a in acts))
        # R transposed to [dirs][gate][k][j], so the recurrence reads it coalesced: a constant R
        # once (the host transposes it and uploads it with the recording), else at every run
        dt = dtype_name(inputs[0].dtype)
        name = self.op.lower()
        rt = record_transposed_r(rec, r, consts.get(2), self.gates, dirs, hidden, f"{name}_prep_{dt}",
                                 self.push.size, push)
        wg, slices, hm, npart = self.tunables.plan(device, hidden)
        step = loop_step(self.gates, hidden, r.dtype, self.tunables.L1_BYTES)
        pipe = device.pipeline(f"{name}_{dt}", self.bindings, self.push.size, (wg, hm, slices, npart, step))
        bound = [view(input_at(inputs, k)) for k in self.input_flags] + [view(o) for o in outs]
        rec.dispatch(pipe, [proj.view, rt, *bound, fault], push, dirs * batch)
