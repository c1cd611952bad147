"""The machine a run measured: CPU, cores, GPUs, versions (stored with every record)."""
from __future__ import annotations

import logging
import os
import platform
import re
import shutil
import subprocess
import sys

log = logging.getLogger("vkml")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _nvidia_smi() -> list[str]:
    exe = shutil.which("nvidia-smi")
    if not exe:
        return []
    try:
        out = subprocess.run([exe, "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [l.strip() for l in out.splitlines() if l.strip()]


def _git_commit() -> str:
    """The checkout's commit when vkml runs from one (an editable install); "" for a wheel."""
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if not os.path.exists(os.path.join(repo, ".git")):  # site-packages may lie inside another repository
        return ""
    try:
        return subprocess.run(["git", "-C", repo, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def describe(runtimes, cpu_threads: int | None = None) -> dict:
    import numpy
    import vkml

    gpus = [f"{d.name}: {d.description}" for d in vkml.devices() if d.name != "cpu"]
    smi = _nvidia_smi()
    versions = {"python": sys.version.split()[0], "numpy": numpy.__version__, "vkml": vkml.__version__}
    for rt in runtimes:
        try:
            versions.setdefault(rt.name, rt.version())
        except Exception as e:  # a peer that cannot say its version is still measured
            log.debug("%s: no version (%s: %s)", rt.name, type(e).__name__, e)
    env = {k: os.environ[k] for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                                      "CUDA_VISIBLE_DEVICES") if k in os.environ}
    info = {"cpu": _cpu_model(), "cores": os.cpu_count(), "host": platform.node(), "os": platform.platform(),
            "gpus": gpus, "nvidia_smi": smi, "versions": versions, "git": _git_commit(), "env": env,
            "ort_threads": cpu_threads}
    main_gpu = smi[0].split(",")[0] if smi else next(
        (d.description for d in vkml.devices() if d.kind in ("discrete", "integrated")), None)
    info["slug"] = slug(main_gpu) if main_gpu else slug(f"{info['cpu']} {info['cores']}c")
    return info
