"""Trim: the operator that ends a bounded dynamic axis (vkml/compile/ragged.py).

A value whose length along one axis is only known at run time (the rows NonMaxSuppression
keeps) is computed padded to a bound, so that GPUs, which record static shapes, can run it and
what reads it row by row. Where an exact shape is needed (a graph output, an op that mixes
rows) a Trim cuts the padded value to its count. Not registered: only the rewrite makes it.
"""
from __future__ import annotations

import numpy as np

from ..ir.graph import TensorDesc
from .registry import Op


class Trim(Op):
    """Trim(padded, count) = the first count[0] entries of `padded` along `axis`."""

    op_type, domain, since = "Trim", "ai.vkml", 1
    attrs = {"axis": 0}

    def infer(self, inputs, consts):
        x = inputs[0]
        if x.shape is None:
            return [TensorDesc(x.dtype, None)]
        return [TensorDesc(x.dtype, tuple(None if k == self.axis else d for k, d in enumerate(x.shape)))]

    def run(self, padded: np.ndarray, count: np.ndarray):
        n = int(np.asarray(count).reshape(-1)[0])
        if not 0 <= n <= padded.shape[self.axis]:
            raise ValueError(f"node {self.node_name!r}: count {n} outside the padded length "
                             f"{padded.shape[self.axis]}")
        index = [slice(None)] * padded.ndim
        index[self.axis] = slice(0, n)
        return (np.ascontiguousarray(padded[tuple(index)]),)
