"""Markdown tables and PNG charts from a run's records (also re-runnable on a .jsonl file).

    python -m vkml.benchmarks.report <machine>-<date>.jsonl

matplotlib is optional (in the `bench` extra, never a dependency of vkml itself): without it the
charts are skipped and the report says so.
"""
from __future__ import annotations

import json
import os
import sys
from collections import OrderedDict


LOW_CLOCK = 0.85  # a row's median SM clock below this share of the run's highest is noted


def _fmt_s(s: float) -> str:
    return f"{s * 1e6:.1f} µs" if s < 1e-3 else f"{s * 1e3:.2f} ms" if s < 1 else f"{s:.2f} s"


def _cell(r: dict) -> str:
    if r["status"] != "ok":
        return r["status"]
    if r["benchmark"] == "memory":
        return f"+{r['over_baseline'] / 2**20:.0f} MiB (peak {r['vmhwm'] / 2**20:.0f})"
    if r["benchmark"] == "chain_add_fit":
        return f"{r['slope_us_per_op']:.3f} µs/op ({r['intercept_us']:+.1f} µs)"
    if r["benchmark"] == "first_run":
        pipes = f", {r['pipelines']} pipelines" if "pipelines" in r else ""
        return f"first result {_fmt_s(r['first_result_s'])}{pipes}; steady {r['steady_median_ms']:.3g} ms"
    if r["benchmark"] == "threaded":
        s = f"{r['throughput']:.1f}/s"
        if "median" in r:
            s += f" (median {_fmt_s(r['median'])}, p99 {_fmt_s(r['p99'])})" if "p99" in r else \
                f" (median {_fmt_s(r['median'])})"
        if "gpu_busy_percent" in r:
            s += f", GPU busy {r['gpu_busy_percent']:.0f}%"
        return s
    s = f"{_fmt_s(r['median'])} ({_fmt_s(r['p05'])}–{_fmt_s(r['p95'])})"
    if "tflops" in r:
        s += f", {r['tflops']:.3g} TFLOPS"
    return s


def _order(items):
    return list(OrderedDict.fromkeys(items))


def markdown(records: list[dict], title: str) -> str:
    if not records:
        return f"# {title}\n\nno records\n"
    m = records[0]["machine"]
    lines = [f"# {title}", "",
             f"- CPU: {m['cpu']} ({m['cores']} cores); host {m['host']}; {m['os']}",
             f"- GPUs (vkml.devices()): {', '.join(m['gpus']) or 'none'}"]
    if m.get("nvidia_smi"):
        lines.append(f"- nvidia-smi: {'; '.join(m['nvidia_smi'])}")
    lines.append("- versions: " + ", ".join(f"{k} {v}" for k, v in m["versions"].items())
                 + (f"; git {m['git']}" if m.get("git") else ""))
    if m.get("env"):
        lines.append("- environment: " + ", ".join(f"{k}={v}" for k, v in m["env"].items()))
    lines += ["", "Cells: median (p05–p95) per run; `host` = NumPy in → NumPy out, `resident` = inputs "
              "and outputs stay on the device (I/O binding, CUDA tensors). A runtime that cannot run a "
              "case shows its status; the reasons are listed under each table.", ""]
    absent = [r for r in records if r["benchmark"] == "runtimes"]
    if absent:
        lines.append("Runtimes not in this run:")
        lines += [f"- {r['runtime']}: {r['status']} ({r['reason']})" for r in absent]
        lines.append("")
    # NVIDIA's clock governor can hold the SM clock low for seconds (vkml/benchmarks/gpu_busy.py):
    # rows timed well below the run's highest clock say so under their table
    top = max((r["sm_clock_mhz"] for r in records if r.get("sm_clock_mhz")), default=None)
    for bench in _order(r["benchmark"] for r in records if r["benchmark"] != "runtimes"):
        rs = [r for r in records if r["benchmark"] == bench]
        rts = sorted(_order(r["runtime"] for r in rs if r["runtime"] != "-"),
                     key=lambda n: not n.startswith("vkml"))  # vkml's columns first (stable)
        rows = _order((r["config"], r["mode"]) for r in rs if r["runtime"] != "-")
        lines += [f"## {bench}", ""]
        if rows:
            lines.append("| config | mode | " + " | ".join(rts) + " |")
            lines.append("|---|---|" + "---|" * len(rts))
            for cfg, mode in rows:
                cells = []
                for rt in rts:
                    hit = [r for r in rs if r["runtime"] == rt and r["config"] == cfg and r["mode"] == mode]
                    cells.append(_cell(hit[0]) if hit else "")
                lines.append(f"| {cfg} | {mode} | " + " | ".join(cells) + " |")
            lines.append("")
        notes = _order(f"{r['runtime']}: {r['status']}: {r.get('reason', '')}" for r in rs
                       if r["status"] != "ok" and r.get("reason"))
        notes += _order(f"{r['runtime']} {r['config']} {r['mode']}: {r['note']}" for r in rs if r.get("note"))
        notes += [f"{r['runtime']} {r['config']} {r['mode']}: timed at an SM clock of {r['sm_clock_mhz']:.0f} MHz "
                  f"(median; min {r['sm_clock_min_mhz']:.0f}), below this run's highest {top:.0f} MHz"
                  for r in rs if top and r.get("sm_clock_mhz") and r["sm_clock_mhz"] < LOW_CLOCK * top]
        if notes:
            lines += [f"- {n}" for n in notes] + [""]
    return "\n".join(lines) + "\n"


def charts(records: list[dict], stem: str) -> tuple[list[str], str]:
    """One PNG per benchmark family; ([paths], note)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as e:
        return [], f"charts skipped: matplotlib not importable ({type(e).__name__}: {e})"
    ok = [r for r in records if r["status"] == "ok"]
    runtimes = _order(r["runtime"] for r in ok)
    palette = plt.get_cmap("tab10" if len(runtimes) <= 10 else "tab20")

    def color(rt: str):
        return palette(runtimes.index(rt) % palette.N)

    paths = []
    for bench in _order(r["benchmark"] for r in ok):
        rs = [r for r in ok if r["benchmark"] == bench]
        fig, ax = plt.subplots(figsize=(9, 5))
        if bench == "chain_add":
            for key in _order((r["runtime"], r["mode"]) for r in rs):
                pts = sorted((r["params"]["n"], r["median"]) for r in rs if (r["runtime"], r["mode"]) == key)
                ax.plot([p[0] for p in pts], [p[1] * 1e6 for p in pts], marker="o", label=" ".join(key),
                        color=color(key[0]), linestyle="--" if key[1] == "resident" else "-")
            ax.set_xscale("log"), ax.set_yscale("log")
            ax.set_xlabel("chained Add nodes (N)"), ax.set_ylabel("median latency (µs)")
        elif bench == "threaded":
            for key in _order((r["runtime"], r["params"]["model"]) for r in rs):
                pts = sorted((r["params"]["threads"], r["throughput"]) for r in rs
                             if (r["runtime"], r["params"]["model"]) == key)
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"{key[0]} {key[1]}",
                        color=color(key[0]), linestyle="--" if key[1] != "mnist" else "-")
            ax.set_xscale("log", base=2), ax.set_yscale("log")
            ax.set_xlabel("threads on one session"), ax.set_ylabel("runs / s")
        else:
            metric, label, log = _metric(bench, rs)
            series = _order((r["runtime"], r["mode"]) for r in rs)
            cfgs = _order(r["config"] for r in rs)
            width = 0.8 / max(1, len(series))
            for k, key in enumerate(series):
                xs, ys, lo, hi = [], [], [], []
                for i, c in enumerate(cfgs):
                    hit = [r for r in rs if (r["runtime"], r["mode"]) == key and r["config"] == c]
                    if hit:
                        v = metric(hit[0])
                        xs.append(i + (k - (len(series) - 1) / 2) * width)
                        ys.append(v)
                        if metric is _latency_ms and "p05" in hit[0]:
                            lo.append(v - hit[0]["p05"] * 1e3), hi.append(hit[0]["p95"] * 1e3 - v)
                err = [lo, hi] if lo and len(lo) == len(ys) else None
                ax.bar(xs, ys, width, yerr=err, label=" ".join(key), capsize=2, color=color(key[0]),
                       hatch="//" if key[1] == "resident" else None, edgecolor="white")
            ax.set_xticks(range(len(cfgs)), cfgs, rotation=15)
            ax.set_ylabel(label)
            if log:
                ax.set_yscale("log")
        ax.set_title(f"{bench} — {rs[0]['machine']['slug']}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        path = f"{stem}-{bench}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        paths.append(path)
    return paths, f"wrote {len(paths)} charts ({stem}-*.png)"


def _latency_ms(r):
    return r["median"] * 1e3


def _metric(bench: str, rs: list[dict]):
    if bench == "memory":
        return (lambda r: r["over_baseline"] / 2**20), "peak RSS over python+numpy (MiB)", False
    if bench == "chain_add_fit":
        return (lambda r: r["slope_us_per_op"]), "µs per Add (least-squares slope)", False
    if bench in ("matmul", "mlp") and all("tflops" in r for r in rs):
        return (lambda r: r["tflops"]), "TFLOPS (higher is better)", True
    return _latency_ms, "median latency (ms), p05–p95 bars", True


def write(records: list[dict], stem: str, with_charts: bool = True):
    """Write <stem>.md and the charts; returns (md path, chart paths, note)."""
    title = f"vkml benchmarks — {os.path.basename(stem)}"
    md = stem + ".md"
    paths, note = charts(records, stem) if with_charts else ([], "charts skipped (--no-charts)")
    text = markdown(records, title)
    if paths:
        text += "\n## Charts\n\n" + "\n".join(f"![{os.path.basename(p)}]({os.path.basename(p)})" for p in paths) + "\n"
    else:
        text += f"\n{note}\n"
    with open(md, "w") as f:
        f.write(text)
    return md, paths, note


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or not argv[0].endswith(".jsonl"):
        print(__doc__)
        return 2
    with open(argv[0]) as f:
        records = [json.loads(l) for l in f if l.strip()]
    md, paths, note = write(records, argv[0][:-len(".jsonl")])
    print(f"wrote {md}; {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
