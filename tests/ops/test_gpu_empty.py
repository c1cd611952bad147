"""GPU nodes over empty (zero-element) tensors, against vkml's CPU operators: an empty input
with a non-empty output (a Reduce of an empty set gives its identity, MatMul over K = 0
gives zeros, Pad of an empty tensor gives the pad value, Concat with an empty piece) and
empty outputs. The GPU session must give the CPU's result; where the node stays on the GPU
its empty bindings must not reach a dispatch (vkml/compile/specialize.py _static)."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from _oracle import gpu_and_cpu, make_model  # noqa: E402


REDUCE = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
          "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"]
E = np.zeros((2, 0, 3), np.float32)


def both(gpu, op, inputs, attrs=None, opset=18, consts=()):
    model = make_model(op, inputs, attrs or {}, opset, consts=consts)
    feed = {k: np.asarray(v) for k, v in inputs.items() if v is not None and k not in consts}
    got, want, sess = gpu_and_cpu(gpu, model, feed)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (op, g.dtype, g.shape, w.dtype, w.shape)
        np.testing.assert_array_equal(g, w, err_msg=op)
    return sess.placement(), want[0]


@pytest.mark.parametrize("op", REDUCE)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("axes,keepdims", [((1,), 1), ((1,), 0), ((0, 1), 1), (None, 0)])
def test_reduce_empty_set(gpu, op, dtype, axes, keepdims):
    x = E.astype(dtype)
    ins = {"x": x, "axes": None if axes is None else np.array(axes, np.int64)}
    (row,), want = both(gpu, op, ins, {"keepdims": keepdims}, consts=("axes",))
    assert row["device"] == gpu, row
    assert bool(row.get("gpu_commands")) == bool(want.size), row  # the identity written, no read


@pytest.mark.parametrize("a,b", [((3, 0), (0, 4)), ((2, 3, 0), (0, 5)), ((0, 3), (3, 4)), ((3, 4), (4, 0))])
def test_matmul_empty(gpu, a, b):
    both(gpu, "MatMul", {"a": np.ones(a, np.float32), "b": np.ones(b, np.float32)})


def test_pad_empty_input(gpu):
    both(gpu, "Pad", {"x": np.zeros((0, 3), np.float32), "pads": np.array([1, 0, 2, 0], np.int64),
                      "value": np.array(7, np.float32)}, consts=("pads", "value"))


def test_concat_with_empty_piece(gpu):
    rows, _ = both(gpu, "Concat", {"a": np.ones((2, 3), np.float32), "b": np.zeros((0, 3), np.float32),
                                "c": np.full((1, 3), 2, np.float32)}, {"axis": 0})
    assert rows[0]["device"] == gpu and rows[0].get("gpu_commands") == 2, rows


@pytest.mark.parametrize("op,inputs,attrs", [
    ("Add", {"a": np.zeros((0, 3), np.float32), "b": np.ones((1, 3), np.float32)}, {}),
    ("Relu", {"x": np.zeros((4, 0), np.float32)}, {}),
    ("Softmax", {"x": np.zeros((0, 5), np.float32)}, {"axis": -1}),
    ("Transpose", {"x": np.zeros((2, 0, 3), np.float32)}, {"perm": [2, 0, 1]}),
    ("Cast", {"x": np.zeros((0,), np.float32)}, {"to": 10}),
    ("Where", {"c": np.zeros((0, 2), bool), "a": np.ones((0, 2), np.float32), "b": np.ones((1, 2), np.float32)}, {}),
    ("Gemm", {"a": np.ones((3, 0), np.float32), "b": np.ones((0, 4), np.float32), "c": np.ones((4,), np.float32)},
     {"beta": 2.0}),
])
def test_other_empty(gpu, op, inputs, attrs):
    both(gpu, op, inputs, attrs)
