"""I/O binding: inputs and outputs that stay on the device, and two sessions chained without
a round trip through host memory.

    python examples/io_binding.py                      # the CPU device
    python examples/io_binding.py --device vulkan:0    # a GPU (or Mesa's lavapipe)

Two small models built here with onnx.helper: an "encoder" (MatMul + Add + Relu) and a "head"
(MatMul + Softmax). The input is uploaded once with vkml.Tensor.from_numpy(..., device=...);
run(..., output_device=...) hands back vkml.Tensors on that device, which feed the next run
as they are. Only the final result is read back (Tensor.numpy()).

The rule for outputs: NumPy arrays when output_device is not given; vkml.Tensors on that
device whenever it is, "cpu" included. On "cpu" a Tensor simply holds a NumPy array, so the
same code runs on both. onnxruntime's IOBinding API (sess.io_binding(), bind_ortvalue_input,
bind_output, sess.run_with_iobinding) works over the same Tensors: see docs/api.md.
"""
from __future__ import annotations

import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import vkml

rng = np.random.default_rng(0)
W1 = rng.standard_normal((64, 128)).astype(np.float32) / 8
B1 = rng.standard_normal(128).astype(np.float32) / 8
W2 = rng.standard_normal((128, 10)).astype(np.float32) / 8


def encoder() -> onnx.ModelProto:
    """h = Relu(x @ W1 + B1), x: [N, 64] -> h: [N, 128]."""
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["xw"], name="mm1"),
         helper.make_node("Add", ["xw", "b1"], ["a"], name="bias1"),
         helper.make_node("Relu", ["a"], ["h"], name="relu1")],
        "encoder",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64])],
        [helper.make_tensor_value_info("h", TensorProto.FLOAT, ["N", 128])],
        [numpy_helper.from_array(W1, "w1"), numpy_helper.from_array(B1, "b1")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def head() -> onnx.ModelProto:
    """p = Softmax(h @ W2), h: [N, 128] -> p: [N, 10]."""
    g = helper.make_graph(
        [helper.make_node("MatMul", ["h", "w2"], ["z"], name="mm2"),
         helper.make_node("Softmax", ["z"], ["p"], name="softmax", axis=-1)],
        "head",
        [helper.make_tensor_value_info("h", TensorProto.FLOAT, ["N", 128])],
        [helper.make_tensor_value_info("p", TensorProto.FLOAT, ["N", 10])],
        [numpy_helper.from_array(W2, "w2")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", help='"cpu" (default) or a Vulkan device such as "vulkan:0"')
    args = ap.parse_args()
    dev = args.device

    # Models may be given as onnx.ModelProto, bytes or a path.
    enc = vkml.InferenceSession(encoder(), devices=[dev])
    hd = vkml.InferenceSession(head(), devices=[dev])

    x = rng.standard_normal((32, 64)).astype(np.float32)
    x_dev = vkml.Tensor.from_numpy(x, device=dev)  # one upload; reused by every run below
    print(f"input: {x_dev!r}")

    for _ in range(3):  # as a server would: each run reuses the plan the first one made
        # h never leaves the device: the encoder's output Tensor is the head's input.
        (h,) = enc.run(None, {"x": x_dev}, output_device=dev)
        (p,) = hd.run(None, {"h": h}, output_device=dev)
    print(f"encoder output: {h!r}")
    print(f"head output:    {p!r}")

    # Read back once, at the end, and check against NumPy.
    got = p.numpy()  # also np.asarray(p), or DLPack: np.from_dlpack(p)
    z = np.maximum(x @ W1 + B1, 0) @ W2
    want = np.exp(z - z.max(1, keepdims=True))
    want /= want.sum(1, keepdims=True)
    err = float(np.abs(got - want).max())
    assert err < 1e-4, err
    print(f"chained 2 runs on {dev} with device-resident I/O: max error vs NumPy {err:.1e}")
    print("where the head's nodes ran:", {r["node"]: r["device"] for r in hd.placement()})

    # Without output_device the same resident input gives a plain NumPy array (read back).
    (p_host,) = hd.run(None, {"h": h})
    print(f"same run, output to the host: {type(p_host).__name__} {p_host.shape}")


if __name__ == "__main__":
    main()
