"""GPU kernels for ScatterND and ScatterElements (and Scatter, its opset-9 name): reduction
none/add/mul/max/min, int32/int64 indices, negative ones from the end.

Both see the updates as units (ScatterND: an index tuple and its slice; ScatterElements: one
element) landing on destination rows. After copying data into the output, shaders/scatter.comp:
- none: mark (per unit: check its indices, atomicMax of unit + 1 into its row's scratch word:
  exact, order-free), then each update element is written by its row's last unit only, so
  duplicates end as NumPy's assignment ends them: the last update wins.
- reductions: sort (a workgroup per chunk of 2048 units sorts them by (row, unit) in shared
  memory), then a dispatch per chunk, in order, where one invocation per destination element
  folds that chunk's units of its row in index order onto the output. Every update meets its
  destination in NumPy's ufunc.at order, so results are bit for bit the CPU operator's (float16
  rounds after each step as NumPy does; float max/min pick NumPy's NaN and signed zero). No
  float atomics (their order would change sums), and no unbounded loop: lavapipe ends an
  invocation's loops after 65535 iterations, which a long fold of duplicates would hit.

An index out of range is skipped (nothing is written out of bounds) and sets the run slot's
fault word (common.fault_binding); a check pass then names the value the CPU operator names (the
first index column with a bad value: its minimum if below -dim, else its maximum), so the run
raises the CPU's error word for word. Indices known on the host are range-checked here: a bad
one keeps the node on the CPU, which reports it.

Reduction none moves bits, so every dtype a device tensor holds runs (float64, bfloat16...).
Reductions compute float32, float16, bool (add = or, mul = and) and 8- to 64-bit integers
(wrapping as NumPy). Refused (CPU): reductions on other dtypes or over more than 4096 chunks
(8M updates: a dispatch each), indices other than int32/int64, updates of another dtype than
data, rank above 8 (ScatterElements) or an index depth above 8 (ScatterND), the shapes the CPU
operator rejects, and tensors beyond one binding or 2^31 elements.
"""
from __future__ import annotations

import math

import numpy as np

from .common import DTYPE_NAMES, FAULT_ATTR, PushBlock, fault_binding, require_dtypes
from .elem import HostInputs, attr_str, contiguous_strides, require_bindable, require_elements, specs_of
from .movement import widen_factor
from .registry import Kernel, TensorSpec, Unsupported, register

# n, units, slice, total, site, mode, op, rank, axis, ulen, width, first, dims[8], ostride[8]
SCATTER_PUSH = PushBlock("12I8I8I", "scatter")
CHUNK = 2048        # units a reduction sorts per workgroup (shaders/scatter.comp CHUNK)
MAX_CHUNKS = 4096   # reductions fold chunk by chunk, a dispatch each: beyond this the CPU goes faster
INDEX_BITS = {np.dtype(np.int32): 32, np.dtype(np.int64): 64}
OPS = {"none": 0, "add": 1, "mul": 2, "max": 3, "min": 4}
BOOL_OPS = {"add": "max", "mul": "min"}  # NumPy's logical_or / logical_and on 0/1 bytes


def _index_error(what: str, dims: tuple[int, ...], node, bad: int, column: int) -> Exception:
    """The CPU operator's error (ops.gather.norm_index) for `bad` in index column `column`."""
    from ..ops.gather import norm_index

    try:
        norm_index(np.array([bad], np.int64), dims[column], what)
    except ValueError as e:
        return e
    return RuntimeError(f"{what}: the GPU reported {bad}, in range for {dims[column]} (a vkml bug)")


class Plan:
    """A Scatter node's geometry; Unsupported where the GPU does not go."""

    def __init__(self, op_type, attrs, inputs):
        if len(inputs) != 3 or any(s is None for s in inputs):
            raise Unsupported(f"{op_type} takes data, indices and updates")
        data, idx, upd = inputs
        self.reduction = attr_str(attrs, "reduction", "none")
        if self.reduction not in OPS:
            raise Unsupported(f"{op_type} reduction {self.reduction!r} (the CPU operator reports it)")
        dshape, ishape, ushape = tuple(data.shape), tuple(idx.shape), tuple(upd.shape)
        rank = len(dshape)
        if op_type == "ScatterND":
            if not ishape:
                raise Unsupported("ScatterND indices of rank 0 (the CPU operator reports it)")
            k = ishape[-1]
            if not 1 <= k <= min(rank, 8):
                raise Unsupported(f"ScatterND index depth {k} for data of rank {rank} (1 to min(rank, 8) on the GPU)")
            if ushape != ishape[:-1] + dshape[k:]:
                raise Unsupported(f"ScatterND: updates {ushape} for indices {ishape} and data {dshape} "
                                  f"(the CPU operator reports it)")
            self.mode, self.axis, self.ulen, self.rank, self.width = 0, 0, 0, k, k
            self.units, self.slice = math.prod(ishape[:-1]), math.prod(dshape[k:])
            self.dims, self.ostride = dshape[:k], ()
            self.check_dims = dshape[:k]  # per index column
            self.what = "ScatterND indices"
        else:
            if not (rank == len(ishape) == len(ushape)) or ishape != ushape or rank == 0:
                raise Unsupported(f"{op_type}: data {dshape}, indices {ishape}, updates {ushape} "
                                  f"(the CPU operator reports it)")
            if rank > 8:
                raise Unsupported(f"{op_type} of rank {rank} (8 at most on the GPU)")
            a = int(attrs.get("axis", 0))
            if not -rank <= a < rank:
                raise Unsupported(f"{op_type}: axis {a} out of range for rank {rank}")
            a = a + rank if a < 0 else a
            if any(i > d for k, (i, d) in enumerate(zip(ishape, dshape)) if k != a):
                raise Unsupported(f"{op_type}: indices {ishape} larger than data {dshape} off the axis "
                                  f"(the CPU operator reports it)")
            self.mode, self.axis, self.ulen, self.rank, self.width = 1, a, ishape[a], rank, 1
            self.units, self.slice = math.prod(ishape), 1
            self.dims = ishape[:a] + (dshape[a],) + ishape[a + 1:]
            self.ostride = tuple(contiguous_strides(dshape))
            self.check_dims = (dshape[a],)
            self.what = f"{op_type} indices"
        self.chunks = -(-self.units // CHUNK)
        # scratch words: none: the last unit per row; reductions: (row, unit) per sorted position
        self.words = math.prod(self.dims) if self.reduction == "none" else 2 * self.chunks * CHUNK

    def push(self, n: int, site: int, op: int, slice_: int | None = None, first: int = 0) -> bytes:
        pad = lambda v: list(v) + [0] * (8 - len(v))  # noqa: E731
        return SCATTER_PUSH.pack(n, self.units, self.slice if slice_ is None else slice_, self.chunks * CHUNK, site,
                                 self.mode, op, self.rank, self.axis, self.ulen, self.width, first, *pad(self.dims),
                                 *pad(self.ostride))


@register
class ScatterKernel(Kernel):
    op_types = ("ScatterND", "ScatterElements", "Scatter")
    faults = True  # indices out of range

    def check(self, device, op_type, attrs, inputs):
        plan = Plan(op_type, attrs, inputs)
        data, idx, upd = inputs
        if idx.dtype not in INDEX_BITS:
            raise Unsupported(f"{op_type} indices of dtype {idx.dtype} (int32 and int64 run on the GPU)")
        if upd.dtype != data.dtype:
            raise Unsupported(f"{op_type}: updates of {upd.dtype} for data of {data.dtype}")
        require_elements(device, data.dtype)
        if plan.reduction != "none":
            if data.dtype not in DTYPE_NAMES:
                raise Unsupported(f"{op_type} reduction {plan.reduction!r} on {data.dtype} (the GPU reduces "
                                  f"float32, float16, bool and 8- to 64-bit integers)")
            require_dtypes(device, data.dtype)
            if plan.chunks > MAX_CHUNKS:
                raise Unsupported(f"{op_type} reduction over {plan.units} updates (the GPU folds up to "
                                  f"{MAX_CHUNKS * CHUNK}, {CHUNK} per dispatch)")
        require_bindable(device, data, idx, upd)
        if plan.words * 4 > device.max_storage_buffer_range:
            raise Unsupported(f"{op_type}: {plan.words} scratch words exceed one binding")
        if getattr(idx, "value", None) is not None:
            v = HostInputs(inputs).array(1, f"{op_type}'s indices")
            if v.size:
                cols = v.reshape(-1, plan.width)
                for j, d in enumerate(plan.check_dims):
                    if cols[:, j].min() < -d or cols[:, j].max() >= d:
                        raise Unsupported(f"{op_type}: indices outside [-{d}, {d - 1}] (the CPU operator reports it)")

    def infer(self, op_type, attrs, inputs):
        return [TensorSpec(tuple(inputs[0].shape), inputs[0].dtype)]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        data, idx, upd = inputs
        out = outputs[0]
        plan = Plan(op_type, attrs, specs_of(inputs, consts))
        dev = rec.device
        if out.nbytes:
            rec.copy(data.view, out.view, data.nbytes)
        if plan.units == 0:  # no updates: nothing to write, no index to check
            return
        fault = attrs.get(FAULT_ATTR)
        if fault is None:  # a recording nobody reads faults from (benchmarks, by hand)
            fview, site = fault_binding(rec, attrs, plan.what, plan.check_dims[0])
        else:
            dims, what = plan.check_dims, plan.what
            fview, site = fault.view, fault.site(what, dims[0], lambda node, bad, col: _index_error(what, dims, node,
                                                                                                 bad, col))
        bits = INDEX_BITS[idx.dtype]
        reduction = plan.reduction
        if data.dtype == np.bool_:
            reduction = BOOL_OPS.get(reduction, reduction)
        op = OPS[reduction]
        scratch = dev.alloc(max(16, 4 * plan.words))
        n = plan.units * plan.slice
        ov = out.view if out.nbytes else rec.constants(bytes(4))  # (every index is bad: nothing is written)
        check = dev.pipeline(f"scatter_check_i{bits}", "rx", SCATTER_PUSH.size)
        if reduction == "none":
            rec.fill(scratch, 0)
            p = dev.pipeline(f"scatter_mark_i{bits}", "rxx", SCATTER_PUSH.size)
            rec.dispatch(p, [idx.view, scratch, fview], plan.push(plan.units, site, op), p.groups_for(plan.units))
            rec.dispatch(check, [idx.view, fview], plan.push(plan.units, site, op), 1)
            if n == 0:
                return
            es = data.dtype.itemsize
            f = widen_factor(dev, es, plan.slice, (1,), (), ()) if plan.mode == 0 else 1  # slices as wider words
            p = dev.pipeline(f"scatter_b{es * f}_i{bits}", "rrrw", SCATTER_PUSH.size)
            rec.dispatch(p, [idx.view, upd.view, scratch, ov], plan.push(n // f, site, op, plan.slice // f),
                         p.groups_for(n // f))
            return
        p = dev.pipeline(f"scatter_sort_i{bits}", "rwx", SCATTER_PUSH.size)
        rec.dispatch(p, [idx.view, scratch, fview], plan.push(plan.units, site, op),
                     min(plan.chunks, dev.limits["max_compute_work_group_count"][0]))
        rec.dispatch(check, [idx.view, fview], plan.push(plan.units, site, op), 1)
        if n == 0:
            return
        p = dev.pipeline(f"scatter_{DTYPE_NAMES[data.dtype]}_i{bits}", "rrrx", SCATTER_PUSH.size)
        for c in range(plan.chunks):  # in order: a row's later units fold onto its earlier ones
            first = c * CHUNK
            count = min(CHUNK, plan.units - first) * plan.slice
            rec.dispatch(p, [idx.view, upd.view, scratch, ov], plan.push(count, site, op, first=first),
                         p.groups_for(count))
