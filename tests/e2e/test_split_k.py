"""Split K through a whole session: convolutions and GEMMs with few output tiles and a long K
split it over workgroups (partials in a buffer of the slot's command buffer) and
shaders/splitk_reduce.comp sums them with the bias and the fused epilogue. Repeated runs and
runs from several threads (slots on several lanes) give the CPU's answer, and the same input
gives the same bits every time."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import vkml
from vkml.kernels import conv as kc
from vkml.kernels import gemm
from vkml.kernels import matmul as km

from _threads import hammer


def _model() -> bytes:
    """x (1, 128, 7, 7) -> Conv 3x3 (+ bias) -> Relu -> Conv 3x3 + x -> Relu -> Flatten ->
    Gemm (6272 -> 512): K = 1152 for the convolutions and 6272 for the Gemm, few output tiles
    each and too large for the direct routes, so the convolutions split K (the Gemm's one row
    takes shaders/gemv.comp, which spreads K over its own invocations)."""
    rng = np.random.default_rng(3)
    w = lambda name, *s: nh.from_array((rng.standard_normal(s) / np.sqrt(np.prod(s[1:]))).astype(np.float32), name)
    inits = [w("w1", 128, 128, 3, 3), w("b1", 128), w("w2", 128, 128, 3, 3), w("wf", 6272, 512), w("bf", 512)]
    nodes = [h.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1] * 4),
             h.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             h.make_node("Conv", ["r1", "w2"], ["c2"], name="conv2", pads=[1] * 4),
             h.make_node("Add", ["c2", "x"], ["s"], name="residual"),
             h.make_node("Relu", ["s"], ["r2"], name="relu2"),
             h.make_node("Flatten", ["r2"], ["f"], name="flatten"),
             h.make_node("Gemm", ["f", "wf", "bf"], ["y"], name="fc")]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, 128, 7, 7])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()


def test_the_model_splits_k(gpu):
    import vkml.vulkan as vk

    dev = vk.device(int(gpu.split(":")[1]))
    geo = kc.geometry("Conv", {"pads": [1] * 4}, (1, 128, 7, 7), (128, 128, 3, 3))
    assert kc._route(geo) == "gemm"
    t = kc._conv_tiling(dev, geo)
    assert gemm.split_k(t.blocks(geo.mg, 49, 1), 1152, t.bk, 4, 1 << 30)[0] > 1
    assert not km.is_small(km.gemm_problem({}, (1, 6272), (6272, 512), (512,))[0])
    t = km.choose_tiling(dev, 1, 512, 1, 6272)
    assert gemm.split_k(t.blocks(1, 512, 1), 6272, t.bk, 4, 1 << 30)[0] > 1


def test_repeated_and_threaded_runs_match_the_cpu(gpu):
    model = _model()
    sess = vkml.InferenceSession(model, devices=[gpu])
    ref = vkml.InferenceSession(model, devices=["cpu"])
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((1, 128, 7, 7)).astype(np.float32) for _ in range(4)]
    cases = [(x, ref.run(None, {"x": x})[0]) for x in xs]
    first = [sess.run(None, {"x": x})[0] for x in xs]
    for (x, want), got in zip(cases, first):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    for _ in range(3):  # the tickets came back to zero: same bits again
        for x, got in zip(xs, first):
            np.testing.assert_array_equal(sess.run(None, {"x": x})[0].view(np.uint32), got.view(np.uint32))
    assert not hammer(sess, cases, threads=4, runs=6)
    rows = sess.placement()
    fused = [r for r in rows if r["node"] in ("relu1", "residual", "relu2")]
    assert all("fused into" in r["reason"] for r in fused), fused
    shaders = {r["node"]: [p["shader"] for p in r.get("pipelines", [])] for r in rows}
    assert shaders["conv1"] == shaders["conv2"] == ["conv_f32", "splitk_reduce_f32"], shaders
    assert shaders["fc"] == ["gemv_f32"], shaders  # one row: shaders/gemv.comp spreads K itself
