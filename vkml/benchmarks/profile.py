"""Where a model's time goes: `python -m vkml bench --profile MODEL`.

Host side: the session's plan is run step by step on the calling thread with each step timed,
next to plain `session.run` timings; the difference is the runtime's own overhead (feed checks,
slot bookkeeping, scheduling). GPU side: every node that has a GPU kernel is recorded alone in a
command buffer on this model's real inputs, with vkCmdWriteTimestamp around the node and around
each of its dispatches (copies and fills too), and submitted repeatedly: GPU time per node and per
dispatch, and the host's record-free submit+wait cost around it. This times the kernels, not a
session's GPU chunks: sessions do not run on GPUs in this build (see `session_gpu_note`).
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np


@dataclass
class StepTime:
    index: int
    name: str
    op_type: str
    seconds: float  # median over the repeats


@dataclass
class GpuNode:
    name: str
    op_type: str
    status: str  # "ok", or why it stays on the CPU
    gpu_s: float = 0.0  # median GPU time between the node's first and last timestamp
    wall_s: float = 0.0  # median host submit + wait for the node's command buffer
    cpu_s: float = 0.0  # the NumPy step's median, for comparison
    dispatches: list[tuple[str, float]] = field(default_factory=list)  # (shader, GPU s)


@dataclass
class Profile:
    model: str
    runs: int
    run_s: float  # median session.run, as a user calls it
    steps_s: float  # median of the step-by-step run's total
    steps: list[StepTime]
    gpu_device: str | None = None
    gpu_nodes: list[GpuNode] = field(default_factory=list)
    gpu_note: str = ""
    session_gpu_note: str = ""


# --------------------------------------------------------------------------------- host side
def host_profile(sess, feed: Mapping[str, np.ndarray], runs: int) -> tuple[float, float, list[StepTime], dict]:
    """(run median, step-by-step total median, per-step medians, the values of the last run)."""
    from vkml.executor import run_step

    plan = getattr(sess, "_plan", None)
    if plan is None or not hasattr(plan, "steps"):
        raise RuntimeError("this vkml build's session has no step plan (sess._plan) to profile")
    sess.run(None, dict(feed))  # warm-up: lazy imports, caches
    run_t = []
    for _ in range(runs):
        t0 = time.perf_counter()
        sess.run(None, dict(feed))
        run_t.append(time.perf_counter() - t0)
    per = [[] for _ in plan.steps]
    total = []
    vals: list[Any] = []
    for _ in range(runs):
        t_all = time.perf_counter()
        vals = list(plan.template)
        for name, sl in plan.input_slots:
            if name in feed:
                vals[sl] = feed[name]
        for k, step in enumerate(plan.steps):
            t0 = time.perf_counter()
            run_step(plan, step, vals, free=False)  # keep every value: the GPU side replays them
            per[k].append(time.perf_counter() - t0)
        total.append(time.perf_counter() - t_all)
    steps = [StepTime(k, st.node.name, st.node.op_type, statistics.median(per[k])) for k, st in enumerate(plan.steps)]
    values = {name: vals[sl] for name, sl in plan.slots.items() if sl < len(vals) and vals[sl] is not None}
    return statistics.median(run_t), statistics.median(total), steps, values


# ---------------------------------------------------------------------------------- GPU side
def _timed_recorder_class():
    from vkml.vulkan._commands import CommandRecorder

    class TimedRecorder(CommandRecorder):
        """Puts a timestamp after every command a kernel records, labelled by what it was."""

        def dispatch(self, pipeline, buffers, push=b"", groups=1):
            super().dispatch(pipeline, buffers, push, groups)
            self.timestamp(f"dispatch {pipeline.shader}")

        def copy(self, *a, **k):
            super().copy(*a, **k)
            self.timestamp("copy")

        def fill(self, *a, **k):
            super().fill(*a, **k)
            self.timestamp("fill")

    return TimedRecorder


def gpu_profile(device_index: int, sess, values: Mapping[str, np.ndarray], steps: list[StepTime],
                runs: int) -> list[GpuNode]:
    """Each node with a GPU kernel, alone in a command buffer on its real inputs."""
    import vkml.vulkan as vk
    from vkml.kernels import TensorSpec, get_kernel
    from vkml.vulkan.tensor import DeviceTensor

    dev = vk.device(device_index)
    Rec = _timed_recorder_class()
    graph = sess.model.graph
    consts = set(graph.constants)
    out: list[GpuNode] = []
    for st, node in zip(steps, (s.node for s in sess._plan.steps)):
        kernel = get_kernel(node.op_type) if node.domain in ("", "ai.onnx") else None
        row = GpuNode(node.name, node.op_type, "ok", cpu_s=st.seconds)
        out.append(row)
        if kernel is None:
            row.status = "no GPU kernel"
            continue
        ins = [values.get(n) if n else None for n in node.inputs]
        if any(n and v is None for n, v in zip(node.inputs, ins)):
            row.status = "input not available"
            continue
        if any(v is not None and not isinstance(v, np.ndarray) for v in ins):
            row.status = "non-tensor input"
            continue
        host = {i: v for i, (n, v) in enumerate(zip(node.inputs, ins)) if n in consts}
        specs = [None if v is None else TensorSpec.of(v, host.get(i)) for i, v in enumerate(ins)]
        reason = kernel.supports(dev, node.op_type, node.attrs, specs)
        if reason is not None:
            row.status = f"stays on CPU: {reason}"
            continue
        try:
            out_specs = kernel.infer(node.op_type, node.attrs, specs)
            in_t = [None if v is None else DeviceTensor.from_numpy(dev, np.ascontiguousarray(v)) for v in ins]
            if kernel.alias:
                out_t = [in_t[0].reshape(out_specs[0].shape)]
            else:
                out_t = [DeviceTensor.empty(dev, s.shape, s.dtype) for s in out_specs]
            rec = Rec(dev)
            rec.timestamp("start")
            kernel.record(rec, node.op_type, node.attrs, in_t, out_t, host)
            cb = rec.finish()
            cb.run()  # warm-up
            gpu, wall, per = [], [], None
            for _ in range(runs):
                t0 = time.perf_counter()
                cb.run()
                wall.append(time.perf_counter() - t0)
                ts = cb.timestamps()
                gpu.append(ts[-1][1] if len(ts) > 1 else 0.0)
                deltas = [(lab, t - prev) for (lab, t), (_, prev) in zip(ts[1:], ts[:-1])]
                per = [[lab, [d]] for lab, d in deltas] if per is None else \
                    [[lab, acc + [d]] for (lab, acc), (_, d) in zip(per, deltas)]
        except Exception as e:  # a kernel bug must not end the profile: say which node
            row.status = f"failed: {type(e).__name__}: {e}"
            continue
        row.gpu_s, row.wall_s = statistics.median(gpu), statistics.median(wall)
        row.dispatches = [(lab, statistics.median(v)) for lab, v in (per or [])]
    return out


# -------------------------------------------------------------------------------------- driver
def profile(model, feed: Mapping[str, np.ndarray], runs: int = 20, gpu: str | None = "auto",
            label: str | None = None) -> Profile:
    """Host profile on the CPU session; GPU kernel profile on `gpu` ("vulkan:N", "auto": the
    first Vulkan device vkml lists, None: skip)."""
    import vkml

    sess = vkml.InferenceSession(model, executor="sequential")
    run_s, steps_s, steps, values = host_profile(sess, feed, runs)
    prof = Profile(label or str(model)[:80], runs, run_s, steps_s, steps)
    gpus = [d.name for d in vkml.devices() if d.name.startswith("vulkan:")]
    if gpu == "auto":
        gpu = gpus[0] if gpus else None
        if gpu is None:
            prof.gpu_note = "no Vulkan device: " + (vkml.gpu_unavailable_reason() or "none listed")
    if gpu is not None:
        if gpu not in gpus:
            raise ValueError(f"unknown GPU {gpu!r}; vkml lists {gpus}")
        prof.gpu_device = gpu
        try:
            prof.gpu_nodes = gpu_profile(int(gpu.split(":")[1]), sess, values, steps, max(3, runs // 2))
        except Exception as e:
            prof.gpu_note = f"GPU kernel profile failed: {type(e).__name__}: {e}"
        try:
            vkml.InferenceSession(model, devices=[gpu, "cpu"])
            prof.session_gpu_note = ("sessions accept GPUs in this build, but expose no per-chunk timestamps "
                                     "yet: the per-chunk view is not available")
        except ValueError as e:
            prof.session_gpu_note = f"per-chunk session profile needs the GPU executor: {e}"
    return prof


def _ms(s: float) -> str:
    return f"{s * 1e3:9.3f}"


def format_profile(p: Profile, top: int = 15) -> str:
    L = [f"model: {p.model}", f"host (vkml cpu, sequential executor), median of {p.runs} runs:",
         f"  session.run                      {_ms(p.run_s)} ms",
         f"  step-by-step run                 {_ms(p.steps_s)} ms"]
    ops = sum(s.seconds for s in p.steps)
    L.append(f"    operators (sum of step medians){_ms(ops)} ms  {100 * ops / max(p.steps_s, 1e-12):5.1f}%")
    L.append(f"  runtime overhead (run - ops)     {_ms(max(p.run_s - ops, 0.0))} ms  "
             f"{100 * max(p.run_s - ops, 0) / max(p.run_s, 1e-12):5.1f}% of session.run "
             f"({1e6 * max(p.run_s - ops, 0) / max(1, len(p.steps)):.2f} µs per step, {len(p.steps)} steps)")
    by: dict[str, list[float]] = {}
    for s in p.steps:
        by.setdefault(s.op_type, []).append(s.seconds)
    L.append("  by op type:        count   total ms   share   mean µs")
    for op, v in sorted(by.items(), key=lambda kv: -sum(kv[1]))[:top]:
        L.append(f"    {op:18s} {len(v):5d} {_ms(sum(v))}  {100 * sum(v) / max(ops, 1e-12):5.1f}%  "
                 f"{1e6 * sum(v) / len(v):9.1f}")
    L.append(f"  slowest steps:")
    for s in sorted(p.steps, key=lambda s: -s.seconds)[:top]:
        L.append(f"    #{s.index:<4d} {s.op_type:18s} {s.name[:40]:40s} {_ms(s.seconds)} ms")
    if p.gpu_device is None:
        L.append(f"GPU: skipped ({p.gpu_note or 'not requested'})")
        return "\n".join(L)
    L.append(f"GPU {p.gpu_device}: each node's kernel alone in a command buffer, on this model's inputs "
             f"(vkCmdWriteTimestamp):")
    if p.gpu_note:
        L.append(f"  {p.gpu_note}")
    ok = [n for n in p.gpu_nodes if n.status == "ok"]
    cpu_only = [n for n in p.gpu_nodes if n.status != "ok"]
    gpu_sum, wall_sum = sum(n.gpu_s for n in ok), sum(n.wall_s for n in ok)
    L.append(f"  nodes with a GPU kernel: {len(ok)}/{len(p.gpu_nodes)}; their GPU time {_ms(gpu_sum)} ms, "
             f"host submit+wait around them {_ms(wall_sum)} ms (overhead {_ms(max(wall_sum - gpu_sum, 0))} ms), "
             f"their NumPy steps {_ms(sum(n.cpu_s for n in ok))} ms")
    if cpu_only:
        reasons: dict[str, list[str]] = {}
        for n in cpu_only:
            reasons.setdefault(f"{n.op_type}: {n.status}", []).append(n.name)
        L.append(f"  on the CPU: {sum(n.cpu_s for n in cpu_only) * 1e3:.3f} ms in {len(cpu_only)} steps")
        for r, names in sorted(reasons.items(), key=lambda kv: -len(kv[1]))[:top]:
            L.append(f"    {len(names):4d} x {r[:110]}")
    gby: dict[str, list[GpuNode]] = {}
    for n in ok:
        gby.setdefault(n.op_type, []).append(n)
    L.append("  by op type:        count     GPU ms   NumPy ms  submit+wait ms")
    for op, v in sorted(gby.items(), key=lambda kv: -sum(n.gpu_s for n in kv[1]))[:top]:
        L.append(f"    {op:18s} {len(v):5d} {_ms(sum(n.gpu_s for n in v))}  {_ms(sum(n.cpu_s for n in v))}  "
                 f"{_ms(sum(n.wall_s for n in v))}")
    disp: dict[str, list[float]] = {}
    for n in ok:
        for lab, t in n.dispatches:
            disp.setdefault(lab, []).append(t)
    if disp:
        L.append("  by dispatch:                          count     GPU ms   mean µs")
        for lab, v in sorted(disp.items(), key=lambda kv: -sum(kv[1]))[:top]:
            L.append(f"    {lab[:36]:36s} {len(v):5d} {_ms(sum(v))}  {1e6 * sum(v) / len(v):8.1f}")
    L.append("  slowest nodes on the GPU:")
    for n in sorted(ok, key=lambda n: -n.gpu_s)[:top]:
        L.append(f"    {n.op_type:18s} {n.name[:36]:36s} GPU {_ms(n.gpu_s)} ms  NumPy {_ms(n.cpu_s)} ms  "
                 f"{len(n.dispatches)} cmds")
    if p.session_gpu_note:
        L.append(f"  {p.session_gpu_note}")
    return "\n".join(L)
