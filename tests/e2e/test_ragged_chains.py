"""Random chains of ops on the rows NonZero finds (vkml/compile/ragged.py), hypothesis-drawn:
each step is an op that treats the rows independently (elementwise with broadcast constants,
Transpose, Unsqueeze, ReduceSum/Softmax/ArgMax over another axis, MatMul, Slice, Concat, Gather
on another axis), one that mixes them or needs their count (ReduceSum over them, Softmax over
them, Shape, a flattening Reshape: these get trimmed values), or one that moves the padded axis.
Every chain's outputs on the GPU equal a session on the CPU device, for inputs with no, some
and all elements nonzero; both outputs of the chain (the end, and one value part-way) are
checked.
"""
from __future__ import annotations

import os

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto as T
from onnx import helper, numpy_helper

import vkml

HYP = settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", "10")) * 4, deadline=None,
               suppress_health_check=list(HealthCheck))
N = 12  # the input's length: NonZero gives [1, k], k <= N


class Chain:
    """An ONNX graph grown op by op, tracking the current value's static shape with the padded
    axis' length as the symbol "k" (the real rows' number)."""

    def __init__(self):
        self.nodes, self.inits, self.k = [], [], 0

    def const(self, value) -> str:
        name = f"c{len(self.inits)}"
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(self, op_type, inputs, **attrs) -> str:
        name = f"v{len(self.nodes)}"
        self.nodes.append(helper.make_node(op_type, inputs, [name], name=name, **attrs))
        return name


STEPS = ["add", "mul", "relu", "sigmoid", "transpose", "unsqueeze", "reduce_other", "softmax_other",
         "argmax_other", "matmul", "slice_other", "concat_other", "gather_other",
         "reduce_rows", "softmax_rows", "shape", "flatten", "where"]


def _build(steps: list[str]) -> tuple[bytes, list[str]]:
    """x [N] float -> Greater(x, 0) -> NonZero [1, k] -> Transpose [k, 1] -> Gather rows of a
    table [N, 4] -> the steps. The shape is tracked with -1 for the padded axis."""
    c = Chain()
    mask = c.op("Greater", ["x", c.const(np.float32(0))])
    nz = c.op("NonZero", [mask])
    idx = c.op("Squeeze", [nz, c.const(np.array([0], np.int64))])                     # [k]
    table = c.const(np.arange(4 * N, dtype=np.float32).reshape(N, 4) / 7 - 2)
    v = c.op("Gather", [table, idx], axis=0)                                            # [k, 4]
    shape = [-1, 4]
    mid = None
    for n, step in enumerate(steps):
        ragged_axis = shape.index(-1) if -1 in shape else None
        last = len(shape) - 1
        other = [a for a in range(len(shape)) if a != ragged_axis]
        if step in ("add", "mul"):
            v = c.op("Add" if step == "add" else "Mul", [v, c.const(np.linspace(-1, 1, shape[-1]).astype(np.float32)
                                                           if shape[-1] != -1 else np.float32(1.5))])
        elif step == "relu":
            v = c.op("Relu", [v])
        elif step == "sigmoid":
            v = c.op("Sigmoid", [v])
        elif step == "where":
            v = c.op("Where", [c.op("Greater", [v, c.const(np.float32(0.5))]), v, c.const(np.float32(-1))])
        elif step == "transpose" and len(shape) >= 2:
            perm = list(range(len(shape)))[::-1]
            v, shape = c.op("Transpose", [v], perm=perm), [shape[p] for p in perm]
        elif step == "unsqueeze" and len(shape) < 4:
            v, shape = c.op("Unsqueeze", [v, c.const(np.array([0], np.int64))]), [1] + shape
        elif step == "reduce_other" and other and len(shape) >= 2:
            a = other[-1]
            v, shape = c.op("ReduceSum", [v, c.const(np.array([a], np.int64))], keepdims=1), \
                [1 if i == a else s for i, s in enumerate(shape)]
        elif step == "softmax_other" and ragged_axis is not None and ragged_axis < last:
            v = c.op("Softmax", [v], axis=last)
        elif step == "argmax_other" and other and len(shape) >= 2:
            a = other[-1]
            v = c.op("Cast", [c.op("ArgMax", [v], axis=a, keepdims=1)], to=T.FLOAT)
            shape = [1 if i == a else s for i, s in enumerate(shape)]
        elif step == "matmul" and ragged_axis is not None and ragged_axis < last and shape[-1] != -1:
            w = np.linspace(-1, 1, shape[-1] * 3).astype(np.float32).reshape(shape[-1], 3)
            v, shape = c.op("MatMul", [v, c.const(w)]), shape[:-1] + [3]
        elif step == "slice_other" and shape[-1] not in (-1, 1):
            v = c.op("Slice", [v, c.const(np.array([1], np.int64)), c.const(np.array([shape[-1]], np.int64)),
                               c.const(np.array([last], np.int64))])
            shape = shape[:-1] + [shape[-1] - 1]
        elif step == "concat_other" and shape[-1] != -1:
            v, shape = c.op("Concat", [v, v], axis=last), shape[:-1] + [2 * shape[-1]]
        elif step == "gather_other" and shape[-1] not in (-1,) and shape[-1] >= 1:
            v = c.op("Gather", [v, c.const(np.array([0, shape[-1] - 1], np.int64))], axis=last)
            shape = shape[:-1] + [2]
        elif step == "reduce_rows" and ragged_axis is not None:
            v = c.op("ReduceSum", [v, c.const(np.array([ragged_axis], np.int64))], keepdims=1)
            shape = [1 if s == -1 else s for s in shape]
        elif step == "softmax_rows" and ragged_axis is not None and len(shape) >= 2:
            v = c.op("Softmax", [v], axis=ragged_axis)
        elif step == "shape":
            v, shape = c.op("Cast", [c.op("Shape", [v])], to=T.FLOAT), [len(shape)]
        elif step == "flatten":
            v, shape = c.op("Reshape", [v, c.const(np.array([-1], np.int64))]), [-1 if -1 in shape else int(np.prod(shape))]
        if n == len(steps) // 2:
            mid = v
    outs = [v] if mid in (None, v) else [v, mid]
    graph = helper.make_graph(c.nodes, "chain", [helper.make_tensor_value_info("x", T.FLOAT, [N])],
                              [helper.make_tensor_value_info(o, T.FLOAT, None) for o in outs], c.inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString(), outs


@HYP
@given(st.lists(st.sampled_from(STEPS), min_size=1, max_size=6), st.integers(0, 2**32 - 1),
       st.sampled_from(["none", "some", "all"]))
def test_random_chains_on_padded_rows_match_the_cpu(gpu, steps, seed, kind):
    model, outs = _build(steps)
    x = np.random.default_rng(seed).standard_normal(N).astype(np.float32)
    x = -np.abs(x) if kind == "none" else (np.abs(x) + 0.1 if kind == "all" else x)
    want = vkml.InferenceSession(model, devices=["cpu"]).run(None, {"x": x})
    sess = vkml.InferenceSession(model, devices=[gpu, "cpu"])
    got = sess.run(None, {"x": x})
    for name, g, w in zip(outs, got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (steps, name, g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=f"{steps} {name}")
    rows = {r["node"]: r["device"] for r in sess.placement()}
    assert rows["v1"] == gpu, rows  # the NonZero
