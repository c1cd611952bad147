"""MatMul, Gemm, Einsum, MatMulInteger, QLinearMatMul and Det against onnx.reference."""
import os
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
from _gen import BF16, FLOATS, seeds, tol, values  # noqa: E402
from _oracle import check_node, make_model  # noqa: E402

import vkml  # noqa: E402

NUMERIC = FLOATS + [np.dtype(t) for t in (np.int32, np.int64, np.uint32, np.uint64)]


def _tol(dtype, k=4):
    if dtype in (np.float16, BF16):
        return {"rtol": 3e-2, "atol": 3e-2 * k}
    return tol(dtype) if dtype.kind == "f" else {}


def _vs_float32(op, ins, attrs, opset, dtype, t):
    """bfloat16: onnx.reference has no kernels for it, so compare with its float32 result."""
    from onnx.reference import ReferenceEvaluator

    f32 = {k: (v.astype(np.float32) if v is not None and v.dtype == BF16 else v) for k, v in ins.items()}
    want = ReferenceEvaluator(make_model(op, f32, attrs, opset)).run(None, {k: v for k, v in f32.items() if v is not None})
    got = vkml.InferenceSession(make_model(op, ins, attrs, opset).SerializeToString(), devices=["cpu"]).run(
        None, {k: v for k, v in ins.items() if v is not None})
    assert got[0].dtype == dtype and got[0].shape == want[0].shape
    np.testing.assert_allclose(got[0].astype(np.float32), want[0], **t)


@st.composite
def matmul_shapes(draw):
    m, k, n = draw(st.integers(1, 4)), draw(st.integers(1, 5)), draw(st.integers(1, 4))
    batch = draw(st.lists(st.integers(1, 3), max_size=2))
    a = tuple(1 if draw(st.booleans()) else d for d in batch) + (m, k)
    b = tuple(batch[draw(st.integers(0, len(batch))):]) + (k, n)
    if draw(st.integers(0, 4)) == 0:
        a = (k,)
    if draw(st.integers(0, 4)) == 0:
        b = (k,)
    return a, b


@settings(deadline=None, max_examples=40)
@given(shapes=matmul_shapes(), dtype=st.sampled_from(NUMERIC), seed=seeds, opset=st.sampled_from([1, 9, 13]))
def test_matmul(shapes, dtype, seed, opset):
    rng = np.random.default_rng(seed)
    lo = 0 if dtype.kind == "u" else -3
    ins = {"a": values(rng, shapes[0], dtype, lo, 3), "b": values(rng, shapes[1], dtype, lo, 3)}
    if dtype == BF16:
        _vs_float32("MatMul", ins, {}, 13, dtype, _tol(dtype, shapes[0][-1]))
    else:
        check_node("MatMul", ins, {}, opset=13 if dtype.kind != "f" or dtype == np.float16 else opset,
                   **_tol(dtype, shapes[0][-1]))


@settings(deadline=None, max_examples=40)
@given(dtype=st.sampled_from(FLOATS + [np.dtype(np.int32), np.dtype(np.int64)]), seed=seeds,
       m=st.integers(1, 4), k=st.integers(1, 5), n=st.integers(1, 4), ta=st.sampled_from([0, 1]),
       tb=st.sampled_from([0, 1]), c_kind=st.sampled_from(["none", "scalar", "row", "col", "full", "1n"]),
       alpha=st.sampled_from([1.0, 0.5, -2.0]), beta=st.sampled_from([1.0, 0.0, 2.5]),
       opset=st.sampled_from([7, 11, 13]))
def test_gemm(dtype, seed, m, k, n, ta, tb, c_kind, alpha, beta, opset):
    rng = np.random.default_rng(seed)
    a = values(rng, (k, m) if ta else (m, k), dtype, -3, 3)
    b = values(rng, (n, k) if tb else (k, n), dtype, -3, 3)
    c_shape = {"none": None, "scalar": (), "row": (n,), "col": (m, 1), "full": (m, n), "1n": (1, n)}[c_kind]
    if c_shape is None and opset < 11:
        c_shape = (m, n)  # C is required before opset 11
    c = None if c_shape is None else values(rng, c_shape, dtype, -3, 3)
    if dtype.kind == "i":
        alpha, beta = 1.0, 1.0
    attrs = {"transA": ta, "transB": tb, "alpha": alpha, "beta": beta}
    ins = {"a": a, "b": b, "c": c}
    if dtype == BF16:
        _vs_float32("Gemm", ins, attrs, 13, dtype, _tol(dtype, k))
    else:
        check_node("Gemm", ins, attrs, opset=opset if dtype != np.float16 else 13, **_tol(dtype, k))


def test_gemm_v6_broadcast_attribute():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((4, 2)).astype(np.float32)
    c = rng.standard_normal((2,)).astype(np.float32)
    check_node("Gemm", {"a": a, "b": b, "c": c}, {"broadcast": 1, "alpha": 2.0}, opset=6)


def test_gemm_bad_c_is_a_clear_error():
    a, b = np.ones((3, 4), np.float32), np.ones((4, 2), np.float32)
    c = np.ones((3, 3), np.float32)
    model = make_model("Gemm", {"a": a, "b": b, "c": c}, {}, 13).SerializeToString()
    with pytest.raises(RuntimeError, match="does not broadcast"):
        vkml.InferenceSession(model, devices=["cpu"]).run(None, {"a": a, "b": b, "c": c})


EINSUM = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ij->ji", [(3, 4)]),
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("i,i", [(5,), (5,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("...ij,...jk", [(2, 3, 4), (4, 2)]),
    ("...ii->...i", [(3, 5, 5)]),
    ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("Ab,bC->AC", [(2, 3), (3, 4)]),
    ("ba", [(3, 4)]),
    ("ij -> i", [(3, 4)]),
    ("->", [()]),
]


@pytest.mark.parametrize("eq,shapes", EINSUM)
@settings(deadline=None, max_examples=6)
@given(dtype=st.sampled_from([np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16), BF16,
                              np.dtype(np.int32), np.dtype(np.int64)]), seed=seeds)
def test_einsum(eq, shapes, dtype, seed):
    rng = np.random.default_rng(seed)
    ins = {f"x{i}": values(rng, s, dtype, -3, 3) for i, s in enumerate(shapes)}
    if dtype == BF16:
        _vs_float32("Einsum", ins, {"equation": eq}, 12, dtype, _tol(dtype, 8))
    else:
        check_node("Einsum", ins, {"equation": eq}, opset=12, **_tol(dtype, 8))


@pytest.mark.parametrize("eq,n", [("ij,jk", 1), ("i.j->i", 1), ("ij->k", 1), ("ij->ii", 1), ("i,j,k->ijk", 2)])
def test_einsum_bad_equation_is_rejected(eq, n):
    ins = {f"x{i}": np.ones((2, 2), np.float32) for i in range(n)}
    model = make_model("Einsum", ins, {"equation": eq}, 12).SerializeToString()
    with pytest.raises(vkml.ModelError):
        vkml.InferenceSession(model, devices=["cpu"])


@settings(deadline=None, max_examples=30)
@given(shapes=matmul_shapes(), seed=seeds, adt=st.sampled_from([np.uint8, np.int8]),
       bdt=st.sampled_from([np.uint8, np.int8]), zp=st.sampled_from(["none", "scalar", "vector"]))
def test_matmul_integer(shapes, seed, adt, bdt, zp):
    sa, sb = shapes
    rng = np.random.default_rng(seed)
    info_a, info_b = np.iinfo(adt), np.iinfo(bdt)
    a = rng.integers(info_a.min, info_a.max, sa, endpoint=True).astype(adt)
    b = rng.integers(info_b.min, info_b.max, sb, endpoint=True).astype(bdt)
    ins = {"a": a, "b": b}
    if zp == "scalar":
        ins["az"] = np.array(rng.integers(info_a.min, info_a.max), adt)
        ins["bz"] = np.array(rng.integers(info_b.min, info_b.max), bdt)
    elif zp == "vector" and len(sa) == 2 and len(sb) == 2:
        # Per-row zero points for A, per-column for B. onnx.reference subtracts A's along the
        # wrong axis, so the spec's formula is the oracle here.
        az = rng.integers(info_a.min, info_a.max, sa[0]).astype(adt)
        bz = rng.integers(info_b.min, info_b.max, sb[1]).astype(bdt)
        ins.update(az=az, bz=bz)
        model = make_model("MatMulInteger", ins, {}, 10).SerializeToString()
        (got,) = vkml.InferenceSession(model, devices=["cpu"]).run(None, ins)
        want = (a.astype(np.int64) - az[:, None]) @ (b.astype(np.int64) - bz[None, :])
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got, want)
        return
    check_node("MatMulInteger", ins, {}, opset=10)


@settings(deadline=None, max_examples=30)
@given(seed=seeds, m=st.integers(1, 4), k=st.integers(1, 6), n=st.integers(1, 4), batch=st.sampled_from([(), (2,)]),
       dt=st.sampled_from([np.uint8, np.int8]), scale_dt=st.sampled_from([np.float32, np.float16]))
def test_qlinear_matmul(seed, m, k, n, batch, dt, scale_dt):
    rng = np.random.default_rng(seed)
    info = np.iinfo(dt)
    a = rng.integers(info.min, info.max, batch + (m, k), endpoint=True).astype(dt)
    b = rng.integers(info.min, info.max, batch + (k, n), endpoint=True).astype(dt)
    s = lambda lo, hi: np.array(rng.uniform(lo, hi), scale_dt)  # noqa: E731
    z = lambda: np.array(rng.integers(info.min // 2, info.max // 2), dt)  # noqa: E731
    ins = {"a": a, "as": s(0.01, 0.05), "az": z(), "b": b, "bs": s(0.01, 0.05), "bz": z(),
           "ys": s(0.05 * k, 0.2 * k), "yz": z()}
    opset = 21 if scale_dt == np.float16 else 10
    model = make_model("QLinearMatMul", ins, {}, opset)
    from onnx.reference import ReferenceEvaluator
    want = ReferenceEvaluator(model).run(None, ins)[0]
    got = vkml.InferenceSession(model.SerializeToString(), devices=["cpu"]).run(None, ins)[0]
    assert got.dtype == want.dtype and got.shape == want.shape
    # A value on a rounding boundary may land either side depending on the scale's precision.
    assert np.max(np.abs(got.astype(np.int32) - want.astype(np.int32)), initial=0) <= 1


@settings(deadline=None, max_examples=20)
@given(seed=seeds, n=st.integers(1, 4), batch=st.sampled_from([(), (3,), (2, 2)]),
       dtype=st.sampled_from([np.dtype(np.float32), np.dtype(np.float64)]))
def test_det(seed, n, batch, dtype):
    x = np.random.default_rng(seed).uniform(-2, 2, batch + (n, n)).astype(dtype)
    check_node("Det", {"x": x}, {}, opset=22, rtol=1e-4, atol=1e-5)


def test_det_float16():
    x = np.array([[[1, 2], [3, 4]], [[2, 0], [0, 3]]], np.float16)
    (got,) = vkml.InferenceSession(make_model("Det", {"x": x}, {}, 22).SerializeToString(),
                                   devices=["cpu"]).run(None, {"x": x})
    assert got.dtype == np.float16
    np.testing.assert_allclose(got, [-2, 6], rtol=1e-3)


def test_matmul_large_float32_matches_numpy():
    """The BLAS path: larger operands, batch broadcast on the right operand."""
    rng = np.random.default_rng(5)
    a = rng.standard_normal((4, 64, 96)).astype(np.float32)
    b = rng.standard_normal((96, 48)).astype(np.float32)
    (got,) = vkml.InferenceSession(make_model("MatMul", {"a": a, "b": b}, {}, 13).SerializeToString(),
                                   devices=["cpu"]).run(None, {"a": a, "b": b})
    np.testing.assert_allclose(got, np.matmul(a.astype(np.float64), b.astype(np.float64)), rtol=1e-4, atol=1e-4)


def test_matmul_inner_mismatch_is_a_clear_error():
    a, b = np.ones((2, 3), np.float32), np.ones((4, 2), np.float32)
    model = make_model("MatMul", {"a": a, "b": b}, {}, 13).SerializeToString()
    with pytest.raises(RuntimeError, match="inner dimensions"):
        vkml.InferenceSession(model, devices=["cpu"]).run(None, {"a": a, "b": b})
