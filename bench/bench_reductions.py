"""Reduction, softmax, pooling and normalization kernels on one Vulkan device: each case records
`--inner` back-to-back runs of one node between GPU timestamps, submitted `--outer` times (the
best submission counts), and reports GB/s as (bytes read + bytes written) / time. Where PyTorch
with CUDA is importable, the same operation through PyTorch (CUDA events, same repetitions)
is timed beside it.

    python bench/bench_reductions.py [--device N] [--scale 1.0] [--inner 10] [--outer 3] [--check]
                                     [--no-subgroups]

--scale shrinks or grows every tensor's leading dim (0.01 runs in seconds on lavapipe); --check
compares each result with the NumPy operator (loosely: this is not a test). Writes
bench/results/reductions-<device>.json. Numbers depend on the machine.
"""
from __future__ import annotations

import argparse
import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from bench.kernel_bench import add_common_args, best_seconds, open_device, write_results  # noqa: E402
import vkml.kernels.reduce as kreduce  # noqa: E402
from vkml.kernels import TensorSpec, get_kernel  # noqa: E402
from vkml.vulkan.tensor import DeviceTensor  # noqa: E402


def cases(scale: float):
    """(name, op, attrs, inputs, torch function or None)."""
    rng = np.random.default_rng(0)

    def arr(dtype, *shape):
        shape = (max(1, int(round(shape[0] * scale))),) + tuple(shape[1:])
        return rng.standard_normal(shape, dtype=np.float32).astype(dtype)

    rows = arr(np.float32, 4096, 8192)          # 128 MiB
    cols = arr(np.float32, 8192, 4096)
    flat = arr(np.float32, 32 * 2**20)
    h_rows = arr(np.float16, 4096, 8192)
    seg = arr(np.float32, 16, 21, 256 * 256)
    tok = arr(np.float32, 16384, 1024)
    tok16 = tok.astype(np.float16)
    img = arr(np.float32, 32, 64, 112, 112)
    img16 = arr(np.float16, 8, 512, 64, 64)
    feat = arr(np.float32, 64, 512, 28, 28)
    c64 = np.ones(64, np.float32)
    c512h = np.ones(512, np.float16)
    w1024 = np.ones(1024, np.float32)
    w1024h = w1024.astype(np.float16)

    try:
        import torch
        import torch.nn.functional as F  # noqa: N812
        F = F if torch.cuda.is_available() else None  # noqa: N806
    except Exception:
        F = None

    def t(fn):
        return fn if F is not None else None

    return [
        ("ReduceSum rows (4096x8192, last axis)", "ReduceSum", {"axes": [1], "keepdims": 0}, [rows],
         t(lambda x: x.sum(1))),
        ("ReduceSum cols (8192x4096, axis 0)", "ReduceSum", {"axes": [0], "keepdims": 0}, [cols],
         t(lambda x: x.sum(0))),
        ("ReduceSum all (32M, split)", "ReduceSum", {"keepdims": 0}, [flat], t(lambda x: x.sum())),
        ("ReduceMax rows f16", "ReduceMax", {"axes": [1], "keepdims": 0}, [h_rows], t(lambda x: x.amax(1))),
        ("ReduceLogSumExp rows", "ReduceLogSumExp", {"axes": [1], "keepdims": 0}, [rows],
         t(lambda x: x.logsumexp(1))),
        ("ArgMax rows", "ArgMax", {"axis": 1, "keepdims": 0}, [rows], t(lambda x: x.argmax(1))),
        ("Softmax rows (4096x8192)", "Softmax", {"axis": -1, "_opset": 13}, [rows], t(lambda x: x.softmax(-1))),
        ("Softmax rows f16", "Softmax", {"axis": -1, "_opset": 13}, [h_rows], t(lambda x: x.softmax(-1))),
        ("Softmax axis 1 of (16,21,65536)", "Softmax", {"axis": 1, "_opset": 13}, [seg], t(lambda x: x.softmax(1))),
        ("LayerNorm (16384x1024)", "LayerNormalization", {"axis": -1}, [tok, w1024, w1024],
         t(lambda x, s, b: F.layer_norm(x, (1024,), s, b))),
        ("LayerNorm f16", "LayerNormalization", {"axis": -1}, [tok16, w1024h, w1024h],
         t(lambda x, s, b: F.layer_norm(x, (1024,), s, b))),
        ("GroupNorm 32 groups f16 (8,512,64,64)", "GroupNormalization", {"num_groups": 32, "_opset": 21},
         [img16, c512h, c512h], t(lambda x, s, b: F.group_norm(x, 32, s, b))),
        ("BatchNorm (32,64,112,112)", "BatchNormalization", {}, [img, c64, c64, c64, c64],
         t(lambda x, s, b, m, v: F.batch_norm(x, m, v, s, b, False))),
        ("MaxPool 3x3 s2 p1 (32,64,112,112)", "MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2],
                                                        "pads": [1, 1, 1, 1]}, [img],
         t(lambda x: F.max_pool2d(x, 3, 2, 1))),
        ("AveragePool 2x2 s2", "AveragePool", {"kernel_shape": [2, 2], "strides": [2, 2]}, [img],
         t(lambda x: F.avg_pool2d(x, 2, 2))),
        ("GlobalAveragePool (64,512,28,28)", "GlobalAveragePool", {}, [feat],
         t(lambda x: x.mean((2, 3), keepdim=True))),
    ]


def run_case(dev, name, op, attrs, arrays, inner, outer, check) -> dict:
    tensors = [DeviceTensor.from_numpy(dev, a) for a in arrays]
    specs = [TensorSpec.of(t) for t in tensors]
    kernel = get_kernel(op)
    kernel.check(dev, op, attrs, specs)
    outs = [DeviceTensor.empty(dev, s.shape, s.dtype) for s in kernel.infer(op, attrs, specs)]
    best = best_seconds(dev, lambda rec: kernel.record(rec, op, attrs, tensors, outs, {}), inner, outer)
    moved = sum(t.nbytes for t in tensors) + sum(o.nbytes for o in outs)
    ok = None
    if check:
        sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "vulkan"))
        from _cpu_op import cpu_op
        opset = {"Softmax": 13, "GroupNormalization": 21, "LayerNormalization": 17, "ArgMax": 13,
                 "MaxPool": 12, "AveragePool": 19}.get(op, 15 if op == "BatchNormalization" else 11)
        ref = cpu_op(op, opset, {k: v for k, v in attrs.items() if not k.startswith("_")}, *arrays)[0]
        got = outs[0].numpy()
        if ref.dtype.kind == "f":
            ok = bool(np.allclose(got.astype(np.float64), ref.astype(np.float64), rtol=1e-2,
                                  atol=1e-2 * max(1.0, float(np.abs(ref).max(initial=0)))))
        else:
            ok = bool(np.array_equal(got, ref))
    return {"case": name, "op": op, "seconds": best, "bytes": moved, "GBps": moved / best / 1e9, "check": ok}


def torch_time(fn, arrays, inner, outer) -> float | None:
    import torch
    xs = [torch.from_numpy(np.ascontiguousarray(a)).cuda() for a in arrays]
    fn(*xs)
    torch.cuda.synchronize()
    best = math.inf
    for _ in range(outer):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(inner):
            fn(*xs)
        b.record()
        torch.cuda.synchronize()
        best = min(best, a.elapsed_time(b) / 1e3 / inner)
    return best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(ap)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--no-subgroups", action="store_true",
                    help="use the shared-memory reductions (sets VKML_NO_SUBGROUPS=1)")
    args = ap.parse_args(argv)
    if args.no_subgroups:
        os.environ["VKML_NO_SUBGROUPS"] = "1"  # (read as each kernel is recorded)
    _, dev, info = open_device(args.device)
    rows = []
    all_cases = cases(args.scale)
    # warm-up: clocks ramp up from idle, and the first runs compile pipelines
    name, op, attrs, arrays, _ = all_cases[0]
    for _ in range(5):
        run_case(dev, name, op, attrs, arrays, args.inner, args.outer, False)
    for name, op, attrs, arrays, tfn in all_cases:
        r = run_case(dev, name, op, attrs, arrays, args.inner, args.outer, args.check)
        r["torch_seconds"] = torch_time(tfn, arrays, args.inner, args.outer) if tfn is not None else None
        rows.append(r)
    print(f"{info.device_name} ({info.driver_name} {info.driver_info}), subgroups: "
          f"{kreduce.subgroup_arith(dev)}")
    print(f"{'case':42s} {'MiB':>8s} {'us':>9s} {'GB/s':>7s} {'torch us':>9s} {'torch GB/s':>10s} check")
    for r in rows:
        ts = r["torch_seconds"]
        tcol = f"{ts * 1e6:9.1f} {r['bytes'] / ts / 1e9:10.1f}" if ts else f"{'':9s} {'':10s}"
        print(f"{r['case']:42s} {r['bytes'] / 2**20:8.1f} {r['seconds'] * 1e6:9.1f} {r['GBps']:7.1f} {tcol} "
              f"{'' if r['check'] is None else r['check']}")
    path = write_results("reductions-nosg" if args.no_subgroups else "reductions", info,
                         {"scale": args.scale, "inner": args.inner, "subgroups": kreduce.subgroup_arith(dev),
                          "rows": rows})
    print("wrote", path)
    return 0 if all(r["check"] is not False for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
