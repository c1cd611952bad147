"""onnxruntime-style code runs on vkml unchanged (vkml/api/options.py): providers,
SessionOptions (positional, as onnxruntime takes it), RunOptions, get_modelmeta,
end_profiling, get_available_providers."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import vkml


def _model(path=None) -> bytes:
    w = nh.from_array(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3), "w")
    b = nh.from_array(np.array([0.5, -0.5, 0.25], np.float32), "b")
    g = h.make_graph([h.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
                      h.make_node("Add", ["m", "b"], ["a"], name="add"),
                      h.make_node("Relu", ["a"], ["y"], name="relu")], "tiny",
                     [h.make_tensor_value_info("x", T.FLOAT, ["N", 4])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)], [w, b], doc_string="a graph")
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8, producer_name="tests",
                     doc_string="a model", model_version=7, domain="ai.test")
    h.set_model_props(m, {"author": "vkml", "license": "MIT"})
    data = m.SerializeToString()
    if path is not None:
        with open(path, "wb") as f:
            f.write(data)
    return data


ORT_SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    import vkml as ort                     # the one line that changes from onnxruntime

    path, providers = sys.argv[1], sys.argv[2].split(",")
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.intra_op_num_threads = 2
    so.enable_profiling = True
    so.profile_file_prefix = sys.argv[3]
    assert "CPUExecutionProvider" in ort.get_available_providers()
    sess = ort.InferenceSession(path, so, providers=providers)
    name = sess.get_inputs()[0].name
    x = np.arange(8, dtype=np.float32).reshape(2, 4) / 8
    (y,) = sess.run([sess.get_outputs()[0].name], {name: x})
    ro = ort.RunOptions()
    ro.logid = "second"
    (y2,) = sess.run(None, {name: x}, ro)
    assert np.array_equal(y, y2)
    meta = sess.get_modelmeta()
    print("PROVIDERS", ",".join(sess.get_providers()))
    print("META", meta.producer_name, meta.graph_name, meta.version, meta.custom_metadata_map["author"])
    print("PROFILE", sess.end_profiling())
    print("Y", y.round(5).tolist())
""")


@pytest.mark.parametrize("where", ["cpu", "gpu"])
def test_an_onnxruntime_script_runs_unchanged(tmp_path, where, request):
    path = str(tmp_path / "m.onnx")
    _model(path)
    providers = "CPUExecutionProvider"
    if where == "gpu":
        request.getfixturevalue("gpu")
        providers = "VulkanExecutionProvider,CPUExecutionProvider"
    r = subprocess.run([sys.executable, "-c", ORT_SCRIPT, path, providers, str(tmp_path / "prof")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = dict(l.split(" ", 1) for l in r.stdout.splitlines() if " " in l)
    assert lines["PROVIDERS"] == providers
    assert lines["META"] == "tests tiny 7 vkml"
    x = np.arange(8, dtype=np.float32).reshape(2, 4) / 8
    want = np.maximum(x @ np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3) + [0.5, -0.5, 0.25], 0)
    np.testing.assert_allclose(np.array(json.loads(lines["Y"])), want, atol=1e-5)
    events = json.load(open(lines["PROFILE"]))
    assert [e["args"]["logid"] for e in events] == ["", "second"]
    assert all(e["ph"] == "X" and e["dur"] > 0 for e in events)


def test_providers_map_to_devices_and_unknown_ones_are_errors():
    data = _model()
    s = vkml.InferenceSession(data, providers=["CPUExecutionProvider"])
    assert s.devices == ["cpu"] and s.get_providers() == ["CPUExecutionProvider"]
    assert s.get_provider_options() == {"CPUExecutionProvider": {}}
    with pytest.raises(ValueError, match="no execution provider 'CUDAExecutionProvider'.*VulkanExecutionProvider"):
        vkml.InferenceSession(data, providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    with pytest.raises(ValueError, match="device_id must be an integer"):
        vkml.InferenceSession(data, providers=[("VulkanExecutionProvider", {"device_id": "x"})])
    with pytest.raises(ValueError, match="not both"):
        vkml.InferenceSession(data, ["cpu"], providers=["CPUExecutionProvider"])
    with pytest.raises(TypeError, match="not a string"):
        vkml.InferenceSession(data, providers="CPUExecutionProvider")
    with pytest.raises(ValueError, match="no Vulkan device 99"):
        vkml.InferenceSession(data, providers=[("VulkanExecutionProvider", {"device_id": 99})])


def test_vulkan_provider_with_device_id(gpu):
    idx = gpu.split(":")[1]
    s = vkml.InferenceSession(_model(), providers=["VulkanExecutionProvider", "CPUExecutionProvider"],
                              provider_options=[{"device_id": idx}, {}])
    assert s.devices == [gpu, "cpu"]
    assert s.get_provider_options()["VulkanExecutionProvider"] == {"device_id": idx}
    x = np.ones((3, 4), np.float32)
    np.testing.assert_allclose(s.run(None, {"x": x})[0],
                               vkml.InferenceSession(_model(), devices=["cpu"]).run(None, {"x": x})[0], atol=1e-6)


def test_run_options_terminate_and_onnxruntimes_own_run_options():
    # Default devices on purpose: SessionOptions positionally, as onnxruntime code passes it
    # (it fills the devices slot, so devices= cannot be added to it).
    s = vkml.InferenceSession(_model(), vkml.SessionOptions())
    x = np.ones((1, 4), np.float32)
    ro = vkml.RunOptions()
    ro.terminate = True
    with pytest.raises(RuntimeError, match="terminate"):
        s.run(None, {"x": x}, ro)
    ort = pytest.importorskip("onnxruntime")
    oro = ort.RunOptions()
    oro.logid = "from-ort"
    assert s.run(None, {"x": x}, oro)[0].shape == (1, 3)
    oro.terminate = True
    with pytest.raises(RuntimeError, match="terminate"):
        s.run(None, {"x": x}, oro)
    assert s.end_profiling() == ""  # profiling off


def test_disable_all_turns_vkmls_rewrites_off(gpu):
    so = vkml.SessionOptions()
    x = np.ones((2, 4), np.float32)
    on = vkml.InferenceSession(_model(), [gpu], sess_options=so)
    on.run(None, {"x": x})
    assert any("fused" in r["reason"] for r in on.placement())
    so.graph_optimization_level = vkml.GraphOptimizationLevel.ORT_DISABLE_ALL
    off = vkml.InferenceSession(_model(), [gpu], sess_options=so)
    np.testing.assert_allclose(off.run(None, {"x": x})[0], on.run(None, {"x": x})[0], atol=1e-6)
    assert not any("fused" in r["reason"] for r in off.placement())


def test_sessions_pickle_by_model_and_options(tmp_path):
    """A session pickles as its model (a path as the path; bytes or a ModelProto as bytes) and
    its options; the copy answers like the original (issue #17)."""
    import pickle

    import onnx

    path = tmp_path / "m.onnx"
    data = _model(path)
    x = np.arange(8, dtype=np.float32).reshape(2, 4) / 8
    for src in (str(path), data, onnx.load_from_string(data)):
        so = vkml.SessionOptions()
        so.graph_optimization_level = vkml.GraphOptimizationLevel.ORT_DISABLE_ALL
        s = vkml.InferenceSession(src, sess_options=so, devices=["cpu"], executor="sequential")
        c = pickle.loads(pickle.dumps(s))
        assert c.devices == ["cpu"] and c is not s
        name = s.get_inputs()[0].name
        np.testing.assert_array_equal(c.run(None, {name: x})[0], s.run(None, {name: x})[0])
