"""A/B in one process: the same model with and without fusion (elementwise chains and conv
epilogues), timed in alternating blocks so that clock drift hits both alike.

    python bench/ab_fusion.py MODEL.onnx|torchvision-name [--device vulkan:0] [--rounds 10]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _export_keeping_bn(name: str):
    import tempfile

    import numpy as np
    import onnx
    import torch
    import torchvision

    net = getattr(torchvision.models, name)(weights=None).eval()
    x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(1))
    path = os.path.join(tempfile.gettempdir(), f"vkml-ab-{name}-bn.onnx")
    with torch.no_grad():
        torch.onnx.export(net, (x,), path, input_names=["x"], output_names=["y"], opset_version=17, dynamo=False,
                          do_constant_folding=False, training=torch.onnx.TrainingMode.PRESERVE)
    n_bn = sum(n.op_type == "BatchNormalization" for n in onnx.load(path).graph.node)
    print(f"{name}: exported with {n_bn} BatchNormalization nodes")
    return path, x.numpy().astype(np.float32)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--device", default="vulkan:0")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--block", type=int, default=30)
    ap.add_argument("--keep-bn", action="store_true",
                    help="torchvision export with its BatchNormalization nodes kept (as opset-9 zoo models have them)")
    args = ap.parse_args()
    sys.path.insert(0, ROOT)
    from bench.profile_first_run import _model
    import vkml
    import vkml.compile.fusion

    if args.keep_bn:
        path, x = _export_keeping_bn(args.model)
    else:
        path, x = _model(args.model)
    sessions = {}
    for name, on in (("fused", True), ("unfused", False)):
        os.environ["VKML_FUSE"] = "1" if on else "0"  # read when the session is made
        s = vkml.InferenceSession(path, devices=[args.device, "cpu"])
        feed = {s.get_inputs()[0].name: x}
        for _ in range(10):
            s.run(None, feed)
        sessions[name] = (s, feed)
    times = {k: [] for k in sessions}
    for _ in range(args.rounds):
        for name, (s, feed) in sessions.items():
            for _ in range(args.block):
                t0 = time.perf_counter()
                s.run(None, feed)
                times[name].append(time.perf_counter() - t0)
    for name, ts in times.items():
        print(f"{args.model} {name:8s} median {1e3 * statistics.median(ts):.3f} ms over {len(ts)} runs")


if __name__ == "__main__":
    main()
