"""GPU ReverseSequence (vkml/kernels/reverse_sequence.py, shaders/reverse_sequence.comp) against
vkml's CPU operator (a session on the "cpu" device) over hypothesis nodes: inputs of rank 2-4
(empty dims too), batch_axis/time_axis 0/1 and 1/0 (and the defaults), sequence_lens in
[0, time_len] fed or initializers, elements of every size (bool, int8, uint8, float16, bfloat16,
int32, float32, int64, float64). Results compared bit for bit; the GPU session must have run the
node. A length out of range raises the CPU operator's error through the fault word.
"""
from __future__ import annotations

import os
import sys

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
from _gen import seeds  # noqa: E402
from _oracle import gpu_and_cpu, make_model, outcome  # noqa: E402

import vkml  # noqa: E402
from vkml.kernels import get_kernel  # noqa: E402
from vkml.kernels.registry import TensorSpec  # noqa: E402

HYP = settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", "60")), deadline=None,
               suppress_health_check=list(HealthCheck))
DTYPES = [np.dtype(t) for t in (np.bool_, np.int8, np.uint8, np.float16, np.int32, np.float32, np.int64,
                                np.float64)] + [np.dtype(ml_dtypes.bfloat16)]


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.dtype(f"u{a.dtype.itemsize}"))


def values(rng, shape, dtype: np.dtype) -> np.ndarray:
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    return rng.standard_normal(shape).astype(np.float32).astype(dtype)


def run_reverse(gpu, x, lens, attrs=None, consts=()):
    inputs = {"input": x, "sequence_lens": lens}
    model = make_model("ReverseSequence", inputs, attrs or {}, 10, consts=consts)
    feed = {k: v for k, v in inputs.items() if k not in consts}
    (got,), (want,), sess = gpu_and_cpu(gpu, model, feed, quiet=True)
    (row,) = sess.placement()
    assert row["device"] == gpu and (row.get("pipelines") or got.size == lens.size == 0), row
    assert got.dtype == want.dtype and got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_array_equal(bits(got), bits(want))
    return got


@st.composite
def reverse_case(draw):
    rng = np.random.default_rng(draw(seeds))
    shape = tuple(draw(st.integers(0, 5)) for _ in range(draw(st.integers(2, 4))))
    axes = draw(st.sampled_from([None, (1, 0), (0, 1)]))
    batch_axis, time_axis = axes or (1, 0)
    b, t = shape[batch_axis], shape[time_axis]
    lens = rng.integers(0, t, b, endpoint=True).astype(np.int64)
    dtype = draw(st.sampled_from(DTYPES))
    attrs = {} if axes is None else {"batch_axis": batch_axis, "time_axis": time_axis}
    consts = ("sequence_lens",) if draw(st.booleans()) else ()
    return values(rng, shape, dtype), lens, attrs, consts


@HYP
@given(case=reverse_case())
def test_reverse_sequence(gpu, case):
    x, lens, attrs, consts = case
    run_reverse(gpu, x, lens, attrs, consts)


def test_node_suite_examples(gpu):
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    run_reverse(gpu, x, np.array([4, 3, 2, 1], np.int64), {"time_axis": 0, "batch_axis": 1})
    run_reverse(gpu, x, np.array([1, 2, 3, 4], np.int64), {"time_axis": 1, "batch_axis": 0})
    run_reverse(gpu, np.arange(8, dtype=np.int64).reshape(2, 4), np.array([3, 0], np.int64),
                {"time_axis": 1, "batch_axis": 0})


@pytest.mark.parametrize("bad", [5, -1, 2**40])
def test_length_out_of_range_raises_as_cpu(gpu, bad):
    """A fed length outside [0, time_len]: the run raises the CPU operator's error (its type and
    message up to the list of lengths), then the session runs good lengths again."""
    x = np.arange(24, dtype=np.float32).reshape(4, 3, 2)
    model = make_model("ReverseSequence", {"input": x, "sequence_lens": np.zeros(3, np.int64)}, {}, 10)
    cpu = vkml.InferenceSession(model, devices=["cpu"])
    sess = vkml.InferenceSession(model, devices=[gpu])
    feed = {"input": x, "sequence_lens": np.array([1, bad, 2], np.int64)}
    _, want = outcome(cpu, feed)
    _, got = outcome(sess, feed)
    assert want is not None and got is not None, (want, got)
    assert type(got) is type(want)
    assert str(got).split(", got")[0] == str(want).split(", got")[0], (got, want)
    assert str(bad) in str(got)
    (row,) = sess.placement()
    assert row["device"] == gpu and row.get("pipelines"), row
    good = {"input": x, "sequence_lens": np.array([4, 0, 2], np.int64)}
    np.testing.assert_array_equal(sess.run(None, good)[0], cpu.run(None, good)[0])


def test_empty_time_axis_still_checks_lengths(gpu):
    x = np.zeros((0, 3), np.float32)
    model = make_model("ReverseSequence", {"input": x, "sequence_lens": np.zeros(3, np.int64)}, {}, 10)
    sess = vkml.InferenceSession(model, devices=[gpu])
    cpu = vkml.InferenceSession(model, devices=["cpu"])
    ok = {"input": x, "sequence_lens": np.zeros(3, np.int64)}
    assert sess.run(None, ok)[0].shape == (0, 3)
    _, want = outcome(cpu, {"input": x, "sequence_lens": np.array([0, 1, 0], np.int64)})
    _, got = outcome(sess, {"input": x, "sequence_lens": np.array([0, 1, 0], np.int64)})
    assert want is not None and type(got) is type(want), (got, want)


def test_refused_with_reasons():
    from types import SimpleNamespace

    dev = SimpleNamespace(features=frozenset({"storage_8bit", "storage_16bit"}), max_storage_buffer_range=1 << 31,
                          name="fake")
    k = get_kernel("ReverseSequence")
    f32, i64 = np.dtype(np.float32), np.dtype(np.int64)
    x = TensorSpec((4, 3), f32)
    assert k.supports(dev, "ReverseSequence", {}, [x, TensorSpec((3,), i64)]) is None
    assert "batch_axis" in k.supports(dev, "ReverseSequence", {"batch_axis": 2, "time_axis": 0},
                                      [TensorSpec((4, 3, 2), f32), TensorSpec((3,), i64)])
    assert "rank 1" in k.supports(dev, "ReverseSequence", {}, [TensorSpec((4,), f32), TensorSpec((3,), i64)])
    assert "int32" in k.supports(dev, "ReverseSequence", {}, [x, TensorSpec((3,), np.dtype(np.int32))])
    assert "batch of 3" in k.supports(dev, "ReverseSequence", {}, [x, TensorSpec((4,), i64)])
    assert "outside" in k.supports(dev, "ReverseSequence", {}, [x, TensorSpec((3,), i64, np.array([1, 5, 0]))])
