"""Control flow: If, Loop, Scan, SequenceMap. Each runs subgraphs through the run's Scope.

Subgraph bodies are plain vkml Graphs (attributes); ``scope.run(graph, feeds)`` binds the formal
inputs positionally and resolves names read from enclosing graphs (Graph.outer) from the scope.
Loops iterate in Python: one subgraph run per iteration or per scanned slice is the unit of work.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.graph import UNKNOWN, Graph, TensorDesc
from ._common import normalize_axis
from .registry import REQUIRED, Op, register

_BOOL = np.dtype(np.bool_)
_INT64 = np.dtype(np.int64)


def _out_descs(g: Graph) -> list[TensorDesc]:
    return [g.values.get(name, UNKNOWN) for name in g.outputs]


def _join(a: TensorDesc, b: TensorDesc) -> TensorDesc:
    """What two possible types of one value have in common."""
    if a == b:
        return a
    if a.kind != b.kind:
        return UNKNOWN
    if a.kind != "tensor":
        return TensorDesc(None, None, a.kind, _join(a.elem or UNKNOWN, b.elem or UNKNOWN))
    dtype = a.dtype if a.dtype == b.dtype else None
    if a.shape is None or b.shape is None or len(a.shape) != len(b.shape):
        return TensorDesc(dtype, None)
    return TensorDesc(dtype, tuple(x if x == y else None for x, y in zip(a.shape, b.shape)))


def _stacked(d: TensorDesc, n: Any = None, axis: int = 0) -> TensorDesc:
    """The type of n values of type d stacked along a new axis."""
    if d.kind != "tensor" or d.shape is None:
        return TensorDesc(d.dtype, None)
    dims = list(d.shape)
    dims.insert(normalize_axis(axis, len(dims) + 1), n)
    return TensorDesc(d.dtype, tuple(dims))


def _truth(x: Any, what: str) -> bool:
    a = np.asarray(x)
    if a.size != 1:
        raise ValueError(f"{what} must hold exactly one value, got shape {list(a.shape)}")
    return bool(a.reshape(-1)[0])


def empty_stack(g: Graph, name: str) -> np.ndarray:
    """A zero-length stack of a subgraph output that never ran: its element shape as declared."""
    d = g.values.get(name, UNKNOWN)
    dtype = d.dtype if d.dtype is not None else np.dtype(np.float32)
    dims = [x if isinstance(x, int) else 0 for x in (d.shape or ())]
    return np.zeros([0] + dims, dtype=dtype)


def _stack(items: list, axis: int, what: str) -> np.ndarray:
    try:
        return np.stack(items, axis=axis)
    except ValueError as e:
        raise ValueError(f"{what}: per-iteration outputs differ in shape ({e})") from None


# ------------------------------------------------------------------ If
@register
class If(Op):
    op_type, since = "If", 1
    attrs = {"then_branch": REQUIRED, "else_branch": REQUIRED}
    needs_scope = True

    def check(self):
        for name in ("then_branch", "else_branch"):
            g = getattr(self, name)
            if not isinstance(g, Graph):
                raise self.fail(f"{name} must be a graph")
            if len(g.outputs) != self.n_outputs:
                raise self.fail(f"{name} has {len(g.outputs)} outputs, the node {self.n_outputs}")

    def infer(self, inputs, consts):
        return [_join(a, b) for a, b in zip(_out_descs(self.then_branch), _out_descs(self.else_branch))]

    def run(self, scope, cond):
        branch = self.then_branch if _truth(cond, "If's condition") else self.else_branch
        return scope.run(branch, [])


# ------------------------------------------------------------------ Loop
@register
class Loop(Op):
    op_type, since = "Loop", 1
    attrs = {"body": REQUIRED}
    needs_scope = True

    def check(self):
        n_carried = self.n_inputs - 2
        if n_carried < 0:
            raise self.fail("Loop needs at least the inputs M and cond (either may be empty)")
        if len(self.body.inputs) != n_carried + 2:
            raise self.fail(f"body takes {len(self.body.inputs)} inputs, expected {n_carried + 2} "
                            f"(iteration, condition and {n_carried} loop-carried)")
        if len(self.body.outputs) < 1 + n_carried:
            raise self.fail(f"body has {len(self.body.outputs)} outputs, expected at least {1 + n_carried}")
        if self.n_outputs > len(self.body.outputs) - 1:
            raise self.fail(f"node has {self.n_outputs} outputs, the body only {len(self.body.outputs) - 1}")

    def infer(self, inputs, consts):
        outs = _out_descs(self.body)
        n = self.n_inputs - 2
        carried = [_join(i, o) for i, o in zip(inputs[2:], outs[1:1 + n])]
        scans = [_stacked(d) for d in outs[1 + n:]]
        return (carried + scans)[:self.n_outputs]

    def run(self, scope, trip=None, cond=None, *initial):
        limit = None
        if trip is not None:
            t = np.asarray(trip)
            if t.size != 1:
                raise ValueError(f"Loop's trip count M must hold one value, got shape {list(t.shape)}")
            limit = int(t.reshape(-1)[0])
        go = True if cond is None else _truth(cond, "Loop's condition")
        carried = list(initial)
        n = len(carried)
        n_scan = len(self.body.outputs) - 1 - n
        scans: list[list] = [[] for _ in range(n_scan)]
        i = 0
        while go and (limit is None or i < limit):
            outs = scope.run(self.body, [np.array(i, np.int64), np.array(go), *carried])
            go = _truth(outs[0], "Loop body's condition output")
            carried = list(outs[1:1 + n])
            for k in range(n_scan):
                scans[k].append(outs[1 + n + k])
            i += 1
        stacked = [_stack(s, 0, "Loop scan output") if s else empty_stack(self.body, self.body.outputs[1 + n + k])
                   for k, s in enumerate(scans)]
        return carried + stacked


# ------------------------------------------------------------------ Scan
class _ScanBase(Op):
    op_type = "Scan"
    needs_scope = True

    def _counts(self) -> tuple[int, int, int]:
        """(states, scan inputs, scan outputs)."""
        n_in = len(self.body.inputs)
        n_state = n_in - self.num_scan_inputs
        return n_state, self.num_scan_inputs, len(self.body.outputs) - n_state

    def check(self):
        if self.num_scan_inputs < 1:
            raise self.fail(f"num_scan_inputs must be at least 1, got {self.num_scan_inputs}")
        n_state, m, k = self._counts()
        if n_state < 0 or k < 0:
            raise self.fail(f"body has {len(self.body.inputs)} inputs and {len(self.body.outputs)} outputs, "
                            f"inconsistent with num_scan_inputs={m}")
        self._check_lists(m, k)

    def _check_lists(self, m: int, k: int) -> None:
        for name, want in (("scan_input_directions", m), ("scan_input_axes", m),
                           ("scan_output_directions", k), ("scan_output_axes", k), ("directions", m)):
            v = getattr(self, name, None)
            if v is not None and len(v) != want:
                raise self.fail(f"{name} has {len(v)} entries, expected {want}")

    def _scan(self, scope, states: list, xs: list, in_axes: list[int], in_rev: list[int],
              out_axes: list[int], out_rev: list[int], length: int | None = None):
        n_state, m, k = self._counts()
        lens = {x.shape[a] for x, a in zip(xs, in_axes)}
        if len(lens) != 1:
            raise ValueError(f"Scan: scan inputs differ in sequence length ({sorted(lens)})")
        total = lens.pop()
        steps = total if length is None else length
        collected: list[list] = [[] for _ in range(k)]
        for t in range(steps):
            slices = [np.take(x, (steps - 1 - t) if r else t, axis=a) for x, a, r in zip(xs, in_axes, in_rev)]
            outs = scope.run(self.body, states + slices)
            states = list(outs[:n_state])
            for j in range(k):
                collected[j].append(outs[n_state + j])
        results = []
        for j, items in enumerate(collected):
            if out_rev[j]:
                items = items[::-1]
            name = self.body.outputs[n_state + j]
            if not items:
                y = empty_stack(self.body, name)
                results.append(np.moveaxis(y, 0, normalize_axis(out_axes[j], y.ndim)))
                continue
            rank = np.asarray(items[0]).ndim + 1
            results.append(_stack(items, normalize_axis(out_axes[j], rank), "Scan output"))
        return states, results


@register
class Scan8(_ScanBase):
    since = 8
    attrs = {"body": REQUIRED, "num_scan_inputs": REQUIRED, "directions": None}

    def infer(self, inputs, consts):
        n_state, m, k = self._counts()
        outs = _out_descs(self.body)
        batch = inputs[1].shape[0] if inputs[1].shape else None
        states = [_stacked(d, batch) for d in outs[:n_state]]
        seq = inputs[1 + n_state].shape[1] if inputs[1 + n_state].shape and len(inputs[1 + n_state].shape) > 1 else None
        scans = [_stacked(_stacked(d, seq), batch) for d in outs[n_state:]]
        return states + scans

    def run(self, scope, sequence_lens=None, *rest):
        n_state, m, k = self._counts()
        states, xs = list(rest[:n_state]), list(rest[n_state:])
        if len(xs) != m:
            raise ValueError(f"Scan: expected {m} scan inputs, got {len(xs)}")
        batch = xs[0].shape[0]
        seq = xs[0].shape[1]
        lens = np.full(batch, seq, np.int64) if sequence_lens is None else np.asarray(sequence_lens, np.int64).reshape(-1)
        if lens.shape != (batch,) or lens.min(initial=0) < 0 or lens.max(initial=0) > seq:
            raise ValueError(f"Scan: sequence_lens {lens.tolist()} must give one length in [0, {seq}] per batch item")
        rev = list(self.directions or [0] * m)
        out_states: list[list] = [[] for _ in range(n_state)]
        out_scans: list[list] = [[] for _ in range(k)]
        for b in range(batch):  # Scan-8 scans every batch item separately
            st, ys = self._scan(scope, [s[b] for s in states], [x[b, :lens[b]] for x in xs], [0] * m, rev,
                                [0] * k, [0] * k)
            for j, s in enumerate(st):
                out_states[j].append(s)
            for j, y in enumerate(ys):
                if y.shape[0] < seq:  # pad short sequences to the batch's length
                    y = np.concatenate([y, np.zeros((seq - y.shape[0],) + y.shape[1:], y.dtype)])
                out_scans[j].append(y)
        return [_stack(s, 0, "Scan state") for s in out_states] + [_stack(y, 0, "Scan output") for y in out_scans]


@register
class Scan(_ScanBase):
    since = 9
    attrs = {"body": REQUIRED, "num_scan_inputs": REQUIRED, "scan_input_axes": None, "scan_input_directions": None,
             "scan_output_axes": None, "scan_output_directions": None}

    def infer(self, inputs, consts):
        n_state, m, k = self._counts()
        outs = _out_descs(self.body)
        states = [_join(i, o) for i, o in zip(inputs[:n_state], outs[:n_state])]
        first = inputs[n_state] if len(inputs) > n_state else UNKNOWN
        seq = None
        if first.shape is not None:
            a = normalize_axis((self.scan_input_axes or [0] * m)[0], len(first.shape), self)
            seq = first.shape[a]
        axes = self.scan_output_axes or [0] * k
        return states + [_stacked(d, seq, axes[j]) for j, d in enumerate(outs[n_state:])]

    def run(self, scope, *rest):
        n_state, m, k = self._counts()
        states, xs = list(rest[:n_state]), list(rest[n_state:])
        if len(xs) != m:
            raise ValueError(f"Scan: expected {m} scan inputs, got {len(xs)}")
        in_axes = [normalize_axis(a, x.ndim) for a, x in zip(self.scan_input_axes or [0] * m, xs)]
        states, ys = self._scan(scope, states, xs, in_axes, list(self.scan_input_directions or [0] * m),
                                list(self.scan_output_axes or [0] * k), list(self.scan_output_directions or [0] * k))
        return states + ys


# ------------------------------------------------------------------ SequenceMap
@register
class SequenceMap(Op):
    op_type, since = "SequenceMap", 17
    attrs = {"body": REQUIRED}
    needs_scope = True

    def check(self):
        if len(self.body.inputs) != self.n_inputs:
            raise self.fail(f"body takes {len(self.body.inputs)} inputs, the node gives {self.n_inputs}")
        if len(self.body.outputs) != self.n_outputs:
            raise self.fail(f"body has {len(self.body.outputs)} outputs, the node {self.n_outputs}")

    def infer(self, inputs, consts):
        return [TensorDesc(None, None, "sequence", d) for d in _out_descs(self.body)]

    def run(self, scope, seq, *extra):
        if not isinstance(seq, list):
            raise ValueError(f"SequenceMap: input 0 must be a sequence, got {type(seq).__name__}")
        n = len(seq)
        for j, e in enumerate(extra):
            if isinstance(e, list) and len(e) != n:
                raise ValueError(f"SequenceMap: input {j + 1} has {len(e)} elements, input 0 has {n}")
        results: list[list] = [[] for _ in range(self.n_outputs)]
        for i in range(n):
            feeds = [seq[i]] + [e[i] if isinstance(e, list) else e for e in extra]
            for j, y in enumerate(scope.run(self.body, feeds)):
                results[j].append(y)
        return results
