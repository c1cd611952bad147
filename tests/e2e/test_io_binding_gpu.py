"""onnxruntime's IOBinding on a GPU (vkml/api/io_binding.py): inputs bound as vkml.Tensors stay
on the device, outputs bound there come back as vkml.Tensors on it, an output feeds the next run
with no host copy, mixed cpu/device outputs, and ORT code that says "cuda" runs unchanged; values
as a CPU session's."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import vkml
from vkml.vulkan.tensor import DeviceTensor
from _models import _model, _w

TOL = dict(rtol=1e-5, atol=1e-6)


def _step(seed: int = 3) -> bytes:
    """x[N,8] -> y = Tanh(x @ W + b) [N,8] (shaped like x, so it can feed the next run),
    z = Relu(x) * 2 [N,8]."""
    rng = np.random.default_rng(seed)
    nodes = [h.make_node("MatMul", ["x", "W"], ["m"], name="mm"),
             h.make_node("Add", ["m", "b"], ["a"], name="add"),
             h.make_node("Tanh", ["a"], ["y"], name="tanh"),
             h.make_node("Relu", ["x"], ["r"], name="relu"),
             h.make_node("Mul", ["r", "two"], ["z"], name="mul")]
    return _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, ["N", 8])],
                  [h.make_tensor_value_info("y", T.FLOAT, ["N", 8]), h.make_tensor_value_info("z", T.FLOAT, ["N", 8])],
                  {"W": _w(rng, 8, 8), "b": _w(rng, 8), "two": np.array([2], np.float32)}, "step")


@pytest.fixture(scope="module")
def sessions(gpu):
    model = _step()
    return vkml.InferenceSession(model, devices=[gpu, "cpu"]), vkml.InferenceSession(model, devices=["cpu"])


X = np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32)


def test_device_inputs_and_outputs(gpu, sessions):
    sess, ref = sessions
    b = sess.io_binding()
    b.bind_ortvalue_input("x", vkml.Tensor.from_numpy(X, gpu))
    b.bind_output("y", "vulkan", int(gpu.split(":")[1]))
    b.bind_output("z", gpu)  # vkml's own device name works too
    sess.run_with_iobinding(b)
    y, z = b.get_outputs()
    assert isinstance(y, vkml.Tensor) and y.device == gpu and y.device_tensor is not None
    assert z.device == gpu and z.shape == (3, 8)
    want_y, want_z = ref.run(None, {"x": X})
    np.testing.assert_allclose(y.numpy(), want_y, **TOL)
    np.testing.assert_array_equal(z.numpy(), want_z)
    host = b.copy_outputs_to_cpu()
    assert all(type(o) is np.ndarray for o in host)
    np.testing.assert_allclose(host[0], want_y, **TOL)


def test_chained_runs_stay_on_the_device(gpu, sessions, monkeypatch):
    sess, ref = sessions
    dev_id = int(gpu.split(":")[1])
    b = sess.io_binding()
    b.bind_input("x", "cuda", dev_id, np.float32, X.shape, vkml.Tensor.from_numpy(X, gpu))
    b.bind_output("y", "cuda", dev_id)
    sess.run_with_iobinding(b)  # plans for this signature (which may read constants)
    want = ref.run(["y"], {"x": X})[0]
    np.testing.assert_allclose(b.copy_outputs_to_cpu()[0], want, **TOL)

    reads, writes = [], []
    real_read, real_write = DeviceTensor.numpy, DeviceTensor.from_numpy.__func__
    monkeypatch.setattr(DeviceTensor, "numpy", lambda self: reads.append(self.shape) or real_read(self))
    monkeypatch.setattr(DeviceTensor, "from_numpy",
                        classmethod(lambda cls, *a, **k: writes.append(1) or real_write(cls, *a, **k)))
    for _ in range(3):  # each output feeds the next run as it is, on the device
        (y,) = b.get_outputs()
        assert y.device == gpu
        b.bind_ortvalue_input("x", y)
        sess.run_with_iobinding(b)
        want = ref.run(["y"], {"x": want})[0]
    assert reads == [] and writes == [], "a chained run copied through the host"
    got = b.copy_outputs_to_cpu()[0]
    assert reads == [(3, 8)]  # (the counting sees a read-back)
    monkeypatch.undo()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_mixed_cpu_and_device_outputs(gpu, sessions):
    sess, ref = sessions
    b = sess.io_binding()
    b.bind_cpu_input("x", X)  # a host input goes up to the device for the run
    b.bind_output("z", "cpu")
    b.bind_output("y", "cuda", int(gpu.split(":")[1]))
    sess.run_with_iobinding(b)
    z, y = b.get_outputs()
    assert (z.device, y.device) == ("cpu", gpu)
    want_y, want_z = ref.run(None, {"x": X})
    np.testing.assert_array_equal(z.numpy(), want_z)
    np.testing.assert_allclose(y.numpy(), want_y, **TOL)
    b.bind_output("y", "cpu")  # every output on the host: one plain run
    sess.run_with_iobinding(b)
    assert [o.device for o in b.get_outputs()] == ["cpu", "cpu"]
    with pytest.raises(ValueError, match=r"bind_input\('x'\).*tensor is on vulkan:\d+, but.*names cpu"):
        b.bind_input("x", "cpu", 0, np.float32, X.shape, vkml.Tensor.from_numpy(X, gpu))


def test_ort_style_snippet_with_cuda(gpu):
    device_id = int(gpu.split(":")[1])
    model = _step()
    X_in = X
    # --- as onnxruntime code writes it; only the import differs ---
    import vkml as onnxruntime

    session = onnxruntime.InferenceSession(
        model, providers=[("VulkanExecutionProvider", {"device_id": device_id}), "CPUExecutionProvider"])
    io_binding = session.io_binding()
    io_binding.bind_cpu_input("x", X_in)
    io_binding.bind_output("y", "cuda", device_id)
    io_binding.bind_output("z")
    io_binding.synchronize_inputs()
    session.run_with_iobinding(io_binding)
    io_binding.synchronize_outputs()
    Y, Z = io_binding.copy_outputs_to_cpu()
    y_ortvalue = io_binding.get_outputs()[0]
    io_binding.bind_ortvalue_input("x", y_ortvalue)
    session.run_with_iobinding(io_binding)
    Y2 = io_binding.copy_outputs_to_cpu()[0]
    # --- end of the ORT-style code ---
    assert y_ortvalue.device == f"vulkan:{device_id}"
    ref = vkml.InferenceSession(model, devices=["cpu"])
    want_y, want_z = ref.run(None, {"x": X})
    np.testing.assert_allclose(Y, want_y, **TOL)
    np.testing.assert_array_equal(Z, want_z)
    np.testing.assert_allclose(Y2, ref.run(["y"], {"x": want_y})[0], **TOL)
