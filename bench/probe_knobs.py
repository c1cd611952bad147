"""A/B of vkml's kernel-choice constants on whole models: each variant sets module attributes
(e.g. how far split K goes, which GEMM tiling), builds a session per model under them, and the
sessions of one model are timed in interleaved rounds (host: NumPy in -> NumPy out, median per
round), then profiled once each (GPU time per shader). One JSON line per (model, variant) on
stdout and in --out. Issue #12: which split-K and tiling choices suit batch-1 CNNs.

    python bench/probe_knobs.py [--models resnet18,tv:resnet50,mobilenet_v2,tv:efficientnet_b0,resnet18:32]
        [--variant NAME=module.ATTR:VALUE[;module.ATTR:VALUE...]]... [--rounds 3] [--runs 100]
        [--out FILE] [--warm SECONDS]
  module is a vkml.kernels submodule (gemm, matmul, conv) or compile.X, vulkan.X, runtime.X; VALUE a Python expression of
  literals, Tiling(bm,bn,bk,tm,tn) and CoopTiling(bm,bn,bk,wm,wn[,stages]). Models: the bench's builders
  (mlp_f16, mlp_bf16: the MLP in float16, bfloat16; mlp_t, mlp_t_f16, mlp_t_bf16: as nn.Linear
  exports it, Gemm with transB), tv:NAME (torchvision),
  tt:NAME (vkml.benchmarks.models.torch_transformer: bert_base, gpt2_small, vit_b_16), each with
  an optional :BATCH (default 1). Without
  --variant: the split-K and tiling set below (DEFAULT).
"""
from __future__ import annotations

import argparse
import ast
import importlib
import json
import statistics
import sys
import time

DEFAULT = [
    "base=",
    "target128=gemm.SPLIT_TARGET_GROUPS:128",
    "target512=gemm.SPLIT_TARGET_GROUPS:512",
    "below64=gemm.SPLIT_BELOW_GROUPS:64",
    "mintiles8=gemm.MIN_SPLIT_TILES:8",
    "mintiles2=gemm.MIN_SPLIT_TILES:2",
    "maxsplit8=gemm.MAX_SPLITS:8",
    "nosplit=gemm.SPLIT_BELOW_GROUPS:0",
    "tile32=matmul.MEDIUM:Tiling(32,32,16,4,4)",
    "tile64x32=matmul.MEDIUM:Tiling(64,32,16,4,4)",
    "tile32x64=matmul.MEDIUM:Tiling(32,64,16,4,4)",
]


def model(name: str, batch: int = 1):
    """The bench's model `name` (vkml.benchmarks.models), or tv:NAME / tt:NAME exported from
    torchvision / the torch transformers, at `batch`."""
    from vkml.benchmarks import models as M

    if name.startswith(("tv:", "tt:")):
        bm, why = (M.torchvision_model if name[:3] == "tv:" else M.torch_transformer)(name[3:], batch)
        if bm is None:
            raise SystemExit(why)
        return bm
    if name in ("mlp_f16", "mlp_bf16", "mlp_t", "mlp_t_f16", "mlp_t_bf16"):
        import ml_dtypes
        import numpy as np

        dtype = np.float16 if name.endswith("_f16") else ml_dtypes.bfloat16 if name.endswith("_bf16") else np.float32
        return M.mlp(batch, dtype=dtype, linear=name.startswith("mlp_t"))
    return getattr(M, name)(batch)


def model_spec(spec: str) -> tuple[str, int]:
    """("tv:resnet50", 32) from "tv:resnet50:32": a model name for model() and its batch (1 when
    the spec names none)."""
    name, _, batch = spec.rpartition(":")
    return (name, int(batch)) if batch.isdigit() else (spec, 1)


def _parse(spec: str) -> tuple[str, list[tuple[object, str, object]]]:
    from vkml.kernels.matmul import Tiling
    from vkml.kernels.matmul_coop import CoopTiling

    name, _, rest = spec.partition("=")
    sets = []
    for part in filter(None, rest.split(";")):
        target, _, value = part.partition(":")
        mod, _, attr = target.rpartition(".")
        module = importlib.import_module(f"vkml.{mod}" if mod.startswith(("compile.", "vulkan.", "runtime."))
                                         else f"vkml.kernels.{mod}")
        v = eval(compile(ast.parse(value, mode="eval"), "<variant>", "eval"), {"__builtins__": {}, "Tiling": Tiling,
                                                                              "CoopTiling": CoopTiling})
        if not hasattr(module, attr):
            raise SystemExit(f"{module.__name__} has no {attr}")
        sets.append((module, attr, v))
    return name, sets


class _Applied:
    def __init__(self, sets):
        self.sets = sets

    def __enter__(self):
        self.old = [(m, a, getattr(m, a)) for m, a, _ in self.sets]
        for m, a, v in self.sets:
            setattr(m, a, v)

    def __exit__(self, *exc):
        for m, a, v in self.old:
            setattr(m, a, v)


def profile_fields(proto: bytes, feed: dict, device: str, runs: int, nodes: bool = False) -> dict:
    """A row's GPU time (gpu_us) and its split by shader (dispatch_us, largest first), from a
    session profiled over `runs` runs; with `nodes`, by node too (node_us, "name (op)" in the
    plan's order: which layers a model's time goes to)."""
    from vkml.benchmarks.profile import gpu_session_profile

    prof = gpu_session_profile(proto, feed, device, runs)
    row = {"gpu_us": round(sum(u.gpu_s for u in prof["units"]) * 1e6, 1),
           "dispatch_us": {k: round(v[1] * 1e6, 1)
                           for k, v in sorted(prof["dispatch"].items(), key=lambda kv: -kv[1][1])}}
    if nodes:
        row["node_us"] = {(f"{k[0]} ({k[1]})" if isinstance(k, tuple) else str(k)): round(v * 1e6, 2)
                          for k, v in prof["nodes"].items()}
    return row


def emit(row: dict, out) -> None:
    """Print a result row as a JSON line, and append it to `out` when there is one."""
    line = json.dumps(row)
    print(line, flush=True)
    if out:
        out.write(line + "\n")
        out.flush()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet18,tv:resnet50,mobilenet_v2,tv:efficientnet_b0")
    ap.add_argument("--variant", action="append", default=None)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=100, help="timed runs per session per round")
    ap.add_argument("--profile-runs", type=int, default=20, help="0: no GPU profile")
    ap.add_argument("--nodes", action="store_true", help="the profile's GPU time per node too (node_us)")
    ap.add_argument("--device", default="vulkan:0")
    ap.add_argument("--precision", default=None, help='every session\'s precision (InferenceSession: "fp16")')
    ap.add_argument("--out", default=None)
    ap.add_argument("--warm", type=float, default=0.5,
                    help="seconds of untimed runs before each session's timed runs in every round (the GPU's clocks up)")
    a = ap.parse_args(argv)

    import vkml
    from vkml.benchmarks.gpu_busy import GpuBusy
    from vkml.benchmarks.timing import interleaved

    variants = [_parse(v) for v in (a.variant or DEFAULT)]
    out = open(a.out, "a") if a.out else None
    dev_name = vkml.vulkan.device(int(a.device.split(":")[1])).name
    for name in a.models.split(","):
        bm = model(*model_spec(name))
        proto = bm.proto.SerializeToString()
        feed = dict(bm.feed)
        sessions, build_s = {}, {}
        for label, sets in variants:
            with _Applied(sets):
                t0 = time.perf_counter()
                s = vkml.InferenceSession(proto, devices=[a.device], **({"precision": a.precision} if a.precision else {}))
                s.run(None, feed)
                build_s[label] = time.perf_counter() - t0
            sessions[label] = s
        with GpuBusy() as busy:  # (the SM clock the rounds ran at: NVIDIA's governor may hold it low)
            times = interleaved({label: (lambda s=s: s.run(None, feed)) for label, s in sessions.items()},
                                a.rounds, a.runs, a.warm)
        for label, sets in variants:
            row = {"probe": "knobs", "model": name, "variant": label, "precision": a.precision or "fp32",
                   "sets": {f"{m.__name__.removeprefix('vkml.kernels.').removeprefix('vkml.')}.{at}": repr(v)
                            for m, at, v in sets},
                   "host_median_us_per_round": [round(t * 1e6, 1) for t in times[label]],
                   "host_median_us": round(statistics.median(times[label]) * 1e6, 1),
                   "runs": a.rounds * a.runs, "build_s": round(build_s[label], 3), "device": dev_name,
                   "sm_clock_mhz": busy.sm_clock, "sm_clock_min_mhz": busy.sm_clock_min}
            if a.profile_runs:
                with _Applied(sets):
                    row.update(profile_fields(proto, feed, a.device, a.profile_runs, a.nodes))
            emit(row, out)
        sessions.clear()
    return 0


if __name__ == "__main__":
    sys.exit(main())
