"""Command line: `python -m vkml run [MODEL] [--input NAME=FILE.npy ...]`, `python -m vkml info`,
`python -m vkml warmup MODEL [--shape NAME=D,D,...]`, `python -m vkml bench [...]`."""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from importlib import resources

import numpy as np

SHIPPED_MODEL = "digits_cnn.onnx"
SHIPPED_DATA = "digits_test.npz"


def _summary(a) -> str:
    if isinstance(a, list):
        return f"sequence of {len(a)}"
    if a is None:
        return "none"
    if a.dtype.kind in "fc" and a.size:
        f = a.astype(np.float64)
        return f"min {f.min():.4g} max {f.max():.4g} mean {f.mean():.4g}"
    if a.dtype.kind in "iub" and a.size:
        flat = a.reshape(-1)
        head = ", ".join(str(v) for v in flat[:8]) + (", ..." if flat.size > 8 else "")
        return f"[{head}]"
    return f"{a.size} values"


def _time_runs(sess, feed, repeat: int) -> float:
    """The median of `repeat` runs; on a terminal, a progress line when they take a while."""
    times = []
    tty = sys.stderr.isatty()
    start = last = time.perf_counter()
    for i in range(repeat):
        t0 = time.perf_counter()
        sess.run(None, feed)
        times.append(time.perf_counter() - t0)
        if tty and time.perf_counter() - last > 1.0:
            last = time.perf_counter()
            print(f"\rvkml: timing run {i + 1}/{repeat} ({last - start:.0f} s)", end="", file=sys.stderr, flush=True)
    if tty and last != start:
        print(file=sys.stderr)
    return statistics.median(times)


def _read_inputs(items: list[str] | None) -> dict:
    """--input NAME=FILE.npy values, read before anything else runs: a bad item or file is an
    error that names it."""
    feed = {}
    for item in items or []:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise ValueError(f"--input must be NAME=FILE.npy, got {item!r}")
        if name in feed:
            raise ValueError(f"--input {name!r} given twice")
        try:
            feed[name] = np.load(path, allow_pickle=False)
        except (OSError, ValueError, EOFError) as e:
            raise ValueError(f"--input {name}={path}: cannot read it as a .npy array ({type(e).__name__}: {e})") from None
        if not isinstance(feed[name], np.ndarray):  # an .npz archive
            raise ValueError(f"--input {name}={path}: an .npz archive, not one .npy array")
    return feed


def cmd_run(args) -> int:
    import vkml
    from vkml.api.feeds import random_feed

    if args.repeat < 1:
        raise ValueError(f"--repeat must be at least 1, not {args.repeat}")
    shipped = args.model is None
    if shipped and args.input:
        raise ValueError("--input needs a MODEL (the shipped model runs on its own test images)")
    given = _read_inputs(args.input)
    path = args.model or str(resources.files("vkml") / "data" / SHIPPED_MODEL)
    sess = vkml.InferenceSession(path, devices=args.device or None)
    if shipped:
        data = np.load(str(resources.files("vkml") / "data" / SHIPPED_DATA))
        images, labels = data["images"], data["labels"]
        name = sess.get_inputs()[0].name
        feed = {name: images}
        outs = sess.run(None, feed)
        pred = outs[0].argmax(axis=1)
        acc = float((pred == labels).mean())
        print(f"model: {path} (shipped: 8x8 digits CNN)")
        print(f"classified {len(labels)} held-back test images: accuracy {acc:.4f} "
              f"({int((pred == labels).sum())}/{len(labels)})")
    else:
        feed = given
        names = [a.name for a in sess.get_inputs()]
        unknown = [k for k in feed if k not in names]
        if unknown:
            raise ValueError(f"--input {unknown}: the model's inputs are {names}")
        missing = [a for a in sess.get_inputs() if a.name not in feed]
        if missing:
            rand = random_feed(sess, np.random.default_rng(0))
            for a in missing:
                feed[a.name] = rand[a.name]
                print(f"input {a.name}: not given, using random {feed[a.name].dtype}{list(feed[a.name].shape)}")
        outs = sess.run(None, feed)
        print(f"model: {path}")
    for arg, out in zip(sess.get_outputs(), outs):
        shape = list(out.shape) if hasattr(out, "shape") else "-"
        dt = out.dtype if hasattr(out, "dtype") else type(out).__name__
        print(f"output {arg.name}: shape {shape} dtype {dt}  {_summary(out)}")
    med = _time_runs(sess, feed, args.repeat)
    print(f"median latency over {args.repeat} runs: {med * 1e6:.1f} us on {', '.join(sess.devices)}")
    return 0


def cmd_info(args) -> int:
    import vkml
    from vkml import vulkan

    gpus = [d.vulkan for d in vkml.devices() if d.vulkan is not None]
    if gpus:
        print(vulkan.format_table(gpus))
    for d in vkml.devices():
        if d.vulkan is None:
            print(f"{d.name:10s} {d.description}")
            for k, v in d.details.items():
                print(f"{'':10s}   {k}: {v}")
    return 0


def _parse_shapes(items: list[str] | None) -> dict[str, tuple[int, ...]] | None:
    if not items:
        return None
    shapes = {}
    for item in items:
        name, sep, dims = item.partition("=")
        try:
            shapes[name] = tuple(int(d) for d in dims.split(","))
        except ValueError:
            sep = ""
        if not sep or not name:
            raise ValueError(f"--shape {item!r}: expected NAME=D1,D2,... (e.g. x=1,3,224,224)")
    return shapes


def cmd_warmup(args) -> int:
    """Compile every GPU pipeline MODEL needs into the pipeline cache (e.g. while building a
    container image), so that the first session of a later process starts warm."""
    import vkml

    t0 = time.perf_counter()
    devices = args.device or None
    sess = vkml.InferenceSession(args.model, devices=devices, warmup=False)
    if not any(d != "cpu" for d in sess.devices):
        print("vkml: no GPU in this session's devices: nothing to compile", file=sys.stderr)
        return 1
    pipes = sess.warmup(_parse_shapes(args.shape))
    took = time.perf_counter() - t0
    from vkml import config

    where = config.cache_dir() or "nowhere (VKML_PIPELINE_CACHE=0)"
    print(f"{len(pipes)} GPU pipelines ready in {took:.2f} s ({sum(p['compile_s'] for p in pipes):.2f} s of "
          f"compiling, on threads); pipeline cache: {where}")
    return 0


def main(argv: list[str] | None = None) -> int:
    from .. import __version__

    ap = argparse.ArgumentParser(prog="vkml", description=__doc__)
    ap.add_argument("--version", action="version", version=f"vkml {__version__}")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run a model (the shipped digits CNN when MODEL is omitted)")
    r.add_argument("model", nargs="?")
    r.add_argument("--input", action="append", metavar="NAME=FILE.npy")
    r.add_argument("--device", action="append", help="device name from `vkml info` (repeatable)")
    r.add_argument("--repeat", type=int, default=100, help="runs timed for the median latency")
    sub.add_parser("info", help="list the devices vkml can use")
    w = sub.add_parser("warmup", help="compile a model's GPU pipelines into the pipeline cache")
    w.add_argument("model")
    w.add_argument("--shape", action="append", metavar="NAME=D1,D2,...",
                   help="an input's shape (needed for symbolic dimensions; repeatable)")
    w.add_argument("--device", action="append", help="device name from `vkml info` (repeatable)")
    sub.add_parser("bench", help="benchmark suite; --profile MODEL: where its time goes (vkml bench --help)")
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["bench"]:  # its own parser (vkml.benchmarks): options pass through untouched
        from ..benchmarks import main as bench_main

        return _guard(bench_main, argv[1:])
    args = ap.parse_args(argv)
    return _guard({"run": cmd_run, "info": cmd_info, "warmup": cmd_warmup}[args.cmd], args)


def _guard(fn, args) -> int:
    try:
        return fn(args)
    except (ValueError, OSError) as e:  # ModelError is a ValueError
        print(f"vkml: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
