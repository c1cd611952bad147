"""Issue #19, the loader's half: hostile model files get a clear ModelError at load, never a read
outside the model's folder, a hang, a crash or time that grows faster than the model."""
import time

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import vkml
from vkml.onnx_loader import load_model


def model(nodes, inputs, outputs, inits=(), opset=17, ir=8, **kw):
    g = h.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)], **kw)
    m.ir_version = ir
    return m


X = h.make_tensor_value_info("x", T.FLOAT, ["N", 3])
Y = h.make_tensor_value_info("y", T.FLOAT, None)


# ---------------------------------------------------------------- linear loading
def chain(n: int) -> bytes:
    nodes = [h.make_node("Relu", [f"t{i}" if i else "x"], [f"t{i + 1}" if i + 1 < n else "y"], name=f"n{i}")
             for i in range(n)]
    return model(nodes, [X], [Y]).SerializeToString()


def test_a_40k_node_chain_loads_in_linear_time():
    data = chain(40_000)
    t = time.perf_counter()
    m = load_model(data)
    elapsed = time.perf_counter() - t
    assert len(m.graph.nodes) == 40_000
    assert elapsed < 10, f"loading 40,000 chained nodes took {elapsed:.1f} s"  # ~1.4 s on the 2-core VM
