"""Whole models against onnxruntime: on the GPU (nodes without kernels fall back to the CPU
and the placement report says so), on the CPU, and split GPU+CPU by a forced map.

Tolerances (float32): rtol 1e-4, atol 1e-5, and atol 1e-4 for the transformer block (two
LayerNorms, Softmax and Erf: GPU Erf/exp are polynomial approximations, sums run in another
order).
"""
import numpy as np
import pytest

import vkml
from _models import MODELS, mlp, node_names, ort_run, transformer_block
from vkml.kernels import get_kernel

TOL = {"mlp": (1e-4, 1e-5), "cnn": (1e-4, 1e-5), "block": (1e-4, 1e-4), "mnist12": (1e-4, 1e-5)}
FIRST = "first device that runs it"


def _session(model: bytes, mode: str, gpu: str, **kw) -> vkml.InferenceSession:
    if mode == "cpu":
        return vkml.InferenceSession(model, devices=["cpu"], **kw)
    if mode == "split":  # every other node on the CPU
        kw["placement"] = {n: "cpu" for n in node_names(model)[1::2]}
    return vkml.InferenceSession(model, devices=[gpu], **kw)


@pytest.mark.parametrize("mode", ["gpu", "cpu", "split"])
@pytest.mark.parametrize("name", list(MODELS))
def test_model_matches_onnxruntime(gpu, name, mode):
    build, make_feeds = MODELS[name]
    model = build()
    feeds = make_feeds(np.random.default_rng(7))
    want = ort_run(model, feeds)
    sess = _session(model, mode, gpu)
    for _ in range(2):  # the second run reuses the recorded slot
        got = sess.run(None, feeds)
        rtol, atol = TOL[name]
        for g, w in zip(got, want):
            assert g.shape == w.shape and g.dtype == w.dtype
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    rows = sess.placement()
    assert [r["node"] for r in rows] == node_names(model)
    forced = set(node_names(model)[1::2]) if mode == "split" else set()
    for r in rows:
        if mode == "cpu":
            assert r["device"] == "cpu"
        elif r["node"] in forced:
            assert (r["device"], r["reason"]) == ("cpu", "user's choice")
        elif get_kernel(r["op"]) is None:
            assert r["device"] == "cpu" and f"{gpu}: no GPU kernel for {r['op']}" in r["reason"], r
        elif r["device"] == gpu:
            assert r["reason"] == FIRST or (r["reason"].startswith("fused into ") and r["reason"].endswith(FIRST))
        else:  # a kernel exists but declined (or is broken): the reason names the GPU
            assert r["device"] == "cpu" and r["reason"].startswith(f"{gpu}: "), r


def test_mlp_is_one_command_buffer(gpu):
    sess = vkml.InferenceSession(mlp(), devices=[gpu])
    x = np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32)
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], ort_run(mlp(), {"x": x})[0], rtol=1e-4, atol=1e-5)
    assert all(r["device"] == gpu for r in sess.placement())
    units = sess._gpu.last.up.units
    assert [u.kind for u in units] == ["upload", "gpu", "readback"]
    # six nodes: MatMul + bias Add folded into one Gemm (compile/fold_bias.py), the first with its
    # Relu in its epilogue (compile/epilogue.py)
    assert [n.op_type for n in units[1].nodes] == ["FusedGemm", "Gemm", "Tanh", "MatMul"]


def test_shapes_per_run_and_plan_cache(gpu):
    model = mlp()
    sess = vkml.InferenceSession(model, devices=[gpu])
    rng = np.random.default_rng(1)
    for n in [3, 5, 3, 1, 9, 2, 4, 6, 7, 8, 10, 11, 3]:  # more signatures than the cache holds
        x = rng.standard_normal((n, 16)).astype(np.float32)
        np.testing.assert_allclose(sess.run(None, {"x": x})[0], ort_run(model, {"x": x})[0], rtol=1e-4, atol=1e-5)
    assert sess.placement({"x": [2, 16]})[0]["device"] == gpu


def test_tensors_stay_on_the_gpu(gpu):
    model = transformer_block()
    sess = vkml.InferenceSession(model, devices=[gpu])
    x = np.random.default_rng(2).standard_normal((1, 4, 16)).astype(np.float32)
    t = vkml.Tensor.from_numpy(x, device=gpu)
    assert (t.shape, t.dtype, t.device) == ((1, 4, 16), np.float32, gpu)
    y1, = sess.run(None, {"x": t}, output_device=gpu)
    assert isinstance(y1, vkml.Tensor) and y1.device == gpu and y1.shape == (1, 4, 16)
    y2, = sess.run(None, {"x": y1}, run_options={"output_device": gpu})  # feed a result back
    w1, = ort_run(model, {"x": x})
    w2, = ort_run(model, {"x": w1})
    np.testing.assert_allclose(y1.numpy(), w1, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(y2.numpy(), w2, rtol=1e-4, atol=2e-4)
    # Later runs of the same slot do not disturb tensors handed out before.
    sess.run(None, {"x": np.zeros_like(x)}, output_device=gpu)
    np.testing.assert_allclose(y1.numpy(), w1, rtol=1e-4, atol=1e-4)
    # The same input tensor, rewritten between runs: its copy into the slot is recorded once
    # and picks up the new contents every run.
    x2 = (x * -0.5).astype(np.float32)
    for k in range(3):
        t.device_tensor.write(x if k % 2 == 0 else x2)
        y, = sess.run(None, {"x": t}, output_device=gpu)
        np.testing.assert_allclose(y.numpy(), ort_run(model, {"x": x if k % 2 == 0 else x2})[0],
                                   rtol=1e-4, atol=1e-4)
    copies = [len(s.copy_in) for s in sess._gpu.last.pool._free]  # every slot is back
    assert copies and max(copies) <= 2, copies  # one per source fed (t, y1), not one per run
    # CPU-only sessions take and give Tensors too.
    cpu = vkml.InferenceSession(model, devices=["cpu"])
    y3, = cpu.run(None, {"x": t}, output_device=gpu)
    assert y3.device == gpu
    np.testing.assert_allclose(y3.numpy(), w1, rtol=1e-4, atol=1e-4)
    y4, = cpu.run(None, {"x": vkml.Tensor.from_numpy(x)})
    np.testing.assert_allclose(y4, w1, rtol=1e-4, atol=1e-4)


def test_memory_cap_spills_to_the_cpu(gpu):
    model = mlp(hidden=256)
    x = np.random.default_rng(3).standard_normal((64, 16)).astype(np.float32)
    want = ort_run(model, {"x": x})[0]
    # 64 x 256 floats are 64 KiB per activation; W2 alone is 256 KiB.
    for cap in (100 << 10, 0):
        sess = vkml.InferenceSession(model, devices=[gpu], memory_caps={gpu: cap})
        np.testing.assert_allclose(sess.run(None, {"x": x})[0], want, rtol=1e-4, atol=1e-4)
        rows = sess.placement()
        spilled = [r for r in rows if r["device"] == "cpu"]
        assert spilled and all("budget full" in r["reason"] for r in spilled), rows
        if cap == 0:
            assert len(spilled) == len(rows)
        else:
            assert rows[0]["device"] == gpu
    roomy = vkml.InferenceSession(model, devices=[gpu], memory_caps={gpu: 16 << 20})
    roomy.run(None, {"x": x})
    assert all(r["device"] == gpu for r in roomy.placement())


def test_bad_options_are_clear_errors(gpu):
    model = mlp()
    with pytest.raises(ValueError, match="memory_caps names 'vulkan:99'"):
        vkml.InferenceSession(model, devices=[gpu], memory_caps={"vulkan:99": 10})
    with pytest.raises(ValueError, match="number of bytes"):
        vkml.InferenceSession(model, devices=[gpu], memory_caps={gpu: -1})
    with pytest.raises(ValueError, match="unknown node"):
        vkml.InferenceSession(model, devices=[gpu], placement={"nope": "cpu"})
    with pytest.raises(ValueError, match="does not use"):
        vkml.InferenceSession(model, devices=["cpu"], placement={"mm1": gpu})
    sess = vkml.InferenceSession(model, devices=[gpu])
    x = np.zeros((2, 16), np.float32)
    with pytest.raises(ValueError, match="output_device"):
        sess.run(None, {"x": x}, output_device="gpu0")
    with pytest.raises(ValueError, match="no run yet"):
        sess.placement()
    with pytest.raises(ValueError, match="dimension 1"):
        sess.run(None, {"x": vkml.Tensor.from_numpy(np.zeros((2, 3), np.float32), gpu)})
    block = transformer_block()
    forced = vkml.InferenceSession(block, devices=[gpu], placement={"ln1": gpu})
    if get_kernel("LayerNormalization") is None:
        with pytest.raises(ValueError, match="cannot run it"):
            forced.run(None, {"x": np.zeros((1, 2, 16), np.float32)})


def test_default_devices_skip_cpu_type_vulkan():
    # lavapipe (a CPU-type Vulkan device) is never picked unless named.
    cpu_like = {d.name for d in vkml.devices() if d.kind == "cpu"}
    sess = vkml.InferenceSession(mlp())
    assert sess.devices[-1] == "cpu"
    assert not (set(sess.devices[:-1]) & cpu_like)


def test_a_failing_run_leaves_the_session_usable(gpu):
    from onnx import TensorProto as T
    from onnx import helper as h

    nodes = [h.make_node("Relu", ["x"], ["r"], name="relu"),
             h.make_node("Gather", ["r", "idx"], ["g"], name="gather", axis=0),
             h.make_node("Neg", ["g"], ["y"], name="neg")]
    g = h.make_graph(nodes, "fail", [h.make_tensor_value_info("x", T.FLOAT, [4, 3]),
                                     h.make_tensor_value_info("idx", T.INT64, [2])],
                     [h.make_tensor_value_info("y", T.FLOAT, [2, 3])])
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8).SerializeToString()
    sess = vkml.InferenceSession(model, devices=[gpu], placement={"gather": "cpu"}, max_slots=1)
    x = np.arange(12, dtype=np.float32).reshape(4, 3) - 6
    with pytest.raises(Exception, match="gather"):
        sess.run(None, {"x": x, "idx": np.array([0, 9], np.int64)})
    y, = sess.run(None, {"x": x, "idx": np.array([3, 1], np.int64)})
    np.testing.assert_array_equal(y, -np.maximum(x, 0)[[3, 1]])
    assert [r["device"] for r in sess.placement()] == [gpu, "cpu", gpu]


def test_shape_arithmetic_is_planned_away(gpu):
    """Shape -> Gather -> Concat -> Reshape: the target is constant for each input shape, so
    the Reshape runs on the GPU (as a view) and the shape nodes are evaluated while planning."""
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    n = h.make_node
    nodes = [n("Relu", ["x"], ["r"], name="relu"),
             n("Shape", ["x"], ["s"], name="shape"),
             n("Gather", ["s", "zero"], ["b"], name="batch", axis=0),
             n("Concat", ["b", "minus1"], ["target"], name="target", axis=0),
             n("Reshape", ["r", "target"], ["flat"], name="flatten"),
             n("Neg", ["flat"], ["y"], name="neg")]
    g = h.make_graph(nodes, "dyn", [h.make_tensor_value_info("x", T.FLOAT, ["N", "C", 4])],
                     [h.make_tensor_value_info("y", T.FLOAT, ["N", None])],
                     [nh.from_array(np.array([0], np.int64), "zero"), nh.from_array(np.array([-1], np.int64), "minus1")])
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8).SerializeToString()
    sess = vkml.InferenceSession(model, devices=[gpu])
    for shape in [(2, 3, 4), (5, 1, 4)]:
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        y, = sess.run(None, {"x": x})
        np.testing.assert_array_equal(y, -np.maximum(x, 0).reshape(shape[0], -1))
        rows = {r["node"]: r for r in sess.placement()}
        assert all(rows[k]["device"] == gpu for k in ("relu", "flatten", "neg")), rows
        assert all(rows[k]["reason"].startswith("constant for these input shapes") for k in ("shape", "batch", "target"))


def test_shape_like_inputs_fed_at_run_time_go_to_the_gpu(gpu):
    """A Reshape target fed by the caller: the plan is made for its value, so the Reshape and
    what follows run on the GPU; another value gets its own plan and the right answer."""
    from onnx import TensorProto as T
    from onnx import helper as h

    g = h.make_graph([h.make_node("Relu", ["x"], ["r"], name="relu"),
                      h.make_node("Reshape", ["r", "shape"], ["y0"], name="reshape"),
                      h.make_node("Softmax", ["y0"], ["y"], name="softmax", axis=-1)], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [2, 6]),
                      h.make_tensor_value_info("shape", T.INT64, [2])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)])
    # (ir_version 8: onnxruntime builds older than the onnx package refuse its newest IR)
    blob = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8).SerializeToString()
    sess = vkml.InferenceSession(blob, devices=[gpu])
    x = np.random.default_rng(3).standard_normal((2, 6)).astype(np.float32)
    for shape in ([3, 4], [4, 3], [3, 4], [12, 1]):
        s = np.array(shape, np.int64)
        got, = sess.run(None, {"x": x, "shape": s})
        want, = ort_run(blob, {"x": x, "shape": s})
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        assert {r["node"]: r["device"] for r in sess.placement()} == {"relu": gpu, "reshape": gpu, "softmax": gpu}
    assert len(sess._gpu._plans) == 3  # one plan per value, reused when a value comes back


@pytest.mark.parametrize("executor", ["sequential", "parallel"])  # parallel: the waiter thread's deadline
def test_a_gpu_that_does_not_finish_in_time_is_an_error_not_a_hang(gpu, gpu_on_cpu, vkml_env, executor):
    """VKML_GPU_TIMEOUT: the run raises TimeoutError naming the device; its slot is retired
    (kept until the GPU is done with it) and the session goes on working. The setting is read
    per run, so the session made before it changed sees it."""
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper

    # Long enough to outlast a wait's first spin: an H100 does two 384^3 products in microseconds.
    n = 384 if gpu_on_cpu else 2048
    w = np.random.default_rng(4).standard_normal((n, n)).astype(np.float32)
    g = h.make_graph([h.make_node("MatMul", ["x", "w"], ["y0"]), h.make_node("MatMul", ["y0", "w"], ["y"])], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [n, n])], [h.make_tensor_value_info("y", T.FLOAT, [n, n])],
                     [numpy_helper.from_array(w, "w")])
    blob = h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()
    sess = vkml.InferenceSession(blob, devices=[gpu], executor=executor)
    x = np.random.default_rng(5).standard_normal((n, n)).astype(np.float32)
    want = (x.astype(np.float64) @ w @ w).astype(np.float32)
    sess.run(None, {"x": x})  # plan and pipelines first
    assert (sess._gpu.last.sched is not None) == (executor == "parallel")
    vkml_env(VKML_GPU_TIMEOUT="1e-9")
    with pytest.raises(TimeoutError, match="did not finish in time"):
        for _ in range(20):  # (a run the GPU finishes before the first look does not time out)
            sess.run(None, {"x": x})
    vkml_env(VKML_GPU_TIMEOUT="0")  # no limit
    got, = sess.run(None, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-2)
    sess.run(None, {"x": x})
    assert not sess._gpu.last.pool._retired  # the timed-out slot was let go once its GPU work ended


def test_tensor_feeds_are_checked_once_per_signature(gpu):
    """Device-resident feeds take the same shortcut as arrays (their checks are dtype and
    shape): a second run skips them, a new shape or dtype is still checked."""
    sess = vkml.InferenceSession(mlp(), devices=[gpu])
    x = np.random.default_rng(5).standard_normal((3, 16)).astype(np.float32)
    t = vkml.Tensor.from_numpy(x, device=gpu)
    want = sess.run(None, {"x": x})[0]
    for _ in range(2):
        np.testing.assert_allclose(sess.run(None, {"x": t}, output_device=gpu)[0].numpy(), want, rtol=1e-6)
    with pytest.raises(ValueError, match="dimension 1 must be 16"):
        sess.run(None, {"x": vkml.Tensor.from_numpy(np.zeros((3, 5), np.float32), device=gpu)})
    with pytest.raises(ValueError, match=r"expected tensor\(float\), got tensor\(int64\)"):
        sess.run(None, {"x": vkml.Tensor.from_numpy(np.zeros((3, 16), np.int64), device=gpu)})
    np.testing.assert_allclose(sess.run(None, {"x": vkml.Tensor.from_numpy(x, device="cpu")})[0], want, rtol=1e-6)
