"""Random task graphs for the scheduler tests, and the checks on what a run recorded."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

SHAPES = ("random", "chain", "fan", "tree", "layered", "independent")


@dataclass
class Dag:
    n: int
    indptr: np.ndarray  # int32 CSR of successors
    indices: np.ndarray
    src: np.ndarray     # the same edges as (src, dst) pairs
    dst: np.ndarray

    def descendants(self, roots) -> np.ndarray:
        """Boolean mask of the tasks strictly downstream of any of roots."""
        mark = np.zeros(self.n, bool)
        stack = list(roots)
        while stack:
            u = stack.pop()
            for v in self.indices[self.indptr[u]:self.indptr[u + 1]]:
                if not mark[v]:
                    mark[v] = True
                    stack.append(int(v))
        return mark


def make_dag(n: int, shape: str, seed: int, density: float = 1.0) -> Dag:
    """A DAG on n tasks; edges run from earlier to later positions of a random permutation, so
    task numbers say nothing about the order."""
    rng = np.random.default_rng(seed)
    src: list[np.ndarray] = []
    dst: list[np.ndarray] = []
    pos = np.arange(n)
    if shape == "chain":
        src.append(pos[:-1])
        dst.append(pos[1:])
    elif shape == "fan" and n > 2:
        mid = pos[1:-1]
        src += [np.zeros(len(mid), int), mid]
        dst += [mid, np.full(len(mid), n - 1)]
    elif shape == "fan":
        src.append(pos[:-1])
        dst.append(pos[1:])
    elif shape == "tree" and n > 1:
        v = pos[1:]
        src.append((rng.random(len(v)) * v).astype(int))
        dst.append(v)
    elif shape == "layered" and n > 1:
        width = int(rng.integers(1, max(2, int(np.sqrt(n)) + 2)))
        layer = pos // width
        for v in pos[width:]:
            prev = pos[layer == layer[v] - 1]
            k = min(len(prev), 1 + int(rng.poisson(density)))
            src.append(rng.choice(prev, size=k, replace=False))
            dst.append(np.full(k, v))
    elif shape == "random" and n > 1:
        v = pos[1:]
        k = rng.poisson(density, size=len(v))
        reps = np.repeat(v, k)
        src.append((rng.random(len(reps)) * reps).astype(int))  # duplicates allowed
        dst.append(reps)
    s = np.concatenate(src).astype(np.int64) if src else np.zeros(0, np.int64)
    d = np.concatenate(dst).astype(np.int64) if dst else np.zeros(0, np.int64)
    perm = rng.permutation(n)
    s, d = perm[s], perm[d]
    order = np.argsort(s, kind="stable")
    s, d = s[order], d[order]
    indptr = np.zeros(n + 1, np.int32)
    np.add.at(indptr, s + 1, 1)
    indptr = np.cumsum(indptr).astype(np.int32)
    return Dag(n, indptr, d.astype(np.int32), s.astype(np.int32), d.astype(np.int32))


@st.composite
def dags(draw, max_n: int = 2000) -> Dag:
    n = draw(st.one_of(st.integers(1, 12), st.integers(1, 200), st.integers(1, max_n)))
    shape = draw(st.sampled_from(SHAPES))
    density = draw(st.sampled_from([0.3, 1.0, 2.5, 5.0]))
    seed = draw(st.integers(0, 2**32 - 1))
    return make_dag(n, shape, seed, density)


def check_order(dag: Dag, rec: np.ndarray, ran: np.ndarray, deps: np.ndarray | None = None) -> None:
    """Every task that ran started after its predecessors ended (or after deps[v] of them)."""
    start, end = rec[0::2], rec[1::2]
    assert np.all(start[ran] >= 0) and np.all(end[ran] > start[ran]), "bad records"
    assert np.all(start[~ran] == -1), "a task recorded without running"
    if deps is None:
        v = ran[dag.dst]
        ok = ran[dag.src[v]] & (end[dag.src[v]] < start[dag.dst[v]])
        bad = np.flatnonzero(~ok)
        assert bad.size == 0, (
            f"task {dag.dst[v][bad[0]]} started before predecessor {dag.src[v][bad[0]]} ended")
    else:
        before = np.zeros(dag.n, int)
        v = ran[dag.dst]
        s, d = dag.src[v], dag.dst[v]
        np.add.at(before, d, ran[s] & (end[s] < start[d]))
        bad = np.flatnonzero(ran & (before < deps))
        assert bad.size == 0, f"task {bad[0]} started before {deps[bad[0]]} predecessors ended"
