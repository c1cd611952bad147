"""Bad feeds get a ValueError naming the input, what was expected and what came; nothing is lost."""
import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import vkml


@pytest.fixture(scope="module")
def sess():
    nodes = [h.make_node("Add", ["a", "b"], ["y"], name="add")]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("a", T.FLOAT, ["N", 3]),
                                  h.make_tensor_value_info("b", T.FLOAT, ["N", 3])],
                     [h.make_tensor_value_info("y", T.FLOAT, ["N", 3])])
    return vkml.InferenceSession(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), devices=["cpu"])


def good():
    return {"a": np.ones((2, 3), np.float32), "b": np.ones((2, 3), np.float32)}


@pytest.mark.parametrize("feed, match", [
    ({"a": np.ones((2, 3), np.float32)}, r"missing input\(s\) \['b'\]"),
    ({**good(), "c": np.ones(1)}, r"unknown input name\(s\) \['c'\]"),
    ({**good(), "a": np.ones((2, 3), np.float64)}, r"input 'a': expected tensor\(float\), got tensor\(double\)"),
    ({**good(), "a": np.ones((2, 3, 1), np.float32)}, r"input 'a': expected rank 2 \[N, 3\], got rank 3"),
    ({**good(), "a": np.ones((2, 4), np.float32)}, r"input 'a': dimension 1 must be 3"),
    ({"a": np.ones((2, 3), np.float32), "b": np.ones((5, 3), np.float32)}, r"input 'b': dimension 0 \('N'\) is 5"),
    ({**good(), "a": "text"}, r"input 'a': expected a NumPy array"),
    ({**good(), "a": [[1.0], [1.0, 2.0]]}, r"input 'a': cannot be read as an array"),
    # Zero strides: terabytes that cost nothing to make are refused before anything is allocated.
    ({"a": np.broadcast_to(np.float32(1), (1 << 40, 3)), "b": np.broadcast_to(np.float32(1), (1 << 40, 3))},
     r"input 'a': shape \[1099511627776, 3\] \(float32\) is 12.0 TiB, more than this machine's memory"),
])
def test_bad_feed(sess, feed, match):
    with pytest.raises(ValueError, match=match):
        sess.run(None, feed)
    # The session keeps working after a failed call.
    np.testing.assert_array_equal(sess.run(None, good())[0], np.full((2, 3), 2, np.float32))


def test_feed_layout_does_not_change_the_bits():
    """Strided, negative-stride and Fortran-ordered feeds give exactly the contiguous answer
    (the session copies them; BLAS would otherwise take other paths)."""
    import sys, os
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "e2e"))
    import _models

    s = vkml.InferenceSession(_models.transformer_block(), devices=["cpu"])
    x = np.random.default_rng(0).standard_normal((3, 5, 16)).astype(np.float32)
    want = s.run(None, {"x": x})[0]
    for view in (np.asfortranarray(x), np.repeat(x[..., None], 2, -1)[..., 1], x[::-1][::-1]):
        np.testing.assert_array_equal(s.run(None, {"x": view})[0], want)


def test_unknown_output_name(sess):
    with pytest.raises(ValueError, match="unknown output"):
        sess.run(["nope"], good())


def test_symbolic_dims_resolved_per_run(sess):
    for n in (1, 4, 7):
        x = np.ones((n, 3), np.float32)
        assert sess.run(["y"], {"a": x, "b": x})[0].shape == (n, 3)


def test_describes_inputs_like_onnxruntime(sess):
    (a, b), (y,) = sess.get_inputs(), sess.get_outputs()
    assert (a.name, a.shape, a.type) == ("a", ["N", 3], "tensor(float)")
    assert (y.name, y.shape, y.type) == ("y", ["N", 3], "tensor(float)")


def test_unknown_device():
    with pytest.raises(ValueError, match="unknown device"):
        vkml.InferenceSession(b"", devices=["tpu:0"])


def test_devices_lists_cpu():
    assert "cpu" in [d.name for d in vkml.devices()]


def test_cpu_sessions_leave_vulkan_closed():
    """devices=["cpu"] must not start Vulkan: creating an instance maps every installed driver
    (lavapipe's LLVM alone is ~40 MiB of resident memory)."""
    import subprocess
    import sys

    code = (
        "import numpy as np, vkml\n"
        "from onnx import TensorProto as T, helper as h\n"
        "g = h.make_graph([h.make_node('Relu', ['x'], ['y'])], 'g', "
        "[h.make_tensor_value_info('x', T.FLOAT, [2])], [h.make_tensor_value_info('y', T.FLOAT, [2])])\n"
        "s = vkml.InferenceSession(h.make_model(g).SerializeToString(), devices=['cpu'])\n"
        "print(s.run(None, {'x': np.array([-1, 2], np.float32)})[0].tolist())\n"
        "print(any('libvulkan' in line for line in open('/proc/self/maps')))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:2] == ["[0.0, 2.0]", "False"], r.stdout
