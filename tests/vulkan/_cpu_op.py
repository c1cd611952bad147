"""The CPU (NumPy) operator of one node, called directly: the reference the GPU kernel tests
compare against, with the same attributes and opset."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

import vkml.ops  # noqa: F401  (registers the operators)
from vkml.ir.graph import Node
from vkml.ops.registry import lookup


def cpu_op(op_type: str, opset: int, attrs: Mapping[str, Any], *inputs, outputs: int = 1) -> list:
    """Run the NumPy operator (inputs None = omitted optional inputs); returns its outputs."""
    node = Node(name="ref", op_type=op_type, domain="",
                inputs=[f"i{k}" if v is not None else "" for k, v in enumerate(inputs)],
                outputs=[f"o{k}" for k in range(outputs)], attrs=dict(attrs), opset=opset)
    cls = lookup("", op_type, opset)
    if cls is None:
        raise LookupError(f"no CPU operator {op_type} at opset {opset}")
    op = cls(node)
    return [None if v is None else np.asarray(v) for v in op.run(*inputs)]
