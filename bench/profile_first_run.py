"""Where a new model's first GPU session goes: every pipeline with its compile time, and a
cProfile of InferenceSession(...) + the first run, cold (empty caches) or warm.

    python bench/profile_first_run.py MODEL [--state cold|warm] [--top 25]

MODEL is an .onnx path or a torchvision name (exported with weights=None, batch 1). Run it
twice with the same VKML_CACHE_DIR for the warm profile; cold empties that directory first.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import shutil
import tempfile
import time


def _model(name: str) -> tuple[str, object]:
    import numpy as np
    import onnx

    if name.endswith(".onnx"):
        import vkml

        s = vkml.InferenceSession(name, devices=["cpu"])
        shape = [d if isinstance(d, int) else 1 for d in s.get_inputs()[0].shape]
        return name, np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    from vkml.benchmarks import models as bm

    m = bm.BUILDERS[name]() if name in bm.BUILDERS else bm.torchvision_model(name, 1)[0]
    path = os.path.join(tempfile.gettempdir(), f"vkml-profile-{name}.onnx")
    onnx.save(m.proto, path)
    return path, next(iter(m.feed.values()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--state", choices=("cold", "warm"), default="cold")
    ap.add_argument("--device", default="vulkan:0")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    cache = os.environ.setdefault("VKML_CACHE_DIR", os.path.join(tempfile.gettempdir(), "vkml-profile-cache"))
    os.environ.setdefault("__GL_SHADER_DISK_CACHE", "0")
    if args.state == "cold":
        shutil.rmtree(cache, ignore_errors=True)
    path, x = _model(args.model)
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    import vkml

    s = vkml.InferenceSession(path, devices=[args.device, "cpu"])
    s.run(None, {s.get_inputs()[0].name: x})
    prof.disable()
    total = time.perf_counter() - t0
    ps = sorted(s.pipelines(), key=lambda p: -p["compile_s"])
    print(f"{args.model} {args.state}: import + session + first run {total:.3f} s, {len(ps)} pipelines, "
          f"compile time summed {sum(p['compile_s'] for p in ps):.3f} s")
    for p in ps:
        print(f"  {p['compile_s']:7.3f} s  {p['shader']} {p['spec']}")
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(args.top)
    print(out.getvalue())


if __name__ == "__main__":
    main()
