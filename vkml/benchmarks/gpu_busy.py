"""How busy the NVIDIA GPU was while a benchmark ran: nvidia-smi's utilization.gpu (the share
of time in which a kernel was running, as the driver samples it), polled every 100 ms from a
child process. Used by the threaded family to tell "the GPU is saturated" from "the host side
stops scaling" (issue #14). Without nvidia-smi (lavapipe, other vendors) it measures nothing.

    with GpuBusy() as busy:
        ...
    busy.percent   # mean of the samples after the first 300 ms, or None
"""
from __future__ import annotations

import shutil
import subprocess
import threading
import time


class GpuBusy:
    SKIP_S = 0.3  # the first samples still describe the time before the benchmark

    def __init__(self, index: int = 0):
        self.index = index
        self.percent: float | None = None
        self.samples = 0
        self._proc = None
        self._vals: list[tuple[float, float]] = []
        self._reader = None

    def __enter__(self) -> "GpuBusy":
        exe = shutil.which("nvidia-smi")
        if exe is None:
            return self
        try:
            self._proc = subprocess.Popen([exe, "-i", str(self.index), "--query-gpu=utilization.gpu",
                                           "--format=csv,noheader,nounits", "-lms", "100"],
                                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        except OSError:
            self._proc = None
            return self
        self._t0 = time.perf_counter()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        for line in self._proc.stdout:
            try:
                self._vals.append((time.perf_counter() - self._t0, float(line.strip())))
            except ValueError:
                pass

    def __exit__(self, *exc) -> bool:
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
            self._reader.join(timeout=5)
            vals = [v for t, v in self._vals if t >= self.SKIP_S]
            self.samples = len(vals)
            self.percent = sum(vals) / len(vals) if vals else None
        return False
