"""float16 Conv on tensor cores (vkml/kernels/conv_coop.py, shaders/conv_coop.comp) against
NumPy and against conv.comp's SIMT float16 path, over hypothesis-drawn geometries (channels,
spatial sizes, kernels 1/3/7, strides 1/2, pads, dilations, bias, fused epilogues), the
tilings, split K, groups and 1-3 spatial dims. Those need a device with a usable
VK_KHR_cooperative_matrix float16 shape (an NVIDIA GPU) and skip elsewhere; the selection rule
(a fake device) and the SPIR-V checks run everywhere.

    python -m pytest -q tests/vulkan/test_kernels_conv_coop.py

Tolerance: the GPU sums float16 products in float32 (in another order than NumPy), rounds to
float16, then runs the epilogue's steps, each rounded to float16 as the separate ops would:
  |gpu - want| <= 2^-10 * (|want| + |v|) + 1e-5 * conv(|X|, |W|) + 1e-6 * |B|
where want is the float64 convolution (+ bias) through the same float16 roundings and v its
value before the epilogue: one float16 ulp of the result and one of the convolution where the
two sums round to neighbouring float16 values before a residual Add.
"""
import math
import os
import shutil
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from vkml.ir.graph import Node
from vkml.kernels import conv as kc
from vkml.kernels import conv_coop, gemm, matmul_coop
from vkml.ops.registry import lookup
from vkml.runtime.testing import run_ops
from vkml.vulkan.info import CoopMatrixShape
from _validated import run_validated  # noqa: E402

_N = int(os.environ.get("VKML_TEST_EXAMPLES", "25"))
HYP = settings(max_examples=_N, deadline=None, suppress_health_check=list(HealthCheck))
ULP = 2.0 ** -10
F16 = np.dtype(np.float16)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EPILOGUES = [0, gemm.EPI_RELU, gemm.EPI_RESIDUAL, gemm.EPI_RESIDUAL | gemm.EPI_RELU, gemm.EPI_CLIP,
             gemm.EPI_SILU, gemm.EPI_SIGMOID, gemm.EPI_HARD_SIGMOID, gemm.EPI_RESIDUAL | gemm.EPI_HARD_SWISH,
             gemm.EPI_LEAKY_RELU]
CLIP = (-0.5, 2.0)
# The epilogue's (ELO, EHI) for each flag that takes them: Clip's bounds, the activations' alpha, beta
PARAMS = {gemm.EPI_CLIP: CLIP, gemm.EPI_HARD_SIGMOID: (0.3, 0.4), gemm.EPI_HARD_SWISH: (1 / 6, 0.5),
          gemm.EPI_LEAKY_RELU: (0.15, 0.0)}


def _params(epi):
    """The (ELO, EHI) pair `epi` takes, else None."""
    return next((p for f, p in PARAMS.items() if epi & f), None)


def cpu(op_type, attrs, *inputs, opset=22):
    names = [f"i{k}" if x is not None else "" for k, x in enumerate(inputs)]
    node = Node("n", op_type, "", names, ["y"], dict(attrs), opset)
    return lookup("", op_type, opset)(node).run(*inputs)[0]


def _arr(rng, shape):
    return rng.uniform(-1, 1, shape).astype(np.float16)


def _f16(v):
    return np.asarray(v, np.float64).astype(np.float16).astype(np.float64)


def reference(attrs, x, w, b, r, epi):
    """(want, v, bound, bias term): the float64 convolution + bias rounded to float16 (v), then
    the epilogue's steps as shaders/include/vkml_epilogue.glsl takes them, each rounded."""
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    s = cpu("Conv", attrs, x64, w64)
    extra = 0.0
    if b is not None:
        bias = b.astype(np.float64).reshape((-1,) + (1,) * (x.ndim - 2))
        s = s + bias
        extra = np.abs(bias)
    v = _f16(s)
    y = v
    if epi & gemm.EPI_RESIDUAL:
        y = _f16(y + r.astype(np.float64))
    if epi & gemm.EPI_RELU:
        y = np.maximum(y, 0.0)
    if epi & gemm.EPI_CLIP:
        y = np.clip(y, *CLIP)
    if epi & gemm.EPI_SILU:
        y = _f16(y * _f16(1.0 / (1.0 + np.exp(-y))))
    alpha, beta = np.float32(_params(epi) or (0.0, 0.0))  # (as the push constants carry them)
    if epi & gemm.EPI_SIGMOID:
        y = _f16(1.0 / (1.0 + np.exp(-y)))
    if epi & gemm.EPI_HARD_SIGMOID:
        y = _f16(np.clip(alpha * y + beta, 0.0, 1.0))
    if epi & gemm.EPI_HARD_SWISH:
        y = _f16(y * np.clip(alpha * y + beta, 0.0, 1.0))
    if epi & gemm.EPI_LEAKY_RELU:
        y = _f16(np.where(y < 0, alpha * y, y))
    bound = cpu("Conv", attrs, np.abs(x64), np.abs(w64))
    return y, v, bound, extra


def assert_close(got, want, v, bound, extra, scale=1.0, what=""):
    assert got.dtype == F16 and got.shape == want.shape, (got.dtype, got.shape, want.shape)
    g = got.astype(np.float64)
    tol = scale * (ULP * (np.abs(want) + np.abs(v)) + 1e-5 * bound + 1e-6 * extra) + 1e-30
    bad = ~(np.abs(g - want) <= tol)  # (NaN fails)
    assert not bad.any(), f"{what}: {bad.sum()} of {bad.size} off; worst {np.nanmax(np.abs(g - want))}"


def run_conv(dev, attrs, x, w, b=None, r=None, epi=0):
    """The convolution through ConvKernel (epi 0, no residual) or FusedConvKernel."""
    feeds, names = {"x": x, "w": w}, ["x", "w", ""]
    if b is not None:
        feeds["b"] = b
        names[2] = "b"
    if epi == 0:
        return run_ops(dev, [("Conv", attrs, [n for n in names if n], ["y"])], feeds)["y"]
    names.append("")
    if epi & gemm.EPI_RESIDUAL:
        feeds["r"] = r
        names[3] = "r"
    fattrs = dict(attrs, epilogue=epi, clip=_params(epi))
    return run_ops(dev, [(kc.FUSED_CONV, fattrs, names, ["y"])], feeds)["y"]


def _coop_or_skip(dev):
    if matmul_coop.device_shape(dev) is None:
        pytest.skip(f"{dev.info.device_name} has no usable VK_KHR_cooperative_matrix float16 shape")


@pytest.fixture
def coop(dev, monkeypatch, vkml_env):
    """A device with cooperative matrices, and every implicit-GEMM convolution of the tests on
    them: the size threshold off, small ones kept off the direct route."""
    _coop_or_skip(dev)
    vkml_env(VKML_COOP="1", VKML_COOP_TILE=None)
    monkeypatch.setattr(conv_coop, "MIN_MACS", 0)
    monkeypatch.setattr(kc, "DIRECT_MAX_MACS", 0)
    return dev


def _planned(dev, attrs, x_shape, w_shape):
    """conv_coop's plan for a convolution the kernel records on the implicit-GEMM route."""
    geo = kc.geometry("Conv", attrs, x_shape, w_shape)
    assert kc._route(geo) == "gemm", kc._route(geo)
    p = conv_coop.plan(dev, geo, np.float16)
    assert p is not None, "the convolution should take the tensor-core path"
    return geo, p


def check_case(dev, vkml_env, attrs, x_shape, w_shape, bias, epi, seed, simt=True):
    """The coop result against NumPy, and (simt) against conv.comp's float16 result."""
    rng = np.random.default_rng(seed)
    x, w = _arr(rng, x_shape), _arr(rng, w_shape)
    b = _arr(rng, (w_shape[0],)) if bias else None
    geo, p = _planned(dev, attrs, x_shape, w_shape)
    r = _arr(rng, geo.out_shape) if epi & gemm.EPI_RESIDUAL else None
    want, v, bound, extra = reference(attrs, x, w, b, r, epi)
    got = run_conv(dev, attrs, x, w, b, r, epi)
    what = f"{x_shape} {w_shape} {attrs} bias={bias} epi={epi} {p}"
    assert_close(got, want, v, bound, extra, what=what)
    if simt:
        vkml_env(VKML_COOP="0")
        assert conv_coop.plan(dev, geo, np.float16) is None
        ref = run_conv(dev, attrs, x, w, b, r, epi)
        vkml_env(VKML_COOP="1")
        assert_close(got, ref.astype(np.float64), v, bound, extra, scale=2.0, what="vs SIMT " + what)
    return p


@st.composite
def coop_case(draw):
    rank = draw(st.sampled_from([2, 2, 2, 2, 1, 3]))
    kernel = draw(st.sampled_from([1, 3, 7] if rank < 3 else [1, 3]))
    stride = draw(st.sampled_from([1, 2]))
    dil = draw(st.sampled_from([1, 1, 2]))
    span = (kernel - 1) * dil + 1
    hi = 24 if rank == 1 else (14 if rank == 2 else 6)
    spatial = [draw(st.integers(max(1, span - 2), max(span, hi))) for _ in range(rank)]
    pads = [draw(st.integers(0, (span - 1) // 2 + 1)) for _ in range(2 * rank)]
    attrs = {"strides": [stride] * rank, "dilations": [dil] * rank, "pads": pads}
    c = draw(st.sampled_from([3, 8, 16, 19, 32]))   # K = c * taps: multiples of 8 or not
    m = draw(st.sampled_from([16, 24, 40, 72, 136]))  # ragged against 64- and 128-row blocks
    n = draw(st.integers(1, 2))
    return (n, c, *spatial), (m, c) + (kernel,) * rank, attrs


@HYP
@given(case=coop_case(), bias=st.booleans(), epi=st.sampled_from(EPILOGUES), seed=st.integers(0, 2**31))
def test_conv_coop(coop, vkml_env, case, bias, epi, seed):
    x_shape, w_shape, attrs = case
    try:
        geo = kc.geometry("Conv", attrs, x_shape, w_shape)
    except ValueError:
        assume(False)
    assume(all(o > 0 for o in geo.out_sp) and kc._route(geo) == "gemm")  # (1x1 unit-stride unpadded: MatMul)
    assume(geo.n * math.prod(geo.out_sp) >= 16)  # (fewer output columns than a matrix tile: conv.comp)
    check_case(coop, vkml_env, attrs, x_shape, w_shape, bias, epi, seed)


@pytest.mark.parametrize("x_shape, w_shape, attrs", [
    ((2, 32, 12, 12), (48, 16, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),               # groups along z
    ((1, 57, 9, 11), (96, 19, 3, 3), {"group": 3, "strides": [2, 1], "pads": [1, 0, 1, 2]}),
    ((2, 16, 40), (24, 16, 5), {"pads": [2, 2], "dilations": [2]}),                         # 1-D
    ((1, 8, 6, 7, 8), (20, 8, 3, 3, 3), {"pads": [1] * 6}),                                # 3-D
    ((1, 8, 5, 9, 6), (17, 8, 3, 1, 3), {"strides": [2, 1, 2], "pads": [0, 1, 1, 1, 0, 2]}),
    ((2, 3, 33, 35), (64, 3, 7, 7), {"strides": [2, 2], "pads": [3, 3, 3, 3]}),            # a stem: K = 147
    ((2, 64, 10, 10), (128, 64, 1, 1), {"strides": [2, 2]}),                               # 1x1 downsample
], ids=lambda v: str(v).replace(" ", "") if isinstance(v, tuple) else None)
@pytest.mark.parametrize("epi", [0, gemm.EPI_RESIDUAL | gemm.EPI_RELU])
def test_groups_ranks_and_layouts(coop, vkml_env, x_shape, w_shape, attrs, epi):
    p = check_case(coop, vkml_env, attrs, x_shape, w_shape, True, epi, 11)
    k = w_shape[1] * math.prod(w_shape[2:])
    assert p.a_vec == (k % conv_coop.VEC == 0)  # both weight loads: vectors and value by value


@pytest.mark.parametrize("tile", ["128,128,32,64,64", "128,64,32,64,32", "64,64,32,32,32", "128,128,32,64,64,1",
                                  "64,64,128,32,32,1", "128,256,16,64,64", "256,128,32,64,64,1"])
def test_tilings(coop, vkml_env, tile):
    """Every tiling the selection picks from and the VKML_COOP_TILE ones of matmul's tests, K
    over several tiles, ragged M, N * P and K."""
    vkml_env(VKML_COOP_TILE=tile)
    for x_shape, w_shape, attrs in (((2, 19, 13, 11), (136, 19, 3, 3), {"pads": [1, 1, 1, 1]}),
                                    ((1, 40, 9, 9), (72, 40, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]})):
        geo = kc.geometry("Conv", attrs, x_shape, w_shape)
        t = conv_coop.plan(coop, geo, np.float16).tiling
        assert ",".join(map(str, (t.bm, t.bn, t.bk, t.wm, t.wn) + ((1,) if t.stages == 1 else ()))) == tile
        check_case(coop, vkml_env, attrs, x_shape, w_shape, True, gemm.EPI_RESIDUAL | gemm.EPI_RELU, 3, simt=False)


@pytest.mark.parametrize("x_shape, w_shape, attrs", [
    ((1, 256, 7, 7), (512, 256, 3, 3), {"pads": [1, 1, 1, 1]}),   # ResNet's last 3x3s at batch 1
    ((1, 64, 9, 9), (32, 64, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((2, 37, 12, 12), (24, 37, 3, 3), {"strides": [2, 2]}),       # K = 333: not a multiple of the split
])
@pytest.mark.parametrize("epi", [0, gemm.EPI_RESIDUAL | gemm.EPI_RELU, gemm.EPI_SILU, gemm.EPI_HARD_SWISH])
def test_split_k(coop, vkml_env, x_shape, w_shape, attrs, epi):
    """Few output blocks and a long K: partial sums in float32, the bias and the epilogue in
    splitk_reduce's pass."""
    geo, p = _planned(coop, attrs, x_shape, w_shape)
    t = p.tiling
    k = geo.cg * geo.taps
    s, ks = gemm.split_k(t.blocks(geo.mg, geo.n * math.prod(geo.out_sp), geo.group), k, t.bk, 4, 1 << 30)
    assert s > 1 and ks % t.bk == 0 and (s - 1) * ks < k <= s * ks
    check_case(coop, vkml_env, attrs, x_shape, w_shape, True, epi, 7)
    check_case(coop, vkml_env, attrs, x_shape, w_shape, False, epi, 8, simt=False)


@pytest.mark.parametrize("x_shape, w_shape, attrs", [
    ((1, 3, 224, 224), (64, 3, 7, 7), {"strides": [2, 2], "pads": [3, 3, 3, 3]}),
    ((2, 64, 56, 56), (64, 64, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((2, 128, 56, 56), (128, 128, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((2, 256, 28, 28), (512, 256, 1, 1), {"strides": [2, 2]}),
], ids=["stem", "layer1", "layer2-down", "proj"])
def test_resnet50_convs_take_it(dev, vkml_env, x_shape, w_shape, attrs):
    """ResNet-50's implicit-GEMM convolutions pick the tensor cores at their real size (no
    threshold moved) and match NumPy."""
    _coop_or_skip(dev)
    vkml_env(VKML_COOP="1", VKML_COOP_TILE=None)
    check_case(dev, vkml_env, attrs, x_shape, w_shape, True, gemm.EPI_RESIDUAL | gemm.EPI_RELU, 5, simt=False)


def test_validation_layer_clean(dev):
    """Convolutions on cooperative matrices (split K and not, aligned weights and not) under
    the Khronos validation layer, cooperative matrices kept on (VKML_VALIDATION_COOPMAT)."""
    _coop_or_skip(dev)
    code = textwrap.dedent("""
        import numpy as np
        import vkml.vulkan as vk
        from vkml.kernels import conv as kc, conv_coop, matmul_coop
        from vkml.runtime.testing import run_ops
        dev = vk.device(int(__import__("os").environ.get("VKML_TEST_DEVICE", "0")))
        assert matmul_coop.device_shape(dev) is not None
        rng = np.random.default_rng(0)
        f = lambda *s: rng.standard_normal(s).astype(np.float16)
        cases = [((2, 16, 30, 30), (40, 16, 3, 3), {"pads": [1, 1, 1, 1]}),
                 ((2, 3, 64, 64), (32, 3, 7, 7), {"strides": [2, 2], "pads": [3, 3, 3, 3]}),
                 ((1, 256, 7, 7), (512, 256, 3, 3), {"pads": [1, 1, 1, 1]})]
        conv_coop.MIN_MACS = 0
        for xs, ws, attrs in cases:
            assert conv_coop.plan(dev, kc.geometry("Conv", attrs, xs, ws), np.float16) is not None
            out = run_ops(dev, [("Conv", attrs, ["x", "w", "b"], ["y"])], {"x": f(*xs), "w": f(*ws), "b": f(ws[0])})
            assert np.isfinite(out["y"].astype(np.float32)).all()
        vk.close_all()
        print("VALIDATION-CLEAN")
    """)
    try:
        run_validated(code, VKML_VALIDATION_COOPMAT="1")
    except AssertionError as e:
        # Debian 12's / Ubuntu 24.04's layer (1.3.239) predates the extension and says so
        if "VK_KHR_cooperative_matrix is not supported by this layer" in str(e):
            pytest.skip("the validation layer predates VK_KHR_cooperative_matrix")
        raise


# ---------------------------------------------------------------- everywhere
def fake_device(shapes=((16, 16, 16),), sg=32, shared=48 * 1024, features=matmul_coop.FEATURES):
    """What conv_coop.plan reads of a device: features, cooperative-matrix shapes, limits."""
    coop = tuple(CoopMatrixShape(m, n, k, "f16", "f16", "f32", "f32", False, "subgroup") for m, n, k in shapes)
    limits = {"max_compute_work_group_invocations": 1024, "max_compute_work_group_size": [1024, 1024, 64],
              "max_compute_shared_memory_size": shared}
    return SimpleNamespace(features=set(features), info=SimpleNamespace(cooperative_matrix=coop, subgroup_size=sg),
                           limits=limits)


def _pick(device, x_shape, w_shape, attrs=None, op="Conv", dtype=np.float16):
    """The plan ConvKernel would record with: on the implicit-GEMM route only."""
    geo = kc.geometry(op, attrs or {}, x_shape, w_shape)
    if kc._route(geo) != "gemm":
        return None
    return conv_coop.plan(device, geo, dtype)


def test_selection(vkml_env):
    vkml_env(VKML_COOP=None, VKML_COOP_TILE=None)
    dev = fake_device()
    pad1 = {"pads": [1, 1, 1, 1]}
    # ResNet-50 at batch 32: 64 channels take 64-row blocks, wider layers the biggest block
    # that still gives a wave of workgroups
    p = _pick(dev, (32, 64, 56, 56), (64, 64, 3, 3), pad1)
    assert p is not None and p.a_vec and p.shape == matmul_coop.CoopShape(16, 16, 16)
    assert (p.tiling.bm, p.tiling.bn) == (64, 64)
    assert (_pick(dev, (32, 128, 28, 28), (128, 128, 3, 3), pad1).tiling.bm,) == (128,)
    assert _pick(dev, (32, 256, 14, 14), (256, 256, 3, 3), pad1).tiling == matmul_coop.TILINGS[1]
    stem = _pick(dev, (1, 3, 224, 224), (64, 3, 7, 7), {"strides": [2, 2], "pads": [3, 3, 3, 3]})
    assert stem is not None and not stem.a_vec  # K = 147: weights value by value
    assert _pick(dev, (8, 256, 14, 14), (512, 256, 1, 1), {"strides": [2, 2]}) is not None  # strided 1x1
    assert _pick(dev, (1, 512, 7, 7), (512, 512, 3, 3), pad1) is not None  # few blocks: split K
    assert _pick(dev, (4, 64, 20, 20), (64, 32, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}) is not None
    assert _pick(dev, (2, 16, 40, 40, 40), (32, 16, 3, 3, 3)) is not None  # 3-D
    # not taken
    assert _pick(dev, (32, 64, 56, 56), (64, 64, 3, 3), pad1, dtype=np.float32) is None
    assert _pick(dev, (1, 64, 56, 56), (64, 64, 1, 1)) is None              # pointwise: MatMul's path
    assert _pick(dev, (8, 64, 56, 56), (64, 1, 3, 3), {"group": 64}) is None  # depthwise: conv_dw
    assert _pick(dev, (1, 1, 28, 28), (8, 1, 5, 5)) is None                  # small: the direct route
    assert _pick(dev, (1, 32, 24, 24), (32, 32, 3, 3), pad1) is None         # 5.3 M multiply-adds
    assert _pick(dev, (8, 64, 56, 56), (8, 64, 3, 3), pad1) is None          # 8 output channels
    assert _pick(dev, (8, 128, 56, 56), (128, 4, 3, 3), {"group": 32, "pads": [1] * 4}) is None  # 4 per group
    geo = kc.geometry("ConvTranspose", {"strides": [2, 2]}, (8, 256, 28, 28), (256, 128, 3, 3))
    assert conv_coop.plan(dev, geo, np.float16) is None                     # ConvTranspose
    assert _pick(fake_device(shapes=()), (32, 64, 56, 56), (64, 64, 3, 3), pad1) is None
    assert _pick(fake_device(features=("cooperative_matrix",)), (32, 64, 56, 56), (64, 64, 3, 3), pad1) is None
    vkml_env(VKML_COOP="0")
    assert _pick(dev, (32, 64, 56, 56), (64, 64, 3, 3), pad1) is None


def test_selection_limits_and_forced_tiles(vkml_env):
    vkml_env(VKML_COOP=None, VKML_COOP_TILE=None)
    geo = kc.geometry("Conv", {"pads": [1, 1, 1, 1]}, (32, 128, 28, 28), (128, 128, 3, 3))
    assert conv_coop.plan(fake_device(), geo, np.float16).tiling == matmul_coop.TILINGS[0]
    # 128x128x32 double-buffered needs 40 KiB of shared memory
    assert conv_coop.plan(fake_device(shared=32 * 1024), geo, np.float16).tiling == matmul_coop.TILINGS[1]
    assert conv_coop.plan(fake_device(sg=64), geo, np.float16).tiling == matmul_coop.TILINGS[0]
    assert conv_coop.plan(fake_device(shapes=((16, 8, 16),)), geo, np.float16).shape.n == 8
    p = conv_coop.plan(fake_device(), geo, np.float16, w_offset=8)
    assert not p.a_vec  # weights not 16-byte aligned: value by value
    vkml_env(VKML_COOP_TILE="64,64,128,32,32,1")
    assert conv_coop.plan(fake_device(), geo, np.float16).tiling == matmul_coop.SKINNY
    vkml_env(VKML_COOP_TILE="64,128,32,64,64")  # 2 subgroups, 128 columns: conv.comp runs
    assert conv_coop.plan(fake_device(), geo, np.float16) is None
    vkml_env(VKML_COOP_TILE="64,64,32,48,32")
    with pytest.raises(ValueError, match="VKML_COOP_TILE"):
        conv_coop.plan(fake_device(), geo, np.float16)


def test_no_coop_device_keeps_simt(dev, vkml_env):
    """Where the device has no cooperative matrices (lavapipe) or VKML_COOP=0, float16 Conv
    stays on conv.comp, and gives what NumPy gives."""
    xs, ws = (2, 64, 24, 24), (64, 64, 3, 3)  # 42 M multiply-adds: big enough for tensor cores
    geo = kc.geometry("Conv", {"pads": [1, 1, 1, 1]}, xs, ws)
    assert kc._route(geo) == "gemm" and conv_coop.plan(fake_device(), geo, np.float16) is not None
    if matmul_coop.device_shape(dev) is not None:
        vkml_env(VKML_COOP="0")
    assert conv_coop.plan(dev, geo, np.float16) is None
    rng = np.random.default_rng(2)
    x, w, b = _arr(rng, xs), _arr(rng, ws), _arr(rng, (ws[0],))
    want, v, bound, extra = reference({"pads": [1, 1, 1, 1]}, x, w, b, None, 0)
    assert_close(run_conv(dev, {"pads": [1, 1, 1, 1]}, x, w, b), want, v, bound, extra)


def test_variants_built():
    """A conv_coop variant for every cooperative-matrix shape matmul_coop may pick."""
    for m, n, k in matmul_coop.SHAPES:
        assert os.path.exists(os.path.join(ROOT, "vkml", "spv", f"conv_coop_{m}x{n}x{k}_f16.spv")), (m, n, k)
    push = kc.CONV_PUSH.size
    assert push <= 128 and push == 108


def test_pipelines_match_the_spirv(dev):
    """The bindings, push constants and workgroup size conv.py records conv_coop with agree with
    each variant's SPIR-V (reflection only: nothing is compiled, so any device will do)."""
    for m, n, k in matmul_coop.SHAPES:
        for t in matmul_coop.TILINGS:
            p = conv_coop.CoopConv(matmul_coop.CoopShape(m, n, k), t, True)
            name, spec = conv_coop.variant(dev, p, True)
            pipe = dev.pipeline(name, "rrrwrwr", kc.CONV_PUSH.size, spec)
            assert pipe.nbindings == 7 and pipe.local_size[0] == t.warps * dev.info.subgroup_size


def _spirv_vals():
    cands = [os.path.join(os.path.dirname(sys.executable), "spirv-val"), shutil.which("spirv-val")]
    return [c for c in dict.fromkeys(cands) if c and os.path.exists(c)]


def test_coop_shaders_are_valid_spirv():
    """The committed cooperative-matrix SPIR-V (conv_coop's and matmul_coop's, which share
    include/vkml_coop.glsl) passes spirv-val for Vulkan 1.1 (the build's target) and 1.3; a
    validator too old for SPV_KHR_cooperative_matrix is passed over."""
    spv = os.path.join(ROOT, "vkml", "spv")
    paths = sorted(os.path.join(spv, f) for f in os.listdir(spv) if f.startswith(("conv_coop_", "matmul_coop_")))
    assert len(paths) == 5 * len(matmul_coop.SHAPES)  # conv; matmul v4, v8, each also with GELU (_epi)
    for tool in _spirv_vals():
        rs = [(p, env, subprocess.run([tool, "--target-env", env, p], capture_output=True, text=True))
              for p in paths for env in ("vulkan1.1", "vulkan1.3")]
        if any("Invalid capability operand" in r.stdout + r.stderr for _, _, r in rs):
            continue
        for p, env, r in rs:
            assert r.returncode == 0, f"{os.path.basename(p)} ({env}): {r.stdout}{r.stderr}"
        return
    pytest.skip("no spirv-val that knows SPV_KHR_cooperative_matrix (put one on PATH)")


def test_gemm_tiling_by_product_shape(vkml_env):
    """matmul_coop.choose: short products (K <= SHORT_K: CNNs' pointwise convolutions) take the
    64x64 single-buffered block, long square ones the 128x128 default, skinny long ones SKINNY."""
    vkml_env(VKML_COOP=None, VKML_COOP_TILE=None)
    dev, shape = fake_device(), matmul_coop.CoopShape(16, 16, 16)

    def pick(m, n, k, batch=1):
        return matmul_coop.choose(dev, gemm.Gemm(m, n, k, False, False, 0, 0, [batch], [0], [0]), shape)

    assert pick(256, 3136, 64, 32) == matmul_coop.SHORT  # ResNet-50 stage 1 at batch 32
    assert pick(256, 196, 1024, 32) == matmul_coop.SHORT
    assert pick(4096, 4096, 4096) == matmul_coop.TILINGS[0]
    assert pick(64, 4096, 4096) == matmul_coop.SKINNY
    assert pick(256, 196, 1025, 32) == matmul_coop.TILINGS[0]
    vkml_env(VKML_COOP_TILE="128,64,32,64,32")
    assert pick(256, 3136, 64, 32) == matmul_coop.CoopTiling(128, 64, 32, 64, 32)


def test_plain_coop_gemms_leave_the_heavy_epilogues_out():
    """GELU and the correctly rounded division compiled into the cooperative-matrix shader made
    every fp16 GEMM on it 5.6x slower on an H100 (bench/results/checks/
    h100-2026-11-25-coop-epilogue-variant.txt): only the *_epi_f16 variants may carry them, and
    matmul_coop.py takes those only for the epilogues that need them."""
    spv = os.path.join(ROOT, "vkml", "spv")
    for m, n, k in matmul_coop.SHAPES:
        for vec in (8, 4):
            base = os.path.join(spv, f"matmul_coop_{m}x{n}x{k}_v{vec}")
            plain, heavy = open(base + "_f16.spv", "rb").read(), open(base + "_epi_f16.spv", "rb").read()
            for name in (b"vkml_erf", b"vkml_tanh", b"vkml_div"):
                assert name not in plain, (base, name)
                assert name in heavy, (base, name)
    # (and the CNN activations: +8% at 512^3 with them compiled in, checks/h200-2026-11-28-cnn-activation-epilogues.txt)
    assert matmul_coop.HEAVY_EPILOGUES == (gemm.EPI_GELU | gemm.EPI_GELU_TANH | gemm.EPI_DIV | gemm.EPI_SIGMOID
                                           | gemm.EPI_HARD_SIGMOID | gemm.EPI_HARD_SWISH | gemm.EPI_LEAKY_RELU)
