"""The operator registry: each op class declares its attributes, infers its outputs' types and
runs with NumPy.

Versions follow onnx's reference evaluator: a class per behaviour change, ``since`` is the opset
it starts at, and the newest class whose ``since`` is ≤ the model's opset is chosen.
"""
from __future__ import annotations

from typing import Any, ClassVar, Sequence

import numpy as np

from ..errors import ModelError
from ..ir.graph import UNKNOWN, Node, TensorDesc, canonical_domain

REQUIRED = object()  # an attribute default meaning "the model must set it"

_REGISTRY: dict[tuple[str, str], list[type["Op"]]] = {}


class Op:
    """Base operator. Subclasses set ``op_type``, ``since``, ``attrs`` and implement ``run``.

    Attributes land on the instance under their ONNX names (``self.axis``). ``run`` receives
    NumPy arrays (None for omitted optional inputs, lists for sequences) and returns a tuple or
    list of outputs, one per declared output. ``run`` must not mutate ``self``: one instance
    serves many concurrent runs.
    """

    op_type: ClassVar[str] = ""
    domain: ClassVar[str] = ""
    since: ClassVar[int] = 1
    attrs: ClassVar[dict[str, Any]] = {}
    # True for ops whose results are random or otherwise not a function of their inputs:
    # never evaluated at load time for constant propagation.
    nondeterministic: ClassVar[bool] = False
    # Ops that run subgraphs get the runtime scope: run(scope, *inputs) (see executor.Scope).
    needs_scope: ClassVar[bool] = False
    # Input positions whose values decide the output's shape (Range's bounds, ConstantOfShape's
    # shape): a GPU session makes its plans per value of the small graph inputs these come from,
    # so such nodes are evaluated while planning instead of splitting the GPU work at run time.
    shape_from_values: ClassVar[tuple[int, ...]] = ()

    def __init__(self, node: Node):
        self.node_name = node.name
        self.n_inputs = len(node.inputs)
        self.n_outputs = len(node.outputs)
        self.outputs_used = [bool(o) for o in node.outputs]
        given = dict(node.attrs)
        for name, default in self.attrs.items():
            if name in given:
                value = given.pop(name)
            elif default is REQUIRED:
                raise ModelError(
                    f"node {node.name!r} ({node.op_type}): missing required attribute {name!r}"
                )
            else:
                value = default
            setattr(self, name, value)
        if given:
            raise ModelError(
                f"node {node.name!r} ({node.op_type}, opset {node.opset}): unknown attribute(s) "
                f"{sorted(given)}; {type(self).__name__} knows {sorted(self.attrs)}"
            )
        self.check()

    def check(self) -> None:
        """Validate attribute values at load time; raise ModelError naming the node."""

    def fail(self, msg: str) -> ModelError:
        return ModelError(f"node {self.node_name!r} ({self.op_type}): {msg}")

    def infer(self, inputs: list[TensorDesc], consts: list[np.ndarray | None]) -> list[TensorDesc]:
        """Output types from input types (and the values of constant inputs).

        The default knows nothing; families override it. Unknown dims are allowed: symbolic dims
        are resolved per run from the actual tensors.
        """
        return [UNKNOWN] * self.n_outputs

    def run(self, *inputs: Any) -> Sequence[Any]:
        raise NotImplementedError


def register(cls: type[Op]) -> type[Op]:
    """Class decorator: add an op version to the registry."""
    if not cls.op_type:
        raise TypeError(f"{cls.__name__} has no op_type")
    versions = _REGISTRY.setdefault((canonical_domain(cls.domain), cls.op_type), [])
    if any(v.since == cls.since for v in versions):
        raise TypeError(f"{cls.op_type} since {cls.since} registered twice")
    versions.append(cls)
    versions.sort(key=lambda c: c.since)
    return cls


def lookup(domain: str, op_type: str, opset: int) -> type[Op] | None:
    """The newest version of the op with since ≤ opset, or None."""
    best = None
    for cls in _REGISTRY.get((canonical_domain(domain), op_type), ()):
        if cls.since <= opset:
            best = cls
    return best


def registered() -> dict[tuple[str, str], list[type[Op]]]:
    return dict(_REGISTRY)
