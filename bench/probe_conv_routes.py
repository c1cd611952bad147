"""Which convolutions should take the direct route (shaders/conv_small.comp, 32 lanes per output)
rather than one invocation per output (conv_dw.comp): an A/B over
`vkml.kernels.conv.DIRECT_DW_MAX_OUTPUTS` on CNNs with depthwise convolutions (issue #12).

Each variant is a session made after setting the bound; the sessions are timed in interleaved
rounds (host: NumPy in -> NumPy out, median per round), then profiled once each (GPU time per
shader, chunk timestamps). One JSON line per (model, variant) on stdout and in --out.

    python bench/probe_conv_routes.py [--models mnist,mobilenet_v2,tv:efficientnet_b0]
                                      [--bounds all,16384,0] [--rounds 5] [--runs 100] [--out FILE]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys


def _model(name: str):
    from vkml.benchmarks import models as M

    if name.startswith("tv:"):
        bm, why = M.torchvision_model(name[3:], 1)
        if bm is None:
            raise SystemExit(why)
        return bm
    return getattr(M, name)(1)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="mnist,mobilenet_v2,tv:efficientnet_b0,tv:mobilenet_v2")
    ap.add_argument("--bounds", default="all,16384,0", help="DIRECT_DW_MAX_OUTPUTS values; all = no bound")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=100, help="timed runs per session per round")
    ap.add_argument("--device", default="vulkan:0")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)

    import vkml
    from vkml.benchmarks.profile import gpu_session_profile
    from vkml.benchmarks.timing import interleaved
    from vkml.kernels import conv

    out = open(a.out, "a") if a.out else None
    bounds = [(b, 1 << 62 if b == "all" else int(b)) for b in a.bounds.split(",")]
    for name in a.models.split(","):
        bm = _model(name)
        proto = bm.proto.SerializeToString()
        feed = dict(bm.feed)
        sessions, routes = {}, {}
        for label, bound in bounds:
            conv.DIRECT_DW_MAX_OUTPUTS = bound
            s = vkml.InferenceSession(proto, devices=[a.device])
            s.run(None, feed)
            sessions[label] = s
            routes[label] = sum(1 for r in s.placement() if "conv_small" in str(r.get("pipelines", "")))
        times = interleaved({label: (lambda s=s: s.run(None, feed)) for label, s in sessions.items()},
                            a.rounds, a.runs, warm_s=0.3)
        for label, bound in bounds:
            conv.DIRECT_DW_MAX_OUTPUTS = bound
            prof = gpu_session_profile(proto, feed, a.device, 30)
            disp = {k: round(v[1] * 1e6, 1) for k, v in sorted(prof["dispatch"].items(), key=lambda kv: -kv[1][1])}
            gpu_us = sum(u.gpu_s for u in prof["units"]) * 1e6
            row = {"probe": "conv_routes", "model": name, "bound": label, "conv_small_nodes": routes[label],
                   "host_median_us_per_round": [round(t * 1e6, 1) for t in times[label]],
                   "host_median_us": round(statistics.median(times[label]) * 1e6, 1),
                   "runs": a.rounds * a.runs, "gpu_us": round(gpu_us, 1), "dispatch_us": disp,
                   "device": vkml.vulkan.device(int(a.device.split(":")[1])).name}
            line = json.dumps(row)
            print(line, flush=True)
            if out:
                out.write(line + "\n")
                out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
