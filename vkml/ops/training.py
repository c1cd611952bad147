"""Optimizer steps of the ai.onnx.preview.training domain: Adagrad, Adam, Momentum.

Each updates several tensors at once: the variadic inputs are grouped as all X, then all
gradients, then each state kind; outputs are all new X, then each new state kind. The
Gradient op is not here: it differentiates the enclosing graph by names, which a per-node
NumPy kernel cannot do.
"""
from __future__ import annotations

import numpy as np

from ..ir.graph import TensorDesc
from .registry import REQUIRED, Op, register

DOMAIN = "ai.onnx.preview.training"


def _scalar(x: np.ndarray, what: str) -> float:
    a = np.asarray(x)
    if a.size != 1:
        raise ValueError(f"{what} must be a scalar, got shape {a.shape}")
    return a.reshape(-1)[0].item()


class _Optimizer(Op):
    domain = DOMAIN
    since = 1
    n_groups = 0  # tensors per optimized variable: X, G and the states

    def _split(self, tensors: tuple[np.ndarray, ...]) -> list[tuple[np.ndarray, ...]]:
        if len(tensors) % self.n_groups:
            raise ValueError(f"{self.op_type} needs {self.n_groups} tensors per optimized variable, "
                             f"got {len(tensors)} after R and T")
        k = len(tensors) // self.n_groups
        groups = [tensors[i * k:(i + 1) * k] for i in range(self.n_groups)]
        for per_var in zip(*groups):
            if any(t.shape != per_var[0].shape for t in per_var):
                raise ValueError(f"{self.op_type}: a variable, its gradient and its state must share "
                                 f"one shape, got {[t.shape for t in per_var]}")
        return list(zip(*groups))

    def infer(self, inputs, consts):
        k = (len(inputs) - 2) // max(self.n_groups, 1)
        xs = inputs[2:2 + k]
        states = [inputs[2 + k * (g + 2):2 + k * (g + 3)] for g in range(self.n_groups - 2)]
        out = list(xs) + [d for s in states for d in s]
        return [TensorDesc(d.dtype, d.shape) for d in out]

    def run(self, r, t, *tensors):
        rate, step = float(_scalar(r, "R")), _scalar(t, "T")
        variables = self._split(tensors)
        news = [self.step(rate, step, *vs) for vs in variables]
        return [np.asarray(new[i]).astype(vs[0].dtype, copy=False)
                for i in range(self.n_groups - 1) for new, vs in zip(news, variables)]


@register
class Adagrad(_Optimizer):
    op_type = "Adagrad"
    attrs = {"decay_factor": 0.0, "epsilon": 1e-6, "norm_coefficient": 0.0}
    n_groups = 3

    def step(self, rate, step, x, g, h):
        r = rate / (1 + step * self.decay_factor)
        g = self.norm_coefficient * x + g
        h_new = h + g * g
        x_new = x - r * g / (np.sqrt(h_new) + self.epsilon)
        return x_new, h_new


@register
class Adam(_Optimizer):
    op_type = "Adam"
    attrs = {"alpha": 0.9, "beta": 0.999, "epsilon": 1e-6, "norm_coefficient": 0.0, "norm_coefficient_post": 0.0}
    n_groups = 4

    def step(self, rate, step, x, g, v, h):
        g = self.norm_coefficient * x + g
        v_new = self.alpha * v + (1 - self.alpha) * g
        h_new = self.beta * h + (1 - self.beta) * g * g
        r = rate * np.sqrt(1 - self.beta ** step) / (1 - self.alpha ** step) if step > 0 else rate
        x_new = x - r * v_new / (np.sqrt(h_new) + self.epsilon)
        return (1 - self.norm_coefficient_post) * x_new, v_new, h_new


@register
class Momentum(_Optimizer):
    op_type = "Momentum"
    attrs = {"alpha": REQUIRED, "beta": REQUIRED, "mode": REQUIRED, "norm_coefficient": REQUIRED}
    n_groups = 3

    def check(self):
        if self.mode not in ("standard", "nesterov"):
            raise self.fail(f"mode must be 'standard' or 'nesterov', got {self.mode!r}")

    def step(self, rate, step, x, g, v):
        g = self.norm_coefficient * x + g
        beta = self.beta if step > 0 else 1.0
        v_new = self.alpha * v + beta * g
        if self.mode == "nesterov":
            return x - rate * (g + self.alpha * v_new), v_new
        return x - rate * v_new, v_new
