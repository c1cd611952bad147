"""GPU kernel for Einsum (shaders/einsum.comp), with plain (batched) matrix products handed to
the GEMM shaders (kernels/matmul.py record_gemm).

The equation is parsed at plan time by the CPU operator's parser (vkml.ops.matmul.parse_einsum:
the same validation, the same implicit output) and turned into a stride per label and operand:
a letter repeated within an operand adds its axes' strides (a diagonal), a dimension of size 1
against a larger one of the same label reads with stride 0 (NumPy's broadcasting of labelled
dimensions), and ellipsis dimensions are labels of their own, right-aligned and broadcast. The
labels the output keeps become its dimensions, the others the contracted index space.

Two routes:
  * GEMM (float32/float16, two operands): where the labels summed (K: at least one of size > 1,
    in both operands) and, in output order, batch labels (an operand that lacks one reads it
    with stride 0), M labels (first operand only) and N labels (second operand only) make the
    output batch, M, N (or batch, N, M: the operands swap), and each of the M, N, K groups is
    one strided dimension of its operands (the labels' strides chain) with one of the two
    matrix dimensions of each operand contiguous: 'bij,bjk->bik', 'ij,kj->ik', 'ji,jk->ik',
    'i,i', '...ij,...jk->...ik', 'bhqd,bhkd->bhqk', 'ijk,jkl->il' ... the Gemm is built from
    the strides and recorded by kernels/matmul.py's record_gemm (tiled, small or cooperative
    matrix shaders; their order and blocking of the float32 sum, split K included).
  * direct sum, everything else (float64, bfloat16, the integer types, one operand, three or
    four, products with nothing summed, layouts no GEMM reads): one invocation per output
    element sums, over the contracted index space in row-major order of its labels (in order
    of first appearance in the equation), the product of the operands (left to right). It is
    a direct sum, n_out * n_terms multiply-adds with no reuse between invocations: fine for
    the small contractions Einsum mostly does (traces, diagonals, transposes, sums, small
    tensor products); a big contraction that the GEMM route does not take runs at a fraction
    of GEMM speed, and one of more than 2^22 terms per output element stays on the CPU.

Precision: float32/float16/bfloat16 multiply and accumulate in float32 (float16 and bfloat16
widened on load, rounded once at the end, as the CPU operator widens and narrows), float64 in
double (shaderFloat64), integers in their own width modulo 2^bits (8/16-bit ones in 32 bits,
then truncated: the same wrap-around as NumPy's einsum in the dtype, so integer results are
exact and equal the CPU's). Floating results are not bitwise the CPU's: NumPy's einsum (and the
BLAS calls its optimizer makes) sums in orders of its own. Each is within
(K + operands + 1) * eps * sum(|products|) of the exact sum (K: the terms per output; eps of
float32, or of float64 for float64), so they differ by at most twice that, plus one ulp of the
result for float16/bfloat16 (a float32 value rounding the other way): what
tests/ops/test_gpu_einsum.py checks.

Refused (the node runs on the CPU): more than 4 operands, operands of mixed dtypes, bool and the
narrow floats but bfloat16, float64 on a device without shaderFloat64, more than 8 output or 8
contracted dimensions after merging the ones every operand walks contiguously, a direct sum of
more than 2^22 terms per output element (one thread's serial loop; NumPy's sums beat it),
shapes that do not fit the equation (the CPU operator reports the error), a single operand
whose ellipsis dimensions the output drops (NumPy's unoptimized einsum, which the CPU uses for
one operand, rejects that), tensors beyond 2^31 elements or the storage buffer range.
"""
from __future__ import annotations

import math
import re
import struct
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from vkml.ops.matmul import parse_einsum

from .common import BF16, F64, PushBlock, collapse, require_dtypes
from .elem import attr_str
from .gemm import MAX_BATCH_RANK, Gemm
from .matmul import record_gemm
from .reduce import check_size, group_count, threads_wg
from .registry import Kernel, TensorSpec, Unsupported, register

MAX_OPS = 4        # operands (shaders/einsum.comp: NOPS variants 1..4)
MAXR = 8           # output and contracted dimensions, each, after merging
MAX_INDEX = (1 << 31) - 1
# Terms one invocation of the direct sum may add: beyond, one GPU thread walks a long serial
# loop (seconds for 2^31) that NumPy's vectorized or BLAS sums on the CPU beat.
MAX_TERMS = 1 << 22
EINSUM_PUSH = PushBlock("4I", "einsum")  # n_out, out_rank, red_rank, red_total
# dtype -> variant suffix (the shader's type codes: tools/build_shaders.py; f64 and bf16 are
# einsum.comp's own 12 and 13)
SUFFIX = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16", F64: "f64",
          BF16: "bf16", np.dtype(np.int32): "i32", np.dtype(np.int64): "i64",
          np.dtype(np.int8): "i8", np.dtype(np.int16): "i16", np.dtype(np.uint8): "u8",
          np.dtype(np.uint16): "u16", np.dtype(np.uint32): "u32", np.dtype(np.uint64): "u64"}
GEMM_DTYPES = ("f32", "f16")
GEMM_MAX_MN = 65535 * 32  # the GEMM grid: 32-wide tiles at the least, 65535 workgroups per axis


def dtype_suffix(device, dtype, op_type: str) -> str:
    """The variant suffix of `dtype`; Unsupported where the shaders or `device` cannot take it."""
    dt = np.dtype(dtype)
    name = SUFFIX.get(dt)
    if name is None:
        raise Unsupported(f"{op_type} on the GPU takes float32, float16, bfloat16, float64 and the "
                          f"integer types, not {dt}")
    if device is not None:
        require_dtypes(device, dt, allowed=SUFFIX, what=op_type)
    return name


# ---------------------------------------------------------------------------- the plan
@dataclass(frozen=True)
class EinsumPlan:
    """An equation applied to operand shapes: every label's size, and per operand its stride
    along each label (elements; 0 where the operand lacks the label or broadcasts it)."""
    out_labels: tuple[str, ...]
    red_labels: tuple[str, ...]
    sizes: dict
    strides: tuple[dict, ...]
    members: tuple[frozenset, ...]  # the labels each operand's term names

    @property
    def out_shape(self) -> tuple[int, ...]:
        return tuple(self.sizes[c] for c in self.out_labels)

    def dims(self, labels: Sequence[str]) -> tuple[list[int], list[list[int]]]:
        """(shape, per-operand strides) of `labels`, merged where every operand chains."""
        shape = [self.sizes[c] for c in labels]
        return collapse(shape, [[st.get(c, 0) for c in labels] for st in self.strides])


def _contiguous(shape: Sequence[int]) -> list[int]:
    out, acc = [0] * len(shape), 1
    for d in range(len(shape) - 1, -1, -1):
        out[d] = acc
        acc *= shape[d]
    return out


def plan_einsum(equation: str, shapes: Sequence[Sequence[int]]) -> EinsumPlan:
    """The plan of `equation` over operands of `shapes`; Unsupported where the equation does not
    fit them (the CPU operator then reports the error) or where NumPy's einsum would refuse."""
    try:
        terms, out_term = parse_einsum(equation, len(shapes))
    except ValueError as e:
        raise Unsupported(f"Einsum: {e}") from None
    # Each operand's axes as labels: letters, and "...k" for ellipsis dimension k counted in the
    # broadcast ellipsis shape (right-aligned across operands).
    axes_of: list[list[tuple[str, int]]] = []
    n_ell = []
    for term, shape in zip(terms, shapes):
        named = term.replace("...", "")
        if "..." in term:
            if len(shape) < len(named):
                raise Unsupported(f"Einsum: term {term!r} does not fit an input of shape {tuple(shape)}")
            n_ell.append(len(shape) - len(named))
        else:
            if len(shape) != len(named):
                raise Unsupported(f"Einsum: term {term!r} does not fit an input of shape {tuple(shape)}")
            n_ell.append(0)
    ell_rank = max(n_ell, default=0)
    for term, shape, ne in zip(terms, shapes, n_ell):
        head, dots, tail = term.partition("...")
        labels = list(head) + [f"...{ell_rank - ne + j}" for j in range(ne)] + (list(tail) if dots else [])
        axes_of.append(list(zip(labels, (int(s) for s in shape))))
    sizes: dict[str, int] = {}
    order: list[str] = []
    for axes in axes_of:
        for c, d in axes:
            if c not in sizes:
                order.append(c)
                sizes[c] = d
            elif sizes[c] == 1:
                sizes[c] = d
            elif d not in (1, sizes[c]):
                raise Unsupported(f"Einsum: label {c!r} has sizes {sizes[c]} and {d}")
    strides: list[dict[str, int]] = []
    members: list[frozenset] = []
    for axes, shape in zip(axes_of, shapes):
        st: dict[str, int] = {}
        within: dict[str, int] = {}
        for (c, d), s in zip(axes, _contiguous([d for _, d in axes])):
            if c in within and within[c] != d:
                raise Unsupported(f"Einsum: the repeated label {c!r} spans sizes {within[c]} and {d} "
                                  f"in one operand")
            within[c] = d
            st[c] = st.get(c, 0) + (s if d == sizes[c] and d != 1 else 0)
        strides.append(st)
        members.append(frozenset(within))
    head, dots, tail = out_term.partition("...")
    out_labels = list(head) + ([f"...{j}" for j in range(ell_rank)] if dots else []) + list(tail)
    if not dots and ell_rank and len(shapes) == 1:
        # NumPy's einsum without optimize (the CPU's choice for one operand) rejects an output
        # that drops ellipsis dimensions.
        raise Unsupported("Einsum: the output drops the operand's ellipsis dimensions")
    red_labels = [c for c in order if c not in out_labels]
    for s in shapes:
        if math.prod(s) > MAX_INDEX:
            raise Unsupported(f"Einsum: an operand of {math.prod(s)} elements exceeds 2^31")
    return EinsumPlan(tuple(out_labels), tuple(red_labels), sizes, tuple(strides), tuple(members))


# ---------------------------------------------------------------------------- the GEMM route
def _chain(labels: Sequence[str], strides: dict, sizes: dict) -> int | None:
    """The stride of the merged dimension of `labels` (row-major as listed) in an operand, or
    None when their strides do not chain (1 for no labels)."""
    if not labels:
        return 1
    for a, b in zip(labels, labels[1:]):
        if strides.get(a, 0) != strides.get(b, 0) * sizes[b]:
            return None
    return strides.get(labels[-1], 0)


def _matrix(rows: int, cols: int, s_rows: int, s_cols: int) -> tuple[bool, int] | None:
    """(transposed, leading dimension) of a rows x cols operand with these strides as the GEMM
    shaders read it (element (r, c) at r * ld + c, or c * ld + r transposed), or None."""
    if cols == 1 or s_cols == 1:
        return False, (s_rows if rows > 1 else max(cols, 1))
    if rows == 1 or s_rows == 1:
        return True, (s_cols if cols > 1 else max(rows, 1))
    return None


def _gemm(sizes, sa, sb, bl, ml, nl, red) -> Gemm | None:
    """The GEMM of batch labels `bl`, M labels `ml` (first operand's strides `sa`), N labels `nl`
    (second operand's `sb`) and K labels `red`, or None where they do not map onto one."""
    kl = sorted(red, key=lambda c: -sa.get(c, 0))
    m, n, k = (math.prod(sizes[c] for c in g) for g in (ml, nl, kl))
    sm, ska = _chain(ml, sa, sizes), _chain(kl, sa, sizes)
    skb, sn = _chain(kl, sb, sizes), _chain(nl, sb, sizes)
    if None in (sm, ska, skb, sn):
        return None
    am, bm = _matrix(m, k, sm, ska), _matrix(k, n, skb, sn)
    if am is None or bm is None:
        return None
    bshape, (sab, sbb) = collapse([sizes[c] for c in bl], [[sa.get(c, 0) for c in bl],
                                                           [sb.get(c, 0) for c in bl]])
    if len(bshape) > MAX_BATCH_RANK:
        return None
    return Gemm(m, n, k, am[0], bm[0], am[1], bm[1], bshape, sab, sbb)


def gemm_of(plan: EinsumPlan) -> tuple[Gemm, bool] | None:
    """(the GEMM, whether the operands swap) that computes a two-operand plan, or None."""
    if len(plan.strides) != 2:
        return None
    sizes = plan.sizes
    if any(sizes[c] == 0 for c in sizes):
        return None  # empty: the direct kernel writes the zeros
    live = [c for c in plan.out_labels if sizes[c] > 1]
    red = [c for c in plan.red_labels if sizes[c] > 1]
    if not red:
        return None  # no sum (products, outer products): one product per output, direct is as good
    for swap in (False, True):
        ia, ib = (1, 0) if swap else (0, 1)
        sa, sb = plan.strides[ia], plan.strides[ib]
        ma, mb = plan.members[ia], plan.members[ib]
        if any(not (c in ma and c in mb) for c in red):
            return None  # a label summed in one operand alone
        kinds = "".join("b" if c in ma and c in mb else "m" if c in ma else "n" for c in live)
        # The output is batch labels (any kind: one operand alone reads a batch label with stride
        # 0), then M's, then N's: the longest M and N blocks first.
        for split in range(len(live) + 1):
            if not re.fullmatch(r"m*n*", kinds[split:]):
                continue
            g = _gemm(sizes, sa, sb, live[:split], [c for c in live[split:] if c in ma],
                      [c for c in live[split:] if c not in ma], red)
            if g is not None:
                return g, swap
    return None


# ---------------------------------------------------------------------------- the kernel
def _meta(shape: Sequence[int], strides: Sequence[Sequence[int]]) -> list[int]:
    out = list(shape) + [0] * (MAXR - len(shape))
    for st in strides:
        out += list(st) + [0] * (MAXR - len(st))
    return out


@register
class EinsumKernel(Kernel):
    op_types = ("Einsum",)

    def _plan(self, attrs, inputs) -> EinsumPlan:
        if not inputs or any(t is None for t in inputs):
            raise Unsupported("Einsum needs all its inputs")
        if len(inputs) > MAX_OPS:
            raise Unsupported(f"Einsum of {len(inputs)} operands (the GPU kernel takes at most {MAX_OPS})")
        if len({np.dtype(t.dtype) for t in inputs}) != 1:
            raise Unsupported("Einsum with operands of mixed dtypes")
        equation = attr_str(attrs, "equation", "")
        return plan_einsum(equation, [tuple(t.shape) for t in inputs])

    def _route(self, plan: EinsumPlan, dtype) -> tuple[Gemm, bool] | None:
        """(the GEMM, whether the operands swap) when that route applies, else None. (Sizes need
        no check of their own: check() bounds every operand and the output by 2^31 elements and
        the storage buffer range, which bounds M, N, K and the batch.)"""
        if dtype_suffix(None, dtype, "Einsum") not in GEMM_DTYPES:
            return None
        got = gemm_of(plan)
        if got is not None and max(got[0].m, got[0].n) > GEMM_MAX_MN:
            return None  # more workgroups along M or N than a dispatch may have
        return got

    def check(self, device, op_type, attrs, inputs):
        plan = self._plan(attrs, inputs)
        dtype = inputs[0].dtype
        dtype_suffix(device, dtype, op_type)
        out = TensorSpec(plan.out_shape, np.dtype(dtype))
        check_size(device, *inputs, out)
        if self._route(plan, dtype) is None:
            oshape, _ = plan.dims(plan.out_labels)
            rshape, _ = plan.dims(plan.red_labels)
            if len(oshape) > MAXR or len(rshape) > MAXR:
                raise Unsupported(f"Einsum over {len(oshape)} output and {len(rshape)} contracted "
                                  f"dimensions after merging (the GPU kernel takes {MAXR} of each)")
            if math.prod(rshape) > MAX_TERMS:
                raise Unsupported(f"Einsum: {math.prod(rshape)} contracted terms per output element "
                                  f"(the direct GPU sum takes at most {MAX_TERMS})")

    def infer(self, op_type, attrs, inputs):
        plan = self._plan(attrs, inputs)
        return [TensorSpec(plan.out_shape, np.dtype(inputs[0].dtype))]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        specs = [TensorSpec.of(t) for t in inputs]
        plan = self._plan(attrs, specs)
        out = outputs[0]
        n_out = math.prod(plan.out_shape)
        if n_out == 0:
            return
        device = rec.device
        route = self._route(plan, out.dtype)
        if route is not None:
            g, swap = route
            a, b = (inputs[1], inputs[0]) if swap else (inputs[0], inputs[1])
            record_gemm(rec, g, a, b, None, out)
            return
        oshape, ostr = plan.dims(plan.out_labels)
        rshape, rstr = plan.dims(plan.red_labels)
        red_total = math.prod(rshape)
        meta = rec.constants(struct.pack(f"<{2 * (len(inputs) + 1) * MAXR}I",
                                         *_meta(oshape, ostr), *_meta(rshape, rstr)))
        wg = threads_wg(device)
        nops = len(inputs)
        name = f"einsum_{dtype_suffix(None, out.dtype, op_type)}_n{nops}"
        p = device.pipeline(name, "r" * nops + "wr", EINSUM_PUSH.size, (wg,))
        # An empty operand is never read (its contracted dimension has no terms): the meta
        # buffer stands in for it.
        views = [t.view if t.nbytes else meta for t in inputs]
        rec.dispatch(p, views + [out.view, meta], EINSUM_PUSH.pack(n_out, len(oshape), len(rshape), red_total),
                     group_count(device, -(-n_out // wg)))
