"""Small pieces of the ecosystem's habits (issue #17): np.asarray on a vkml.Tensor, and
onnx.backend device strings that mean what they say."""
import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import vkml
from vkml import backend


def _relu_model():
    g = h.make_graph([h.make_node("Relu", ["x"], ["y"])], "g", [h.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                     [h.make_tensor_value_info("y", T.FLOAT, [2, 3])])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8)


def test_np_asarray_of_a_tensor():
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    t = vkml.Tensor.from_numpy(x)
    a = np.asarray(t)
    assert a.dtype == np.float32 and a.shape == (2, 3) and np.array_equal(a, x)
    assert np.asarray(t, dtype=np.float64).dtype == np.float64
    assert np.array(t) is not t._data  # np.array copies
    assert np.maximum(t, 0).sum() == np.maximum(x, 0).sum()


def test_np_asarray_of_a_gpu_tensor():
    gpus = [d.name for d in vkml.devices() if d.vulkan is not None]
    if not gpus:
        pytest.skip("no Vulkan device")
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    t = vkml.Tensor.from_numpy(x, gpus[0])
    assert np.array_equal(np.asarray(t), x)


def test_backend_devices():
    assert backend.supports_device("CPU")
    assert not backend.supports_device("CUDA") and not backend.supports_device("TPU")
    with pytest.raises(ValueError, match="not CUDA"):
        backend.prepare(_relu_model(), "CUDA")
    rep = backend.prepare(_relu_model(), "CPU")
    assert rep.session.devices == ["cpu"]
    x = np.array([[-1, 0, 1], [2, -3, 4]], np.float32)
    assert np.array_equal(rep.run([x])[0], np.maximum(x, 0))
    gpus = [d.name for d in vkml.devices() if d.vulkan is not None]
    assert backend.supports_device("GPU") == bool(gpus)
    if gpus:
        rep = backend.prepare(_relu_model(), "GPU")
        assert rep.session.devices == [gpus[0], "cpu"]
        assert np.array_equal(rep.run([x])[0], np.maximum(x, 0))
        assert backend.prepare(_relu_model(), "VULKAN:0").session.devices[0] == "vulkan:0"
    with pytest.raises(ValueError, match="vulkan:99"):
        backend.prepare(_relu_model(), "GPU:99")
