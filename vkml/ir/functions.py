"""Model-local functions (ModelProto.functions): expanded into their bodies at load, within bounds.

A function may call others, so the expansion of a small file can be exponential (each level
calling the next twice) or endless (a function calling itself). Before anything is copied, the
size each called function expands to and its nesting depth are worked out once per function
(memoized, so in time linear in the functions' text); a recursive call, nesting deeper than
MAX_DEPTH or more than MAX_NODES nodes in all is a ModelError naming the function and the node.
"""
from __future__ import annotations

import itertools
from typing import Iterable

import onnx
from onnx import AttributeProto

from ..errors import ModelError

MAX_DEPTH = 64  # functions nested in functions (subgraphs of a body count as the same level)
MAX_NODES = 1_000_000  # nodes of the whole model once every call is expanded

Key = tuple[str, str]


def _subgraphs(n: onnx.NodeProto) -> Iterable[onnx.GraphProto]:
    for a in n.attribute:
        if a.type == AttributeProto.GRAPH:
            yield a.g
        elif a.type == AttributeProto.GRAPHS:
            yield from a.graphs


class Inliner:
    """Expands calls of a model's functions; check() bounds the whole model first."""

    def __init__(self, functions: Iterable[onnx.FunctionProto]):
        self.functions: dict[Key, onnx.FunctionProto] = {(f.domain, f.name): f for f in functions}
        self._counter = itertools.count()
        self._size: dict[Key, int] = {}  # nodes a call expands to (subgraph nodes included)
        self._depth: dict[Key, int] = {}  # 1 + the deepest call inside

    def check(self, graph: onnx.GraphProto) -> None:
        """Raise ModelError if expanding every call in graph (and its subgraphs) would recurse,
        nest deeper than MAX_DEPTH or make more than MAX_NODES nodes."""
        if not self.functions:
            return
        total, _ = self._nodes(graph.node, [], f"graph {graph.name!r}")
        if total > MAX_NODES:
            raise ModelError(f"the model expands to more than {MAX_NODES} nodes once its functions are "
                             "inlined (functions calling functions several times per level?)")

    def _nodes(self, nodes: Iterable[onnx.NodeProto], path: list[Key], where: str,
               nest: int = 0) -> tuple[int, int]:
        """(expanded node count, deepest function nesting) of a node list; path is the chain
        of functions being expanded, nest the subgraph level inside the innermost of them."""
        if nest > MAX_DEPTH:
            raise ModelError(f"{where}: subgraphs nest more than {MAX_DEPTH} deep")
        total = depth = 0
        for n in nodes:
            key = (n.domain, n.op_type)
            if key in self.functions:
                at = f"node {n.name or n.op_type!r} in {where}"
                size, d = self._function(key, path, at)
                if len(path) + d > MAX_DEPTH:
                    raise ModelError(f"{at}: model functions nest more than {MAX_DEPTH} deep "
                                     f"(through {key[1]!r}); the limit keeps inlining bounded")
                total += size
                depth = max(depth, d)
            else:
                total += 1
                for g in _subgraphs(n):
                    size, d = self._nodes(g.node, path, f"graph {g.name!r}", nest + 1)
                    total += size
                    depth = max(depth, d)
            if total > MAX_NODES:  # stop counting: check() reports it
                break
        return total, depth

    def _function(self, key: Key, path: list[Key], where: str) -> tuple[int, int]:
        """(nodes a call expands to, 1 + its deepest nesting), worked out once per function."""
        if key in path:
            chain = " -> ".join(f"{d + '::' if d else ''}{name}" for d, name in path[path.index(key):] + [key])
            raise ModelError(f"{where}: model function {key[1]!r} calls itself ({chain}); recursion cannot be inlined")
        if key not in self._size:
            if len(path) >= MAX_DEPTH:
                raise ModelError(f"{where}: model functions nest more than {MAX_DEPTH} deep "
                                 f"(through {key[1]!r}); the limit keeps inlining bounded")
            fn = self.functions[key]
            size, depth = self._nodes(fn.node, path + [key], f"function {fn.name!r}")
            self._size[key], self._depth[key] = size, depth + 1
        return self._size[key], self._depth[key]

    def expand(self, nodes: Iterable[onnx.NodeProto]) -> list[onnx.NodeProto]:
        """nodes with every call replaced by the callee's body, internals renamed apart.

        Subgraphs are left as they are: the loader expands each when it builds it."""
        out: list[onnx.NodeProto] = []
        for n in nodes:
            fn = self.functions.get((n.domain, n.op_type))
            if fn is None:
                out.append(n)
            else:
                out.extend(self.expand(self._body(n, fn)))
        return out

    def _body(self, n: onnx.NodeProto, fn: onnx.FunctionProto) -> list[onnx.NodeProto]:
        uid = next(self._counter)
        rename = dict(zip(fn.input, n.input))
        rename.update(zip(fn.output, n.output))
        given = {a.name: a for a in n.attribute}
        defaults = {a.name: a for a in fn.attribute_proto}
        body = []
        for inner in fn.node:
            new = onnx.NodeProto()
            new.CopyFrom(inner)
            new.name = f"{n.name or n.op_type}/{inner.name or inner.op_type}_{uid}"
            for i, name in enumerate(new.input):
                new.input[i] = rename.get(name, f"{name}__f{uid}") if name else ""
            for i, name in enumerate(new.output):
                new.output[i] = rename.get(name, f"{name}__f{uid}") if name else ""
            attrs = []
            for a in new.attribute:
                if a.ref_attr_name:
                    src = given.get(a.ref_attr_name) or defaults.get(a.ref_attr_name)
                    if src is None:
                        continue  # unset optional attribute: the inner op uses its default
                    b = AttributeProto()
                    b.CopyFrom(src)
                    b.name = a.name
                    attrs.append(b)
                else:
                    attrs.append(a)
            del new.attribute[:]
            new.attribute.extend(attrs)
            body.append(new)
        return body
