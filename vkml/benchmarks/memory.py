"""Peak host memory of a runtime holding a model: each runtime in its own fresh process.

The child loads the model from a file, runs it once, and reports VmHWM (peak resident set) from
/proc/self/status; the suite subtracts a bare `python + numpy` child's peak. Linux only (others
report unsupported). The child runs this file as a script (`python -P memory.py`, so that neither
the vkml package nor this folder is imported or put on its path: the baseline stays python +
numpy, and torch's peak does not include vkml's modules).

    python -P vkml/benchmarks/memory.py --child RUNTIME MODEL.onnx FEED.npz   (internal)
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def _vm(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def _child(runtime: str, model: str, feed_path: str) -> dict:
    import numpy as np

    feed = dict(np.load(feed_path)) if runtime != "baseline" else {}
    if runtime == "baseline":
        pass
    elif runtime.startswith("vkml/"):
        import vkml

        sess = vkml.InferenceSession(model, devices=[runtime.split("/", 1)[1]])
        sess.run(None, feed)
    elif runtime.startswith("onnxruntime/"):
        import onnxruntime as ort

        prov = "CUDAExecutionProvider" if runtime.endswith("cuda") else "CPUExecutionProvider"
        sess = ort.InferenceSession(model, providers=[prov])
        sess.run(None, feed)
    elif runtime.startswith("torch-eager/"):
        import onnx
        import torch

        TorchGraph = _torch_onnx().TorchGraph
        g = TorchGraph(onnx.load(model), "cuda")
        with torch.inference_mode():
            [o.cpu() for o in g.forward(*[torch.from_numpy(v).cuda() for v in feed.values()])]
        torch.cuda.synchronize()
    else:
        raise ValueError(f"no memory probe for {runtime!r}")
    return {"vmhwm": _vm("VmHWM"), "vmrss": _vm("VmRSS")}


def _torch_onnx():
    """torch_onnx.py beside this file, loaded by its path (the package's __init__ not run)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("vkml_bench_torch_onnx", os.path.join(HERE, "torch_onnx.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def probe(runtime: str, model_path: str, feed_path: str, timeout: float = 300) -> dict:
    """{"vmhwm", "vmrss"} bytes of a child holding the model, or {"error": why}."""
    if not os.path.exists("/proc/self/status"):
        return {"error": "no /proc/self/status (not Linux)"}
    from .children import same_vkml_env

    try:
        p = subprocess.run([sys.executable, "-P", os.path.join(HERE, "memory.py"), "--child", runtime, model_path,
                            feed_path], capture_output=True, text=True, timeout=timeout, env=same_vkml_env())
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    if p.returncode != 0:
        tail = (p.stderr.strip().splitlines() or ["?"])[-1]
        return {"error": f"child exited {p.returncode}: {tail[:300]}"}
    return json.loads(p.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        print(json.dumps(_child(*sys.argv[2:])))
    else:
        print(__doc__)
        sys.exit(2)
