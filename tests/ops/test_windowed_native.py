"""The native window loops (vkml.ops._windowed) against the NumPy tap loops they replace, on
random geometries: virtual padding, ceil-mode overhang, dilations, strides, 1-D and 2-D."""
import os
import sys

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
from _gen import seeds  # noqa: E402

from vkml.ops import conv, pool  # noqa: E402
from vkml.ops._window import resolve  # noqa: E402

pytestmark = pytest.mark.skipif(pool._windowed is None, reason="native extension not built")


@st.composite
def geometry(draw):
    nd = draw(st.sampled_from([1, 2]))
    kernel = [draw(st.integers(1, 5)) for _ in range(nd)]
    strides = [draw(st.integers(1, 3)) for _ in range(nd)]
    dil = [draw(st.integers(1, 3)) for _ in range(nd)]
    spatial = [draw(st.integers(1, 12)) for _ in range(nd)]
    pads = [draw(st.integers(0, 4)) for _ in range(2 * nd)]
    ceil = draw(st.booleans())
    try:
        w = resolve(spatial, kernel, strides, dil, pads, "NOTSET", ceil)
    except ValueError:
        assume(False)
    assume(all(o > 0 for o in w.out))
    return nd, spatial, w


def _both(fn):
    native = fn()
    with pytest.MonkeyPatch.context() as m:
        m.setattr(pool, "_windowed", None)
        m.setattr(conv, "_windowed", None)
        numpy_path = fn()
    return native, numpy_path


@settings(deadline=None, max_examples=60)
@given(g=geometry(), seed=seeds, dtype=st.sampled_from([np.float32, np.float64, np.int8, np.uint8]))
def test_max(g, seed, dtype):
    nd, spatial, w = g
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal([2, 3] + spatial) * 50).astype(dtype)
    op = object.__new__(pool.MaxPool10)
    op.kernel_shape, op.strides, op.dilations, op.auto_pad, op.ceil_mode = list(w.kernel), list(w.strides), \
        list(w.dilations), "NOTSET", 0
    op.pads, op.n_outputs, op.outputs_used, op.node_name = list(w.pad_begin) + list(w.explicit_end), 1, [True], "t"
    a, b = _both(lambda: op.run(x)[0])
    np.testing.assert_array_equal(a, b)


@settings(deadline=None, max_examples=60)
@given(g=geometry(), seed=seeds, dtype=st.sampled_from([np.float32, np.float64]), include=st.booleans())
def test_average(g, seed, dtype, include):
    nd, spatial, w = g
    x = np.random.default_rng(seed).standard_normal([2, 3] + spatial).astype(dtype)
    op = object.__new__(pool.AveragePool19)
    op.kernel_shape, op.strides, op.dilations, op.auto_pad = list(w.kernel), list(w.strides), list(w.dilations), \
        "NOTSET"
    op.pads, op.ceil_mode, op.count_include_pad = list(w.pad_begin) + list(w.explicit_end), 0, int(include)
    op.n_outputs, op.outputs_used, op.node_name = 1, [True], "t"
    a, b = _both(lambda: op.run(x)[0])
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@settings(deadline=None, max_examples=60)
@given(g=geometry(), seed=seeds, dtype=st.sampled_from([np.float32, np.float64]), mult=st.integers(1, 2),
       bias=st.booleans())
def test_depthwise(g, seed, dtype, mult, bias):
    nd, spatial, w = g
    rng = np.random.default_rng(seed)
    c = 3
    x = rng.standard_normal([2, c] + spatial).astype(dtype)
    wt = rng.standard_normal([c * mult, 1] + list(w.kernel)).astype(dtype)
    b = rng.standard_normal(c * mult).astype(dtype) if bias else None
    a, r = _both(lambda: conv.conv_core(x, wt, c, w, np.dtype(dtype), b))
    np.testing.assert_allclose(a, r, rtol=1e-5, atol=1e-5)
