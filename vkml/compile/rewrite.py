"""Replacing nodes in a plan's node list: what the fusion passes share."""
from __future__ import annotations

from typing import Sequence

from ..ir.graph import Node, _graphs_in


def readers_of(live: Sequence[Node], outputs: Sequence[str]) -> dict[str, list[Node | None]]:
    """Who reads each value: the reading nodes, once per input they read it through. A subgraph
    reading it from this scope counts twice, and a graph output (None) twice too: such a value
    never has the single reader a fusion needs."""
    readers: dict[str, list[Node | None]] = {}
    for node in live:
        for i in node.inputs:
            if i:
                readers.setdefault(i, []).append(node)
        for g in _graphs_in(node.attrs):  # names a subgraph reads from this scope
            for i in g.outer:
                readers.setdefault(i, []).extend((node, node))
    for o in outputs:
        readers.setdefault(o, []).extend((None, None))
    return readers


def transpose_perm(t: Node, rank: int) -> tuple[int, ...]:
    """A Transpose node's permutation (its `perm`, else the reversal), dims counted from 0."""
    perm = t.attrs.get("perm")
    return tuple(int(p) % max(rank, 1) for p in perm) if perm is not None else tuple(range(rank - 1, -1, -1))


def only_reader(readers: dict[str, list[Node | None]], name: str) -> Node | None:
    """The one node that reads `name`, if exactly one does (and it is no graph output)."""
    r = readers.get(name, ())
    return r[0] if len(r) == 1 else None


def replace_nodes(live: Sequence[Node], replace: dict[int, Node | None]) -> list[Node]:
    """`live` with each node whose id() is in `replace` swapped for its value, or left out
    where that is None; order otherwise kept."""
    out = []
    for n in live:
        r = replace.get(id(n), n)
        if r is not None:
            out.append(r)
    return out


def other_input(node: Node, name: str) -> str:
    """The input of two-input `node` that is not `name` (its first when both are)."""
    return node.inputs[1] if node.inputs[0] == name else node.inputs[0]


def fold_chain(replace: dict[int, Node | None], fused: dict[str, list[Node]], node: Node,
               chain: Sequence[Node]) -> None:
    """Record that `node` stands for `chain`: it takes the place of the chain's last node (after
    everything any of them reads, a residual computed after the first included) and the others
    go."""
    fused[node.name] = list(chain)
    replace[id(chain[-1])] = node
    for n in chain[:-1]:
        replace[id(n)] = None


def rewritten(live: Sequence[Node], replace: dict[int, Node | None],
              fused: dict[str, list[Node]]) -> tuple[list[Node], dict[str, list[Node]]]:
    """What a fusion pass returns: (live with `replace` applied, {new node: originals})."""
    if not fused:
        return list(live), {}
    return replace_nodes(live, replace), fused
