"""FusedElementwise: the node that compile/fusion.py makes of a chain of float32 elementwise ops,
each taking the chain's value and at most one scalar constant. Its `program` (opcode, constant
rows) is what shaders/fused.comp runs in one dispatch (kernels/fused.py); on the CPU it replays
the original operators, rounding to float32 after every step as the separate ops do.

Not registered: no ONNX model names it; only the fusion pass makes these nodes.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ..ir.graph import TensorDesc
from .registry import Op

DOMAIN = "ai.vkml"
OP_TYPE = "FusedElementwise"

# op type -> opcode (shaders/fused.comp); binary ops: (constant second, constant first).
UNARY_CODES = {"Relu": 6, "Neg": 7, "Abs": 8, "Exp": 9, "Log": 10, "Sqrt": 11, "Sigmoid": 12,
               "Tanh": 13, "Reciprocal": 14}
BINARY_CODES = {"Add": (0, 0), "Sub": (1, 2), "Mul": (3, 3), "Div": (4, 5)}
# the opcodes that divide (the GPU runs programs with them in a correctly rounding variant)
DIVIDING_OPCODES = frozenset((*BINARY_CODES["Div"], UNARY_CODES["Reciprocal"]))
F32 = np.dtype(np.float32)


# Opcodes the CPU runs as in-place ufuncs on one copy of the input, and on float32 scalars for
# one-element tensors: exactly what the operators compute (IEEE single for + - * /; NumPy's
# maximum keeps NaN and turns -0 into +0). Other opcodes replay their operator.
_BINARY_UFUNC = {0: (np.add, False), 1: (np.subtract, False), 2: (np.subtract, True),
                 3: (np.multiply, False), 4: (np.divide, False), 5: (np.divide, True)}
_UNARY_UFUNC = {6: None, 7: np.negative, 8: np.absolute}
_ZERO = np.float32(0)


def _scalar_step(code: int, v, c):
    if code == 0:
        return v + c
    if code == 1:
        return v - c
    if code == 2:
        return c - v
    if code == 3:
        return v * c
    if code == 4:
        return v / c
    if code == 5:
        return c / v
    if code == 6:
        return v if (v > _ZERO or v != v) else _ZERO
    if code == 7:
        return -v
    return abs(v)


class FusedElementwise(Op):
    """The fused chain. `program`: (opcode, constant) rows for the GPU; `steps`: the original
    (op, constant, position) triples, which the CPU replays where no exact shortcut exists."""

    op_type, domain, since = OP_TYPE, DOMAIN, 1
    attrs = {"program": None, "steps": None, "fused": None}

    def check(self) -> None:
        codes = [int(c) for c in np.asarray(self.program)[:, 0]]
        consts = [c for _, c, _ in self.steps]
        self._scalar = all(k in _BINARY_UFUNC or k in _UNARY_UFUNC for k in codes)
        self._plan = list(zip(codes, [None if c is None else np.float32(c.reshape(())) for c in consts],
                              self.steps))

    def infer(self, inputs: list[TensorDesc], consts: list) -> list[TensorDesc]:
        return [inputs[0]]

    def run(self, x: np.ndarray) -> list[np.ndarray]:
        if x.size == 1 and self._scalar:
            v = x.reshape(-1)[0]
            with np.errstate(all="ignore"):  # as the array ops: inf/nan results, no exception
                for code, c, _ in self._plan:
                    v = _scalar_step(code, v, c)
            return [np.full(x.shape, v, np.float32)]
        v = None  # the chain's own copy, once the first step made it
        for code, c, (op, cv, pos) in self._plan:
            if code in _BINARY_UFUNC and v is not None:
                fn, const_first = _BINARY_UFUNC[code]
                fn(c, v, out=v) if const_first else fn(v, c, out=v)
            elif code in _UNARY_UFUNC and v is not None:
                fn = _UNARY_UFUNC[code]
                np.maximum(v, _ZERO, out=v) if fn is None else fn(v, out=v)
            else:
                src = x if v is None else v
                if cv is None:
                    out = op.run(src)[0]
                else:
                    out = op.run(src, cv)[0] if pos == 1 else op.run(cv, src)[0]
                # The chain's own writable array (ufuncs on 0-d arrays return NumPy scalars).
                fresh = type(out) is np.ndarray and out.flags.writeable and not np.may_share_memory(out, x)
                v = out if fresh else np.array(out, dtype=np.float32)
        return [v]


def program_of(attrs: Mapping[str, Any]) -> np.ndarray:
    return np.asarray(attrs["program"], np.float32)
