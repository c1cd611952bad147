"""Layout chains before a MatMul, collapsed to one Reshape and one Transpose the GEMM reads in
place.

torch's nn.MultiheadAttention export (ViT, CLIP, DETR, Whisper...) feeds each of q, k and v to
its MatMul through Reshape -> Transpose -> Reshape (k: one more Transpose), with the scale
multiplied in between: `q.reshape(L, B*H, d).transpose(0, 1).reshape(B, H, L, d) * s`. Each
Transpose there is a copy dispatch, and the GEMM can read only a Transpose that feeds it
directly (compile/epilogue.py `_transposed_operands`). Every such chain of views (Reshape,
Flatten, Squeeze, Unsqueeze, Identity, Transpose) over a source tensor X shows the same elements
as X under some strides; when those strides are X's own, permuted (every Reshape on the way kept
the elements where they were, as NumPy's reshape without a copy), the chain equals
`Transpose(Reshape(X, s), p)`, which this pass writes instead, so the epilogue pass folds the
Transpose into the GEMM. Mul or Div by a one-element constant on the way is elementwise: it
moves before the chain, onto X, in its order (the same values, rounded the same way, so the
rewrite is bit for bit). Chains whose intermediate values another node or the graph reads, or
that hold a node the user placed, stay as they are.

Any other Transpose that moves only dims of size 1 (ViT's (1, L, E) <-> (L, 1, E) around its
attention) keeps every element where it is: it becomes a Reshape, a view, instead of a copy.
"""
from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from ..ir.graph import Node, TensorDesc
from ..kernels.elem import contiguous_strides
from ..ops.registry import lookup
from .inline_if import fresh_name
from .rewrite import only_reader, readers_of, transpose_perm

# Off: chains stay as they are (A/Bs: bench/probe_knobs.py "compile.layout.ENABLED:False")
ENABLED = True
VIEWS = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity")
SCALES = ("Mul", "Div")
FLOATS = (np.dtype(np.float32), np.dtype(np.float16))


def collapse_layouts(live: Sequence[Node], values: dict[str, TensorDesc], consts: dict[str, np.ndarray],
                     outputs: Sequence[str], keep: frozenset[str]) -> tuple[list[Node], dict[str, list[Node]]]:
    """The pass: (the new node list, {new node name: the chain's nodes}); new values and
    constants go into `values` and `consts`."""
    if not ENABLED:
        return list(live), {}
    readers = readers_of(live, outputs)
    producers = {o: n for n in live for o in n.outputs if o}
    taken = set(values)
    done: set[int] = set()
    made: dict[int, list[Node]] = {}  # id(last node of a chain) -> its replacement
    more: dict[str, list[Node]] = {}
    for mm in live:
        if mm.op_type != "MatMul" or mm.domain not in ("", "ai.onnx") or mm.name in keep or len(mm.inputs) != 2:
            continue
        for operand in mm.inputs:
            chain = _chain(operand, mm, producers, readers, values, consts, keep, done)
            if chain is None:
                continue
            new = _rewrite(chain, values, consts, taken)
            if new is None:
                continue
            done.update(id(n) for n in chain)
            made[id(chain[-1])] = [n for n, _ in new]
            for n, originals in new:  # (each node of the chain once: its placement row names one)
                more[n.name] = originals
    for t in live:
        if id(t) in done or t.name in keep:
            continue
        r = _as_reshape(t, values, consts, taken)
        if r is not None:
            done.add(id(t))
            made[id(t)] = [r]
            more[r.name] = [t]
    if not made:
        return list(live), {}
    out: list[Node] = []
    for n in live:
        if id(n) in made:
            out.extend(made[id(n)])  # (where the chain's last node was: after all it reads)
        elif id(n) not in done:
            out.append(n)
    return out, more


def _as_reshape(t: Node, values, consts, taken) -> Node | None:
    """A Reshape under `t`'s name for a Transpose that moves only dims of size 1 (the others
    keep their order), else None."""
    if t.op_type != "Transpose" or t.domain not in ("", "ai.onnx") or len(t.outputs) != 1 or not t.inputs:
        return None
    x, y = values.get(t.inputs[0]), values.get(t.outputs[0])
    if x is None or y is None or not x.static or not y.static or 0 in y.shape:
        return None  # (an empty tensor: Reshape would read a 0 in its shape as "keep that dim")
    kept = [p for p in transpose_perm(t, len(x.shape)) if x.shape[p] != 1]
    if kept != sorted(kept):
        return None
    s = fresh_name("shape", f"{t.name}/", taken, True)
    consts[s] = np.asarray(y.shape, np.int64)
    values[s] = TensorDesc(np.dtype(np.int64), (len(y.shape),))
    return _node(t.name, "Reshape", [t.inputs[0], s], t.outputs[0], {})


def _data_input(node: Node, consts: Mapping[str, np.ndarray]) -> str | None:
    """The input a view or a scaling by a one-element constant passes through; None when
    `node` is neither."""
    if node.domain not in ("", "ai.onnx") or len(node.outputs) != 1:
        return None
    if node.op_type in VIEWS or node.op_type == "Transpose":
        return node.inputs[0] if node.inputs and node.inputs[0] else None
    if node.op_type in SCALES and len(node.inputs) == 2:
        sides = [i for i in (1, 0) if _scalar(consts.get(node.inputs[i]))]
        if node.op_type == "Div":
            sides = [i for i in sides if i == 1]  # (c / x is no scaling)
        if sides:
            return node.inputs[1 - sides[0]]
    return None


def _scalar(c) -> bool:
    return c is not None and np.asarray(c).size == 1 and np.asarray(c).dtype in FLOATS


def _chain(operand: str, mm: Node, producers, readers, values, consts, keep, done) -> list[Node] | None:
    """The nodes from the source to `operand` (source first), each read only by the next (the
    last only by `mm`); None when it holds no Transpose or is a lone Transpose (which the
    epilogue pass folds as it is)."""
    chain: list[Node] = []
    v, reader = operand, mm
    while True:
        node = producers.get(v)
        if node is None or node.name in keep or id(node) in done or only_reader(readers, v) is not reader:
            break
        src = _data_input(node, consts)
        d = values.get(v)
        if src is None or d is None or not d.static or d.dtype not in FLOATS:
            break
        chain.append(node)
        v, reader = src, node
    chain.reverse()
    if not chain or values.get(v) is None or not values[v].static:
        return None
    if not any(n.op_type == "Transpose" for n in chain) or (len(chain) == 1 and chain[0].op_type == "Transpose"):
        return None
    return chain


def _rewrite(chain: list[Node], values, consts, taken) -> list[tuple[Node, list[Node]]] | None:
    """[(node, the chain's nodes it stands for)] for the scalings in their order, a Reshape and a
    Transpose, the last writing the chain's output; None when the chain's view is no
    permutation of its source's layout."""
    src = _data_input(chain[0], consts)
    shape = tuple(values[src].shape)
    if 0 in shape:
        return None  # (nothing to read; and Reshape would read a 0 in its shape as "keep that dim")
    strides = tuple(contiguous_strides(shape))
    for n in chain:
        out = tuple(values[n.outputs[0]].shape)
        if n.op_type == "Transpose":
            perm = transpose_perm(n, len(shape))
            shape, strides = tuple(shape[p] for p in perm), tuple(strides[p] for p in perm)
        elif n.op_type in VIEWS:
            strides = _reshaped(shape, strides, out)
            if strides is None:
                return None
            shape = out
        if shape != out:  # (a scaling that broadcasts to a larger shape is no elementwise pass-through)
            return None
    canon = _as_reshape_transpose(shape, strides)
    if canon is None:
        return None
    src_shape, perm = canon
    last = chain[-1]
    dt = values[last.outputs[0]].dtype
    base = f"{last.name}/"
    nodes: list[tuple[Node, list[Node]]] = []
    views = [n for n in chain if n.op_type in VIEWS]
    transposes = [n for n in chain if n.op_type == "Transpose"]
    cur = src
    for n in chain:
        if n.op_type not in SCALES:
            continue
        c = fresh_name("scale", base, taken, True)
        k = 1 - n.inputs.index(_data_input(n, consts))  # (the constant's side)
        consts[c] = np.asarray(consts[n.inputs[k]]).reshape(())
        values[c] = TensorDesc(consts[c].dtype, ())
        o = fresh_name("scaled", base, taken, True)
        values[o] = TensorDesc(dt, tuple(values[src].shape))
        ins = [cur, c] if k == 1 else [c, cur]
        nodes.append((_node(fresh_name(f"{n.op_type.lower()}_hoisted", base, taken, True), n.op_type, ins, o, {}),
                      [n]))
        cur = o
    identity = list(perm) == list(range(len(perm)))
    target = last.outputs[0]
    if tuple(values[cur].shape) != tuple(src_shape) or identity:
        s = fresh_name("shape", base, taken, True)
        consts[s] = np.asarray(src_shape if not identity else values[target].shape, np.int64)
        values[s] = TensorDesc(np.dtype(np.int64), (len(consts[s]),))
        o = target if identity else fresh_name("source", base, taken, True)
        if not identity:
            values[o] = TensorDesc(dt, tuple(src_shape))
        nodes.append((_node(fresh_name("reshape", base, taken, True), "Reshape", [cur, s], o, {}),
                      views + transposes if identity else views))
        cur = o
        views = []
    if not identity:
        nodes.append((_node(fresh_name("transpose", base, taken, True), "Transpose", [cur], target,
                            {"perm": list(perm)}), views + transposes))
    return nodes


def _node(name: str, op_type: str, ins: list[str], out: str, attrs: dict) -> Node:
    n = Node(name, op_type, "", ins, [out], attrs, 13)
    n.op = lookup("", op_type, 13)(n)
    return n


def _reshaped(shape, strides, new) -> tuple[int, ...] | None:
    """Strides of `new` over the elements of a (shape, strides) view in C order, without moving
    them (NumPy's no-copy reshape); None where that would need a copy."""
    if math.prod(shape) != math.prod(new) or math.prod(new) == 0:
        return None
    old = [(d, s) for d, s in zip(shape, strides) if d != 1]
    ni = [i for i, d in enumerate(new) if d != 1]
    out = [0] * len(new)
    o, n = 0, 0
    while n < len(ni) and o < len(old):
        nj, oj = n + 1, o + 1
        np_, op = new[ni[n]], old[o][0]
        while np_ != op:
            if np_ < op:
                np_ *= new[ni[nj]]
                nj += 1
            else:
                op *= old[oj][0]
                oj += 1
        for k in range(o, oj - 1):  # the old dims merged here must be contiguous among themselves
            if old[k][1] != old[k + 1][0] * old[k + 1][1]:
                return None
        out[ni[nj - 1]] = old[oj - 1][1]
        for k in range(nj - 1, n, -1):
            out[ni[k - 1]] = out[ni[k]] * new[ni[k]]
        n, o = nj, oj
    return tuple(out)


def _as_reshape_transpose(shape, strides) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """(s, p) with X.reshape(s).transpose(p) = the view (shape, strides) of a contiguous X, or
    None when the view is no permutation of a contiguous layout."""
    big = sorted((i for i, d in enumerate(shape) if d != 1), key=lambda i: -strides[i])
    ones = [i for i, d in enumerate(shape) if d == 1]
    acc = 1
    for i in reversed(big):
        if strides[i] != acc:
            return None
        acc *= shape[i]
    order = big + ones  # source dims: the big ones by falling stride, then the ones
    src_shape = tuple(shape[i] for i in order)
    pos = {i: k for k, i in enumerate(order)}
    return src_shape, tuple(pos[i] for i in range(len(shape)))
