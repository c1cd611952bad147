"""onnxruntime as the oracle, for ops whose onnx.reference kernels are known to be wrong
(1-D pooling pads, grouped ConvTranspose, old BatchNormalization versions, ...)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import onnxruntime as ort

import vkml
from _oracle import make_model

_BF16 = np.dtype(ml_dtypes.bfloat16)


def vs_ort(op, ins, attrs, opset, rtol=1e-5, atol=1e-6, outputs=1, consts=()):
    """vkml on the inputs as given against onnxruntime on float32 copies of the float inputs.

    Checks values (exactly for non-float outputs), dtypes, shapes and vkml's inferred shapes.
    """
    if rtol or atol:  # the oracle computes in float32
        rtol, atol = max(rtol, 1e-5), max(atol, 1e-6)
    feed = {k: v for k, v in ins.items() if v is not None}
    f32 = {k: v.astype(np.float32) if v.dtype.kind == "f" or v.dtype == _BF16 else v for k, v in feed.items()}
    m32 = make_model(op, {k: f32.get(k) for k in ins}, attrs, opset, outputs, consts=consts).SerializeToString()
    want = ort.InferenceSession(m32, providers=["CPUExecutionProvider"]).run(
        None, {k: v for k, v in f32.items() if k not in consts})
    sess = vkml.InferenceSession(make_model(op, ins, attrs, opset, outputs, consts=consts).SerializeToString(),
                                 devices=["cpu"])
    got = sess.run(None, {k: v for k, v in feed.items() if k not in consts})
    first = next(iter(feed.values()))
    for g, w, arg in zip(got, want, sess.get_outputs()):
        assert g.shape == w.shape, (g.shape, w.shape)
        if w.dtype == np.float32:
            assert g.dtype == first.dtype, (g.dtype, first.dtype)
            big = np.finfo(np.float32).max  # float64 padding extremes narrow to ±inf otherwise
            np.testing.assert_allclose(np.clip(g.astype(np.float64), -big, big).astype(np.float32), w,
                                       rtol=rtol, atol=atol)
        else:
            assert g.dtype == w.dtype
            np.testing.assert_array_equal(g, w)
        assert arg.shape is None or all(not isinstance(d, int) or d == n for d, n in zip(arg.shape, g.shape))
    return got
