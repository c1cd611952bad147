"""NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss: class-indexed losses with optional
per-class weights, an ignored label and none/sum/mean reduction."""
from __future__ import annotations

import numpy as np

from ..ir.graph import TensorDesc
from ._precision import widen as to_work
from .registry import Op, register

_REDUCTIONS = ("none", "sum", "mean")


def _check_labels(labels: np.ndarray, n_classes: int, ignore_index: int | None) -> np.ndarray:
    """Boolean mask of counted samples; raises on labels outside [0, C) that aren't ignored."""
    if labels.dtype.kind not in "iu":
        raise TypeError(f"labels must be an integer tensor, got {labels.dtype}")
    keep = np.ones(labels.shape, bool) if ignore_index is None else labels != ignore_index
    bad = keep & ((labels < 0) | (labels >= n_classes))
    if bad.any():
        raise ValueError(f"label {labels[bad][0]} outside [0, {n_classes}) and not ignore_index")
    return keep


def nll(logp: np.ndarray, labels: np.ndarray, weight: np.ndarray | None, ignore_index: int | None,
        reduction: str) -> np.ndarray:
    """Loss in logp's (working) dtype; logp is (N, C, d...), labels (N, d...)."""
    if logp.ndim < 2:
        raise ValueError(f"input must have rank >= 2 (N, C, ...), got shape {logp.shape}")
    if labels.shape != (logp.shape[0],) + logp.shape[2:]:
        raise ValueError(f"target shape {labels.shape} does not match input shape {logp.shape}")
    n_classes = logp.shape[1]
    keep = _check_labels(labels, n_classes, ignore_index)
    idx = np.where(keep, labels, 0).astype(np.intp)
    picked = np.take_along_axis(logp, idx[:, None], axis=1)[:, 0]
    if weight is not None:
        if weight.shape != (n_classes,):
            raise ValueError(f"weight must have shape ({n_classes},), got {weight.shape}")
        w = np.where(keep, weight.astype(logp.dtype)[idx], 0).astype(logp.dtype)
    else:
        w = keep.astype(logp.dtype)
    loss = -picked * w
    if reduction == "none":
        return loss
    if reduction == "sum":
        return np.asarray(loss.sum(dtype=logp.dtype))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(loss.sum(dtype=logp.dtype) / w.sum(dtype=logp.dtype))


def _log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


class _Loss(Op):
    attrs = {"ignore_index": None, "reduction": "mean"}

    def check(self):
        if self.reduction not in _REDUCTIONS:
            raise self.fail(f"reduction must be one of {_REDUCTIONS}, got {self.reduction!r}")

    def _loss_desc(self, x: TensorDesc) -> TensorDesc:
        if self.reduction != "none":
            return TensorDesc(x.dtype, ())
        shape = None if x.shape is None or len(x.shape) < 2 else (x.shape[0],) + tuple(x.shape[2:])
        return TensorDesc(x.dtype, shape)


class _NLL(_Loss):
    op_type = "NegativeLogLikelihoodLoss"

    def infer(self, inputs, consts):
        return [self._loss_desc(inputs[0])]

    def run(self, x, target, weight=None):
        w = None if weight is None else to_work(weight)
        out = nll(to_work(x), target, w, self.ignore_index, self.reduction)
        return (out.astype(x.dtype),)


@register
class NegativeLogLikelihoodLoss12(_NLL):
    since = 12


@register
class NegativeLogLikelihoodLoss13(_NLL):
    since = 13


@register
class NegativeLogLikelihoodLoss22(_NLL):
    since = 22


class _SCE(_Loss):
    op_type = "SoftmaxCrossEntropyLoss"

    def infer(self, inputs, consts):
        out = [self._loss_desc(inputs[0])]
        if self.n_outputs > 1:
            out.append(TensorDesc(inputs[0].dtype, inputs[0].shape))
        return out

    def run(self, scores, labels, weights=None):
        if scores.ndim < 2:
            raise ValueError(f"scores must have rank >= 2 (N, C, ...), got shape {scores.shape}")
        logp = _log_softmax(to_work(scores), axis=1)
        w = None if weights is None else to_work(weights)
        loss = nll(logp, labels, w, self.ignore_index, self.reduction).astype(scores.dtype)
        if self.n_outputs > 1:
            return loss, logp.astype(scores.dtype)
        return (loss,)


@register
class SoftmaxCrossEntropyLoss12(_SCE):
    since = 12


@register
class SoftmaxCrossEntropyLoss13(_SCE):
    since = 13
