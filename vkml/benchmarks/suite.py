"""vkml's benchmark suite: vkml on every device it has, against the peers present in the same run.

    vkml bench [--quick] [--only chain_add,mnist,...] [--device cpu ...] [--out DIR]
    python -m vkml bench ...                                        (the same)

Families: chain_add (per-op overhead, µs/op slope), mnist, conv_cnn, mlp (fp32/fp16), matmul
(TFLOPS; also vkml's GEMM kernel alone, gemm_kernel.py), resnet18, mobilenet_v2,
memory (peak RSS holding resnet18, each runtime in its own process), threaded (1/2/4/8 threads on
one session), first_run, transformers (BERT-base, GPT-2 small, ViT-B/16 from PyTorch; full sizes
only). Each timed case runs host NumPy → host NumPy, and again device-resident where the
runtime has a way (ORT I/O binding, torch tensors on the GPU, vkml.Tensor when present).

Writes <out>/<machine>-<date>.jsonl (--out, the current directory by default) (one record per benchmark × runtime × config × mode,
appended as they complete), a markdown table beside it, and a PNG chart per benchmark when
matplotlib is importable. A runtime that is absent or cannot run a case is recorded with its
status (missing / unsupported / error) and the reason: never a number.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import gc
import json
import os
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import machine as machine_info
from . import models as M
from . import timing
from .gpu_busy import GpuBusy
from .runtimes import Runtime, Unavailable, discover

FAMILIES = ("chain_add", "mnist", "matmul", "mlp", "resnet18", "mobilenet_v2", "resnet50", "efficientnet_b0",
            "conv_cnn", "memory", "threaded", "first_run", "transformers")
# Under --time-limit each family gets this share of the time still left (of the families still to
# run), so one slow family cannot starve the rest; time a family leaves unused goes to the next.
WEIGHTS = {"chain_add": 60, "mnist": 15, "matmul": 60, "mlp": 60, "resnet18": 65, "mobilenet_v2": 65,
           "resnet50": 65, "efficientnet_b0": 65, "conv_cnn": 25, "memory": 30, "threaded": 70,
           "first_run": 60, "transformers": 180}  # ~seconds each took on an H100 machine (transformers: a guess)


@dataclass
class Sizes:
    """What --quick shrinks. The full sizes are the issue's; quick keeps every family's shape."""

    chain: tuple[int, ...] = (1, 10, 100, 1000, 10000)
    chain_runs: tuple[int, int] = (120, 20)
    mnist_runs: tuple[int, int] = (1100, 100)
    cnn_size: int = 224
    mlp_width: int = 4096
    mlp_batch: int = 64
    matmul_n: int = 4096
    image: int = 224
    batches: tuple[int, ...] = (1, 32)
    model_runs: tuple[int, int] = (100, 5)
    case_s: float = 2.0  # per case and mode: the loop stops early past this
    thread_counts: tuple[int, ...] = (1, 2, 4, 8, 16)
    batch_calls: int = 64  # runs per run_batch call
    thread_s: float = 1.0
    thread_models: tuple[str, ...] = ("mnist", "resnet18")
    memory_image: int = 224
    first_run_models: tuple[str, ...] = ("mnist", "resnet18", "resnet50", "mobilenet_v2", "efficientnet_b0")

    @classmethod
    def quick(cls) -> "Sizes":
        return cls(chain_runs=(120, 20), mnist_runs=(1100, 100), cnn_size=48, mlp_width=512, matmul_n=512,
                   image=112, batches=(1, 4), model_runs=(30, 3), case_s=1.5, thread_s=0.6,
                   thread_models=("mnist",), first_run_models=("mnist", "resnet18"))

    @classmethod
    def smoke(cls) -> "Sizes":
        """The smallest sizes (the test suite's smoke run): seconds, not minutes."""
        return cls(chain=(1, 10, 100), chain_runs=(12, 2), mnist_runs=(12, 2), cnn_size=16, mlp_width=32,
                   mlp_batch=4, matmul_n=32, image=32, batches=(1,), model_runs=(4, 1), case_s=0.3,
                   thread_counts=(1, 2), thread_s=0.1, thread_models=("mnist",), memory_image=32,
                   first_run_models=("mnist",))


@dataclass
class Ctx:
    sizes: Sizes
    runtimes: list[Runtime]
    missing: list[dict]
    machine: dict
    deadline: timing.Deadline
    jsonl: str
    run_id: str
    records: list[dict] = field(default_factory=list)
    verbose: bool = True

    def emit(self, benchmark: str, config: str, runtime: str, mode: str, status: str, **fields: Any) -> dict:
        rec = {"run_id": self.run_id, "benchmark": benchmark, "config": config, "runtime": runtime, "mode": mode,
               "status": status, **fields, "machine": self.machine}
        self.records.append(rec)
        with open(self.jsonl, "a") as f:
            f.write(json.dumps(rec, default=_jsonable) + "\n")
        if self.verbose:
            print("  " + _line(rec), flush=True)
        return rec


def _jsonable(o):
    if isinstance(o, (np.floating, np.integer)):
        return o.item()
    return str(o)


def _line(r: dict) -> str:
    head = f"{r['benchmark']:13s} {r['config']:18s} {r['runtime']:22s} {r['mode']:8s}"
    if r["status"] != "ok":
        return f"{head} {r['status']}: {str(r.get('reason', ''))[:110]}"
    parts = []
    if "median" in r:
        parts.append(f"median {_fmt_s(r['median'])} [p05 {_fmt_s(r['p05'])}, p95 {_fmt_s(r['p95'])}] n={r['runs']}")
    for k, unit in (("tflops", "TFLOPS"), ("throughput", "runs/s"), ("slope_us_per_op", "us/op")):
        if k in r:
            parts.append(f"{r[k]:.4g} {unit}")
    if "over_baseline" in r:
        parts.append(f"peak RSS {r['vmhwm'] / 2**20:.0f} MiB (+{r['over_baseline'] / 2**20:.0f} MiB over baseline)")
    return f"{head} " + "  ".join(parts)


def _fmt_s(s: float) -> str:
    return f"{s * 1e6:.1f}us" if s < 1e-3 else f"{s * 1e3:.2f}ms" if s < 1 else f"{s:.2f}s"


def _release() -> None:
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()


def run_model(ctx: Ctx, bench: str, config: str, bm: M.BenchModel, runs: int, drop: int,
              params: dict | None = None) -> list[dict]:
    """Every runtime × {host, resident} on one model."""
    out = []
    params = dict(params or {}, source=bm.source)
    for rt in ctx.runtimes:
        if ctx.deadline.expired():
            out.append(ctx.emit(bench, config, rt.label, "host", "skipped", reason="suite time limit reached",
                                params=params))
            continue
        t0 = time.perf_counter()
        try:
            runner = rt.load(bm)
        except Unavailable as e:
            out.append(ctx.emit(bench, config, rt.label, "host", e.status, reason=e.reason, params=params))
            continue
        except Exception as e:
            out.append(ctx.emit(bench, config, rt.label, "host", "error", reason=f"{type(e).__name__}: {e}",
                                params=params))
            continue
        load_s = time.perf_counter() - t0
        for mode, fn in (("host", runner.host), ("resident", runner.device)):
            if fn is None:
                if not runner.device_note.startswith("host device"):
                    out.append(ctx.emit(bench, config, rt.label, mode, "unsupported", reason=runner.device_note,
                                        params=params))
                continue
            try:
                with GpuBusy() if _on_nvidia(rt.label) else contextlib.nullcontext() as busy:
                    res = timing.measure(fn, runs, drop, ctx.sizes.case_s, ctx.deadline)
                _clock_fields(res, busy)
            except Exception as e:
                out.append(ctx.emit(bench, config, rt.label, mode, "error", reason=f"{type(e).__name__}: {e}",
                                    params=params))
                continue
            if bm.flops:
                res["tflops"] = bm.flops / res["median"] / 1e12
            if res["first_run_s"] > max(1.0, 20 * res["median"]):
                res["note"] = (res.get("note", "") + "; " if res.get("note") else "") + \
                    f"first run {res['first_run_s']:.1f} s (plan, compile)"
            out.append(ctx.emit(bench, config, rt.label, mode, "ok", load_s=load_s, params=params, **res))
        del runner
        _release()
    return out


# ------------------------------------------------------------------------------------ families
def fam_chain_add(ctx: Ctx) -> None:
    """onnxruntime's optimizer removes `x + 0` (NoopElimination), so it also runs unoptimized here:
    that is the per-op overhead comparison; the optimized one is what a user gets.

    A runtime whose setup (load + first run) grows faster than N is skipped at the next N when
    its setup, extrapolated quadratically, would not fit in the family's time left (recorded)."""
    from .runtimes import OnnxRuntime

    runs, drop = ctx.sizes.chain_runs
    recs = []
    saved = ctx.runtimes
    extra = [OnnxRuntime(rt.provider, rt.cpu_threads, optimize=False) for rt in saved if isinstance(rt, OnnxRuntime)]
    setup: dict[str, tuple[int, float]] = {}
    try:
        for n in ctx.sizes.chain:
            bm = M.chain_add(n)
            for rt in saved + extra:
                if rt.label in setup:
                    n0, s0 = setup[rt.label]
                    guess = s0 * (n / n0) ** 2
                    if guess > 5.0 and guess > ctx.deadline.left():
                        recs.append(ctx.emit("chain_add", f"N={n}", rt.label, "host", "skipped",
                                             reason=f"setup (load + first run) extrapolated from N={n0} "
                                                    f"({s0:.2f} s) to ~{guess:.0f} s: more than the "
                                                    f"{max(ctx.deadline.left(), 0):.0f} s left"))
                        continue
                ctx.runtimes = [rt]
                got = run_model(ctx, "chain_add", f"N={n}", bm, runs, drop, {"n": n})
                recs += got
                ok = [r for r in got if r["status"] == "ok"]
                if ok:
                    setup[rt.label] = (n, ok[0].get("load_s", 0.0) + ok[0].get("first_run_s", 0.0))
    finally:
        ctx.runtimes = saved
    by: dict[tuple[str, str], list[tuple[int, float]]] = {}
    for r in recs:
        if r["status"] == "ok":
            by.setdefault((r["runtime"], r["mode"]), []).append((r["params"]["n"], r["median"]))
    for (rt, mode), pts in by.items():
        if len(pts) < 2:
            continue
        slope, icpt = timing.linear_fit([p[0] for p in pts], [p[1] for p in pts])
        ctx.emit("chain_add_fit", "least squares over N", rt, mode, "ok", slope_us_per_op=slope * 1e6,
                 intercept_us=icpt * 1e6, points=len(pts), params={"n": [p[0] for p in pts]})


def fam_mnist(ctx: Ctx) -> None:
    runs, drop = ctx.sizes.mnist_runs
    run_model(ctx, "mnist", "batch 1", M.mnist(1), runs, drop, {"batch": 1})


def fam_conv_cnn(ctx: Ctx) -> None:
    s = ctx.sizes.cnn_size
    run_model(ctx, "conv_cnn", f"b1 {s}x{s}", M.conv_cnn(1, s), *ctx.sizes.model_runs, {"batch": 1, "size": s})


def fam_mlp(ctx: Ctx) -> None:
    w, b = ctx.sizes.mlp_width, ctx.sizes.mlp_batch
    for dt in (np.float32, np.float16):
        name = np.dtype(dt).name
        run_model(ctx, "mlp", f"8x{w} b{b} {name}", M.mlp(b, w, 8, dt), *ctx.sizes.model_runs,
                  {"batch": b, "width": w, "layers": 8, "dtype": name})


def fam_matmul(ctx: Ctx) -> None:
    n = ctx.sizes.matmul_n
    for dt in (np.float32, np.float16):
        name = np.dtype(dt).name
        run_model(ctx, "matmul", f"{n}^3 {name}", M.matmul(n, dt), *ctx.sizes.model_runs, {"n": n, "dtype": name})
    _matmul_kernels(ctx, n)


def _matmul_kernels(ctx: Ctx, n: int) -> None:
    """vkml's GEMM kernel alone on each Vulkan device, GPU-timestamped (gemm_kernel.py; the
    checkout's bench/bench_matmul.py sweeps its tilings)."""
    gpus = [rt.device for rt in ctx.runtimes if rt.name == "vkml" and rt.device.startswith("vulkan:")]
    if not gpus:
        return
    try:
        from . import gemm_kernel
    except ImportError as e:
        for d in gpus:
            ctx.emit("matmul", f"{n}^3 kernel", f"vkml-kernel/{d}", "resident", "missing",
                     reason=f"vkml.benchmarks.gemm_kernel not importable: {type(e).__name__}: {e}")
        return
    import vkml.vulkan as vk

    for d in gpus:
        dev = vk.device(int(d.split(":")[1]))
        for dt in (np.float32, np.float16):
            name = np.dtype(dt).name
            if ctx.deadline.expired():
                ctx.emit("matmul", f"{n}^3 {name}", f"vkml-kernel/{d}", "resident", "skipped",
                         reason="suite time limit reached")
                continue
            try:  # one dispatch first, then as many per submission as fit the case budget
                probe = gemm_kernel.run_case(dev, n, dt, 1, 1)
                inner = max(1, min(50, int(ctx.sizes.case_s / 6 / max(probe["gpu_s"], 1e-9))))
                r = gemm_kernel.run_case(dev, n, dt, inner, 5 if inner > 1 else 2, check=True)
            except Exception as e:
                ctx.emit("matmul", f"{n}^3 {name}", f"vkml-kernel/{d}", "resident", "error",
                         reason=f"{type(e).__name__}: {e}")
                continue
            ctx.emit("matmul", f"{n}^3 {name}", f"vkml-kernel/{d}", "resident", "ok", median=r["gpu_s"],
                     p05=r["gpu_s"], p95=r["gpu_s"], min=r["gpu_s"], runs=r["outer"], unit="s", tflops=r["tflops"],
                     tflops_wall=r["tflops_wall"], path=r["path"], max_rel_err=r.get("max_rel_err"),
                     note=f"GPU timestamps, best of {r['outer']} submissions of {inner} dispatches",
                     params={"n": n, "dtype": name})
            _release()


def _image_models(ctx: Ctx, name: str) -> None:
    s = ctx.sizes.image
    for b in ctx.sizes.batches:
        params = {"batch": b, "size": s}
        bm, why = M.torchvision_model(name, b, s) if s == 224 else (None, "quick sizes: built with onnx.helper")
        if bm is None and name not in M.BUILDERS:  # torchvision only (no onnx.helper twin)
            for rt in ctx.runtimes:
                ctx.emit(name, f"b{b} {s}x{s}", rt.label, "host", "skipped", reason=why, params=params)
            continue
        if bm is None:
            bm = M.BUILDERS[name](b, s)
            params["torchvision"] = why
        run_model(ctx, name, f"b{b} {s}x{s}", bm, *ctx.sizes.model_runs, params)


def fam_resnet18(ctx: Ctx) -> None:
    _image_models(ctx, "resnet18")


def fam_mobilenet_v2(ctx: Ctx) -> None:
    _image_models(ctx, "mobilenet_v2")


def fam_resnet50(ctx: Ctx) -> None:
    _image_models(ctx, "resnet50")


def fam_efficientnet_b0(ctx: Ctx) -> None:
    _image_models(ctx, "efficientnet_b0")


# (model, tokens or image side): batch 1 each
TRANSFORMER_CASES = (("bert_base", 128), ("gpt2_small", 128), ("gpt2_small", 512), ("vit_b_16", 224))


def fam_transformers(ctx: Ctx) -> None:
    """BERT-base, GPT-2 small and ViT-B/16 at batch 1: real PyTorch architectures with seeded random
    weights, exported to ONNX (the torch peers run the module itself). Full sizes only: quick and
    smoke runs would spend their minutes building 86-124M-parameter models."""
    for name, n in TRANSFORMER_CASES:
        vit = name == "vit_b_16"
        config = f"b1 {n}x{n}" if vit else f"b1 seq{n}"
        params = {"batch": 1, "size" if vit else "seq": n}
        if ctx.sizes.image != 224:
            bm, why = None, "quick sizes: the transformers run only at full sizes"
        elif ctx.deadline.expired():
            bm, why = None, "suite time limit reached"
        else:
            bm, why = M.torch_transformer(name, 1, size=n) if vit else M.torch_transformer(name, 1, seq=n)
        if bm is None:
            for rt in ctx.runtimes:
                ctx.emit(name, config, rt.label, "host", "skipped", reason=why, params=params)
            continue
        run_model(ctx, name, config, bm, *ctx.sizes.model_runs, params)
        del bm
        _release()


def fam_memory(ctx: Ctx) -> None:
    from . import memory

    s = ctx.sizes.memory_image
    bm = M.resnet18(1, s)
    labels = [rt.label for rt in ctx.runtimes if rt.name in ("vkml", "onnxruntime", "torch-eager")]
    cfg = f"resnet18 b1 {s}x{s}"
    with tempfile.TemporaryDirectory() as tmp:
        model, feed = os.path.join(tmp, "resnet18.onnx"), os.path.join(tmp, "feed.npz")
        with open(model, "wb") as f:
            f.write(bm.bytes())
        np.savez(feed, **bm.feed)
        base = memory.probe("baseline", model, feed)
        if "error" in base:
            for lb in labels:
                ctx.emit("memory", cfg, lb, "host", "error", reason="baseline: " + base["error"])
            return
        ctx.emit("memory", cfg, "python+numpy", "host", "ok", vmhwm=base["vmhwm"], vmrss=base["vmrss"],
                 over_baseline=0, unit="bytes")
        for lb in labels:
            if ctx.deadline.expired():
                ctx.emit("memory", cfg, lb, "host", "skipped", reason="suite time limit reached")
                continue
            r = memory.probe(lb, model, feed)
            if "error" in r:
                ctx.emit("memory", cfg, lb, "host", "unsupported" if "ValueError" in r["error"] else "error",
                         reason=r["error"])
            else:
                ctx.emit("memory", cfg, lb, "host", "ok", vmhwm=r["vmhwm"], vmrss=r["vmrss"],
                         over_baseline=r["vmhwm"] - base["vmhwm"], unit="bytes",
                         weights_bytes=sum(t.ByteSize() for t in bm.proto.graph.initializer))


def _clock_fields(res: dict, busy) -> None:
    """The SM clock nvidia-smi saw while a row ran (GpuBusy), into the row: rows timed while the
    driver held the clock low are 2-3x slower and say so."""
    if busy is not None and busy.sm_clock is not None:
        res["sm_clock_mhz"] = busy.sm_clock
        res["sm_clock_min_mhz"] = busy.sm_clock_min


def _on_nvidia(label: str) -> bool:
    """Whether a runtime runs on the GPU that nvidia-smi describes (vkml's Vulkan devices on an
    NVIDIA machine, torch and onnxruntime on CUDA)."""
    return "vulkan" in label or "cuda" in label


def fam_threaded(ctx: Ctx) -> None:
    sz = ctx.sizes
    for name in sz.thread_models:
        bm = M.mnist(1) if name == "mnist" else M.resnet18(1, sz.image)
        for rt in ctx.runtimes:
            if ctx.deadline.expired():
                ctx.emit("threaded", name, rt.label, "host", "skipped", reason="suite time limit reached")
                continue
            try:
                runner = rt.load(bm)
            except Unavailable as e:
                ctx.emit("threaded", name, rt.label, "host", e.status, reason=e.reason)
                continue
            except Exception as e:
                ctx.emit("threaded", name, rt.label, "host", "error", reason=f"{type(e).__name__}: {e}")
                continue
            runner.host()
            for t in sz.thread_counts:
                if ctx.deadline.expired():
                    ctx.emit("threaded", f"{name} {t} threads", rt.label, "host", "skipped",
                             reason="suite time limit reached")
                    continue
                try:
                    with GpuBusy() if _on_nvidia(rt.label) else contextlib.nullcontext() as busy:
                        res = timing.threaded(runner.host, t, sz.thread_s)
                    if busy is not None and busy.percent is not None:
                        res["gpu_busy_percent"] = round(busy.percent, 1)
                        res["gpu_busy_samples"] = busy.samples
                    _clock_fields(res, busy)
                except Exception as e:
                    ctx.emit("threaded", f"{name} {t} threads", rt.label, "host", "error",
                             reason=f"{type(e).__name__}: {e}")
                    continue
                ctx.emit("threaded", f"{name} {t} threads", rt.label, "host", "ok",
                         params={"model": name, "threads": t}, **res)
            if rt.name == "vkml" and not ctx.deadline.expired():
                _threaded_dynamic_batching(ctx, bm, rt)
            if runner.batch is not None and not ctx.deadline.expired():
                n = sz.batch_calls
                cfg = f"{name} run_batch({n})"
                try:
                    res = timing.batched(lambda: runner.batch(n), n, sz.thread_s)
                    ctx.emit("threaded", cfg, rt.label, "host", "ok", params={"model": name, "batch": n}, **res)
                except Exception as e:
                    ctx.emit("threaded", cfg, rt.label, "host", "error", reason=f"{type(e).__name__}: {e}")
            del runner
            _release()


def _threaded_dynamic_batching(ctx: Ctx, bm, rt) -> None:
    """N threads each sending batch-1 requests through one vkml.DynamicBatcher (the model with
    a symbolic batch axis): what a server gets from merging its callers' requests."""
    import vkml

    sz = ctx.sizes
    name = bm.name
    try:
        sess = vkml.InferenceSession(M.symbolic_batch(bm).bytes(), devices=[rt.device])
        batcher = sess.dynamic_batcher(max_batch_size=DYNAMIC_MAX_BATCH, max_delay_ms=DYNAMIC_DELAY_MS)
        batcher.warmup(bm.feed)
    except Exception as e:
        ctx.emit("threaded", f"{name} dynamic batching", rt.label, "host", "error", reason=f"{type(e).__name__}: {e}")
        return
    feed = bm.feed
    try:
        for t in sz.thread_counts:
            cfg = f"{name} {t} threads dynamic batching"
            if ctx.deadline.expired():
                ctx.emit("threaded", cfg, rt.label, "host", "skipped", reason="suite time limit reached")
                continue
            before = batcher.stats()
            try:
                res = timing.threaded(lambda: batcher.run(None, feed), t, sz.thread_s)
            except Exception as e:
                ctx.emit("threaded", cfg, rt.label, "host", "error", reason=f"{type(e).__name__}: {e}")
                continue
            after = batcher.stats()
            runs = after["runs"] - before["runs"]
            ctx.emit("threaded", cfg, rt.label, "host", "ok",
                     params={"model": name, "threads": t, "max_batch_size": DYNAMIC_MAX_BATCH,
                             "max_delay_ms": DYNAMIC_DELAY_MS},
                     mean_rows_per_run=round((after["rows"] - before["rows"]) / max(1, runs), 2), **res)
    finally:
        batcher.close()


DYNAMIC_MAX_BATCH = 32
DYNAMIC_DELAY_MS = 0.0


def fam_first_run(ctx: Ctx) -> None:
    """A new model's first result, each in a fresh process (first_run.py): vkml cold
    (every cache empty, NVIDIA's disk cache off) and warm (its pipeline cache from the cold
    run), onnxruntime (session + first run), torch eager (module to the GPU + first call)."""
    import tempfile

    from . import first_run as fr
    from .runtimes import OnnxRuntime, Torch, Vkml

    with tempfile.TemporaryDirectory(prefix="vkml-first-run-") as tmp:
        for name, path, tv in fr.models_on_disk(list(ctx.sizes.first_run_models), tmp):
            cache = tempfile.mkdtemp(prefix="cache-", dir=tmp)
            env = fr.child_env(cache)
            cases = []
            for rt in ctx.runtimes:
                if isinstance(rt, Vkml) and rt.precision == "fp32":  # (children open plain sessions)
                    cases += [(rt.label, "cold", "vkml", rt.device, env), (rt.label, "warm", "vkml", rt.device, env)]
                elif isinstance(rt, OnnxRuntime) and rt.device == "cpu":
                    cases.append((rt.label, "cold", "onnxruntime", "cpu", fr.child_env(None)))
                elif isinstance(rt, Torch) and rt.device == "cuda" and tv:
                    cases.append((rt.label, "cold", "torch", name, fr.child_env(None)))
            for label, state, kind, device, e in cases:
                if ctx.deadline.left() <= 0:
                    ctx.emit("first_run", name, label, state, "skipped", reason="suite time limit reached")
                    continue
                res = fr.run_child(kind, path, device, e, min(240.0, max(ctx.deadline.left(), 30.0)))
                err = res.pop("error", None)
                ctx.emit("first_run", name, label, state, "error" if err else "ok",
                         **({"reason": err} if err else res))


FAMILY_FNS = {n: globals()["fam_" + n] for n in FAMILIES}


# --------------------------------------------------------------------------------------- driver
def build_parser(ap: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    ap = ap or argparse.ArgumentParser(prog="python -m vkml.benchmarks.suite", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (minutes on a laptop CPU)")
    ap.add_argument("--smoke", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--only", action="append", metavar="NAME",
                    help=f"families to run (repeatable or comma-separated): {', '.join(FAMILIES)}")
    ap.add_argument("--device", action="append", metavar="DEV",
                    help="only runtimes on these devices: cpu, cuda, vulkan, vulkan:N (repeatable)")
    ap.add_argument("--out", default=".", help="results folder (default: the current directory; the "
                    "project's own runs use bench/results, as bench/run_gpu.sh does)")
    ap.add_argument("--machine", default=None, help="name used in the result files (default: derived)")
    ap.add_argument("--time-limit", type=float, default=None, metavar="S",
                    help="stop starting new cases after S seconds (the rest are recorded as skipped)")
    ap.add_argument("--case-seconds", type=float, default=None, help="per case and mode timing budget")
    ap.add_argument("--cpu-threads", type=int, default=None, help="onnxruntime intra-op threads")
    ap.add_argument("--fp16", action="store_true",
                    help='also vkml with precision="fp16" on each GPU (vkml-fp16/vulkan:N)')
    ap.add_argument("--no-charts", action="store_true")
    ap.add_argument("-q", "--quiet", action="store_true")
    return ap


def run(args: argparse.Namespace) -> dict:
    """Run the suite; returns {"jsonl", "md", "charts", "records"}."""
    sizes = Sizes.smoke() if args.smoke else Sizes.quick() if args.quick else Sizes()
    if args.case_seconds:
        sizes.case_s = args.case_seconds
    only = [x for item in (args.only or []) for x in item.split(",") if x]
    bad = [x for x in only if x not in FAMILIES]
    if bad:
        raise ValueError(f"unknown benchmark(s) {bad}; choose from {list(FAMILIES)}")
    runtimes, missing = discover(args.cpu_threads, args.device, getattr(args, "fp16", False))
    # GPU sessions last within each case: their first run builds a plan (slow for long graphs),
    # and the cheaper runtimes should not lose their turn to it under a time limit.
    runtimes.sort(key=lambda rt: rt.name.startswith("vkml") and rt.device != "cpu")
    info = machine_info.describe(runtimes, args.cpu_threads)
    name = args.machine or info["slug"]
    date = _dt.datetime.now().strftime("%Y-%m-%d")
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, f"{name}-{date}" + ("-quick" if args.quick else "-smoke" if args.smoke else ""))
    jsonl = stem + ".jsonl"
    if os.path.exists(jsonl):
        os.remove(jsonl)
    run_id = f"{name}-{_dt.datetime.now().strftime('%Y%m%dT%H%M%S')}"
    ctx = Ctx(sizes, runtimes, missing, info, timing.Deadline(args.time_limit), jsonl, run_id,
              verbose=not args.quiet)
    say = (lambda *a: None) if args.quiet else print
    say(f"machine: {info['cpu']} ({info['cores']} cores); GPUs: {', '.join(info['gpus']) or 'none'}")
    say("runtimes: " + ", ".join(rt.label for rt in runtimes))
    for m in missing:
        say(f"  {m['runtime']}: {m['status']} ({m['reason']})")
        ctx.emit("runtimes", "present?", m["runtime"], "-", m["status"], reason=m["reason"])
    families = [f for f in FAMILIES if not only or f in only]
    t_start = time.perf_counter()
    overall = ctx.deadline
    for i, fam in enumerate(families):
        ctx.deadline = overall.share(WEIGHTS[fam] / sum(WEIGHTS[f] for f in families[i:]))
        if overall.expired():
            ctx.emit(fam, "-", "-", "-", "skipped", reason="suite time limit reached")
            continue
        say(f"== {fam}")
        t0 = time.perf_counter()
        try:
            FAMILY_FNS[fam](ctx)
        except Exception as e:  # a family's own bug must not lose the others' results
            traceback.print_exc()
            ctx.emit(fam, "-", "-", "-", "error", reason=f"{type(e).__name__}: {e}")
        say(f"   ({time.perf_counter() - t0:.1f} s)")
    from . import report

    md, charts, chart_note = report.write(ctx.records, stem, with_charts=not args.no_charts)
    say(f"wrote {jsonl}\nwrote {md}")
    say(chart_note)
    say(f"total {time.perf_counter() - t_start:.0f} s")
    return {"jsonl": jsonl, "md": md, "charts": charts, "records": ctx.records}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
