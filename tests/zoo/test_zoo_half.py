"""precision="fp16" (vkml/compile/half.py) on every zoo model: each model's convolutions and
GEMMs compute in float16 on the GPU, no node leaves the GPU that the float32 plan kept there,
the outputs keep their types, and they stay within 5e-3 of the largest output value of
onnxruntime's float32 results (measured on lavapipe: 1.6e-4 to 1.9e-3; the table in
tests/zoo/README.md)."""
import numpy as np
import onnxruntime as ort
import pytest

import vkml
from _zoo import ZOO, plan_signature
from vkml.compile import pipeline
from vkml.ops.bind import load_model
from vkml.runtime.devices import gpu_facts

HEAVY = ("Conv", "ConvTranspose", "MatMul", "Gemm")
BOUND = 5e-3


def half_error(blob: bytes, feeds: dict, gpu: str) -> tuple[float, list, list]:
    """(largest |fp16 - onnxruntime| over the largest |onnxruntime| of each output, the fp16
    session's placement, the float32 session's)."""
    want = ort.InferenceSession(blob, providers=["CPUExecutionProvider"]).run(None, feeds)
    full = vkml.InferenceSession(blob, devices=[gpu, "cpu"])
    half = vkml.InferenceSession(blob, devices=[gpu, "cpu"], precision="fp16")
    full.run(None, feeds)
    got = half.run(None, feeds)
    err = 0.0
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        if w.dtype.kind == "f":
            err = max(err, float(np.abs(g.astype(np.float64) - w).max(initial=0.0)) / max(1e-6, float(np.abs(w).max(initial=0.0))))
        else:
            np.testing.assert_array_equal(g, w)
    return err, half.placement(), full.placement()


@pytest.mark.parametrize("name", list(ZOO))
def test_zoo_model_in_float16(gpu, name):
    blob, feeds, _ = ZOO[name].build()
    err, half, full = half_error(blob, feeds, gpu)
    assert err <= BOUND, (name, err)
    on_cpu = lambda rows: {r["node"] for r in rows if r["device"] == "cpu"}  # noqa: E731
    assert on_cpu(half) == on_cpu(full)
    # the heavy ops of the plan compute in float16
    model = load_model(blob)
    descs, known = plan_signature(model, feeds)
    c = pipeline.compile_signature(model.graph, model.weights, descs, known=known, devices=(gpu, "cpu"),
                                   gpus={gpu: gpu_facts(gpu)}, precision="fp16", fuse=False)
    heavy = [n for n in c.concrete.live if n.op_type in HEAVY]
    assert heavy and all(c.concrete.values[n.outputs[0]].dtype == np.float16 for n in heavy), name
