"""Binding: each node of a model that vkml/ir/onnx_loader.py read gets its operator, then every
value its type.

The loader sits below the operators and knows none of them, so the model it returns is
unbound (``Node.op`` is None, the values carry the types the model declares). ``bind`` looks
each node's class up in the registry, newest version for the node's opset, and makes it (which
checks the node's attributes), subgraphs before the node that holds them (an If's or a Loop's
check reads its bodies); then type inference (vkml/ir/inference.py) runs through the bound ops.
``load_model`` is both steps, what a session does.
"""
from __future__ import annotations

from typing import Any

from ..errors import UnsupportedOpsError
from ..ir.graph import Graph
from ..ir.inference import infer_graph
from ..ir.onnx_loader import Model, read_model
from . import registry


def bind(model: Model) -> Model:
    """Bind every node's operator (subgraphs too) and infer every value's type, in place;
    returns the model. Nodes that no operator implements are an UnsupportedOpsError listing
    every one (op type, opset, node names), raised before inference."""
    missing: dict[tuple[str, str, int], list[str]] = {}
    _bind(model.graph, missing)
    if missing:
        raise UnsupportedOpsError(missing)
    infer_graph(model.graph, model.weights)
    return model


def _bind(graph: Graph, missing: dict[tuple[str, str, int], list[str]]) -> None:
    for sub in graph.subgraphs():
        _bind(sub, missing)
    for n in graph.nodes:
        cls = registry.lookup(n.domain, n.op_type, n.opset)
        if cls is None:
            missing.setdefault((n.domain, n.op_type, n.opset), []).append(n.name)
        else:
            n.op = cls(n)


def load_model(model: Any) -> Model:
    """Read (a path, bytes or an onnx.ModelProto) and bind: every problem is a ModelError naming
    where it is."""
    return bind(read_model(model))
