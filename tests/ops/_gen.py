"""Hypothesis strategies shared by the elementwise/logic/cast/reduce/softmax op tests."""
from __future__ import annotations

import ml_dtypes
import numpy as np
from hypothesis import strategies as st

BF16 = np.dtype(ml_dtypes.bfloat16)
FLOATS = [np.dtype(t) for t in (np.float32, np.float64, np.float16)] + [BF16]
SIGNED = [np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64)]
UNSIGNED = [np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64)]
INTS = SIGNED + UNSIGNED


def tol(dtype: np.dtype) -> dict[str, float]:
    """Comparison tolerances for a result dtype."""
    dtype = np.dtype(dtype)
    if dtype == BF16:
        return {"rtol": 2e-2, "atol": 2e-2}
    if dtype == np.float16:
        return {"rtol": 4e-3, "atol": 4e-3}
    if dtype == np.float32:
        return {"rtol": 1e-5, "atol": 1e-6}
    return {"rtol": 1e-7, "atol": 1e-12}


shapes = st.lists(st.integers(0, 4), min_size=0, max_size=4).map(tuple)
nonempty_shapes = st.lists(st.integers(1, 4), min_size=0, max_size=4).map(tuple)


@st.composite
def broadcast_pair(draw, base=nonempty_shapes):
    """Two shapes that broadcast together: b drops leading dims of a and sets some to 1."""
    a = draw(base)
    drop = draw(st.integers(0, len(a)))
    b = tuple(1 if draw(st.booleans()) else d for d in a[drop:])
    return (a, b) if draw(st.booleans()) else (b, a)


@st.composite
def window_geometry(draw, max_kernel: int = 5, max_stride: int = 3, max_dilation: int = 3, max_size: int = 12,
                    max_pad: int = 4, ceil: bool = True):
    """A 1-D or 2-D sliding window (vkml.ops._window.Window) with at least one output:
    (spatial sizes, window)."""
    from hypothesis import assume

    from vkml.ops._window import resolve

    nd = draw(st.sampled_from([1, 2]))
    kernel = [draw(st.integers(1, max_kernel)) for _ in range(nd)]
    strides = [draw(st.integers(1, max_stride)) for _ in range(nd)]
    dil = [draw(st.integers(1, max_dilation)) for _ in range(nd)]
    spatial = [draw(st.integers(1, max_size)) for _ in range(nd)]
    pads = [draw(st.integers(0, max_pad)) for _ in range(2 * nd)]
    try:
        w = resolve(spatial, kernel, strides, dil, pads, "NOTSET", draw(st.booleans()) if ceil else False)
    except ValueError:
        assume(False)
    assume(all(o > 0 for o in w.out))
    return spatial, w


def values(rng: np.random.Generator, shape: tuple, dtype: np.dtype, lo: float = -4, hi: float = 4) -> np.ndarray:
    """Random values of dtype in [lo, hi] (clipped to the dtype's range for integers)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(max(int(lo), info.min), min(int(hi), info.max), shape, dtype=dtype,
                            endpoint=True)
    return rng.uniform(lo, hi, shape).astype(dtype)


seeds = st.integers(0, 2**32 - 1)


def run_node(op_type: str, inputs: dict, attrs: dict, opset: int) -> list[np.ndarray]:
    """vkml's outputs for a single node, for cases where onnx.reference can't be the oracle."""
    import vkml
    from _oracle import make_model

    model = make_model(op_type, inputs, attrs, opset)
    feed = {k: v for k, v in inputs.items() if v is not None}
    return vkml.InferenceSession(model.SerializeToString(), devices=["cpu"]).run(None, feed)


def check_with_ort(op_type: str, inputs: dict, attrs: dict, opset: int, rtol: float, atol: float) -> None:
    """vkml against onnxruntime, for semantics onnx.reference lacks (e.g. pre-13 Softmax)."""
    import onnxruntime as ort
    from _oracle import make_model

    model = make_model(op_type, inputs, attrs, opset).SerializeToString()
    feed = {k: v for k, v in inputs.items() if v is not None}
    want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feed)
    got = run_node(op_type, inputs, attrs, opset)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, f"{g.dtype}{g.shape} != {w.dtype}{w.shape}"
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
