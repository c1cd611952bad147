"""Type and shape inference driver: walks the graph in order and asks each op.

Small constant subexpressions (Shape → Gather → Concat feeding a Reshape, say) are evaluated so
that ops whose output shape depends on input values can still infer it. Declared value_info fills
in what an op could not infer.
"""
from __future__ import annotations

import logging
import math
from collections import ChainMap
from typing import Mapping, MutableMapping

import numpy as np

from .graph import UNKNOWN, Graph, TensorDesc, _graphs_in

_FOLD_LIMIT = 4096  # elements: larger constants are not evaluated at load time
log = logging.getLogger("vkml")


def _merge(inferred: TensorDesc, declared: TensorDesc | None) -> TensorDesc:
    if declared is None:
        return inferred
    if inferred.kind != "tensor" or declared.kind != "tensor":
        return inferred if inferred.kind != "tensor" or inferred.dtype is not None else declared
    dtype = inferred.dtype if inferred.dtype is not None else declared.dtype
    if inferred.shape is None:
        shape = declared.shape
    elif declared.shape is None or len(declared.shape) != len(inferred.shape):
        shape = inferred.shape
    else:
        shape = tuple(
            d if (d is not None and not (isinstance(d, str) and isinstance(e, int))) else e
            for d, e in zip(inferred.shape, declared.shape)
        )
    return TensorDesc(dtype, shape)


def infer_graph(graph: Graph, weights: dict[str, np.ndarray], outer: Mapping[str, TensorDesc] | None = None,
                outer_consts: Mapping[str, np.ndarray] | None = None) -> None:
    """Fill graph.values with the type of every value, in place, in time linear in the graph
    (scopes are ChainMap views, never copies made per node)."""
    declared = dict(graph.values)
    values = graph.values
    consts: MutableMapping[str, np.ndarray] = ChainMap({}, outer_consts) if outer_consts else {}
    for name in graph.constants:
        consts[name] = weights[graph.weight_key(name)]
    view = ChainMap(values, outer) if outer else values
    for node in graph.nodes:
        for sub in _graphs_in(node.attrs):
            infer_graph(sub, weights, view, consts)
        ins = [view.get(i, UNKNOWN) if i else UNKNOWN for i in node.inputs]
        cin = [consts.get(i) if i else None for i in node.inputs]
        try:
            outs = node.op.infer(ins, cin)
        except Exception as e:
            # Inference is advisory: the outputs stay of unknown type, and the run checks real
            # tensors (the operator raises there, naming the node, if the model is wrong).
            log.debug("vkml: inferring node %r (%s) failed (%s: %s); its outputs stay unknown",
                      node.name, node.op_type, type(e).__name__, e)
            outs = [UNKNOWN] * len(node.outputs)
        folded = _try_fold(node, _shape_only_inputs(node, ins, cin), outs)
        for k, name in enumerate(node.outputs):
            if not name:
                continue
            desc = outs[k] if k < len(outs) else UNKNOWN
            if folded is not None and isinstance(folded[k], np.ndarray):
                consts[name] = folded[k]
                desc = TensorDesc(folded[k].dtype, folded[k].shape)
            values[name] = _merge(desc, declared.get(name))
    if outer is None:
        require_typed_inputs(graph)


def require_typed_inputs(graph: Graph) -> None:
    """ModelError unless every input a caller feeds declares its type (ONNX requires it; a
    run must not guess the type from the first feed). Subgraph inputs may leave it out."""
    from ..errors import ModelError

    for name in graph.inputs:
        d = graph.values.get(name)
        if name not in graph.constants and (d is None or (d.kind == "tensor" and d.dtype is None)):
            raise ModelError(f"graph input {name!r} has no type (its ValueInfo needs a tensor type with an "
                             f"element type); onnxruntime rejects such models too")


_SHAPE_ONLY = {"Shape", "Size"}  # ops that read only their input's shape


def _shape_only_inputs(node, ins: list[TensorDesc], cin: list):
    """For Shape/Size of a statically shaped value: a zero-strided stand-in (no memory), so
    Shape → Gather → Concat → Reshape chains fold to constants."""
    if node.op_type not in _SHAPE_ONLY or node.domain or cin[0] is not None or not ins[0].static:
        return cin
    dtype = ins[0].dtype if ins[0].dtype is not None else np.dtype(np.float32)
    return [np.broadcast_to(np.zeros((), dtype), ins[0].shape)] + cin[1:]


def _small(outs: list[TensorDesc], node) -> bool:
    """Every output inferred as a tensor of known shape and at most _FOLD_LIMIT elements. Only
    then is the op run at load: a few bytes of Range, ConstantOfShape or Tile can ask for
    gigabytes, and a model file must not be able to make the loader allocate them."""
    return len(outs) >= len(node.outputs) and all(
        d.kind == "tensor" and d.static and math.prod(d.shape) <= _FOLD_LIMIT for d in outs[:len(node.outputs)])


def _try_fold(node, cin, inferred: list[TensorDesc]):
    op = node.op
    if op.nondeterministic or op.needs_scope or not node.inputs:
        return None
    if any(c is None for c, i in zip(cin, node.inputs) if i):
        return None
    if not _small(inferred, node):
        return None
    if any(c.dtype == object or c.size > _FOLD_LIMIT for c in cin if c is not None):
        return None
    try:
        outs = op.run(*cin)
    except Exception as e:
        # Not folded: the node stays in the graph and runs with real inputs, failing there (with
        # the node's name) if it must.
        log.debug("vkml: folding node %r (%s) failed (%s: %s); it stays in the graph",
                  node.name, node.op_type, type(e).__name__, e)
        return None
    # NumPy scalars (a reduction or take down to 0-d) are 0-d values: fold them as arrays
    outs = [np.asarray(o) if isinstance(o, np.generic) else o for o in outs]
    if any(isinstance(o, np.ndarray) and o.size > _FOLD_LIMIT for o in outs):
        return None
    return outs
