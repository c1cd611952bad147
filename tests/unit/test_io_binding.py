"""onnxruntime's IOBinding workflow on a CPU session (vkml/api/io_binding.py): every method,
errors that name the input or output, and outputs equal to sess.run's."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import vkml
from vkml.api.io_binding import device_name

W = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
B = np.array([0.5, -0.5, 0.25], np.float32)


def _model() -> bytes:
    """x[N,4], k[4] -> y = Relu(x @ W + b) [N,3], z = x * k [N,4]."""
    g = h.make_graph([h.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
                      h.make_node("Add", ["m", "b"], ["a"], name="add"),
                      h.make_node("Relu", ["a"], ["y"], name="relu"),
                      h.make_node("Mul", ["x", "k"], ["z"], name="mul")], "two",
                     [h.make_tensor_value_info("x", T.FLOAT, ["N", 4]), h.make_tensor_value_info("k", T.FLOAT, [4])],
                     [h.make_tensor_value_info("y", T.FLOAT, ["N", 3]),
                      h.make_tensor_value_info("z", T.FLOAT, ["N", 4])],
                     [nh.from_array(W, "w"), nh.from_array(B, "b")])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8).SerializeToString()


@pytest.fixture(scope="module")
def sess():
    return vkml.InferenceSession(_model(), devices=["cpu"])


X = np.arange(8, dtype=np.float32).reshape(2, 4) / 8 - 0.3
K = np.array([1, -2, 0.5, 3], np.float32)


def test_bind_run_read(sess):
    b = sess.io_binding()
    assert isinstance(b, vkml.IOBinding)
    b.bind_cpu_input("x", X)
    b.bind_ortvalue_input("k", vkml.Tensor.from_numpy(K))
    b.bind_output("y")
    b.bind_output("z", "cpu", 0)
    b.synchronize_inputs()
    assert sess.run_with_iobinding(b) is None
    b.synchronize_outputs()
    want = sess.run(None, {"x": X, "k": K})
    outs = b.get_outputs()
    assert all(isinstance(o, vkml.Tensor) and o.device == "cpu" for o in outs)
    for got, w in zip(outs, want):
        np.testing.assert_array_equal(got.numpy(), w)
    host = b.copy_outputs_to_cpu()
    assert all(type(o) is np.ndarray for o in host)
    for got, w in zip(host, want):
        np.testing.assert_array_equal(got, w)
    assert [o.shape for o in b.get_outputs_as_ortvaluevector()] == [(2, 3), (2, 4)]


def test_only_bound_outputs_in_bound_order(sess):
    b = sess.io_binding()
    b.bind_cpu_input("x", X)
    b.bind_cpu_input("k", K)
    b.bind_output("z")
    sess.run_with_iobinding(b)
    (z,) = b.copy_outputs_to_cpu()
    np.testing.assert_array_equal(z, X * K)
    b.bind_output("y")
    b.bind_output("z", "cpu")  # binding again keeps its place
    sess.run_with_iobinding(b)
    z, y = b.copy_outputs_to_cpu()
    np.testing.assert_array_equal(z, X * K)
    np.testing.assert_array_equal(y, sess.run(["y"], {"x": X, "k": K})[0])


def test_cpu_input_is_held_not_copied(sess):
    x = X.copy()
    b = sess.io_binding()
    b.bind_cpu_input("x", x)
    b.bind_input("k", "cpu", 0, np.float32, [4], K)  # a host array through onnxruntime's raw binding
    b.bind_output("z")
    sess.run_with_iobinding(b)
    first = b.copy_outputs_to_cpu()[0]
    x *= 2  # as in onnxruntime, the next run reads the bound array as it is then
    sess.run_with_iobinding(b)
    np.testing.assert_array_equal(b.copy_outputs_to_cpu()[0], 2 * first)
    with pytest.raises(ValueError, match=r"input 'k': expected tensor\(float\), got tensor\(double\)"):
        b.bind_cpu_input("k", [1.0, -2.0, 0.5, 3.0])  # lists are read by np.asarray: float64 here
    b.bind_cpu_input("x", np.ones((3, 4), np.float32))  # rebinding replaces; a new batch size
    sess.run_with_iobinding(b)
    np.testing.assert_array_equal(b.copy_outputs_to_cpu()[0], np.tile(K, (3, 1)))


def test_input_errors_name_the_input(sess):
    b = sess.io_binding()
    with pytest.raises(ValueError, match=r"unknown input name 'q'.*\['x', 'k'\]"):
        b.bind_cpu_input("q", X)
    with pytest.raises(ValueError, match=r"input 'x': expected tensor\(float\), got tensor\(double\)"):
        b.bind_cpu_input("x", X.astype(np.float64))
    with pytest.raises(ValueError, match=r"'x'.*rank 2"):
        b.bind_ortvalue_input("x", vkml.Tensor.from_numpy(X[0]))
    with pytest.raises(ValueError, match=r"'k'.*dimension 0 must be 4"):
        b.bind_cpu_input("k", K[:3])
    with pytest.raises(TypeError, match=r"bind_ortvalue_input\('x'\).*vkml.Tensor"):
        b.bind_ortvalue_input("x", [1.0, 2.0])
    with pytest.raises(TypeError, match=r"bind_cpu_input\('x'\).*bind_ortvalue_input"):
        b.bind_cpu_input("x", vkml.Tensor.from_numpy(X))
    # raw pointers: vkml has none
    with pytest.raises(TypeError, match=r"bind_input\('x'\).*raw device pointers.*bind_ortvalue_input\('x'"):
        b.bind_input("x", "cuda", 0, np.float32, [2, 4], 140234567890)
    with pytest.raises(TypeError, match=r"bind_input\('x'\).*bind_cpu_input"):
        b.bind_input("x", "cpu", 0, np.float32, [2, 4], X.ctypes.data)
    with pytest.raises(ValueError, match=r"bind_input\('x'\).*element_type is int64.*float32"):
        b.bind_input("x", "cpu", 0, np.int64, [2, 4], X)
    with pytest.raises(ValueError, match=r"bind_input\('x'\).*shape is \[4, 2\].*\[2, 4\]"):
        b.bind_input("x", "cpu", 0, np.float32, [4, 2], X)
    with pytest.raises(ValueError, match=r"bind_input\('x'\).*host memory.*vulkan:0"):
        b.bind_input("x", "cuda", 0, np.float32, [2, 4], X)
    with pytest.raises(ValueError, match=r"bind_input\('x'\).*on cpu.*vulkan:1"):
        b.bind_input("x", "cuda", 1, np.float32, [2, 4], vkml.Tensor.from_numpy(X))
    with pytest.raises(ValueError, match=r"bind_input\('x'\).*no device type 'dml'"):
        b.bind_input("x", "dml", 0, np.float32, [2, 4], X)
    b.bind_input("x", "cpu", 0, np.float32, (2, 4), vkml.Tensor.from_numpy(X))  # a CPU Tensor: fine
    b.bind_output("y")
    with pytest.raises(ValueError, match=r"input\(s\) \['k'\] not bound.*bind_cpu_input"):
        sess.run_with_iobinding(b)
    b.bind_cpu_input("k", K)
    sess.run_with_iobinding(b)
    b.clear_binding_inputs()
    with pytest.raises(ValueError, match=r"\['x', 'k'\] not bound"):
        sess.run_with_iobinding(b)


def test_output_errors_name_the_output(sess):
    b = sess.io_binding()
    with pytest.raises(ValueError, match=r"bind_output\('w'\).*unknown output name 'w'.*\['y', 'z'\]"):
        b.bind_output("w")
    with pytest.raises(ValueError, match=r"bind_output\('y'\).*no device type 'tensorrt'.*'cuda'"):
        b.bind_output("y", "tensorrt")
    with pytest.raises(ValueError, match=r"bind_output\('y'\).*device_id"):
        b.bind_output("y", "cuda", -1)
    with pytest.raises(ValueError, match=r"bind_output\('y'\).*allocates its outputs itself"):
        b.bind_output("y", "cpu", 0, np.float32, [2, 3], 12345678)
    with pytest.raises(ValueError, match=r"bind_ortvalue_output\('y'\).*allocates its outputs itself"):
        b.bind_ortvalue_output("y", vkml.Tensor.from_numpy(np.zeros((2, 3), np.float32)))
    with pytest.raises(ValueError, match=r"bind_ortvalue_output\('v'\).*unknown output name"):
        b.bind_ortvalue_output("v", None)
    b.bind_cpu_input("x", X)
    b.bind_cpu_input("k", K)
    with pytest.raises(ValueError, match=r"no output is bound.*\['y', 'z'\]"):
        sess.run_with_iobinding(b)
    with pytest.raises(RuntimeError, match="no outputs yet"):
        b.get_outputs()
    b.bind_output("y", "cpu", 0, np.float32, [2, 3])  # element_type/shape without a buffer: ignored, as in ORT
    sess.run_with_iobinding(b)
    assert len(b.get_outputs()) == 1
    b.clear_binding_outputs()
    with pytest.raises(RuntimeError, match="no outputs yet"):
        b.copy_outputs_to_cpu()
    with pytest.raises(ValueError, match="no output is bound"):
        sess.run_with_iobinding(b)


def test_run_options_and_foreign_bindings(sess):
    b = sess.io_binding()
    b.bind_cpu_input("x", X)
    b.bind_cpu_input("k", K)
    b.bind_output("y")
    ro = vkml.RunOptions()
    ro.logid = "bound"
    sess.run_with_iobinding(b, ro)
    ro.terminate = True
    with pytest.raises(RuntimeError, match="terminate"):
        sess.run_with_iobinding(b, ro)
    other = vkml.InferenceSession(_model(), devices=["cpu"])
    with pytest.raises(ValueError, match="made by this session"):
        other.run_with_iobinding(b)
    with pytest.raises(ValueError, match="made by this session"):
        sess.run_with_iobinding(object())


def test_device_types_map_to_vulkan():
    assert device_name("cpu", 3, "t") == "cpu"
    assert device_name("CPU", 0, "t") == "cpu"
    assert device_name("cuda", 0, "t") == "vulkan:0"
    assert device_name("cuda", 1, "t") == "vulkan:1"
    assert device_name("GPU", np.int64(2), "t") == "vulkan:2"
    assert device_name("vulkan", 0, "t") == "vulkan:0"
    assert device_name("vulkan:3", 0, "t") == "vulkan:3"
    for bad in ("dml", "cann", "", "vulkan:x"):
        with pytest.raises(ValueError, match="no device type"):
            device_name(bad, 0, "t")
    for bad_id in (-1, "0", 1.0, True):
        with pytest.raises(ValueError, match="device_id"):
            device_name("cuda", bad_id, "t")
    with pytest.raises(ValueError, match="device_type must be a string"):
        device_name(None, 0, "t")


def test_ort_style_code_on_the_cpu():
    import vkml as onnxruntime  # the one line that changes from onnxruntime

    session = onnxruntime.InferenceSession(_model(), providers=["CPUExecutionProvider"])
    io_binding = session.io_binding()
    io_binding.bind_cpu_input("x", X)
    io_binding.bind_cpu_input("k", K)
    io_binding.bind_output("y")
    io_binding.bind_output(name="z", device_type="cpu", device_id=0)
    session.run_with_iobinding(io_binding)
    y, z = io_binding.copy_outputs_to_cpu()
    np.testing.assert_array_equal(y, np.maximum(X @ W + B, 0))
    np.testing.assert_array_equal(z, X * K)
    io_binding.clear_binding_inputs()
    io_binding.clear_binding_outputs()
