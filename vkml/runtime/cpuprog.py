"""Lowering a float32 CPU plan to one native program per input signature (_cpuprog.Program).

On the Python path a CPU run holds the GIL between its NumPy calls: a small model's run is mostly
that (mnist: 11 steps of ~9 µs, ~2 µs of it arithmetic), so threads got less done than one. The
first run of each input signature runs the plan in Python and notes every value's shape (a
trace). If every step is one the program knows (Conv, Gemm, MatMul, elementwise arithmetic and
activations, fused chains, pools, Softmax on the last axis, BatchNormalization in inference,
reshapes as views), with float32 tensors and every other input a constant, the steps become
instructions over one arena: a Conv with the bias, residual and Relu after it folded in (on
vkml's own GEMM, include/cpu_gemm.h, where the CPU has AVX2 or AVX-512), big convolutions and
GEMMs in chunks on _cpuprog's thread pool. The program is checked against the traced
run's outputs, and the signature's runs (the first included) run in C without the GIL. Any other
plan or signature keeps the Python path. VKML_CPU_NATIVE=0 turns it off.
"""
from __future__ import annotations

import logging
import math
import threading
from typing import Any, Mapping

import numpy as np

from ..ops.fused import DOMAIN as FUSED_DOMAIN
from ..ops.fused import OP_TYPE as FUSED
from ..ops.fused import program_of
from ..ops.pool import _lowest, average_divisors
from ..ops._winograd import transformed_weights
from .. import config
from . import blas
from .executor import run_step
from .plan import Plan

log = logging.getLogger("vkml")

try:
    from . import _cpuprog
except ImportError:  # pragma: no cover - only when the extension is not built
    _cpuprog = None

F32 = np.dtype(np.float32)
ALIGN = 64
MAX_ARENA = 2 << 30  # bytes of intermediates a program may have (one arena per run in flight)
_CHAIN_CODES = range(15)  # FusedElementwise opcodes _cpuprog's chain runs (all of ops/fused.py's)
_ALIASES = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"}


class _Shaped:
    """A traced value's shape, where blas.gemm_macs reads TensorDescs."""

    __slots__ = ("shape",)

    def __init__(self, shape):
        self.shape = tuple(int(d) for d in shape)


class Unsupported(Exception):
    """Why a plan does not lower (logged at debug level; the plan runs in Python)."""


def trace(plan: Plan, feeds: Mapping[str, Any]) -> tuple[list[Any], dict[int, Any]]:
    """Run the plan in Python as run_plan does, and note each slot's array (shape, dtype and
    whether a step passed its input through): (outputs, {slot: (shape, dtype, same_as_input)})."""
    vals = list(plan.template)
    seen: dict[int, Any] = {}
    for name, sl in plan.input_slots:
        if name in feeds:
            vals[sl] = feeds[name]
    for sl, v in enumerate(vals):
        if isinstance(v, np.ndarray):
            seen[sl] = (v.shape, v.dtype, False)
    for step in plan.steps:
        ins = [vals[i] if i >= 0 else None for i in step.ins]
        run_step(plan, step, vals, free=False)
        for sl in step.outs:
            v = vals[sl] if sl >= 0 else None
            if isinstance(v, np.ndarray):
                seen[sl] = (v.shape, v.dtype, any(v is x for x in ins))
        for sl in step.frees:
            vals[sl] = None
    return [vals[s] for s in plan.out_slots], seen


class _Builder:
    """Storage and instructions while one plan lowers."""

    def __init__(self, plan: Plan, seen: dict[int, Any]):
        self.plan, self.seen = plan, seen
        self.consts = {sl for sl, v in enumerate(plan.template) if v is not None}
        self.inputs = [sl for _, sl in plan.input_slots]
        self.where: dict[int, tuple[int, int]] = {}  # slot -> (base, byte offset)
        self.produced: set[tuple[int, int]] = set()  # arena regions an instruction writes
        self.keep: list[np.ndarray] = []
        self.ins: list[tuple] = []
        self.sizes: list[int] = []  # bytes of each virtual buffer
        self.scratch = 0
        self.epilogues: dict[int, "Epilogue"] = {}
        for k, sl in enumerate(self.inputs):
            self.where[sl] = (2 + k, 0)

    def shape(self, sl: int) -> tuple[int, ...]:
        if sl not in self.seen:
            raise Unsupported(f"slot {sl} was never made")
        return tuple(self.seen[sl][0])

    def const(self, sl: int) -> np.ndarray:
        if sl not in self.consts:
            raise Unsupported(f"{self.name(sl)} must be a constant")
        return np.asarray(self.plan.template[sl])

    def name(self, sl: int) -> str:
        return next((n for n, s in self.plan.slots.items() if s == sl), str(sl))

    def array(self, a: np.ndarray) -> tuple[int, int]:
        """A float32 constant the program keeps: its absolute address."""
        a = np.ascontiguousarray(a, F32)
        self.keep.append(a)
        return (1, a.ctypes.data)

    def ref(self, sl: int) -> tuple[int, int]:
        """Where a float32 value the step reads lives."""
        if sl < 0:
            raise Unsupported("an omitted input")
        if self.seen.get(sl, (None, None))[1] != F32:
            raise Unsupported(f"{self.name(sl)} is not float32")
        if sl in self.where:
            return self.where[sl]
        if sl in self.consts:
            self.where[sl] = self.array(self.plan.template[sl])
            return self.where[sl]
        raise Unsupported(f"{self.name(sl)} has no storage")

    def new(self, sl: int) -> tuple[int, int]:
        """Fresh arena storage for a float32 value a step writes."""
        shape, dtype, _ = self.seen.get(sl, (None, None, None))
        if dtype != F32:
            raise Unsupported(f"{self.name(sl)} is {dtype}, not float32")
        size = math.prod(shape) * 4
        if size == 0:
            raise Unsupported(f"{self.name(sl)} is empty")
        # A virtual buffer until every instruction is known (_place_arena gives it an offset).
        self.where[sl] = ("v", len(self.sizes))
        self.sizes.append(-(-size // ALIGN) * ALIGN)
        self.produced.add(self.where[sl])
        return self.where[sl]

    def emit(self, op: str, code: int = 0, refs=(), params=(), floats=(), geom=None) -> None:
        self.ins.append((op, int(code), list(refs), [int(p) for p in params], [float(f) for f in floats],
                         None if geom is None else tuple(int(g) for g in geom)))


def _strides(shape: tuple[int, ...], full: tuple[int, ...]) -> list[int]:
    """Element strides of a C-contiguous `shape` broadcast to `full` (0 where it stretches)."""
    shape = (1,) * (len(full) - len(shape)) + tuple(shape)
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc if d != 1 else 0)
        acc *= d
    return out[::-1]


def _collapse(full, sa, sb):
    """Merge neighbouring dims whose strides continue each other (fewer, longer loops)."""
    dims = [[full[0], sa[0], sb[0]]] if full else [[1, 0, 0]]
    for n, a, b in zip(full[1:], sa[1:], sb[1:]):
        last = dims[-1]
        if n == 1:
            continue
        if last[0] == 1:
            dims[-1] = [n, a, b]
        elif last[1] == a * n and last[2] == b * n:
            dims[-1] = [last[0] * n, a, b]
        else:
            dims.append([n, a, b])
    return [d[0] for d in dims], [d[1] for d in dims], [d[2] for d in dims]


def _window_of(op, shape: tuple[int, ...], kernel=None):
    x = np.broadcast_to(np.zeros((), F32), shape)
    w = op._window(x) if kernel is None else op._window(x, kernel)
    if len(w.kernel) not in (1, 2) or any(b < 0 for b in w.pad_begin) or any(o == 0 for o in w.out):
        raise Unsupported("a window the native loops do not take")
    if len(w.kernel) == 1:
        return w, (1, shape[2]), (1, w.out[0]), (1, w.kernel[0], 1, w.strides[0], 1, w.dilations[0], 0, w.pad_begin[0])
    return w, shape[2:], w.out, (*w.kernel, *w.strides, *w.dilations, *w.pad_begin)


# How a Conv splits over the pool's threads (_cpuprog's CONV_* modes).
CONV_WHOLE, CONV_ROWS, CONV_POSITIONS, CONV_CHANNELS, CONV_KSPLIT, CONV_WINO = 0, 1, 2, 3, 4, 5
CHUNK_MACS = 1 << 20  # multiply-adds a chunk has at least (~20-30 µs on one core)
# A chunk of output rows (or positions) has this many positions at least, a chunk of output
# channels this many channels: narrower GEMMs run slower a multiply-add (resnet18's 7x7 layers in
# 4 chunks of rows took as long as one whole on the 2-core VM). Between the two, the one that
# makes more chunks: on the H200 host's 16 cores, 56x56 planes of 64 channels split into 4 chunks
# of channels and a lone resnet18 run took 18.7 ms.
ROW_CHUNK_POSITIONS = 64
MIN_CHUNK_CHANNELS = 8
# Programs of this many multiply-adds or more let at most one run per core execute at once
# (_cpuprog's gate): more would share the caches (resnet18, 2-core VM: 16 threads made 33 runs/s
# against 38 from one). Smaller ones run as many as call: mnist made 34k runs/s from 2 threads
# and 33k from 4 without the gate, 17k from 4 with it.
GATED_MACS = 1 << 24
# A convolution that splits by channels on the own GEMM may split by K instead (partial sums,
# then a reduce) where its rows are at most KSPLIT_POSITIONS long and K at least KSPLIT_MIN_K:
# each chunk of channels reads all of the packed columns, a chunk of K its share (one image and
# group only). Off (0): on the H200 host, resnet18 with it at 256 ran 12.8-14.3 ms a lone run
# against 9.4-16.3 without, and 106-166 runs/s from 4 threads against 117-141, in 4 interleaved
# rounds over 2 device calls (bench/results/checks/h200-2026-12-03-cpu-gemm-probe.jsonl).
KSPLIT_POSITIONS = 0
KSPLIT_MIN_K = 512
# Winograd F(4x4, 3x3) (CONV_WINO, include/cpu_winograd.h) for 3x3 convolutions of stride 1, one
# group, on the own GEMM, under VKML_WINOGRAD: auto where both channel counts are at least
# WINO_MIN_CHANNELS and the 4x4 output tiles over all images at least WINO_MIN_TILES (the
# columns of its 36 GEMMs: fewer pad the kernel's 32-column panels; resnet18 at batch 1: its
# 56x56 and 28x28 layers, 196 and 49 tiles, not the 14x14 and 7x7 ones); all wherever it applies.
# H200 host, 16 cores, 3 interleaved rounds (bench/results/checks/h200-2026-12-03-cpu-winograd-probe.jsonl):
# a lone resnet18 run 11.5-11.8 -> 9.1-9.7 ms (first round 14.2 -> 13.5), from 1 / 4 / 16 threads
# 84-92 -> 101-108, 132-135 -> 147-160, 214-224 -> 273-295 runs/s. 2-core VM: 21-22 -> 19.5 ms.
WINO_MIN_CHANNELS = 32
WINO_MIN_TILES = 48
# Where 4x4 tiles are too few, 2x2 ones (F(2x2, 3x3): 16 GEMMs, 2.25x fewer multiply-adds) when
# they reach WINO_MIN_TILES (resnet18's 14x14 layers: 49); 0: never. 2-core VM (AMD Zen 4), 3
# interleaved rounds: a lone resnet18 run 17.8-19.9 -> 17.4-18.4 ms, 1 / 2 threads 52-53 -> 54-58
# and 66-68 -> 71-74 runs/s (not measured on the H200 host: no device time left that session).
# VKML_WINOGRAD=all takes WINO_ALL_TILE everywhere (tests choose it).
WINO_SMALL_TILE = 2
WINO_ALL_TILE = 4


def _conv_split(macs: int, pointwise: bool, oh: int, npos: int, mg: int) -> tuple[int, int]:
    """(mode, chunks) for a convolution: up to two chunks per core, each of CHUNK_MACS at least;
    output rows where there are enough, else output channels (columns made first)."""
    parts = min(macs // CHUNK_MACS, 2 * CORES)
    if parts <= 1:
        return CONV_WHOLE, 1
    if pointwise:
        return CONV_POSITIONS, max(1, min(parts, npos // ROW_CHUNK_POSITIONS))
    # whichever gives more chunks of a useful size (rows where they tie: no separate columns pass)
    rows = min(parts, oh, max(1, npos // ROW_CHUNK_POSITIONS))
    channels = min(parts, mg // MIN_CHUNK_CHANNELS)
    if rows >= channels:
        return CONV_ROWS, max(1, rows)
    return CONV_CHANNELS, channels


GEMM_CHUNK_COLUMNS = 64  # a chunk of a Gemm/MatMul has this many output columns (or rows) at least
# A product of few rows streams its B once for little arithmetic, so it is timed as if it had
# this many: resnet18's classifier (1 x 512 by 512 x 1000, 2 MB of weights) took 0.13-0.14 ms of
# a 6 ms run whole on one core of the H200 host.
GEMM_MIN_ROWS = 16


def _gemm_split(m: int, n: int, k: int, batches: int = 1) -> tuple[int, int]:
    """(chunks a batch, by rows) for a Gemm/MatMul: up to two chunks per core over all batches,
    each of CHUNK_MACS at least, by columns where there are enough, else by rows; (0, 0) keeps
    it whole, batch after batch on the run's own thread."""
    total = min(batches * max(m, GEMM_MIN_ROWS) * n * k // CHUNK_MACS, 2 * CORES)
    if total <= 1:
        return 0, 0
    parts = total // max(1, batches)
    if parts <= 1:
        return 1, 0
    cols, rows = min(parts, n // GEMM_CHUNK_COLUMNS), min(parts, m // GEMM_CHUNK_COLUMNS)
    if cols >= rows:
        return max(1, cols), 0
    return rows, 1


def _conv_kernel(rows: int) -> tuple[int, int, int]:
    """(kernel set, MR, NR) of vkml's own GEMM a Conv of this many output channels a group takes
    (include/cpu_gemm.h), or (0, 0, 0) for NumPy's cblas_sgemm: where the CPU has none, where
    VKML_CPU_GEMM says blas, or where padding the channels to the kernel's panels would waste
    more than a fifth of its work (depthwise and other narrow groups)."""
    want = config.cpu_gemm_kernel()
    if _cpuprog is None or want == 0:
        return 0, 0, 0
    isa, mr, nr = _cpuprog.gemm_info(want)
    if isa == 0 or -(-rows // mr) * mr * 4 > rows * 5:
        return 0, 0, 0
    return isa, mr, nr


def _winograd(n: int, cg: int, mg: int, group: int, win, ohw, isa: int) -> int:
    """The output tile side a Conv takes CONV_WINO with (4 or 2; see WINO_MIN_CHANNELS), or 0."""
    mode = config.winograd()
    if mode == "off" or not isa or group != 1 or tuple(win.kernel) != (3, 3):
        return 0
    if any(s != 1 for s in win.strides) or any(d != 1 for d in win.dilations):
        return 0
    if mode == "all":
        return WINO_ALL_TILE
    if min(cg, mg) < WINO_MIN_CHANNELS:
        return 0
    for t in (4, WINO_SMALL_TILE):
        if t and n * -(-ohw[0] // t) * -(-ohw[1] // t) >= WINO_MIN_TILES:
            return t
    return 0


def _npad(n: int, nr: int) -> int:
    """n columns rounded up to whole panels of nr."""
    return -(-n // nr) * nr


CORES = blas.usable_cores()  # the programs' runs share these (_cpuprog's pool and gate)
if _cpuprog is not None:
    _cpuprog.set_cores(CORES)


class Epilogue:
    """What a Conv's own instruction also does: add a per-channel constant (where the Conv has
    no bias) and a residual of its shape, then Relu, in that order (the ops it absorbs)."""

    __slots__ = ("out", "bias", "residual", "relu")

    def __init__(self, out: int):
        self.out = out
        self.bias: np.ndarray | None = None
        self.residual: int | None = None
        self.relu = 0


def _fold_epilogues(b: "_Builder", plan: Plan) -> set[int]:
    """Find each Conv's epilogue (b.epilogues, by the step's id) and return the ids of the steps
    it absorbs: each absorbed value is read by the next op alone and is no output."""
    readers: dict[int, list[int]] = {}
    producer: dict[int, int] = {}
    for k, st in enumerate(plan.steps):
        for i in set(st.ins):
            if i >= 0:
                readers.setdefault(i, []).append(k)
        for o in st.outs:
            if o >= 0:
                producer[o] = k
    outputs = set(plan.out_slots)
    absorbed: set[int] = set()
    for k, st in enumerate(plan.steps):
        node = st.node
        if node.op_type != "Conv" or node.domain not in ("", "ai.onnx") or st.outs[0] < 0:
            continue
        has_bias = len(st.ins) > 2 and st.ins[2] >= 0
        epi = Epilogue(st.outs[0])
        shape = b.seen.get(epi.out, (None,))[0]
        stage = 0  # 0: bias may come, 1: a residual may, 2: Relu may, 3: done
        while stage < 3:
            cur = epi.out
            rs = readers.get(cur, [])
            if len(rs) != 1 or cur in outputs:
                break
            nxt = plan.steps[rs[0]]
            o = nxt.outs[0] if nxt.outs else -1
            if o < 0 or any(x >= 0 for x in nxt.outs[1:]) or nxt.node.domain not in ("", "ai.onnx") \
                    or b.seen.get(o, (None,))[0] != shape:
                break
            t = nxt.node.op_type
            if t == "Relu" and nxt.ins == (cur,):
                epi.relu, stage = 1, 3
            elif t == "Add" and len(nxt.ins) == 2 and cur in nxt.ins and nxt.ins[0] != nxt.ins[1]:
                other = nxt.ins[1] if nxt.ins[0] == cur else nxt.ins[0]
                if other in b.consts and stage == 0 and not has_bias:
                    v = np.asarray(plan.template[other])
                    padded = (1,) * (len(shape) - v.ndim) + v.shape
                    if v.dtype != F32 or padded != (1, shape[1]) + (1,) * (len(shape) - 2):
                        break  # (not one value per channel)
                    epi.bias, stage = v.reshape(-1), 1
                elif other not in b.consts and stage <= 1 and b.seen.get(other, (None, None))[:2] == (shape, F32) \
                        and producer.get(other, -1) < k:
                    epi.residual, stage = other, 2
                else:
                    break
            else:
                break
            absorbed.add(id(nxt))
            epi.out = o
        if epi.out != st.outs[0]:
            b.epilogues[id(st)] = epi
    return absorbed


def _lower_step(b: _Builder, step) -> None:
    node, op = step.node, step.node.op
    t = node.op_type
    if node.domain not in ("", "ai.onnx", FUSED_DOMAIN) or op.needs_scope:
        raise Unsupported(f"{t} from domain {node.domain!r}")
    if any(o >= 0 for o in step.outs[1:]):  # (MaxPool's indices, Dropout's mask, ...)
        raise Unsupported(f"{t} with more than one output")
    ins = list(step.ins)
    out = step.outs[0]
    if node.domain == FUSED_DOMAIN:
        if t != FUSED:
            raise Unsupported(f"{t} from domain {node.domain!r}")
        rows = program_of(node.attrs).reshape(-1, 2)
        if any(int(c) not in _CHAIN_CODES for c in rows[:, 0]):
            raise Unsupported("a fused chain with an opcode the program does not know")
        x = b.ref(ins[0])
        y = b.new(out)
        b.emit("chain", 0, [x, b.array(rows), None, y], [math.prod(b.shape(out)), len(rows)])
        return

    if t in _ALIASES or t == "Dropout":
        for i in ins[1:]:
            if i >= 0:
                b.const(i)  # shapes, axes, ratios: constants only
        if t == "Dropout" and not b.seen[out][2]:
            raise Unsupported("a Dropout that does not pass its input through")
        src = b.ref(ins[0])
        if math.prod(b.shape(out)) != math.prod(b.shape(ins[0])):
            raise Unsupported(f"{t} changes the element count")
        b.where[out] = src
        return

    if t == "Conv":
        xs, ws = b.shape(ins[0]), b.shape(ins[1])
        epi = b.epilogues.get(id(step), Epilogue(out))
        bias = None
        if len(ins) > 2 and ins[2] >= 0:
            if b.shape(ins[2]) != (ws[0],):
                raise Unsupported("a Conv bias that is not one value per output channel")
            bias = b.ref(ins[2])
        elif epi.bias is not None:
            bias = b.array(epi.bias)
        wt = b.const(ins[1])
        if len(xs) not in (3, 4) or wt.dtype != F32:
            raise Unsupported("Conv of rank other than 1-D/2-D, or not float32")
        win, hw, ohw, geom = _window_of(op, xs, op._kernel(ws, len(xs)))
        group = int(op.group)
        n, c = xs[:2]
        m = ws[0]
        if c % group or m % group or ws[1] != c // group:
            raise Unsupported("Conv channels do not fit its groups")
        cg, mg = c // group, m // group
        taps = math.prod(win.kernel)
        pointwise = taps == 1 and all(s == 1 for s in win.strides) and not any(win.pad_begin) and not any(win.pad_end)
        npos = ohw[0] * ohw[1]
        mode, parts = _conv_split(n * m * npos * cg * taps, pointwise, ohw[0], npos, mg)
        # The own GEMM for convolutions that split: below a chunk's work NumPy's sgemm on plain
        # columns is faster (mnist on the 2-core VM: 55-56 us a run on the own kernel, 44-45 on
        # NumPy's, 3000-run medians).
        own = _conv_kernel(mg)
        isa, mr, nr = own if mode != CONV_WHOLE else (0, 0, 0)
        kdim = cg * taps
        wino = _winograd(n, cg, mg, group, win, ohw, own[0]) if len(xs) == 4 else 0
        if wino:  # (whole or split: Winograd has its own chunks)
            isa, mr, nr = own
            mode = CONV_WINO
        if (isa and mode == CONV_CHANNELS and n * group == 1 and npos <= KSPLIT_POSITIONS
                and kdim >= KSPLIT_MIN_K):
            mode = CONV_KSPLIT
        if mode == CONV_WINO:  # V ((T + 2)^2, C, tiles), then M ((T + 2)^2, Mout, tiles)
            cols = (wino + 2) ** 2 * (cg + mg) * n * -(-ohw[0] // wino) * -(-ohw[1] // wino)
        elif pointwise:
            cols = 0
        elif mode == CONV_CHANNELS:  # the columns, then (own kernel) the same as packed panels
            cols = n * group * kdim * (npos + (_npad(npos, nr) if isa else 0))
        elif mode == CONV_KSPLIT:  # the columns, their packed panels, a partial sum a chunk of K
            cols = kdim * (npos + _npad(npos, nr)) + parts * mg * npos
        elif isa:  # each chunk's packed panels and one plane's columns, for any chunk count up to parts
            cols = (kdim + taps) * ((ohw[0] + parts) * ohw[1] + parts * nr)
        else:
            cols = kdim * npos
        b.scratch = max(b.scratch, cols * 4)
        if mode == CONV_WINO:  # U ((T + 2)^2, Mout, C), each in panels of mr rows
            w = b.array(_cpuprog.pack_weights(transformed_weights(wt, wino), isa, mr))
        elif isa:
            w = b.array(_cpuprog.pack_weights(wt.reshape(group, mg, kdim), isa, mr))
        else:
            w = b.array(wt.reshape(group, mg, kdim))
        res = b.ref(epi.residual) if epi.residual is not None else None
        y = b.new(epi.out)
        b.emit("conv", 0, [b.ref(ins[0]), w, bias, y, "scratch", res],
               [n, group, cg, mg, hw[0], hw[1], ohw[0], ohw[1], geom[0], geom[1], pointwise, epi.relu, mode, parts,
                isa, mr, *(tuple(win.pad_begin) + (0, 0))[:2], wino],
               geom=(hw[0], hw[1], ohw[0], ohw[1]) + geom)
        return

    if t in ("Gemm", "MatMul"):
        a_s, b_s, y_s = b.shape(ins[0]), b.shape(ins[1]), b.shape(out)
        alpha = 1.0
        if t == "Gemm":
            if len(a_s) != 2 or len(b_s) != 2:
                raise Unsupported("Gemm of non-matrices")
            alpha, beta = float(op.alpha), float(op.beta)
            a_ref = b.array(b.const(ins[0]).T) if op.transA else b.ref(ins[0])
            if op.transA and b.seen[ins[0]][1] != F32:
                raise Unsupported("Gemm's A is not float32")
            bm = b.const(ins[1]) if op.transB else None
            if bm is not None and bm.dtype != F32:
                raise Unsupported("Gemm's B is not float32")
            b_ref = b.array(bm.T) if op.transB else b.ref(ins[1])
            m, k = y_s[0], (a_s[0] if op.transA else a_s[1])
            nn = y_s[1]
            y = b.new(out)
            b.emit("gemm", 0, [a_ref, b_ref, None, y], [1, m, nn, k, 0, 0, 0, *_gemm_split(m, nn, k)], [alpha])
            if len(ins) > 2 and ins[2] >= 0 and beta != 0.0:
                cs = b.shape(ins[2])
                if beta != 1.0:
                    cc = b.const(ins[2])
                    if cc.dtype != F32:
                        raise Unsupported("Gemm's C is not float32")
                    c_ref = b.array(cc * F32.type(beta))
                else:
                    c_ref = b.ref(ins[2])
                _emit_binary(b, 1, y, y_s, c_ref, cs, y, y_s)
            return
        if len(a_s) < 2 or len(b_s) < 2:
            raise Unsupported("MatMul of a vector")
        k, nn = b_s[-2], b_s[-1]
        if len(b_s) == 2:
            batches, m, sb = 1, math.prod(a_s[:-1]), 0
        elif a_s[:-2] == b_s[:-2]:
            batches, m, sb = math.prod(a_s[:-2]), a_s[-2], k * nn
        else:
            raise Unsupported("MatMul whose batch dims broadcast")
        y = b.new(out)
        b.emit("gemm", 0, [b.ref(ins[0]), b.ref(ins[1]), None, y],
               [batches, m, nn, k, m * k, sb, m * nn, *_gemm_split(m, nn, k, batches)], [1.0])
        return

    if t in _cpuprog.BINARY:
        if len(ins) != 2:
            raise Unsupported(f"{t} of {len(ins)} inputs")
        y = b.new(out)
        _emit_binary(b, _cpuprog.BINARY[t], b.ref(ins[0]), b.shape(ins[0]), b.ref(ins[1]), b.shape(ins[1]),
                     y, b.shape(out))
        return

    if t in _cpuprog.UNARY:
        x = b.ref(ins[0])
        floats = ()
        if t == "LeakyRelu":
            floats = (float(op.alpha),)
        elif t == "HardSigmoid":
            floats = (float(op.alpha), float(op.beta))
        elif t == "Clip":
            if op.since >= 11:  # bounds as optional scalar inputs; min > max gives max everywhere
                lo_i, hi_i = (ins + [-1, -1])[1:3]
                lo = float(b.const(lo_i).reshape(())) if lo_i >= 0 else -math.inf
                hi = float(b.const(hi_i).reshape(())) if hi_i >= 0 else math.inf
            else:
                lo, hi = float(op.min), float(op.max)
            floats = (lo, hi)
        y = b.new(out)
        b.emit("unary", _cpuprog.UNARY[t], [x, None, None, y], [math.prod(b.shape(out))], floats)
        return

    if t in ("MaxPool", "AveragePool"):
        xs = b.shape(ins[0])
        win, hw, ohw, geom = _window_of(op, xs)
        planes = xs[0] * xs[1]
        x = b.ref(ins[0])
        y = b.new(out)
        g = (hw[0], hw[1], ohw[0], ohw[1]) + geom
        if t == "MaxPool":
            b.emit("maxpool", 0, [x, None, None, y], [planes], [float(_lowest(F32))], geom=g)
            return
        inv = average_divisors(op, xs, win).astype(F32)
        uniform = bool(inv.size) and bool(np.all(inv == inv.flat[0]))
        ones = b.array(np.ones(math.prod(win.kernel), F32))
        b.emit("avgpool", 0, [x, None if uniform else b.array(inv.reshape(-1)), ones, y], [planes],
               [float(inv.flat[0]) if uniform else 0.0], geom=g)
        return

    if t == "GlobalAveragePool":
        xs = b.shape(ins[0])
        if len(xs) < 3:
            raise Unsupported("GlobalAveragePool of rank < 3")
        x = b.ref(ins[0])
        b.emit("mean", 0, [x, None, None, b.new(out)], [xs[0] * xs[1], math.prod(xs[2:])])
        return

    if t == "Softmax":
        xs = b.shape(ins[0])
        axis = int(op.axis)
        if axis < 0:
            axis += len(xs)
        if axis != len(xs) - 1:
            raise Unsupported("Softmax over an axis other than the last")
        x = b.ref(ins[0])
        b.emit("softmax", 0, [x, None, None, b.new(out)], [math.prod(xs[:-1]), xs[-1]])
        return

    if t == "BatchNormalization":
        xs = b.shape(ins[0])
        if op._training() or len(xs) < 2 or len(ins) != 5:
            raise Unsupported("BatchNormalization in training mode")
        s, bb, mean, var = (b.const(i).astype(np.float64) for i in ins[1:])
        if any(p.shape != (xs[1],) for p in (s, bb, mean, var)):
            raise Unsupported("BatchNormalization parameters that are not one per channel")
        scale = s / np.sqrt(var + float(op.epsilon))
        shift = bb - mean * scale
        x = b.ref(ins[0])
        b.emit("affine", 0, [x, b.array(scale), b.array(shift), b.new(out)],
               [xs[0], xs[1], math.prod(xs[2:])])
        return

    raise Unsupported(f"{t} ({node.name!r}) has no native form")


def _emit_binary(b: _Builder, code: int, a, a_shape, c, c_shape, y, y_shape) -> None:
    full = tuple(y_shape)
    if np.broadcast_shapes(tuple(a_shape), tuple(c_shape)) != full:
        raise Unsupported("a broadcast that does not give the output's shape")
    dims, sa, sb = _collapse(full, _strides(a_shape, full), _strides(c_shape, full))
    if len(dims) > 6:
        raise Unsupported("a broadcast over more than 6 dims")
    pad = 6 - len(dims)
    params = [len(dims)] + dims + [0] * pad + sa + [0] * pad + sb + [0] * pad
    b.emit("binary", code, [a, c, None, y], params)


def lower(plan: Plan, seen: dict[int, Any], gemm: tuple[int, bool]) -> "_cpuprog.Program":
    """The plan's native program for the traced shapes; raises Unsupported."""
    if _cpuprog is None:
        raise Unsupported("the extension vkml.runtime._cpuprog is not built")
    if plan.graph.subgraphs():
        raise Unsupported("a plan with subgraphs")
    b = _Builder(plan, seen)
    for sl in b.inputs:
        if sl not in seen:
            raise Unsupported("an input that was not fed")
        if seen[sl][1] != F32:
            raise Unsupported(f"input {b.name(sl)} is {seen[sl][1]}, not float32")
    shapes = {name: _Shaped(seen[sl][0]) for name, sl in plan.slots.items() if sl in seen}
    absorbed = _fold_epilogues(b, plan)
    total = 0.0
    for step in plan.steps:
        if id(step) in absorbed:
            continue
        total += blas.gemm_macs(step.node, shapes) or 0
        _lower_step(b, step)
    ins = b.ins
    # Outputs: the storage of a value an instruction wrote becomes the output array itself;
    # anything else (an input, a constant, a second output on the same storage) is copied.
    n_in = len(b.inputs)
    claimed: dict[tuple[int, int], tuple[int, int]] = {}
    copies = []
    for j, sl in enumerate(plan.out_slots):
        if sl < 0 or sl not in seen or seen[sl][1] != F32:
            raise Unsupported("an output that is not a float32 tensor")
        src = b.ref(sl)
        dst = (2 + n_in + j, 0)
        if src in b.produced and src not in claimed:
            claimed[src] = dst
        else:
            nbytes = math.prod(seen[sl][0]) * 4
            copies.append(("copy", 0, [src, None, None, dst], [1, nbytes, 0, 0], [], None))
    ins = [(op, code, [claimed.get(r, r) if r is not None else None for r in refs], params, floats, geom)
           for op, code, refs, params, floats, geom in ins + copies]
    ins, size = _place_arena(ins, b.sizes, b.scratch)
    if size > MAX_ARENA:
        raise Unsupported(f"{size} bytes of intermediates")
    in_shapes = [seen[sl][0] for sl in b.inputs]
    out_shapes = [seen[sl][0] for sl in plan.out_slots]
    return _cpuprog.Program(ins, size, in_shapes, out_shapes, b.keep, gemm[0], gemm[1],
                            gated=total >= GATED_MACS)


def _place_arena(ins: list, sizes: list[int], scratch: int) -> tuple[list, int]:
    """Offsets in the arena for the virtual buffers ("v", k) the instructions name: a buffer lives
    from the first instruction that names it to the last, and buffers whose lives overlap get
    disjoint bytes (first fit), so later layers reuse memory the cache still holds. The column
    scratch comes after them. Returns the instructions with real refs and the arena's size."""
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for k, (_, _, refs, _, _, _) in enumerate(ins):
        for r in refs:
            if isinstance(r, tuple) and r[0] == "v":
                first.setdefault(r[1], k)
                last[r[1]] = k
    placed: list[tuple[int, int, int, int]] = []  # (offset, size, first, last)
    offset: dict[int, int] = {}
    for v in sorted(first, key=lambda v: (first[v], -sizes[v])):
        live = sorted((o, n) for o, n, a, z in placed if a <= last[v] and first[v] <= z)
        at = 0
        for o, n in live:
            if at + sizes[v] <= o:
                break
            at = max(at, o + n)
        offset[v] = at
        placed.append((at, sizes[v], first[v], last[v]))
    end = max((o + n for o, n, _, _ in placed), default=0)
    end = -(-end // ALIGN) * ALIGN

    def real(r):
        if r == "scratch":
            return (0, end)
        if isinstance(r, tuple) and r[0] == "v":
            return (0, offset[r[1]])
        return r

    return [(op, code, [real(r) for r in refs], params, floats, geom)
            for op, code, refs, params, floats, geom in ins], end + scratch


_NONE = object()  # a signature that does not lower


class Programs:
    """A session's native programs, one per input signature (feeds.signature), made on the
    signature's first run (`trace`, then `make`) and used from its second (`get`)."""

    MAX = 16  # signatures remembered; past that the oldest is forgotten

    def __init__(self, plan: Plan, gemm: tuple[int, bool]):
        self.plan = plan
        self.gemm = gemm
        self._progs: dict[tuple, Any] = {}
        self._lock = threading.Lock()

    def get(self, sig: tuple) -> Any:
        """The program for this signature; None where it has none (yet or ever)."""
        p = self._progs.get(sig)
        return None if p is None or p is _NONE else p

    def known(self, sig: tuple) -> bool:
        return sig in self._progs

    def trace(self, feeds: Mapping[str, Any]) -> tuple[list[Any], dict[int, Any]]:
        """A signature's first run: the plan in Python (under the caller's BLAS threads), with
        each value's shape noted for `make`."""
        return trace(self.plan, feeds)

    def make(self, sig: tuple, feeds: Mapping[str, Any], outs: list[Any], seen: dict[int, Any],
             run: Any) -> list[Any]:
        """Make this signature's program from its traced run and return the program's outputs
        (the bits its later lone runs give), or the traced run's where there is no program.
        run(prog, feeds) runs it as the session's later runs do (BLAS at one thread: more
        would change a split GEMM's bits)."""
        try:
            missing = [n for n, _ in self.plan.input_slots if n not in feeds]
            if missing:
                raise Unsupported(f"inputs {missing} were not fed")
            prog = lower(self.plan, seen, self.gemm)
            got = run(prog, feeds)
            for k, (mine, ref) in enumerate(zip(got, outs)):
                ref = np.asarray(ref)
                # atol relative to the output's range: a small output of large cancelling sums
                # carries their rounding (Winograd's transformed sums most: CONV_WINO); a lowering
                # bug is off by far more
                scale = float(np.abs(ref[np.isfinite(ref)]).max(initial=0.0))
                if mine.shape != ref.shape or not np.allclose(mine, ref, rtol=1e-3, atol=1e-4 * max(1.0, scale),
                                                              equal_nan=True):
                    err = np.nanmax(np.abs(mine - ref)) if mine.shape == ref.shape else "shape"
                    log.warning("vkml: the native CPU program of %s disagrees with its plan on output %d "
                                "(largest difference %s); runs of this input signature stay in Python",
                                self.plan.graph.name, k, err)
                    prog = _NONE
                    break
            else:
                outs = got
        except Unsupported as e:
            log.debug("vkml: %s runs in Python on the CPU: %s", self.plan.graph.name, e)
            prog = _NONE
        except Exception:  # a lowering bug must not fail a run whose outputs are already right
            log.warning("vkml: the native CPU program of %s could not be made; runs of this input "
                        "signature stay in Python", self.plan.graph.name, exc_info=True)
            prog = _NONE
        with self._lock:
            if len(self._progs) >= self.MAX:
                self._progs.pop(next(iter(self._progs)))
            self._progs[sig] = prog
        return outs
