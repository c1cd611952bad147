"""Winograd F(2x2, 3x3) and F(4x4, 3x3) convolutions (kernels/winograd.py, shaders/winograd.comp) against vkml's
NumPy Conv over hypothesis-drawn shapes (images, channels, odd and even sizes, explicit and
automatic pads, bias), with the route forced (VKML_WINOGRAD=all) and checked to be taken; the
fused epilogues bit for bit against the separate ops; the shared scratch of several
convolutions in one recording; and the auto rule.

Tolerance: tests/vulkan/test_kernels_conv.py's float32 one, with the bound taken over each output
tile (the largest conv(|X|, |W|) of the T x T outputs that one transform computes together):
  |gpu - numpy| <= 1e-5 * tile max of conv(|X|, |W|) + 1e-6 * |B|
An output's error comes from its whole tile's transformed values (the output transform adds
them with factors up to 8 at T = 4), so an output at a padded edge, whose own bound is small,
carries the rounding of its neighbours'. On the H200, F(4x4, 3x3) broke the per-output bound.
"""
import os
import textwrap
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from vkml.kernels import conv as kc
from vkml.kernels import gemm, winograd
from vkml.ops import _winograd as wmath
from vkml.runtime.testing import run_ops
from _validated import run_validated  # noqa: E402
from test_kernels_conv import cpu

_N = int(os.environ.get("VKML_TEST_EXAMPLES", "25"))
HYP = settings(max_examples=_N, deadline=None, suppress_health_check=list(HealthCheck))


@pytest.fixture(params=[2, 4])
def taken(request, monkeypatch, vkml_env):
    """VKML_WINOGRAD=all, F(2x2, 3x3) or F(4x4, 3x3), and a list that gets one entry per
    convolution recorded through winograd.record."""
    vkml_env(VKML_WINOGRAD="all")
    monkeypatch.setattr(winograd, "TILE", request.param)
    calls = []
    real = winograd.record

    def spy(rec, geo, *a, **k):
        calls.append(geo)
        return real(rec, geo, *a, **k)

    monkeypatch.setattr(winograd, "record", spy)
    return calls


@st.composite
def case(draw):
    n = draw(st.integers(1, 3))
    c = draw(st.sampled_from([1, 2, 3, 8, 17, 40]))
    m = draw(st.sampled_from([1, 4, 7, 16, 33]))
    h, w = draw(st.integers(1, 11)), draw(st.integers(1, 11))
    attrs = {}
    mode = draw(st.sampled_from(["explicit", "explicit", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"]))
    if mode == "explicit":
        attrs["pads"] = [draw(st.integers(0, 2)) for _ in range(4)]
    elif mode != "NOTSET":
        attrs["auto_pad"] = mode
    if draw(st.booleans()):
        attrs["kernel_shape"] = [3, 3]
    return (n, c, h, w), (m, c, 3, 3), attrs, draw(st.booleans())


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@HYP
@given(cs=case(), seed=st.integers(0, 2**31))
def test_winograd_matches_numpy(dev, taken, dtype, cs, seed):
    x_shape, w_shape, attrs, bias = cs
    geo = kc.geometry("Conv", attrs, x_shape, w_shape)
    assume(all(o > 0 for o in geo.out_sp))
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, x_shape).astype(dtype)
    w = rng.uniform(-1, 1, w_shape).astype(dtype)
    b = rng.uniform(-1, 1, w_shape[:1]).astype(dtype) if bias else None
    taken.clear()
    with _direct_off():
        gemm_route = kc._route(geo) == "gemm"  # (one input channel is depthwise's)
        check(dev, attrs, x, w, b)
    assert len(taken) == int(gemm_route)


def check(dev, attrs, x, w, b=None):
    feeds, names = {"x": x, "w": w}, ["x", "w"]
    if b is not None:
        feeds["b"] = b
        names.append("b")
    got = run_ops(dev, [("Conv", attrs, names, ["y"])], feeds)["y"]
    want = cpu("Conv", attrs, x, w, b)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape)
    bound = wmath.tile_max(cpu("Conv", attrs, np.abs(x.astype(np.float64)), np.abs(w.astype(np.float64))), winograd.TILE)
    extra = 0.0 if b is None else np.abs(b.astype(np.float64)).reshape(-1, 1, 1)
    err = np.abs(got.astype(np.float64) - want.astype(np.float64))
    rtol = 2.0 ** -10 if got.dtype == np.float16 else 0.0  # (one float16 ulp: the output's rounding)
    bad = err > rtol * np.abs(want.astype(np.float64)) + 1e-5 * bound + 1e-6 * extra + 1e-30
    assert not bad.any(), (f"{bad.sum()} of {bad.size} off; worst {err.max()}, worst / tile bound "
                           f"{(err / np.maximum(bound, 1e-30)).max()}")


class _direct_off:
    """Small convolutions take the direct route before the GEMM one: send them to the GEMM route
    (where Winograd is decided) for the duration."""

    def __enter__(self):
        self.saved = kc.DIRECT_MAX_MACS
        kc.DIRECT_MAX_MACS = 0

    def __exit__(self, *exc):
        kc.DIRECT_MAX_MACS = self.saved


@pytest.mark.parametrize("epi,clip", [
    (gemm.EPI_RESIDUAL | gemm.EPI_RELU, gemm.NO_CLIP),
    (gemm.EPI_RELU, gemm.NO_CLIP),
    (gemm.EPI_RESIDUAL | gemm.EPI_CLIP, (-0.25, 0.5)),
    (gemm.EPI_LEAKY_RELU, (0.1, 0.0)),
    (gemm.EPI_SILU, gemm.NO_CLIP),
])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_fused_epilogue_bits(dev, taken, epi, clip, dtype):
    """A FusedConv on the Winograd route gives the bits of its Conv (the same route) followed by
    the separate Add and activation, NaN and -0 included in the residual; in float16 too (each
    step rounded to float16, as the separate ops round) on lavapipe, within a few float16 ulps on
    a driver that keeps some float16 roundings (the H200: 1-2 ulps)."""
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (2, 8, 9, 7)).astype(dtype)
    w = rng.uniform(-1, 1, (6, 8, 3, 3)).astype(dtype)
    b = rng.uniform(-1, 1, (6,)).astype(dtype)
    r = rng.uniform(-2, 2, (2, 6, 9, 7)).astype(dtype)
    r.reshape(-1)[:5] = [np.nan, -0.0, np.inf, -np.inf, 0.0]
    attrs = {"pads": [1, 1, 1, 1]}
    feeds = {"x": x, "w": w, "b": b, "r": r}
    with _direct_off():
        fused_attrs = dict(attrs, epilogue=epi, clip=list(clip))
        ins = ["x", "w", "b"] + (["r"] if epi & gemm.EPI_RESIDUAL else [])
        got = run_ops(dev, [("FusedConv", fused_attrs, ins, ["y"])], feeds)["y"]
        ops = [("Conv", attrs, ["x", "w", "b"], ["c"])]
        last = "c"
        if epi & gemm.EPI_RESIDUAL:
            ops.append(("Add", {}, ["c", "r"], ["a"]))
            last = "a"
        if epi & gemm.EPI_RELU:
            ops.append(("Relu", {}, [last], ["z"]))
        elif epi & gemm.EPI_CLIP:
            feeds.update(lo=np.array(clip[0], dtype), hi=np.array(clip[1], dtype))
            ops.append(("Clip", {}, [last, "lo", "hi"], ["z"]))
        elif epi & gemm.EPI_LEAKY_RELU:
            ops.append(("LeakyRelu", {"alpha": clip[0]}, [last], ["z"]))
        elif epi & gemm.EPI_SILU:
            ops += [("Sigmoid", {}, [last], ["s"]), ("Mul", {}, [last, "s"], ["z"])]
        want = run_ops(dev, ops, feeds, outputs=["z"])["z"]
    assert len(taken) == 2
    if dtype == np.float32 or dev.info.device_type == "cpu":
        np.testing.assert_array_equal(got.view(np.uint16 if dtype == np.float16 else np.uint32),
                                      want.view(np.uint16 if dtype == np.float16 else np.uint32))
    else:  # (NVIDIA keeps float(float16_t(x)) unrounded in places: a few float16 ulps, as tests/e2e/test_epilogue.py)
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=4e-3, atol=4e-3)


def test_fed_weights_take_the_direct_route(dev, taken):
    """Filters not known on the host (a fed W) cannot be transformed once: the implicit GEMM runs."""
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, (1, 8, 6, 6)).astype(np.float32)
    w = rng.uniform(-1, 1, (4, 8, 3, 3)).astype(np.float32)
    with _direct_off():
        got = run_ops(dev, [("Conv", {"pads": [1, 1, 1, 1]}, ["x", "w"], ["y"])], {"x": x, "w": w}, consts=False)["y"]
    assert not taken
    want = cpu("Conv", {"pads": [1, 1, 1, 1]}, x, w)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_chain_shares_scratch(dev, taken):
    """Three Winograd convolutions in one recording, the second needing more scratch than the
    first and the third less: each reads what the one before wrote, through the shared V and M
    buffers, and the chain matches the CPU's."""
    rng = np.random.default_rng(11)
    x = rng.uniform(-1, 1, (2, 4, 6, 5)).astype(np.float32)
    ws = [rng.uniform(-0.5, 0.5, s).astype(np.float32) for s in ((8, 4, 3, 3), (16, 8, 3, 3), (3, 16, 3, 3))]
    pads = [[2, 2, 2, 2], [1, 1, 1, 1], [0, 0, 0, 0]]
    feeds = {"x": x, "w0": ws[0], "w1": ws[1], "w2": ws[2]}
    ops = [("Conv", {"pads": pads[0]}, ["x", "w0"], ["y0"]), ("Conv", {"pads": pads[1]}, ["y0", "w1"], ["y1"]),
           ("Conv", {"pads": pads[2]}, ["y1", "w2"], ["y2"])]
    with _direct_off():
        got = run_ops(dev, ops, feeds, outputs=["y2"])["y2"]
    assert len(taken) == 3
    want = x
    for w, p in zip(ws, pads):
        want = cpu("Conv", {"pads": p}, want, w)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


# B^T and A^T as shaders/winograd.comp writes them out
BT = {2: [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]],
      4: [[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0], [0, -2, -1, 2, 1, 0],
          [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]]}
AT = {2: [[1, 1, 1, 0], [0, 1, -1, -1]],
      4: [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]]}


@pytest.mark.parametrize("t", [2, 4])
def test_transformed_weights_exact(t):
    """U = G g G^T, then A^T (U . B^T d B) A, is the t x t correlation of d with g (float64)."""
    rng = np.random.default_rng(2)
    g = rng.standard_normal((1, 1, 3, 3))
    d = rng.standard_normal((t + 2, t + 2))
    bt, at = np.array(BT[t], np.float64), np.array(AT[t], np.float64)
    u = np.einsum("ai,ij,bj->ab", wmath.G[t], g[0, 0], wmath.G[t])
    y = at @ (u * (bt @ d @ bt.T)) @ at.T
    want = np.array([[np.sum(d[i:i + 3, j:j + 3] * g[0, 0]) for j in range(t)] for i in range(t)])
    np.testing.assert_allclose(y, want, rtol=1e-12, atol=1e-12)
    assert wmath.transformed_weights(g.astype(np.float32), t).shape == ((t + 2) ** 2, 1, 1)
    np.testing.assert_allclose(wmath.transformed_weights(g, t)[:, 0, 0], u.reshape(-1), rtol=1e-6)


def test_auto_rule(vkml_env):
    """auto: 3x3 stride 1, one group, float32 or float16, both channel counts >= MIN_CHANNELS and >= MIN_MACS
    multiply-adds; all: any eligible one; off: none; and never without host filters."""
    dev = SimpleNamespace(max_storage_buffer_range=1 << 32)
    w = np.zeros((64, 64, 3, 3), np.float32)
    big = kc.geometry("Conv", {"pads": [1, 1, 1, 1]}, (32, 64, 56, 56), (64, 64, 3, 3))
    b1 = kc.geometry("Conv", {"pads": [1, 1, 1, 1]}, (1, 64, 56, 56), (64, 64, 3, 3))  # 115 M
    b2 = kc.geometry("Conv", {"pads": [1, 1, 1, 1]}, (2, 64, 56, 56), (64, 64, 3, 3))
    narrow = kc.geometry("Conv", {"pads": [1, 1, 1, 1]}, (32, 16, 56, 56), (64, 16, 3, 3))
    strided = kc.geometry("Conv", {"pads": [1, 1, 1, 1], "strides": [2, 2]}, (32, 64, 56, 56), (64, 64, 3, 3))
    grouped = kc.geometry("Conv", {"pads": [1, 1, 1, 1], "group": 2}, (32, 64, 56, 56), (64, 32, 3, 3))
    f32 = np.dtype(np.float32)
    vkml_env(VKML_WINOGRAD=None)
    assert winograd.chosen(dev, big, f32, w) and winograd.chosen(dev, b2, f32, w)
    assert not winograd.chosen(dev, big, f32, None)
    assert winograd.chosen(dev, big, np.dtype(np.float16), w)
    assert not winograd.chosen(dev, big, np.dtype(np.float64), w)
    assert not any(winograd.chosen(dev, g, f32, w) for g in (b1, narrow, strided, grouped))
    vkml_env(VKML_WINOGRAD="all")
    assert winograd.chosen(dev, b1, f32, w) and winograd.chosen(dev, narrow, f32, w)
    assert not winograd.chosen(dev, strided, f32, w) and not winograd.chosen(dev, grouped, f32, w)
    vkml_env(VKML_WINOGRAD="off")
    assert not winograd.chosen(dev, big, f32, w)
    vkml_env(VKML_WINOGRAD="sometimes")
    with pytest.raises(ValueError, match="VKML_WINOGRAD"):
        winograd.chosen(dev, big, f32, w)
    small = SimpleNamespace(max_storage_buffer_range=1 << 20)  # V would not fit one binding
    vkml_env(VKML_WINOGRAD="all")
    assert not winograd.chosen(small, big, f32, w)


def test_validation_clean(dev):
    code = textwrap.dedent("""
        import os
        os.environ["VKML_WINOGRAD"] = "all"
        import numpy as np
        import vkml.vulkan as vk
        from vkml.kernels import conv as kc
        from vkml.runtime.testing import run_ops
        kc.DIRECT_MAX_MACS = 0
        rng = np.random.default_rng(0)
        x = rng.uniform(-1, 1, (2, 5, 7, 6)).astype(np.float32)
        w = rng.uniform(-1, 1, (3, 5, 3, 3)).astype(np.float32)
        b = rng.uniform(-1, 1, (3,)).astype(np.float32)
        run_ops(0, [("Conv", {"pads": [1, 0, 1, 2]}, ["x", "w", "b"], ["y"])], {"x": x, "w": w, "b": b})
        vk.close_all()
        print("VALIDATION-CLEAN")
    """)
    run_validated(code)


def test_filters_transformed_once_per_array(dev, taken):
    """A weight array's transformed filters are uploaded once per device and tile, shared by the
    recordings that use it, and dropped when the array dies."""
    import gc
    rng = np.random.default_rng(8)
    x = rng.uniform(-1, 1, (1, 4, 6, 6)).astype(np.float32)
    w = rng.uniform(-1, 1, (3, 4, 3, 3)).astype(np.float32)
    before = len(winograd._uploads)
    with _direct_off():
        a = run_ops(dev, [("Conv", {"pads": [1] * 4}, ["x", "w"], ["y"])], {"x": x, "w": w})["y"]
        assert len(winograd._uploads) == before + 1
        b = run_ops(dev, [("Conv", {"pads": [1] * 4}, ["x", "w"], ["y"])], {"x": x, "w": w})["y"]
        assert len(winograd._uploads) == before + 1
    assert len(taken) == 2
    np.testing.assert_array_equal(a, b)
    del w
    gc.collect()
    assert len(winograd._uploads) == before
