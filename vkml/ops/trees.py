"""ai.onnx.ml TreeEnsemble: every tree walked for every sample at once, one level per step."""
from __future__ import annotations

import numpy as np

from ..ir.graph import TensorDesc
from .registry import REQUIRED, Op, register

# nodes_modes: the comparison deciding "true" at an interior node.
_LEQ, _LT, _GTE, _GT, _EQ, _NEQ, _MEMBER = range(7)
_AVERAGE, _SUM, _MIN, _MAX = range(4)
_NONE, _SOFTMAX, _LOGISTIC, _SOFTMAX_ZERO, _PROBIT = range(5)


@register
class TreeEnsemble(Op):
    op_type, domain, since = "TreeEnsemble", "ai.onnx.ml", 5
    attrs = {
        "aggregate_function": _SUM, "post_transform": _NONE, "n_targets": None,
        "tree_roots": REQUIRED, "nodes_featureids": REQUIRED, "nodes_modes": REQUIRED,
        "nodes_splits": REQUIRED, "nodes_truenodeids": REQUIRED, "nodes_trueleafs": REQUIRED,
        "nodes_falsenodeids": REQUIRED, "nodes_falseleafs": REQUIRED, "nodes_hitrates": None,
        "nodes_missing_value_tracks_true": None, "membership_values": None,
        "leaf_targetids": REQUIRED, "leaf_weights": REQUIRED,
    }

    def check(self) -> None:
        n = len(self.nodes_featureids)
        per_node = {"nodes_modes": np.asarray(self.nodes_modes), "nodes_splits": np.asarray(self.nodes_splits),
                    "nodes_truenodeids": self.nodes_truenodeids, "nodes_trueleafs": self.nodes_trueleafs,
                    "nodes_falsenodeids": self.nodes_falsenodeids, "nodes_falseleafs": self.nodes_falseleafs}
        if self.nodes_missing_value_tracks_true is not None:
            per_node["nodes_missing_value_tracks_true"] = self.nodes_missing_value_tracks_true
        bad = [k for k, v in per_node.items() if len(v) != n]
        if bad:
            raise self.fail(f"{bad} must have one entry per node ({n}, like nodes_featureids)")
        if len(self.leaf_targetids) != np.asarray(self.leaf_weights).size:
            raise self.fail("leaf_targetids and leaf_weights differ in length")
        if self.post_transform == _PROBIT:
            raise self.fail("post_transform PROBIT is not supported")
        if self.aggregate_function not in (_AVERAGE, _SUM, _MIN, _MAX):
            raise self.fail(f"unknown aggregate_function {self.aggregate_function}")
        self._modes = np.asarray(self.nodes_modes).astype(np.int64)
        self._members = self._member_sets()

    def _member_sets(self) -> dict[int, np.ndarray]:
        """Node index → its set, from membership_values (sets in node order, NaN-separated)."""
        nodes = np.flatnonzero(self._modes == _MEMBER)
        if not len(nodes):
            return {}
        values = np.asarray(self.membership_values if self.membership_values is not None else [], np.float64)
        groups = np.split(values, np.flatnonzero(np.isnan(values)))
        groups = [g[~np.isnan(g)] for g in groups]
        if len(groups) < len(nodes):
            raise self.fail(f"membership_values has {len(groups)} sets for {len(nodes)} BRANCH_MEMBER nodes")
        return {int(k): groups[i] for i, k in enumerate(nodes)}

    def _targets(self) -> int:
        return int(self.n_targets) if self.n_targets is not None else int(max(self.leaf_targetids, default=-1)) + 1

    def infer(self, inputs, consts):
        x = inputs[0]
        n = x.shape[0] if x.shape else None
        return [TensorDesc(x.dtype, (n, self._targets()))]

    def run(self, x):
        x = np.asarray(x)
        if x.ndim == 1:
            x = x[None, :]
        xf = x.astype(np.float64)
        leaves = self._walk(xf)  # (samples, trees) leaf indices
        out = self._aggregate(leaves, x.shape[0])
        return (self._post(out).astype(x.dtype),)

    def _walk(self, x: np.ndarray) -> np.ndarray:
        feat = np.asarray(self.nodes_featureids, np.int64)
        split = np.asarray(self.nodes_splits, np.float64)
        tnode, fnode = np.asarray(self.nodes_truenodeids, np.int64), np.asarray(self.nodes_falsenodeids, np.int64)
        tleaf, fleaf = np.asarray(self.nodes_trueleafs, bool), np.asarray(self.nodes_falseleafs, bool)
        missing_true = (np.asarray(self.nodes_missing_value_tracks_true, bool)
                        if self.nodes_missing_value_tracks_true is not None else np.zeros(len(feat), bool))
        n, trees = x.shape[0], len(self.tree_roots)
        cur = np.broadcast_to(np.asarray(self.tree_roots, np.int64), (n, trees)).copy()
        leaf = np.full((n, trees), -1, np.int64)
        rows = np.broadcast_to(np.arange(n)[:, None], (n, trees))
        active = np.ones((n, trees), bool)
        for _ in range(len(feat) + 1):  # a path visits each interior node at most once
            if not active.any():
                break
            r, node = rows[active], cur[active]
            v = x[r, feat[node]]
            cond = self._compare(self._modes[node], v, split[node], node)
            cond |= np.isnan(v) & missing_true[node]
            nxt = np.where(cond, tnode[node], fnode[node])
            is_leaf = np.where(cond, tleaf[node], fleaf[node])
            idx = np.flatnonzero(active.reshape(-1))
            cur.reshape(-1)[idx] = nxt
            done = idx[is_leaf]
            leaf.reshape(-1)[done] = nxt[is_leaf]
            active.reshape(-1)[done] = False
        if active.any():
            raise ValueError("TreeEnsemble: a tree has a cycle (a path longer than the node count)")
        return leaf

    def _compare(self, mode, v, s, node) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            cond = np.select(
                [mode == _LEQ, mode == _LT, mode == _GTE, mode == _GT, mode == _EQ, mode == _NEQ],
                [v <= s, v < s, v >= s, v > s, v == s, v != s], False)
        member = mode == _MEMBER
        if member.any():
            for k in np.unique(node[member]):
                sel = node == k
                cond[sel] = np.isin(v[sel], self._members[int(k)])
        return cond

    def _aggregate(self, leaves: np.ndarray, n: int) -> np.ndarray:
        targets = np.asarray(self.leaf_targetids, np.int64)[leaves]
        weights = np.asarray(self.leaf_weights, np.float64).reshape(-1)[leaves]
        rows = np.broadcast_to(np.arange(n)[:, None], leaves.shape)
        out = np.zeros((n, self._targets()), np.float64)
        agg = self.aggregate_function
        if agg in (_SUM, _AVERAGE):
            np.add.at(out, (rows, targets), weights)
            if agg == _AVERAGE:
                out /= max(len(self.tree_roots), 1)
        else:
            fill = np.inf if agg == _MIN else -np.inf
            out[:] = fill
            (np.minimum if agg == _MIN else np.maximum).at(out, (rows, targets), weights)
            out[out == fill] = 0.0  # a target no leaf reached
        return out

    def _post(self, y: np.ndarray) -> np.ndarray:
        pt = self.post_transform
        if pt == _LOGISTIC:
            return 1.0 / (1.0 + np.exp(-y))
        if pt in (_SOFTMAX, _SOFTMAX_ZERO):
            keep = y != 0 if pt == _SOFTMAX_ZERO else np.ones_like(y, bool)
            m = np.max(np.where(keep, y, -np.inf), axis=1, keepdims=True)
            e = np.where(keep, np.exp(y - np.where(np.isfinite(m), m, 0)), 0.0)
            s = e.sum(axis=1, keepdims=True)
            return np.divide(e, s, out=np.zeros_like(e), where=s > 0)
        return y
