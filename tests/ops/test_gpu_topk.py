"""GPU TopK (vkml/kernels/topk.py, shaders/topk.comp) against vkml's CPU operator (a session on
the device named "cpu") and onnx's reference evaluator, over hypothesis-generated nodes: rank 1-4,
any axis, k from 0 to the row length, largest and smallest, sorted or not, opsets 1, 10 and 11
(K as the attribute, an initializer, or a fed input the plan is specialized for), float32,
float16 and every integer dtype, with many ties (values drawn from a few levels) and, for floats,
NaN, ±inf and ±0. Every output must be bitwise equal: TopK only selects and copies. The GPU
session must have dispatched the node. Then rows longer than one workgroup's chunk (the multi-pass
path: detection-sized rows of 8400-100 000 with k up to 1000), and what the kernel refuses.
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

import vkml  # noqa: E402
from vkml.kernels import get_kernel  # noqa: E402
from vkml.kernels.registry import TensorSpec  # noqa: E402

HYP = settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", "40")), deadline=None,
               suppress_health_check=list(HealthCheck))
DTYPES = [np.float32, np.float16, np.int32, np.int64, np.uint8, np.int8, np.int16, np.uint16, np.uint32,
          np.uint64]


def values(rng, shape, dtype, levels: int | None = None) -> np.ndarray:
    """Values with ties (`levels` distinct values) or without; floats also take NaN, ±inf, ±0."""
    dt = np.dtype(dtype)
    n = int(np.prod(shape))
    if dt.kind == "f":
        x = rng.standard_normal(n) * 10 if levels is None else rng.integers(-levels, levels + 1, n) / 2
        x = x.astype(dt)
        special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0], dt)
        pick = rng.random(n) < 0.1
        x[pick] = rng.choice(special, int(pick.sum()))
    else:
        info = np.iinfo(dt)
        if levels is None:
            x = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
        else:
            x = rng.choice(rng.integers(info.min, info.max, max(1, levels), dtype=dt, endpoint=True), n)
            x[rng.random(n) < 0.05] = info.max  # the extremes tie with nothing else's key
            x[rng.random(n) < 0.05] = info.min
    return x.reshape(shape)


def check(gpu, x, k, attrs, opset, k_as="const", reference=True):
    """Run TopK on the GPU and the CPU (and onnx.reference); all must agree bitwise."""
    kk = np.array([k], np.int64)
    if opset < 10:
        model = make_model("TopK", {"x": x}, {**attrs, "k": k}, opset, outputs=["v", "i"])
        feed = {"x": x}
    else:
        model = make_model("TopK", {"x": x, "k": kk}, attrs, opset, outputs=["v", "i"],
                           consts=("k",) if k_as == "const" else ())
        feed = {"x": x} if k_as == "const" else {"x": x, "k": kk}
    got, want, sess = gpu_and_cpu(gpu, model, feed)
    (row,) = sess.placement()
    assert row["device"] == gpu and (row.get("pipelines") or k == 0), row  # k = 0: nothing to do
    refs = ReferenceEvaluator(model).run(None, feed) if reference else want
    for name, g, w, r in zip(("values", "indices"), got, want, refs):
        assert g.dtype == w.dtype and g.shape == w.shape, (name, g.dtype, g.shape, w.dtype, w.shape)
        np.testing.assert_array_equal(g, w, err_msg=f"{name} against the CPU operator")
        np.testing.assert_array_equal(g, np.asarray(r), err_msg=f"{name} against onnx.reference")
        if g.dtype.kind == "f":  # NaN where NaN, and the sign of zero, bit for bit
            assert g.tobytes() == w.tobytes(), name


@st.composite
def cases(draw):
    rng = np.random.default_rng(draw(seeds))
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=1, max_size=4)))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    if draw(st.booleans()):  # a longer axis now and then (several chunks of the short-row path)
        shape = shape[:axis % len(shape)] + (draw(st.integers(7, 300)),) + shape[axis % len(shape) + 1:]
    n = shape[axis]
    k = draw(st.integers(0, n))
    dtype = draw(st.sampled_from(DTYPES))
    x = values(rng, shape, dtype, draw(st.sampled_from([None, 1, 3, 20])))
    opset = draw(st.sampled_from([1, 10, 11]))
    attrs = {"axis": axis} if axis != -1 or draw(st.booleans()) else {}
    if opset >= 11:
        if draw(st.booleans()):
            attrs["largest"] = draw(st.sampled_from([0, 1]))
        if draw(st.booleans()):
            attrs["sorted"] = 1
    return x, k, attrs, opset


@HYP
@given(case=cases())
def test_topk(gpu, case):
    x, k, attrs, opset = case
    check(gpu, x, k, attrs, opset)


def test_k_fed_at_run_time(gpu):
    """K fed as a graph input: the plan is specialized for its value and the node runs on the GPU,
    one plan per K."""
    rng = np.random.default_rng(3)
    x = values(rng, (4, 50), np.float32, 5)
    for k in (1, 7, 50):
        check(gpu, x, k, {"largest": 0}, 11, k_as="input")


@pytest.mark.parametrize("shape, axis, k, dtype", [
    ((1, 8400), -1, 300, np.float32),      # YOLOv8's candidates
    ((2, 25200), 1, 1000, np.float32),     # YOLOv5's, the largest k the brief asks for
    ((100_000,), 0, 1000, np.float16),     # one long row: 4 passes on 32 KiB of shared memory
    ((3, 9000, 2), 1, 2048, np.float32),   # k = half the chunk, a strided axis
    ((5000, 3), 0, 700, np.int64),         # 64-bit keys: chunks of 2048 on 32 KiB
    ((2, 20000), -1, 1, np.uint8),         # k = 1 over heavy ties
])
def test_long_rows(gpu, shape, axis, k, dtype):
    """Rows longer than one workgroup's chunk: several passes, each keeping the best P of a chunk."""
    rng = np.random.default_rng(k)
    x = values(rng, shape, dtype, None if dtype == np.float32 else 50)
    for largest in (1, 0):
        check(gpu, x, k, {"axis": axis, "largest": largest}, 11, reference=False)


@HYP
@given(seed=seeds, n=st.integers(129, 3000), k_frac=st.floats(0, 1), rows=st.integers(1, 3),
       dtype=st.sampled_from([np.float32, np.int64, np.uint8]), levels=st.sampled_from([None, 2, 40]),
       largest=st.booleans(), axis_last=st.booleans())
def test_multipass_with_small_chunks(gpu, monkeypatch, seed, n, k_frac, rows, dtype, levels, largest, axis_last):
    """The multi-pass path searched hard: chunks of 128 (MAX_M patched), so rows of a few
    hundred take 2-6 passes with every k up to 64."""
    from vkml.kernels import topk

    monkeypatch.setattr(topk, "MAX_M", 128)
    k = int(round(k_frac * 64))
    rng = np.random.default_rng(seed)
    shape, axis = ((rows, n), 1) if axis_last else ((n, rows), 0)
    check(gpu, values(rng, shape, dtype, levels), k, {"axis": axis, "largest": int(largest)}, 11, reference=False)


def test_more_rows_than_workgroups(gpu):
    """More rows than maxComputeWorkGroupCount[0] (65535): workgroups loop over rows."""
    rng = np.random.default_rng(9)
    check(gpu, values(rng, (70000, 3), np.float32, 2), 2, {"axis": 1}, 11, reference=False)


def test_sorted_zero_still_sorted(gpu):
    """sorted=0 leaves the order free; the kernel sorts anyway, as the CPU operator does."""
    rng = np.random.default_rng(5)
    check(gpu, values(rng, (3, 40), np.float32), 9, {"sorted": 0}, 11)


class _Device:
    features = frozenset({"storage_16bit", "int64", "storage_8bit"})
    max_storage_buffer_range = 1 << 30
    name = "small"

    def __init__(self, shared: int):
        self.limits = {"max_compute_shared_memory_size": shared, "max_compute_work_group_count": (65535,) * 3,
                       "max_compute_work_group_invocations": 256}


def test_refusals_name_the_reason(gpu):
    """k over half a chunk on rows longer than a chunk, unknown K, unsupported dtypes: each
    refused with its reason, and the node runs on the CPU."""
    k = get_kernel("TopK")
    f32 = np.dtype(np.float32)
    kspec = TensorSpec((1,), np.dtype(np.int64), np.array([3000]))
    reason = k.supports(_Device(32768), "TopK", {}, [TensorSpec((1, 10000), f32), kspec])
    assert reason and "k <= 2048" in reason, reason
    assert k.supports(_Device(32768), "TopK", {}, [TensorSpec((1, 4096), f32), kspec]) is None  # one chunk
    reason = k.supports(_Device(32768), "TopK", {}, [TensorSpec((1, 10), f32), TensorSpec((1,), np.dtype(np.int64))])
    assert reason and "run time" in reason, reason
    reason = k.supports(_Device(32768), "TopK", {}, [TensorSpec((1, 10), np.dtype(np.float64)), kspec])
    assert reason and "float64" in reason, reason

    x = np.arange(20, dtype=np.float64).reshape(2, 10)
    model = make_model("TopK", {"x": x, "k": np.array([3], np.int64)}, {}, 11, outputs=["v", "i"], consts=("k",))
    sess = vkml.InferenceSession(model, devices=[gpu])
    (row,) = sess.placement()
    assert row["device"] == "cpu" and "float64" in str(row), row
    want = vkml.InferenceSession(model, devices=["cpu"]).run(None, {"x": x})
    for g, w in zip(sess.run(None, {"x": x}), want):
        np.testing.assert_array_equal(g, w)


def test_bad_k_stays_on_the_cpu(gpu):
    """A k outside [0, n] is the CPU operator's error to report."""
    x = np.zeros((2, 5), np.float32)
    model = make_model("TopK", {"x": x, "k": np.array([6], np.int64)}, {}, 11, outputs=["v", "i"], consts=("k",))
    with pytest.raises(Exception, match="k=6"):
        vkml.InferenceSession(model, devices=[gpu]).run(None, {"x": x})
