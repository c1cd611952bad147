"""vkml.Tensor's interchange (issue #17): np.asarray, DLPack both ways, basics, and the output
type rule (arrays without output_device, Tensors whenever it is given, "cpu" included)."""
import numpy as np
import pytest

import vkml


def _session():
    from onnx import TensorProto as T
    from onnx import helper as h

    g = h.make_graph([h.make_node("Relu", ["x"], ["y"])], "g", [h.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                     [h.make_tensor_value_info("y", T.FLOAT, [2, 3])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    return vkml.InferenceSession(m.SerializeToString(), devices=["cpu"])


def test_cpu_tensor_dlpack_round_trip_shares_memory():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = vkml.Tensor.from_numpy(a)
    b = np.from_dlpack(t)
    np.testing.assert_array_equal(b, a)
    b[0, 0] = 42  # a CPU tensor exports its own memory (no copy)
    assert t.numpy()[0, 0] == 42
    c = np.from_dlpack(t, copy=True)  # an explicit copy
    c[0, 0] = -1
    assert t.numpy()[0, 0] == 42
    assert t.__dlpack_device__() == (1, 0)
    back = vkml.from_dlpack(np.arange(4, dtype=np.int64))
    assert isinstance(back, vkml.Tensor) and back.device == "cpu" and back.numpy().tolist() == [0, 1, 2, 3]


def test_basics():
    t = vkml.Tensor.from_numpy(np.arange(12, dtype=np.int32).reshape(3, 4))
    assert len(t) == 3 and t.size == 12 and t.nbytes == 48 and t.ndim == 2
    np.testing.assert_array_equal(t[1], [4, 5, 6, 7])
    np.testing.assert_array_equal(np.asarray(t), np.arange(12).reshape(3, 4))
    with pytest.raises(TypeError):
        len(vkml.Tensor.from_numpy(np.float32(1)))


def test_dlpack_refuses_other_devices_and_streams():
    t = vkml.Tensor.from_numpy(np.ones(3, np.float32))
    with pytest.raises(BufferError):
        t.__dlpack__(stream=1)
    with pytest.raises(BufferError):
        t.__dlpack__(dl_device=(2, 0))


def test_output_type_rule():
    s = _session()
    x = np.array([[-1, 0, 1], [2, -2, 3]], np.float32)
    (y,) = s.run(None, {"x": x})
    assert isinstance(y, np.ndarray)
    (t,) = s.run(None, {"x": x}, output_device="cpu")
    assert isinstance(t, vkml.Tensor) and t.device == "cpu"
    np.testing.assert_array_equal(np.from_dlpack(t), y)


def test_torch_from_dlpack_when_torch_is_there():
    torch = pytest.importorskip("torch")
    t = vkml.Tensor.from_numpy(np.arange(5, dtype=np.float32))
    assert torch.from_dlpack(t).tolist() == [0, 1, 2, 3, 4]
    assert vkml.from_dlpack(torch.arange(3)).numpy().tolist() == [0, 1, 2]


def test_gpu_tensor_exports_a_host_copy(gpu):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = vkml.Tensor.from_numpy(a, gpu)
    b = np.from_dlpack(t)
    np.testing.assert_array_equal(b, a)
    b[0, 0] = 42  # a copy: the GPU tensor keeps its values
    assert t.numpy()[0, 0] == 0
    with pytest.raises(BufferError, match="copy"):
        t.__dlpack__(copy=False)
    g = vkml.from_dlpack(a, gpu)
    assert g.device == gpu and np.array_equal(g.numpy(), a)
    np.testing.assert_array_equal(t[1], a[1])
