"""The GPU plan's pure parts: arena layout (reuse by lifetime, alignment, cap) and the
device-grouping topological order."""
import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from vkml.compile.arena import INF, Storage, layout
from vkml.compile.gpuplan import group_order
from vkml.ir.graph import Node


def S(n, a, b):
    return Storage(n, a, b, first=None)


def test_dead_values_share_bytes():
    a, b, c = S(1000, 1, 2), S(1000, 3, 4), S(1000, 2, 3)
    sizes, shared = layout([a, b, c], 256, 1 << 20)
    assert a.offset == b.offset and c.offset != a.offset
    assert sizes == [2048] and (a, b) in shared


def test_pinned_never_shares_and_cap_opens_arenas():
    p = S(300, 0, INF)
    xs = [S(600, t, t) for t in range(1, 5)]
    sizes, shared = layout([p] + xs, 256, 1024)
    assert all(s.arena == 1 for s in xs) and p.arena == 0  # 512 + 768 > 1024
    assert not any(p in pair for pair in shared)
    assert sizes == [512, 768]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 5000), st.integers(0, 20), st.integers(0, 6)), min_size=1, max_size=25))
def test_live_values_never_overlap(spec):
    ss = [S(n, a, a + d) for n, a, d in spec]
    sizes, shared = layout(ss, 256, 16384)
    for s in ss:
        assert s.offset % 256 == 0 and s.offset + s.nbytes <= sizes[s.arena] <= 16384
    after: dict[int, set[int]] = {}
    for early, late in shared:
        after.setdefault(id(early), set()).add(id(late))

    def ordered(x, y) -> bool:  # y is reachable from x through the pairs: it waits for x
        todo, seen = [id(x)], set()
        while todo:
            k = todo.pop()
            if k == id(y):
                return True
            if k not in seen:
                seen.add(k)
                todo.extend(after.get(k, ()))
        return False

    for x, y in itertools.combinations(ss, 2):
        live = not (x.end < y.start or y.end < x.start)
        overlap = x.arena == y.arena and x.offset < y.offset + y.nbytes and y.offset < x.offset + x.nbytes
        assert not (live and overlap)
        if overlap:
            assert ordered(x, y) or ordered(y, x)


def _node(name, ins, outs):
    return Node(name, "Relu", "", list(ins), list(outs), {}, 17)


def test_group_order_keeps_devices_together():
    # two independent branches, interleaved in the graph: g c g c -> g g c c
    nodes = [_node("g1", ["x"], ["a"]), _node("c1", ["x"], ["b"]), _node("g2", ["a"], ["c"]),
             _node("c2", ["b"], ["d"]), _node("g3", ["c", "d"], ["y"])]
    devs = ["gpu", "cpu", "gpu", "cpu", "gpu"]
    order = [n.name for n, _ in group_order(nodes, devs)]
    assert order == ["g1", "g2", "c1", "c2", "g3"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.lists(st.integers(0, 30), max_size=3), st.sampled_from(["a", "b", "c"])),
                min_size=1, max_size=15))
def test_group_order_is_topological(spec):
    nodes, devs = [], []
    for k, (ins, dev) in enumerate(spec):
        nodes.append(_node(f"n{k}", [f"v{i}" for i in ins if i < k] or ["x"], [f"v{k}"]))
        devs.append(dev)
    order = group_order(nodes, devs)
    assert sorted(n.name for n, _ in order) == sorted(n.name for n in nodes)
    seen = {"x"}
    for n, d in order:
        assert all(i in seen for i in n.inputs)
        assert d == devs[nodes.index(n)]
        seen.update(n.outputs)


def test_a_chain_reusing_bytes_gives_one_pair_per_value():
    chain = [S(1000, t, t + 1) for t in range(0, 2000, 2)]  # each dead before the next is written
    sizes, shared = layout(chain, 256, 1 << 20)
    assert sizes == [1024] and all(s.offset == 0 for s in chain)
    assert shared == list(zip(chain, chain[1:]))
