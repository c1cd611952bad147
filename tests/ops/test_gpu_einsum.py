"""GPU Einsum (vkml/kernels/einsum.py, shaders/einsum.comp; plain batched matmuls through the GEMM
shaders) against vkml's CPU operator over hypothesis equations: 1 to 4 operands, repeated
letters within an operand (diagonals), size-1 dimensions broadcast against larger ones, ellipses
(broadcast, kept or summed), implicit and explicit outputs, empty contractions; float32,
float16, bfloat16, float64 and every integer type.

Tolerances: integers are exact (both wrap modulo 2^bits, whatever the order). Floating sums are
not bitwise the CPU's (NumPy's einsum and its BLAS calls sum in orders of their own): each side
is within (K + operands + 1) * eps * sum(|products|) of the exact sum (K: the contracted terms
per output; eps of float32, the working precision of float32/float16/bfloat16, or of float64),
so they differ by at most twice that, plus, for float16/bfloat16, one ulp of the result (a
float32 value rounding the other way)."""
from __future__ import annotations

import math
import os
import sys

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
from _gen import seeds  # noqa: E402
from _oracle import device_of, gpu_and_cpu, make_model  # noqa: E402

from vkml.kernels import TensorSpec, Unsupported, get_kernel  # noqa: E402
from vkml.kernels.einsum import gemm_of, plan_einsum  # noqa: E402

EXAMPLES = int(os.environ.get("VKML_TEST_EXAMPLES", "10"))
HYP = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
HYP_MANY = settings(max_examples=4 * EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
BF16 = np.dtype(ml_dtypes.bfloat16)
F32, F16, F64 = np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.float64)
FLOATS = [F32, F16, BF16, F64]
INTS = [np.dtype(t) for t in (np.int32, np.int64, np.int8, np.int16, np.uint8, np.uint16, np.uint32, np.uint64)]
OPSET = 21


def _values(rng, shape, dtype):
    if dtype.kind == "f" or dtype == BF16:
        return rng.uniform(-2, 2, shape).astype(dtype)
    info = np.iinfo(dtype)  # the whole range: products and sums wrap
    return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


def _exact(eq: str, xs, absolute=False):
    """The sum in long double (of |products| when `absolute`), by NumPy's unoptimized einsum."""
    args = [np.abs(x.astype(np.longdouble)) if absolute else x.astype(np.longdouble) for x in xs]
    return np.einsum(eq, *args, optimize=len(args) > 1)  # (as the CPU operator calls it)


def _terms(equation: str, shapes) -> int:
    plan = plan_einsum(equation, shapes)
    return math.prod(plan.sizes[c] for c in plan.red_labels)


def assert_close(equation, xs, got, want):
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    dtype = got.dtype
    if dtype.kind in "iu":
        np.testing.assert_array_equal(got, want)
        return
    from vkml.ops.matmul import parse_einsum
    terms, out = parse_einsum(equation, len(xs))
    eq = ",".join(terms) + "->" + out
    k = _terms(equation, [x.shape for x in xs])
    eps = np.finfo(np.float64 if dtype == F64 else np.float32).eps
    bound = 2 * (k + len(xs) + 1) * eps * np.asarray(_exact(eq, xs, True), np.float64)
    g, w = got.astype(np.float64), want.astype(np.float64)
    if dtype in (F16, BF16):
        ulp_bits = 10 if dtype == F16 else 7
        mag = np.maximum(np.abs(g), np.abs(w))
        exp = np.floor(np.log2(np.where(mag > 0, mag, 1.0)))
        tiny = 2.0 ** -24 if dtype == F16 else 2.0 ** -133
        bound = bound + np.maximum(2.0 ** (exp - ulp_bits), tiny)
    err = np.abs(g - w)
    assert np.all(err <= bound), (equation, [x.shape for x in xs], dtype, float(np.max(err - bound)),
                                  g.reshape(-1)[:8], w.reshape(-1)[:8])


def _run(gpu, equation, xs, expect=None):
    """GPU vs CPU; `expect` "matmul" or "einsum": the pipeline the node must use."""
    names = [f"x{i}" for i in range(len(xs))]
    model = make_model("Einsum", dict(zip(names, xs)), {"equation": equation}, OPSET)
    feed = dict(zip(names, xs))
    (got,), (want,), sess = gpu_and_cpu(gpu, model, feed, quiet=True)
    (row,) = sess.placement()
    assert row["device"] == gpu and (row.get("pipelines") or want.size == 0), row
    if expect is not None:
        assert any(p["shader"].startswith(expect) for p in row["pipelines"]), row["pipelines"]
    assert_close(equation, xs, got, want)
    return row


# ---------------------------------------------------------------------------- generated equations
LETTERS = "abcijkAB"


@st.composite
def einsum_cases(draw):
    """(equation, operand shapes): valid for NumPy's einsum as the CPU operator calls it."""
    n_ops = draw(st.sampled_from([1, 1, 2, 2, 2, 3, 4]))
    pool = draw(st.lists(st.sampled_from(LETTERS), min_size=1, max_size=5, unique=True))
    sizes = {c: draw(st.sampled_from([1, 2, 3, 4, 5])) for c in pool}
    if draw(st.integers(0, 9)) == 0:
        sizes[pool[0]] = 0  # an empty label
    use_ell = draw(st.integers(0, 3)) == 0
    ell_shape = draw(st.lists(st.integers(1, 3), min_size=0, max_size=2)) if use_ell else []
    terms, shapes, with_ell = [], [], []
    for _ in range(n_ops):
        labels = draw(st.lists(st.sampled_from(pool), min_size=0, max_size=4))
        bcast = {c: draw(st.integers(0, 5)) == 0 for c in set(labels)}  # this operand's size 1
        shape = [1 if bcast[c] else sizes[c] for c in labels]
        ell = use_ell and draw(st.booleans())
        if ell:
            at = draw(st.integers(0, len(labels)))
            keep = draw(st.integers(0, len(ell_shape)))
            eshape = [1 if draw(st.integers(0, 3)) == 0 else d for d in ell_shape[len(ell_shape) - keep:]]
            labels = labels[:at] + ["..."] + labels[at:]
            shape = shape[:at] + eshape + shape[at:]
        terms.append("".join(labels))
        shapes.append(tuple(shape))
        with_ell.append(ell)
    used = sorted({c for t in terms for c in t.replace("...", "")})
    if draw(st.integers(0, 3)) == 0:
        return ",".join(terms), shapes  # implicit output
    out = draw(st.permutations(used)) if used else []
    out = "".join(out[:draw(st.integers(0, len(out)))])
    if any(with_ell) and (n_ops == 1 or draw(st.booleans())):
        at = draw(st.integers(0, len(out)))
        out = out[:at] + "..." + out[at:]
    return ",".join(terms) + "->" + out, shapes


@HYP_MANY
@given(case=einsum_cases(), dtype=st.sampled_from(FLOATS + INTS), seed=seeds)
def test_einsum_generated(gpu, case, dtype, seed):
    equation, shapes = case
    rng = np.random.default_rng(seed)
    xs = [_values(rng, s, dtype) for s in shapes]
    _run(gpu, equation, xs)


# ---------------------------------------------------------------------------- the GEMM route
GEMM_CASES = [
    ("bij,bjk->bik", [(5, 2, 3), (5, 3, 4)]),
    ("ij,jk->ik", [(33, 70), (70, 19)]),
    ("ij,kj->ik", [(8, 64), (12, 64)]),         # B transposed
    ("ji,jk->ik", [(64, 8), (64, 12)]),         # A transposed
    ("ij,jk->ki", [(6, 7), (7, 5)]),            # the output is (B's, A's): the operands swap
    ("bij,jk->bik", [(3, 4, 5), (5, 6)]),       # A's batch folds into M
    ("i,i", [(100,)]*2),                        # inner product
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (3, 4, 5)]),  # ellipsis batch, broadcast
    ("bhqd,bhkd->bhqk", [(2, 3, 5, 8), (2, 3, 6, 8)]),  # attention scores
    ("bhqk,bhkd->bhqd", [(2, 3, 5, 6), (2, 3, 6, 8)]),
    ("bik,bij->bkj", [(2, 9, 4), (2, 9, 3)]),   # A^T B per batch
    ("bij,bjk->bki", [(2, 3, 4), (2, 4, 5)]),   # (A B)^T = B^T A^T: swapped, both transposed
    ("bij,bjk->ibk", [(2, 3, 4), (2, 4, 5)]),   # batch (i, b), M = 1
    ("ijk,jkl->il", [(4, 3, 5), (3, 5, 6)]),    # two contracted labels, merged
    ("ij,jk", [(1, 5), (5, 1)]),
    ("ij,jk->ik", [(4, 1), (3, 6)]),            # A's K broadcast: stride 0
]


@pytest.mark.parametrize("equation,shapes", GEMM_CASES, ids=[c[0] for c in GEMM_CASES])
@pytest.mark.parametrize("dtype", [F32, F16], ids=str)
def test_gemm_route(gpu, equation, shapes, dtype):
    rng = np.random.default_rng(3)
    xs = [_values(rng, s, dtype) for s in shapes]
    assert gemm_of(plan_einsum(equation, shapes)) is not None
    _run(gpu, equation, xs, expect="matmul")


# The direct kernel's cases (where a GEMM does it too, as for 'ii,ij->j', float32 and float16 take it)
DIRECT_CASES = [
    ("ii->i", [(5, 5)]),                 # diagonal
    ("ii", [(6, 6)]),                    # trace
    ("...ii->...i", [(3, 5, 5)]),        # batch diagonal
    ("ij->ji", [(3, 4)]),                # transpose
    ("ij->i", [(3, 4)]),                 # sum
    ("ij->", [(7, 9)]),
    ("->", [()]),                        # scalar
    ("ij,jk,kl->il", [(3, 4), (4, 5), (5, 2)]),  # three operands
    ("i,i,i,i->", [(6,)] * 4),
    ("ij,ij->ij", [(3, 4), (3, 4)]),     # elementwise product (nothing summed: no GEMM)
    ("i,j->ij", [(7,), (9,)]),           # outer product
    ("ijk,kjl->il", [(2, 3, 4), (4, 3, 5)]),  # K's labels (j, k) do not chain in both
    ("ij,jk->ik", [(3, 0), (0, 4)]),     # empty contraction: zeros
    ("ii,ij->j", [(1, 1), (3, 2)]),      # a broadcast diagonal
    ("i...,i...->i", [(2, 3), (2, 1)]),  # ellipsis summed (two operands: NumPy's optimize path)
    ("ij,ij->i", [(2, 3), (2, 1)]),      # a letter broadcast
]


@pytest.mark.parametrize("equation,shapes", DIRECT_CASES, ids=[c[0] or "scalar" for c in DIRECT_CASES])
@pytest.mark.parametrize("dtype", [F32, F16, BF16, F64, np.dtype(np.int32), np.dtype(np.uint8)], ids=str)
def test_direct_route(gpu, equation, shapes, dtype):
    rng = np.random.default_rng(5)
    xs = [_values(rng, s, dtype) for s in shapes]
    gemm = dtype in (F32, F16) and gemm_of(plan_einsum(equation, shapes)) is not None
    _run(gpu, equation, xs, expect="matmul" if gemm else "einsum")


def test_big_contraction_direct(gpu):
    """A long direct sum (K = 4096, float32 and float16): within the documented bound."""
    rng = np.random.default_rng(9)
    for dtype in (F32, F16):
        xs = [_values(rng, (3, 16, 16), dtype), _values(rng, (16, 16, 4), dtype)]
        _run(gpu, "ajk,jkb->ab", xs, expect="matmul")
        _run(gpu, "ajk,jkb->ba", xs, expect="matmul")
        _run(gpu, "ajk,kjb->ab", xs, expect="einsum")  # K's labels do not chain in B


@HYP
@given(m=st.integers(1, 40), n=st.integers(1, 40), k=st.integers(2, 80), batch=st.integers(1, 3),
       ta=st.booleans(), tb=st.booleans(), dtype=st.sampled_from([F32, F16]), seed=seeds)
def test_gemm_route_shapes(gpu, m, n, k, batch, ta, tb, dtype, seed):
    rng = np.random.default_rng(seed)
    a_term, b_term = ("bkm" if ta else "bmk"), ("bnk" if tb else "bkn")
    xs = [_values(rng, (batch, k, m) if ta else (batch, m, k), dtype),
          _values(rng, (batch, n, k) if tb else (batch, k, n), dtype)]
    _run(gpu, f"{a_term},{b_term}->bmn", xs, expect="matmul")


# ---------------------------------------------------------------------------- refusals
def _check(dev, equation, specs):
    get_kernel("Einsum").check(dev, "Einsum", {"equation": equation.encode()}, specs)


def test_refusals(gpu):
    dev = device_of(gpu)
    f = np.dtype(np.float32)
    spec = TensorSpec((3, 3), f)
    with pytest.raises(Unsupported, match="at most 4"):
        _check(dev, "ij,ij,ij,ij,ij->ij", [spec] * 5)
    with pytest.raises(Unsupported, match="mixed dtypes"):
        _check(dev, "ij,ij->ij", [spec, TensorSpec((3, 3), np.dtype(np.float16))])
    with pytest.raises(Unsupported, match="bool"):
        _check(dev, "ij->ji", [TensorSpec((3, 3), np.dtype(np.bool_))])
    with pytest.raises(Unsupported, match="sizes 3 and 4"):
        _check(dev, "ij,ij->ij", [spec, TensorSpec((3, 4), f)])
    with pytest.raises(Unsupported, match="repeated label"):
        _check(dev, "ii->i", [TensorSpec((3, 1), f)])
    with pytest.raises(Unsupported, match="does not fit"):
        _check(dev, "ijk->i", [spec])
    with pytest.raises(Unsupported, match="ellipsis"):
        _check(dev, "...ij->ij", [TensorSpec((2, 3, 3), f)])
    nine = TensorSpec((2,) * 9, f)
    with pytest.raises(Unsupported, match="contracted dimensions"):
        _check(dev, "abcdefghi,ihgfedcba->", [nine, nine])  # nine that no merging joins
    _check(dev, "abcdefghi,abcdefghi->", [nine, nine])  # both contiguous alike: one dimension
    with pytest.raises(Unsupported, match="terms per output"):
        _check(dev, "ij->", [TensorSpec((4096, 2048), f)])  # 2^23 terms for one thread
    _check(dev, "ij,ij->", [TensorSpec((4096, 2048), f)] * 2)  # a GEMM (an inner product) takes it
    with pytest.raises(Unsupported, match="shaderFloat64"):
        class NoFp64:
            name, features, max_storage_buffer_range = "fake GPU", frozenset({"int64"}), 1 << 30
        _check(NoFp64(), "ij->ji", [TensorSpec((3, 3), np.dtype(np.float64))])

