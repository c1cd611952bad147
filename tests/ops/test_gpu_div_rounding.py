"""Float division on the GPU is correctly rounded, bit for bit what NumPy gives (Vulkan allows
2.5 ulp and NVIDIA divides by multiplying with a reciprocal; one ulp off changes what Round or a
Cast to an integer makes of a quotient, as in DynamicQuantizeLinear's x / scale, which failed the
ONNX node suite on the H100). Promised where |a / b| and |b| lie in [2^-40, 2^40]."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto as T
from onnx import helper as h

import vkml


def _model(nodes, inputs, outputs) -> bytes:
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info(n, T.FLOAT, s) for n, s in inputs],
                     [h.make_tensor_value_info(n, T.FLOAT, None) for n in outputs])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8).SerializeToString()


def _both(model: bytes, feed: dict, gpu: str) -> tuple[list, list, list]:
    cpu = vkml.InferenceSession(model, devices=["cpu"]).run(None, feed)
    s = vkml.InferenceSession(model, devices=[gpu])
    got = s.run(None, feed)
    return cpu, got, s.placement()


# magnitudes in [1e-6, 1e6]: quotients within [2^-40, 2^40], where vkml_div promises the
# rounded quotient (shaders/include/vkml_math.glsl; outside it, the driver's division)
_floats = st.floats(9.999999974752427e-07, 1e6, width=32).flatmap(lambda v: st.sampled_from([v, -v]))


@settings(max_examples=25, deadline=None)
@given(a=st.lists(_floats, min_size=1, max_size=64), b=st.lists(_floats, min_size=1, max_size=64))
def test_div_and_reciprocal_bit_exact(gpu, a, b):
    n = min(len(a), len(b))
    x, y = np.array(a[:n], np.float32), np.array(b[:n], np.float32)
    m = _model([h.make_node("Div", ["x", "y"], ["q"]), h.make_node("Reciprocal", ["y"], ["r"]),
                h.make_node("Div", ["x", "c"], ["qc"]), h.make_node("Round", ["qc"], ["rq"])],
               [("x", [n]), ("y", [n]), ("c", [1])], ["q", "r", "rq"])
    c = np.array([np.float32(y[0])], np.float32)
    cpu, got, placement = _both(m, {"x": x, "y": y, "c": c}, gpu)
    assert all(r["device"] != "cpu" for r in placement), placement
    for want, g in zip(cpu, got):
        np.testing.assert_array_equal(g.view(np.uint32), want.view(np.uint32))


def test_quantization_style_division(gpu):
    """x / scale rounded, over a range where the quotients sit near .5 boundaries."""
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(1 << 16) * 3).astype(np.float32)
    scale = np.float32((x.max() - x.min()) / 255)
    xs = np.concatenate([x, (np.arange(-300, 300, dtype=np.float32) + 0.5) * scale])
    m = _model([h.make_node("Div", ["x", "s"], ["q"]), h.make_node("Round", ["q"], ["y"])],
               [("x", [xs.size]), ("s", [])], ["y"])
    cpu, got, _ = _both(m, {"x": xs, "s": np.array(scale, np.float32)}, gpu)
    np.testing.assert_array_equal(got[0], cpu[0])


def test_fused_chain_divides_correctly_rounded(gpu):
    """A chain with a division by a constant is fused into one dispatch, of the variant that
    rounds divisions correctly; a chain without one keeps the plain variant."""
    from onnx import numpy_helper as nh

    rng = np.random.default_rng(1)
    x = (rng.standard_normal(1 << 14) * 100).astype(np.float32)
    scale = np.float32(0.0123)
    nodes = [h.make_node("Div", ["x", "s"], ["a"]), h.make_node("Add", ["a", "z"], ["b"]),
             h.make_node("Reciprocal", ["b"], ["r"]), h.make_node("Mul", ["x", "s"], ["m"]),
             h.make_node("Add", ["m", "z"], ["y"])]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [x.size])],
                     [h.make_tensor_value_info(n, T.FLOAT, None) for n in ("b", "r", "y")],
                     [nh.from_array(np.array(scale), "s"), nh.from_array(np.array(np.float32(0.25)), "z")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8).SerializeToString()
    cpu, got, placement = _both(m, {"x": x}, gpu)
    for want, g_ in zip(cpu, got):
        np.testing.assert_array_equal(g_.view(np.uint32), want.view(np.uint32))
    s = vkml.InferenceSession(m, devices=[gpu])
    s.run(None, {"x": x})
    names = {p["shader"] for p in s.pipelines()}
    assert "fused_div_f32" in names and "fused_f32" in names, names
