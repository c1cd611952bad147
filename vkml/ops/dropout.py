"""Dropout: identity at inference; from opset 12 a training_mode input turns on random masking.

The mask is drawn here (uniform ≥ ratio) rather than through a Bernoulli op. With the ``seed``
attribute the draw is reproducible: a generator seeded with it, fresh for every run.
"""
from __future__ import annotations

import numpy as np

from ._common import same_as
from ._precision import is_floating
from .registry import Op, register

_BOOL = np.dtype(np.bool_)


@register
class Dropout(Op):
    """Opsets 1–11: inference only (is_test or not); the optional mask is all ones."""

    op_type, since = "Dropout", 1
    attrs = {"consumed_inputs": None, "is_test": 0, "ratio": 0.5}
    mask_like_input = True  # before opset 10 the mask has the input's type

    def infer(self, inputs, consts):
        x = inputs[0]
        mask = same_as(x) if self.mask_like_input else same_as(x, _BOOL)
        return [same_as(x), mask][: self.n_outputs]

    def run(self, x, *_):
        outs = [x]
        if self.n_outputs > 1:
            outs.append(np.ones(x.shape, x.dtype if self.mask_like_input else _BOOL))
        return outs


@register
class Dropout6(Dropout):
    since = 6
    attrs = {"is_test": 0, "ratio": 0.5}


@register
class Dropout7(Dropout):
    since = 7
    attrs = {"ratio": 0.5}


@register
class Dropout10(Dropout7):
    since = 10
    mask_like_input = False


@register
class Dropout12(Dropout):
    op_type, since = "Dropout", 12
    attrs = {"seed": None}
    mask_like_input = False
    nondeterministic = True

    def run(self, x, ratio=None, training_mode=None):
        training = bool(np.asarray(training_mode).reshape(-1)[0]) if training_mode is not None else False
        r = float(np.asarray(ratio).reshape(-1)[0]) if ratio is not None else 0.5
        if not training or r == 0.0:
            return [x, np.ones(x.shape, _BOOL)][: self.n_outputs]
        if not 0.0 <= r < 1.0:
            raise self.fail(f"ratio must be in [0, 1), got {r}")
        if not is_floating(x.dtype):
            raise self.fail(f"training-mode Dropout takes floating tensors, got {x.dtype}")
        if self.seed is not None:
            draw = np.random.RandomState(int(self.seed) & 0xFFFFFFFF).uniform(0.0, 1.0, x.shape)
        else:
            draw = np.random.default_rng().random(x.shape)
        mask = draw >= r
        scale = 1.0 / (1.0 - r)
        cdt = np.float64 if x.dtype == np.float64 else np.float32
        y = (x.astype(cdt) * (mask * cdt(scale))).astype(x.dtype)
        return [y, mask][: self.n_outputs]


@register
class Dropout13(Dropout12):
    since = 13


@register
class Dropout22(Dropout12):
    since = 22
