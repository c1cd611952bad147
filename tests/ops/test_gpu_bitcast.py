"""GPU BitCast (vkml/kernels/views.py): a view, the input's bytes under another dtype of the
same width, recording nothing. Checked against vkml's CPU operator byte for byte: alone (the
node is placed on the GPU and dispatches nothing, which is what a view is), between computing
nodes (every node on the GPU, the bits passing through unchanged), through run_ops, and the
refusals (other widths: ONNX and the CPU operator reject them; constant inputs).
"""
from __future__ import annotations

import os
import sys
import types

import ml_dtypes
import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import helper

sys.path.insert(0, os.path.dirname(__file__))
from _gen import nonempty_shapes, seeds  # noqa: E402
from _oracle import gpu_and_cpu, make_model  # noqa: E402

import vkml  # noqa: E402
from vkml.ir import dtypes  # noqa: E402
from vkml.kernels import Unsupported, get_kernel  # noqa: E402
from vkml.kernels.registry import TensorSpec  # noqa: E402

HYP = settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", "10")), deadline=None,
               suppress_health_check=list(HealthCheck))
BY_SIZE = {
    1: [np.bool_, np.int8, np.uint8, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2],
    2: [np.int16, np.uint16, np.float16, ml_dtypes.bfloat16],
    4: [np.int32, np.uint32, np.float32],
    8: [np.int64, np.uint64, np.float64],
}
PAIRS = [(np.dtype(a), np.dtype(b)) for ts in BY_SIZE.values() for a in ts for b in ts]


def random_bytes(rng: np.random.Generator, shape, dtype: np.dtype) -> np.ndarray:
    """Any bit pattern (NaNs, subnormals...); bool as 0/1 bytes, what a bool tensor holds."""
    n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = rng.integers(0, 256, n, dtype=np.uint8)
    if dtype == np.bool_:
        raw &= 1
    return raw.view(dtype).reshape(shape)


def same_bytes(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    np.testing.assert_array_equal(np.ascontiguousarray(got).reshape(-1).view(np.uint8),
                                  np.ascontiguousarray(want).reshape(-1).view(np.uint8))


@HYP
@given(pair=st.sampled_from(PAIRS), shape=nonempty_shapes, seed=seeds)
def test_bitcast_alone(gpu, pair, shape, seed):
    src, dst = pair
    x = random_bytes(np.random.default_rng(seed), shape, src)
    model = make_model("BitCast", {"x": x}, {"to": dtypes.onnx_type(dst)}, 26)
    (got,), (want,), sess = gpu_and_cpu(gpu, model, {"x": x}, quiet=True)
    (row,) = sess.placement()
    assert row["device"] == gpu, row
    assert not row.get("pipelines") and not row.get("gpu_commands"), f"a view dispatched work: {row}"
    same_bytes(got, want)


def _chain_model(shape) -> onnx.ModelProto:
    """x (float32) -> Abs -> BitCast int32 -> BitwiseXor m -> BitCast float32 -> Neg -> y,
    plus the int32 view as a second output."""
    nodes = [helper.make_node("Abs", ["x"], ["a"]),
             helper.make_node("BitCast", ["a"], ["i"], to=onnx.TensorProto.INT32),
             helper.make_node("BitwiseXor", ["i", "m"], ["j"]),
             helper.make_node("BitCast", ["j"], ["f"], to=onnx.TensorProto.FLOAT),
             helper.make_node("Neg", ["f"], ["y"])]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, shape),
         helper.make_tensor_value_info("m", onnx.TensorProto.INT32, shape)],
        [helper.make_value_info("y", onnx.TypeProto()), helper.make_value_info("i", onnx.TypeProto())])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)], ir_version=10)


@HYP
@given(shape=nonempty_shapes, seed=seeds)
def test_bitcast_between_gpu_nodes(gpu, shape, seed):
    rng = np.random.default_rng(seed)
    x = random_bytes(rng, shape, np.dtype(np.float32))
    m = (rng.integers(0, 2**32 - 1, shape, dtype=np.uint32, endpoint=True) & np.uint32(0x807FFFFF)).view(np.int32)
    feed = {"x": x, "m": m}
    got, want, sess = gpu_and_cpu(gpu, _chain_model(shape), feed, quiet=True)
    rows = {r["node"]: r for r in sess.placement()}
    assert all(r["device"] == gpu for r in rows.values()), rows
    for r in rows.values():
        assert bool(r.get("pipelines")) == (r["op"] != "BitCast"), r
    # Abs and Neg are float arithmetic: a device may return any NaN for a NaN (an H100 gives
    # 0x7FFFFFFF) and flush subnormals to zero (the H100 does). The mask keeps the exponent, so
    # only lanes whose x has an all-ones or all-zeros exponent can meet either on the way: those
    # are left out, the others compare bitwise.
    e = x.view(np.uint32) & np.uint32(0x7F800000)
    nan = (e == np.uint32(0x7F800000)) | (e == 0)
    y, i = got
    wy, wi = want
    same_bytes(np.where(nan, 0, y).astype(y.dtype), np.where(nan, 0, wy).astype(wy.dtype))
    same_bytes(np.where(nan, 0, i).astype(i.dtype), np.where(nan, 0, wi).astype(wi.dtype))


def test_bitcast_run_ops(gpu):
    """run_ops aliases outputs with DeviceTensor.reshape (the input's dtype): the kernel gives
    the view its target dtype. (consts=False: with host values, the kernel would take the
    input for a constant and refuse it.)"""
    from vkml.runtime.testing import run_ops

    x = np.array([[1.5, -2.0, np.inf], [0.0, -0.0, 3e-40]], np.float32)
    out = run_ops(int(gpu.split(":")[1]), [("BitCast", {"to": onnx.TensorProto.UINT32}, ["x"], ["y"]),
                                            ("BitwiseAnd", {}, ["y", "m"], ["z"])],
                  {"x": x, "m": np.array(0x7FFFFFFF, np.uint32)}, consts=False)
    assert out["y"].dtype == np.uint32
    np.testing.assert_array_equal(out["y"], x.view(np.uint32))
    np.testing.assert_array_equal(out["z"], x.view(np.uint32) & 0x7FFFFFFF)


def test_bitcast_other_width_fails_as_on_the_cpu(gpu):
    x = np.arange(4, dtype=np.float32)
    model = make_model("BitCast", {"x": x}, {"to": onnx.TensorProto.INT64}, 26)
    sess = vkml.InferenceSession(model, devices=[gpu])
    (row,) = sess.placement()
    assert row["device"] == "cpu" and "equal widths" in row["reason"], row
    with pytest.raises(Exception, match="reinterpret"):
        sess.run(None, {"x": x})


def test_bitcast_refusals():
    k = get_kernel("BitCast")
    dev = types.SimpleNamespace(name="fake GPU", features=frozenset({"storage_8bit", "storage_16bit", "int64"}))
    f32 = TensorSpec((3,), np.dtype(np.float32))
    k.check(dev, "BitCast", {"to": onnx.TensorProto.INT32}, [f32])
    assert k.infer("BitCast", {"to": onnx.TensorProto.INT32}, [f32])[0].dtype == np.int32
    with pytest.raises(Unsupported, match="equal widths"):
        k.check(dev, "BitCast", {"to": onnx.TensorProto.FLOAT16}, [f32])
    with pytest.raises(Unsupported, match="constant"):
        k.check(dev, "BitCast", {"to": onnx.TensorProto.INT32},
                [TensorSpec((3,), np.dtype(np.float32), np.zeros(3, np.float32))])
    with pytest.raises(Unsupported):  # complex64 cannot live in a device tensor
        k.check(dev, "BitCast", {"to": onnx.TensorProto.COMPLEX64}, [TensorSpec((3,), np.dtype(np.int64))])
    no16 = types.SimpleNamespace(name="no 16-bit storage", features=frozenset({"storage_8bit", "int64"}))
    with pytest.raises(Unsupported, match="storage_16bit"):
        k.check(no16, "BitCast", {"to": onnx.TensorProto.FLOAT16}, [TensorSpec((3,), np.dtype(np.int16))])
