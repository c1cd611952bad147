"""Keeps the BLAS that NumPy loaded from oversubscribing the cores while vkml runs on the CPU.

OpenBLAS splits every GEMM above a small size over all its threads, and the caller waits for
the slowest of them. When another thread is runnable (a second run() of the same session, the
scheduler's pool, the caller's own threads, another process), a helper waits for a scheduler
tick: on a 2-core VM the mnist model's second convolution (a 16x200 by 200x196 GEMM, 0.1 ms
alone) then takes 7 to 23 ms, and two threads sharing a session run 30 times slower than one.

OpenBLAS's thread count is process-wide (openblas_set_num_threads_local is too), so vkml sets it
only while its runs are in flight and puts the process's own setting back when the last one
ends: `limiter().enter(width, big)` / `.exit(width, big)` around a run, where width is how many
threads of that run call BLAS at once and big says whether it has a GEMM worth threading
(`plan_is_big`): small GEMMs gain a few microseconds from a second thread and risk a scheduler
tick, so while only small-GEMM runs are in flight BLAS gets one thread. The policy is
VKML_CPU_BLAS_THREADS (vkml/config.py). A NumPy built on another BLAS (MKL, BLIS,
Accelerate) is left alone, with one log line.
"""
from __future__ import annotations

import ctypes
import glob
import logging
import os
import math
import threading
import time
from typing import Any

from .. import config
from ..ops import _parallel

log = logging.getLogger("vkml")

# (get, set) symbol pairs, most specific first: scipy-openblas64 (NumPy's wheels), scipy-openblas32,
# a system OpenBLAS built with 64-bit integers and its symbol suffix, a plain OpenBLAS.
_SYMBOLS = (("scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"),
            ("scipy_openblas_get_num_threads", "scipy_openblas_set_num_threads"),
            ("openblas_get_num_threads64_", "openblas_set_num_threads64_"),
            ("openblas_get_num_threads", "openblas_set_num_threads"))
# The same libraries' cblas_sgemm/cblas_dgemm, and whether their integers are 64-bit.
_GEMMS = (("scipy_cblas_sgemm64_", "scipy_cblas_dgemm64_", True), ("scipy_cblas_sgemm", "scipy_cblas_dgemm", False),
          ("cblas_sgemm64_", "cblas_dgemm64_", True), ("cblas_sgemm", "cblas_dgemm", False))


class Blas:
    """get/set of one OpenBLAS's thread count through ctypes."""

    def __init__(self, path: str, get, set_, gemm: tuple[int, int, bool] | None = None) -> None:
        self.path = path
        self._get = get
        self._set = set_
        # (cblas_sgemm's address, cblas_dgemm's, 64-bit integers): for the intra-op chunks,
        # which call it without the GIL (ops/_windowed.pyx conv_chunk); None if not exported
        self.gemm = gemm

    def get(self) -> int:
        return int(self._get())

    def set(self, n: int) -> None:
        self._set(int(n))


def _loaded_candidates() -> list[str]:
    """Paths of the OpenBLAS libraries this process has loaded (NumPy's first), else those
    beside NumPy (its wheel's numpy.libs/.dylibs) and in its config's lib directory."""
    import numpy as np

    paths: list[str] = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                p = line.split(maxsplit=5)[-1].strip()
                if "openblas" in os.path.basename(p).lower() and p not in paths:
                    paths.append(p)
    except OSError:
        pass  # not Linux: look where NumPy's wheels and its build config put the library
    root = os.path.dirname(os.path.dirname(np.__file__))
    for pattern in ("numpy.libs/*openblas*", "numpy/.dylibs/*openblas*", "numpy.libs/*openblas*.dll"):
        paths += [p for p in glob.glob(os.path.join(root, pattern)) if p not in paths]
    try:
        libdir = np.show_config(mode="dicts")["Build Dependencies"]["blas"].get("lib directory")
    except Exception as e:  # older NumPy without mode=, or a config without the entry
        log.debug("vkml: numpy's BLAS config unreadable (%s: %s)", type(e).__name__, e)
        libdir = None
    if libdir:
        paths += [p for p in glob.glob(os.path.join(libdir, "*openblas*")) if p not in paths]
    return paths


def find_blas() -> Blas | None:
    """NumPy's OpenBLAS, or None (logged once by the caller) when it has another BLAS or none."""
    for path in _loaded_candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            log.debug("vkml: cannot open %s: %s", path, e)
            continue
        for (get_name, set_name), (s_name, d_name, ilp64) in zip(_SYMBOLS, _GEMMS):
            get, set_ = getattr(lib, get_name, None), getattr(lib, set_name, None)
            if get is not None and set_ is not None:
                get.restype, get.argtypes = ctypes.c_int, []
                set_.restype, set_.argtypes = None, [ctypes.c_int]
                sg, dg = getattr(lib, s_name, None), getattr(lib, d_name, None)
                gemm = None
                if sg is not None and dg is not None:
                    gemm = (ctypes.cast(sg, ctypes.c_void_p).value, ctypes.cast(dg, ctypes.c_void_p).value, ilp64)
                return Blas(path, get, set_, gemm)
    return None


# A GEMM of fewer multiply-adds than this (0.7 ms on one core of the 2-core VM) is not worth a
# second BLAS thread: mnist's largest (627k) took 0.15 ms on one thread and 0.18 ms on two when
# the cores were free, 7 to 23 ms on two when another process held a core.
BIG_GEMM_MACS = 1 << 22
_GEMM_OPS = ("MatMul", "Gemm", "FusedMatMul")


def _gemm_macs(node, values: Any) -> float | None:
    """Multiply-adds of a Conv/MatMul-like node from its static shapes; None when unknown."""
    def shape(name):
        d = values.get(name) if name else None
        s = getattr(d, "shape", None)
        return s if s is not None and all(isinstance(x, int) for x in s) else None

    out = shape(node.outputs[0]) if node.outputs else None
    if len(node.inputs) < 2 or out is None:
        return None
    a, w = shape(node.inputs[0]), shape(node.inputs[1])
    if a is None or w is None:
        return None
    if "Conv" in node.op_type:
        return math.prod(out) * math.prod(w[1:])
    # M*K x K*N -> M*N: K**2 = |A| |B| / |out| (exact for 2-D, close enough when batched)
    k = math.sqrt(max(1, math.prod(a)) * max(1, math.prod(w)) / max(1, math.prod(out)))
    return math.prod(out) * k


def plan_is_big(plan: Any) -> bool:
    """Whether a plan has a GEMM (Conv, MatMul, Gemm) of BIG_GEMM_MACS or more, or one whose
    size is unknown before it runs (symbolic shapes): only those runs get more than one BLAS thread."""
    if plan.graph.subgraphs():
        return True  # If/Loop/Scan bodies are planned apart: assume the worst
    for st in plan.steps:
        if is_gemm(st.node):
            macs = _gemm_macs(st.node, plan.graph.values)
            if macs is None or macs >= BIG_GEMM_MACS:
                return True
    return False


def is_gemm(node) -> bool:
    return "Conv" in node.op_type or node.op_type in _GEMM_OPS


def gemm_macs(node, values: Any) -> float | None:
    """Multiply-adds of a GEMM-like node (Conv, MatMul, Gemm) from the static shapes in `values`
    (TensorDescs, or anything with a shape); None for other nodes and unknown shapes."""
    return _gemm_macs(node, values) if is_gemm(node) else None


def plan_splits(plan: Any) -> bool:
    """Whether a plan's GEMM work is worth splitting over vkml's intra-op threads: a Conv, or a
    MatMul by a 2-D matrix, big enough for two chunks (ops/_parallel.py SPLIT_MACS), and such
    ops at least half of its GEMM work, since the rest (Gemm, batched MatMuls) gets one BLAS
    thread while it runs. Unknown sizes count as big."""
    values = plan.graph.values
    split = other = 0.0
    big = False
    for st in plan.steps:
        node = st.node
        if not ("Conv" in node.op_type or node.op_type in _GEMM_OPS):
            continue
        macs = _gemm_macs(node, values) if node.op_type != "QLinearConv" else None
        macs = 2 * _parallel.SPLIT_MACS if macs is None else macs
        w = values.get(node.inputs[1]) if len(node.inputs) > 1 else None
        if node.op_type in ("Conv", "QLinearConv") or (
                node.op_type == "MatMul" and getattr(w, "shape", None) is not None and len(w.shape) == 2):
            big = big or macs >= 2 * _parallel.SPLIT_MACS
            split += macs
        else:
            other += macs
    return big and split >= other


def usable_cores() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


# How long the cap of a busier moment holds before a quieter one may raise it again (auto).
HOLD_S = 0.05


class Limiter:
    """Sets BLAS's threads while vkml's CPU runs are in flight; puts the process's back after.

    `width` is the number of threads in flight that call BLAS (the sum over runs). With policy
    "auto": one run alone gets the saved setting divided by its width; while n > 1 runs are in
    flight, the saved setting divided by n squared, at least 1; and 1 while no run in flight has
    a big GEMM. With an int, that int. OpenBLAS's threaded GEMMs called from several threads at
    once wait for each other's thread pool, and changing its thread count while others are in a
    GEMM stalls them: on the H100 box's 16 cores, resnet18 on the CPU device (its parallel plan
    two branches wide) at 2 / 4 / 8 threads made 51 / 59 / 61 runs/s with a fixed cap of 4,
    31 / 62 / 103 with a cap of 1, 46 / 53 / 44 with 8, and 30-52 / 30-40 / 96-106 with the
    former rule (the setting divided by the width, re-set at every run's start and end;
    `.scratch` probe, 2026-11-25). So under auto a cap is lowered at once when runs pile up,
    raised again only after HOLD_S without that many in flight, and the process's setting comes
    back when the last run ends. The lock is held only around the ctypes calls (about
    0.5 µs each).
    """

    def __init__(self, blas: Blas | None, policy: str | int | None, split: bool | None = None,
                 cores: int | None = None) -> None:
        self.blas = blas if policy is not None else None
        self.policy = policy
        # Whether runs that ask for it split their big convolutions over vkml's intra-op threads
        # (ops/_parallel.py) instead of BLAS's: only under auto, where vkml owns the threads.
        wanted = (policy == "auto" and config.cpu_split()) if split is None else bool(split)
        self.split = wanted and self.blas is not None and self.blas.gemm is not None
        if self.split:
            _parallel.set_gemm(*self.blas.gemm)
        self.cores = usable_cores() if cores is None else int(cores)
        self._lock = threading.Lock()
        self._width = 0
        self._runs = 0       # runs in flight
        self._big = 0        # runs in flight with a GEMM worth threading
        self._split = 0      # runs in flight that split their convolutions
        self._saved = 0      # the process's setting when the first run in flight entered
        self._current = 0    # what vkml set, 0 when it has set nothing
        self._needed = 0.0   # (auto) when the current cap was last called for

    def _cap(self) -> int:
        if self.policy == "auto":
            if not self._big or self._split:
                return 1
            if self._runs <= 1:
                return max(1, self._saved // max(1, self._width))
            return max(1, self._saved // self._runs ** 2)
        return int(self.policy)

    def _intra_width(self) -> int:
        """The intra-op threads one op of a run may use now: the cores shared by the BLAS-calling
        threads in flight while splitting runs are among them, else 1."""
        return max(1, self.cores // max(1, self._width)) if self._split else 1

    def _apply(self, now: float) -> None:
        if self._split:
            _parallel.set_width(self._intra_width())
        cap = self._cap()
        if cap == self._current:
            self._needed = now
        elif cap < self._current or not self._current or self.policy != "auto" or now - self._needed > HOLD_S:
            self.blas.set(cap)
            self._current = cap
            self._needed = now

    def enter(self, width: int = 1, big: bool = True, split: bool = False) -> None:
        """A run of `width` BLAS-calling threads starts; `big`: it has a GEMM worth threading;
        `split`: its big convolutions may split over the intra-op threads (when this limiter
        splits at all)."""
        blas = self.blas
        if blas is None:
            return
        split = split and self.split
        with self._lock:
            if self._width == 0:
                self._saved = blas.get()
            self._width += width
            self._runs += 1
            self._big += bool(big)
            self._split += split
            self._apply(time.monotonic())

    def exit(self, width: int = 1, big: bool = True, split: bool = False) -> None:
        blas = self.blas
        if blas is None:
            return
        split = split and self.split
        with self._lock:
            self._width -= width
            self._runs -= 1
            self._big -= bool(big)
            self._split -= split
            if self._width <= 0 or self._runs <= 0:
                self._width = self._runs = self._big = self._split = 0
                _parallel.set_width(1)
                if self._current and self._current != self._saved:
                    blas.set(self._saved)
                self._current = 0
                return
            # The runs left may use the cores the one that ended had (no hold: the width costs
            # nothing to change, unlike BLAS's thread count).
            _parallel.set_width(self._intra_width())
            cap = self._cap()
            if cap < self._current:  # (the last big run left: the small ones get one thread)
                blas.set(cap)
                self._current = cap


_limiter: Limiter | None = None
_limiter_lock = threading.Lock()


def limiter() -> Limiter:
    """The process's limiter, made on first use from VKML_CPU_BLAS_THREADS and NumPy's BLAS."""
    global _limiter
    lim = _limiter
    if lim is None:
        with _limiter_lock:
            lim = _limiter
            if lim is None:
                policy = config.cpu_blas_threads()
                blas = find_blas() if policy is not None else None
                if policy is not None and blas is None:
                    log.info("vkml: NumPy's BLAS is not an OpenBLAS vkml can reach; its threads are left "
                             "as they are (VKML_CPU_BLAS_THREADS has no effect)")
                lim = _limiter = Limiter(blas, policy)
    return lim


def reset() -> None:
    """Forget the limiter (tests that change VKML_CPU_BLAS_THREADS); only between runs."""
    global _limiter
    with _limiter_lock:
        _limiter = None
