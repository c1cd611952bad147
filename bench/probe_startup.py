"""Where a new session's first result goes (issue #11), as a timeline: each stage of
InferenceSession(...) + the first run, on the thread that ran it, with wall-clock start and
length, in this fresh process. Cheaper to read than cProfile, which slows Python code more
than the driver's.

    python bench/probe_startup.py MODEL [--device vulkan:0] [--state cold|warm]

MODEL: an .onnx path, a vkml/benchmarks/models.py builder, or tv:NAME (torchvision, batch 1). cold
empties VKML_CACHE_DIR first (default: a folder under the temp dir); NVIDIA's disk cache is
off (__GL_SHADER_DISK_CACHE=0) unless the environment says otherwise. Run it twice, cold then
warm, for the warm timeline.
"""
from __future__ import annotations

import argparse
import functools
import importlib
import os
import shutil
import tempfile
import threading
import time


# (module, attribute): the stages timed, where the session looks them up.
STAGES = [
    ("vkml.api.session", "read_model"),
    ("vkml.api.session", "bind"),
    ("vkml.ir.model_files", "read_model_file"),
    ("vkml.api.session", "_DeviceOpener._open"),
    ("vkml.runtime.gpurun", "GpuRunner.__init__"),
    ("vkml.runtime.gpurun", "ConcretePlan.__init__"),
    ("vkml.compile.pipeline", "compile_signature"),
    ("vkml.compile.pipeline", "concretize"),
    ("vkml.compile.pipeline", "fold_batchnorm"),
    ("vkml.compile.pipeline", "place_concrete"),
    ("vkml.compile.pipeline", "build"),
    ("vkml.runtime.slots", "Slot.__init__"),
    ("vkml.runtime.slots", "compile_ahead"),
    ("vkml.runtime.slots", "ConstCache.prefetch"),
    ("vkml.runtime.slots", "ConstCache.get"),
    ("vkml.api.session", "InferenceSession.run"),
]


def _patch(events: list, t0: float) -> None:
    for modname, attr in STAGES:
        parts = attr.split(".")
        owner = importlib.import_module(modname)
        for p in parts[:-1]:
            owner = getattr(owner, p)
        fn = getattr(owner, parts[-1])
        label = f"{modname.split('.')[-1]}.{'.'.join(parts)}"

        @functools.wraps(fn)
        def timed(*a, _fn=fn, _label=label, **k):
            s = time.perf_counter()
            try:
                return _fn(*a, **k)
            finally:
                events.append((_label, threading.current_thread().name, s - t0, time.perf_counter() - s))
        setattr(owner, parts[-1], timed)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--device", default="vulkan:0")
    ap.add_argument("--state", choices=("cold", "warm"), default="cold")
    args = ap.parse_args()
    cache = os.environ.setdefault("VKML_CACHE_DIR", os.path.join(tempfile.gettempdir(), "vkml-probe-startup"))
    os.environ.setdefault("__GL_SHADER_DISK_CACHE", "0")
    if args.state == "cold":
        shutil.rmtree(cache, ignore_errors=True)
    import numpy as np
    import onnx

    from vkml.benchmarks import models as bm

    if args.model.endswith(".onnx"):
        path = args.model
        x = None
    else:
        name, _, arg = args.model.partition(":")
        m = bm.torchvision_model(arg, 1)[0] if name == "tv" else bm.BUILDERS[name]()
        path = os.path.join(tempfile.gettempdir(), f"vkml-probe-{args.model.replace(':', '-')}.onnx")
        onnx.save(m.proto, path)
        x = next(iter(m.feed.values()))
    t_import = time.perf_counter()
    import vkml  # noqa: F401
    t0 = time.perf_counter()
    events: list = []
    _patch(events, t0)  # (imports the modules a GPU session imports when it is made)
    events.append(("modules a GPU session imports", "MainThread", 0.0, time.perf_counter() - t0))
    s = vkml.InferenceSession(path, devices=[args.device, "cpu"])
    t1 = time.perf_counter()
    if x is None:
        x = np.zeros([d if isinstance(d, int) else 1 for d in s.get_inputs()[0].shape], np.float32)
    s.run(None, {s.get_inputs()[0].name: x})
    t2 = time.perf_counter()
    ps = s.pipelines()
    print(f"{args.model} {args.state}: import vkml {t0 - t_import:.3f} s, session {t1 - t0:.3f} s, first run "
          f"{t2 - t1:.3f} s, first result {t2 - t0:.3f} s; {len(ps)} pipelines, slowest compile "
          f"{max((p['compile_s'] for p in ps), default=0):.3f} s")
    print(f"{'start ms':>9s} {'length ms':>10s}  {'thread':20s} stage")
    agg: dict[str, list] = {}
    for label, thread, start, length in sorted(events, key=lambda e: e[2]):
        agg.setdefault(label, []).append(length)
        if label != "slots.ConstCache.get":
            print(f"{start * 1e3:9.1f} {length * 1e3:10.1f}  {thread[:20]:20s} {label}")
    gets = agg.get("slots.ConstCache.get", [])
    print(f"constants uploaded: {len(gets)} ConstCache.get calls, {sum(gets) * 1e3:.1f} ms in all")


if __name__ == "__main__":
    main()
