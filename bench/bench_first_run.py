"""First run of a new model (issue #11), cold and warm, against onnxruntime CPU and torch eager
CUDA, each in a fresh process, in the same run; what each child measures is in
vkml/benchmarks/first_run.py (the suite's first_run family runs the same children).

    python bench/bench_first_run.py [--models resnet50,mobilenet_v2,...] [--out FILE.jsonl]

Writes JSON lines to --out (default bench/results/first_run-<host>-<date>.jsonl).
"""
from __future__ import annotations

import argparse
import compileall
import json
import os
import platform
import tempfile
import time

import vkml
from vkml.benchmarks.first_run import child_env, models_on_disk, run_child

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="mnist,resnet18,resnet50,mobilenet_v2,efficientnet_b0,dbnet_like,bert_like")
    ap.add_argument("--device", default="vulkan:0")
    ap.add_argument("--out", default=None)
    ap.add_argument("--timeout", type=float, default=240)
    args = ap.parse_args()
    out = args.out or os.path.join(HERE, "results", f"first_run-{platform.node()}-{time.strftime('%Y-%m-%d')}.jsonl")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    # An installed package has its bytecode compiled (pip does it at install time); a checkout
    # whose __pycache__ is missing or not writable would time CPython's compiler instead
    # (0.25-0.3 s of a warm start on the H100 machine).
    compileall.compile_dir(os.path.dirname(vkml.__file__), quiet=1)
    base = child_env(None)
    with tempfile.TemporaryDirectory(prefix="vkml-first-run-") as tmp:
        for name, path, tv in models_on_disk(args.models.split(","), tmp):
            cache = tempfile.mkdtemp(prefix="cache-", dir=tmp)
            env = child_env(cache)
            rows = [("vkml", "cold", run_child("vkml", path, args.device, env, args.timeout)),
                    ("vkml", "warm", run_child("vkml", path, args.device, env, args.timeout)),
                    ("onnxruntime-cpu", "cold", run_child("onnxruntime", path, "cpu", base, args.timeout))]
            if tv:
                rows.append(("torch-eager-cuda", "cold", run_child("torch", path, name, base, args.timeout)))
            with open(out, "a") as f:
                for runtime, state, res in rows:
                    row = {"bench": "first_run", "model": name, "runtime": runtime, "state": state,
                           "device": args.device if runtime == "vkml" else runtime.split("-")[-1],
                           "host": platform.node(), "time": time.strftime("%Y-%m-%d %H:%M:%S"), **res}
                    f.write(json.dumps(row) + "\n")
                    keys = ("first_result_s", "session_s", "first_run_s", "steady_median_ms", "pipelines",
                            "compile_s_max", "error")
                    print(f"{name:16s} {runtime:17s} {state:5s} " +
                          " ".join(f"{k}={res[k]:.3f}" if isinstance(res.get(k), float) else f"{k}={res[k]}"
                                   for k in keys if k in res), flush=True)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
