"""vkml on Ray (issue #18): throughput of N actors (one GPU each) against one, and what the Ray
path costs against a plain loop over one session on one GPU.

    python bench/ray_scaling.py --devices vulkan:0,vulkan:1 [--model resnet18 --batch 32 --size 224]
                                [--batches 32] [--runs 30] [--warmup 3] [--out bench/results/FILE.jsonl]
    python bench/ray_scaling.py --devices vulkan:0,vulkan:1 --ray-gpus   # actors get Ray's GPUs (num_gpus=1)
    python bench/ray_scaling.py --quick                     # a check on lavapipe or the CPU (no figures)
    VKML_SPLIT_DEVICE=2 python bench/ray_scaling.py --quick --devices vulkan:0,vulkan:1   # lavapipe opened twice

One timed run pushes `--batches` different input batches through a path, NumPy in and NumPy out
in this process (the `host` mode of bench/README.md); each path gets `--warmup` untimed runs,
then `--runs` timed ones (median, p05, p95 of the run times; the row gives the counts). Paths:

- loop: one InferenceSession on the first device, `sess.run` per batch, one after another;
- run_batch: the same session's `run_batch` (vkml's own threads keep several runs in flight);
- ray: an InferencePool of 1, then of N actors (`pool.run_batch`: inputs travel through Ray's
  object store, calls spread over the actors, outputs back in order). Each actor is pinned to
  its device with `devices=`, or with --ray-gpus asks Ray for a GPU and maps it to its Vulkan
  device itself (the placement is recorded in the row).

Rows (JSON lines, appended to --out): the path, actors, devices, model, batch, runs and
warm-up counts, run-time statistics, batches/s and images/s; ray rows add `speedup_vs_1_actor`
and `vs_loop` / `vs_run_batch` (throughput ratios). The first row describes the machine
(vkml/benchmarks/machine.py) and versions (Ray's included).
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _model(name: str, batch: int, size: int):
    from vkml.benchmarks import models as M

    if name == "resnet18":
        return M.resnet18(batch, size)
    if name == "mobilenet_v2":
        return M.mobilenet_v2(batch, size)
    if name == "conv_cnn":
        return M.conv_cnn(batch, size)
    if name == "mnist":
        return M.mnist(batch)
    raise SystemExit(f"unknown --model {name!r}: resnet18, mobilenet_v2, conv_cnn or mnist")


def _feeds(bm, n: int) -> list[dict]:
    """n different feeds shaped like the model's own (seeded): a cache cannot help any path."""
    import numpy as np

    rng = np.random.default_rng(7)
    return [{k: rng.standard_normal(v.shape).astype(v.dtype) for k, v in bm.feed.items()} for _ in range(n)]


def _timed(fn, warmup: int, runs: int) -> dict:
    from vkml.benchmarks import timing

    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t)
    return {**timing.stats(samples), "runs": runs, "warmup": warmup}


def _local(model: bytes, device: str, feeds: list[dict], warmup: int, runs: int):
    """The rows of the plain loop and of run_batch on one session (the last row carries the
    first output of each feed, the reference the Ray paths must equal)."""
    import vkml

    sess = vkml.InferenceSession(model, devices=[device])
    yield {"path": "loop", "devices": [device], **_timed(lambda: [sess.run(None, f) for f in feeds], warmup, runs)}
    row = {"path": "run_batch", "devices": [device], **_timed(lambda: sess.run_batch(feeds), warmup, runs)}
    row["outputs"] = [o[0] for o in sess.run_batch(feeds)]
    yield row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--devices", default=None, help='comma-separated, one actor each (default "vulkan:0,vulkan:1" '
                                                    'where there are two GPUs; --quick: the first Vulkan device twice)')
    ap.add_argument("--model", default=None, help="resnet18 (default), mobilenet_v2, conv_cnn or mnist")
    ap.add_argument("--batch", type=int, default=None, help="images per batch (default 32)")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--batches", type=int, default=None, help="input batches per timed run (default 32)")
    ap.add_argument("--runs", type=int, default=None, help="timed runs per path, after --warmup (default 30)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--ray-gpus", action="store_true", help="actors reserve num_gpus=1 and map Ray's GPU themselves")
    ap.add_argument("--address", default=None, help='join a running Ray cluster ("auto")')
    ap.add_argument("--quick", action="store_true", help="a check that it works, on lavapipe or the CPU (defaults: "
                                                         "mnist b8, 8 batches per run, 10 runs): no figures")
    ap.add_argument("--machine", default=platform.node())
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    quick = {"model": "mnist", "batch": 8, "batches": 8, "runs": 10}
    full = {"model": "resnet18", "batch": 32, "batches": 32, "runs": 30}
    for k, v in (quick if a.quick else full).items():
        if getattr(a, k) is None:
            setattr(a, k, v)

    import numpy as np
    import ray

    import vkml
    import vkml.ray
    from vkml.benchmarks import machine

    vulkan = [d.name for d in vkml.devices() if d.name != "cpu"]
    if a.devices:
        devices = [d.strip() for d in a.devices.split(",") if d.strip()]
    elif a.quick:
        devices = [vulkan[0] if vulkan else "cpu"] * 2
    else:
        devices = vulkan[:2]
    if not devices:
        raise SystemExit("no device: give --devices (or --quick to run on the CPU)")
    bm = _model(a.model, a.batch, a.size)
    model = bm.bytes()
    feeds = _feeds(bm, a.batches)
    images = a.batch * a.batches
    date = time.strftime("%Y-%m-%d")
    out = a.out or os.path.join(HERE, "results", f"ray_scaling-{a.machine}-{date}{'-quick' if a.quick else ''}.jsonl")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    base = {"bench": "ray_scaling", "model": a.model, "batch": a.batch, "size": a.size, "batches_per_run": a.batches,
            "mode": "host", "host": a.machine, "time": time.strftime("%Y-%m-%d %H:%M:%S"), "quick": a.quick}
    rows: list[dict] = []

    def record(row: dict) -> None:
        row = {**base, **row}
        row["batches_per_s"] = a.batches / row["median"]
        row["images_per_s"] = images / row["median"]
        rows.append(row)
        extra = "".join(f" {k} {row[k]:.3f}" for k in ("speedup_vs_1_actor", "vs_loop", "vs_run_batch") if k in row)
        print(f"{row['path']:9s} actors={row.get('actors', 0)} {','.join(row['devices'])}: median "
              f"{row['median'] * 1e3:8.2f} ms per {a.batches} batches, {row['images_per_s']:9.1f} images/s "
              f"({row['runs']} runs after {row['warmup']}){extra}", flush=True)

    # 1. One session in this process, on the first device (dropped before the actors start).
    for row in _local(model, devices[0], feeds, a.warmup, a.runs):
        record(row)
    want = rows[-1].pop("outputs")
    gc.collect()

    # 2. Ray: one actor, then one per device.
    ray.init(address=a.address, include_dashboard=False, log_to_driver=False,
             **({} if a.address else {"num_cpus": max(2, os.cpu_count() or 2)}))
    describe = machine.describe([])
    describe["versions"]["ray"] = ray.__version__
    describe["ray_resources"] = ray.cluster_resources()
    one = None
    for n in sorted({1, len(devices)}):
        opts = {"num_actors": n} if a.ray_gpus else {"devices": devices[:n]}
        with vkml.ray.InferencePool(model, **opts) as pool:
            placement = [{"pid": p["pid"], "devices": p["sessions"][0]["devices"], "matched_by": p["matched_by"],
                          "ray_gpu_ids": p["ray_gpu_ids"]} for p in pool.placement()]
            got = pool.run_batch(feeds)
            exact = all(np.array_equal(g[0], w) for g, w in zip(got, want))
            row = {"path": "ray", "actors": n, "devices": [p["devices"][0] for p in placement],
                   "placement": placement, "same_as_loop": exact,
                   **_timed(lambda: pool.run_batch(feeds), a.warmup, a.runs)}
        tput = a.batches / row["median"]
        one = one or tput
        row["speedup_vs_1_actor"] = tput / one
        row["vs_loop"] = tput / (a.batches / rows[0]["median"])
        row["vs_run_batch"] = tput / (a.batches / rows[1]["median"])
        record(row)
    ray.shutdown()

    with open(out, "a") as f:
        f.write(json.dumps({**base, "path": "machine", "machine": describe}) + "\n")
        for row in rows:
            f.write(json.dumps(row) + "\n")
    ray_rows = [r for r in rows if r["path"] == "ray"]
    print(f"{len(devices)} actors vs 1: {ray_rows[-1]['speedup_vs_1_actor']:.2f}x; 1 actor vs a plain loop: "
          f"{ray_rows[0]['vs_loop']:.3f}x the throughput (vs run_batch {ray_rows[0]['vs_run_batch']:.3f}x); "
          f"outputs identical to the loop's: {all(r['same_as_loop'] for r in ray_rows)}")
    print("wrote", out)


if __name__ == "__main__":
    main()
