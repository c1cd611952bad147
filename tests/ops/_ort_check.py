"""onnxruntime as a second oracle for the shape/gather/resize tests, where onnx.reference is known
to be wrong or missing (negative pads, Slice clamping, unsorted Unique...)."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

import vkml
from _oracle import make_model


class OrtCannot(Exception):
    """onnxruntime has no kernel for this type/op combination: the case says nothing."""


def run_ort(model, feed: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    try:
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception as e:  # NOT_IMPLEMENTED for a type: nothing to compare with
        if "NOT_IMPLEMENTED" in str(e) or "Could not find an implementation" in str(e):
            raise OrtCannot(str(e)) from e
        raise
    return sess.run(None, dict(feed))


def check_ort(op_type: str, inputs: Mapping[str, np.ndarray | None], attrs: Mapping[str, Any] | None = None,
              opset: int = 21, outputs: int | Sequence[str] = 1, consts: Sequence[str] = (),
              rtol: float = 1e-5, atol: float = 1e-6, domain: str = "") -> list[np.ndarray] | None:
    """vkml vs onnxruntime on one node; None when onnxruntime cannot run it."""
    model = make_model(op_type, inputs, attrs or {}, opset, outputs, domain, consts)
    feed = {k: np.asarray(v) for k, v in inputs.items() if v is not None and k not in consts}
    try:
        want = run_ort(model, feed)
    except OrtCannot:
        return None
    got = vkml.InferenceSession(model, devices=["cpu"]).run(None, feed)
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype, f"output {k}: dtype {g.dtype} != onnxruntime {w.dtype}"
        assert g.shape == w.shape, f"output {k}: shape {g.shape} != onnxruntime {w.shape}"
        if w.dtype.kind in "fc":
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(g, w)
    return got
