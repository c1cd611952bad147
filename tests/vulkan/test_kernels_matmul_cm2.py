"""The VK_NV_cooperative_matrix2 GEMM (shaders/matmul_cm2.comp, kernels/matmul_cm2.py) against
vkml's NumPy operators: hypothesis over ragged and aligned sizes, transposes, batch
broadcasting, split K and every tiling the device's workgroup-scope matrices take. Only devices
with the extension run them (NVIDIA); elsewhere they skip, and the selection tests check that
nothing takes the path.

Tolerance as tests/vulkan/test_kernels_matmul.py's for float16: both sides accumulate in
float32 (in different orders) and round once to float16.
"""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vkml.kernels import gemm
from vkml.kernels import matmul as mm
from vkml.kernels import matmul_cm2
from vkml.runtime.testing import run_ops
from vkml.vulkan._commands import CommandRecorder
from vkml.vulkan.tensor import DeviceTensor

from test_kernels_matmul import _abs_product, _arr, assert_close, cpu

_N = int(os.environ.get("VKML_TEST_EXAMPLES", "20"))
HYP = settings(max_examples=3 * _N, deadline=None, suppress_health_check=list(HealthCheck))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(autouse=True)
def _opt_in(vkml_env):
    vkml_env(VKML_CM2="1")  # (off by default: kernels/matmul_cm2.py says why)


def _cm2_or_skip(dev):
    if not matmul_cm2.usable(dev):
        pytest.skip(f"{dev.info.device_name} has no VK_NV_cooperative_matrix2 workgroup-scope matrices")


def _tilings(dev):
    return [t for t in (matmul_cm2.TILINGS + (matmul_cm2.Cm2Tiling(128, 256, 32, 256, 1),
                                              matmul_cm2.Cm2Tiling(256, 128, 64, 256, 2),
                                              matmul_cm2.Cm2Tiling(128, 128, 64, 256, 4)))
            if matmul_cm2.fits(dev, t)]


def _record(dev, g, a, b, out_shape):
    """The product on the cm2 path, or None where its strides are not 16-byte ones (then the
    path must refuse it)."""
    A, B = DeviceTensor.from_numpy(dev, a), DeviceTensor.from_numpy(dev, b)
    O = DeviceTensor.empty(dev, out_shape, np.float16)
    rec = CommandRecorder(dev)
    readable = g.lda % 8 == 0 and g.ldb % 8 == 0
    assert matmul_cm2.record_if_suitable(rec, g, A, B, None, O) == readable
    if not readable:
        return None
    rec.finish().run()
    return O.numpy()


@pytest.mark.gpu
@HYP
@given(m=st.sampled_from([8, 16, 31, 64, 100, 128, 257]), n=st.sampled_from([8, 16, 40, 128, 256, 264]),
       k=st.sampled_from([8, 16, 32, 40, 72, 256, 1000]), trans=st.sampled_from([(0, 0), (0, 1), (1, 0), (1, 1)]),
       alpha=st.sampled_from([1.0, 0.5]), tile=st.integers(0, 6), seed=st.integers(0, 2**31))
def test_cm2_gemm(dev, m, n, k, trans, alpha, tile, seed, vkml_env):
    """Gemm without C (alpha, both transposes) on every tiling: ragged edges read zeros and
    drop what lies outside; whole blocks take the unclamped (ALIGNED) layouts."""
    _cm2_or_skip(dev)
    ts = _tilings(dev)
    t = ts[tile % len(ts)]
    vkml_env(VKML_CM2_TILE=f"{t.bm},{t.bn},{t.bk},{t.threads},{t.unroll}")
    rng = np.random.default_rng(seed)
    a = _arr(rng, (k, m) if trans[0] else (m, k), "float16")
    b = _arr(rng, (n, k) if trans[1] else (k, n), "float16")
    attrs = {"transA": trans[0], "transB": trans[1], "alpha": alpha}
    g, _ = mm.gemm_problem(attrs, a.shape, b.shape, None)
    got = _record(dev, g, a, b, (m, n))
    if got is None:
        return
    at, bt = (a.T if trans[0] else a), (b.T if trans[1] else b)
    assert_close(got, cpu("Gemm", attrs, a, b, opset=13), alpha * _abs_product(at, bt))


@st.composite
def batched_shapes(draw):
    m = draw(st.sampled_from([16, 33, 64, 128]))
    n = draw(st.sampled_from([16, 48, 256]))
    k = draw(st.sampled_from([16, 40, 96, 512]))
    batch = draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))
    a = tuple(1 if draw(st.booleans()) else d for d in batch) + (m, k)
    b = tuple(1 if draw(st.booleans()) else d for d in batch[draw(st.integers(0, len(batch))):]) + (k, n)
    return a, b


@pytest.mark.gpu
@HYP
@given(shapes=batched_shapes(), seed=st.integers(0, 2**31))
def test_cm2_batched_matmul(dev, shapes, seed):
    """MatMul with batch broadcasting through the kernel registry (the path sessions take)."""
    _cm2_or_skip(dev)
    rng = np.random.default_rng(seed)
    a, b = _arr(rng, shapes[0], "float16"), _arr(rng, shapes[1], "float16")
    got = run_ops(dev, [("MatMul", {}, ["a", "b"], ["y"])], {"a": a, "b": b})["y"]
    assert_close(got, cpu("MatMul", {}, a, b), _abs_product(a, b))


@pytest.mark.gpu
@pytest.mark.parametrize("sa, sb", [((64, 4096), (4096, 256)), ((2, 64, 1024), (2, 1024, 128)),
                                    ((48, 4000), (4000, 96))])
def test_cm2_split_k(dev, sa, sb):
    """Skinny products split K (float32 partials, splitk_reduce), K a multiple of the split or not."""
    _cm2_or_skip(dev)
    rng = np.random.default_rng(7)
    a, b = _arr(rng, sa, "float16"), _arr(rng, sb, "float16")
    g, _ = mm.matmul_problem(sa, sb)
    t = matmul_cm2.choose(dev, g)
    assert gemm.split_k(t.blocks(g.m, g.n, g.batch), g.k, t.bk, 4, 1 << 30)[0] > 1
    got = run_ops(dev, [("MatMul", {}, ["a", "b"], ["y"])], {"a": a, "b": b})["y"]
    assert_close(got, cpu("MatMul", {}, a, b), _abs_product(a, b))


def test_cm2_selection(dev, vkml_env):
    """What takes the path: plain float16 products with 16-byte rows on devices that have it,
    under VKML_CM2=1 only; never C, an epilogue or K = 0; VKML_DISABLE=cooperative_matrix
    leaves the extension off too."""
    g, _ = mm.gemm_problem({}, (64, 64), (64, 64), None)
    a = DeviceTensor.from_numpy(dev, np.zeros((64, 64), np.float16))
    o = DeviceTensor.empty(dev, (64, 64), np.float16)
    rec = CommandRecorder(dev)
    if not matmul_cm2.usable(dev):
        assert not matmul_cm2.record_if_suitable(rec, g, a, a, None, o)
        assert "cooperative_matrix2" not in dev.features
    assert not matmul_cm2.record_if_suitable(rec, g, a, a, None, o, epi=gemm.EPI_RELU)
    gc, _ = mm.gemm_problem({"beta": 1.0}, (64, 64), (64, 64), (64,))
    assert not matmul_cm2.record_if_suitable(rec, gc, a, a, None, o)
    g7, _ = mm.gemm_problem({}, (64, 63), (63, 64), None)  # rows of 63 halves: not 16-byte
    assert not matmul_cm2.record_if_suitable(rec, g7, a, a, None, o)
    vkml_env(VKML_CM2="0")
    assert not matmul_cm2.record_if_suitable(rec, g, a, a, None, o)
    vkml_env(VKML_DISABLE="cooperative_matrix")
    from vkml import config
    assert "cooperative_matrix2" in config.disabled_features()


def test_cm2_shader_is_valid_spirv():
    """The committed SPIR-V passes a spirv-val that knows SPV_NV_cooperative_matrix2 (older
    validators are skipped)."""
    path = os.path.join(ROOT, "vkml", "spv", "matmul_cm2_f16.spv")
    assert os.path.exists(path)
    cands = [os.path.join(os.path.dirname(sys.executable), "spirv-val"), shutil.which("spirv-val")]
    for tool in [c for c in dict.fromkeys(cands) if c and os.path.exists(c)]:
        r = subprocess.run([tool, "--target-env", "vulkan1.3", path], capture_output=True, text=True)
        if "Invalid capability operand" in r.stdout + r.stderr or "Invalid extension" in r.stdout + r.stderr:
            continue
        assert r.returncode == 0, r.stdout + r.stderr
        return
    pytest.skip("no spirv-val that knows SPV_NV_cooperative_matrix2")
