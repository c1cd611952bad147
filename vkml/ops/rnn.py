"""Recurrent layers: RNN, GRU, LSTM (every opset's attributes).

The input projection X·Wᵀ for all time steps is one matmul; only the recurrence loops over
time. Per-sample sequence lengths are handled by masking, and the reverse direction by
reversing each sample's valid prefix (so padded steps stay at the end).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..ir.graph import TensorDesc
from ._precision import work_dtype
from .registry import Op, register

Activation = Callable[[np.ndarray], np.ndarray]


def _sigmoid(x):
    # Split by sign so exp never overflows.
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


# name → (function of (x, alpha, beta), default alpha, default beta); None: takes no parameter
_ACTIVATIONS: dict[str, tuple[Callable, float | None, float | None]] = {
    "relu": (lambda x, a, b: np.maximum(x, 0), None, None),
    "tanh": (lambda x, a, b: np.tanh(x), None, None),
    "sigmoid": (lambda x, a, b: _sigmoid(x), None, None),
    "affine": (lambda x, a, b: a * x + b, 1.0, 0.0),
    "leakyrelu": (lambda x, a, b: np.where(x >= 0, x, a * x), 0.01, None),
    "thresholdedrelu": (lambda x, a, b: np.where(x > a, x, 0), 1.0, None),
    "scaledtanh": (lambda x, a, b: a * np.tanh(b * x), 1.0, 1.0),
    "hardsigmoid": (lambda x, a, b: np.clip(a * x + b, 0, 1), 0.2, 0.5),
    "elu": (lambda x, a, b: np.where(x >= 0, x, a * np.expm1(np.minimum(x, 0))), 1.0, None),
    "softsign": (lambda x, a, b: x / (1 + np.abs(x)), None, None),
    "softplus": (lambda x, a, b: np.logaddexp(0, x), None, None),
}


def _activations(op: Op, defaults: list[str], n_dirs: int) -> list[list[Activation]]:
    """Per direction, the activation functions; alphas/betas are consumed in order by the
    functions that take them."""
    names = list(op.activations) if op.activations else defaults * n_dirs
    if len(names) == len(defaults) and n_dirs == 2:
        names = names * 2
    if len(names) != len(defaults) * n_dirs:
        raise op.fail(f"activations needs {len(defaults) * n_dirs} names for direction "
                      f"{op.direction!r}, got {len(names)}")
    alphas = list(op.activation_alpha or [])
    betas = list(op.activation_beta or [])
    funcs: list[Activation] = []
    for name in names:
        key = name.lower()
        if key not in _ACTIVATIONS:
            raise op.fail(f"unknown activation {name!r}; known: {sorted(_ACTIVATIONS)}")
        fn, da, db = _ACTIVATIONS[key]
        a = alphas.pop(0) if da is not None and alphas else da
        b = betas.pop(0) if db is not None and betas else db
        funcs.append(lambda x, fn=fn, a=a, b=b: fn(x, a, b))
    k = len(defaults)
    return [funcs[d * k:(d + 1) * k] for d in range(n_dirs)]


def _reverse_index(lens: np.ndarray, seq: int) -> np.ndarray:
    """[seq, batch] time index reversing each sample's first lens[b] steps in place."""
    t = np.arange(seq)[:, None]
    return np.where(t < lens[None, :], lens[None, :] - 1 - t, t)


class _Recurrent(Op):
    """Shared driver: layouts, directions, sequence lengths, initial states, outputs."""

    n_gates = 1
    default_acts: list[str] = []
    state_names = ("initial_h",)

    def check(self):
        if self.direction == "foward":  # the opset-1 GRU default is spelt so
            self.direction = "forward"
        if self.direction not in ("forward", "reverse", "bidirectional"):
            raise self.fail(f"direction must be forward, reverse or bidirectional, got {self.direction!r}")
        if getattr(self, "layout", 0) not in (0, 1):
            raise self.fail(f"layout must be 0 or 1, got {self.layout}")
        self.n_dirs = 2 if self.direction == "bidirectional" else 1
        self.acts = _activations(self, self.default_acts, self.n_dirs)
        if self.clip is not None and self.clip <= 0:
            raise self.fail(f"clip must be positive, got {self.clip}")

    # ------------------------------------------------------------------ shapes
    def infer(self, inputs, consts):
        x, w, r = inputs[0], inputs[1], inputs[2]
        batch = seq = hidden = None
        if x.shape is not None and len(x.shape) == 3:
            seq, batch = (x.shape[1], x.shape[0]) if getattr(self, "layout", 0) else (x.shape[0], x.shape[1])
        hidden = self.hidden_size
        if hidden is None and r.shape is not None and len(r.shape) == 3:
            hidden = r.shape[2]
        d = self.n_dirs
        if getattr(self, "layout", 0):
            y, yh = (batch, seq, d, hidden), (batch, d, hidden)
        else:
            y, yh = (seq, d, batch, hidden), (d, batch, hidden)
        dt = x.dtype
        return [TensorDesc(dt, y)] + [TensorDesc(dt, yh)] * (self.n_outputs - 1)

    def run(self, x, w, r, b=None, sequence_lens=None, *states):
        layout = getattr(self, "layout", 0)
        if x.ndim != 3:
            raise ValueError(f"X must be 3-D, got shape {x.shape}")
        if layout:
            x = x.transpose(1, 0, 2)
        seq, batch, n_in = x.shape
        g = self.n_gates
        d = self.n_dirs
        if w.ndim != 3 or w.shape[0] != d or w.shape[2] != n_in or w.shape[1] % g:
            raise ValueError(f"W shape {w.shape} does not fit {d} direction(s), {g} gates, input size {n_in}")
        hidden = w.shape[1] // g
        if self.hidden_size is not None and self.hidden_size != hidden:
            raise ValueError(f"hidden_size {self.hidden_size} but W implies {hidden}")
        if r.shape != (d, g * hidden, hidden):
            raise ValueError(f"R must have shape {(d, g * hidden, hidden)}, got {r.shape}")
        if b is not None and b.shape != (d, 2 * g * hidden):
            raise ValueError(f"B must have shape {(d, 2 * g * hidden)}, got {b.shape}")
        wt = work_dtype(x.dtype)
        if sequence_lens is None:
            lens = np.full(batch, seq, np.int64)
        else:
            lens = np.asarray(sequence_lens).astype(np.int64).reshape(-1)
            if lens.shape != (batch,) or (lens < 0).any() or (lens > seq).any():
                raise ValueError(f"sequence_lens must be {batch} values in [0, {seq}], got {sequence_lens}")
        init = []
        for name, s in zip(self.state_names, states + (None,) * (len(self.state_names) - len(states))):
            if s is None:
                init.append(np.zeros((d, batch, hidden), wt))
                continue
            s = s.transpose(1, 0, 2) if layout else s
            if s.shape != (d, batch, hidden):
                raise ValueError(f"{name} must have shape {(d, batch, hidden)} (layout {layout}), got {s.shape}")
            init.append(s.astype(wt))
        extra = self._extra(states[len(self.state_names):], d, hidden, wt)
        xw = x.astype(wt)
        ys, finals = [], []
        for k in range(d):
            reverse = self.direction == "reverse" or k == 1
            order = _reverse_index(lens, seq) if reverse else None
            xk = np.take_along_axis(xw, order[:, :, None], axis=0) if reverse else xw
            bias = np.zeros(2 * g * hidden, wt) if b is None else b[k].astype(wt)
            # The input projection of every step at once, W's bias folded in.
            proj = xk @ w[k].astype(wt).T + bias[:g * hidden]
            y, last = self._scan(proj, r[k].astype(wt), bias[g * hidden:], [s[k] for s in init],
                                 [e[k] for e in extra], lens, self.acts[k])
            if reverse:
                y = np.take_along_axis(y, order[:, :, None], axis=0)  # the reversal is its own inverse
            ys.append(y)
            finals.append(last)
        y = np.stack(ys, axis=1)  # [seq, dirs, batch, hidden]
        outs = [y] + [np.stack([f[j] for f in finals]) for j in range(len(finals[0]))]
        if layout:
            outs = [outs[0].transpose(2, 0, 1, 3)] + [o.transpose(1, 0, 2) for o in outs[1:]]
        return [o.astype(x.dtype) for o in outs[:max(self.n_outputs, 1)]]

    def _extra(self, inputs, d, hidden, wt) -> list[np.ndarray]:
        return []

    def _clip(self, v):
        return v if self.clip is None else np.clip(v, -self.clip, self.clip)

    def _scan(self, proj, r, rb, states, extra, lens, acts):
        """Run the recurrence over proj [seq, batch, gates*hidden]; returns (Y, final states)."""
        seq = proj.shape[0]
        hidden = r.shape[1]
        y = np.zeros(proj.shape[:2] + (hidden,), proj.dtype)
        for t in range(seq):
            live = (t < lens)[:, None]
            new = self._cell(proj[t], r, rb, states, extra, acts)
            states = [np.where(live, n, s) for n, s in zip(new, states)]
            y[t] = np.where(live, states[0], 0)
        return y, states


# ----------------------------------------------------------------------------- RNN

class _RNN(_Recurrent):
    op_type = "RNN"
    n_gates = 1
    default_acts = ["Tanh"]

    def _cell(self, xw, r, rb, states, extra, acts):
        (h,) = states
        return [acts[0](self._clip(xw + h @ r.T + rb))]


_COMMON = {"activation_alpha": None, "activation_beta": None, "activations": None, "clip": None,
           "direction": "forward", "hidden_size": None}


@register
class RNN1(_RNN):
    since = 1
    attrs = {**_COMMON, "output_sequence": 0}


@register
class RNN7(_RNN):
    since = 7
    attrs = dict(_COMMON)


@register
class RNN14(_RNN):
    since = 14
    attrs = {**_COMMON, "layout": 0}


@register
class RNN22(RNN14):
    since = 22


# ----------------------------------------------------------------------------- GRU

class _GRU(_Recurrent):
    op_type = "GRU"
    n_gates = 3
    default_acts = ["Sigmoid", "Tanh"]

    def _cell(self, xw, r, rb, states, extra, acts):
        (h,) = states
        n = r.shape[1]
        f, g = acts
        xz, xr, xh = xw[:, :n], xw[:, n:2 * n], xw[:, 2 * n:]
        hr = h @ r[:2 * n].T + rb[:2 * n]
        z = f(self._clip(xz + hr[:, :n]))
        rt = f(self._clip(xr + hr[:, n:]))
        if getattr(self, "linear_before_reset", 0):
            cand = g(self._clip(xh + rt * (h @ r[2 * n:].T + rb[2 * n:])))
        else:
            cand = g(self._clip(xh + (rt * h) @ r[2 * n:].T + rb[2 * n:]))
        return [(1 - z) * cand + z * h]


@register
class GRU1(_GRU):
    since = 1
    attrs = {**_COMMON, "direction": "foward", "output_sequence": 0}


@register
class GRU3(_GRU):
    since = 3
    attrs = {**_COMMON, "linear_before_reset": 0, "output_sequence": 0}


@register
class GRU7(_GRU):
    since = 7
    attrs = {**_COMMON, "linear_before_reset": 0}


@register
class GRU14(_GRU):
    since = 14
    attrs = {**_COMMON, "linear_before_reset": 0, "layout": 0}


@register
class GRU22(GRU14):
    since = 22


# ----------------------------------------------------------------------------- LSTM

class _LSTM(_Recurrent):
    op_type = "LSTM"
    n_gates = 4
    default_acts = ["Sigmoid", "Tanh", "Tanh"]
    state_names = ("initial_h", "initial_c")

    def run(self, x, w, r, b=None, sequence_lens=None, initial_h=None, initial_c=None, p=None):
        return super().run(x, w, r, b, sequence_lens, initial_h, initial_c, p)

    def _extra(self, inputs, d, hidden, wt):
        p = inputs[0] if inputs else None
        if p is None:
            return [np.zeros((d, 3 * hidden), wt)]
        if p.shape != (d, 3 * hidden):
            raise ValueError(f"P must have shape {(d, 3 * hidden)}, got {p.shape}")
        return [p.astype(wt)]

    def _cell(self, xw, r, rb, states, extra, acts):
        h, c = states
        (p,) = extra
        n = r.shape[1]
        f, g, hf = acts
        gates = xw + h @ r.T + rb  # order i, o, f, c
        i = f(self._clip(gates[:, :n] + p[:n] * c))
        if self.input_forget:
            fg = 1 - i
        else:
            fg = f(self._clip(gates[:, 2 * n:3 * n] + p[2 * n:] * c))
        cand = g(self._clip(gates[:, 3 * n:]))
        c_new = fg * c + i * cand
        o = f(self._clip(gates[:, n:2 * n] + p[n:2 * n] * c_new))
        return [o * hf(c_new), c_new]


@register
class LSTM1(_LSTM):
    since = 1
    attrs = {**_COMMON, "input_forget": 0, "output_sequence": 0}


@register
class LSTM7(_LSTM):
    since = 7
    attrs = {**_COMMON, "input_forget": 0}


@register
class LSTM14(_LSTM):
    since = 14
    attrs = {**_COMMON, "input_forget": 0, "layout": 0}


@register
class LSTM22(LSTM14):
    since = 22

