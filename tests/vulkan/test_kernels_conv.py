"""Conv and ConvTranspose GPU kernels against vkml's NumPy operators over hypothesis-drawn
geometries: 1-3 spatial dims, groups (depthwise and channel multipliers included),
strides, dilations, explicit pads and every auto_pad, bias, output_padding and
output_shape; float32 and float16; each of the three routes (implicit GEMM, direct
depthwise, pointwise MatMul).

Tolerance (both sides accumulate in float32, in different orders):
  |gpu - numpy| <= RTOL[dtype] * |numpy| + 1e-5 * conv(|X|, |W|) + 1e-6 * |B|
with RTOL 0 for float32 and 2^-10 (one float16 ulp) for float16.
"""
import os
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from vkml.ir.graph import Node
from vkml.kernels import TensorSpec, get_kernel
from vkml.kernels import conv as kc
from vkml.ops.registry import lookup
from vkml.runtime.testing import run_ops
from _validated import run_validated  # noqa: E402

_N = int(os.environ.get("VKML_TEST_EXAMPLES", "25"))
HYP = settings(max_examples=_N, deadline=None, suppress_health_check=list(HealthCheck))
RTOL = {np.dtype(np.float32): 0.0, np.dtype(np.float16): 2.0 ** -10}


def cpu(op_type, attrs, *inputs, opset=22):
    names = [f"i{k}" if x is not None else "" for k, x in enumerate(inputs)]
    node = Node("n", op_type, "", names, ["y"], dict(attrs), opset)
    return lookup("", op_type, opset)(node).run(*inputs)[0]


def check(dev, op, attrs, x, w, b=None):
    feeds, names = {"x": x, "w": w}, ["x", "w"]
    if b is not None:
        feeds["b"] = b
        names.append("b")
    got = run_ops(dev, [(op, attrs, names, ["y"])], feeds)["y"]
    want = cpu(op, attrs, x, w, b)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape)
    bound = cpu(op, attrs, np.abs(x.astype(np.float64)), np.abs(w.astype(np.float64)))
    extra = 0.0
    if b is not None:
        extra = np.abs(b.astype(np.float64)).reshape((-1,) + (1,) * (x.ndim - 2))
    g, wv = got.astype(np.float64), want.astype(np.float64)
    tol = RTOL[want.dtype] * np.abs(wv) + 1e-5 * bound + 1e-6 * extra + 1e-30
    bad = np.abs(g - wv) > tol
    assert not bad.any(), f"{bad.sum()} of {bad.size} off; worst {np.abs(g - wv).max()}"
    return got


def _arr(rng, shape, dtype):
    return rng.uniform(-1, 1, shape).astype(dtype)


@st.composite
def conv_case(draw, transposed=False):
    rank = draw(st.sampled_from([1, 2, 2, 3]))
    side = 2 if rank == 3 else 3
    group = draw(st.sampled_from([1, 1, 2, 3]))
    cg = draw(st.sampled_from([1, 2, 5]))
    mg = draw(st.sampled_from([1, 3, 4]))
    n = draw(st.integers(1, 2))
    kernel = [draw(st.integers(1, side)) for _ in range(rank)]
    strides = [draw(st.integers(1, 3)) for _ in range(rank)]
    dil = [draw(st.integers(1, 2)) for _ in range(rank)]
    spatial = [draw(st.integers(1, 9 if rank < 3 else 5)) for _ in range(rank)]
    attrs = {"group": group, "strides": strides, "dilations": dil}
    pad_mode = draw(st.sampled_from(["explicit", "explicit", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"]))
    if pad_mode == "explicit":
        attrs["pads"] = [draw(st.integers(0, 2)) for _ in range(2 * rank)]
    elif pad_mode != "NOTSET":
        attrs["auto_pad"] = pad_mode
    if draw(st.booleans()):
        attrs["kernel_shape"] = kernel
    c = cg * group
    if transposed:
        w_shape = (c, mg) + tuple(kernel)
        if draw(st.booleans()):
            attrs["output_padding"] = [draw(st.integers(0, max(s, d) - 1)) for s, d in zip(strides, dil)]
        if draw(st.integers(0, 4)) == 0:
            attrs.pop("auto_pad", None)
            attrs["output_shape"] = [s * i + draw(st.integers(0, 2)) for s, i in zip(strides, spatial)]
    else:
        w_shape = (mg * group, cg) + tuple(kernel)
    bias = draw(st.booleans())
    return (n, c) + tuple(spatial), w_shape, attrs, bias, mg * group


def _run_case(dev, op, case, dtype, seed):
    x_shape, w_shape, attrs, bias, m = case
    rng = np.random.default_rng(seed)
    x, w = _arr(rng, x_shape, dtype), _arr(rng, w_shape, dtype)
    b = _arr(rng, (m,), dtype) if bias else None
    try:
        geo = kc.geometry(op, attrs, x.shape, w.shape)
    except ValueError:
        assume(False)
    assume(all(o > 0 for o in geo.out_sp))
    check(dev, op, attrs, x, w, b)


@pytest.fixture(params=["auto", "no_direct"])
def routes(request, monkeypatch):
    """Small drawn convolutions take the direct route; "no_direct" sends them through the
    implicit GEMM (and its split K) instead, so that both stay covered."""
    if request.param == "no_direct":
        monkeypatch.setattr(kc, "DIRECT_MAX_MACS", 0)
    return request.param


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@HYP
@given(case=conv_case(), seed=st.integers(0, 2**31))
def test_conv(dev, dtype, case, seed, routes):
    _run_case(dev, "Conv", case, dtype, seed)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@HYP
@given(case=conv_case(transposed=True), seed=st.integers(0, 2**31))
def test_conv_transpose(dev, dtype, case, seed):
    _run_case(dev, "ConvTranspose", case, dtype, seed)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("route, x_shape, w_shape, attrs", [
    ("gemm", (2, 16, 24, 20), (48, 16, 3, 3), {"pads": [1, 1, 1, 1]}),
    ("gemm", (2, 24, 48, 48), (36, 8, 3, 3), {"group": 3, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("gemm", (1, 8, 14, 14), (16, 8, 33, 5), {"pads": [16, 2, 16, 2]}),  # K = 1320: past DIRECT_MAX_K
    ("direct", (1, 8, 14, 14), (16, 8, 5, 5), {"pads": [2, 2, 2, 2]}),  # mnist-12's second conv
    ("direct", (2, 12, 9, 7), (9, 4, 3, 2), {"group": 3, "strides": [2, 1], "dilations": [1, 2],
                                             "pads": [1, 0, 1, 2]}),
    ("direct", (1, 6, 21), (4, 6, 3), {"auto_pad": "SAME_UPPER", "strides": [2]}),
    ("dw", (2, 32, 80, 80), (32, 1, 3, 3), {"group": 32, "pads": [1, 1, 1, 1]}),
    ("dw", (1, 16, 90, 90), (48, 1, 5, 5), {"group": 16, "strides": [2, 2], "dilations": [2, 1],
                                            "pads": [2, 2, 2, 2]}),
    ("dw", (1, 64, 40000), (64, 1, 4), {"group": 64, "auto_pad": "SAME_LOWER", "strides": [3]}),
    ("direct", (2, 8, 11, 9), (8, 1, 3, 3), {"group": 8, "pads": [1, 1, 1, 1]}),  # small depthwise
    # MobileNetV2's 14x14 depthwise: few multiply-adds, but enough outputs for one invocation each
    ("dw", (1, 192, 14, 14), (192, 1, 3, 3), {"group": 192, "pads": [1, 1, 1, 1]}),
    ("direct", (1, 1, 28, 28), (8, 1, 5, 5), {"pads": [2, 2, 2, 2]}),  # mnist-12's first conv
    ("pointwise", (2, 12, 7, 5), (20, 12, 1, 1), {}),
    ("pointwise", (3, 8, 33), (4, 8, 1), {}),
    ("gemm", (8, 12, 70, 50), (20, 12, 1, 1), {"strides": [2, 1]}),
], ids=lambda v: v if isinstance(v, str) else None)
def test_routes(dev, dtype, route, x_shape, w_shape, attrs):
    geo = kc.geometry("Conv", attrs, x_shape, w_shape)
    assert kc._route(geo) == route
    rng = np.random.default_rng(5)
    x, w, b = _arr(rng, x_shape, dtype), _arr(rng, w_shape, dtype), _arr(rng, (w_shape[0],), dtype)
    check(dev, "Conv", attrs, x, w, b)
    check(dev, "Conv", attrs, x, w)


@pytest.mark.parametrize("tile", ["128,128,8,8,8", "64,64,16,4,4", "32,32,16,4,4"])
def test_conv_tilings(dev, tile, vkml_env):
    """The tilings the kernel picks from, with K running over several double-buffered tiles."""
    vkml_env(VKML_MATMUL_TILE=tile)
    rng = np.random.default_rng(6)
    for op, xs, ws, attrs in (("Conv", (2, 20, 13, 11), (70, 20, 3, 3), {"pads": [1, 1, 1, 1]}),
                              ("ConvTranspose", (1, 24, 6, 5), (24, 33, 3, 3), {"strides": [2, 2]})):
        geo = kc.geometry(op, attrs, xs, ws)
        assert kc._conv_tiling(dev, geo).bm == int(tile.split(",")[0])
        check(dev, op, attrs, _arr(rng, xs, "float32"), _arr(rng, ws, "float32"))


def test_k_table():
    geo = kc.geometry("Conv", {"dilations": [2, 1]}, (1, 2, 5, 6), (3, 2, 2, 3))
    tab = kc.k_table(geo)
    assert tab.shape == (12, 2, 4)
    # k = c * taps + (ty * 3 + tx): offset c * 30 + ty * 2 * 6 + tx; weight offset k
    assert tuple(tab[7, 0]) == (30 + 0 * 12 + 1, 0, 0, 1) and tab[7, 1, 0] == 7
    assert tuple(tab[10, 0]) == (30 + 12 + 1, 0, 2, 1)
    geo_t = kc.geometry("ConvTranspose", {"group": 2}, (1, 4, 3), (4, 5, 2))
    tab_t = kc.k_table(geo_t)  # cg = 2, mg = 5, taps = 2: weight offset c * 10 + t
    assert [tuple(r) for r in tab_t[:, 1, :1]] == [(0,), (1,), (10,), (11,)]
    assert [int(v) for v in tab_t[:, 0, 0]] == [0, 0, 3, 3]


def test_unsupported(dev):
    k = get_kernel("Conv")
    f32 = lambda *s: TensorSpec(s, np.dtype(np.float32))  # noqa: E731
    assert k.supports(dev, "Conv", {}, [f32(1, 3, 8, 8), f32(4, 3, 3, 3)]) is None
    assert "float64" in k.supports(dev, "Conv", {}, [TensorSpec((1, 3, 8), np.dtype(np.float64)),
                                                     TensorSpec((4, 3, 3), np.dtype(np.float64))])
    assert "spatial" in k.supports(dev, "Conv", {}, [f32(1, 1, 2, 2, 2, 2), f32(1, 1, 1, 1, 1, 1)])
    assert "groups" in k.supports(dev, "Conv", {"group": 2}, [f32(1, 3, 8), f32(4, 3, 3)])
    assert "bias" in k.supports(dev, "Conv", {}, [f32(1, 3, 8), f32(4, 3, 3), f32(5)])
    assert "mixed" in k.supports(dev, "Conv", {}, [f32(1, 3, 8), TensorSpec((4, 3, 3), np.dtype(np.float16))])
    assert "kernel_shape" in k.supports(dev, "Conv", {"kernel_shape": [2]}, [f32(1, 3, 8), f32(4, 3, 3)])
    assert "no input channels" in k.supports(dev, "Conv", {}, [f32(1, 0, 8), f32(4, 0, 3)])
    t = get_kernel("ConvTranspose")
    assert t.supports(dev, "ConvTranspose", {"strides": [2]}, [f32(1, 3, 8), f32(3, 2, 3)]) is None
    assert "input channels" in t.supports(dev, "ConvTranspose", {}, [f32(1, 3, 8), f32(4, 2, 3)])


def test_validation_layer_clean(dev):
    code = textwrap.dedent("""
        import numpy as np
        import vkml.vulkan as vk
        from vkml.vulkan import _instance
        from vkml.runtime.testing import run_ops
        import vkml.kernels.conv
        assert _instance.instance().validation
        dev = vk.device(int(__import__("os").environ.get("VKML_TEST_DEVICE", "0")))
        rng = np.random.default_rng(0)
        for dt in ("float32", "float16"):
            f = lambda *s: rng.standard_normal(s).astype(dt)
            feeds = {"x": f(1, 6, 9, 8), "w": f(8, 3, 3, 3), "b": f(8), "wd": f(8, 1, 3, 3), "wp": f(5, 8, 1, 1),
                     "wt": f(5, 2, 2, 2), "xs": f(1, 64, 7, 7), "ws": f(32, 64, 3, 3), "bs": f(32)}
            out = run_ops(dev, [("Conv", {"pads": [1, 1, 1, 1]}, ["xs", "ws", "bs"], ["ys"]),  # split K
                                ("Conv", {"group": 2, "pads": [1, 1, 1, 1]}, ["x", "w", "b"], ["y"]),
                                ("Conv", {"group": 8, "strides": [2, 2]}, ["y", "wd"], ["z"]),
                                ("Conv", {}, ["z", "wp"], ["p"]),
                                ("ConvTranspose", {"strides": [2, 2]}, ["p", "wt"], ["t"])], feeds)
            assert out["t"].shape == (1, 2, 8, 6)
        vk.close_all()
        print("VALIDATION-CLEAN")
    """)
    run_validated(code)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("case", [
    # (N, C, H, W), (M, C/group, kh, kw), attrs: small outputs with long K, which split K
    ((1, 64, 7, 7), (32, 64, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((1, 64, 5, 5), (32, 32, 3, 3), {"pads": [1, 1, 1, 1], "group": 2}),  # K = 288
    ((2, 40, 6, 6), (16, 40, 3, 3), {"strides": [2, 2]}),
    ((1, 37, 4, 4), (9, 37, 3, 3), {"pads": [1, 1, 1, 1]}),  # K = 333, not a multiple of 4
])
def test_split_k(dev, case, dtype, monkeypatch):
    """Convolutions that leave most of the GPU idle split K over more workgroups and sum the
    partials in a second pass (shaders/splitk_reduce.comp), bias added there. The direct
    route is off: these small cases would take it."""
    monkeypatch.setattr(kc, "DIRECT_MAX_MACS", 0)
    xs, ws, attrs = case
    rng = np.random.default_rng(7)
    x, w, b = _arr(rng, xs, dtype), _arr(rng, ws, dtype), _arr(rng, (ws[0],), dtype)
    geo = kc.geometry("Conv", attrs, xs, ws)
    assert kc._route(geo) == "gemm"
    t = kc._conv_tiling(dev, geo)
    blocks = -(-geo.mg // t.bm) * -(-(geo.n * int(np.prod(geo.out_sp))) // t.bn) * geo.group
    s, ks = kc.gemm.split_k(blocks, geo.cg * geo.taps, t.bk, 1, 1 << 30)
    assert s > 1 and ks % t.bk == 0 and (s - 1) * ks < geo.cg * geo.taps <= s * ks
    check(dev, "Conv", attrs, x, w, b)
    check(dev, "Conv", attrs, x, w)


def test_split_k_choice():
    assert kc.gemm.split_k(200, 4608, 16, 100, 1 << 30) == (1, 4608)          # enough workgroups
    assert kc.gemm.split_k(8, 100, 16, 100, 1 << 30) == (1, 100)             # K too short
    s, ks = kc.gemm.split_k(8, 4608, 16, 100, 1 << 30)
    assert s == 32 and ks == 144 and s * ks >= 4608
    assert kc.gemm.split_k(8, 4608, 16, 100, 250)[0] == 2                     # partials must fit
    assert kc.gemm.split_k(8, 4608, 16, 100, 150) == (1, 4608)
