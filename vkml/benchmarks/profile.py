"""Where a model's time goes: `python -m vkml bench --profile MODEL`.

CPU side: a CPU session's plan is run step by step on the calling thread with each step timed,
next to plain `session.run` timings; the difference is the runtime's own overhead (feed checks,
slot bookkeeping). GPU side: a session on the GPU is built while vkml's chunk recording is
instrumented (a recorder subclass puts vkCmdWriteTimestamp after every command and every node),
and run with the sequential executor with each unit's task timed on the host: GPU time per
chunk, node and shader, against host time per unit (submits, uploads, readbacks, CPU nodes).
It reaches into session internals (the concrete plan, its slots): when a build changes them,
the GPU part says it cannot instrument rather than guess.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np


@dataclass
class StepTime:
    index: int
    name: str
    op_type: str
    seconds: float  # median over the repeats


@dataclass
class Profile:
    model: str
    runs: int
    run_s: float  # median session.run, as a user calls it
    steps_s: float  # median of the step-by-step run's total
    steps: list[StepTime]
    gpu_device: str | None = None
    gpu: dict | None = None  # gpu_session_profile's result
    gpu_note: str = ""


# --------------------------------------------------------------------------------- host side
def host_profile(sess, feed: Mapping[str, np.ndarray], runs: int) -> tuple[float, float, list[StepTime]]:
    """(run median, step-by-step total median, per-step medians)."""
    from vkml.runtime.executor import run_step

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
    for _ in range(runs):
        t_all = time.perf_counter()
        vals = list(plan.template)
        for name, sl in plan.input_slots:
            if name in feed:
                vals[sl] = feed[name]
        for k, step in enumerate(plan.steps):
            t0 = time.perf_counter()
            run_step(plan, step, vals)
            per[k].append(time.perf_counter() - t0)
        total.append(time.perf_counter() - t_all)
    steps = [StepTime(k, st.node.name, st.node.op_type, statistics.median(per[k])) for k, st in enumerate(plan.steps)]
    return statistics.median(run_t), statistics.median(total), steps


# ---------------------------------------------------------------------------------- GPU side
_TS_CAP = 500  # vkml.vulkan allows 512 timestamps per command buffer


def _timed_recorder_class():
    from vkml.vulkan._commands import CommandRecorder

    class TimedRecorder(CommandRecorder):
        """A chunk's recorder with a timestamp at its start, after each command (labelled by the
        shader) and after each node; past the per-buffer cap only node marks are kept."""

        def __init__(self, dev, *a, **k):
            super().__init__(dev, *a, **k)
            self.n_ts = 0
            self.truncated = False
            self.mark("start")

        def mark(self, label: str, essential: bool = True) -> None:
            if self.n_ts >= (_TS_CAP if essential else _TS_CAP - 100):
                self.truncated = True
                return
            self.timestamp(label)
            self.n_ts += 1

        def dispatch(self, pipeline, buffers, push=b"", groups=1):
            super().dispatch(pipeline, buffers, push, groups)
            self.mark(f"dispatch {pipeline.shader}", False)

        def copy(self, *a, **k):
            super().copy(*a, **k)
            self.mark("copy", False)

        def fill(self, *a, **k):
            super().fill(*a, **k)
            self.mark("fill", False)

    return TimedRecorder


class _Instrumented:
    """While active, the command buffers vkml records for session chunks carry timestamps (the
    recorder class and the per-node record hook are swapped; both are restored on exit)."""

    def __enter__(self):
        from vkml.runtime import slots
        from vkml.runtime import _fastrun  # noqa: F401  cimports CommandRecorder's C type: import it before the swap
        from vkml.vulkan import _commands

        self.mods = (_commands, slots)
        self.saved = (_commands.CommandRecorder, slots._record_node)
        Timed = _timed_recorder_class()
        record_node = self.saved[1]

        def timed_record_node(rec, node, *a, **k):
            record_node(rec, node, *a, **k)
            if isinstance(rec, Timed):
                rec.mark(f"node {node.name}\x00{node.op_type}")

        _commands.CommandRecorder = Timed
        slots._record_node = timed_record_node
        return self

    def __exit__(self, *exc):
        (_commands, slots), (rec, rn) = self.mods, self.saved
        _commands.CommandRecorder = rec
        slots._record_node = rn
        return False


@dataclass
class Unit:
    index: int
    kind: str  # gpu (a chunk: one command buffer), cpu, upload, readback
    name: str
    device: str
    nodes: int
    host_s: float  # median time the calling thread spent in the unit's task
    gpu_s: float = 0.0  # gpu units: median GPU time from the chunk's first to last timestamp


def gpu_session_profile(model, feed, gpu: str, runs: int) -> dict:
    """Run a session on `gpu` (sequential executor) with timestamped chunks and timed units."""
    import vkml

    with _Instrumented():
        sess = vkml.InferenceSession(model, devices=[gpu], executor="sequential")
        sess.run(None, dict(feed))  # plans, records the chunks (instrumented) and warms up
    runner = getattr(sess, "_gpu", None)
    cp = getattr(runner, "last", None)
    if cp is None or not hasattr(cp, "fns") or not hasattr(cp, "up"):
        raise RuntimeError("this vkml build's GPU session has no concrete plan to instrument")
    units = cp.up.units
    host_t = [[] for _ in units]

    def timed(k, fn):
        def run(state):
            t0 = time.perf_counter()
            fn(state)
            host_t[k].append(time.perf_counter() - t0)
        return run

    plain = [(time.perf_counter(), sess.run(None, dict(feed)), time.perf_counter()) for _ in range(runs)]
    run_s = statistics.median(t1 - t0 for t0, _, t1 in plain)
    cp.fns = [timed(k, f) for k, f in enumerate(cp.fns)]
    gpu_t: dict[int, list[float]] = {}
    node_t: dict[tuple[str, str], list[float]] = {}
    disp_t: dict[str, list[float]] = {}
    truncated = False
    for _ in range(runs):
        sess.run(None, dict(feed))
        slot = cp.pool._free[-1] if getattr(cp.pool, "_free", None) else None
        cbs = getattr(slot, "cbs", {}) if slot is not None else {}
        for k, cb in cbs.items():
            ts = cb.timestamps()
            if len(ts) < 2:
                continue
            gpu_t.setdefault(k, []).append(ts[-1][1])
            last_node = 0.0
            for (lab, t), (_, prev) in zip(ts[1:], ts[:-1]):
                if lab.startswith("node "):
                    name, op = lab[5:].split("\x00")
                    node_t.setdefault((name, op), []).append(t - last_node)
                    last_node = t
                else:
                    disp_t.setdefault(lab, []).append(t - prev)
    for k, cb in (cbs.items() if runs else ()):
        truncated |= len(cb.timestamps()) >= _TS_CAP
    med = lambda v: statistics.median(v) if v else 0.0  # noqa: E731
    out_units = [Unit(u.index, u.kind, u.name, u.device or "cpu", len(u.nodes or ()), med(host_t[u.index]),
                      med(gpu_t.get(u.index, []))) for u in units]
    placement = sess.placement()
    return {"run_s": run_s, "units": out_units,
            "nodes": {k: med(v) for k, v in node_t.items()},
            "dispatch": {k: (len(v) // max(1, runs), sum(v) / max(1, runs)) for k, v in disp_t.items()},
            "on_cpu": [r for r in placement if r.get("device") == "cpu"], "n_nodes": len(placement),
            "truncated": truncated, "slot_found": bool(gpu_t) or not any(u.kind == "gpu" for u in units)}


# -------------------------------------------------------------------------------------- driver
def profile(model, feed: Mapping[str, np.ndarray], runs: int = 20, gpu: str | None = "auto",
            label: str | None = None) -> Profile:
    """Host profile of the CPU session; GPU profile of a session on `gpu` ("vulkan:N"; "auto":
    the first Vulkan device vkml lists; None: skip)."""
    import vkml

    sess = vkml.InferenceSession(model, devices=["cpu"], executor="sequential")
    run_s, steps_s, steps = host_profile(sess, feed, runs)
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
            prof.gpu = gpu_session_profile(model, feed, gpu, runs)
        except Exception as e:
            prof.gpu_note = f"GPU session profile failed: {type(e).__name__}: {e}"
    return prof


def _ms(s: float) -> str:
    return f"{s * 1e3:9.3f}"


def format_profile(p: Profile, top: int = 15) -> str:
    L = [f"model: {p.model}", f"CPU session (sequential executor), median of {p.runs} runs:",
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
    L.append("  slowest steps:")
    for s in sorted(p.steps, key=lambda s: -s.seconds)[:top]:
        L.append(f"    #{s.index:<4d} {s.op_type:18s} {s.name[:40]:40s} {_ms(s.seconds)} ms")
    if p.gpu is None:
        L.append(f"GPU: skipped ({p.gpu_note or 'not requested'})" if p.gpu_device is None
                 else f"GPU {p.gpu_device}: {p.gpu_note}")
        return "\n".join(L)
    g = p.gpu
    units = g["units"]
    chunks = [u for u in units if u.kind == "gpu"]
    gpu_sum = sum(u.gpu_s for u in chunks)
    host_sum = sum(u.host_s for u in units)
    L += [f"GPU session on {p.gpu_device} (sequential executor; chunks timestamped with vkCmdWriteTimestamp), "
          f"median of {p.runs} runs:",
          f"  session.run                      {_ms(g['run_s'])} ms",
          f"  GPU time in chunks               {_ms(gpu_sum)} ms  {100 * gpu_sum / max(g['run_s'], 1e-12):5.1f}% "
          f"of session.run ({len(chunks)} chunks)",
          f"  host time in unit tasks          {_ms(host_sum)} ms (submits, uploads, readback waits+copies, "
          f"CPU nodes)",
          f"  rest (feed checks, plan lookup, slot, outputs) {_ms(max(g['run_s'] - host_sum, 0))} ms",
          f"  nodes on the CPU: {len(g['on_cpu'])}/{g['n_nodes']}"]
    reasons: dict[str, int] = {}
    for r in g["on_cpu"]:
        key = f"{r.get('op')}: {r.get('reason')}"
        reasons[key] = reasons.get(key, 0) + 1
    for r, n in sorted(reasons.items(), key=lambda kv: -kv[1])[:top]:
        L.append(f"    {n:4d} x {r[:110]}")
    L.append("  units:  kind      device     nodes    host ms     GPU ms  name")
    shown = sorted(units, key=lambda u: -max(u.host_s, u.gpu_s))[:top]
    for u in sorted(shown, key=lambda u: u.index):
        L.append(f"    #{u.index:<4d} {u.kind:8s} {u.device:9s} {u.nodes:5d} {_ms(u.host_s)} "
                 f"{_ms(u.gpu_s) if u.kind == 'gpu' else '        -'}  {u.name[:50]}")
    if len(units) > len(shown):
        L.append(f"    ... {len(units) - len(shown)} more units")
    if g["nodes"]:
        nby: dict[str, list[float]] = {}
        for (name, op), t in g["nodes"].items():
            nby.setdefault(op, []).append(t)
        L.append("  GPU time by op type:   count     GPU ms   mean µs")
        for op, v in sorted(nby.items(), key=lambda kv: -sum(kv[1]))[:top]:
            L.append(f"    {op:20s} {len(v):5d} {_ms(sum(v))} {1e6 * sum(v) / len(v):9.1f}")
        L.append("  slowest nodes on the GPU:")
        for (name, op), t in sorted(g["nodes"].items(), key=lambda kv: -kv[1])[:top]:
            L.append(f"    {op:18s} {name[:40]:40s} {_ms(t)} ms")
    if g["dispatch"]:
        L.append("  by command (per run):                    count     GPU ms   mean µs")
        for lab, (n, tot) in sorted(g["dispatch"].items(), key=lambda kv: -kv[1][1])[:top]:
            L.append(f"    {lab[:40]:40s} {n:5d} {_ms(tot)} {1e6 * tot / max(n, 1):9.1f}")
    if g["truncated"]:
        L.append(f"  (a chunk hit the timestamp cap: per-command times were dropped past {_TS_CAP - 100})")
    if not g["slot_found"]:
        L.append("  (no chunk timestamps could be read back: this build's slot pool differs)")
    L.append("  Timestamps sit between commands; commands the GPU overlaps share their time.")
    return "\n".join(L)
