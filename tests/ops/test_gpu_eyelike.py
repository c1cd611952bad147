"""GPU EyeLike (vkml/kernels/onehot.py EyeLikeKernel, shaders/eyelike.comp) against vkml's CPU
operator (a session on the "cpu" device): shapes with rows < cols, rows > cols, empty ones; k
inside, on the edges of and beyond the matrix, negative; the output dtype from the attribute
(every element size: bool, int8, uint16, float16, bfloat16, float32, int32, int64, float64) or
the input's. Bit for bit (one is the bits of np.float32(1) cast to the dtype); the GPU session
must have run the node (the input's values are never read: only its shape).
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
from _oracle import gpu_and_cpu, make_model  # noqa: E402

from vkml.ir import dtypes  # noqa: E402
from vkml.kernels import get_kernel  # noqa: E402
from vkml.kernels.registry import TensorSpec  # noqa: E402

HYP = settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", "40")), deadline=None,
               suppress_health_check=list(HealthCheck))
DTYPES = [np.dtype(t) for t in (np.bool_, np.int8, np.uint16, np.float16, np.float32, np.int32, np.int64,
                                np.float64)] + [np.dtype(ml_dtypes.bfloat16)]


def run_eyelike(gpu, x, dtype=None, k=None, opset=22):
    attrs = {}
    if dtype is not None:
        attrs["dtype"] = dtypes.onnx_type(dtype)
    if k is not None:
        attrs["k"] = k
    model = make_model("EyeLike", {"x": x}, attrs, opset)
    (got,), (want,), sess = gpu_and_cpu(gpu, model, {"x": x})
    (row,) = sess.placement()
    assert row["device"] == gpu and (row.get("pipelines") or got.size == 0), row
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"))
    return got


@HYP
@given(rows=st.integers(0, 9), cols=st.integers(0, 9), k=st.one_of(st.none(), st.integers(-12, 12)),
       xtype=st.sampled_from([np.float32, np.int32, np.float16]), dtype=st.one_of(st.none(), st.sampled_from(DTYPES)),
       opset=st.sampled_from([9, 22]))
def test_eyelike(gpu, rows, cols, k, xtype, dtype, opset):
    x = np.zeros((rows, cols), xtype)
    run_eyelike(gpu, x, dtype, k, opset)


def test_node_suite_examples(gpu):
    got = run_eyelike(gpu, np.zeros((4, 4), np.int32))
    np.testing.assert_array_equal(got, np.eye(4, dtype=np.int32))
    run_eyelike(gpu, np.zeros((3, 4), np.int32), np.dtype(np.float64))
    got = run_eyelike(gpu, np.zeros((4, 5), np.int32), np.dtype(np.float32), 1)
    np.testing.assert_array_equal(got, np.eye(4, 5, 1, dtype=np.float32))


@pytest.mark.parametrize("k", [2**31 + 5, -(2**40)])
def test_k_beyond_int32(gpu, k):
    """k beyond every column (or row): all zeros, as on the CPU."""
    got = run_eyelike(gpu, np.zeros((3, 3), np.float32), None, k)
    assert not got.any()


def test_refused_rank():
    from types import SimpleNamespace

    dev = SimpleNamespace(features=frozenset(), max_storage_buffer_range=1 << 31, name="fake")
    k = get_kernel("EyeLike")
    assert "rank 3" in k.supports(dev, "EyeLike", {}, [TensorSpec((2, 2, 2), np.dtype(np.float32))])
    assert k.supports(dev, "EyeLike", {}, [TensorSpec((2, 2), np.dtype(np.float32))]) is None
