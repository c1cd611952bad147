"""Epilogue fusion (vkml/compile/epilogue.py): Conv [+ residual Add] [+ Relu] runs as one GPU
node and gives what the separate ops give, bit for bit (float32), on the GPU and the CPU."""
from __future__ import annotations

import math

import numpy as np
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import vkml
import vkml.compile.fusion

from _models import resnet_like


def _model(kernel: int, stride: int, relu_first: bool = False, dtype=np.float32) -> bytes:
    """Two branches from x: conv a (3x3 or 1x1) -> Add(b) -> Relu, where b is a strided projection
    computed after a; a second conv -> Relu; plus a Conv -> Relu -> Add that must not fuse the Add."""
    rng = np.random.default_rng(kernel * 10 + stride)
    w = lambda *s: nh.from_array((rng.standard_normal(s) * 0.3).astype(dtype), f"w{len(inits)}")
    inits = []
    for shape in ((8, 4, kernel, kernel), (8,), (8, 4, 1, 1), (8, 8, 3, 3)):
        inits.append(w(*shape))
    p = kernel // 2
    nodes = [h.make_node("Conv", ["x", "w0", "w1"], ["a"], name="conv_a", pads=[p] * 4, strides=[stride] * 2),
             h.make_node("Conv", ["x", "w2"], ["b"], name="proj", strides=[stride] * 2),
             h.make_node("Add", ["b", "a"], ["s"], name="add"),
             h.make_node("Relu", ["s"], ["r"], name="relu"),
             h.make_node("Conv", ["r", "w3"], ["c"], name="conv_c", pads=[1] * 4),
             h.make_node("Relu", ["c"], ["rc"], name="relu_c"),
             h.make_node("Add", ["rc", "r"], ["y"], name="add_after_relu")]
    et = T.FLOAT if dtype == np.float32 else T.FLOAT16
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", et, [1, 4, 9, 9])],
                     [h.make_tensor_value_info("y", et, None)], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()


def _run(model, devices, x, fuse, vkml_env):
    vkml_env(VKML_FUSE="1" if fuse else "0")
    s = vkml.InferenceSession(model, devices=devices)
    return s.run(None, {"x": x})[0], s.placement()


def test_fused_conv_bitwise_equal_to_separate_ops(gpu, vkml_env):
    """float32 bit for bit; float16 too on lavapipe, within a few float16 ulps where a driver
    keeps float(float16_t(x)) unrounded (as test_activations_fuse_into_gemms)."""
    for dtype in (np.float32, np.float16):
        x = np.random.default_rng(1).standard_normal((1, 4, 9, 9)).astype(dtype)
        x[0, 0, :3, :3] = -0.0
        for kernel, stride in ((3, 1), (1, 1), (3, 2)):
            model = _model(kernel, stride, dtype=dtype)
            ref, _ = _run(model, [gpu], x, False, vkml_env)
            got, report = _run(model, [gpu], x, True, vkml_env)
            fused = {r["node"]: r["reason"] for r in report if "fused into" in r["reason"]}
            assert {"add", "relu"} <= set(fused) and "relu_c" in fused and "add_after_relu" not in fused, fused
            assert all(r["device"] == gpu for r in report)
            if dtype == np.float32:
                np.testing.assert_array_equal(got.view(np.uint32), ref.view(np.uint32))
            else:
                np.testing.assert_allclose(got.astype(np.float32), ref.astype(np.float32), rtol=4e-3, atol=4e-3)
            cpu_ref, _ = _run(model, ["cpu"], x, False, vkml_env)
            tol = 1e-5 if dtype == np.float32 else 2e-2
            np.testing.assert_allclose(got.astype(np.float32), cpu_ref.astype(np.float32), rtol=tol, atol=tol)


def test_fused_conv_on_the_cpu_replays_the_ops():
    """FusedConv's CPU run is the original operators in order (exactly)."""
    from vkml.compile.epilogue import fuse_epilogues
    from vkml.ops.bind import load_model

    g = load_model(_model(3, 2)).graph
    weights = load_model(_model(3, 2)).weights
    nodes, fused = fuse_epilogues(g.nodes, g.values, g.outputs)
    assert sorted(fused) == ["conv_a+add+relu", "conv_c+relu_c"]
    assert [n.name for n in nodes] == ["proj", "conv_a+add+relu", "conv_c+relu_c", "add_after_relu"]
    env = {"x": np.random.default_rng(3).standard_normal((1, 4, 9, 9)).astype(np.float32)}
    env.update({k: weights[g.weight_key(k)] for k in g.constants})
    ref = dict(env)
    for n in g.nodes:
        ref.update(zip(n.outputs, n.op.run(*[ref[i] if i else None for i in n.inputs])))
    for n in nodes:
        env.update(zip(n.outputs, n.op.run(*[env[i] if i else None for i in n.inputs])))
    np.testing.assert_array_equal(env["y"], ref["y"])


def test_resnet_like_fuses_every_relu_and_residual(gpu):
    """BatchNorm folded (as torch exports): every Relu and residual Add rides on a conv."""
    from _models import ort_run

    model = resnet_like(bn=False)
    s = vkml.InferenceSession(model, devices=[gpu, "cpu"])
    report = s.placement()
    assert all(r["device"] == gpu for r in report)
    for r in report:
        if r["op"] in ("Add", "Relu"):
            assert "fused into" in r["reason"], r
    x = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)
    (ref,) = ort_run(model, {"x": x})
    np.testing.assert_allclose(s.run(None, {"x": x})[0], ref, rtol=1e-4, atol=1e-4 * float(np.abs(ref).max()))


def test_batchnorm_folds_into_the_conv_before_it(gpu):
    """resnet_like keeps its BatchNormalization nodes (as opset-9 zoo models do): each folds into
    its Conv (weights scaled in float64, rounded once), so Relu and the residual Add fuse too;
    the result stays within float32 rounding of onnxruntime's."""
    from _models import ort_run

    model = resnet_like(bn=True)
    s = vkml.InferenceSession(model, devices=[gpu, "cpu"])
    report = s.placement()
    assert all(r["device"] == gpu for r in report)
    for r in report:
        if r["op"] in ("BatchNormalization", "Add", "Relu"):
            assert "fused into" in r["reason"], r
    x = np.random.default_rng(3).standard_normal((1, 3, 32, 32)).astype(np.float32)
    (ref,) = ort_run(model, {"x": x})
    np.testing.assert_allclose(s.run(None, {"x": x})[0], ref, rtol=1e-4, atol=1e-4 * float(np.abs(ref).max()))


def test_batchnorm_not_folded_when_its_input_is_read_elsewhere(gpu):
    rng = np.random.default_rng(0)
    inits = [nh.from_array((rng.standard_normal(s) * 0.3).astype(np.float32), n)
             for n, s in (("w", (4, 3, 3, 3)), ("sc", (4,)), ("bb", (4,)), ("mu", (4,)))]
    inits.append(nh.from_array(np.abs(rng.standard_normal(4)).astype(np.float32) + 0.5, "var"))
    nodes = [h.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1] * 4),
             h.make_node("BatchNormalization", ["c", "sc", "bb", "mu", "var"], ["n"], name="bn"),
             h.make_node("Add", ["n", "c"], ["y"], name="add")]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 6, 6])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)], inits)
    from onnx import helper

    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()
    s = vkml.InferenceSession(model, devices=[gpu, "cpu"])
    rows = {r["node"]: r for r in s.placement()}
    assert "fused" not in rows["bn"]["reason"]
    x = rng.standard_normal((1, 3, 6, 6)).astype(np.float32)
    ref = vkml.InferenceSession(model, devices=["cpu"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(s.run(None, {"x": x})[0], ref, rtol=1e-5, atol=1e-5)


def _bias_model(c_shape, mm_c_shape, conv_bias: bool = False, extra_reader: bool = False) -> bytes:
    """mnist-12's pattern: Conv (bias as a separate Add of c) -> Relu -> Reshape -> MatMul -> Add."""
    rng = np.random.default_rng(len(c_shape) + len(mm_c_shape))
    arr = lambda n, *s: nh.from_array((rng.standard_normal(s) * 0.3).astype(np.float32), n)
    inits = [arr("w", 8, 3, 3, 3), arr("c", *c_shape), arr("wm", 8 * 6 * 6, 10), arr("cm", *mm_c_shape),
             arr("b", 8), nh.from_array(np.array([1, -1], np.int64), "shape")]
    nodes = [h.make_node("Conv", ["x", "w", "b"] if conv_bias else ["x", "w"], ["cv"], name="conv", pads=[1] * 4),
             h.make_node("Add", ["c", "cv"], ["a"], name="bias_add"),
             h.make_node("Relu", ["a"], ["r"], name="relu"),
             h.make_node("Reshape", ["r", "shape"], ["f"], name="flat"),
             h.make_node("MatMul", ["f", "wm"], ["m"], name="fc"),
             h.make_node("Add", ["m", "cm"], ["y"], name="fc_add")]
    outs = [h.make_tensor_value_info("y", T.FLOAT, None)]
    if extra_reader:
        outs.append(h.make_tensor_value_info("cv", T.FLOAT, None))
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 6, 6])], outs, inits)
    # (IR 8: the onnxruntime it is checked against may be older than this onnx)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8).SerializeToString()


def test_constant_bias_adds_fold_into_conv_and_matmul(gpu):
    """Conv without B + Add of a per-channel constant becomes the Conv's bias (and its Relu
    then fuses too); a 2-D MatMul + constant Add becomes a Gemm: two dispatches instead of five."""
    from _models import ort_run

    x = np.random.default_rng(7).standard_normal((1, 3, 6, 6)).astype(np.float32)
    for c_shape, mm_c, conv_bias in (((8, 1, 1), (10,), False), ((1, 8, 1, 1), (1, 10), True), ((1,), (1, 1), False)):
        model = _bias_model(c_shape, mm_c, conv_bias)
        s = vkml.InferenceSession(model, devices=[gpu, "cpu"])
        rows = {r["node"]: r for r in s.placement()}
        assert all(r["device"] == gpu for r in rows.values())
        for n in ("bias_add", "relu", "fc_add"):
            assert "fused into" in rows[n]["reason"], (c_shape, rows[n])
        (ref,) = ort_run(model, {"x": x})
        np.testing.assert_allclose(s.run(None, {"x": x})[0], ref, rtol=1e-5, atol=1e-5)


def test_adds_that_are_not_biases_stay_adds(gpu):
    """An Add varying along the image, a MatMul output read twice: left alone, still right."""
    from _models import ort_run

    x = np.random.default_rng(8).standard_normal((1, 3, 6, 6)).astype(np.float32)
    for c_shape, mm_c, extra in (((8, 6, 6), (10,), False), ((8, 1, 1), (10,), True), ((1, 8, 1, 6), (10,), False)):
        model = _bias_model(c_shape, mm_c, extra_reader=extra)
        s = vkml.InferenceSession(model, devices=[gpu, "cpu"])
        rows = {r["node"]: r for r in s.placement()}
        assert "fused into conv" not in rows["bias_add"]["reason"], rows["bias_add"]
        refs = ort_run(model, {"x": x})
        for got, ref in zip(s.run(None, {"x": x}), refs):
            np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_depthwise_and_single_channel_convs_take_the_epilogue_too(gpu, vkml_env):
    """The direct route (one input channel per group: depthwise convs, and mnist's first conv
    on a 1-channel image) applies residual Add and Relu in its own dispatch, bit for bit."""
    rng = np.random.default_rng(11)
    arr = lambda n, *s: nh.from_array((rng.standard_normal(s) * 0.3).astype(np.float32), n)
    nodes = [h.make_node("Conv", ["x", "wd", "bd"], ["d"], name="dw", group=4, pads=[1] * 4),
             h.make_node("Add", ["d", "x"], ["s"], name="res"),
             h.make_node("Relu", ["s"], ["r"], name="relu"),
             h.make_node("Conv", ["x1", "w1"], ["c1"], name="one_channel", pads=[2] * 4),
             h.make_node("Relu", ["c1"], ["y1"], name="relu1")]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, 4, 7, 7]),
                                  h.make_tensor_value_info("x1", T.FLOAT, [1, 1, 8, 8])],
                     [h.make_tensor_value_info("r", T.FLOAT, None), h.make_tensor_value_info("y1", T.FLOAT, None)],
                     [arr("wd", 4, 1, 3, 3), arr("bd", 4), arr("w1", 6, 1, 5, 5)])
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()
    feeds = {"x": rng.standard_normal((1, 4, 7, 7)).astype(np.float32),
             "x1": rng.standard_normal((1, 1, 8, 8)).astype(np.float32)}
    vkml_env(VKML_FUSE="0")
    ref = vkml.InferenceSession(model, devices=[gpu]).run(None, feeds)
    vkml_env(VKML_FUSE="1")
    s = vkml.InferenceSession(model, devices=[gpu])
    fused = {r["node"] for r in s.placement() if "fused into" in r["reason"]}
    assert {"res", "relu", "relu1"} <= fused, s.placement()
    for got, want in zip(s.run(None, feeds), ref):
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_clip_rides_on_every_conv_route(gpu, vkml_env):
    """ReLU6 as torch exports it (Clip with constant min/max inputs; and the opset-6 attribute
    form): one dispatch on the implicit-GEMM, pointwise and depthwise routes, bit for bit, NaN
    kept as Clip keeps it."""
    rng = np.random.default_rng(12)
    arr = lambda n, *s: nh.from_array((rng.standard_normal(s) * 2).astype(np.float32), n)
    for opset in (17, 6):
        def clip(i, o, name):
            if opset >= 11:
                return h.make_node("Clip", [i, "lo", "hi"], [o], name=name)
            return h.make_node("Clip", [i], [o], name=name, min=0.0, max=6.0)
        nodes = [h.make_node("Conv", ["x", "w3", "b3"], ["a"], name="c3", pads=[1] * 4), clip("a", "ra", "k3"),
                 h.make_node("Conv", ["ra", "w1"], ["p"], name="c1"), clip("p", "rp", "k1"),
                 h.make_node("Conv", ["rp", "wd"], ["d"], name="cd", group=8, pads=[1] * 4), clip("d", "y", "kd")]
        inits = [arr("w3", 8, 4, 3, 3), arr("b3", 8), arr("w1", 8, 8, 1, 1), arr("wd", 8, 1, 3, 3)]
        if opset >= 11:
            inits += [nh.from_array(np.array(0.0, np.float32), "lo"), nh.from_array(np.array(6.0, np.float32), "hi")]
        g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, 4, 6, 6])],
                         [h.make_tensor_value_info("y", T.FLOAT, None)], inits)
        model = h.make_model(g, opset_imports=[h.make_opsetid("", opset)], ir_version=8).SerializeToString()
        x = rng.standard_normal((1, 4, 6, 6)).astype(np.float32)
        x[0, 1, 2, 2] = np.nan
        vkml_env(VKML_FUSE="0")
        ref = vkml.InferenceSession(model, devices=[gpu]).run(None, {"x": x})[0]
        vkml_env(VKML_FUSE="1")
        s = vkml.InferenceSession(model, devices=[gpu])
        fused = {r["node"] for r in s.placement() if "fused into" in r["reason"]}
        assert {"k3", "k1", "kd"} <= fused, s.placement()
        got = s.run(None, {"x": x})[0]
        assert np.isnan(got).any() and float(np.nanmax(got)) <= 6.0
        np.testing.assert_array_equal(got.view(np.uint32), ref.view(np.uint32))
        cpu = vkml.InferenceSession(model, devices=["cpu"]).run(None, {"x": x})[0]
        np.testing.assert_allclose(got, cpu, rtol=1e-5, atol=1e-5)


def test_silu_rides_on_its_conv(gpu, vkml_env):
    """SiLU as exporters write it (Sigmoid, then Mul of x with it; either operand order) fuses
    into the conv on the GEMM and depthwise routes, bit for bit; with a third reader of the
    conv output it must not."""
    rng = np.random.default_rng(13)
    arr = lambda n, *s: nh.from_array((rng.standard_normal(s) * 0.5).astype(np.float32), n)
    nodes = [h.make_node("Conv", ["x", "w3", "b3"], ["a"], name="c3", pads=[1] * 4),
             h.make_node("Sigmoid", ["a"], ["sa"], name="s3"),
             h.make_node("Mul", ["a", "sa"], ["ra"], name="m3"),
             h.make_node("Conv", ["ra", "wd"], ["d"], name="cd", group=8, pads=[1] * 4),
             h.make_node("Sigmoid", ["d"], ["sd"], name="sd"),
             h.make_node("Mul", ["sd", "d"], ["rd"], name="md"),
             h.make_node("Conv", ["rd", "w1"], ["p"], name="c1"),
             h.make_node("Sigmoid", ["p"], ["sp"], name="sp"),
             h.make_node("Mul", ["p", "sp"], ["mp"], name="mp"),
             h.make_node("Add", ["mp", "p"], ["y"], name="third_reader")]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, 4, 6, 6])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)],
                     [arr("w3", 8, 4, 3, 3), arr("b3", 8), arr("wd", 8, 1, 3, 3), arr("w1", 8, 8, 1, 1)])
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()
    x = rng.standard_normal((1, 4, 6, 6)).astype(np.float32) * 3
    vkml_env(VKML_FUSE="0")
    ref = vkml.InferenceSession(model, devices=[gpu]).run(None, {"x": x})[0]
    vkml_env(VKML_FUSE="1")
    s = vkml.InferenceSession(model, devices=[gpu])
    rows = {r["node"]: r["reason"] for r in s.placement()}
    assert all("fused into c3+s3+m3" in rows[n] for n in ("s3", "m3")), rows
    assert all("fused into cd+sd+md" in rows[n] for n in ("sd", "md")), rows
    assert "fused into c1+sp" not in rows["sp"], rows
    got = s.run(None, {"x": x})[0]
    np.testing.assert_array_equal(got.view(np.uint32), ref.view(np.uint32))
    cpu = vkml.InferenceSession(model, devices=["cpu"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, cpu, rtol=1e-5, atol=1e-5)
    # The fused nodes' CPU replay gives the separate NumPy ops' result exactly (the Python path:
    # a native program's GEMMs and Sigmoid are its own, equal within float32 rounding).
    vkml_env(VKML_CPU_NATIVE="0")
    cpu = vkml.InferenceSession(model, devices=["cpu"]).run(None, {"x": x})[0]
    from vkml.compile.epilogue import fuse_epilogues
    from vkml.ops.bind import load_model

    m = load_model(model)
    nodes_f, fused = fuse_epilogues(m.graph.nodes, m.graph.values, m.graph.outputs)
    assert {"c3+s3+m3", "cd+sd+md"} <= set(fused)
    env = {"x": x, **{k: m.weights[m.graph.weight_key(k)] for k in m.graph.constants}}
    for n in nodes_f:
        env.update(zip(n.outputs, n.op.run(*[env[i] if i else None for i in n.inputs])))
    np.testing.assert_array_equal(env["y"], cpu)


def _pool_model(act: str, h_: int, w_: int, bias: bool, dtype=np.float32, ceil: int = 0, k: int = 2) -> bytes:
    """x -> small Conv [-> act] -> MaxPool k x k stride k -> y (mnist-12's shape of layer)."""
    rng = np.random.default_rng(h_ * 7 + w_)
    et = T.FLOAT16 if dtype == np.float16 else T.FLOAT
    inits = [nh.from_array((rng.standard_normal((6, 3, 3, 3)) * 0.4).astype(dtype), "w")]
    ins = ["x", "w"]
    if bias:
        inits.append(nh.from_array(rng.standard_normal(6).astype(dtype), "b"))
        ins.append("b")
    nodes = [h.make_node("Conv", ins, ["c"], name="conv", pads=[1] * 4)]
    last = "c"
    if act == "relu":
        nodes.append(h.make_node("Relu", ["c"], ["a"], name="act"))
        last = "a"
    elif act == "clip":
        nodes.append(h.make_node("Clip", ["c"], ["a"], name="act", min=-0.5, max=0.75))
        last = "a"
    nodes.append(h.make_node("MaxPool", [last], ["y"], name="pool", kernel_shape=[k, k], strides=[k, k],
                             ceil_mode=ceil))
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", et, [2, 3, h_, w_])],
                     [h.make_tensor_value_info("y", et, None)], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 10 if act == "clip" else 17)]).SerializeToString()


def test_max_pool_fuses_into_small_convs(gpu, vkml_env):
    """Conv [-> Relu | Clip] -> MaxPool k x k / k (k = 2, 3) is one GPU dispatch
    (shaders/conv_small.comp with POOL = k) and gives what the separate ops give, bit for bit,
    odd sizes and NaN included."""
    rng = np.random.default_rng(3)
    for act, k in (("relu", 2), ("clip", 2), ("none", 2), ("relu", 3), ("none", 3)):
        for (hh, ww), bias, dtype in (((8, 8), True, np.float32), ((7, 9), False, np.float32),
                                      ((6, 5), True, np.float32)):  # (epilogues fuse in float32 only)
            model = _pool_model(act, hh, ww, bias, dtype, k=k)
            x = rng.standard_normal((2, 3, hh, ww)).astype(dtype)
            x[1, 0, 2, 2] = np.nan  # NaN wins in max pooling, as np.maximum
            ref, _ = _run(model, [gpu], x, False, vkml_env)
            got, report = _run(model, [gpu], x, True, vkml_env)
            rows = {r["node"]: r for r in report}
            assert "fused into" in rows["pool"]["reason"], rows
            (pipes,) = {str(r["pipelines"]) for r in report if r.get("pipelines")}  # each original names the one
            assert [p["shader"] for p in rows["pool"]["pipelines"]] == [f"conv_small_{'f16' if dtype == np.float16 else 'f32'}"]
            assert got.shape == ref.shape == (2, 6, hh // k, ww // k)
            assert np.isnan(got).any()
            np.testing.assert_array_equal(got, ref)
            x[1, 0, 2, 2] = 0  # (GPU and CPU Relu/Clip of NaN differ apart from pooling)
            got, _ = _run(model, [gpu], x, True, vkml_env)
            cpu_ref, _ = _run(model, ["cpu"], x, True, vkml_env)  # the CPU runs FusedConv's replay
            tol = 2e-3 if dtype == np.float16 else 1e-5
            np.testing.assert_allclose(got.astype(np.float32), cpu_ref.astype(np.float32), rtol=tol, atol=tol)


def test_max_pool_with_ceil_mode_on_odd_sizes_does_not_fuse(gpu, vkml_env):
    model = _pool_model("relu", 7, 7, True, ceil=1)
    x = np.random.default_rng(4).standard_normal((2, 3, 7, 7)).astype(np.float32)
    got, report = _run(model, [gpu], x, True, vkml_env)
    assert not any("fused into" in r["reason"] for r in report if r["node"] == "pool")
    ref, _ = _run(model, ["cpu"], x, False, vkml_env)
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)


def _gemm_model(kind: str, dtype, m: int = 5, k: int = 24, n: int = 40) -> bytes:
    """A MatMul/Gemm and what may follow it: kind is bias_relu (MatMul + constant Add + Relu,
    which fold_bias makes a Gemm), gemm_relu (Gemm with C + Relu), residual_relu (MatMul + Add of a fed value + Relu),
    gemm_clip (Gemm transB + Clip), silu (MatMul + x * Sigmoid(x)), batched_relu (3-D MatMul)."""
    rng = np.random.default_rng(len(kind) * 3 + k)
    et = T.FLOAT16 if dtype == np.float16 else T.FLOAT
    arr = lambda *s: (rng.standard_normal(s) * 0.3).astype(dtype)  # noqa: E731
    a_shape = [2, m, k] if kind == "batched_relu" else [m, k]
    inputs = [h.make_tensor_value_info("a", et, a_shape)]
    inits, nodes = [], []
    if kind == "gemm_clip":
        inits += [nh.from_array(arr(n, k), "w"), nh.from_array(arr(n), "c")]
        nodes.append(h.make_node("Gemm", ["a", "w", "c"], ["y0"], name="mm", transB=1, alpha=0.5))
    elif kind == "gemm_relu":
        inits += [nh.from_array(arr(k, n), "w"), nh.from_array(arr(n), "c")]
        nodes.append(h.make_node("Gemm", ["a", "w", "c"], ["y0"], name="mm"))
    else:
        inits.append(nh.from_array(arr(k, n), "w"))
        nodes.append(h.make_node("MatMul", ["a", "w"], ["y0"], name="mm"))
    last = "y0"
    if kind == "bias_relu":
        inits.append(nh.from_array(arr(n), "bias"))
        nodes.append(h.make_node("Add", ["y0", "bias"], ["y1"], name="bias"))
        last = "y1"
    if kind == "residual_relu":
        inputs.append(h.make_tensor_value_info("r", et, [m, n]))
        nodes.append(h.make_node("Add", ["r", "y0"], ["y1"], name="add"))
        last = "y1"
    if kind in ("bias_relu", "gemm_relu", "residual_relu", "batched_relu"):
        nodes.append(h.make_node("Relu", [last], ["y"], name="act"))
    elif kind == "gemm_clip":
        nodes.append(h.make_node("Clip", [last], ["y"], name="act", min=-0.25, max=0.5))
    else:
        nodes += [h.make_node("Sigmoid", [last], ["s"], name="sig"), h.make_node("Mul", [last, "s"], ["y"], name="act")]
    g = h.make_graph(nodes, "g", inputs, [h.make_tensor_value_info("y", et, None)], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 10 if kind == "gemm_clip" else 17)]).SerializeToString()


def _fused_matches_separate(gpu, vkml_env, model: bytes, feeds: dict, what: str, exact: bool = True) -> dict:
    """Run `model` on `gpu` with fusion off and on and on the CPU: the fused run gives what the
    separate ops give on the GPU (bit for bit in float32 where `exact`, else within 2e-3; float16
    within a few ulps: where the separate GEMM stores straight from the cooperative matrices,
    their float16 conversion is the hardware's, not the epilogue's, H100: up to 5 ulps after the
    residual Add, bitwise on lavapipe) and what the CPU gives within float tolerances; every node
    on the GPU. Returns the fused session's placement by node."""
    dtype = next(iter(feeds.values())).dtype
    vkml_env(VKML_FUSE="0")
    ref = vkml.InferenceSession(model, devices=[gpu]).run(None, feeds)[0]
    vkml_env(VKML_FUSE="1")
    sess = vkml.InferenceSession(model, devices=[gpu])
    got = sess.run(None, feeds)[0]
    rows = {r["node"]: r for r in sess.placement()}
    assert all(r["device"] == gpu for r in rows.values()), rows
    if not exact:
        np.testing.assert_allclose(got.astype(np.float32), ref.astype(np.float32), rtol=2e-3, atol=2e-3, err_msg=what)
    elif dtype == np.float16:
        np.testing.assert_allclose(got.astype(np.float32), ref.astype(np.float32), rtol=4e-3, atol=4e-3, err_msg=what)
    else:
        np.testing.assert_array_equal(got.view(np.uint32), ref.view(np.uint32), err_msg=what)
    cpu = vkml.InferenceSession(model, devices=["cpu"]).run(None, feeds)[0]
    tol = 2e-2 if dtype == np.float16 else 1e-5
    np.testing.assert_allclose(got.astype(np.float32), cpu.astype(np.float32), rtol=tol, atol=tol, err_msg=what)
    return rows


def test_activations_fuse_into_gemms(gpu, vkml_env):
    """Gemm / MatMul [+ residual Add] [+ Relu | Clip | SiLU] is one GPU node (FusedGemm) that
    gives what the separate ops give on the GPU: bit for bit in float32, within a few ulps in
    float16 (on cooperative matrices where the device has them); the CPU replays the original
    ops."""
    rng = np.random.default_rng(5)
    for dtype in (np.float32, np.float16):
        for kind in ("bias_relu", "gemm_relu", "residual_relu", "gemm_clip", "silu", "batched_relu"):
            for m, k, n in ((5, 24, 40), (64, 256, 128)):
                model = _gemm_model(kind, dtype, m, k, n)
                feeds = {"a": rng.standard_normal([2, m, k] if kind == "batched_relu" else [m, k]).astype(dtype)}
                if kind == "residual_relu":
                    feeds["r"] = rng.standard_normal((m, n)).astype(dtype)
                # (bias_relu: fold_bias's folded bias is rounded once; it bounds that)
                rows = _fused_matches_separate(gpu, vkml_env, model, feeds, f"{kind} {np.dtype(dtype).name} {m}x{k}x{n}",
                                               exact=kind != "bias_relu")
                assert "fused into" in rows["act"]["reason"], (kind, dtype, rows)


def _transformer_model(kind: str, dtype, m: int, k: int, n: int) -> bytes:
    """What transformer exports put after their MatMuls (torch's ONNX exporter): a 3-D
    activation @ a 2-D weight, then Add(bias, .) with the bias first, then a residual Add or
    GELU as Div(., sqrt 2) -> Erf -> Add(1) -> Mul(x, .) -> Mul(0.5)."""
    et = T.FLOAT if dtype == np.float32 else T.FLOAT16
    rng = np.random.default_rng(m * 7 + n)
    w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(dtype)
    bias = (rng.standard_normal(1 if kind == "scalar_bias" else n) * 0.5).astype(dtype)
    c = lambda name, v: nh.from_array(np.array(v, dtype), name)  # noqa: E731
    inits = [nh.from_array(w, "w"), nh.from_array(bias, "bias"), c("sqrt2", 1.4142135381698608),
             c("one", 2.0 if kind == "not_gelu" else 1.0), c("half", 0.5)]
    inputs = [h.make_tensor_value_info("a", et, [2, m, k])]
    nodes = [h.make_node("MatMul", ["a", "w"], ["mm"], name="mm")]
    x = "mm"
    if kind != "gelu_no_bias":
        nodes.append(h.make_node("Add", ["bias", "mm"], ["b"], name="bias_add"))
        x = "b"
    if kind == "residual":
        inputs.append(h.make_tensor_value_info("r", et, [2, m, n]))
        nodes.append(h.make_node("Add", ["r", x], ["y"], name="act"))
    elif kind == "gelu_tanh":  # GPT-2's, as torch writes it
        inits += [c("c1", 0.044714998453855515), c("c2", 0.7978845834732056)]
        nodes += [h.make_node("Mul", [x, x], ["x2"], name="sq"), h.make_node("Mul", [x, "x2"], ["x3"], name="cube"),
                  h.make_node("Mul", ["c1", "x3"], ["a3"], name="times_c1"),
                  h.make_node("Add", [x, "a3"], ["s"], name="plus_x"),
                  h.make_node("Mul", ["c2", "s"], ["u"], name="times_c2"), h.make_node("Tanh", ["u"], ["th"], name="tanh"),
                  h.make_node("Add", ["one", "th"], ["p"], name="plus1"), h.make_node("Mul", [x, "p"], ["q"], name="mulx"),
                  h.make_node("Mul", ["half", "q"], ["y"], name="act")]
    else:
        nodes += [h.make_node("Div", [x, "sqrt2"], ["d"], name="div"), h.make_node("Erf", ["d"], ["e"], name="erf"),
                  h.make_node("Add", ["e", "one"], ["p"], name="plus1"),
                  h.make_node("Mul", [x, "p"], ["q"], name="mulx"),
                  h.make_node("Mul", ["q", "half"], ["y"], name="act")]
    g = h.make_graph(nodes, "g", inputs, [h.make_tensor_value_info("y", et, None)], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()


def test_transformer_bias_residual_and_gelu_fuse_into_gemms(gpu, vkml_env):
    """A batched-activation MatMul with the bias Add torch writes after it, and a residual Add or
    a GELU (erf form, and GPT-2's tanh form) after that, is one GPU node that gives what the
    separate ops give, bit for bit in float32 (each GELU step computed as its own shader computes
    it); a GELU look-alike (+2 instead of +1) keeps its ops, and the CPU replays the originals."""
    rng = np.random.default_rng(11)
    for dtype in (np.float32, np.float16):
        for kind in ("residual", "gelu", "gelu_no_bias", "scalar_bias", "not_gelu", "gelu_tanh"):
            for m, k, n in ((5, 24, 40), (64, 256, 128), (128, 768, 96)):
                model = _transformer_model(kind, dtype, m, k, n)
                feeds = {"a": rng.standard_normal((2, m, k)).astype(dtype)}
                if kind == "residual":
                    feeds["r"] = rng.standard_normal((2, m, n)).astype(dtype)
                rows = _fused_matches_separate(gpu, vkml_env, model, feeds, f"{kind} {np.dtype(dtype).name} {m}x{k}x{n}")
                fused = {name for name, r in rows.items() if "fused into" in r["reason"]}
                want = {"residual": {"mm", "bias_add", "act"}, "not_gelu": {"mm", "bias_add"},
                        "gelu_tanh": {"mm", "bias_add", "sq", "cube", "times_c1", "plus_x", "times_c2", "tanh",
                                      "plus1", "mulx", "act"},
                        "gelu_no_bias": {"mm", "div", "erf", "plus1", "mulx", "act"}}.get(
                    kind, {"mm", "bias_add", "div", "erf", "plus1", "mulx", "act"})
                assert fused == want, (kind, fused)


def test_fused_gemm_replays_bias_and_gelu_on_the_cpu(vkml_env):
    """A FusedGemm whose GPU is gone runs its original ops on the CPU, in order, bit for bit."""
    from vkml.compile import epilogue
    from vkml.ir.graph import TensorDesc
    from vkml.ops.bind import load_model

    rng = np.random.default_rng(3)
    model = load_model(_transformer_model("gelu", np.float32, 6, 16, 8))
    g = model.graph
    values = dict(g.values)
    consts = {k: np.asarray(v) for k, v in model.weights.items()}
    values["a"] = TensorDesc(np.dtype(np.float32), (2, 6, 16))
    for nd in g.nodes:
        for o in nd.outputs:
            values[o] = TensorDesc(np.dtype(np.float32), (2, 6, 8))
    live, fused = epilogue.fuse_epilogues(list(g.nodes), values, g.outputs, frozenset(), consts)
    (node,) = live
    assert fused[node.name] and node.attrs["epilogue"] == epilogue.EPI_GELU
    a = rng.standard_normal((2, 6, 16)).astype(np.float32)
    y = node.op.run(a, consts["w"], consts["bias"], None)[0]
    x = a @ consts["w"]
    x = consts["bias"] + x
    erf = np.vectorize(lambda v: math.erf(float(v)))(x / np.float32(1.4142135381698608)).astype(np.float32)
    want = (x * (np.float32(1.0) + erf)) * np.float32(0.5)
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)


def _attention_model(dtype, s: int, heads: int, d: int, k_perm=(0, 2, 3, 1)) -> bytes:
    """Attention as torch exports it: q, k, v (batch, seq, heads, d) split into heads by
    Transposes, scores = q @ kᵀ / sqrt(d), Softmax, @ v."""
    et = T.FLOAT if dtype == np.float32 else T.FLOAT16
    nodes = [h.make_node("Transpose", ["q"], ["qt"], name="tq", perm=[0, 2, 1, 3]),
             h.make_node("Transpose", ["k"], ["kt"], name="tk", perm=list(k_perm)),
             h.make_node("MatMul", ["qt", "kt"], ["sc0"], name="scores"),
             h.make_node("Div", ["sc0", "root_d"], ["sc"], name="scale"),
             h.make_node("Softmax", ["sc"], ["p"], name="softmax", axis=-1),
             h.make_node("Transpose", ["v"], ["vt"], name="tv", perm=[0, 2, 1, 3]),
             h.make_node("MatMul", ["p", "vt"], ["y"], name="ctx")]
    ins = [h.make_tensor_value_info(n, et, [1, s, heads, d]) for n in "qkv"]
    g = h.make_graph(nodes, "g", ins, [h.make_tensor_value_info("y", et, None)],
                     [nh.from_array(np.array(np.sqrt(d), dtype), "root_d")])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()


def test_attention_transposes_are_read_in_place(gpu, vkml_env):
    """The head-splitting Transposes before attention's MatMuls are not run: the GEMM reads q, k
    and v where they are (strides and a transposed operand), and the scores' division by sqrt(d)
    runs in its epilogue, giving what the separate ops give, bit for bit in float32; a
    permutation that leaves no unit stride in the last two dims stays a Transpose."""
    rng = np.random.default_rng(2)
    for dtype in (np.float32, np.float16):
        for s, heads, d in ((7, 3, 8), (128, 12, 64), (33, 2, 20)):
            feeds = {n: rng.standard_normal((1, s, heads, d)).astype(dtype) for n in "qkv"}
            rows = _fused_matches_separate(gpu, vkml_env, _attention_model(dtype, s, heads, d), feeds,
                                           f"{np.dtype(dtype).name} s={s} heads={heads} d={d}")
            assert all("fused into" in rows[t]["reason"] for t in ("tq", "tk", "tv", "scale")), rows
    # x (2, 3, 4) through (2, 0, 1) is (4, 2, 3) with strides (1, 12, 4): no unit stride in the
    # matrix dims, so that Transpose runs; the identity one on b runs as a view (no command:
    # compile/layout.py makes a Transpose of no real move a Reshape)
    model = _perm_model((2, 3, 4), (4, 3, 5), (2, 0, 1), (0, 1, 2))
    feeds = {"a": rng.standard_normal((2, 3, 4)).astype(np.float32), "b": rng.standard_normal((4, 3, 5)).astype(np.float32)}
    vkml_env(VKML_FUSE="1")
    sess = vkml.InferenceSession(model, devices=[gpu])
    got = sess.run(None, feeds)[0]
    rows = {r["node"]: r for r in sess.placement()}
    assert "fused into" not in rows["ta"]["reason"] and rows["ta"].get("gpu_commands"), rows
    assert not rows["tb"].get("gpu_commands"), rows
    np.testing.assert_allclose(got, np.transpose(feeds["a"], (2, 0, 1)) @ feeds["b"], rtol=1e-5, atol=1e-5)


def test_strided_matmul_problems_match_numpy(gpu):
    """matmul_problem with operand permutations, against NumPy: every rank-3/4 permutation of
    either operand that keeps a unit stride in its last two dims, through the GEMM kernel."""
    import itertools

    from vkml.kernels.matmul import matmul_problem

    rng = np.random.default_rng(4)
    a0 = rng.standard_normal((2, 3, 5, 4)).astype(np.float32)
    checked = 0
    for pa in itertools.permutations(range(4)):
        a = np.transpose(a0, pa)  # logical A (.., m, k)
        b0 = rng.standard_normal(a.shape[:-2] + (a.shape[-1], 6)).astype(np.float32)
        for pb in ((0, 1, 2, 3), (0, 1, 3, 2), (1, 0, 2, 3)):
            src_b = np.ascontiguousarray(np.transpose(b0, np.argsort(pb)))  # so that transpose(src_b, pb) == b0
            try:
                matmul_problem(a0.shape, src_b.shape, pa, pb)
            except ValueError:
                continue
            model = _perm_model(a0.shape, src_b.shape, pa, pb)
            got = vkml.InferenceSession(model, devices=[gpu]).run(None, {"a": a0, "b": src_b})[0]
            np.testing.assert_allclose(got, a @ b0, rtol=1e-5, atol=1e-5, err_msg=f"{pa} {pb}")
            checked += 1
    assert checked >= 20, checked


def _perm_model(a_shape, b_shape, pa, pb) -> bytes:
    nodes = [h.make_node("Transpose", ["a"], ["at"], name="ta", perm=list(pa)),
             h.make_node("Transpose", ["b"], ["bt"], name="tb", perm=list(pb)),
             h.make_node("MatMul", ["at", "bt"], ["y"], name="mm")]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("a", T.FLOAT, list(a_shape)),
                                  h.make_tensor_value_info("b", T.FLOAT, list(b_shape))],
                     [h.make_tensor_value_info("y", T.FLOAT, None)])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()


def test_fused_gemm_replays_views_and_div_on_the_cpu():
    """A FusedGemm that reads its operands through Transposes and divides by a constant, run on
    the CPU (where its GPU kernel could not take it): the original operators in order, bit for bit."""
    from vkml.compile import epilogue
    from vkml.ir.graph import TensorDesc
    from vkml.ops.bind import load_model

    s, heads, d = 6, 2, 4
    model = load_model(_attention_model(np.float32, s, heads, d))
    g = model.graph
    consts = {k: np.asarray(v) for k, v in model.weights.items()}
    values = dict(g.values)
    f32 = np.dtype(np.float32)
    for n in "qkv":
        values[n] = TensorDesc(f32, (1, s, heads, d))
    for n, shape in (("qt", (1, heads, s, d)), ("kt", (1, heads, d, s)), ("vt", (1, heads, s, d)),
                     ("sc0", (1, heads, s, s)), ("sc", (1, heads, s, s)), ("p", (1, heads, s, s)),
                     ("y", (1, heads, s, d))):
        values[n] = TensorDesc(f32, shape)
    live, fused = epilogue.fuse_epilogues(list(g.nodes), values, g.outputs, frozenset(), consts)
    node = next(n for n in live if "scale" in [m.name for m in fused.get(n.name, ())])
    assert node.attrs["epilogue"] == epilogue.EPI_DIV and node.attrs["a_perm"] == (0, 2, 1, 3)
    rng = np.random.default_rng(9)
    q, k = (rng.standard_normal((1, s, heads, d)).astype(np.float32) for _ in range(2))
    got = node.op.run(q, k, None, None)[0]
    want = np.matmul(np.transpose(q, (0, 2, 1, 3)), np.transpose(k, (0, 2, 3, 1))) / np.float32(np.sqrt(d))
    np.testing.assert_array_equal(got, want)


# The activations CNNs put after convolutions (vkml_epilogue.glsl bits 7-10), with attributes
# away from their defaults where they have them.
CNN_ACTIVATIONS = (("Sigmoid", {}), ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}), ("HardSwish", {}),
                   ("LeakyRelu", {"alpha": 0.15}))


def _specials(x: np.ndarray) -> np.ndarray:
    """x with NaN, +-inf and -0 at a few places (on the first image's first rows)."""
    x = x.copy()
    flat = x.reshape(x.shape[0], -1)
    flat[0, :4] = [np.nan, np.inf, -np.inf, -0.0]
    return x


def _act_conv_model(op: str, attrs: dict, dtype) -> bytes:
    """x (1, 4, 6, 6) -> Conv 3x3 -> act -> Conv 1x1 + residual -> act -> depthwise 3x3 -> act:
    the 3x3 and the depthwise conv take the direct route (conv_small) or, with DIRECT_MAX_MACS
    0, the implicit GEMM (conv.comp) and conv_dw; the 1x1 runs as a MatMul (matmul.comp)."""
    rng = np.random.default_rng(21)
    et = T.FLOAT if dtype == np.float32 else T.FLOAT16
    arr = lambda n, *s: nh.from_array((rng.standard_normal(s) * 0.6).astype(dtype), n)  # noqa: E731
    act = lambda i, o, name: h.make_node(op, [i], [o], name=name, **attrs)  # noqa: E731
    nodes = [h.make_node("Conv", ["x", "w3", "b3"], ["a"], name="c3", pads=[1] * 4), act("a", "ra", "k3"),
             h.make_node("Conv", ["ra", "w1"], ["p"], name="c1"), h.make_node("Add", ["p", "ra"], ["s"], name="res"),
             act("s", "rp", "k1"),
             h.make_node("Conv", ["rp", "wd", "bd"], ["d"], name="cd", group=8, pads=[1] * 4), act("d", "y", "kd")]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", et, [1, 4, 6, 6])],
                     [h.make_tensor_value_info("y", et, None)],
                     [arr("w3", 8, 4, 3, 3), arr("b3", 8), arr("w1", 8, 8, 1, 1), arr("wd", 8, 1, 3, 3), arr("bd", 8)])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()


def _assert_same_bits(got, ref, exact16: bool, what: str) -> None:
    """Bit for bit (float16 too where `exact16`: lavapipe; a driver that keeps float(float16_t(x))
    unrounded is allowed a few float16 ulps, as the other float16 tests here)."""
    if got.dtype == np.float32 or exact16:
        np.testing.assert_array_equal(got.view(np.uint32 if got.dtype == np.float32 else np.uint16),
                                      ref.view(np.uint32 if ref.dtype == np.float32 else np.uint16), err_msg=what)
    else:
        np.testing.assert_allclose(got.astype(np.float32), ref.astype(np.float32), rtol=4e-3, atol=4e-3,
                                   err_msg=what)


def _near_cpu(got, cpu, what: str) -> None:
    """Within float tolerances of the CPU where the CPU is not NaN (the GPU's HardSigmoid, as
    shaders/unary.comp's max/min, may turn NaN into a bound where NumPy's clip keeps it)."""
    keep = ~np.isnan(cpu.astype(np.float32))
    tol = 2e-2 if got.dtype == np.float16 else 1e-5
    np.testing.assert_allclose(got.astype(np.float32)[keep], cpu.astype(np.float32)[keep], rtol=tol, atol=tol,
                               err_msg=what)


def test_cnn_activations_ride_on_every_conv_route(gpu, gpu_on_cpu, vkml_env, monkeypatch):
    """Sigmoid, HardSigmoid, HardSwish and LeakyRelu after a conv (after its residual Add too)
    run in the conv's dispatch on the direct, implicit-GEMM, pointwise and depthwise routes and
    give what the separate ops give on the GPU, bit for bit, NaN, infinities and -0 included."""
    from vkml.kernels import conv as kc

    rng = np.random.default_rng(22)
    direct_max = kc.DIRECT_MAX_MACS
    for dtype in (np.float32, np.float16):
        t = "f16" if dtype == np.float16 else "f32"
        x = _specials((rng.standard_normal((1, 4, 6, 6)) * 3).astype(dtype))
        for op, attrs in CNN_ACTIVATIONS:
            model = _act_conv_model(op, attrs, dtype)
            cpu, _ = _run(model, ["cpu"], x, False, vkml_env)
            for direct, shaders in ((direct_max, (f"conv_small_{t}", f"conv_small_{t}")),
                                    (0, (f"conv_{t}", f"conv_dw_{t}"))):
                monkeypatch.setattr(kc, "DIRECT_MAX_MACS", direct)
                what = f"{op} {t} {shaders}"
                ref, _ = _run(model, [gpu], x, False, vkml_env)
                got, report = _run(model, [gpu], x, True, vkml_env)
                rows = {r["node"]: r for r in report}
                for name, conv, shader in (("k3", "c3+k3", shaders[0]), ("k1", "c1+res+k1", f"matmul_{t}"),
                                           ("kd", "cd+kd", shaders[1])):
                    assert f"fused into {conv}" in rows[name]["reason"], (what, rows[name])
                    assert [p["shader"] for p in rows[name]["pipelines"]] == [shader], (what, rows[name])
                _assert_same_bits(got, ref, gpu_on_cpu, what)
                _near_cpu(got, cpu, what)


def _act_gemm_model(op: str, attrs: dict, dtype, m: int, k: int, n: int) -> bytes:
    """a (m, k) -> Gemm(alpha -0.5: a zero row gives -0) -> act -> y0, and a (m, k) -> MatMul +
    residual r -> act -> y1."""
    rng = np.random.default_rng(k + n)
    et = T.FLOAT if dtype == np.float32 else T.FLOAT16
    w = lambda name: nh.from_array((rng.standard_normal((k, n)) / np.sqrt(k)).astype(dtype), name)  # noqa: E731
    nodes = [h.make_node("Gemm", ["a", "w0"], ["g"], name="mm0", alpha=-0.5),
             h.make_node(op, ["g"], ["y0"], name="act0", **attrs),
             h.make_node("MatMul", ["a", "w1"], ["q"], name="mm1"), h.make_node("Add", ["r", "q"], ["s"], name="res"),
             h.make_node(op, ["s"], ["y1"], name="act1", **attrs)]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("a", et, [m, k]), h.make_tensor_value_info("r", et, [m, n])],
                     [h.make_tensor_value_info("y0", et, None), h.make_tensor_value_info("y1", et, None)],
                     [w("w0"), w("w1")])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()


def test_cnn_activations_ride_on_gemms(gpu, gpu_on_cpu, vkml_env, monkeypatch):
    """The same activations after a Gemm / MatMul (+ residual): the tiled, small, split-K and
    few-row GEMMs (matmul.comp, matmul_small.comp, splitk_reduce.comp, gemv.comp) give what the
    separate ops give, bit for bit, NaN, infinities and -0 included."""
    from vkml.kernels import matmul as km

    rng = np.random.default_rng(23)
    small_max = km.SMALL_MAX_MACS
    for dtype in (np.float32, np.float16):
        t = "f16" if dtype == np.float16 else "f32"
        for (m, k, n), split, shaders in (((6, 12, 40), False, {f"matmul_{t}"}),
                                          ((6, 96, 40), False, {f"matmul_small_{t}"}),
                                          ((6, 1024, 40), True, {f"matmul_{t}", f"splitk_reduce_{t}"}),
                                          ((4, 1024, 40), True, {f"gemv_{t}"})):
            monkeypatch.setattr(km, "SMALL_MAX_MACS", 0 if split else small_max)  # (the small path never splits K,
            # nor does gemv.comp, whose sums start from +0 as split K's)
            a = (rng.standard_normal((m, k)) * 2).astype(dtype)
            a[0] = 0.0
            a[1, 3], a[2, 5], a[3, 7] = np.nan, np.inf, -np.inf
            feeds = {"a": a, "r": rng.standard_normal((m, n)).astype(dtype)}
            for op, attrs in CNN_ACTIVATIONS:
                model = _act_gemm_model(op, attrs, dtype, m, k, n)
                what = f"{op} {t} {m}x{k}x{n}"
                vkml_env(VKML_FUSE="0")
                refs = vkml.InferenceSession(model, devices=[gpu]).run(None, feeds)
                vkml_env(VKML_FUSE="1")
                s = vkml.InferenceSession(model, devices=[gpu])
                gots = s.run(None, feeds)
                rows = {r["node"]: r for r in s.placement()}
                for name, fused in (("act0", "mm0+act0"), ("act1", "mm1+res+act1")):
                    assert f"fused into {fused}" in rows[name]["reason"], (what, rows[name])
                    if dtype == np.float32 or gpu_on_cpu:  # (float16 elsewhere may take cooperative matrices)
                        assert {p["shader"] for p in rows[name]["pipelines"]} == shaders, (what, rows[name])
                cpus = vkml.InferenceSession(model, devices=["cpu"]).run(None, feeds)
                for got, ref, cpu in zip(gots, refs, cpus):
                    _assert_same_bits(got, ref, gpu_on_cpu, what)
                    _near_cpu(got, cpu, what)
                if op in ("HardSwish", "LeakyRelu") and not split:  # (a zero row times alpha -0.5:
                    # -0 in and out; split K sums its partials from +0, as the separate Gemm)
                    assert np.signbit(gots[0][0]).all() and (gots[0][0] == 0).all(), (what, gots[0][0])


def _chain_model(ops: list[tuple[str, dict]], head: str = "Conv", dtype=np.float32) -> tuple[bytes, np.ndarray]:
    """x -> Conv 3x3 (or MatMul) -> ops in order -> y; and a feed with NaN, infinities and -0."""
    rng = np.random.default_rng(len(ops))
    arr = lambda v, name: nh.from_array(np.asarray(v).astype(dtype), name)  # noqa: E731
    inits = [arr(1.75, "c"), arr(0.5, "lo"), arr(0.75, "hi")]
    if head == "Conv":
        inits.append(arr(rng.standard_normal((8, 4, 3, 3)), "w"))
        nodes, shape = [h.make_node("Conv", ["x", "w"], ["t0"], name="conv", pads=[1] * 4)], [1, 4, 6, 6]
    else:
        inits.append(arr(rng.standard_normal((16, 8)), "w"))
        nodes, shape = [h.make_node("MatMul", ["x", "w"], ["t0"], name="mm")], [5, 16]
    for i, (op, attrs) in enumerate(ops):
        ins = {"Div": [f"t{i}", "c"], "Clip": [f"t{i}", "lo", "hi"]}.get(op, [f"t{i}"])
        nodes.append(h.make_node(op, ins, [f"t{i + 1}"], name=op.lower(), **attrs))
    nodes[-1].output[0] = "y"
    et = T.FLOAT if dtype == np.float32 else T.FLOAT16
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", et, shape)], [h.make_tensor_value_info("y", et, None)],
                     inits)
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()
    return model, _specials((rng.standard_normal(shape) * 3).astype(dtype))


def _fuse_and_replay(model: bytes, x: np.ndarray):
    """(fused nodes {name: [original names]}, the fused live nodes, y from the fused nodes' CPU
    runs, y from the original operators'): fuse_epilogues on the model's graph."""
    from vkml.compile.epilogue import fuse_epilogues
    from vkml.ops.bind import load_model

    m = load_model(model)
    g = m.graph
    consts = {k: m.weights[g.weight_key(k)] for k in g.constants}
    live, fused = fuse_epilogues(g.nodes, g.values, g.outputs, frozenset(), consts)
    ys = []
    for nodes in (live, g.nodes):
        env = {"x": x, **consts}
        for nd in nodes:
            env.update(zip(nd.outputs, nd.op.run(*[env[i] if i else None for i in nd.inputs])))
        ys.append(env["y"])
    return {k: [n.name for n in v] for k, v in fused.items()}, live, ys[0], ys[1]


def test_cnn_activations_on_the_cpu_replay_the_ops():
    """A FusedConv / FusedGemm with one of these activations, run on the CPU, is the original
    operators in order, bit for bit (NaN, infinities and -0 included); the parameters travel
    in Clip's bounds' place as the unary kernel gets them."""
    from vkml.kernels import gemm

    flags = {"Sigmoid": gemm.EPI_SIGMOID, "HardSigmoid": gemm.EPI_HARD_SIGMOID,
             "HardSwish": gemm.EPI_HARD_SWISH, "LeakyRelu": gemm.EPI_LEAKY_RELU}
    params = {"Sigmoid": None, "HardSigmoid": (np.float32(0.3), np.float32(0.4)), "HardSwish": (1 / 6, 0.5),
              "LeakyRelu": (np.float32(0.15), 0.0)}
    for dtype, bits in ((np.float32, np.uint32), (np.float16, np.uint16)):
        for head in ("Conv", "MatMul"):
            for op, attrs in CNN_ACTIVATIONS:
                model, x = _chain_model([(op, attrs)], head, dtype)
                fused, (node,), y, want = _fuse_and_replay(model, x)
                assert fused == {node.name: [head.lower() if head == "Conv" else "mm", op.lower()]}, fused
                assert node.attrs["epilogue"] == flags[op] and node.attrs["clip"] == params[op], node.attrs
                assert y.dtype == want.dtype == dtype and np.isnan(want).any(), (head, op, dtype)
                np.testing.assert_array_equal(y.view(bits), want.view(bits), err_msg=f"{head} {op} {dtype}")


def test_parameters_share_clips_place_so_one_of_them_fuses():
    """HardSigmoid and LeakyRelu take their parameters where Clip's bounds and a GEMM's divisor
    travel: after a fused Clip or Div they stay separate ops; Sigmoid (no parameters) still fuses
    after a Div."""
    from vkml.kernels import gemm

    for ops, head, want in (([("Clip", {}), ("HardSigmoid", {"alpha": 0.3})], "Conv", ["conv", "clip"]),
                            ([("Clip", {}), ("LeakyRelu", {})], "Conv", ["conv", "clip"]),
                            ([("Div", {}), ("LeakyRelu", {})], "MatMul", ["mm", "div"]),
                            ([("Div", {}), ("HardSwish", {})], "MatMul", ["mm", "div"]),
                            ([("Div", {}), ("Sigmoid", {})], "MatMul", ["mm", "div", "sigmoid"])):
        model, x = _chain_model(ops, head)
        fused, live, y, ref = _fuse_and_replay(model, x)
        assert list(fused.values()) == [want], (ops, fused)
        node = next(n for n in live if n.name in fused)
        assert node.attrs["clip"] == ((0.5, 0.75) if head == "Conv" else (1.75, 0.0)), node.attrs
        if want[-1] == "sigmoid":
            assert node.attrs["epilogue"] == gemm.EPI_DIV | gemm.EPI_SIGMOID
        np.testing.assert_array_equal(y.view(np.uint32), ref.view(np.uint32))
