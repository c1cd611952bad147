"""Session.run from many threads at once: every output equals the single-thread result."""
import threading

import numpy as np
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

import vkml


def branchy_model(width: int = 6, depth: int = 5):
    """x fans out into `width` independent branches of `depth` ops that are summed at the end."""
    rng = np.random.default_rng(1)
    nodes, inits, heads = [], [], []
    for b in range(width):
        cur = "x"
        for d in range(depth):
            w = f"w{b}_{d}"
            inits.append(numpy_helper.from_array(rng.standard_normal((1, 16)).astype(np.float32), w))
            op = ("Add", "Mul", "Sub", "Div")[(b + d) % 4] if d % 4 != 3 else "Add"
            nodes.append(h.make_node(op, [cur, w], [f"b{b}_{d}"], name=f"n{b}_{d}"))
            cur = f"b{b}_{d}"
        heads.append(cur)
    acc = heads[0]
    for k, hd in enumerate(heads[1:]):
        nodes.append(h.make_node("Add", [acc, hd], [f"s{k}"], name=f"sum{k}"))
        acc = f"s{k}"
    nodes.append(h.make_node("Add", [acc, "x"], ["y"], name="out"))
    g = h.make_graph(nodes, "branchy", [h.make_tensor_value_info("x", T.FLOAT, ["N", 16])],
                     [h.make_tensor_value_info("y", T.FLOAT, ["N", 16])], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


import pytest


@pytest.mark.parametrize("executor", ["parallel", "sequential"])
def test_sixteen_threads_two_hundred_runs_each(executor):
    sess = vkml.InferenceSession(branchy_model(), devices=["cpu"], executor=executor)
    rng = np.random.default_rng(2)
    xs = [rng.standard_normal((int(rng.integers(1, 5)), 16)).astype(np.float32) for _ in range(32)]
    expected = [sess.run(None, {"x": x})[0] for x in xs]
    errors: list[str] = []
    barrier = threading.Barrier(16)

    def worker(t: int) -> None:
        barrier.wait()
        for i in range(200):
            k = (t * 7 + i) % len(xs)
            out = sess.run(None, {"x": xs[k]})[0]
            if not np.array_equal(out, expected[k]):
                errors.append(f"thread {t} run {i}")

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(16)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert not any(th.is_alive() for th in threads), "a run hung"
    assert not errors, errors[:5]
