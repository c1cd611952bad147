"""Small whole models for the end-to-end tests, built with onnx.helper, and their oracle."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

OPSET = 17


def _model(nodes, inputs, outputs, inits, name="m") -> bytes:
    g = h.make_graph(nodes, name, inputs, outputs, [nh.from_array(v, k) for k, v in inits.items()])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", OPSET)], ir_version=8)
    onnx.checker.check_model(m)
    return m.SerializeToString()


def _w(rng, *shape, scale=None):
    scale = scale if scale is not None else 1.0 / np.sqrt(shape[0] if len(shape) > 1 else 1)
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def mlp(hidden: int = 32, seed: int = 0) -> bytes:
    """x[N,16] -> MatMul/Add/Relu -> Gemm -> Tanh -> MatMul: y[N,8]."""
    rng = np.random.default_rng(seed)
    inits = {"W1": _w(rng, 16, hidden), "b1": _w(rng, hidden), "W2": _w(rng, hidden, hidden),
             "b2": _w(rng, hidden), "W3": _w(rng, hidden, 8)}
    nodes = [h.make_node("MatMul", ["x", "W1"], ["h1"], name="mm1"),
             h.make_node("Add", ["h1", "b1"], ["h2"], name="add1"),
             h.make_node("Relu", ["h2"], ["h3"], name="relu1"),
             h.make_node("Gemm", ["h3", "W2", "b2"], ["h4"], name="gemm2"),
             h.make_node("Tanh", ["h4"], ["h5"], name="tanh2"),
             h.make_node("MatMul", ["h5", "W3"], ["y"], name="mm3")]
    return _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, ["N", 16])],
                  [h.make_tensor_value_info("y", T.FLOAT, ["N", 8])], inits, "mlp")


def cnn(seed: int = 1) -> bytes:
    """x[N,3,12,12] -> Conv/Relu/MaxPool -> Conv/Sigmoid -> GlobalAveragePool -> Flatten -> Gemm."""
    rng = np.random.default_rng(seed)
    inits = {"K1": _w(rng, 6, 3, 3, 3, scale=0.3), "c1": _w(rng, 6), "K2": _w(rng, 8, 6, 3, 3, scale=0.2),
             "c2": _w(rng, 8), "Wf": _w(rng, 8, 5), "bf": _w(rng, 5)}
    nodes = [h.make_node("Conv", ["x", "K1", "c1"], ["a1"], name="conv1", pads=[1, 1, 1, 1]),
             h.make_node("Relu", ["a1"], ["a2"], name="relu1"),
             h.make_node("MaxPool", ["a2"], ["a3"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
             h.make_node("Conv", ["a3", "K2", "c2"], ["a4"], name="conv2"),
             h.make_node("Sigmoid", ["a4"], ["a5"], name="sig2"),
             h.make_node("GlobalAveragePool", ["a5"], ["a6"], name="gap"),
             h.make_node("Flatten", ["a6"], ["a7"], name="flat"),
             h.make_node("Gemm", ["a7", "Wf", "bf"], ["y"], name="fc")]
    return _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, ["N", 3, 12, 12])],
                  [h.make_tensor_value_info("y", T.FLOAT, ["N", 5])], inits, "cnn")


def resnet_like(width: int = 8, blocks: tuple[int, ...] = (2, 2, 2), size: int = 32, seed: int = 4,
                bn: bool = True) -> bytes:
    """A ResNet v1 of basic blocks, torchvision-shaped (7x7/2 stem, BatchNorm, MaxPool, 3x3
    blocks, strided stages with a 1x1 projection, GlobalAveragePool, Gemm) on x[1,3,size,size],
    narrow so that lavapipe runs it quickly: the mix of GEMM/conv shapes is a real ResNet's.
    bn=False: Conv with a bias instead of Conv + BatchNormalization (as torch exports fold it)."""
    rng = np.random.default_rng(seed)
    nodes, inits = [], {}
    count = [0]

    def conv_bn(x, cin, cout, k, stride, relu):
        count[0] += 1
        i = count[0]
        inits[f"w{i}"] = _w(rng, cout, cin, k, k, scale=np.sqrt(2.0 / (cin * k * k)))
        for nm, v in (("g", 1 + 0.1 * _w(rng, cout, scale=1)), ("b", 0.1 * _w(rng, cout, scale=1)),
                      ("m", 0.1 * _w(rng, cout, scale=1)), ("v", 1 + np.abs(_w(rng, cout, scale=0.1)))):
            inits[f"{nm}{i}"] = v.astype(np.float32)
        if bn:
            nodes.append(h.make_node("Conv", [x, f"w{i}"], [f"c{i}"], name=f"conv{i}", kernel_shape=[k, k],
                                     strides=[stride, stride], pads=[k // 2] * 4))
            nodes.append(h.make_node("BatchNormalization", [f"c{i}", f"g{i}", f"b{i}", f"m{i}", f"v{i}"],
                                     [f"n{i}"], name=f"bn{i}"))
        else:
            nodes.append(h.make_node("Conv", [x, f"w{i}", f"b{i}"], [f"n{i}"], name=f"conv{i}",
                                     kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4))
            for nm in ("g", "m", "v"):
                del inits[f"{nm}{i}"]
        if not relu:
            return f"n{i}"
        nodes.append(h.make_node("Relu", [f"n{i}"], [f"r{i}"], name=f"relu{i}"))
        return f"r{i}"

    x = conv_bn("x", 3, width, 7, 2, True)
    nodes.append(h.make_node("MaxPool", [x], ["p0"], name="pool0", kernel_shape=[3, 3], strides=[2, 2],
                             pads=[1, 1, 1, 1]))
    x, cin = "p0", width
    for stage, n in enumerate(blocks):
        cout = width * 2 ** stage
        for b in range(n):
            stride = 2 if stage and b == 0 else 1
            y = conv_bn(x, cin, cout, 3, stride, True)
            y = conv_bn(y, cout, cout, 3, 1, False)
            short = conv_bn(x, cin, cout, 1, stride, False) if stride != 1 or cin != cout else x
            nodes.append(h.make_node("Add", [y, short], [f"s{stage}_{b}"], name=f"add{stage}_{b}"))
            nodes.append(h.make_node("Relu", [f"s{stage}_{b}"], [f"o{stage}_{b}"], name=f"out{stage}_{b}"))
            x, cin = f"o{stage}_{b}", cout
    inits["fw"], inits["fb"] = _w(rng, 10, cin), _w(rng, 10)
    nodes += [h.make_node("GlobalAveragePool", [x], ["gap"], name="gap"),
              h.make_node("Flatten", ["gap"], ["flat"], name="flat"),
              h.make_node("Gemm", ["flat", "fw", "fb"], ["y"], name="fc", transB=1)]
    return _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [1, 3, size, size])],
                  [h.make_tensor_value_info("y", T.FLOAT, [1, 10])], inits, "resnet_like")


def transformer_block(d: int = 16, heads: int = 2, seed: int = 2) -> bytes:
    """Pre-norm attention + MLP block on x[B,S,d]: LayerNorm, Q/K/V MatMuls, head split
    (Reshape/Transpose), scaled scores, Softmax, context, output projection, residuals,
    LayerNorm, MatMul/Gelu-free MLP (Erf-based GELU spelled out), residual."""
    rng = np.random.default_rng(seed)
    dh = d // heads
    inits = {"g1": (1 + 0.1 * rng.standard_normal(d)).astype(np.float32), "be1": _w(rng, d, scale=0.1),
             "Wq": _w(rng, d, d), "Wk": _w(rng, d, d), "Wv": _w(rng, d, d), "Wo": _w(rng, d, d),
             "g2": (1 + 0.1 * rng.standard_normal(d)).astype(np.float32), "be2": _w(rng, d, scale=0.1),
             "Wm1": _w(rng, d, 2 * d), "bm1": _w(rng, 2 * d, scale=0.1), "Wm2": _w(rng, 2 * d, d),
             "split": np.array([0, 0, heads, dh], np.int64), "merge": np.array([0, 0, d], np.int64),
             "scale": np.array(1 / np.sqrt(dh), np.float32), "half": np.array(0.5, np.float32),
             "one": np.array(1.0, np.float32), "rsqrt2": np.array(1 / np.sqrt(2), np.float32)}
    n = h.make_node
    nodes = [n("LayerNormalization", ["x", "g1", "be1"], ["ln1"], name="ln1", axis=-1, epsilon=1e-5)]
    for p in "qkv":
        nodes += [n("MatMul", ["ln1", f"W{p}"], [f"{p}0"], name=f"proj_{p}"),
                  n("Reshape", [f"{p}0", "split"], [f"{p}1"], name=f"split_{p}"),
                  n("Transpose", [f"{p}1"], [f"{p}2"], name=f"heads_{p}",
                    perm=[0, 2, 3, 1] if p == "k" else [0, 2, 1, 3])]
    nodes += [n("MatMul", ["q2", "k2"], ["s0"], name="scores"),
              n("Mul", ["s0", "scale"], ["s1"], name="scale"),
              n("Softmax", ["s1"], ["p"], name="softmax", axis=-1),
              n("MatMul", ["p", "v2"], ["c0"], name="context"),
              n("Transpose", ["c0"], ["c1"], name="unheads", perm=[0, 2, 1, 3]),
              n("Reshape", ["c1", "merge"], ["c2"], name="merge"),
              n("MatMul", ["c2", "Wo"], ["o"], name="proj_o"),
              n("Add", ["x", "o"], ["r1"], name="residual1"),
              n("LayerNormalization", ["r1", "g2", "be2"], ["ln2"], name="ln2", axis=-1, epsilon=1e-5),
              n("MatMul", ["ln2", "Wm1"], ["m0"], name="mlp_in"),
              n("Add", ["m0", "bm1"], ["m1"], name="mlp_bias"),
              n("Mul", ["m1", "rsqrt2"], ["g0"], name="gelu_scale"),
              n("Erf", ["g0"], ["g1e"], name="gelu_erf"),
              n("Add", ["g1e", "one"], ["g2e"], name="gelu_add"),
              n("Mul", ["m1", "g2e"], ["g3"], name="gelu_mul"),
              n("Mul", ["g3", "half"], ["g4"], name="gelu_half"),
              n("MatMul", ["g4", "Wm2"], ["m2"], name="mlp_out"),
              n("Add", ["r1", "m2"], ["y"], name="residual2")]
    return _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, ["B", "S", d])],
                  [h.make_tensor_value_info("y", T.FLOAT, ["B", "S", d])], inits, "block")


def mnist12(seed: int = 3) -> bytes:
    """The mnist-12 architecture (ONNX model zoo): 2 x (Conv 5x5 SAME_UPPER, Add bias, Relu,
    MaxPool), Reshape to [1, 256], MatMul, Add; x[1,1,28,28] -> y[1,10]."""
    rng = np.random.default_rng(seed)
    inits = {"K1": _w(rng, 8, 1, 5, 5, scale=0.3), "B1": _w(rng, 8, 1, 1, scale=0.1),
             "K2": _w(rng, 16, 8, 5, 5, scale=0.1), "B2": _w(rng, 16, 1, 1, scale=0.1),
             "shape": np.array([1, 256], np.int64), "W": _w(rng, 256, 10), "B3": _w(rng, 1, 10, scale=0.1)}
    n = h.make_node
    nodes = [n("Conv", ["x", "K1"], ["c1"], name="Convolution28", kernel_shape=[5, 5], strides=[1, 1],
               auto_pad="SAME_UPPER", group=1, dilations=[1, 1]),
             n("Add", ["c1", "B1"], ["p1"], name="Plus30"),
             n("Relu", ["p1"], ["r1"], name="ReLU32"),
             n("MaxPool", ["r1"], ["m1"], name="Pooling66", kernel_shape=[2, 2], strides=[2, 2], pads=[0, 0, 0, 0]),
             n("Conv", ["m1", "K2"], ["c2"], name="Convolution110", kernel_shape=[5, 5], strides=[1, 1],
               auto_pad="SAME_UPPER", group=1, dilations=[1, 1]),
             n("Add", ["c2", "B2"], ["p2"], name="Plus112"),
             n("Relu", ["p2"], ["r2"], name="ReLU114"),
             n("MaxPool", ["r2"], ["m2"], name="Pooling160", kernel_shape=[3, 3], strides=[3, 3], pads=[0, 0, 0, 0]),
             n("Reshape", ["m2", "shape"], ["flat"], name="Times212_reshape0"),
             n("MatMul", ["flat", "W"], ["mm"], name="Times212"),
             n("Add", ["mm", "B3"], ["y"], name="Plus214")]
    return _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [1, 1, 28, 28])],
                  [h.make_tensor_value_info("y", T.FLOAT, [1, 10])], inits, "mnist12")


def ort_run(model: bytes, feeds: dict) -> list[np.ndarray]:
    return ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)


def node_names(model: bytes) -> list[str]:
    return [n.name for n in onnx.load_from_string(model).graph.node]


MODELS = {
    "mlp": (mlp, lambda rng: {"x": rng.standard_normal((5, 16)).astype(np.float32)}),
    "cnn": (cnn, lambda rng: {"x": rng.standard_normal((2, 3, 12, 12)).astype(np.float32)}),
    "block": (transformer_block, lambda rng: {"x": rng.standard_normal((2, 5, 16)).astype(np.float32)}),
    "mnist12": (mnist12, lambda rng: {"x": rng.random((1, 1, 28, 28), dtype=np.float32)}),
}
