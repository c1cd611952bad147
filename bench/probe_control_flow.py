"""Control flow decided by the data, on a GPU (issue #15): an If on a data condition
(vkml/compile/guards.py) and a Loop that stops on its data (vkml/runtime/subgraphs.py), each
timed with those paths on and off (off: the If and the Loop's body in NumPy, as before them),
against onnxruntime's CPU provider, in interleaved rounds. Host in, host out; one JSON line per
(model, variant) with the median of every round and the run count.

    python bench/probe_control_flow.py [--device vulkan:0] [--rounds 5] [--runs 40] [--width 256]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np
from onnx import TensorProto as T
from onnx import helper

vi = helper.make_tensor_value_info


def if_model(width: int) -> bytes:
    """y = If(ReduceSum(x) > 0, MLP_a(x), MLP_b(x)) + x: each branch two width x width MatMuls with Relu."""
    rng = np.random.default_rng(0)

    def mlp(tag: str):
        ws = [helper.make_tensor(f"{tag}w{i}", T.FLOAT, [width, width],
                                 (rng.standard_normal(width * width) / np.sqrt(width)).astype(np.float32))
              for i in range(2)]
        nodes = [helper.make_node("MatMul", ["x", f"{tag}w0"], [f"{tag}a"]), helper.make_node("Relu", [f"{tag}a"], [f"{tag}r"]),
                 helper.make_node("MatMul", [f"{tag}r", f"{tag}w1"], [f"{tag}out"])]
        return helper.make_graph(nodes, tag, [], [vi(f"{tag}out", T.FLOAT, [64, width])], ws)
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0), helper.make_node("Greater", ["s", "zero"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=mlp("t"), else_branch=mlp("e")),
             helper.make_node("Add", ["y", "x"], ["z"])]
    g = helper.make_graph(nodes, "if_on_data", [vi("x", T.FLOAT, [64, width])], [vi("z", T.FLOAT, [64, width])],
                          [helper.make_tensor("zero", T.FLOAT, [], [0.0])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()


def while_model(width: int, steps: int = 16) -> bytes:
    """h = Relu(h @ w) + x while ReduceSum(h) < limit, at most `steps` times; the stacked h's."""
    rng = np.random.default_rng(1)
    body = helper.make_graph(
        [helper.make_node("MatMul", ["h", "w"], ["hw"]), helper.make_node("Relu", ["hw"], ["r"]),
         helper.make_node("Add", ["r", "x"], ["h_out"]), helper.make_node("ReduceSum", ["h_out"], ["s"], keepdims=0),
         helper.make_node("Less", ["s", "limit"], ["cond_out"]), helper.make_node("Identity", ["h_out"], ["scan"])],
        "body", [vi("i", T.INT64, []), vi("cond", T.BOOL, []), vi("h", T.FLOAT, [64, width])],
        [vi("cond_out", T.BOOL, []), vi("h_out", T.FLOAT, [64, width]), vi("scan", T.FLOAT, [64, width])])
    w = (rng.standard_normal((width, width)) * 0.5 / np.sqrt(width)).astype(np.float32)
    g = helper.make_graph([helper.make_node("Loop", ["M", "", "h0"], ["h", "hs"], body=body)], "while_on_data",
                          [vi("x", T.FLOAT, [64, width]), vi("h0", T.FLOAT, [64, width]), vi("limit", T.FLOAT, [])],
                          [vi("h", T.FLOAT, [64, width]), vi("hs", T.FLOAT, None)],
                          [helper.make_tensor("M", T.INT64, [], [steps]), helper.make_tensor("w", T.FLOAT, [width, width], w.ravel())])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="vulkan:0")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=40, help="timed runs per variant per round (after warm-up)")
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    import vkml
    from vkml.compile import guards
    from vkml.runtime import subgraphs

    rng = np.random.default_rng(2)
    x = rng.standard_normal((64, a.width)).astype(np.float32)
    cases = {"if_on_data": (if_model(a.width), [{"x": x}, {"x": -np.abs(x)}]),
             "while_on_data": (while_model(a.width), [{"x": np.abs(x) * 0.1, "h0": np.zeros_like(x),
                                                        "limit": np.array(1e9, np.float32)}])}
    out = open(a.out, "a") if a.out else None
    for name, (model, feeds) in cases.items():
        sessions = {}
        defaults = guards.GUARD_SHARED_MAX, subgraphs.MIN_ELEMENTS
        for variant in ("on", "off"):  # (decided as plans are made and bodies first called: the first runs)
            if variant == "off":
                guards.GUARD_SHARED_MAX, subgraphs.MIN_ELEMENTS = -1, 1 << 62
            sessions[variant] = vkml.InferenceSession(model, devices=[a.device])
            for f in feeds:
                sessions[variant].run(None, f)
            guards.GUARD_SHARED_MAX, subgraphs.MIN_ELEMENTS = defaults
        try:
            import onnxruntime as ort

            sessions["onnxruntime-cpu"] = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
        except Exception as e:  # (reported, not timed)
            print(f"onnxruntime: {type(e).__name__}: {e}", file=sys.stderr)
        for f in feeds:
            ref = vkml.InferenceSession(model, devices=["cpu"]).run(None, f)
            for s in sessions.values():
                for g_, w_ in zip(s.run(None, f), ref):
                    np.testing.assert_allclose(np.asarray(g_), w_, rtol=1e-3, atol=1e-3)
        times = {v: [] for v in sessions}
        for _ in range(a.rounds):
            for v, s in sessions.items():
                t_end = time.perf_counter() + 0.2
                while time.perf_counter() < t_end:
                    s.run(None, feeds[0])
                ts = []
                for k in range(a.runs):
                    f = feeds[k % len(feeds)]
                    t0 = time.perf_counter()
                    s.run(None, f)
                    ts.append(time.perf_counter() - t0)
                times[v].append(statistics.median(ts))
        for v, ts in times.items():
            row = {"probe": "control_flow", "model": name, "variant": v, "width": a.width,
                   "median_ms_per_round": [round(t * 1e3, 4) for t in ts],
                   "median_ms": round(statistics.median(ts) * 1e3, 4), "runs": a.rounds * a.runs}
            if v != "onnxruntime-cpu":
                row["rows_on_gpu"] = sum(r["device"] != "cpu" for r in sessions[v].placement())
            line = json.dumps(row)
            print(line, flush=True)
            if out:
                out.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
