"""A new model's first result, each in a fresh process (issue #11): how long a user waits from
InferenceSession(...) to the first result, with every cache empty (cold) and with vkml's
pipeline cache filled by an earlier process (warm), against onnxruntime CPU (session + first
run) and torch eager CUDA (first call). The suite's first_run family and the checkout's
bench/bench_first_run.py run these children.

Cold: VKML_CACHE_DIR and XDG_CACHE_HOME in a fresh directory, __GL_SHADER_DISK_CACHE=0 (NVIDIA's
own disk cache off). Warm: a second process on the cache the cold one saved (the driver cache
still off). Each process also times 30 steady runs after 5 warm-ups (median), so that a faster
start is not bought with slower runs. torchvision models are exported with weights=None
(opset 17); without torch the numpy-built models of models.py stand in.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from .children import same_vkml_env

STEADY_RUNS = 30

CHILD = r"""
import json, os, sys, time
t0 = time.perf_counter()
import numpy as np
kind, path, device = sys.argv[1], sys.argv[2], sys.argv[3]
x = np.load(path + ".npy")
out = {}
if kind == "vkml":
    import vkml
    t1 = time.perf_counter()
    s = vkml.InferenceSession(path, devices=[device] if device == "cpu" else [device, "cpu"])
    t2 = time.perf_counter()
    feed = {s.get_inputs()[0].name: x}
    s.run(None, feed)
    t3 = time.perf_counter()
    ps = s.pipelines()
    out.update(pipelines=len(ps), compile_s_sum=sum(p["compile_s"] for p in ps),
               compile_s_max=max((p["compile_s"] for p in ps), default=0.0),
               on_gpu=sum(r["device"] != "cpu" for r in s.placement()), nodes=len(s.placement()))
    run = lambda: s.run(None, feed)
elif kind == "onnxruntime":
    import onnxruntime as ort
    t1 = time.perf_counter()
    s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    t2 = time.perf_counter()
    feed = {s.get_inputs()[0].name: x}
    s.run(None, feed)
    t3 = time.perf_counter()
    run = lambda: s.run(None, feed)
else:  # torch eager on CUDA: the module is rebuilt from torchvision (weights=None)
    import torch, torchvision
    t1 = time.perf_counter()
    net = getattr(torchvision.models, device)(weights=None).eval().cuda()
    t2 = time.perf_counter()
    with torch.inference_mode():
        xt = torch.from_numpy(x).cuda()
        net(xt).cpu()
    t3 = time.perf_counter()
    def run():
        with torch.inference_mode():
            return net(torch.from_numpy(x).cuda()).cpu()
for _ in range(5):
    run()
ts = []
for _ in range(%d):
    a = time.perf_counter(); run(); ts.append(time.perf_counter() - a)
ts.sort()
out.update(import_s=t1 - t0, session_s=t2 - t1, first_run_s=t3 - t2, first_result_s=t3 - t1,
           steady_median_ms=1e3 * ts[len(ts) // 2], steady_runs=len(ts))
print("RESULT " + json.dumps(out))
""" % STEADY_RUNS


def models_on_disk(names: list[str], tmp: str) -> list[tuple[str, str, bool]]:
    """(name, path, is_torchvision) for each model saved in `tmp`, its input beside it as
    PATH.npy; a torchvision name that cannot be exported is skipped (printed)."""
    import numpy as np
    import onnx

    from . import models as bm

    out = []
    for name in names:
        m, tv = None, False
        if name in bm.BUILDERS:
            m = bm.BUILDERS[name]()
        else:
            m, why = bm.torchvision_model(name, 1)
            tv = m is not None
            if m is None:
                print(f"{name}: skipped ({why})", flush=True)
                continue
        path = os.path.join(tmp, f"{name}.onnx")
        onnx.save(m.proto, path)
        np.save(path + ".npy", next(iter(m.feed.values())))
        out.append((name, path, tv))
    return out


def child_env(cache: str | None) -> dict:
    """A child process's environment: this process's vkml importable (children.py), NVIDIA's
    disk cache off, and with `cache`, vkml's pipeline cache (and XDG's) in that fresh directory."""
    env = same_vkml_env(__GL_SHADER_DISK_CACHE="0", OMP_NUM_THREADS=str(os.cpu_count()))
    if cache is not None:
        env.update(VKML_CACHE_DIR=os.path.join(cache, "vkml"), XDG_CACHE_HOME=cache)
    return env


def run_child(kind: str, path: str, device: str, env: dict, timeout: float) -> dict:
    """Runs CHILD for one runtime (`kind`: vkml, onnxruntime or torch) on the model at `path`:
    its timings and counts, or {"error": why}."""
    t0 = time.perf_counter()
    try:
        r = subprocess.run([sys.executable, "-c", CHILD, kind, path, device], env=env, capture_output=True,
                           text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    lines = [l for l in r.stdout.splitlines() if l.startswith("RESULT ")]
    if r.returncode or not lines:
        return {"error": (r.stderr or r.stdout)[-400:]}
    res = json.loads(lines[-1][7:])
    res["process_s"] = time.perf_counter() - t0
    return res
