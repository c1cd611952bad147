"""GPU ScatterND / ScatterElements / Scatter (vkml/kernels/scatter.py, shaders/scatter.comp)
against vkml's CPU operator (a session on the "cpu" device) over hypothesis shapes, axes,
index patterns (random with negatives, distinct, all one row, a few rows), reductions (none,
add, mul, max, min at opsets 9-18), data dtypes and int32/int64 indices.

Results are compared bit for bit: reduction none moves bits, and the reductions fold every
destination's updates in index order, as NumPy's ufunc.at does (float16 rounding each step;
float max/min picking NumPy's NaN and signed zero). The one allowance: where a reduction
computes a NaN (inf * 0, inf - inf), only its position is compared, since devices differ in the
NaN they produce. Bad indices computed at run time raise the CPU operator's error, word for
word; bad initializer indices keep the node on the CPU.
"""
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
from _oracle import make_model, outcome, same_failure  # noqa: E402

import vkml  # noqa: E402

HYP = settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", "10")), deadline=None,
               suppress_health_check=list(HealthCheck))
BF16 = np.dtype(ml_dtypes.bfloat16)
REDUCING = [np.dtype(t) for t in (np.float32, np.float16, np.bool_, np.int8, np.int16, np.int32, np.int64,
                                  np.uint8, np.uint16, np.uint32, np.uint64)]
MOVE_ONLY = [np.dtype(np.float64), BF16]  # reduction none only on the GPU
# (opset, reduction): the reductions each opset has
OPSET_REDUCTIONS = [(11, "none"), (13, "none"), (16, "none"), (16, "add"), (16, "mul"),
                    (18, "none"), (18, "add"), (18, "mul"), (18, "max"), (18, "min")]
PATTERNS = ["random", "distinct", "same", "few"]


def values(rng: np.random.Generator, shape, dtype: np.dtype, reduction: str) -> np.ndarray:
    """Data or updates: small numbers with ties, signed zeros and (for max/min) NaN and inf."""
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        lo, hi = (-3, 3) if reduction == "mul" else (-100, 100)
        return rng.integers(max(lo, info.min), min(hi, info.max), shape, endpoint=True).astype(dtype)
    pool = [-2.5, -1.0, -0.0, 0.0, 0.5, 1.0, 1.5, 3.0, 1e-3, -7.25, 65.0]
    if reduction in ("max", "min"):
        pool += [np.nan, np.inf, -np.inf]
    v = np.where(rng.random(shape) < 0.5, rng.choice(pool, shape), rng.uniform(-4, 4, shape))
    return v.astype(dtype)


def index_values(rng, n: int, dim: int, pattern: str) -> np.ndarray:
    """n indices into a dimension of size dim (negatives from the end included)."""
    if pattern == "distinct" and n <= dim:
        v = rng.permutation(dim)[:n]
    elif pattern == "same":
        v = np.full(n, rng.integers(0, dim))
    elif pattern == "few":
        v = rng.choice(rng.integers(0, dim, 2), n)
    else:
        v = rng.integers(0, dim, n)
    flip = rng.random(n) < 0.4  # the same positions, counted from the end
    return np.where(flip, v - dim, v)


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.dtype(f"u{a.dtype.itemsize}"))


def assert_same(got: np.ndarray, want: np.ndarray, reduction: str) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    if reduction != "none" and want.dtype.kind == "f":
        # Which NaN a device computes varies (an H100's float16 max of NaNs gives 0x7FFF where
        # NumPy keeps 0x7E00): NaNs where NumPy has them, the other values bit for bit.
        nan = np.isnan(want)
        np.testing.assert_array_equal(np.isnan(got), nan)
        got, want = got[~nan], want[~nan]
    np.testing.assert_array_equal(bits(got), bits(want))


def run_both(gpu, model, feed, dispatches: bool = True):
    """(GPU output, CPU output), asserting the node ran on the GPU (with shaders unless
    `dispatches` is False: no updates is a buffer copy)."""
    sess = vkml.InferenceSession(model, devices=[gpu])
    (got,) = sess.run(None, feed)
    (row,) = sess.placement()
    assert row["device"] == gpu and (row.get("pipelines") or not dispatches), row  # it really ran on the GPU
    (want,) = vkml.InferenceSession(model, devices=["cpu"]).run(None, feed)
    return got, want


def dtypes_for(reduction: str, opset: int):
    dts = REDUCING + (MOVE_ONLY if reduction == "none" else [])
    return [d for d in dts if d != BF16 or opset >= 13]


@HYP
@given(dshape=st.lists(st.integers(1, 4), min_size=1, max_size=4).map(tuple),
       bshape=st.lists(st.integers(1, 4), min_size=0, max_size=2).map(tuple),
       opset_red=st.sampled_from(OPSET_REDUCTIONS), pattern=st.sampled_from(PATTERNS),
       idtype=st.sampled_from([np.int64, np.int32]), seed=seeds, data=st.data())
def test_scatter_nd(gpu, dshape, bshape, opset_red, pattern, idtype, seed, data):
    opset, reduction = opset_red
    rng = np.random.default_rng(seed)
    k = data.draw(st.integers(1, len(dshape)), "k")
    dtype = data.draw(st.sampled_from(dtypes_for(reduction, opset)), "dtype")
    m = math.prod(bshape)
    rows = math.prod(dshape[:k])
    if pattern == "distinct" and m <= rows:  # distinct index tuples
        flat = rng.permutation(rows)[:m]
        idx = np.stack(np.unravel_index(flat, dshape[:k]), -1) - np.where(rng.random((m, k)) < 0.4, dshape[:k], 0)
    else:
        idx = np.stack([index_values(rng, m, d, pattern) for d in dshape[:k]], -1)
    idx = idx.reshape(bshape + (k,)).astype(idtype)
    x = values(rng, dshape, dtype, reduction)
    upd = values(rng, bshape + dshape[k:], dtype, reduction)
    feed = {"data": x, "indices": idx, "updates": upd}
    attrs = {} if reduction == "none" and opset < 16 else {"reduction": reduction}
    got, want = run_both(gpu, make_model("ScatterND", feed, attrs, opset), feed)
    assert_same(got, want, reduction)


@HYP
@given(dshape=st.lists(st.integers(1, 5), min_size=1, max_size=4).map(tuple),
       opset_red=st.sampled_from(OPSET_REDUCTIONS + [(9, "none"), (10, "none")]), pattern=st.sampled_from(PATTERNS),
       idtype=st.sampled_from([np.int64, np.int32]), seed=seeds, data=st.data())
def test_scatter_elements(gpu, dshape, opset_red, pattern, idtype, seed, data):
    opset, reduction = opset_red
    op = "Scatter" if opset < 11 else "ScatterElements"
    rng = np.random.default_rng(seed)
    rank = len(dshape)
    axis = data.draw(st.integers(-rank, rank - 1), "axis")
    a = axis % rank
    # idx: at most data's size off the axis, any length (duplicates included) along it
    ishape = tuple(data.draw(st.integers(1, 6 if d == a else n), f"dim{d}") for d, n in enumerate(dshape))
    dtype = data.draw(st.sampled_from(dtypes_for(reduction, opset)), "dtype")
    lines = math.prod(ishape) // ishape[a]
    idx = np.stack([index_values(rng, ishape[a], dshape[a], pattern) for _ in range(lines)], -1)
    idx = np.moveaxis(idx.reshape((ishape[a],) + ishape[:a] + ishape[a + 1:]), 0, a).astype(idtype)
    x = values(rng, dshape, dtype, reduction)
    upd = values(rng, ishape, dtype, reduction)
    feed = {"data": x, "indices": idx, "updates": upd}
    attrs = {"axis": axis} if reduction == "none" and opset < 16 else {"axis": axis, "reduction": reduction}
    got, want = run_both(gpu, make_model(op, feed, attrs, opset), feed)
    assert_same(got, want, reduction)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.int64, np.uint8])
@pytest.mark.parametrize("reduction", ["add", "mul", "max", "min"])
def test_many_duplicates(gpu, dtype, reduction):
    """3000 updates onto 5 rows, mostly one, and 5000 per column along a ScatterElements axis:
    folds in index order across the kernel's chunks of 2048 units (float sums bitwise)."""
    rng = np.random.default_rng(11)
    dt = np.dtype(dtype)
    x = values(rng, (5, 3), dt, reduction)
    idx = np.where(rng.random(3000) < 0.9, 2, rng.integers(-5, 5, 3000)).reshape(3000, 1).astype(np.int64)
    upd = values(rng, (3000, 3), dt, reduction)
    if reduction == "mul" and dt.kind == "f":
        upd = rng.choice(np.array([1.0, -1.0, 1.0009765625, 0.99951171875], dt), (3000, 3))
    feed = {"data": x, "indices": idx, "updates": upd}
    got, want = run_both(gpu, make_model("ScatterND", feed, {"reduction": reduction}, 18), feed)
    assert_same(got, want, reduction)
    xe = values(rng, (4, 7), dt, reduction)  # ScatterElements along axis 0: 5000 updates per column
    ie = rng.integers(-4, 4, (5000, 7)).astype(np.int32)
    ue = values(rng, (5000, 7), dt, reduction)
    if reduction == "mul" and dt.kind == "f":
        ue = rng.choice(np.array([1.0, -1.0, 1.0009765625, 0.99951171875], dt), (5000, 7))
    feed = {"data": xe, "indices": ie, "updates": ue}
    got, want = run_both(gpu, make_model("ScatterElements", feed, {"reduction": reduction, "axis": 0}, 18), feed)
    assert_same(got, want, reduction)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_long_fold(gpu, dtype):
    """70000 updates onto one row (and a few others): a fold longer than any one loop may run
    on lavapipe (65535 iterations), split over the kernel's chunk dispatches."""
    rng = np.random.default_rng(9)
    n = 70000
    idx = np.where(rng.random(n) < 0.95, 1, rng.integers(-3, 3, n)).reshape(n, 1).astype(np.int64)
    upd = rng.uniform(-1, 1, (n, 2)).astype(dtype)
    feed = {"data": np.zeros((3, 2), dtype), "indices": idx, "updates": upd}
    got, want = run_both(gpu, make_model("ScatterND", feed, {"reduction": "add"}, 18), feed)
    assert_same(got, want, "add")


def test_too_many_updates_for_a_reduction(gpu):
    """A reduction over more than 4096 chunks of 2048 updates stays on the CPU (a dispatch per
    chunk); reduction none has no such limit."""
    from vkml.kernels import Unsupported, get_kernel
    from vkml.kernels.registry import TensorSpec
    from vkml.runtime.devices import vulkan_device

    dev = vulkan_device(gpu)
    k = get_kernel("ScatterElements")
    n = 4096 * 2048 + 1
    specs = [TensorSpec((n,), np.dtype(np.float32)), TensorSpec((n,), np.dtype(np.int64)),
             TensorSpec((n,), np.dtype(np.float32))]
    with pytest.raises(Unsupported, match="folds up to"):
        k.check(dev, "ScatterElements", {"reduction": "add"}, specs)
    k.check(dev, "ScatterElements", {"reduction": "none"}, specs)
    k.check(dev, "ScatterElements", {"reduction": "add"}, [TensorSpec((n - 1,), s.dtype) for s in specs])


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.int8, np.float64])
def test_kv_cache_update(gpu, dtype):
    """A KV-cache write: ScatterND of (B, H, T, D) rows into a (B, H, S, D) cache at (b, h, pos)
    (slices moved as 16-byte words), then the same rows written twice (the last wins)."""
    rng = np.random.default_rng(5)
    b, h, s, t, d = 2, 4, 64, 3, 32
    cache = rng.standard_normal((b, h, s, d)).astype(dtype)
    pos = np.array([17, 18, -1])
    idx = np.stack(np.meshgrid(np.arange(b), np.arange(h), pos, indexing="ij"), -1).astype(np.int64)
    upd = rng.standard_normal((b, h, t, d)).astype(dtype)
    feed = {"data": cache, "indices": idx, "updates": upd}
    got, want = run_both(gpu, make_model("ScatterND", feed, {}, 13), feed)
    assert_same(got, want, "none")
    idx2 = np.concatenate([idx, idx], 2)
    upd2 = rng.standard_normal((b, h, 2 * t, d)).astype(dtype)
    feed = {"data": cache, "indices": idx2, "updates": upd2}
    got, want = run_both(gpu, make_model("ScatterND", feed, {}, 13), feed)
    assert_same(got, want, "none")
    np.testing.assert_array_equal(bits(got[:, :, pos]), bits(upd2[:, :, t:]))


def test_empty(gpu):
    """No updates (a copy), empty slices, and an empty data axis where any index is bad."""
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for idx, upd in ((np.zeros((0, 1), np.int64), np.zeros((0, 4), np.float32)),
                     (np.zeros((2, 0, 2), np.int64), np.zeros((2, 0), np.float32))):
        feed = {"data": x, "indices": idx, "updates": upd}
        got, want = run_both(gpu, make_model("ScatterND", feed, {"reduction": "add"}, 18), feed, idx.size > 0)
        assert_same(got, want, "add")
    x0 = np.zeros((3, 0), np.float32)  # slices of 0 elements: the indices are still checked
    feed = {"data": x0, "indices": np.array([[2], [-3]], np.int64), "updates": np.zeros((2, 0), np.float32)}
    got, want = run_both(gpu, make_model("ScatterND", feed, {}, 11), feed)
    assert got.shape == (3, 0)
    feed["indices"] = np.array([[1], [3]], np.int64)
    _, err = outcome(vkml.InferenceSession(make_model("ScatterND", feed, {}, 11), devices=[gpu]), feed)
    _, want_err = outcome(vkml.InferenceSession(make_model("ScatterND", feed, {}, 11), devices=["cpu"]), feed)
    assert want_err is not None and type(err) is type(want_err) and str(err) == str(want_err), (err, want_err)
    xe = np.zeros((0, 3), np.float32)  # ScatterElements on an empty axis: every index is bad
    feed = {"data": xe, "indices": np.array([[0, 0, 0]], np.int64), "updates": np.ones((1, 3), np.float32)}
    model = make_model("ScatterElements", feed, {"axis": 0}, 13)
    _, err = outcome(vkml.InferenceSession(model, devices=[gpu]), feed)
    _, want_err = outcome(vkml.InferenceSession(model, devices=["cpu"]), feed)
    assert want_err is not None and type(err) is type(want_err) and str(err) == str(want_err), (err, want_err)


# (position in the flattened index array, value): several bad values, in several columns,
# beyond int32; the CPU names one per its column-by-column check, and so must the GPU.
BAD_ND = [[(0, 4)], [(5, -5)], [(1, 9), (4, -7), (7, 6)], [(6, -9), (2, 100)], [(3, 2**40)],
          [(7, -(2**63)), (1, 5)], [(0, 2**31), (2, -(2**31) - 1)]]
BAD_ELEMENTS = [[(0, 3)], [(11, -4)], [(2, 7), (5, -9), (9, 40)], [(4, -(2**40)), (8, 2**33)], [(10, 2**31)]]


@pytest.mark.parametrize("reduction", ["none", "add"])
@pytest.mark.parametrize("bad", BAD_ND)
def test_bad_index_raises_as_on_the_cpu_nd(gpu, bad, reduction):
    """ScatterND indices out of range computed at run time: the GPU run raises the CPU
    operator's error (type and message) and writes nothing out of bounds; the session goes on
    working."""
    x = np.arange(4 * 3 * 2, dtype=np.float32).reshape(4, 3, 2)
    good = np.array([[0, 1], [3, 2], [1, 0], [2, 2]], np.int64)  # indices (4, 2): columns of dims 4 and 3
    upd = np.ones((4, 2), np.float32)
    feed = {"data": x, "indices": good, "updates": upd}
    model = make_model("ScatterND", feed, {"reduction": reduction}, 18)
    gpu_sess = vkml.InferenceSession(model, devices=[gpu])
    cpu_sess = vkml.InferenceSession(model, devices=["cpu"])
    idx = good.copy().reshape(-1)
    for p, v in bad:
        idx[p] = v
    feed_bad = {**feed, "indices": idx.reshape(good.shape)}
    assert "ScatterND indices" in str(same_failure(gpu_sess, cpu_sess, feed_bad, feed))


@pytest.mark.parametrize("reduction", ["none", "max"])
@pytest.mark.parametrize("idtype", [np.int32, np.int64])
@pytest.mark.parametrize("bad", BAD_ELEMENTS)
def test_bad_index_raises_as_on_the_cpu_elements(gpu, bad, idtype, reduction):
    x = np.zeros((3, 4), np.float32)
    good = np.tile(np.array([[0], [1], [2]]), (1, 4)).astype(np.int64)
    feed = {"data": x, "indices": good.astype(idtype), "updates": np.ones((3, 4), np.float32)}
    model = make_model("ScatterElements", feed, {"axis": 0, "reduction": reduction}, 18)
    gpu_sess = vkml.InferenceSession(model, devices=[gpu])
    cpu_sess = vkml.InferenceSession(model, devices=["cpu"])
    idx = good.reshape(-1).copy()
    for p, v in bad:
        if idtype == np.int32 and not -(2**31) <= v < 2**31:
            v = -(2**31) if v < 0 else 2**31 - 1
        idx[p] = v
    feed_bad = {**feed, "indices": idx.reshape(good.shape).astype(idtype)}
    same_failure(gpu_sess, cpu_sess, feed_bad, feed)


def test_bad_index_known_on_the_host(gpu):
    """Initializer indices out of range keep the node on the CPU, which reports them."""
    x = np.zeros((3, 2), np.float32)
    feed = {"data": x, "indices": np.array([[1], [3]], np.int64), "updates": np.ones((2, 2), np.float32)}
    model = make_model("ScatterND", feed, {}, 13, consts=("indices",))
    sess = vkml.InferenceSession(model, devices=[gpu, "cpu"])
    (row,) = sess.placement()
    assert row["device"] == "cpu" and "indices outside" in str(row), row
    with pytest.raises(Exception, match=r"ScatterND indices: index 3 is out of range for a dimension of size 3"):
        sess.run(None, {"data": x, "updates": feed["updates"]})
    feed["indices"] = np.array([[1], [-3]], np.int64)  # in range: on the GPU
    model = make_model("ScatterND", feed, {"reduction": "add"}, 18, consts=("indices",))
    sess = vkml.InferenceSession(model, devices=[gpu])
    (row,) = sess.placement()
    assert row["device"] == gpu, row
    (y,) = sess.run(None, {"data": x, "updates": feed["updates"]})
    np.testing.assert_array_equal(y, [[1, 1], [1, 1], [0, 0]])


@pytest.mark.parametrize("dtype", [np.float64, BF16])
@pytest.mark.parametrize("reduction", ["add", "max"])
def test_refused(gpu, dtype, reduction):
    """Reductions on dtypes without GPU arithmetic stay on the CPU, with the reason."""
    x = np.ones((3, 2), dtype)
    feed = {"data": x, "indices": np.array([[1], [1]], np.int64), "updates": np.full((2, 2), 2, dtype)}
    model = make_model("ScatterND", feed, {"reduction": reduction}, 18)
    sess = vkml.InferenceSession(model, devices=[gpu, "cpu"])
    (row,) = sess.placement()
    assert row["device"] == "cpu" and "the GPU reduces" in str(row), row
    np.testing.assert_array_equal(sess.run(None, feed)[0].astype(np.float64),
                                  vkml.InferenceSession(model, devices=["cpu"]).run(None, feed)[0].astype(np.float64))
