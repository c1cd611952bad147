"""Replacing nodes in a plan's node list: what the fusion passes share."""
from __future__ import annotations

from typing import Sequence

from ..graph import Node


def replace_nodes(live: Sequence[Node], replace: dict[int, Node | None]) -> list[Node]:
    """`live` with each node whose id() is in `replace` swapped for its value, or left out
    where that is None; order otherwise kept."""
    out = []
    for n in live:
        r = replace.get(id(n), n)
        if r is not None:
            out.append(r)
    return out
