"""GPU RotaryEmbedding (vkml/kernels/rotary.py, shaders/rotary.comp) against vkml's CPU operator
(vkml/ops/attention.py) over hypothesis shapes: 4-D (batch, heads, seq, head) and 3-D
(batch, seq, hidden) with num_heads, interleaved or not, rotary_embedding_dim (0: the whole head,
or a partial even width), cos/sin caches indexed by position_ids (int64, int32) or given per
(batch, seq), float32/float16/float64; and position ids out of range raising the CPU operator's
error. Bitwise: the shader rounds each product and then sums them in the CPU operator's order
(float16 computed in float32 and rounded once), with no fma; NaN payloads are the device's."""
from __future__ import annotations

import os
import sys
import types

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
from _gen import seeds  # noqa: E402
from _oracle import gpu_and_cpu, make_model, same_failure  # noqa: E402

import vkml  # noqa: E402
from vkml.kernels import Unsupported, get_kernel  # noqa: E402
from vkml.kernels.registry import TensorSpec  # noqa: E402

HYP = settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", "10")), deadline=None,
               suppress_health_check=list(HealthCheck))
DTYPES = [np.dtype(t) for t in (np.float32, np.float16, np.float64)]


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(f"u{a.itemsize}")


def _case(rng, dtype, b, h, s, d, rot, rank3, positions, n_pos=None):
    """(inputs dict, feed, attrs) of one RotaryEmbedding node."""
    x = rng.standard_normal((b, h, s, d) if not rank3 else (b, s, h * d)) * 4
    half = (rot or d) // 2
    if positions is not None:
        n_pos = n_pos or s + 3
        cos = rng.uniform(-1, 1, (n_pos, half))
        sin = rng.uniform(-1, 1, (n_pos, half))
        pos = rng.integers(0, n_pos, (b, s)).astype(positions)
    else:
        cos = rng.uniform(-1, 1, (b, s, half))
        sin = rng.uniform(-1, 1, (b, s, half))
        pos = None
    inputs = {"x": x.astype(dtype), "cos": cos.astype(dtype), "sin": sin.astype(dtype), "pos": pos}
    return inputs, {k: v for k, v in inputs.items() if v is not None}


def _run(gpu, inputs, feed, attrs):
    model = make_model("RotaryEmbedding", inputs, attrs, 23)
    (got,), (want,), sess = gpu_and_cpu(gpu, model, feed)
    (row,) = sess.placement()
    assert row["device"] == gpu and row.get("pipelines"), row
    assert got.dtype == want.dtype and got.shape == want.shape
    # NaNs where the CPU has them (which NaN a device makes of inf * 0 varies: an H100's
    # differ from NumPy's), every other value bit for bit.
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(_bits(got)[~nan], _bits(want)[~nan])


@HYP
@given(b=st.integers(1, 3), h=st.integers(1, 4), s=st.integers(1, 5), half=st.integers(1, 8), data=st.data(),
       dtype=st.sampled_from(DTYPES), interleaved=st.booleans(), rank3=st.booleans(),
       positions=st.sampled_from([None, np.int64, np.int32]), seed=seeds)
def test_rotary(gpu, b, h, s, half, data, dtype, interleaved, rank3, positions, seed):
    d = 2 * half + data.draw(st.integers(0, 3)) * 2  # even head sizes; rot may leave some out
    rot = data.draw(st.sampled_from([0, 2 * half]))
    inputs, feed = _case(np.random.default_rng(seed), dtype, b, h, s, d, rot, rank3, positions)
    attrs = {"interleaved": int(interleaved), "rotary_embedding_dim": rot}
    if rank3:
        attrs["num_heads"] = h
    _run(gpu, inputs, feed, attrs)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("interleaved", [0, 1])
def test_llm_shapes(gpu, dtype, interleaved):
    """A decoder layer's shape: 2 x 8 heads x 37 tokens x 64, partial rotation of 32, positions
    from a long cache, odd sizes for the grid-stride loop; and special values pass through."""
    rng = np.random.default_rng(5)
    inputs, feed = _case(rng, dtype, 2, 8, 37, 64, 32, False, np.int64, n_pos=4096)
    x = inputs["x"]
    x[0, 0, 0, :4] = [np.inf, -np.inf, np.nan, -0.0]
    x[1, 2, 3, 40:44] = [np.nan, np.inf, -0.0, 65504]
    _run(gpu, inputs, feed, {"interleaved": interleaved, "rotary_embedding_dim": 32})
    inputs, feed = _case(rng, dtype, 1, 8, 37, 64, 0, True, None)
    _run(gpu, inputs, feed, {"interleaved": interleaved, "num_heads": 8})


@pytest.mark.parametrize("bad", [[(0, 0, 50)], [(1, 2, -1)], [(0, 1, 2**40), (1, 0, 60)], [(1, 4, -(2**63))],
                                 [(0, 3, 2**31)]])
@pytest.mark.parametrize("pos_dtype", [np.int64, np.int32])
def test_bad_positions_raise_as_on_the_cpu(gpu, bad, pos_dtype):
    """Position ids outside the cache, computed at run time: the GPU run raises the CPU
    operator's error (same type, same message), and the session goes on working."""
    rng = np.random.default_rng(2)
    inputs, feed = _case(rng, np.float32, 2, 3, 5, 8, 0, False, pos_dtype, n_pos=50)
    model = make_model("RotaryEmbedding", inputs, {}, 23)
    gpu_sess = vkml.InferenceSession(model, devices=[gpu])
    cpu_sess = vkml.InferenceSession(model, devices=["cpu"])
    pos = feed["pos"].copy()
    for i, j, v in bad:
        if pos_dtype == np.int32 and not -2**31 <= v < 2**31:
            v = -7
        pos[i, j] = v
    assert "position_ids must be in [0, 50)" in str(same_failure(gpu_sess, cpu_sess, {**feed, "pos": pos}, feed))


def test_bad_positions_known_on_the_host(gpu):
    """Position ids that are an initializer and out of range keep the node on the CPU, which
    reports them; in range, the node runs on the GPU."""
    rng = np.random.default_rng(3)
    inputs, feed = _case(rng, np.float32, 1, 2, 3, 4, 0, False, np.int64, n_pos=10)
    for pos, device in ((np.array([[0, 9, 10]], np.int64), "cpu"), (np.array([[0, 9, 3]], np.int64), gpu)):
        model = make_model("RotaryEmbedding", {**inputs, "pos": pos}, {}, 23, consts=("pos",))
        sess = vkml.InferenceSession(model, devices=[gpu, "cpu"])
        feed = {k: inputs[k] for k in ("x", "cos", "sin")}
        if device == "cpu":
            (row,) = sess.placement()
            assert row["device"] == "cpu" and "position_ids" in str(row), row
            with pytest.raises(Exception, match=r"position_ids must be in \[0, 10\)"):
                sess.run(None, feed)
        else:
            got = sess.run(None, feed)[0]
            (row,) = sess.placement()
            assert row["device"] == gpu, row
            want = vkml.InferenceSession(model, devices=["cpu"]).run(None, feed)[0]
            np.testing.assert_array_equal(_bits(got), _bits(want))


def _dev(*features):
    return types.SimpleNamespace(name="fake GPU", features=frozenset(features), max_storage_buffer_range=1 << 30)


def _specs(x, cos, sin=None, pos=None, dtype=np.float32):
    dt = np.dtype(dtype)
    out = [TensorSpec(x, dt), TensorSpec(cos, dt), TensorSpec(sin or cos, dt)]
    return out + ([TensorSpec(pos, np.dtype(np.int64))] if pos else [])


def test_refusals():
    """What stays on the CPU (which reports the errors among them)."""
    k = get_kernel("RotaryEmbedding")
    dev = _dev("fp64", "storage_16bit")
    k.check(dev, "RotaryEmbedding", {}, _specs((1, 2, 3, 8), (3, 4), pos=(1, 3)))
    k.check(dev, "RotaryEmbedding", {"num_heads": 2}, _specs((1, 3, 16), (1, 3, 4)))
    k.check(dev, "RotaryEmbedding", {}, _specs((1, 2, 3, 8), (3, 4), pos=(1, 3), dtype=np.float64))
    bad = [
        ({}, _specs((1, 3, 16), (1, 3, 4)), "num_heads"),                        # 3-D without num_heads
        ({"num_heads": 3}, _specs((1, 3, 16), (1, 3, 4)), "multiple"),           # 16 % 3
        ({"rotary_embedding_dim": 3}, _specs((1, 2, 3, 8), (1, 3, 1)), "even"),  # odd
        ({"rotary_embedding_dim": 10}, _specs((1, 2, 3, 8), (1, 3, 5)), "even"),  # wider than the head
        ({}, _specs((1, 2, 3, 8), (3, 3), pos=(1, 3)), "do not fit"),            # cache width
        ({}, _specs((1, 2, 3, 8), (3, 4), pos=(3, 1)), "do not fit"),            # position_ids shape
        ({}, _specs((1, 2, 3, 8), (2, 3, 4)), "must be"),                        # per-(b, s) cache shape
        ({}, _specs((1, 2, 3, 8), (3, 4), (4, 4), pos=(1, 3)), "differ"),        # sin / cos shapes
        ({}, _specs((1, 2, 3, 8, 1), (3, 4)), "rank"),
        ({}, _specs((1, 0, 3, 8), (1, 3, 4)), "empty"),
    ]
    for attrs, specs, why in bad:
        with pytest.raises(Unsupported, match=why):
            k.check(dev, "RotaryEmbedding", attrs, specs)
    with pytest.raises(Unsupported, match="shaderFloat64"):
        k.check(_dev("storage_16bit"), "RotaryEmbedding", {}, _specs((1, 2, 3, 8), (1, 3, 4), dtype=np.float64))
    with pytest.raises(Unsupported, match="storage_16bit"):
        k.check(_dev("fp64"), "RotaryEmbedding", {}, _specs((1, 2, 3, 8), (1, 3, 4), dtype=np.float16))
    x, c = TensorSpec((1, 2, 3, 8), np.dtype(np.float32)), TensorSpec((1, 3, 4), np.dtype(np.float16))
    with pytest.raises(Unsupported, match="caches of"):
        k.check(dev, "RotaryEmbedding", {}, [x, c, c])
    c = TensorSpec((3, 4), np.dtype(np.float32))
    with pytest.raises(Unsupported, match="int16"):
        k.check(dev, "RotaryEmbedding", {}, [x, c, c, TensorSpec((1, 3), np.dtype(np.int16))])
