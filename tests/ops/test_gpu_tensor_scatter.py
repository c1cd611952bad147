"""GPU TensorScatter (vkml/kernels/tensor_scatter.py, shaders/tensor_scatter.comp) against
vkml's CPU operator (vkml/ops/gather.py): hypothesis shapes (rank 2 to 5, any axis but 0,
negative ones too), linear and circular modes (circular with updates longer than the cache:
the last write wins, as NumPy's assignment), write_indices int64 / int32 / absent, dtypes
float32, float16, int64, int8 and bool (bits move: results are exact). Linear writes out of
range raise the CPU operator's error from the GPU run; known on the host they keep the node on
the CPU.
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
from _oracle import gpu_and_cpu, make_model  # noqa: E402

import vkml  # noqa: E402

HYP = settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", "10")) * 6, deadline=None,
               suppress_health_check=list(HealthCheck))
DTYPES = [np.float32, np.float16, np.int64, np.int8, np.bool_]


def values(rng, shape, dtype):
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if np.dtype(dtype).kind == "i":
        return rng.integers(-100, 100, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def run_both(gpu, feed, attrs, consts=()):
    model = make_model("TensorScatter", feed, attrs, 24, consts=consts)
    feed = {k: v for k, v in feed.items() if v is not None and k not in consts}
    (got,), (want,), sess = gpu_and_cpu(gpu, model, feed)
    (row,) = sess.placement()
    assert row["device"] == gpu and row.get("pipelines"), row  # it really ran on the GPU
    assert got.dtype == want.dtype and got.shape == want.shape
    return got, want


@HYP
@given(rank=st.integers(2, 5), mode=st.sampled_from(["linear", "circular"]), dtype=st.sampled_from(DTYPES),
       idx=st.sampled_from(["i64", "i32", None]), negative_axis=st.booleans(), seed=seeds, data=st.data())
def test_tensor_scatter(gpu, rank, mode, dtype, idx, negative_axis, seed, data):
    rng = np.random.default_rng(seed)
    shape = list(data.draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    a = data.draw(st.integers(1, rank - 1))
    shape[a] = data.draw(st.integers(1, 7))
    L = shape[a]
    seq = data.draw(st.integers(0, L if mode == "linear" else 2 * L + 1))
    ushape = list(shape)
    ushape[a] = seq
    cache, upd = values(rng, shape, dtype), values(rng, ushape, dtype)
    b = shape[0]
    if mode == "linear":
        start = rng.integers(0, L - seq + 1, b)
    else:
        start = rng.integers(-3 * L, 3 * L, b)
    feed = {"past_cache": cache, "update": upd,
            "write_indices": None if idx is None else start.astype(np.int64 if idx == "i64" else np.int32)}
    if idx is None and mode == "linear" and seq > L:
        return
    attrs = {"mode": mode, "axis": a - rank if negative_axis else a}
    got, want = run_both(gpu, feed, attrs)
    np.testing.assert_array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"))


def test_circular_wraps_and_last_write_wins(gpu):
    """An update three times longer than the cache: each position takes the last write."""
    cache = np.zeros((2, 3, 2), np.float32)
    upd = np.arange(2 * 8 * 2, dtype=np.float32).reshape(2, 8, 2)
    feed = {"past_cache": cache, "update": upd, "write_indices": np.array([1, -5], np.int64)}
    got, want = run_both(gpu, feed, {"mode": "circular", "axis": 1})
    np.testing.assert_array_equal(got, want)
    # batch 0: positions 1, 2, 0, 1, 2, 0, 1, 2 for s = 0..7: the last writes are s = 5 (pos 0), 6, 7
    np.testing.assert_array_equal(got[0, :, 0], upd[0, [5, 6, 7], 0])


@pytest.mark.parametrize("start", [[0, 3], [-1, 0], [2, 2**40], [-(2**63), 0]])
def test_linear_out_of_range_raises_as_on_the_cpu(gpu, start):
    """Linear writes past the cache, computed at run time: the GPU run raises the CPU
    operator's error, and the session goes on working."""
    cache = np.zeros((2, 1, 4, 3), np.float32)
    upd = np.ones((2, 1, 2, 3), np.float32)
    good = {"past_cache": cache, "update": upd, "write_indices": np.array([0, 2], np.int64)}
    model = make_model("TensorScatter", good, {}, 24)
    gpu_sess = vkml.InferenceSession(model, devices=[gpu])
    cpu_sess = vkml.InferenceSession(model, devices=["cpu"])
    bad = {**good, "write_indices": np.array(start, np.int64)}
    with pytest.raises(Exception) as want:
        cpu_sess.run(None, bad)
    with pytest.raises(Exception) as got:
        gpu_sess.run(None, bad)
    assert type(got.value) is type(want.value) and str(got.value) == str(want.value), (got.value, want.value)
    assert "max_sequence_length 4" in str(got.value)
    (row,) = gpu_sess.placement()
    assert row["device"] == gpu and row.get("pipelines"), row
    np.testing.assert_array_equal(gpu_sess.run(None, good)[0], cpu_sess.run(None, good)[0])


def test_host_known_bad_indices_stay_on_the_cpu(gpu):
    cache = np.zeros((2, 4, 3), np.float32)
    upd = np.ones((2, 2, 3), np.float32)
    feed = {"past_cache": cache, "update": upd, "write_indices": np.array([0, 3], np.int64)}
    model = make_model("TensorScatter", feed, {"axis": 1}, 24, consts=("write_indices",))
    sess = vkml.InferenceSession(model, devices=[gpu, "cpu"])
    (row,) = sess.placement()
    assert row["device"] == "cpu", row
    with pytest.raises(Exception, match="max_sequence_length 4"):
        sess.run(None, {"past_cache": cache, "update": upd})


def test_batch_axis_stays_on_the_cpu(gpu):
    cache = np.zeros((4, 3), np.float32)
    model = make_model("TensorScatter", {"past_cache": cache, "update": cache[:2]}, {"axis": 0}, 24)
    sess = vkml.InferenceSession(model, devices=[gpu, "cpu"])
    (row,) = sess.placement()
    assert row["device"] == "cpu" and "batch axis" in str(row), row
