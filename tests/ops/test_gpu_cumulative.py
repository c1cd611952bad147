"""GPU CumSum and CumProd (vkml/kernels/cumulative.py) against vkml's CPU operators over
hypothesis shapes, axes, dtypes (float32, float16, int32) and exclusive/reverse: bitwise,
since both scan in order with the same working precision."""
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


HYP = settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", "10")), deadline=None,
               suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("op", ["CumSum", "CumProd"])
@HYP
@given(shape=st.lists(st.integers(1, 6), min_size=1, max_size=4).map(tuple), data=st.data(),
       dtype=st.sampled_from([np.float32, np.float16, np.int32]), exclusive=st.booleans(),
       reverse=st.booleans(), seed=seeds)
def test_cumulative(gpu, op, shape, data, dtype, exclusive, reverse, seed):
    rng = np.random.default_rng(seed)
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    if dtype == np.int32:
        x = rng.integers(-1000, 1000, shape).astype(dtype)  # (CumProd wraps on both sides alike)
    else:
        x = rng.uniform(0.5, 1.5, shape).astype(dtype) * rng.choice([-1, 1], shape).astype(dtype)
    model = make_model(op, {"x": x, "axis": np.array(axis, np.int64)},
                       {"exclusive": int(exclusive), "reverse": int(reverse)}, 26 if op == "CumProd" else 14,
                       consts=("axis",))
    (got,), (want,), sess = gpu_and_cpu(gpu, model, {"x": x})
    (row,) = sess.placement()
    assert row["device"] == gpu and row.get("pipelines"), row
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
