"""Convolution kernels one by one: GPU time of each distinct Conv of a CNN at batch 1 (ResNet-50
by default), as a session records it (bias and Relu in the epilogue, a barrier between
dispatches, as between a model's dependent nodes), with the tiling the kernel picks and any
tilings given with --tiles. The weighted sum (each shape times how often the model has it) is
the model's convolution time, the number issue #12 is about.

    python bench/bench_conv.py [--model resnet50|resnet18] [--tiles 64,64,16,4,4 ...] [--out F]

Times from GPU timestamps around --inner dispatches, the best of --outer submissions after
--warm seconds of the same submissions (an idle GPU's clock would be timed otherwise). Writes
JSON lines (one per shape and tiling) to bench/results/conv-<device>.jsonl or --out.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from bench.kernel_bench import add_common_args, best_seconds, open_or_report  # noqa: E402
from vkml.kernels import get_kernel  # noqa: E402
from vkml.kernels import gemm  # noqa: E402
from vkml.kernels.registry import TensorSpec  # noqa: E402
from vkml.vulkan.tensor import DeviceTensor  # noqa: E402

# (C, M, kernel, stride, input size); padding is kernel // 2.
Shape = tuple[int, int, int, int, int]


def _bottleneck_stages(blocks, widths, in_ch=64):
    convs: list[Shape] = [(3, 64, 7, 2, 224)]
    c, size = in_ch, 56
    for stage, (n, w) in enumerate(zip(blocks, widths)):
        for b in range(n):
            s = 2 if b == 0 and stage > 0 else 1
            convs += [(c, w, 1, 1, size), (w, w, 3, s, size), (w, 4 * w, 1, 1, size // s)]
            if b == 0:
                convs.append((c, 4 * w, 1, s, size))
            c, size = 4 * w, size // s
    return convs


def _basic_stages(blocks, widths):
    convs: list[Shape] = [(3, 64, 7, 2, 224)]
    c, size = 64, 56
    for stage, (n, w) in enumerate(zip(blocks, widths)):
        for b in range(n):
            s = 2 if b == 0 and stage > 0 else 1
            convs += [(c, w, 3, s, size), (w, w, 3, 1, size // s)]
            if b == 0 and s == 2:
                convs.append((c, w, 1, s, size))
            c, size = w, size // s
    return convs


MODELS = {
    "resnet50": lambda: _bottleneck_stages((3, 4, 6, 3), (64, 128, 256, 512)),
    "resnet18": lambda: _basic_stages((2, 2, 2, 2), (64, 128, 256, 512)),
}


def time_conv(dev, shape: Shape, inner: int, outer: int, warm_s: float) -> tuple[float, str]:
    c, m, k, s, size = shape
    rng = np.random.default_rng(0)
    x = DeviceTensor.from_numpy(dev, rng.standard_normal((1, c, size, size), dtype=np.float32))
    w = DeviceTensor.from_numpy(dev, rng.standard_normal((m, c, k, k), dtype=np.float32) * 0.1)
    b = DeviceTensor.from_numpy(dev, rng.standard_normal(m, dtype=np.float32))
    attrs = {"kernel_shape": [k, k], "strides": [s, s], "pads": [k // 2] * 4, "epilogue": gemm.EPI_RELU}
    kern = get_kernel("FusedConv")
    specs = [TensorSpec.of(t) for t in (x, w, b)]
    kern.check(dev, "FusedConv", attrs, specs)
    (spec,) = kern.infer("FusedConv", attrs, specs)
    out = DeviceTensor.empty(dev, spec.shape, spec.dtype)
    secs = best_seconds(dev, lambda rec: kern.record(rec, "FusedConv", attrs, [x, w, b], [out]), inner, outer,
                        warm_s)
    return secs, f"{spec.shape}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(ap, inner=20, outer=5)
    ap.add_argument("--model", default="resnet50", choices=sorted(MODELS))
    ap.add_argument("--tiles", nargs="*", default=[], help="SIMT tilings BM,BN,BK,TM,TN to try too")
    ap.add_argument("--warm", type=float, default=0.3, help="seconds of sustained load before each timing "
                    "(the GPU's clock boost)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    opened = open_or_report(args.device)
    if opened is None:
        return 1
    dev, info = opened
    counts = Counter(MODELS[args.model]())
    tilings = [None] + args.tiles
    out = args.out or os.path.join(HERE, "results", f"conv-{info.device_name.replace(' ', '-').lower()}.jsonl")
    totals = {t: 0.0 for t in tilings}
    best_total = 0.0
    with open(out, "a") as f:
        for shape, n in counts.items():
            c, m, k, s, size = shape
            flops = 2.0 * m * c * k * k * (size // s) ** 2
            row = []
            best = None
            for t in tilings:
                if t:
                    os.environ["VKML_MATMUL_TILE"] = t
                else:
                    os.environ.pop("VKML_MATMUL_TILE", None)
                try:
                    secs, oshape = time_conv(dev, shape, args.inner, args.outer, args.warm)
                except Exception as e:  # a tiling the device refuses
                    row.append(f"{t}: {type(e).__name__}")
                    continue
                totals[t] += n * secs
                best = secs if best is None else min(best, secs)
                row.append(f"{secs * 1e6:7.1f}us {flops / secs / 1e12:5.2f}TF")
                f.write(json.dumps({"bench": "conv", "model": args.model, "device": info.device_name,
                                    "shape": shape, "count": n, "tiling": t or "auto", "gpu_us": secs * 1e6,
                                    "tflops": flops / secs / 1e12, "inner": args.inner, "outer": args.outer,
                                    "time": time.strftime("%Y-%m-%d %H:%M:%S")}) + "\n")
            os.environ.pop("VKML_MATMUL_TILE", None)
            best_total += n * (best or 0.0)
            print(f"{n}x C{c:4d} M{m:4d} k{k} s{s} {size:3d}px {flops / 1e6:6.1f}MF | " + " | ".join(row), flush=True)
    print("model conv time:", " | ".join(f"{t or 'auto'} {v * 1e3:.3f} ms" for t, v in totals.items()),
          f"| best per shape {best_total * 1e3:.3f} ms")
    print("wrote", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
