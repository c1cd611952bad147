"""Every VKML_* environment variable, in one place (issue #16).

SETTINGS is the table: each variable's name, default, the rule its value follows and what it does.
Each setting is read by a function here, at the moment it is needed, so that a test can set the
variable (tests/conftest.py's vkml_env fixture) and the package sees it: nothing holds a copy in a
module attribute. docs/config.md is generated from
the table (`python tools/config_table.py`; tests/unit/test_config.py checks it is current).

A leaf: only the standard library is imported, so any layer (the Vulkan one included) may use it.

The rules, shared by the settings that follow them:
  on/off          case and surrounding blanks ignored; 0, off, no, false and none are off, any
                  other non-empty value is on; unset (or empty) is the setting's default.
  auto/off/count  "auto" (or unset), "off" (or 0 and the other off spellings), or a whole
                  number >= 1; anything else is a ValueError.
  size            bytes, with an optional unit: 1000000, 512MiB, 6GiB, 2GB (k/KiB/M/MiB/G/GiB/T/TiB
                  are powers of 1024; kB/MB/GB are powers of 1000).
  seconds         a finite number of seconds >= 0; nan, inf and negative values are errors.
"""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Setting:
    """One environment variable: its default (as a user would write it, "" for unset), the
    rule its value follows, and what it does and why one would set it."""

    name: str
    default: str
    rule: str
    doc: str


SETTINGS: dict[str, Setting] = {}


def _setting(name: str, default: str, rule: str, doc: str) -> None:
    SETTINGS[name] = Setting(name, default, rule, " ".join(doc.split()))


def _raw(name: str) -> str:
    """The variable's text ("" when unset); only for names in SETTINGS."""
    if name not in SETTINGS:
        raise KeyError(f"{name} is not a setting of vkml/config.py")
    return os.environ.get(name, "")


# ------------------------------------------------------------------ shared parsers

OFF = ("0", "off", "no", "false", "none")

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1000, "kib": 1 << 10, "m": 1 << 20, "mb": 10**6,
          "mib": 1 << 20, "g": 1 << 30, "gb": 10**9, "gib": 1 << 30, "t": 1 << 40, "tib": 1 << 40}


def parse_switch(text: str | None, default: bool) -> bool:
    """The on/off rule: `default` for unset or blank, False for an off spelling (OFF, any case),
    True for anything else."""
    s = (text or "").strip().lower()
    if not s:
        return default
    return s not in OFF


def parse_auto_off_count(name: str, text: str | None, what: str) -> str | int | None:
    """The auto/off/count rule: "auto" (blank or "auto"), None (an off spelling) or a whole
    number >= 1; anything else is a ValueError naming the variable and what the number counts."""
    raw = (text or "").strip().lower()
    if raw in ("", "auto"):
        return "auto"
    if raw in OFF:
        return None
    try:
        n = int(raw)
    except ValueError:
        n = -1
    if n < 1:
        raise ValueError(f"{name}={raw!r}: expected 'auto', 'off' or a {what} >= 1")
    return n


def parse_budget(text: str | float | int | None) -> tuple[str, float] | None:
    """("fraction", f) or ("bytes", n) from "0.5" / "6GiB" / 123; None for empty. A float in
    (0, 1] or a text like "0.5" is a fraction; sizes follow the size rule."""
    if text is None:
        return None
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        if 0 < text <= 1 and isinstance(text, float):
            return ("fraction", float(text))
        if text <= 0:
            raise ValueError(f"memory budget must be positive, got {text!r}")
        return ("bytes", float(int(text)))
    s = str(text).strip().lower().replace(" ", "")
    if not s:
        return None
    m = re.fullmatch(r"([0-9]*\.?[0-9]+)([a-z]*)", s)
    if not m or m.group(2) not in _UNITS:
        raise ValueError(f"cannot parse memory budget {text!r}: use a fraction like 0.5 or a size like 6GiB")
    value = float(m.group(1))
    if m.group(2) == "" and "." in m.group(1) and value <= 1:
        if value <= 0:
            raise ValueError(f"memory budget must be positive, got {text!r}")
        return ("fraction", value)
    n = value * _UNITS[m.group(2)]
    if n <= 0:
        raise ValueError(f"memory budget must be positive, got {text!r}")
    return ("bytes", float(int(n)))


def parse_size(name: str, text: str | None, default: int) -> int:
    """The size rule: bytes from "256MiB" / "6GiB" / "1000000"; `default` for blank; a fraction
    or anything else is a ValueError naming the variable."""
    s = (text or "").strip()
    if not s:
        return default
    try:
        kind, value = parse_budget(s)
    except (TypeError, ValueError):
        kind = None
    if kind != "bytes":
        raise ValueError(f"{name}={s!r}: expected a size such as 256MiB")
    return int(value)


def parse_word(name: str, words, off: str | None = None) -> str:
    """The one-of-the-words rule for variable `name`: its value among `words` (case and blanks
    ignored), words[0] when unset or empty, `off` for an off spelling where the setting has
    one; anything else is a ValueError naming the variable and the words."""
    v = (_raw(name) or words[0]).strip().lower()
    if off is not None and v in OFF:
        return off
    if v not in words:
        raise ValueError(f"{name}={v!r}: expected one of {', '.join(words)}")
    return v


def parse_seconds(name: str, text: str | None, default: float) -> float | None:
    """The seconds rule: `default` for blank, None for 0 (no limit), else a finite number >= 0;
    nan, inf and negative numbers are mistakes, not "no limit" (0 says that)."""
    s = (text or "").strip()
    if not s:
        return default
    try:
        v = float(s)
    except ValueError:
        v = math.nan
    if not (math.isfinite(v) and v >= 0):
        raise ValueError(f"{name} must be a finite number of seconds >= 0 (0: wait forever), not {s!r}")
    return None if v == 0 else v


def parse_whole(text: str, lo: int, hi: int) -> int | None:
    """A whole number (decimal digits) from lo to hi, or None when `text` is not one."""
    s = text.strip()
    if not s.isdigit():
        return None
    n = int(s)
    return n if lo <= n <= hi else None


def parse_ints(text: str, count: int) -> tuple[int, ...] | None:
    """`count` comma-separated integers, or None when `text` is not that."""
    try:
        values = tuple(int(x) for x in text.split(","))
    except ValueError:
        return None
    return values if len(values) == count else None


# ------------------------------------------------------------------ CPU and scheduling

_setting("VKML_NUM_THREADS", "", "whole number", """
    Threads of the scheduler's pool (vkml/runtime/_sched.pyx), from 1 to the scheduler's maximum; unset:
    the number of usable cores. Read once, when vkml.runtime._sched is imported. Set it to share a
    machine with other work, or to measure scaling.""")


def num_threads(limit: int) -> int:
    """The scheduler pool's size from VKML_NUM_THREADS, 1 to `limit`; 0 when unset (the default)."""
    v = _raw("VKML_NUM_THREADS").strip()
    if not v:
        return 0
    try:
        n = int(v)
    except ValueError:
        n = 0
    if not 1 <= n <= limit:
        raise ValueError(f"VKML_NUM_THREADS must be an integer from 1 to {limit}, got {v!r}")
    return n


_setting("VKML_CPU_BLAS_THREADS", "auto", "auto/off/count", """
    How many threads the BLAS that NumPy loaded (OpenBLAS) may use while vkml's CPU runs are in
    flight; the process's own setting is put back when the last one ends (vkml/runtime/blas.py).
    auto: one run alone gets the process's setting divided by its BLAS-calling threads (the
    scheduler pool's width for a parallel plan); n > 1 concurrent runs get the setting divided by
    n squared, at least 1 (OpenBLAS's threaded GEMMs called from several threads wait for each
    other), lowered at once and raised only after 50 ms with fewer runs in flight; 1 while no run
    has a big GEMM. N: N while runs are in flight.
    off: never touch BLAS's threads. Read when the limiter is first made.""")


def cpu_blas_threads() -> str | int | None:
    """"auto", a fixed thread count, or None (leave BLAS alone), from VKML_CPU_BLAS_THREADS."""
    return parse_auto_off_count("VKML_CPU_BLAS_THREADS", _raw("VKML_CPU_BLAS_THREADS"), "thread count")


_setting("VKML_CPU_SPLIT", "1", "on/off", """
    Big convolutions and MatMuls by 2-D weights of CPU runs split over vkml's own intra-op threads
    (vkml/ops/_parallel.py), one chunk of output rows or channels per core a run may use: the
    cores divided by the BLAS-calling threads of the runs in flight, with BLAS at one thread
    meanwhile. OpenBLAS's own threads serve one GEMM at a time, so concurrent runs left most
    cores idle. Only plans whose split ops are at least half their GEMM work split (their Gemms
    and batched MatMuls get one BLAS thread meanwhile). Applies under VKML_CPU_BLAS_THREADS=auto;
    0 keeps BLAS's threads for every GEMM. Read when the limiter is first made.""")


def cpu_split() -> bool:
    """Whether CPU runs split big convolutions and weight MatMuls over vkml's intra-op threads
    (VKML_CPU_SPLIT)."""
    return parse_switch(_raw("VKML_CPU_SPLIT"), True)


_setting("VKML_CPU_NATIVE", "1", "on/off", """
    A CPU session runs each input signature, from its first run, as one native program without
    the GIL (vkml/runtime/cpuprog.py): when every step is one the program knows and every
    tensor float32. Big convolutions and GEMMs split over the program's own threads. 0 keeps
    every run in Python. Read when a session is made.""")


def cpu_native() -> bool:
    """Whether CPU plans run as native programs where they lower (VKML_CPU_NATIVE)."""
    return parse_switch(_raw("VKML_CPU_NATIVE"), True)


_setting("VKML_CPU_GEMM", "auto", "one of the words listed", """
    auto, avx512, avx2 or blas: the GEMM kernel of the native programs' convolutions
    (vkml/include/cpu_gemm.h). auto takes
    the best the CPU has (AVX-512F, else AVX2+FMA; elsewhere NumPy's cblas_sgemm); avx2 stays
    below AVX-512 where the CPU has it; blas keeps NumPy's cblas_sgemm (the weights then are not
    packed). Read when a program is made.""")

_GEMM_KERNELS = {"auto": -1, "avx512": 2, "avx2": 1, "blas": 0}


def cpu_gemm() -> str:
    """The native programs' convolution GEMM (VKML_CPU_GEMM): auto, avx512, avx2 or blas."""
    return parse_word("VKML_CPU_GEMM", tuple(_GEMM_KERNELS))


def cpu_gemm_kernel() -> int:
    """VKML_CPU_GEMM as _cpuprog's kernel-set number: -1 (auto), 2 (AVX-512), 1 (AVX2), 0 (blas)."""
    return _GEMM_KERNELS[cpu_gemm()]


_setting("VKML_CPU_RUNS", "auto", "auto/off/count", """
    How many run() calls of one CPU session execute at once; the others wait (without the GIL)
    until one ends. auto: 1 for a plan whose GEMMs are all small (blas.plan_is_big): such a run
    is mostly per-node Python under the GIL, and runs that interleave hand the GIL back and forth
    at every NumPy call, so two threads got half one thread's throughput; no limit for plans with
    big GEMMs, whose NumPy calls overlap. N: at most N, whatever the plan. off: no limit.""")


def cpu_runs() -> str | int | None:
    """"auto", a cap on one CPU session's concurrent runs, or None (no cap), from VKML_CPU_RUNS."""
    return parse_auto_off_count("VKML_CPU_RUNS", _raw("VKML_CPU_RUNS"), "run count")


# ------------------------------------------------------------------ GPU runs

_setting("VKML_FAST_RUN", "1", "on/off", """
    Plans that are only uploads, GPU chunks and readbacks on one GPU run on the native path
    (vkml/runtime/_fastrun.pyx: the GIL is taken only to accept the feeds and hand back the
    outputs). 0 sends them the generic way, unit by unit, for comparisons. Read when a plan is
    made (a session's first run of an input shape).""")


def fast_runs() -> bool:
    """Whether GPU plans may take the native run path (VKML_FAST_RUN)."""
    return parse_switch(_raw("VKML_FAST_RUN"), True)


GPU_RUNS_HOST_US = 50.0  # VKML_GPU_RUNS=auto: a run in flight per this many microseconds of a lone run

_setting("VKML_GPU_RUNS", "auto", "auto/off/count", f"""
    How many runs of one GPU plan on the native path (VKML_FAST_RUN) execute at once; the others
    wait without the GIL. Many threads each running a short model hand the GIL and the cores
    back and forth until they do less together than one thread alone (H100, mnist, 16 threads:
    7-10k runs/s against 13-14k from one; 13-19k with 2-4 runs at once). auto: one run in flight
    per {GPU_RUNS_HOST_US:g} us of the plan's fastest run among its first runs, at least 2, at most
    the session's max_slots (resnet18 at batch 1, ~0.7 ms: no gate; mnist, ~70 us: 2). N: at most
    N. off: no limit beyond max_slots. Read when a plan is made.""")


def gpu_runs() -> str | int | None:
    """"auto", a cap on one GPU plan's concurrent native runs, or None (no cap), from VKML_GPU_RUNS."""
    return parse_auto_off_count("VKML_GPU_RUNS", _raw("VKML_GPU_RUNS"), "run count")


_setting("VKML_ASYNC_WAIT", "1", "on/off", """
    Readbacks wait for the GPU on a waiter thread (vkml/runtime/_gpuwait.pyx) instead of a blocked pool
    worker. 0 turns that off, for comparisons. Read when a plan is made (a session's first run of an
    input shape).""")


def async_waits() -> bool:
    """Whether readbacks wait on the waiter thread (VKML_ASYNC_WAIT)."""
    return parse_switch(_raw("VKML_ASYNC_WAIT"), True)


_setting("VKML_FUSE", "1", "on/off", """
    Elementwise fusion of GPU plans (vkml/compile/fusion.py): a chain of float32 elementwise ops becomes
    one dispatch. 0 turns it off, for comparisons. Read when a session is made.""")


def fuse() -> bool:
    """Whether GPU plans fuse elementwise chains (VKML_FUSE)."""
    return parse_switch(_raw("VKML_FUSE"), True)


DEFAULT_GPU_TIMEOUT = 300.0  # seconds; a run's GPU work that takes longer is reported

_setting("VKML_GPU_TIMEOUT", "300", "seconds", """
    Seconds a session run waits for its GPU work before it gives up with a TimeoutError naming
    the device (0 waits forever): a hung GPU or driver must not hang the caller. The run's slot
    is retired and freed once the GPU is done with it; the session stays usable. Read by every
    run (a bad value is an error when a GPU session is made).""")


_gpu_timeout_parsed: tuple[str, float | None] = ("", DEFAULT_GPU_TIMEOUT)  # (text, its value)
GPU_TIMEOUT_VARIABLE = "VKML_GPU_TIMEOUT"  # runtime/_fastrun.pyx watches its text with getenv


def gpu_timeout() -> float | None:
    """Seconds a session run waits for the GPU (VKML_GPU_TIMEOUT), None for no limit. Every GPU
    run asks, so the text's value is kept until the text changes (a bad text raises each time)."""
    global _gpu_timeout_parsed
    text = _raw(GPU_TIMEOUT_VARIABLE)
    last = _gpu_timeout_parsed
    if text == last[0]:
        return last[1]
    value = parse_seconds("VKML_GPU_TIMEOUT", text, DEFAULT_GPU_TIMEOUT)
    _gpu_timeout_parsed = (text, value)
    return value


# ------------------------------------------------------------------ Vulkan instance and devices

_setting("VKML_VULKAN", "1", "on/off", """
    0: no Vulkan at all; vkml runs on the CPU only and vkml.vulkan.unavailable_reason() says
    why. For machines whose driver misbehaves, or to compare with the CPU.""")


def vulkan_disabled_by() -> str | None:
    """The value of VKML_VULKAN when it turns Vulkan off (for the reason's text), else None."""
    raw = _raw("VKML_VULKAN")
    return None if parse_switch(raw, True) else raw


_setting("VKML_VULKAN_LIBRARY", "libvulkan.so.1", "path", """
    The Vulkan loader to dlopen instead of libvulkan.so.1: a loader outside the library path, or
    another build of it.""")


def vulkan_library() -> str:
    """The Vulkan loader to load (VKML_VULKAN_LIBRARY)."""
    return _raw("VKML_VULKAN_LIBRARY") or "libvulkan.so.1"


_setting("VKML_VALIDATION", "0", "on/off", """
    1: the Khronos validation layer with synchronization validation; every warning or error it
    reports becomes a vkml.vulkan.ValidationError. For debugging and CI; slow.""")


def validation() -> bool:
    """Whether the Khronos validation layer is on (VKML_VALIDATION)."""
    return parse_switch(_raw("VKML_VALIDATION"), False)


_setting("VKML_VALIDATION_COOPMAT", "0", "on/off", """
    1: keep VK_KHR_cooperative_matrix on under VKML_VALIDATION. By default it is left off there,
    because the validation layer of Debian 12 / Ubuntu 24.04 (1.3.239) predates the extension
    and rejects its feature struct at vkCreateDevice; set this with a newer layer.""")


def validation_coopmat() -> bool:
    """Whether cooperative matrices stay on under validation (VKML_VALIDATION_COOPMAT)."""
    return parse_switch(_raw("VKML_VALIDATION_COOPMAT"), False)


_setting("VKML_SPLIT_DEVICE", "1", "whole number", """
    N from 1 to 16: list every physical device N times, so one device opens as N independent
    logical devices (own queue, memory, timeline) and multi-GPU paths run on one GPU or on CI
    (vulkan:k becomes vulkan:Nk to vulkan:Nk+N-1).""")


def split_device() -> int:
    """How many logical devices each physical device opens as (VKML_SPLIT_DEVICE), 1 to 16."""
    raw = _raw("VKML_SPLIT_DEVICE").strip()
    if not raw:
        return 1
    n = parse_whole(raw, 1, 16)
    if n is None:
        raise ValueError(f"VKML_SPLIT_DEVICE must be an integer from 1 to 16, not {raw!r}")
    return n


_setting("VKML_DISABLE", "", "comma list", """
    Device features to leave off even if supported, to test fallbacks: push_descriptor,
    mapped_memory (treat device-local memory as not host-visible: uploads go through staging),
    storage_16bit, storage_8bit, int64, fp16_arithmetic, memory_budget, cooperative_matrix,
    cooperative_matrix2 (NVIDIA's workgroup-scope GEMM, kernels/matmul_cm2.py).""")


def disabled_features() -> frozenset[str]:
    """Features to leave off: VKML_DISABLE, plus cooperative_matrix (and _matrix2) under
    validation (unless VKML_VALIDATION_COOPMAT)."""
    off = {x.strip() for x in _raw("VKML_DISABLE").split(",") if x.strip()}
    if validation() and not validation_coopmat():
        off.update(("cooperative_matrix", "cooperative_matrix2"))
    if "cooperative_matrix" in off:
        off.add("cooperative_matrix2")
    return frozenset(off)


DEFAULT_QUEUES = 4  # lanes per device (VKML_QUEUES)
MAX_QUEUES = 64

_setting("VKML_QUEUES", str(DEFAULT_QUEUES), "whole number", f"""
    Lanes per device, 1 to {MAX_QUEUES}: each lane is a queue of the device's compute family (as
    many as it offers; lanes share them beyond that) with a timeline semaphore of its own. Run
    slots take lanes in turn, so runs of different slots do not wait for each other's barriers;
    1 puts every run on one queue.""")


def queues() -> int:
    """Lanes per device (VKML_QUEUES), 1 to MAX_QUEUES."""
    text = _raw("VKML_QUEUES").strip()
    if not text:
        return DEFAULT_QUEUES
    try:
        v = int(text)
    except ValueError:
        v = 0
    if not 1 <= v <= MAX_QUEUES:
        raise ValueError(f"VKML_QUEUES={text!r}: expected a whole number of lanes from 1 to {MAX_QUEUES}")
    return v


DEFAULT_WAIT_SPIN_US = 5000.0  # on GPUs; CPU devices (lavapipe) do not spin
SHARED_SPIN_US = 100.0  # the most a wait polls while other threads poll too

_setting("VKML_WAIT_SPIN_US", "5000 (GPUs), 0 (CPU devices)", "number", """
    Microseconds a wait polls the timeline before it blocks in the driver (>= 0), when it is the
    only thread polling; while others poll too, each polls for at most 100 µs. Waking from a
    blocking wait costs 0.05-0.15 ms on NVIDIA (an interrupt, a thread wake-up; more inside a
    VM), most of a small model's run and a tenth of resnet18's; CPU devices such as lavapipe do
    not poll, their own threads need the cores. At most a quarter of the cores poll at once;
    other waiters block at once.""")


def parse_micros(name: str, text: str) -> float:
    """A number of microseconds >= 0 (a spin time)."""
    try:
        v = float(text)
    except ValueError:
        raise ValueError(f"{name} must be a number of microseconds, not {text!r}") from None
    if not v >= 0:
        raise ValueError(f"{name} must be >= 0, not {text!r}")
    return v


def wait_spin_us(device_type: str) -> float:
    """Microseconds a wait polls before blocking (VKML_WAIT_SPIN_US, or the default by type)."""
    text = _raw("VKML_WAIT_SPIN_US").strip()
    if not text:
        return 0.0 if device_type == "cpu" else DEFAULT_WAIT_SPIN_US
    return parse_micros("VKML_WAIT_SPIN_US", text)


DEFAULT_HANDOFF_SPIN_US = 100.0  # on GPUs, with HANDOFF_MIN_CPUS cores or more
HANDOFF_MIN_CPUS = 4

_setting("VKML_HANDOFF_SPIN_US", f"{DEFAULT_HANDOFF_SPIN_US:g} (GPUs, {HANDOFF_MIN_CPUS}+ cores), else 0", "number", """
    Microseconds a thread running a GPU plan on the native path spins, without the GIL, before
    it sleeps: at the plan's gate (VKML_GPU_RUNS), and when its run is done and another runner is
    in its Python part, for that runner to drop the GIL (include/run_handoff.h). Waking a sleeping
    thread costs 20-50 us on virtual machines, as much as a small model's run: with a sleeping
    hand-off, 4 threads sharing an mnist session made fewer runs than one (H200). 0: no spinning
    (the GIL is taken the usual way, gate waiters sleep at once). At most a quarter of the cores
    spin at once. CPU devices (lavapipe) and hosts with fewer cores do not spin by default.
    Read when a plan is made.""")


def handoff_spin_us(device_type: str) -> float:
    """Microseconds a native run's hand-offs spin (VKML_HANDOFF_SPIN_US, or the default)."""
    text = _raw("VKML_HANDOFF_SPIN_US").strip()
    if not text:
        return 0.0 if device_type == "cpu" or (os.cpu_count() or 1) < HANDOFF_MIN_CPUS else DEFAULT_HANDOFF_SPIN_US
    return parse_micros("VKML_HANDOFF_SPIN_US", text)


# ------------------------------------------------------------------ device memory

DEFAULT_BUDGET_FRACTION = 0.95       # of VK_EXT_memory_budget's heapBudget
DEFAULT_NO_BUDGET_FRACTION = 0.8     # of the heap size, without the extension

_setting("VKML_MEMORY_BUDGET", "0.95 of heapBudget", "fraction or size", """
    How much of a device heap vkml may hold: a fraction (0.5: of VK_EXT_memory_budget's
    heapBudget, or of the heap size without it) or a size (6GiB, 512MiB, 1000000). Default: 0.95
    of heapBudget, or 0.8 of the heap size. To leave room for other processes on the GPU;
    Device.set_memory_budget does the same from code.""")


def budget_setting() -> tuple[str, float] | None:
    """("fraction", f), ("bytes", n) or None (the default) from VKML_MEMORY_BUDGET."""
    return parse_budget(_raw("VKML_MEMORY_BUDGET"))


_setting("VKML_READBACK", "auto", "auto, map or staging", """
    How outputs come back from device memory: auto maps HOST_CACHED memory and stages through a
    copy otherwise (reads through an uncached BAR are slow); map always maps; staging always
    copies. To compare, or to work around a driver.""")


def readback_mode() -> str:
    """"auto", "map" or "staging" (VKML_READBACK)."""
    mode = (_raw("VKML_READBACK") or "auto").strip().lower() or "auto"
    if mode not in ("auto", "map", "staging"):
        raise ValueError(f"VKML_READBACK must be auto, map or staging, not {mode!r}")
    return mode


# ------------------------------------------------------------------ pipelines and shaders

_setting("VKML_PIPELINE_CACHE", "1", "on/off", """
    0: neither load nor save pipeline caches (every process compiles its pipelines again).""")


def pipeline_cache() -> bool:
    """Whether pipeline caches are loaded and saved (VKML_PIPELINE_CACHE)."""
    return parse_switch(_raw("VKML_PIPELINE_CACHE"), True)


_setting("VKML_CACHE_DIR", "$XDG_CACHE_HOME/vkml or ~/.cache/vkml", "path", """
    Where pipeline caches live. The file name holds the vendor, device and the driver's
    pipelineCacheUUID; processes sharing a file take turns through a lock file and merge each
    other's saves. Tests point it at a temporary folder.""")


def cache_dir() -> str | None:
    """Directory for pipeline caches (VKML_CACHE_DIR, else $XDG_CACHE_HOME/vkml or
    ~/.cache/vkml), or None when caching is off (VKML_PIPELINE_CACHE)."""
    if not pipeline_cache():
        return None
    explicit = _raw("VKML_CACHE_DIR")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "vkml")


DEFAULT_PIPELINE_CACHE_MAX = 256 << 20

_setting("VKML_PIPELINE_CACHE_MAX", "256MiB", "size", """
    The largest pipeline-cache file vkml writes; a bigger cache is kept in memory but not saved
    (logged). To bound the disk a cache may take.""")


def pipeline_cache_max() -> int:
    """Bytes: the largest pipeline cache file vkml writes (VKML_PIPELINE_CACHE_MAX)."""
    return parse_size("VKML_PIPELINE_CACHE_MAX", _raw("VKML_PIPELINE_CACHE_MAX"), DEFAULT_PIPELINE_CACHE_MAX)


_setting("VKML_PIPELINE_STATS", "0", "on/off", """
    1: where the device offers VK_KHR_pipeline_executable_properties, compile every pipeline
    with statistics captured, so Pipeline.statistics() reports what the driver's compiler made
    of it (on NVIDIA: registers, binary and stack size, shared and local memory;
    bench/bench_matmul.py --stats prints them). For tuning shaders: capturing may slow compiling. Read when a device
    is opened.""")


def pipeline_stats() -> bool:
    """Whether devices capture their pipelines' statistics (VKML_PIPELINE_STATS)."""
    return parse_switch(_raw("VKML_PIPELINE_STATS"), False)


_setting("VKML_SPIRV_DIR", "", "path", """
    A folder searched for `<variant>.spv` before the package's vkml/spv: to try shaders without
    reinstalling.""")


def spirv_dir() -> str | None:
    """The folder searched first for SPIR-V (VKML_SPIRV_DIR), or None."""
    return _raw("VKML_SPIRV_DIR") or None


# ------------------------------------------------------------------ kernel choices

_setting("VKML_MATMUL_TILE", "", "five integers", """
    BM,BN,BK,TM,TN: force this SIMT tiling on every GEMM (for tuning on a device); unset, vkml
    picks by shape.""")


def _tiling(name: str, fields: str) -> tuple[int, ...] | None:
    """Five integers from variable `name` (a forced tiling), or None when it is unset."""
    v = _raw(name)
    if not v:
        return None
    ints = parse_ints(v, 5)
    if ints is None:
        raise ValueError(f"{name}={v!r}: expected five integers {fields}")
    return ints


def matmul_tile() -> tuple[int, ...] | None:
    """The forced SIMT tiling (VKML_MATMUL_TILE) as five integers, or None."""
    return _tiling("VKML_MATMUL_TILE", "BM,BN,BK,TM,TN")


_setting("VKML_WINOGRAD", "auto", "one of the words listed", """
    Winograd F(4x4, 3x3) for 3x3 float32 convolutions of stride 1, one group, with constant
    filters: on the GPUs (kernels/winograd.py) auto takes it where both channel counts are at
    least 32 and the direct product has at least 2^27 multiply-adds (ResNets from batch 2, not at
    batch 1); on the CPU device's native programs (runtime/cpuprog.py, CONV_WINO) where both
    channel counts are at least 32 and the 4x4 output tiles at least 48 (resnet18's 56x56 and
    28x28 layers at batch 1), else F(2x2, 3x3) where 2x2 tiles are (its 14x14 layers). all:
    every convolution where it applies (tests); off: never (the direct kernels). Read when a
    plan's kernels are recorded or a CPU program is made.""")

_WINOGRAD = ("auto", "all", "off")


def winograd() -> str:
    """VKML_WINOGRAD: auto, all or off (0 and the other off spellings are off)."""
    return parse_word("VKML_WINOGRAD", _WINOGRAD, off="off")


_setting("VKML_COOP", "1", "on/off", """
    0: never use the cooperative-matrix (tensor core) GEMM path, even where the device has it;
    GEMMs and float16 convolutions take the SIMT path. For comparisons.""")


def coop() -> bool:
    """Whether the cooperative-matrix GEMM path may be used (VKML_COOP)."""
    return parse_switch(_raw("VKML_COOP"), True)


_setting("VKML_COOP_TILE", "", "five or six integers", """
    BM,BN,BK,WM,WN[,STAGES]: force this cooperative-matrix tiling (for tuning;
    bench/bench_matmul.py --coop-tiles sweeps them); STAGES is 2 (double-buffered shared tiles,
    the default) or 1; unset, vkml picks by shape.""")


_NUMBERS = {4: "four", 5: "five", 6: "six"}


def _tile(name: str, counts: tuple[int, int], fields: str) -> tuple[int, ...] | None:
    """A forced tiling setting: counts[0] or counts[1] comma-separated integers, or None when
    unset."""
    v = _raw(name)
    if not v:
        return None
    ints = parse_ints(v, counts[1]) or parse_ints(v, counts[0])
    if ints is None:
        words = " or ".join(_NUMBERS[c] for c in counts)
        raise ValueError(f"{name}={v!r}: expected {words} integers {fields}")
    return ints


def coop_tile() -> tuple[int, ...] | None:
    """The forced cooperative-matrix tiling (VKML_COOP_TILE) as five or six integers, or None."""
    return _tile("VKML_COOP_TILE", (5, 6), "BM,BN,BK,WM,WN[,STAGES]")


_setting("VKML_CM2", "0", "on/off", """
    1: plain float16 GEMMs take the VK_NV_cooperative_matrix2 shader (shaders/matmul_cm2.comp)
    where the driver offers it. Off by default: on an H200 (driver 580) it ran a 4096^3 product
    at 208-248 TFLOPS against the KHR shader's 278-280 (bench/results/checks/h200-2026-12-02-cm2.txt).
    Read when a GEMM is recorded.""")


def cm2() -> bool:
    """Whether plain float16 GEMMs may take the cooperative_matrix2 shader (VKML_CM2)."""
    return parse_switch(_raw("VKML_CM2"), False)


_setting("VKML_CM2_TILE", "", "four or five integers", """
    BM,BN,BK,THREADS[,UNROLL]: force this tiling on the VK_NV_cooperative_matrix2 GEMM
    (shaders/matmul_cm2.comp; for tuning, bench/bench_matmul.py --cm2-tiles sweeps them); unset,
    vkml picks by shape.""")


def cm2_tile() -> tuple[int, ...] | None:
    """The forced cooperative_matrix2 tiling (VKML_CM2_TILE) as four or five integers, or None."""
    return _tile("VKML_CM2_TILE", (4, 5), "BM,BN,BK,THREADS[,UNROLL]")


_setting("VKML_NO_SUBGROUPS", "0", "on/off", """
    1: reductions take the shared-memory path even on devices with subgroup arithmetic (to test
    the fallback, or to work around a driver's subgroup bug). Read when a plan's kernels are
    recorded (a session's first run of an input shape).""")


def no_subgroups() -> bool:
    """Whether reductions must not use subgroup arithmetic (VKML_NO_SUBGROUPS)."""
    return parse_switch(_raw("VKML_NO_SUBGROUPS"), False)


# ------------------------------------------------------------------ docs/config.md

RULES = {
    "on/off": "case and blanks ignored; `0`, `off`, `no`, `false`, `none` are off, any other "
              "non-empty value is on; unset or empty is the default",
    "auto/off/count": "`auto`, `off` (or `0`), or a whole number >= 1; anything else is an error",
    "size": "bytes with an optional unit: `1000000`, `512MiB`, `6GiB`, `2GB` (KiB/MiB/GiB/TiB and "
            "k/M/G/T are powers of 1024, kB/MB/GB of 1000)",
    "fraction or size": "a fraction in (0, 1] such as `0.5`, or a size as above",
    "seconds": "a finite number of seconds >= 0; `0` is no limit; `nan`, `inf` and negative values "
               "are errors",
    "number": "a number >= 0",
    "whole number": "decimal digits, within the range the setting gives",
    "five integers": "comma-separated, such as `64,64,16,4,4`",
    "five or six integers": "comma-separated, such as `128,128,32,64,64` or `128,128,32,64,64,1`",
    "four or five integers": "comma-separated, such as `128,256,32,256` or `128,128,32,128,4`",
    "comma list": "names separated by commas",
    "auto, map or staging": "one of those words",
    "one of the words listed": "one of the words the setting lists, case and blanks ignored; "
                               "anything else is an error",
    "path": "a file or folder",
}


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown_table() -> str:
    """docs/config.md: the rules and one row per setting, from SETTINGS."""
    lines = [
        "# Environment variables",
        "",
        "Generated from vkml/config.py by `python tools/config_table.py`; edit the table there.",
        "Every VKML_* variable vkml reads is here. Most are read when they are needed, so they may",
        "change between sessions; where a setting is read (once per process, per session, per plan",
        "or per run) is in its row.",
        "",
        "| rule | values |",
        "| --- | --- |",
    ]
    lines += [f"| {_cell(rule)} | {_cell(text)} |" for rule, text in RULES.items()]
    lines += ["", "| variable | default | rule | effect |", "| --- | --- | --- | --- |"]
    for s in SETTINGS.values():
        default = f"`{s.default}`" if s.default else "unset"
        lines.append(f"| `{s.name}` | {_cell(default)} | {_cell(s.rule)} | {_cell(s.doc)} |")
    return "\n".join(lines) + "\n"
