"""Whole models on one build of the shaders: host→host medians of the bench's model builders at
given batches, for A/Bs of a shader variant that bench/probe_knobs.py cannot switch (SPIR-V is
loaded once per process). Point VKML_SPIRV_DIR at a folder holding the variant's .spv files
(the rest come from the package) and run one process per variant, the shipped build first and
last to see the drift, e.g.

    VKML_SPIRV_DIR=/tmp/pf python bench/probe_spirv.py --models resnet18:32,mobilenet_v2:1 --out F.jsonl
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet18:1,resnet18:32",
                    help="NAME:BATCH,... (probe_knobs.model: the bench's builders, tv:NAME, tt:NAME)")
    ap.add_argument("--label", default=os.environ.get("VKML_SPIRV_DIR") or "shipped")
    ap.add_argument("--device", default="vulkan:0")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=30, help="timed runs per round")
    ap.add_argument("--warm-s", type=float, default=1.0, help="untimed runs for this long first (GPU clocks up)")
    ap.add_argument("--profile-runs", type=int, default=0, help="GPU time per shader over this many runs (0: none)")
    ap.add_argument("--nodes", action="store_true", help="the profile's GPU time per node too (node_us)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)

    import vkml
    from bench.probe_knobs import emit, model, model_spec, profile_fields
    from vkml.benchmarks.timing import interleaved

    out = open(a.out, "a") if a.out else None
    for spec in a.models.split(","):
        name, batch = model_spec(spec)
        bm = model(name, batch)
        proto = bm.proto.SerializeToString()
        t0 = time.perf_counter()
        s = vkml.InferenceSession(proto, devices=[a.device])
        feed = dict(bm.feed)
        s.run(None, feed)
        build_s = time.perf_counter() - t0
        t_end = time.perf_counter() + a.warm_s
        while time.perf_counter() < t_end:
            s.run(None, feed)
        medians = interleaved({"run": lambda: s.run(None, feed)}, a.rounds, a.runs, warm_s=0.0)["run"]
        row = {"probe": "spirv", "label": a.label, "model": name, "batch": batch,
               "host_median_us_per_round": [round(m * 1e6, 1) for m in medians],
               "host_median_us": round(statistics.median(medians) * 1e6, 1), "runs": a.rounds * a.runs,
               "build_s": round(build_s, 3), "device": a.device}
        if a.profile_runs:
            row.update(profile_fields(proto, feed, a.device, a.profile_runs, a.nodes))
        emit(row, out)
        del s
    return 0


if __name__ == "__main__":
    sys.exit(main())
