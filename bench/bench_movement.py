"""Data-movement kernels' bandwidth on one Vulkan device: each case records `--inner`
back-to-back runs of one node between GPU timestamps, submitted `--outer` times (the best
submission counts), and reports GB/s as (bytes read + bytes written) / time, beside a
plain vkCmdCopyBuffer of the same size. The transpose cases also run through the generic
strided copy, to show what the tiled shared-memory path buys.

    python bench/bench_movement.py [--device N] [--scale 1.0] [--inner 10] [--outer 3] [--check]
                                   [--only SUBSTRING] [--no-isolate]

Each case runs in a fresh process unless --no-isolate.

--scale shrinks or grows every tensor (0.01 runs in seconds on lavapipe); --check compares
each result with NumPy. Prints a table and writes bench/results/movement-<device>.json.
Not a test: numbers depend on the machine.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from bench.kernel_bench import add_common_args, best_seconds, open_device, write_results  # noqa: E402
from vkml.kernels import TensorSpec, get_kernel, movement  # noqa: E402
from vkml.kernels.common import pad8  # noqa: E402
from vkml.vulkan.tensor import DeviceTensor  # noqa: E402


def _dims(shape, scale):
    """Scale the leading dimension (at least 1)."""
    return (max(1, int(round(shape[0] * scale))),) + tuple(shape[1:])


def cases(scale: float):
    """(name, op, attrs, {input: array}, reference) per case."""
    rng = np.random.default_rng(0)

    def f32(*shape):
        return rng.standard_normal(_dims(shape, scale), dtype=np.float32)

    x = f32(32, 64, 128, 128)   # 128 MiB at scale 1
    sq = f32(32, 1024, 1024)    # 128 MiB
    emb = f32(32768, 1024)      # 128 MiB table
    idx = rng.integers(0, emb.shape[0], 8192).astype(np.int64)
    small = f32(8, 64, 128, 128)
    return [
        ("transpose 021 (batched 2-D)", "Transpose", {"perm": [0, 2, 1]}, {"x": sq},
         lambda: sq.transpose(0, 2, 1)),
        ("transpose NCHW->NHWC", "Transpose", {"perm": [0, 2, 3, 1]}, {"x": x}, lambda: x.transpose(0, 2, 3, 1)),
        ("transpose NHWC->NCHW", "Transpose", {"perm": [0, 3, 1, 2]}, {"x": x}, lambda: x.transpose(0, 3, 1, 2)),
        ("transpose 0213 (heads)", "Transpose", {"perm": [0, 2, 1, 3]}, {"x": x}, lambda: x.transpose(0, 2, 1, 3)),
        ("slice [..., ::-1]", "Slice", {}, {"x": x, "s": np.array([-1]), "e": np.array([-(2**62)]),
                                           "a": np.array([-1]), "p": np.array([-1])}, lambda: x[..., ::-1]),
        ("concat axis 1", "Concat", {"axis": 1}, {"x": x, "y": x}, lambda: np.concatenate([x, x], 1)),
        ("split axis 1 (2 parts)", "Split", {"axis": 1, "num_outputs": 2}, {"x": x}, lambda: x[:, :32]),
        ("expand (1,C,1,W)->(N,C,H,W)", "Expand", {}, {"x": x[:1, :, :1], "s": np.array(x.shape)},
         lambda: np.broadcast_to(x[:1, :, :1], x.shape)),
        ("gather rows (embedding)", "Gather", {"axis": 0}, {"x": emb, "i": idx}, lambda: emb[idx]),
        ("pad reflect 2", "Pad", {"mode": "reflect"}, {"x": small, "p": np.array([0, 0, 2, 2, 0, 0, 2, 2])},
         lambda: np.pad(small, ((0, 0), (0, 0), (2, 2), (2, 2)), mode="reflect")),
        ("tile (1,1,2,2)", "Tile", {}, {"x": small, "r": np.array([1, 1, 2, 2])}, lambda: np.tile(small, (1, 1, 2, 2))),
        ("resize nearest x2", "Resize", {"mode": "nearest"}, {"x": small, "": None,
                                                              "sc": np.array([1, 1, 2, 2], np.float32)}, None),
        ("resize linear x2", "Resize", {"mode": "linear"}, {"x": small, "": None,
                                                            "sc": np.array([1, 1, 2, 2], np.float32)}, None),
    ]


def _record(rec, kernel, op, attrs, tensors, outs, consts, strided: bool):
    if strided and op == "Transpose":  # the generic copy, bypassing the tiled path
        x, out = tensors[0], outs[0]
        perm = attrs.get("perm")
        lay = movement.permuted(x.shape, perm)
        shape, ist, ost = lay.collapsed()
        p = rec.device.pipeline("copy_b4", "rw", movement.COPY_PUSH.size)
        push = movement.COPY_PUSH.pack(lay.size, len(shape), 0, 0, *pad8(shape), *pad8(ist), *pad8(ost))
        rec.dispatch(p, [x.view, out.view], push, p.groups_for(lay.size))
        return
    kernel.record(rec, op, attrs, tensors, outs, consts)


def run_case(dev, name, op, attrs, feeds, ref, inner, outer, check, strided=False) -> dict:
    host = {i: v for i, v in enumerate(feeds.values()) if v is not None}
    tensors = [None if v is None else DeviceTensor.from_numpy(dev, v) for v in feeds.values()]
    specs = [None if t is None else TensorSpec.of(t, host[i]) for i, t in enumerate(tensors)]
    kernel = get_kernel(op)
    kernel.check(dev, op, attrs, specs)
    out_specs = kernel.infer(op, attrs, specs)
    outs = [DeviceTensor.empty(dev, s.shape, s.dtype) for s in out_specs]
    best = best_seconds(dev, lambda rec: _record(rec, kernel, op, attrs, tensors, outs, host, strided), inner, outer)
    # distinct bytes read (host parameters aside; for Gather only the rows it reads) + written
    params = set(kernel.host_inputs.get(op, ()))
    read = sum(t.nbytes for i, t in enumerate(tensors) if t is not None and i not in params)
    if op == "Gather":
        read = outs[0].nbytes + tensors[1].nbytes
    moved = read + sum(o.nbytes for o in outs)
    ok = None
    if check and ref is not None:
        ok = bool(np.array_equal(outs[0].numpy(), ref()))
    return {"case": name + (" [strided copy]" if strided else ""), "op": op, "seconds": best,
            "bytes": moved, "GBps": moved / best / 1e9, "check": ok}


def copy_baseline(dev, nbytes, inner, outer) -> dict:
    a, b = dev.alloc(nbytes), dev.alloc(nbytes)
    best = best_seconds(dev, lambda rec: rec.copy(a, b, nbytes), inner, outer)
    return {"case": "vkCmdCopyBuffer (baseline)", "op": "copy", "seconds": best, "bytes": 2 * nbytes,
            "GBps": 2 * nbytes / best / 1e9, "check": None}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(ap)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--only", default="", help="run the cases whose name contains this")
    ap.add_argument("--no-isolate", dest="isolate", action="store_false", help="all cases in this process")
    ap.add_argument("--json", default=None, help=argparse.SUPPRESS)  # "-": rows as JSON on stdout
    args = ap.parse_args(argv)
    idx, dev, info = open_device(args.device)
    names = [c[0] for c in cases(0.0001) if args.only in c[0]]
    if args.isolate and len(names) > 1:
        # One process per case: in one long process later cases ran up to 2x slower on an
        # H100 (allocation history?), which says nothing about the kernels.
        rows = []
        for name in ["vkCmdCopyBuffer"] + names:
            cmd = [sys.executable, __file__, "--device", str(idx), "--scale", str(args.scale), "--inner",
                   str(args.inner), "--outer", str(args.outer), "--only", name, "--json", "-"]
            if args.check:
                cmd.append("--check")
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            rows += json.loads(out.splitlines()[-1])
    else:
        rows = []
        if "vkCmdCopyBuffer" in args.only or not args.only:
            rows.append(copy_baseline(dev, max(4, int(128 * 2**20 * args.scale)) // 4 * 4, args.inner, args.outer))
        for name, op, attrs, feeds, ref in cases(args.scale):
            if args.only not in name:
                continue
            rows.append(run_case(dev, name, op, attrs, feeds, ref, args.inner, args.outer, args.check))
            if op == "Transpose":
                rows.append(run_case(dev, name, op, attrs, feeds, ref, args.inner, args.outer, args.check, True))
    if args.json == "-":
        print(json.dumps(rows))
        return 0
    print(f"{info.device_name} ({info.driver_name} {info.driver_info})")
    print(f"{'case':44s} {'MiB':>8s} {'us':>10s} {'GB/s':>8s} check")
    for r in rows:
        print(f"{r['case']:44s} {r['bytes'] / 2**20:8.1f} {r['seconds'] * 1e6:10.1f} {r['GBps']:8.1f} "
              f"{'' if r['check'] is None else r['check']}")
    path = write_results("movement", info, {"scale": args.scale, "inner": args.inner, "rows": rows})
    print("wrote", path)
    return 0 if all(r["check"] is not False for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
