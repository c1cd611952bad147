"""Random small graphs of ops the GPUs support, with a forced device per node.

A recipe is a list of steps (op, a, b, device): op names an entry of OPS, a and b pick
earlier values (modulo how many there are), device picks a device (modulo the list; a node
whose op has no GPU kernel goes to the CPU). Every value has shape [N, C], N symbolic.
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from vkml.kernels import get_kernel

UNARY = ["Relu", "Neg", "Abs", "Tanh", "Sigmoid"]
BINARY = ["Add", "Sub", "Mul", "Max", "Min"]
# Composites: several nodes, [N, C] in and out.
OPS = UNARY + BINARY + ["AddBias", "MulScalar", "MatMul", "ReshapeRelu", "TransposeTwice", "Softmax", "Where"]


def build(recipe, c: int, devices: list[str], n_inputs: int = 2, seed: int = 0):
    """(model bytes, {node name: device}) for `recipe` over inputs x0.. of shape [N, c]."""
    rng = np.random.default_rng(seed)
    values = [f"x{i}" for i in range(n_inputs)]
    nodes, inits, forced = [], [], {}
    count = [0]

    def node(op, ins, dev_pick, **attrs):
        name = f"n{count[0]}"
        out = f"v{count[0]}"
        count[0] += 1
        nodes.append(h.make_node(op, ins, [out], name=name, **attrs))
        dev = devices[dev_pick % len(devices)]
        if dev != "cpu" and get_kernel(op) is None:
            dev = "cpu"
        forced[name] = dev
        return out

    def const(arr):
        name = f"k{len(inits)}"
        inits.append(nh.from_array(np.asarray(arr), name))
        return name

    for op, a, b, d in recipe:
        x, y = values[a % len(values)], values[b % len(values)]
        if op in UNARY:
            out = node(op, [x], d)
        elif op in BINARY:
            out = node(op, [x, y], d)
        elif op == "AddBias":
            out = node("Add", [x, const(rng.standard_normal(c).astype(np.float32))], d)
        elif op == "MulScalar":
            out = node("Mul", [x, const(np.float32(rng.uniform(-2, 2)))], d)
        elif op == "MatMul":
            w = (rng.standard_normal((c, c)) / np.sqrt(c)).astype(np.float32)
            out = node("MatMul", [x, const(w)], d)
        elif op == "ReshapeRelu":  # views of views (aliasing) around a kernel
            flat = node("Reshape", [x, const(np.array([-1], np.int64))], d)
            r = node("Relu", [flat], d + 1)
            out = node("Reshape", [r, const(np.array([-1, c], np.int64))], d + 2)
        elif op == "TransposeTwice":
            t = node("Transpose", [x], d, perm=[1, 0])
            out = node("Transpose", [t], d + 1, perm=[1, 0])
        elif op == "Softmax":
            out = node("Softmax", [x], d, axis=-1)
        else:  # Where(x > y, x, y * 2)
            m = node("Greater", [x, y], d)
            y2 = node("Mul", [y, const(np.float32(2.0))], d + 1)
            out = node("Where", [m, x, y2], d + 2)
        values.append(out)
    outs = [values[-1]] + [v for v in values[n_inputs:-1][-3::2]]
    g = h.make_graph(nodes, "random",
                     [h.make_tensor_value_info(f"x{i}", T.FLOAT, ["N", c]) for i in range(n_inputs)],
                     [h.make_tensor_value_info(o, T.FLOAT, ["N", c]) for o in outs], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(m)
    return m.SerializeToString(), forced


def random_recipe(rng: np.random.Generator, steps: int) -> list[tuple[str, int, int, int]]:
    return [(OPS[rng.integers(len(OPS))], int(rng.integers(8)), int(rng.integers(8)), int(rng.integers(8)))
            for _ in range(steps)]


def feeds(rng: np.random.Generator, n: int, c: int, n_inputs: int = 2) -> dict[str, np.ndarray]:
    return {f"x{i}": rng.standard_normal((n, c)).astype(np.float32) for i in range(n_inputs)}
