"""GPU ArgMax/ArgMin (vkml/kernels/reduce.py's ArgKernel, shaders/reduce.comp) over every input
dtype they take on the GPU: float32, float16 and every integer type (int64 and uint64 compare
64-bit keys in the shared-memory variants), against vkml's CPU operator (a session on the device
named "cpu") and onnx's reference evaluator. Hypothesis draws shapes, axes, keepdims,
select_last_index, opsets 11-13 and values with many ties (and NaN for floats); then reductions
long enough for the workgroup-per-output variants, and a CLIP-style pooling (ArgMax over int64
token ids). Indices are exact.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx.reference import ReferenceEvaluator

sys.path.insert(0, os.path.dirname(__file__))
from _gen import seeds  # noqa: E402
from _oracle import gpu_and_cpu, make_model  # noqa: E402

HYP = settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", "40")), deadline=None,
               suppress_health_check=list(HealthCheck))
DTYPES = [np.float32, np.float16, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
          np.uint64]


def values(rng, shape, dtype, levels: int) -> np.ndarray:
    dt = np.dtype(dtype)
    n = int(np.prod(shape))
    if dt.kind == "f":
        x = (rng.integers(-levels, levels + 1, n) / 2).astype(dt)
        x[rng.random(n) < 0.05] = np.nan
        return x.reshape(shape)
    info = np.iinfo(dt)
    pool = rng.integers(info.min, info.max, max(1, levels), dtype=dt, endpoint=True)
    x = rng.choice(np.concatenate([pool, np.array([info.min, info.max], dt)]), n)
    return x.reshape(shape)


def check(gpu, op, x, attrs, opset=13, reference=True):
    model = make_model(op, {"x": x}, attrs, opset)
    (got,), (want,), sess = gpu_and_cpu(gpu, model, {"x": x})
    (row,) = sess.placement()
    assert row["device"] == gpu and row.get("pipelines"), row
    assert got.dtype == want.dtype == np.int64 and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    if reference and not (np.dtype(x.dtype).kind == "f" and np.isnan(x).any()):
        (ref,) = ReferenceEvaluator(model).run(None, {"x": x})  # (its NaN handling is its own)
        np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@HYP
@given(shape=st.lists(st.integers(1, 6), min_size=1, max_size=4).map(tuple), data=st.data(),
       dtype=st.sampled_from(DTYPES), levels=st.sampled_from([1, 3, 1000]), seed=seeds)
def test_arg(gpu, op, shape, data, dtype, levels, seed):
    rng = np.random.default_rng(seed)
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    if data.draw(st.booleans()):  # a long axis: a workgroup per output
        shape = shape[:axis % len(shape)] + (data.draw(st.integers(32, 3000)),) + shape[axis % len(shape) + 1:]
    opset = data.draw(st.sampled_from([11, 12, 13]))
    attrs = {"axis": axis, "keepdims": data.draw(st.sampled_from([0, 1]))}
    if opset >= 12 and data.draw(st.booleans()):
        attrs["select_last_index"] = data.draw(st.sampled_from([0, 1]))
    check(gpu, op, values(rng, shape, dtype, levels), attrs, opset)


@pytest.mark.parametrize("dtype", [np.int64, np.uint64, np.int8, np.uint32])
@pytest.mark.parametrize("shape, axis", [((3, 5000), 1), ((4000, 3), 0), ((2, 700, 3), 1), ((50, 40), 1)])
@pytest.mark.parametrize("last", [0, 1])
def test_long_integer_reductions(gpu, dtype, shape, axis, last):
    """Every variant the host picks (an invocation per output; a workgroup per output, contiguous
    or strided) on the new dtypes, with both tie rules."""
    rng = np.random.default_rng(len(shape) + axis)
    x = values(rng, shape, dtype, 7)
    for op in ("ArgMax", "ArgMin"):
        check(gpu, op, x, {"axis": axis, "keepdims": 0, "select_last_index": last})


def test_clip_pooling_on_the_gpu(gpu):
    """CLIP's text pooling: ArgMax over int64 token ids picks each sequence's end token; the node
    (it fell back to the CPU before) runs on the GPU."""
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 49407, (4, 77)).astype(np.int64)
    ids[np.arange(4), [5, 76, 0, 30]] = 49407
    check(gpu, "ArgMax", ids, {"axis": -1, "keepdims": 0})
