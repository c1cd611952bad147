"""The native window loops (vkml.ops._windowed) against the NumPy tap loops they replace, on
random geometries: virtual padding, ceil-mode overhang, dilations, strides, 1-D and 2-D."""
import os
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
from _gen import seeds, window_geometry  # noqa: E402

from vkml.ops import conv, pool  # noqa: E402

pytestmark = pytest.mark.skipif(pool._windowed is None, reason="native extension not built")


@st.composite
def geometry(draw):
    spatial, w = draw(window_geometry())
    return len(spatial), spatial, w


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


@settings(deadline=None, max_examples=80)
@given(g=geometry(), seed=seeds, dtype=st.sampled_from([np.float32, np.float64]), rows=st.tuples(
    st.floats(0, 1), st.floats(0, 1)))
def test_columns(g, seed, dtype, rows):
    """The native im2col (virtual padding, a range of output rows) against the strided copy of
    the padded input it replaces: the same values, bit for bit."""
    from vkml.ops._window import as_planes, pad_spatial, tap_view

    nd, spatial, w = g
    x = np.random.default_rng(seed).standard_normal([2, 3] + spatial).astype(dtype)
    ref = np.empty((2, 3) + w.kernel + w.out, dtype)
    np.copyto(ref, tap_view(pad_spatial(x, w, 0), w, 2))
    planes, (oh, ow), (kh, kw, sh, sw, dh, dw, pt, pl) = as_planes(x, w)
    ref = ref.reshape(6 * kh * kw, oh, ow)
    r0, r1 = sorted(int(f * oh) for f in rows)
    cols = np.full((6 * kh * kw, (r1 - r0) * ow), np.nan, dtype)
    conv._windowed.columns(planes, cols, kh, kw, oh, ow, sh, sw, dh, dw, pt, pl, r0, r1)
    np.testing.assert_array_equal(cols, ref[:, r0:r1].reshape(cols.shape))
    full = conv._columns(x, w, np.dtype(dtype))
    np.testing.assert_array_equal(full, ref.reshape(full.shape))


def test_columns_checks_its_arguments():
    planes = np.zeros((2, 5, 5), np.float32)
    with pytest.raises(ValueError, match="cols must be"):
        conv._windowed.columns(planes, np.zeros((18, 24), np.float32), 3, 3, 5, 5, 1, 1, 1, 1, 1, 1)
    with pytest.raises(ValueError, match="output rows"):
        conv._windowed.columns(planes, np.zeros((18, 25), np.float32), 3, 3, 5, 5, 1, 1, 1, 1, 1, 1, 2, 6)


@settings(deadline=None, max_examples=40)
@given(g=geometry(), seed=seeds, group=st.sampled_from([1, 2]), bias=st.booleans())
def test_conv_on_native_columns(g, seed, group, bias):
    """conv_core on the native column matrix equals the NumPy im2col path bit for bit (one GEMM
    on the same matrix)."""
    nd, spatial, w = g
    rng = np.random.default_rng(seed)
    x = rng.standard_normal([2, 4] + spatial).astype(np.float32)
    wt = rng.standard_normal([6, 4 // group] + list(w.kernel)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32) if bias else None
    a, r = _both(lambda: conv.conv_core(x, wt, group, w, np.dtype(np.float32), b))
    np.testing.assert_array_equal(a, r)
