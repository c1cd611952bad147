"""MatMul and Gemm GPU kernels against vkml's NumPy operators, over hypothesis shapes (odd
sizes for the ragged tile edges, batch broadcasting, 1-D operands), every Gemm attribute
combination, both dtypes, the tilings the kernel picks from and, where the device has
VK_KHR_cooperative_matrix, the tensor-core path.

Tolerances (both sides accumulate in float32, in different orders):
  |gpu - numpy| <= RTOL[dtype] * |numpy| + 1e-5 * (|A| @ |B|) + 1e-6 * |beta * C|
where RTOL is 0 for float32 and 2^-10 (one float16 ulp) for float16, whose products are
rounded once from float32 on both sides but may land on either side of a rounding boundary.
"""
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vkml.ir.graph import Node
from vkml.kernels import TensorSpec, get_kernel
from vkml.kernels import gemm
from vkml.kernels import matmul as mm
from vkml.kernels import matmul_coop
from vkml.ops.registry import lookup
from vkml.runtime.testing import run_ops
from _validated import run_validated  # noqa: E402

_N = int(os.environ.get("VKML_TEST_EXAMPLES", "20"))
HYP = settings(max_examples=_N, deadline=None, suppress_health_check=list(HealthCheck))
RTOL = {np.dtype(np.float32): 0.0, np.dtype(np.float16): 2.0 ** -10}
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def cpu(op_type, attrs, *inputs, opset=22):
    """Run vkml's NumPy operator (the CPU reference) on arrays."""
    names = [f"i{k}" if x is not None else "" for k, x in enumerate(inputs)]
    node = Node("n", op_type, "", names, ["y"], dict(attrs), opset)
    return lookup("", op_type, opset)(node).run(*inputs)[0]


def assert_close(got, want, a_abs_b, extra=0.0):
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape, got.dtype, want.dtype)
    g, w = got.astype(np.float64), want.astype(np.float64)
    tol = RTOL[want.dtype] * np.abs(w) + 1e-5 * a_abs_b + 1e-6 * extra + 1e-30
    bad = np.abs(g - w) > tol
    assert not bad.any(), f"{bad.sum()} of {bad.size} values off; worst {np.abs(g - w).max()} at tol {tol.max()}"


def _arr(rng, shape, dtype):
    return rng.uniform(-2, 2, shape).astype(dtype)


def _abs_product(a, b):
    return np.matmul(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))


# ---------------------------------------------------------------- MatMul
@st.composite
def matmul_shapes(draw):
    m = draw(st.sampled_from([1, 2, 5, 13, 31, 64, 67]))
    n = draw(st.sampled_from([1, 3, 4, 16, 29, 65, 130]))
    k = draw(st.sampled_from([1, 4, 7, 16, 33, 40, 96]))
    batch = draw(st.lists(st.integers(1, 3), max_size=3))
    a = tuple(1 if draw(st.booleans()) else d for d in batch) + (m, k)
    b = tuple(1 if draw(st.booleans()) else d for d in batch[draw(st.integers(0, len(batch))):]) + (k, n)
    if draw(st.integers(0, 5)) == 0:
        a = (k,)
    if draw(st.integers(0, 5)) == 0:
        b = (k,)
    return a, b


@pytest.fixture(params=["tiled", "small"])
def path(request, monkeypatch):
    """Every drawn GEMM through the tiled shader, then through matmul_small.comp (the bounds
    of the small path moved so that each takes it)."""
    if request.param == "tiled":
        monkeypatch.setattr(mm, "SMALL_MAX_MACS", 0)
    else:
        monkeypatch.setattr(mm, "SMALL_MAX_MACS", 1 << 40)
        monkeypatch.setattr(mm, "SMALL_MIN_K", 1)
    return request.param


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@HYP
@given(shapes=matmul_shapes(), seed=st.integers(0, 2**31))
def test_matmul(dev, dtype, shapes, seed, path):
    rng = np.random.default_rng(seed)
    a, b = _arr(rng, shapes[0], dtype), _arr(rng, shapes[1], dtype)
    got = run_ops(dev, [("MatMul", {}, ["a", "b"], ["y"])], {"a": a, "b": b})["y"]
    assert_close(got, cpu("MatMul", {}, a, b), _abs_product(a, b))


@pytest.mark.parametrize("shapes", [((4, 6, 0), (0, 5)), ((0, 3), (3, 4)), ((2, 0, 3, 4), (4, 5)), ((0,), (0,))])
def test_matmul_empty(dev, shapes):
    a, b = np.ones(shapes[0], np.float32), np.ones(shapes[1], np.float32)
    got = run_ops(dev, [("MatMul", {}, ["a", "b"], ["y"])], {"a": a, "b": b})["y"]
    np.testing.assert_array_equal(got, np.matmul(a, b))


def test_batch_folding_and_batch_loop(dev, monkeypatch):
    """(B, S, K) @ (K, N) runs as one GEMM; batches beyond the z-dispatch limit are looped
    over by the shader (the limit is lowered here so that the loop runs on small data)."""
    g, out = mm.matmul_problem((6, 5, 7), (7, 3))
    assert (g.m, g.batch, out) == (30, 1, (6, 5, 3))
    monkeypatch.setattr(gemm, "MAX_GROUPS_Z", 4)
    rng = np.random.default_rng(1)
    a, b = _arr(rng, (3, 1, 5, 9), "float32"), _arr(rng, (3, 9, 6), "float32")
    got = run_ops(dev, [("MatMul", {}, ["a", "b"], ["y"])], {"a": a, "b": b})["y"]
    assert_close(got, cpu("MatMul", {}, a, b), _abs_product(a, b))


@pytest.mark.parametrize("tiling", [mm.SMALL, mm.MEDIUM, mm.NARROW, *mm.BIG, mm.Tiling(128, 128, 8, 8, 8),
                                    mm.Tiling(64, 32, 8, 8, 4)], ids=str)
@pytest.mark.parametrize("trans", [(0, 0), (0, 1), (1, 0), (1, 1)])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_tilings_and_layouts(dev, tiling, trans, dtype):
    """Every tiling the kernel may pick, with vec4 and scalar loads in every layout."""
    from vkml.vulkan._commands import CommandRecorder
    from vkml.vulkan.tensor import DeviceTensor

    rng = np.random.default_rng(2)
    for m, n, k in ((37, 70, 21), (64, 32, 48), (3, 129, 8)):
        a = _arr(rng, (k, m) if trans[0] else (m, k), dtype)
        b = _arr(rng, (n, k) if trans[1] else (k, n), dtype)
        g, _ = mm.gemm_problem({"transA": trans[0], "transB": trans[1], "beta": 0.0}, a.shape, b.shape, None)
        A, B = DeviceTensor.from_numpy(dev, a), DeviceTensor.from_numpy(dev, b)
        O = DeviceTensor.empty(dev, (m, n), dtype)
        rec = CommandRecorder(dev)
        mm.record_gemm(rec, g, A, B, None, O, tiling=tiling)
        rec.finish().run()
        at, bt = (a.T if trans[0] else a), (b.T if trans[1] else b)
        assert_close(O.numpy(), cpu("MatMul", {}, np.ascontiguousarray(at), np.ascontiguousarray(bt)),
                     _abs_product(at, bt))


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@HYP
@given(m=st.sampled_from([1, 5, 33, 64]), n=st.sampled_from([1, 7, 64, 70]), k=st.sampled_from([1, 6, 16, 37, 200]),
       batch=st.integers(1, 3), trans_b=st.booleans(), per_batch=st.booleans(), seed=st.integers(0, 2**31))
def test_row_scales_of_b(dev, dtype, m, n, k, batch, trans_b, per_batch, seed, path):
    """`kscale` (the squeeze-excitation gate a pointwise conv reads its input through): B's row k
    of batch z scaled by s[z * K + k] (or s[k]) as it is read, rounded to B's type, on the
    tiled (split K included: k = 200 on one block) and small shaders, B stored either way."""
    from vkml.vulkan._commands import CommandRecorder
    from vkml.vulkan.tensor import DeviceTensor

    rng = np.random.default_rng(seed)
    a = _arr(rng, (batch, m, k), dtype)
    b = _arr(rng, (batch, n, k) if trans_b else (batch, k, n), dtype)
    sc = _arr(rng, (batch if per_batch else 1, k), dtype)
    g = gemm.Gemm(m, n, k, False, trans_b, k, k if trans_b else n, [batch], [m * k], [k * n], 1.0, 1.0, None)
    A, B, S = (DeviceTensor.from_numpy(dev, x) for x in (a, b, sc))
    O = DeviceTensor.empty(dev, (batch, m, n), dtype)
    rec = CommandRecorder(dev)
    mm.record_gemm(rec, g, A, B, None, O, kscale=(S, per_batch))
    rec.finish().run()
    bk = np.swapaxes(b, 1, 2) if trans_b else b  # (batch, k, n)
    scaled = (bk.astype(np.float32) * sc.astype(np.float32)[:, :, None]).astype(dtype)
    assert_close(O.numpy(), cpu("MatMul", {}, a, scaled), _abs_product(a, scaled))


@pytest.mark.parametrize("tiling", [mm.MEDIUM, *mm.BIG, mm.Tiling(128, 128, 8, 8, 8), mm.Tiling(64, 32, 8, 8, 4)],
                         ids=str)
def test_tilings_with_c_and_epilogue(dev, tiling):
    """alpha * A @ B + beta * C, a residual and Relu in the store, on every store path (the
    unrolled 4x4 one and the loop of the bigger micro-tiles), ragged edges included."""
    from vkml.vulkan._commands import CommandRecorder
    from vkml.vulkan.tensor import DeviceTensor

    rng = np.random.default_rng(4)
    for m, n, k in ((37, 70, 21), (130, 67, 40)):
        a, b = _arr(rng, (m, k), "float32"), _arr(rng, (k, n), "float32")
        c, r = _arr(rng, (n,), "float32"), _arr(rng, (m, n), "float32")
        g, _ = mm.gemm_problem({"alpha": 0.5, "beta": 2.0}, a.shape, b.shape, c.shape)
        A, B, C, R = (DeviceTensor.from_numpy(dev, x) for x in (a, b, c, r))
        O = DeviceTensor.empty(dev, (m, n), np.float32)
        rec = CommandRecorder(dev)
        mm.record_gemm(rec, g, A, B, C, O, tiling=tiling, epi=gemm.EPI_RESIDUAL | gemm.EPI_RELU, res=R)
        rec.finish().run()
        want = np.maximum(0.5 * (a.astype(np.float64) @ b) + 2.0 * c + r, 0.0)
        np.testing.assert_allclose(O.numpy(), want, rtol=1e-5, atol=1e-5)


def test_small_path_with_c_and_epilogue(dev):
    """The small GEMM shader: alpha * A @ B + beta * C, a residual and Relu, batched operands,
    and the bounds that pick it."""
    from vkml.vulkan._commands import CommandRecorder
    from vkml.vulkan.tensor import DeviceTensor

    rng = np.random.default_rng(7)
    for m, n, k in ((1, 10, 256), (3, 33, 97)):
        a, b = _arr(rng, (m, k), "float32"), _arr(rng, (k, n), "float32")
        c, r = _arr(rng, (n,), "float32"), _arr(rng, (m, n), "float32")
        g, _ = mm.gemm_problem({"alpha": 0.5, "beta": 2.0}, a.shape, b.shape, c.shape)
        assert mm.is_small(g)
        A, B, C, R = (DeviceTensor.from_numpy(dev, x) for x in (a, b, c, r))
        O = DeviceTensor.empty(dev, (m, n), np.float32)
        rec = CommandRecorder(dev)
        mm.record_gemm(rec, g, A, B, C, O, epi=gemm.EPI_RESIDUAL | gemm.EPI_RELU, res=R)
        rec.finish().run()
        want = np.maximum(0.5 * (a.astype(np.float64) @ b) + 2.0 * c + r, 0.0)
        np.testing.assert_allclose(O.numpy(), want, rtol=1e-5, atol=1e-5)
    g, _ = mm.matmul_problem((4, 5, 300), (300, 6))  # batched A, K past the minimum
    assert mm.is_small(g)
    a, b = _arr(rng, (4, 5, 300), "float32"), _arr(rng, (300, 6), "float32")
    got = run_ops(dev, [("MatMul", {}, ["a", "b"], ["y"])], {"a": a, "b": b})["y"]
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-4)
    assert not mm.is_small(mm.matmul_problem((64, 300), (300, 200))[0])  # 3.8 M multiply-adds
    assert not mm.is_small(mm.matmul_problem((64, 8), (8, 64))[0])  # K too short


# ---------------------------------------------------------------- Gemm
@pytest.mark.parametrize("trans_a", [0, 1])
@pytest.mark.parametrize("trans_b", [0, 1])
@pytest.mark.parametrize("c_shape", ["none", "scalar", "row", "col", "full"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@settings(max_examples=max(2, _N // 5), deadline=None, suppress_health_check=list(HealthCheck))
@given(m=st.integers(1, 40), n=st.integers(1, 40), k=st.integers(1, 40), seed=st.integers(0, 2**31),
       alpha=st.sampled_from([1.0, 0.5, -2.0, 0.0]), beta=st.sampled_from([1.0, 0.25, 0.0, -1.5]))
def test_gemm(dev, trans_a, trans_b, c_shape, dtype, m, n, k, seed, alpha, beta, path):
    rng = np.random.default_rng(seed)
    a = _arr(rng, (k, m) if trans_a else (m, k), dtype)
    b = _arr(rng, (n, k) if trans_b else (k, n), dtype)
    attrs = {"transA": trans_a, "transB": trans_b, "alpha": alpha, "beta": beta}
    feeds = {"a": a, "b": b}
    names = ["a", "b"]
    cs = {"scalar": (1,), "row": (n,), "col": (m, 1), "full": (m, n)}.get(c_shape)
    c = None
    if cs is not None:
        c = feeds["c"] = _arr(rng, cs, dtype)
        names.append("c")
    got = run_ops(dev, [("Gemm", attrs, names, ["y"])], feeds)["y"]
    want = cpu("Gemm", attrs, a, b, c, opset=13)
    at, bt = (a.T if trans_a else a), (b.T if trans_b else b)
    extra = abs(beta) * np.abs(np.broadcast_to(c.astype(np.float64), (m, n))) if c is not None else 0.0
    assert_close(got, want, abs(alpha) * _abs_product(at, bt), extra)


def test_gemm_beta_zero_ignores_c(dev):
    a, b = np.ones((3, 4), np.float32), np.ones((4, 2), np.float32)
    c = np.full((3, 2), np.nan, np.float32)
    got = run_ops(dev, [("Gemm", {"beta": 0.0}, ["a", "b", "c"], ["y"])], {"a": a, "b": b, "c": c})["y"]
    np.testing.assert_array_equal(got, np.full((3, 2), 4, np.float32))


def test_gemm_k_zero_gives_beta_c(dev):
    a, b = np.ones((3, 0), np.float32), np.ones((0, 2), np.float32)
    c = np.arange(2, dtype=np.float32)
    got = run_ops(dev, [("Gemm", {"beta": 2.0}, ["a", "b", "c"], ["y"])], {"a": a, "b": b, "c": c})["y"]
    np.testing.assert_array_equal(got, np.broadcast_to(2 * c, (3, 2)))


# ---------------------------------------------------------------- cooperative matrices
def _coop_or_skip(dev):
    if matmul_coop.device_shape(dev) is None:
        pytest.skip(f"{dev.info.device_name} has no usable VK_KHR_cooperative_matrix float16 shape")


@pytest.mark.gpu
@pytest.mark.parametrize("trans", [(0, 0), (0, 1), (1, 0), (1, 1)])
@pytest.mark.parametrize("mnk", [(16, 16, 16), (100, 36, 52), (132, 260, 72), (64, 64, 4), (257, 129, 300),
                                 (136, 264, 88)])
@pytest.mark.parametrize("tile", ["128,256,16,64,64", "128,128,32,64,32", "64,64,32,32,32", "128,128,32,64,64,1",
                                  "256,128,32,64,64,1", "64,64,128,32,32,1", ""])
@pytest.mark.parametrize("vecs", [(8, 4), (4,)])
def test_coop_matches_simt(dev, trans, mnk, tile, vecs, monkeypatch, vkml_env):
    _coop_or_skip(dev)
    monkeypatch.setattr(matmul_coop, "VECS", vecs)
    from vkml.vulkan._commands import CommandRecorder
    from vkml.vulkan.tensor import DeviceTensor

    if tile:
        vkml_env(VKML_COOP_TILE=tile)
    m, n, k = mnk
    rng = np.random.default_rng(3)
    a = _arr(rng, (k, m) if trans[0] else (m, k), "float16")
    b = _arr(rng, (n, k) if trans[1] else (k, n), "float16")
    c = _arr(rng, (n,), "float16")
    attrs = {"transA": trans[0], "transB": trans[1], "alpha": 0.5, "beta": 2.0}
    g, _ = mm.gemm_problem(attrs, a.shape, b.shape, c.shape)
    A, B, C = (DeviceTensor.from_numpy(dev, x) for x in (a, b, c))
    readable = all(v % 4 == 0 for v in (m if trans[0] else k, k if trans[1] else n))
    assert (matmul_coop.plan(dev, g, A, B) is not None) == readable
    O = DeviceTensor.empty(dev, (m, n), np.float16)
    rec = CommandRecorder(dev)
    mm.record_gemm(rec, g, A, B, C, O)
    rec.finish().run()
    at, bt = (a.T if trans[0] else a), (b.T if trans[1] else b)
    extra = 2 * np.abs(np.broadcast_to(c.astype(np.float64), (m, n)))
    assert_close(O.numpy(), cpu("Gemm", attrs, a, b, c, opset=13), 0.5 * _abs_product(at, bt), extra)


@pytest.mark.gpu
@pytest.mark.parametrize("case", [
    # Skinny GEMMs (a batch of 64 rows through a wide layer): few blocks, long K, split.
    ("Gemm", {"transB": 1, "alpha": 0.5, "beta": 2.0}, (64, 2048), (256, 2048), (256,)),
    ("MatMul", {}, (2, 64, 1024), (2, 1024, 128), None),    # batched: z over (split, batch)
    ("MatMul", {}, (48, 4000), (4000, 96), None),            # K not a multiple of the split
])
def test_coop_split_k(dev, case):
    _coop_or_skip(dev)
    op, attrs, sa, sb, sc = case
    rng = np.random.default_rng(6)
    a, b = _arr(rng, sa, "float16"), _arr(rng, sb, "float16")
    feeds, names = {"a": a, "b": b}, ["a", "b"]
    if sc is not None:
        feeds["c"] = _arr(rng, sc, "float16")
        names.append("c")
    g, _ = mm.matmul_problem(sa, sb) if op == "MatMul" else mm.gemm_problem(attrs, sa, sb, sc)
    from vkml.vulkan.tensor import DeviceTensor

    A, B = DeviceTensor.from_numpy(dev, a), DeviceTensor.from_numpy(dev, b)
    shape, t, _ = matmul_coop.plan(dev, g, A, B)
    assert gemm.split_k(t.blocks(g.m, g.n, g.batch), g.k, t.bk, 4, 1 << 30)[0] > 1
    got = run_ops(dev, [(op, attrs, names, ["y"])], feeds)["y"]
    if op == "MatMul":
        assert_close(got, cpu("MatMul", {}, a, b), _abs_product(a, b))
    else:
        bt = b.T
        extra = 2 * np.abs(np.broadcast_to(feeds["c"].astype(np.float64), got.shape))
        assert_close(got, cpu("Gemm", attrs, a, b, feeds["c"], opset=13), 0.5 * _abs_product(a, bt), extra)


@pytest.mark.gpu
def test_coop_batched_and_fallback(dev):
    _coop_or_skip(dev)
    rng = np.random.default_rng(4)
    for sa, sb in (((3, 48, 64), (3, 64, 40)), ((2, 1, 32, 24), (5, 24, 16)), ((33, 17), (17, 9))):
        a, b = _arr(rng, sa, "float16"), _arr(rng, sb, "float16")  # the last one falls back (K % 4)
        got = run_ops(dev, [("MatMul", {}, ["a", "b"], ["y"])], {"a": a, "b": b})["y"]
        assert_close(got, cpu("MatMul", {}, a, b), _abs_product(a, b))


def test_coop_selection_without_support(dev, vkml_env):
    """VKML_COOP=0 (or a device without the feature) always gives the SIMT path."""
    vkml_env(VKML_COOP="0")
    assert matmul_coop.device_shape(dev) is None


def _spirv_vals():
    cands = [os.path.join(os.path.dirname(sys.executable), "spirv-val"), shutil.which("spirv-val")]
    return [c for c in dict.fromkeys(cands) if c and os.path.exists(c)]


def test_coop_shader_is_valid_spirv():
    """The committed cooperative-matrix SPIR-V passes spirv-val (which must know the KHR
    extension: the validators that do not are skipped)."""
    paths = [os.path.join(ROOT, "vkml", "spv", f"matmul_coop_16x16x16_v{v}_f16.spv") for v in (8, 4)]
    assert all(os.path.exists(p) for p in paths)
    for tool in _spirv_vals():
        rs = [subprocess.run([tool, "--target-env", "vulkan1.1", p], capture_output=True, text=True) for p in paths]
        if any("Invalid capability operand" in r.stdout + r.stderr for r in rs):
            continue  # too old for SPV_KHR_cooperative_matrix
        for r in rs:
            assert r.returncode == 0, r.stdout + r.stderr
        return
    pytest.skip("no spirv-val that knows SPV_KHR_cooperative_matrix")


# ---------------------------------------------------------------- refusals
def test_unsupported(dev, vkml_env):
    k = get_kernel("MatMul")
    f32 = lambda *s: TensorSpec(s, np.dtype(np.float32))  # noqa: E731
    assert k.supports(dev, "MatMul", {}, [f32(3, 4), f32(4, 5)]) is None
    assert "inner" in k.supports(dev, "MatMul", {}, [f32(3, 4), f32(5, 5)])
    assert "int32" in k.supports(dev, "MatMul", {}, [TensorSpec((3, 4), np.dtype(np.int32))] * 2)
    assert "mixed" in k.supports(dev, "MatMul", {}, [f32(3, 4), TensorSpec((4, 5), np.dtype(np.float16))])
    assert "rank" in k.supports(dev, "MatMul", {}, [f32(), f32(3)])
    assert "broadcast" in k.supports(dev, "MatMul", {}, [f32(2, 3, 4), f32(3, 4, 5)])
    g = get_kernel("Gemm")
    assert "matrices" in g.supports(dev, "Gemm", {}, [f32(2, 3, 4), f32(4, 5)])
    assert "broadcast" in g.supports(dev, "Gemm", {}, [f32(3, 4), f32(4, 5), f32(3, 1, 5)])
    assert g.supports(dev, "Gemm", {"transA": 1}, [f32(4, 3), f32(4, 5), f32(5)]) is None
    big = dev.limits["max_storage_buffer_range"] // 4 + 1
    assert "storage buffer" in k.supports(dev, "MatMul", {}, [f32(big, 1), f32(1, 1)])
    vkml_env(VKML_MATMUL_TILE="1,2")
    with pytest.raises(ValueError, match="VKML_MATMUL_TILE"):
        mm.choose_tiling(dev, 4, 4, 1)


def test_validation_layer_clean(dev):
    """A MatMul/Gemm workload under the Khronos validation layer reports nothing."""
    code = textwrap.dedent("""
        import numpy as np
        import vkml.vulkan as vk
        from vkml.vulkan import _instance
        from vkml.runtime.testing import run_ops
        import vkml.kernels.matmul
        assert _instance.instance().validation
        dev = vk.device(int(__import__("os").environ.get("VKML_TEST_DEVICE", "0")))
        rng = np.random.default_rng(0)
        for dt in ("float32", "float16"):
            a = rng.standard_normal((2, 37, 20)).astype(dt)
            b = rng.standard_normal((20, 33)).astype(dt)
            c = rng.standard_normal((33,)).astype(dt)
            w = rng.standard_normal((33, 20)).astype(dt)
            out = run_ops(dev, [("MatMul", {}, ["a", "b"], ["y"]),
                                ("Gemm", {"transB": 1, "beta": 0.5}, ["y2", "w", "c"], ["z"])],
                          {"a": a, "b": b, "c": c, "w": w, "y2": a[0]})
            assert out["y"].shape == (2, 37, 33) and out["z"].shape == (37, 33)
        vk.close_all()
        print("VALIDATION-CLEAN")
    """)
    run_validated(code)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("case", [
    # Few output blocks, long K: split K (partials summed by shaders/splitk_reduce.comp)
    ("MatMul", {}, (9, 1000), (1000, 20), None),
    ("MatMul", {}, (3, 5, 300), (300, 7), None),                 # batch folded into M
    ("MatMul", {}, (2, 6, 300), (2, 300, 7), None),              # batched: z over (split, batch)
    ("Gemm", {"transB": 1, "alpha": 0.5, "beta": 2.0}, (4, 640), (10, 640), (10,)),
    ("Gemm", {"transA": 1, "beta": -1.0}, (512, 3), (512, 9), (3, 1)),
    ("Gemm", {"beta": 0.5}, (2, 700), (700, 5), (2, 5)),
])
def test_split_k_gemm(dev, case, dtype, monkeypatch):
    from vkml.kernels import matmul as km
    from vkml.runtime.testing import run_ops

    monkeypatch.setattr(km, "SMALL_MAX_MACS", 0)  # (these would take the small path, which never splits)

    op, attrs, sa, sb, sc = case
    rng = np.random.default_rng(5)
    a = rng.uniform(-1, 1, sa).astype(dtype)
    b = rng.uniform(-1, 1, sb).astype(dtype)
    feeds, names = {"a": a, "b": b}, ["a", "b"]
    if sc is not None:
        feeds["c"] = rng.uniform(-1, 1, sc).astype(dtype)
        names.append("c")
    g, _ = km.matmul_problem(sa, sb) if op == "MatMul" else km.gemm_problem(attrs, sa, sb, sc)
    t = km.choose_tiling(dev, g.m, g.n, g.batch, g.k)
    blocks = -(-g.m // t.bm) * -(-g.n // t.bn) * g.batch
    assert gemm.split_k(blocks, g.k, t.bk, 4, 1 << 30)[0] > 1
    got = run_ops(dev, [(op, attrs, names, ["y"])], feeds)["y"]
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    if op == "MatMul":
        want = a64 @ b64
    else:
        aa = a64.T if attrs.get("transA") else a64
        bb = b64.T if attrs.get("transB") else b64
        want = attrs.get("alpha", 1.0) * (aa @ bb) + attrs.get("beta", 1.0) * feeds["c"].astype(np.float64)
    tol = (2e-3 if dtype == np.float16 else 1e-5) * (np.abs(a64) @ np.abs(b64) if op == "MatMul" else 1 + np.abs(want))
    assert got.shape == want.shape and got.dtype == dtype
    assert (np.abs(got.astype(np.float64) - want) <= tol + 1e-3 * (dtype == np.float16)).all()


def test_narrow_blocks_where_64_rows_pad_m(dev):
    """32x64 blocks for GEMMs whose M 64-row blocks would pad by 10% more (ViT's 197 tokens),
    not for convolutions (narrow=False) nor where both pad alike; a ViT-sized GEMM on them
    matches NumPy."""
    assert mm.choose_tiling(dev, 197, 768, 1, 768) == mm.NARROW
    assert mm.choose_tiling(dev, 77, 512, 1, 512) == mm.NARROW
    assert mm.choose_tiling(dev, 197, 768, 1, 768, narrow=False) == mm.MEDIUM
    for m in (128, 49, 672, 512):
        assert mm.choose_tiling(dev, m, 768, 1, 768) == mm.MEDIUM, m
    from vkml.runtime.testing import run_ops

    rng = np.random.default_rng(4)
    a, b = _arr(rng, (197, 96), "float32"), _arr(rng, (96, 130), "float32")
    got = run_ops(dev, [("MatMul", {}, ["a", "b"], ["y"])], {"a": a, "b": b})["y"]
    assert_close(got, cpu("MatMul", {}, a, b), _abs_product(a, b))


def test_big_blocks_for_a_very_long_k(dev):
    """64x128 8x8 blocks (matmul.BIG, the unrolled build) for GEMMs with K >= BIG_LONG_K and at
    least a block's rows however few their blocks (an MLP's 64 x 4096 x 4096 layers), split K
    filling the GPU; below that the block count decides as before (BERT's K = 3072 stays on
    64x64, and so does a one-row product). A skinny product on them, split 32 ways, matches NumPy."""
    big = mm.BIG[0]
    assert mm.choose_tiling(dev, 64, 4096, 1, 4096) == big
    assert mm.choose_tiling(dev, 1, 512, 1, 6272) == mm.SMALL  # (a 64-row block: 63 rows idle)
    assert mm.choose_tiling(dev, 128, 768, 1, 3072) == mm.MEDIUM
    assert mm.choose_tiling(dev, 4096, 4096, 1, 1024) == big  # (enough blocks)
    from vkml.runtime.testing import run_ops

    rng = np.random.default_rng(6)
    a, b = _arr(rng, (64, 4096), "float32"), _arr(rng, (4096, 200), "float32")
    assert mm.choose_tiling(dev, 64, 200, 1, 4096) == big
    assert gemm.split_k(big.blocks(64, 200, 1), 4096, big.bk, 4, 1 << 30)[0] > 1
    got = run_ops(dev, [("MatMul", {}, ["a", "b"], ["y"])], {"a": a, "b": b})["y"]
    assert_close(got, cpu("MatMul", {}, a, b), _abs_product(a, b))
