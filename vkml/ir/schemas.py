"""Each node checked once at load against its ONNX op schema: input and output counts, required
inputs present, attribute types.

What onnx's checker (OpSchema::Verify, which onnxruntime also runs) rejects is a ModelError here
for every device, instead of an op that reads a FLOAT as an axis or a run that fails on the first
call. Unknown and missing attributes are the bound op's business (registry.Op); ops that onnx
has no schema for (com.microsoft) are checked only by their classes.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import onnx
from onnx import AttributeProto

from ..errors import ModelError

_SINGLE = onnx.defs.OpSchema.FormalParameterOption.Single


class _Rules(NamedTuple):
    since: int
    inputs: tuple[int, int]
    outputs: tuple[int, int]
    input_names: tuple[str, ...]
    single_inputs: frozenset[int]  # formal positions that may not be ""
    single_outputs: frozenset[int]
    attr_types: dict[str, int]


@functools.lru_cache(maxsize=None)
def _rules(domain: str, op_type: str, opset: int) -> _Rules | None:
    try:
        s = onnx.defs.get_schema(op_type, opset, domain)
    except onnx.defs.SchemaError:
        return None
    if s.deprecated:
        return None
    return _Rules(
        s.since_version, (s.min_input, s.max_input), (s.min_output, s.max_output),
        tuple(p.name for p in s.inputs),
        frozenset(i for i, p in enumerate(s.inputs) if p.option == _SINGLE),
        frozenset(i for i, p in enumerate(s.outputs) if p.option == _SINGLE),
        {name: int(a.type) for name, a in s.attributes.items()},
    )


def _type_name(t: int) -> str:
    try:
        return AttributeProto.AttributeType.Name(t)
    except ValueError:
        return f"type {t}"


def check_node(p: onnx.NodeProto, name: str, domain: str, opset: int) -> None:
    """Raise ModelError naming the node (and input or attribute) where p breaks its schema."""
    rules = _rules(domain, p.op_type, opset)
    if rules is None:
        return
    lo, hi = rules.inputs
    n = len(p.input)
    if n < lo:
        missing = rules.input_names[n] if n < len(rules.input_names) else f"#{n}"
        raise _error(p, name, rules, f"has {n} input(s), needs at least {lo}: input {n} ({missing!r}) is missing")
    if n > hi:
        raise _error(p, name, rules, f"has {n} inputs, takes at most {hi}")
    if rules.single_inputs:
        for i, value in enumerate(p.input):
            if not value and i in rules.single_inputs:
                raise _error(p, name, rules, f"input {i} ({rules.input_names[i]!r}) is required but given as ''")
    lo, hi = rules.outputs
    n = len(p.output)
    if not lo <= n <= hi:
        raise _error(p, name, rules, f"has {n} output(s), takes {lo}" + (f" to {hi}" if hi != lo else ""))
    for i, value in enumerate(p.output):
        if not value and i in rules.single_outputs:
            raise _error(p, name, rules, f"output {i} is required but given as ''")
    for a in p.attribute:
        want = rules.attr_types.get(a.name)
        if want is not None and a.type != want and not a.ref_attr_name:
            raise _error(p, name, rules, f"attribute {a.name!r} must be {_type_name(want)}, not {_type_name(a.type)}")


def _error(p: onnx.NodeProto, name: str, rules: _Rules, msg: str) -> ModelError:
    return ModelError(f"node {name!r} ({p.op_type}, opset {rules.since}): {msg}")
