"""How busy the NVIDIA GPU was while a benchmark ran, and at what clock: nvidia-smi's
utilization.gpu (the share of time in which a kernel was running, as the driver samples it) and
clocks.sm, polled every 100 ms from a child process. The threaded family uses the first to tell
"the GPU is saturated" from "the host side stops scaling" (issue #14); every GPU row records the
second, because NVIDIA's clock governor holds the SM clock at 675-765 MHz for seconds at a time
where it is 1980 MHz otherwise (an H200, bench/results/checks/h200-2026-12-02-gemm-clocks.txt),
and a row timed in the low state is 2-3x slower. Without nvidia-smi (lavapipe, other vendors) it
measures nothing.

    with GpuBusy() as busy:
        ...
    busy.percent     # mean utilization of the samples after the first 300 ms, or None
    busy.sm_clock    # median SM clock (MHz) of the samples, or None; busy.sm_clock_min
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
        self.sm_clock: float | None = None
        self.sm_clock_min: float | None = None
        self.samples = 0
        self._proc = None
        self._vals: list[tuple[float, float, float]] = []
        self._reader = None

    def __enter__(self) -> "GpuBusy":
        exe = shutil.which("nvidia-smi")
        if exe is None:
            return self
        try:
            self._proc = subprocess.Popen([exe, "-i", str(self.index), "--query-gpu=utilization.gpu,clocks.sm",
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
            parsed = parse_sample(line)
            if parsed is not None:
                self._vals.append((time.perf_counter() - self._t0, *parsed))

    def __exit__(self, *exc) -> bool:
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
            self._reader.join(timeout=5)
            late = [(u, c) for t, u, c in self._vals if t >= self.SKIP_S]
            self.samples = len(late)
            self.percent = sum(u for u, _ in late) / len(late) if late else None
            # the clock from every sample: a short row has few after SKIP_S
            clocks = sorted(c for _, _, c in self._vals)
            if clocks:
                self.sm_clock = float(clocks[len(clocks) // 2])
                self.sm_clock_min = float(clocks[0])
        return False


def parse_sample(line: str) -> tuple[float, float] | None:
    """(utilization %, SM clock MHz) from one line of nvidia-smi's "utilization.gpu,clocks.sm"
    in csv,noheader,nounits form; None for anything else (a warning, "[N/A]")."""
    parts = [p.strip() for p in line.split(",")]
    if len(parts) != 2:
        return None
    try:
        return float(parts[0]), float(parts[1])
    except ValueError:
        return None
