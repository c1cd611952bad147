"""Bounded dynamic axes: the rows NonMaxSuppression keeps, the coordinates NonZero finds and
what Compress selects, computed padded on the GPU.

NonMaxSuppression returns as many rows as boxes survive, a number known only when it has run,
and so is every value computed from those rows: a GPU, whose command buffers are recorded for
static shapes, could run none of them. But the number has a bound known while planning
(batches x classes x min(max_output_boxes_per_class, boxes)). This pass, run on the plan of one
input signature before the other rewrites:
- replaces such a NonMaxSuppression by NonMaxSuppressionPadded (vkml/ops/detection.py), whose
  output has the bound's rows (the real ones first, then zero rows) and a second output, the
  count of real rows (int64 [1]); likewise a NonZero of a static shape by NonZeroPadded
  (vkml/ops/gather.py: as many columns as elements, the count of real ones), and a Compress by
  NonZeroPadded of its condition and a Gather of the padded indices; not past MAX_PADDED_BYTES;
- lets the padded value flow through the nodes that treat its rows independently ("row-wise"
  along that axis: elementwise ops that do not broadcast across it, layout ops that keep it,
  Gather on another axis or with it as indices, GatherND with it as index tuples, reductions
  and softmaxes over other axes, convolutions and pooling over it as the batch, RoiAlign over
  it as the boxes, MatMul over it as rows...), each rewritten to read and write padded values
  (the same op, renamed values: the report shows it where it runs);
- puts a Trim (vkml/ops/ragged.py: the first `count` rows) where an exact shape is needed: before
  any other reader, and for graph outputs. A Trim's output keeps the value's own name and type.

Padding rows never reach a result: every row-wise op computes row r of its output from row r of
its padded inputs, and a Trim drops the rows at or past the count. Rows an index is read from
must be valid indices: the padded nodes pad with zeros (index 0), and only ops that keep zeros
(layout ops, Gather of such rows, Cast...) are trusted to pass that on (`Ragged.zero`); a Gather
whose indices are padded with anything else reads trimmed indices instead.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from ..ir.graph import Node, TensorDesc, _graphs_in
from ..ops.registry import lookup
from ..ops.detection import NonMaxSuppressionPadded, nms_capacity
from ..ops.gather import NonZeroPadded
from ..ops.ragged import Trim

log = logging.getLogger("vkml")

DOMAIN = "ai.vkml"
ONNX = ("", "ai.onnx")

# ops whose output element i depends on input elements at i only (after broadcasting)
UNARY = frozenset((
    "Abs", "Neg", "Sign", "Relu", "Exp", "Log", "Sqrt", "Reciprocal", "Sin", "Cos", "Tan", "Tanh",
    "Sigmoid", "Floor", "Ceil", "Round", "Erf", "Softplus", "Softsign", "Mish", "LeakyRelu", "Elu",
    "Selu", "HardSigmoid", "HardSwish", "Gelu", "Not", "ThresholdedRelu", "Celu", "Swish", "Asin",
    "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "BitwiseNot", "IsNaN", "IsInf",
    "Identity", "Cast", "CastLike"))
BROADCAST = frozenset((
    "Add", "Sub", "Mul", "Div", "Pow", "Mod", "Max", "Min", "Sum", "Mean", "Equal", "Less",
    "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or", "Xor", "BitwiseAnd", "BitwiseOr",
    "BitwiseXor", "BitShift", "Where", "Clip", "PRelu"))
LAYOUT = frozenset(("Unsqueeze", "Squeeze", "Transpose", "Reshape", "Flatten"))
# ops that map a zero row to a zero row (NonMaxSuppression's padding stays valid indices)
KEEPS_ZERO = LAYOUT | {"Identity", "Cast", "CastLike", "Relu", "Neg", "Abs", "Sign", "Floor", "Ceil",
                       "Round", "Slice", "Concat", "Gather"}
REDUCE = frozenset(("ReduceMax", "ReduceMin", "ReduceSum", "ReduceMean", "ReduceProd", "ReduceL1",
                    "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"))
# the batch axis (0) of input 0 is independent: per-image ops
PER_IMAGE = frozenset(("Conv", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool",
                       "BatchNormalization", "InstanceNormalization", "LRN"))


# The most a padded value may take (bytes): past it the node stays as it is (on the CPU, exact),
# so that a NonZero over a big mask with few hits does not allocate its worst case.
MAX_PADDED_BYTES = 64 << 20


@dataclass(frozen=True)
class Ragged:
    """A value computed padded: its padded value's name, the count value's name, the axis the
    count applies to, and whether its padding is zeros."""

    padded: str
    count: str
    axis: int
    zero: bool


def pad_ragged(live: Sequence[Node], values: dict[str, TensorDesc], consts: Mapping[str, np.ndarray],
               outputs: Sequence[str], keep: frozenset[str]) -> tuple[list[Node], dict[str, list[Node]]]:
    """The pass (see the module docstring). Returns the new node list and, for each rewritten
    node (same name), the node it stands for; new padded values are added to `values`."""
    ragged: dict[str, Ragged] = {}
    out: list[Node] = []
    more: dict[str, list[Node]] = {}
    trimmed: set[str] = set()
    taken = set(values)

    def fresh(name: str) -> str:
        new, k = f"{name}#padded", 1
        while new in taken:
            new, k = f"{name}#padded{k}", k + 1
        taken.add(new)
        return new

    def trim(name: str) -> None:
        if name in trimmed:
            return
        r = ragged[name]
        node = Node(f"{name}#trim", "Trim", DOMAIN, [r.padded, r.count], [name], {"axis": r.axis}, 1)
        node.op = Trim(node)
        out.append(node)
        trimmed.add(name)

    for node in live:
        if node.op_type in PADDED and node.domain in ONNX and node.name not in keep:
            made = PADDED[node.op_type](node, values, consts, fresh)
            if made is not None:
                nodes, r = made
                out.extend(nodes)
                more.update((n.name, [node]) for n in nodes)
                ragged[node.outputs[0]] = r
                continue
        reads = [i for i in node.inputs if i in ragged]
        reads += [i for g in _graphs_in(node.attrs) for i in g.outer if i in ragged]
        if not reads:
            out.append(node)
            continue
        rows = None if node.name in keep or _graphs_in(node.attrs) else _row_wise(node, ragged, values, consts)
        if rows is None:
            for i in dict.fromkeys(reads):
                trim(i)
            out.append(node)
            continue
        count, axes, descs = rows
        outs = []
        for k, o in enumerate(node.outputs):
            if not o:
                outs.append(o)
                continue
            p = fresh(o)
            values[p] = descs[k]
            zero = node.op_type in KEEPS_ZERO and all(ragged[i].zero for i in node.inputs if i in ragged)
            if node.op_type == "Gather" and node.inputs[1] in ragged:
                zero = False  # rows of data: not zeros
            ragged[o] = Ragged(p, count, axes[k], zero)
            outs.append(p)
        new = Node(node.name, node.op_type, node.domain,
                   [ragged[i].padded if i in ragged else i for i in node.inputs], outs, dict(node.attrs), node.opset)
        new.op = type(node.op)(new)
        out.append(new)
        more[node.name] = [node]
    for o in outputs:
        if o in ragged:
            trim(o)
    return out, more


def _padded_nms(node: Node, values, consts, fresh) -> tuple[list[Node], Ragged] | None:
    """NonMaxSuppressionPadded in place of `node`, when its row count has a bound now."""
    ins = list(node.inputs) + [""] * (5 - len(node.inputs))
    if not ins[0] or not ins[1] or len(node.outputs) != 1 or not node.outputs[0]:
        return None
    if ins[2] and ins[2] not in consts:
        return None
    cap = nms_capacity(values.get(ins[0]), values.get(ins[1]), consts.get(ins[2]) if ins[2] else np.zeros(1, np.int64))
    if not cap or cap * 3 * 8 > MAX_PADDED_BYTES:
        return None  # unknown, no rows at all, or too big a bound (the node stays as it is)
    sel, count = fresh(node.outputs[0]), fresh(node.outputs[0] + "#count")
    values[sel] = TensorDesc(np.dtype(np.int64), (cap, 3))
    values[count] = TensorDesc(np.dtype(np.int64), (1,))
    new = Node(node.name, "NonMaxSuppressionPadded", DOMAIN, list(node.inputs), [sel, count],
               {"center_point_box": int(node.attrs.get("center_point_box", 0)), "capacity": cap}, 1)
    new.op = NonMaxSuppressionPadded(new)
    return [new], Ragged(sel, count, 0, True)


def _padded_nonzero(node: Node, values, consts, fresh) -> tuple[list[Node], Ragged] | None:
    """NonZeroPadded in place of `node` when its input's shape is known now: as many columns
    as the input has elements (rank 0 and empty inputs stay as they are)."""
    x = values.get(node.inputs[0]) if node.inputs and node.inputs[0] else None
    if x is None or not x.static or not x.shape or len(node.outputs) != 1 or not node.outputs[0]:
        return None
    cap = int(np.prod(x.shape))
    if not cap or cap * len(x.shape) * 8 > MAX_PADDED_BYTES:
        return None
    sel, count = fresh(node.outputs[0]), fresh(node.outputs[0] + "#count")
    values[sel] = TensorDesc(np.dtype(np.int64), (len(x.shape), cap))
    values[count] = TensorDesc(np.dtype(np.int64), (1,))
    new = Node(node.name, "NonZeroPadded", DOMAIN, list(node.inputs), [sel, count], {"capacity": cap}, 1)
    new.op = NonZeroPadded(new)
    return [new], Ragged(sel, count, 1, True)  # [rank, count]: the columns are the rows here


def _padded_compress(node: Node, values, consts, fresh) -> tuple[list[Node], Ragged] | None:
    """Compress as NonZeroPadded of its condition, Squeeze, (Reshape to 1-D without an axis)
    and a Gather of the padded indices, when the shapes are known now and the condition is no
    longer than the axis (else the node stays, and its operator says what is wrong)."""
    if len(node.inputs) != 2 or len(node.outputs) != 1 or not node.outputs[0]:
        return None
    x, cond = values.get(node.inputs[0]), values.get(node.inputs[1])
    if x is None or cond is None or not x.static or not cond.static or len(cond.shape) != 1 or not x.shape:
        return None
    if cond.dtype != np.dtype(bool) or not cond.shape[0]:
        return None
    axis = node.attrs.get("axis")
    shape = (int(np.prod(x.shape)),) if axis is None else tuple(x.shape)
    a = 0 if axis is None else int(axis) + (len(x.shape) if int(axis) < 0 else 0)
    n = cond.shape[0]
    if not 0 <= a < len(shape) or n > shape[a]:
        return None
    if int(np.prod(shape)) // shape[a] * n * x.dtype.itemsize > MAX_PADDED_BYTES:
        return None
    made, r = _padded_nonzero(Node(f"{node.name}/nonzero", "NonZero", "", [node.inputs[1]], [node.name + "/nz"],
                                   {}, node.opset), values, consts, fresh)
    nodes = list(made)

    def const(tag: str, value: np.ndarray) -> str:
        name = fresh(f"{node.name}/{tag}")
        consts[name] = value
        values[name] = TensorDesc(value.dtype, value.shape)
        return name

    def add(name: str, op: str, ins: list[str], desc: TensorDesc, **attrs) -> str:
        o = fresh(f"{node.name}/{op.lower()}")
        values[o] = desc
        n_ = Node(name, op, "", ins, [o], attrs, 13)
        n_.op = lookup("", op, 13)(n_)
        nodes.append(n_)
        return o

    idx = add(f"{node.name}/squeeze", "Squeeze", [r.padded, const("axes", np.zeros(1, np.int64))],
              TensorDesc(np.dtype(np.int64), (n,)))
    data = node.inputs[0]
    if axis is None:
        data = add(f"{node.name}/flatten", "Reshape", [data, const("flat", np.array([-1], np.int64))],
                   TensorDesc(x.dtype, shape))
    o = add(node.name, "Gather", [data, idx], TensorDesc(x.dtype, shape[:a] + (n,) + shape[a + 1:]), axis=a)
    return nodes, Ragged(o, r.count, a, False)


# ops whose output length is known only at run time but bounded now -> the padded node maker
PADDED = {"NonMaxSuppression": _padded_nms, "NonZero": _padded_nonzero, "Compress": _padded_compress}


def _row_wise(node: Node, ragged: Mapping[str, Ragged], values, consts):
    """(count, output axes, padded output types) when `node` computes each row of its outputs
    along the ragged axis from that row of its ragged inputs alone, else None."""
    if node.domain not in ONNX:
        return None
    rin = [(k, ragged[i]) for k, i in enumerate(node.inputs) if i in ragged]
    counts = {r.count for _, r in rin}
    if len(counts) != 1:
        return None
    count = counts.pop()
    op = node.op_type
    pos = {k for k, _ in rin}
    r0 = rin[0][1]
    caps = [values[r.padded].shape[r.axis] for _, r in rin]
    cap = caps[0]
    if any(c != cap for c in caps):
        return None
    first = _infer(node, ragged, values, consts, None)
    second = _infer(node, ragged, values, consts, cap + 1)
    if first is None or second is None:
        return None
    axes = []
    for a, b in zip(first, second):  # where each output's ragged axis went
        if a.shape is None or b.shape is None or len(a.shape) != len(b.shape):
            return None
        diff = [k for k, (x, y) in enumerate(zip(a.shape, b.shape)) if x != y]
        if len(diff) != 1 or a.shape[diff[0]] != cap or b.shape[diff[0]] != cap + 1:
            return None
        axes.append(diff[0])
    if not _semantics_row_wise(node, op, rin, pos, r0, values, consts, first, axes):
        return None
    return count, axes, first


def _semantics_row_wise(node, op, rin, pos, r0, values, consts, outs, axes) -> bool:
    """Whether the op treats rows along the ragged axis independently (the shapes agree
    already: each output has one axis that follows the count)."""
    ins = node.inputs
    if op in UNARY:
        return pos == {0}
    if op in BROADCAST:
        rank = len(outs[0].shape)
        for k, name in enumerate(ins):
            if not name or k in pos:
                continue
            d = values.get(name)
            if d is None or d.shape is None:
                return False
            at = axes[0] - (rank - len(d.shape))
            if at >= 0 and d.shape[at] != 1:
                return False  # a full-length operand would pair its rows with padding
        return all(r.axis + rank - len(values[r.padded].shape) == axes[0] for _, r in rin)
    if op in LAYOUT:
        if pos != {0}:
            return False
        if op in ("Reshape", "Flatten"):
            return r0.axis == 0 and axes[0] == 0  # whole rows stay whole rows
        return True
    if op == "Gather":
        axis = _axis(node.op.axis, values[ins[0]] if 0 not in pos else values[r0.padded])
        if pos == {0}:
            return r0.axis != axis
        if pos == {1}:
            return r0.zero
        return False
    if op == "GatherND":  # indices [..., k]: each index tuple picks its own slice
        rank = len(values[r0.padded].shape)
        return pos == {1} and r0.zero and r0.axis < rank - 1 and not int(node.attrs.get("batch_dims", 0))
    if op == "Slice":
        if pos != {0} or any(i and i not in consts for i in ins[1:]):
            return False
        rank = len(values[r0.padded].shape)
        if len(ins) > 3 and ins[3]:
            sl_axes = [int(a) for a in np.asarray(consts[ins[3]]).reshape(-1)]
        elif len(ins) > 1:
            sl_axes = list(range(np.asarray(consts[ins[1]]).size))
        else:
            sl_axes = [int(a) for a in getattr(node.op, "axes", None) or range(len(node.op.starts))]
        return r0.axis not in {a + rank if a < 0 else a for a in sl_axes}
    if op == "Concat":
        return pos == {k for k, i in enumerate(ins) if i} and _axis(node.op.axis, values[r0.padded]) != r0.axis
    if op in ("Softmax", "LogSoftmax", "Hardmax"):
        return pos == {0} and r0.axis < _axis(node.op.axis, values[r0.padded])
    if op in ("ArgMax", "ArgMin"):
        return pos == {0} and _axis(node.op.axis, values[r0.padded]) != r0.axis
    if op in REDUCE:
        if pos != {0}:
            return False
        red = getattr(node.op, "axes", None)
        if len(ins) > 1 and ins[1]:
            if ins[1] not in consts:
                return False
            red = consts[ins[1]]
        if red is None or np.asarray(red).size == 0:
            return False  # every axis (or none, by a flag): not per row
        rank = len(values[r0.padded].shape)
        return r0.axis not in {int(a) + rank if int(a) < 0 else int(a) for a in np.asarray(red).reshape(-1)}
    if op in PER_IMAGE:
        if op == "BatchNormalization" and (int(node.attrs.get("training_mode", 0)) or len(node.outputs) > 1):
            return False  # batch statistics mix the images
        return pos == {0} and r0.axis == 0
    if op == "MatMul":
        return pos == {0} and r0.axis < len(values[r0.padded].shape) - 1 and len(values[r0.padded].shape) >= 2
    if op == "Gemm":
        c = values.get(ins[2]) if len(ins) > 2 and ins[2] else None
        return (pos == {0} and r0.axis == 0 and not int(getattr(node.op, "transA", 0))
                and (c is None or c.shape is not None and (len(c.shape) < 2 or c.shape[0] == 1)))
    if op == "RoiAlign":
        return pos == {1, 2} and all(r.axis == 0 for _, r in rin) and rin[1][1].zero
    return False


def _axis(a, desc: TensorDesc) -> int:
    a = int(a)
    return a + len(desc.shape) if a < 0 else a


def _infer(node: Node, ragged, values, consts, cap: int | None) -> list[TensorDesc] | None:
    """The node's output types with its ragged inputs padded (to `cap` rows if given)."""
    ins = []
    for i in node.inputs:
        if not i:
            ins.append(TensorDesc(None, None))
            continue
        if i in ragged:
            r = ragged[i]
            d = values[r.padded]
            if cap is not None:
                d = TensorDesc(d.dtype, tuple(cap if k == r.axis else s for k, s in enumerate(d.shape)))
            ins.append(d)
        else:
            ins.append(values.get(i, TensorDesc(None, None)))
    try:
        outs = node.op.infer(ins, [consts.get(i) if i else None for i in node.inputs])
    except Exception as e:  # not inferable with these shapes: not row-wise for this pass
        log.debug("vkml: node %r (%s) does not infer with padded rows (%s: %s); its ragged inputs are trimmed",
                  node.name, node.op_type, type(e).__name__, e)
        return None
    if len(outs) < len([o for o in node.outputs if o]) or any(not d.static for d, o in zip(outs, node.outputs) if o):
        return None
    return list(outs)
