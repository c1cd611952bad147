"""The model zoo (tests/zoo/, issue #15) timed on a device against onnxruntime's CPU provider in
the same process: per model, the median host-to-host latency of session.run on vkml's device
and on onnxruntime (all cores), each after a timed warm-up (>= 0.5 s: a GPU lowers its clocks
when idle), how many of the model's nodes ran on the device (and how many were constants folded
while planning, which need no device), and the largest error against onnxruntime. The zoo's models are small
rebuilds (tiny widths), so this measures per-run and per-dispatch overhead more than compute.

    python bench/zoo_timing.py [--device vulkan:0] [--runs 50] [--out bench/results/zoo-<date>.jsonl]

One JSON line per model on stdout and in --out; a Markdown table after them.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "zoo"))


def _median(fn, runs: int) -> float:
    """The bench suite's timing loop (vkml.benchmarks.timing.measure): a 0.5 s warm-up, then
    `runs` timed runs, never cut short."""
    from vkml.benchmarks import timing

    return timing.measure(fn, runs, 0, float("inf"), warm_s=0.5)["median"]


def _rel_error(got, want) -> float:
    """The largest difference from onnxruntime's outputs, relative to each output's largest
    value (integer outputs: 0 when equal, inf otherwise)."""
    import numpy as np

    worst = 0.0
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape:
            return float("inf")
        if w.size == 0:
            continue
        if w.dtype.kind not in "fc":
            worst = max(worst, 0.0 if np.array_equal(g, w) else float("inf"))
            continue
        scale = max(float(np.max(np.abs(w))), 1e-30)
        worst = max(worst, float(np.max(np.abs(g.astype(np.float64) - w))) / scale)
    return worst


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="vulkan:0")
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--out", default=os.path.join(HERE, "results", f"zoo-{datetime.date.today()}.jsonl"))
    args = ap.parse_args(argv)
    if args.runs < 30:
        ap.error("--runs: at least 30 timed runs per row")

    import onnxruntime as ort

    import vkml
    from _zoo import ZOO
    from vkml.compile.specialize import FOLDED_REASON

    rows = []
    with open(args.out, "w") as out:
        for name, e in ZOO.items():
            blob, feeds, _ = e.build()
            sess = vkml.InferenceSession(blob, devices=[args.device])
            got = sess.run(None, feeds)
            placed = sess.placement()
            on_dev = sum(1 for r in placed if r["device"] == args.device)
            folded = sum(1 for r in placed if r["device"] == "cpu" and r["reason"] == FOLDED_REASON)
            so = ort.SessionOptions()
            so.intra_op_num_threads = os.cpu_count() or 1
            o = ort.InferenceSession(blob, so, providers=["CPUExecutionProvider"])
            want = o.run(None, feeds)
            row = {"model": name, "opset": e.opset, "device": args.device, "nodes": len(placed),
                   "nodes_on_device": on_dev, "folded": folded,
                   "computed_on_device_pct": round(100 * on_dev / max(len(placed) - folded, 1), 1),
                   "max_rel_error": _rel_error(got, want), "runs": args.runs,
                   "vkml_median_s": _median(lambda: sess.run(None, feeds), args.runs),
                   "onnxruntime_cpu_median_s": _median(lambda: o.run(None, feeds), args.runs)}
            rows.append(row)
            line = json.dumps(row)
            print(line, flush=True)
            out.write(line + "\n")
    print(f"\n| model | opset | nodes | on {args.device} (folded) | computed nodes on {args.device} | "
          f"max error | vkml {args.device} | onnxruntime CPU | ratio |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        v, c = r["vkml_median_s"] * 1e3, r["onnxruntime_cpu_median_s"] * 1e3
        print(f"| {r['model']} | {r['opset']} | {r['nodes']} | {r['nodes_on_device']} ({r['folded']}) | "
              f"{r['computed_on_device_pct']}% | {r['max_rel_error']:.1e} | {v:.3f} ms | {c:.3f} ms | {v / c:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
