"""A squeeze-excitation gate fused into the pointwise convolution after it
(vkml/compile/epilogue.py _input_scale, kernels/conv.scalable_input): Mul(h, gate) -> Conv 1x1
runs as one FusedConv whose GEMM scales its input's channels as it reads them, on the SIMT,
small and split-K GEMM routes, and gives what the separate ops give, bit for bit."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import vkml

from test_epilogue import _assert_same_bits, _fuse_and_replay, _near_cpu, _run, _specials


def _same_bits_but_nan_signs(got, ref, exact16: bool, what: str) -> None:
    """_assert_same_bits where NaNs may differ in sign: the image's NaN reaches every output
    through the gate's average, and which NaN an FMA of two NaNs keeps is the driver's choice."""
    nan = np.isnan(ref.astype(np.float32))
    np.testing.assert_array_equal(np.isnan(got.astype(np.float32)), nan, err_msg=what)
    got, ref = np.where(nan, 0, got).astype(got.dtype), np.where(nan, 0, ref).astype(ref.dtype)
    if got.dtype == np.float16 and not exact16:
        # A driver that keeps float(float16_t(x * s)) unrounded (NVIDIA) carries the scaled
        # values' extra bits through K products: an error of ~K float16 ulps of the terms, which
        # cancellation leaves next to small outputs (the unfused reference also runs on tensor
        # cores there: another order of the sum).
        finite = np.isfinite(ref.astype(np.float32))
        scale = float(np.abs(ref.astype(np.float32)[finite]).max(initial=1.0))
        np.testing.assert_allclose(got.astype(np.float32), ref.astype(np.float32), rtol=4e-3, atol=4e-3 * scale,
                                   err_msg=what)
        return
    _assert_same_bits(got, ref, exact16, what)


def _se_model(c: int, dtype, n: int = 1, side: int = 6, gate_first: bool = False, const_scale: bool = False,
              extra_reader: bool = False, proj_kernel: int = 1, m: int = 16) -> bytes:
    """x (N, c, H, W) -> depthwise 3x3 -> SiLU = hd; gate = Sigmoid(fc2(Relu(fc1(GAP(hd))))) of
    shape (N, c, 1, 1) (or, with `const_scale`, a (1, c, 1, 1) initializer); Mul(hd, gate) ->
    Conv proj_kernel x proj_kernel (c -> m, bias) + residual Conv 1x1 of x -> y. `extra_reader`: the
    Mul's output is also an output of the graph (then it must not fuse)."""
    rng = np.random.default_rng(c + 7 * gate_first + 3 * const_scale)
    et = T.FLOAT if dtype == np.float32 else T.FLOAT16
    arr = lambda n, *s: nh.from_array((rng.standard_normal(s) * 0.5).astype(dtype), n)  # noqa: E731
    q = max(c // 4, 1)
    inits = [arr("wd", c, 1, 3, 3), arr("bd", c), arr("w1", q, c, 1, 1), arr("b1", q), arr("w2", c, q, 1, 1),
             arr("b2", c), arr("wp", m, c, proj_kernel, proj_kernel), arr("bp", m), arr("wr", m, c, 1, 1)]
    nodes = [h.make_node("Conv", ["x", "wd", "bd"], ["d"], name="dw", group=c, pads=[1] * 4),
             h.make_node("Sigmoid", ["d"], ["ds"], name="silu_sig"), h.make_node("Mul", ["d", "ds"], ["hd"], name="silu")]
    if const_scale:
        inits.append(arr("gate", 1, c, 1, 1))
    else:
        nodes += [h.make_node("GlobalAveragePool", ["hd"], ["sq"], name="gap"),
                  h.make_node("Conv", ["sq", "w1", "b1"], ["f1"], name="fc1"), h.make_node("Relu", ["f1"], ["r1"], name="r1"),
                  h.make_node("Conv", ["r1", "w2", "b2"], ["f2"], name="fc2"),
                  h.make_node("Sigmoid", ["f2"], ["gate"], name="gate")]
    p = proj_kernel // 2
    nodes += [h.make_node("Mul", ["gate", "hd"] if gate_first else ["hd", "gate"], ["se"], name="excite"),
              h.make_node("Conv", ["se", "wp", "bp"], ["pr"], name="proj", pads=[p] * 4),
              h.make_node("Conv", ["x", "wr"], ["sc"], name="short"),
              h.make_node("Add", ["pr", "sc"], ["y"], name="res")]
    outs = [h.make_tensor_value_info("y", et, None)] + ([h.make_tensor_value_info("se", et, None)] if extra_reader else [])
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", et, [n, c, side, side])], outs, inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()


def _fused_against_separate(model: bytes, x: np.ndarray, gpu: str, gpu_on_cpu: bool, vkml_env, what: str) -> dict:
    """The model on `gpu` with fusion off and on: the same bits (NaN signs aside), near the CPU's
    result; returns the fused session's placement rows by node."""
    ref, _ = _run(model, [gpu], x, False, vkml_env)
    got, report = _run(model, [gpu], x, True, vkml_env)
    _same_bits_but_nan_signs(got, ref, gpu_on_cpu, what)
    cpu, _ = _run(model, ["cpu"], x, False, vkml_env)
    _near_cpu(got, cpu, what)
    return {r["node"]: r for r in report}


# (channels, batch, side, outputs): the projection's GEMM is M outputs x N side^2 x K channels a batch
CASES = (
    (8, 1, 6, 16),     # K 8: the tiled SIMT shader (matmul.comp)
    (8, 2, 5, 16),     # two images: a scale per image
    (64, 2, 4, 16),    # K 64, 16k multiply-adds: the small-GEMM shader (matmul_small.comp)
    (1024, 1, 8, 64),  # K 1024 in one 64x64 block: split K and the reduce pass
)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_gate_rides_on_the_pointwise_conv(gpu, gpu_on_cpu, vkml_env, dtype):
    """The gate's Mul joins the projection conv (and its residual Add) on every GEMM route, per
    image, read either way round; bit for bit the separate GPU ops, NaN, infinities and -0
    included; near the CPU."""
    t = "f16" if dtype == np.float16 else "f32"
    rng = np.random.default_rng(5)
    for c, n, side, m in CASES:
        for gate_first in (False, True):
            model = _se_model(c, dtype, n, side, gate_first=gate_first, m=m)
            x = _specials((rng.standard_normal((n, c, side, side)) * 2).astype(dtype))
            what = f"c={c} n={n} side={side} {t} gate_first={gate_first}"
            rows = _fused_against_separate(model, x, gpu, gpu_on_cpu, vkml_env, what)
            assert "fused into excite+proj+res" in rows["excite"]["reason"], (what, rows["excite"])
            shaders = {p["shader"] for p in rows["proj"]["pipelines"]}
            want = {f"matmul_small_{t}"} if c == 64 else \
                {f"matmul_{t}", f"splitk_reduce_{t}"} if c == 1024 else {f"matmul_{t}"}
            assert shaders == want, (what, rows["proj"])


def test_constant_scale_shared_by_the_batch(gpu, gpu_on_cpu, vkml_env):
    """A (1, C, 1, 1) scale (an initializer here) is read once for every image."""
    model = _se_model(8, np.float32, 3, 5, const_scale=True)
    x = np.random.default_rng(6).standard_normal((3, 8, 5, 5)).astype(np.float32)
    ref, _ = _run(model, [gpu], x, False, vkml_env)
    got, report = _run(model, [gpu], x, True, vkml_env)
    assert "fused into excite+proj+res" in {r["node"]: r for r in report}["excite"]["reason"]
    _assert_same_bits(got, ref, gpu_on_cpu, "shared scale")


def test_gates_that_cannot_ride_stay_muls(gpu, vkml_env):
    """No fusion where the scaled input is read elsewhere (a graph output here) or the conv is
    not pointwise (a 3x3 projection: the implicit GEMM gathers its input)."""
    x = np.random.default_rng(7).standard_normal((1, 8, 6, 6)).astype(np.float32)
    for kw in ({"extra_reader": True}, {"proj_kernel": 3}):
        model = _se_model(8, np.float32, **kw)
        vkml_env(VKML_FUSE="1")
        s = vkml.InferenceSession(model, devices=[gpu])
        outs = s.run(None, {"x": x})
        rows = {r["node"]: r for r in s.placement()}
        assert "fused" not in rows["excite"]["reason"], (kw, rows["excite"])
        cpu = vkml.InferenceSession(model, devices=["cpu"]).run(None, {"x": x})
        for got, want in zip(outs, cpu):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_fused_scale_replays_on_the_cpu():
    """The FusedConv's CPU run is the Mul then the conv (exactly), either operand order."""
    for dtype, bits in ((np.float32, np.uint32), (np.float16, np.uint16)):
        for gate_first in (False, True):
            model = _se_model(8, dtype, 2, 5, gate_first=gate_first)
            x = _specials(np.random.default_rng(8).standard_normal((2, 8, 5, 5)).astype(dtype))
            fused, live, y, want = _fuse_and_replay(model, x)
            assert fused["excite+proj+res"] == ["excite", "proj", "res"], fused
            node = next(nd for nd in live if nd.name == "excite+proj+res")
            assert node.inputs[0] == "hd" and node.inputs[4] == "gate", node.inputs
            np.testing.assert_array_equal(y.view(bits), want.view(bits))


# (channels, batch, side): output planes and their sizes around what the fused pool takes (the
# depthwise route: more than conv.DIRECT_DW_MAX_OUTPUTS outputs)
MEAN_CASES = (
    (512, 1, 8),    # 512 planes of 64: one output per invocation of 64, the pool's width
    (48, 2, 20),    # 96 planes of 400 over two images: 256 invocations compute, the pool's 64 add
    (64, 1, 52),    # planes of 2704: the pool's 128 invocations add, 256 compute (11 outputs each)
)  # (planes over conv.MEAN_MAX_PLANE fuse here too: the test lifts it)


@pytest.mark.parametrize("subgroups", [True, False], ids=["wg", "wgs"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_pool_rides_on_the_depthwise_conv(gpu, gpu_on_cpu, vkml_env, dtype, subgroups, monkeypatch):
    """The squeeze-excitation block's GlobalAveragePool is a second output of its depthwise
    FusedConv (conv_dw.comp PLANE_MEAN): the same bits as the separate GPU ops (the pool's
    workgroups add the plane in the same order), NaN, infinities and -0 included; near the CPU.
    Both workgroup sums: subgroup arithmetic ("wg") and the shared-memory tree ("wgs", which
    devices without subgroup arithmetic take, the separate pool too)."""
    from vkml.kernels import conv, reduce

    monkeypatch.setattr(conv, "MEAN_MAX_PLANE", conv.MEAN_PLANE_LIMIT)
    if not subgroups:
        monkeypatch.setattr(reduce, "subgroup_arith", lambda device: False)
    t = "f16" if dtype == np.float16 else "f32"
    rng = np.random.default_rng(9)
    for c, n, side in MEAN_CASES:
        model = _se_model(c, dtype, n, side)
        x = _specials((rng.standard_normal((n, c, side, side)) * 2).astype(dtype))
        what = f"c={c} n={n} side={side} {t}"
        rows = _fused_against_separate(model, x, gpu, gpu_on_cpu, vkml_env, what)
        assert "fused into dw+silu_sig+silu+gap" in rows["gap"]["reason"], (what, rows["gap"])
        mode = "wg" if subgroups and reduce.subgroup_arith(vkml.vulkan.device(int(gpu.split(":")[1]))) else "wgs"
        assert {p["shader"] for p in rows["gap"]["pipelines"]} == {f"conv_dw_mean_{mode}_{t}"}, rows["gap"]


def test_pool_of_few_planes_stays_a_dispatch(gpu, vkml_env, monkeypatch):
    """Below MEAN_MIN_PLANES planes, or with planes over MEAN_MAX_PLANE, the pool keeps its own
    dispatch (a workgroup per plane would leave the GPU idle, or walk the plane too long), and
    FUSE_MEAN off keeps it for every size."""
    from vkml.compile import epilogue

    x = np.random.default_rng(10).standard_normal((1, 32, 24, 24)).astype(np.float32)
    got, report = _run(_se_model(32, np.float32, 1, 24), [gpu], x, True, vkml_env)
    assert "fused" not in {r["node"]: r for r in report}["gap"]["reason"]
    x = np.random.default_rng(10).standard_normal((1, 96, 20, 20)).astype(np.float32)  # planes over MEAN_MAX_PLANE
    got, report = _run(_se_model(96, np.float32, 1, 20), [gpu], x, True, vkml_env)
    assert "fused" not in {r["node"]: r for r in report}["gap"]["reason"]
    monkeypatch.setattr(epilogue, "FUSE_MEAN", False)
    x = np.random.default_rng(10).standard_normal((1, 512, 8, 8)).astype(np.float32)
    got, report = _run(_se_model(512, np.float32, 1, 8), [gpu], x, True, vkml_env)
    assert "fused" not in {r["node"]: r for r in report}["gap"]["reason"]


def test_fused_pool_replays_on_the_cpu():
    """The FusedConv's CPU run gives both outputs: the activation's result and its
    GlobalAveragePool, exactly as the original operators."""
    for dtype, bits in ((np.float32, np.uint32), (np.float16, np.uint16)):
        model = _se_model(512, dtype, 1, 8)
        x = _specials(np.random.default_rng(11).standard_normal((1, 512, 8, 8)).astype(dtype))
        fused, live, y, want = _fuse_and_replay(model, x)
        assert fused["dw+silu_sig+silu+gap"] == ["dw", "silu_sig", "silu", "gap"], fused
        node = next(nd for nd in live if nd.name == "dw+silu_sig+silu+gap")
        assert node.outputs == ["hd", "sq"], node.outputs
        np.testing.assert_array_equal(y.view(bits), want.view(bits))


def _dw_pool_model(c: int, n: int, side: int, k: int, stride: int, mult: int) -> bytes:
    """x (n, c, side, side) -> depthwise k x k Conv (stride, pads k // 2, `mult` outputs per
    channel, bias) -> SiLU = h; outputs: GlobalAveragePool(h), then h."""
    rng = np.random.default_rng(c * 31 + side * 7 + k + stride + mult)
    m = c * mult
    inits = [nh.from_array((rng.standard_normal((m, 1, k, k)) * 0.5).astype(np.float32), "w"),
             nh.from_array(rng.standard_normal(m).astype(np.float32), "b")]
    nodes = [h.make_node("Conv", ["x", "w", "b"], ["d"], name="dw", group=c, pads=[k // 2] * 4,
                         strides=[stride, stride]),
             h.make_node("Sigmoid", ["d"], ["ds"], name="sig"), h.make_node("Mul", ["d", "ds"], ["hd"], name="silu"),
             h.make_node("GlobalAveragePool", ["hd"], ["sq"], name="gap")]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [n, c, side, side])],
                     [h.make_tensor_value_info("sq", T.FLOAT, None), h.make_tensor_value_info("hd", T.FLOAT, None)],
                     inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(c=st.integers(8, 160), n=st.integers(1, 3), side=st.integers(6, 40), k=st.sampled_from([3, 5]),
       stride=st.sampled_from([1, 2]), mult=st.sampled_from([1, 2]), subgroups=st.booleans())
def test_fused_pool_over_generated_shapes(gpu, vkml_env, monkeypatch, c, n, side, k, stride, mult, subgroups):
    """Generated depthwise convolutions (kernel, stride, channel multiplier, batch, plane sizes
    from 9 to 400 outputs): where the pool fuses, the mean and the plane have the bits of the
    separate GPU ops, both workgroup-sum modes; near NumPy's mean of the CPU's plane."""
    from vkml.kernels import conv, reduce

    monkeypatch.setattr(conv, "MEAN_MAX_PLANE", conv.MEAN_PLANE_LIMIT)
    monkeypatch.setattr(reduce, "subgroup_arith", (lambda device: False) if not subgroups else reduce.subgroup_arith)
    m = c * mult
    o = (side - 1) // stride + 1
    attrs = {"group": c, "pads": [k // 2] * 4, "strides": [stride, stride]}
    assume(conv.fusable_mean(attrs, (n, c, side, side), (m, 1, k, k)))
    model = _dw_pool_model(c, n, side, k, stride, mult)
    x = np.random.default_rng(side).standard_normal((n, c, side, side)).astype(np.float32)
    vkml_env(VKML_FUSE="0")
    ref = vkml.InferenceSession(model, devices=[gpu]).run(None, {"x": x})
    vkml_env(VKML_FUSE="1")
    s = vkml.InferenceSession(model, devices=[gpu])
    got = s.run(None, {"x": x})
    assert "fused into dw+sig+silu+gap" in {r["node"]: r for r in s.placement()}["gap"]["reason"]
    for g_, r_ in zip(got, ref):
        np.testing.assert_array_equal(g_.view(np.uint32), r_.view(np.uint32))
    assert got[0].shape == (n, m, 1, 1) and got[1].shape == (n, m, o, o)
    np.testing.assert_allclose(got[0][:, :, 0, 0], got[1].astype(np.float64).mean(axis=(2, 3)), rtol=1e-5, atol=1e-6)
