"""Chains of views, Transposes and scalings before a MatMul collapse into one Reshape and one
Transpose that the GEMM reads in place (vkml/compile/layout.py): results bit for bit what the
separate ops give on the GPU (VKML_FUSE=0), within float tolerance of the CPU device."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from test_epilogue import _fused_matches_separate
from vkml.compile import layout

ONNX_T = {np.dtype(np.float32): T.FLOAT, np.dtype(np.float16): T.FLOAT16}


def _mha_model(L: int, B: int, H: int, d: int, dtype=np.float32) -> bytes:
    """Attention as torch's nn.MultiheadAttention exports it, from q, k, v of shape (L, B, H*d):
    each reshaped to (L, B*H, d), transposed to (B*H, L, d), reshaped to (B, H, L, d); k also
    transposed to (B, H, d, L); q and k each times sqrt(1/sqrt(d)); Softmax(q @ k) @ v."""
    E, et = H * d, ONNX_T[np.dtype(dtype)]
    s = np.asarray(math.sqrt(1 / math.sqrt(d)), dtype)
    inits = [nh.from_array(np.asarray([L, B * H, d], np.int64), "s3"),
             nh.from_array(np.asarray([B, H, L, d], np.int64), "s4"),
             nh.from_array(s.reshape(1), "scale")]
    nodes = []
    for t in "qkv":
        nodes += [h.make_node("Reshape", [t, "s3"], [f"{t}3"], name=f"r3_{t}"),
                  h.make_node("Transpose", [f"{t}3"], [f"{t}t"], name=f"t_{t}", perm=[1, 0, 2]),
                  h.make_node("Reshape", [f"{t}t", "s4"], [f"{t}4"], name=f"r4_{t}")]
    nodes += [h.make_node("Transpose", ["k4"], ["kT"], name="t_kT", perm=[0, 1, 3, 2]),
              h.make_node("Mul", ["q4", "scale"], ["qs"], name="scale_q"),
              h.make_node("Mul", ["kT", "scale"], ["ks"], name="scale_k"),
              h.make_node("MatMul", ["qs", "ks"], ["scores"], name="qk"),
              h.make_node("Softmax", ["scores"], ["p"], name="softmax", axis=-1),
              h.make_node("MatMul", ["p", "v4"], ["y"], name="pv")]
    g = h.make_graph(nodes, "mha", [h.make_tensor_value_info(t, et, [L, B, E]) for t in "qkv"],
                     [h.make_tensor_value_info("y", et, None)], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()


@pytest.mark.parametrize("L,B,H,d", [(7, 1, 3, 8), (17, 2, 2, 16), (50, 1, 4, 12)])
def test_torch_mha_chains_are_read_in_place(gpu, vkml_env, L, B, H, d):
    """Every Transpose of the exported q, k and v chains is read by its GEMM (none is run as a
    copy); the scalings run once each on q and k before their chains."""
    rng = np.random.default_rng(L)
    for dtype in (np.float32, np.float16):
        feeds = {t: rng.standard_normal((L, B, H * d)).astype(dtype) for t in "qkv"}
        rows = _fused_matches_separate(gpu, vkml_env, _mha_model(L, B, H, d, dtype), feeds,
                                       f"{np.dtype(dtype).name} L={L} B={B} H={H} d={d}")
        for t in ("t_q", "t_k", "t_v", "t_kT"):
            assert "fused into" in rows[t]["reason"] and "transpose" in rows[t]["reason"], (t, rows[t])
        shaders = {p["shader"] for r in rows.values() for p in r.get("pipelines", [])}
        assert not any(s.startswith(("copy_", "transpose_")) for s in shaders), shaders


def test_a_chain_read_elsewhere_stays(gpu, vkml_env):
    """A chain value that another node reads keeps the chain as it is (its Transposes run)."""
    L, B, H, d = 9, 1, 2, 8
    import onnx

    m = onnx.load_from_string(_mha_model(L, B, H, d))
    m.graph.output.append(h.make_tensor_value_info("qt", T.FLOAT, None))  # q's Transpose, read outside
    rng = np.random.default_rng(0)
    feeds = {t: rng.standard_normal((L, B, H * d)).astype(np.float32) for t in "qkv"}
    vkml_env(VKML_FUSE="1")
    import vkml

    sess = vkml.InferenceSession(m.SerializeToString(), devices=[gpu])
    got = sess.run(None, feeds)
    want = vkml.InferenceSession(m.SerializeToString(), devices=["cpu"]).run(None, feeds)
    for g_, w_ in zip(got, want):
        np.testing.assert_allclose(g_, w_, rtol=1e-5, atol=1e-5)
    rows = {r["node"]: r for r in sess.placement()}
    assert "fused into" not in rows["t_q"]["reason"], rows["t_q"]
    assert "fused into" in rows["t_k"]["reason"], rows["t_k"]


@st.composite
def _chains(draw):
    """A source shape and a chain of ops over it: ("T", perm), ("R", shape) with shape a merge
    of neighbours or a split of one dim, ("M", scale) or ("D", divisor)."""
    rank = draw(st.integers(2, 4))
    shape = [draw(st.sampled_from([1, 2, 3, 4, 6])) for _ in range(rank)]
    src = list(shape)
    ops = []
    for _ in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from("TTRRM" + "D"))
        if kind == "T":
            perm = draw(st.permutations(range(len(shape))))
            ops.append(("T", list(perm)))
            shape = [shape[p] for p in perm]
        elif kind == "R":
            i = draw(st.integers(0, len(shape) - 1))
            if len(shape) > 2 and i + 1 < len(shape) and draw(st.booleans()):
                shape = shape[:i] + [shape[i] * shape[i + 1]] + shape[i + 2:]
            elif len(shape) < 4 and shape[i] in (4, 6):
                f = draw(st.sampled_from([2, shape[i] // 2]))
                shape = shape[:i] + [f, shape[i] // f] + shape[i + 1:]
            else:
                continue
            ops.append(("R", list(shape)))
        else:
            ops.append((kind, draw(st.sampled_from([0.5, 1.7, -3.0]))))
    return src, ops, shape


def _chain_model(src, ops, out_shape, n: int, side: int) -> bytes:
    """x (src) through `ops` into operand `side` of a MatMul with w: (.., m, k) @ (k, n) or
    (m', m) @ (.., m, k)."""
    nodes, inits, cur = [], [], "x"
    for j, (kind, arg) in enumerate(ops):
        o = f"v{j}"
        if kind == "T":
            nodes.append(h.make_node("Transpose", [cur], [o], name=f"op{j}", perm=arg))
        elif kind == "R":
            inits.append(nh.from_array(np.asarray(arg, np.int64), f"shape{j}"))
            nodes.append(h.make_node("Reshape", [cur, f"shape{j}"], [o], name=f"op{j}"))
        else:
            inits.append(nh.from_array(np.asarray([arg], np.float32), f"c{j}"))
            nodes.append(h.make_node("Mul" if kind == "M" else "Div", [cur, f"c{j}"], [o], name=f"op{j}"))
        cur = o
    m_, k_ = out_shape[-2], out_shape[-1]
    w = np.random.default_rng(1).standard_normal((k_, n) if side == 0 else (n, m_)).astype(np.float32)
    inits.append(nh.from_array(w, "w"))
    nodes.append(h.make_node("MatMul", [cur, "w"] if side == 0 else ["w", cur], ["y"], name="mm"))
    g = h.make_graph(nodes, "chain", [h.make_tensor_value_info("x", T.FLOAT, src)],
                     [h.make_tensor_value_info("y", T.FLOAT, None)], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(chain=_chains(), n=st.integers(1, 5), side=st.integers(0, 1), seed=st.integers(0, 2**31))
def test_random_chains_give_the_separate_ops_bits(gpu, vkml_env, chain, n, side, seed):
    """Random Transposes, Reshapes (merges and splits) and scalings before either operand of a
    MatMul: the same bits as the ops one by one on the GPU, the CPU's values."""
    src, ops, shape = chain
    x = np.random.default_rng(seed).standard_normal(src).astype(np.float32)
    _fused_matches_separate(gpu, vkml_env, _chain_model(src, ops, shape, n, side), {"x": x}, f"{src} {ops}")


@st.composite
def _views(draw):
    shape = [draw(st.sampled_from([1, 2, 3, 4, 6])) for _ in range(draw(st.integers(1, 4)))]
    perm = list(draw(st.permutations(range(len(shape)))))
    total = math.prod(shape)
    new, rest = [], total
    while rest > 1 and len(new) < 4:
        f = draw(st.sampled_from([d for d in range(1, rest + 1) if rest % d == 0]))
        new.append(f)
        rest //= f
    new.append(rest)
    if draw(st.booleans()):
        new.insert(draw(st.integers(0, len(new))), 1)
    return shape, perm, new


@pytest.mark.skipif(tuple(int(p) for p in np.__version__.split(".")[:2]) < (2, 1),
                    reason="reshape(copy=False) needs NumPy 2.1")
@settings(max_examples=300, deadline=None)
@given(v=_views())
def test_reshape_strides_match_numpy(v):
    """layout._reshaped gives NumPy's strides for a reshape without a copy, and None exactly
    where NumPy would have to copy; _as_reshape_transpose rebuilds the view it is given."""
    shape, perm, new = v
    a = np.arange(math.prod(shape)).reshape(shape).transpose(perm)
    elem = tuple(s // a.itemsize for s in a.strides)
    try:
        b = a.reshape(new, copy=False)
    except ValueError:
        assert layout._reshaped(a.shape, elem, tuple(new)) is None
        return
    got = layout._reshaped(a.shape, elem, tuple(new))
    assert got is not None
    for d, s_got, s_np in zip(new, got, b.strides):
        assert d == 1 or s_got == s_np // a.itemsize, (shape, perm, new, got, b.strides)
    canon = layout._as_reshape_transpose(b.shape, tuple(s // b.itemsize for s in b.strides))
    assert canon is not None
    src_shape, p = canon
    np.testing.assert_array_equal(np.arange(b.size).reshape(src_shape).transpose(p), b)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64])
def test_transposes_of_unit_dims_are_views(gpu, dtype):
    """A Transpose that moves only dims of size 1 is run as a view (no GPU command) and gives
    the input's elements bit for bit; one that reorders two larger dims still runs."""
    import vkml

    et = {np.dtype(np.float32): T.FLOAT, np.dtype(np.float16): T.FLOAT16, np.dtype(np.int64): T.INT64}[np.dtype(dtype)]
    nodes = [h.make_node("Transpose", ["x"], ["a"], name="unit", perm=[1, 0, 2]),      # (1, 5, 6) -> (5, 1, 6)
             h.make_node("Relu" if dtype != np.int64 else "Neg", ["a"], ["b"], name="op"),
             h.make_node("Transpose", ["b"], ["c"], name="unit_back", perm=[1, 0, 2]),  # (5, 1, 6) -> (1, 5, 6)
             h.make_node("Transpose", ["c"], ["y"], name="real", perm=[0, 2, 1])]       # (1, 5, 6) -> (1, 6, 5)
    g = h.make_graph(nodes, "t", [h.make_tensor_value_info("x", et, [1, 5, 6])],
                     [h.make_tensor_value_info("y", et, None), h.make_tensor_value_info("c", et, None)])
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()
    x = (np.random.default_rng(0).standard_normal((1, 5, 6)) * 10).astype(dtype)
    sess = vkml.InferenceSession(model, devices=[gpu])
    got = sess.run(None, {"x": x})
    want = vkml.InferenceSession(model, devices=["cpu"]).run(None, {"x": x})
    for g_, w_ in zip(got, want):
        assert g_.shape == w_.shape and g_.dtype == w_.dtype
        np.testing.assert_array_equal(g_, w_)
    rows = {r["node"]: r for r in sess.placement()}
    assert all(r["device"] == gpu for r in rows.values()), rows
    assert not rows["unit"].get("gpu_commands") and not rows["unit_back"].get("gpu_commands"), rows
    assert rows["real"].get("gpu_commands"), rows["real"]


def test_empty_tensors_keep_their_transposes(gpu):
    """A unit-dim Transpose of an empty tensor stays a Transpose (a Reshape would read its 0
    as "keep the input's dim"): (1, 0, 3) -> (0, 1, 3)."""
    import vkml

    nodes = [h.make_node("Transpose", ["x"], ["y"], name="t", perm=[1, 0, 2])]
    g = h.make_graph(nodes, "e", [h.make_tensor_value_info("x", T.FLOAT, [1, 0, 3])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)])
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()
    (y,) = vkml.InferenceSession(model, devices=[gpu]).run(None, {"x": np.zeros((1, 0, 3), np.float32)})
    assert y.shape == (0, 1, 3), y.shape
