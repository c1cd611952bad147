"""Environment settings of the Vulkan runtime, parsed in one place.

VKML_MEMORY_BUDGET    fraction ("0.5": of VK_EXT_memory_budget's heapBudget, or of the heap
                      size without it) or an absolute size ("6GiB", "512MiB", "1000000").
                      Default: 0.95 of heapBudget, or 0.8 of the heap size.
VKML_DISABLE          comma list of device features to leave off even if supported, to test
                      fallbacks: push_descriptor, mapped_memory (treat device-local memory as
                      not host-visible: uploads go through staging), storage_16bit,
                      storage_8bit, int64, fp16_arithmetic, memory_budget.
VKML_READBACK         auto (map HOST_CACHED memory, stage otherwise), map, staging.
VKML_CACHE_DIR        where pipeline caches live (default $XDG_CACHE_HOME/vkml or ~/.cache/vkml).
VKML_PIPELINE_CACHE   0 to neither load nor save pipeline caches.
VKML_PIPELINE_CACHE_MAX  the largest pipeline cache file written, as a size ("256MiB", the
                      default); a bigger cache is kept in memory but not saved.
VKML_GPU_TIMEOUT      seconds a session run waits for its GPU work before it gives up with a
                      TimeoutError naming the device (default 300; 0 waits forever): a hung
                      GPU or driver must not hang the caller. nan, inf and negative values
                      are errors.
VKML_WAIT_SPIN_US     how long a wait polls the timeline before it blocks in the driver
                      (default 100 µs on GPUs, 0 on CPU devices such as lavapipe, whose own
                      threads need the cores). Waking from a blocking wait costs tens of
                      microseconds (an interrupt, a thread wake-up; more inside a VM), which
                      is most of a small model's run. At most a quarter of the cores poll at
                      once; other waiters block at once.
VKML_QUEUES           lanes per device (default 4): each lane is a queue of the device's compute
                      family (as many as it offers; lanes share them beyond that) with a timeline
                      semaphore of its own. Run slots take lanes in turn, so runs of different
                      slots do not wait for each other's barriers; 1 puts every run on one queue.
"""
from __future__ import annotations

import math
import os
import re

DEFAULT_BUDGET_FRACTION = 0.95       # of VK_EXT_memory_budget's heapBudget
DEFAULT_NO_BUDGET_FRACTION = 0.8     # of the heap size, without the extension
DEFAULT_GPU_TIMEOUT = 300.0         # seconds; a run's GPU work that takes longer is reported
DEFAULT_WAIT_SPIN_US = 100.0         # on GPUs; CPU devices (lavapipe) do not spin
DEFAULT_QUEUES = 4                   # lanes per device (VKML_QUEUES)
MAX_QUEUES = 64

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1000, "kib": 1 << 10, "m": 1 << 20, "mb": 10**6,
          "mib": 1 << 20, "g": 1 << 30, "gb": 10**9, "gib": 1 << 30, "t": 1 << 40, "tib": 1 << 40}


def parse_budget(text: str | float | int | None) -> tuple[str, float] | None:
    """("fraction", f) or ("bytes", n) from "0.5" / "6GiB" / 123; None for empty."""
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


def budget_setting() -> tuple[str, float] | None:
    return parse_budget(os.environ.get("VKML_MEMORY_BUDGET"))


def disabled_features() -> frozenset[str]:
    raw = os.environ.get("VKML_DISABLE", "")
    off = {x.strip() for x in raw.split(",") if x.strip()}
    if os.environ.get("VKML_VALIDATION", "") not in ("", "0") and not os.environ.get("VKML_VALIDATION_COOPMAT"):
        # The validation layer of Debian 12 / Ubuntu 24.04 (1.3.239) predates
        # VK_KHR_cooperative_matrix and rejects its feature struct at vkCreateDevice; with a newer
        # layer, VKML_VALIDATION_COOPMAT=1 keeps the extension on under validation.
        off.add("cooperative_matrix")
    return frozenset(off)


def readback_mode() -> str:
    mode = os.environ.get("VKML_READBACK", "auto").strip().lower() or "auto"
    if mode not in ("auto", "map", "staging"):
        raise ValueError(f"VKML_READBACK must be auto, map or staging, not {mode!r}")
    return mode


def cache_dir() -> str | None:
    """Directory for pipeline caches, or None when caching is off."""
    if os.environ.get("VKML_PIPELINE_CACHE", "1").strip().lower() in ("0", "off", "false", "no"):
        return None
    explicit = os.environ.get("VKML_CACHE_DIR")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "vkml")


DEFAULT_PIPELINE_CACHE_MAX = 256 << 20


def pipeline_cache_max() -> int:
    """Bytes: the largest pipeline cache file vkml writes (VKML_PIPELINE_CACHE_MAX)."""
    text = os.environ.get("VKML_PIPELINE_CACHE_MAX", "").strip()
    if not text:
        return DEFAULT_PIPELINE_CACHE_MAX
    try:
        kind, value = parse_budget(text)
    except (TypeError, ValueError):
        kind = None
    if kind != "bytes":
        raise ValueError(f"VKML_PIPELINE_CACHE_MAX={text!r}: expected a size such as 256MiB")
    return int(value)


def wait_spin_us(device_type: str) -> float:
    """Microseconds a wait polls before blocking (VKML_WAIT_SPIN_US, or the default by type)."""
    text = os.environ.get("VKML_WAIT_SPIN_US", "").strip()
    if not text:
        return 0.0 if device_type == "cpu" else DEFAULT_WAIT_SPIN_US
    try:
        v = float(text)
    except ValueError:
        raise ValueError(f"VKML_WAIT_SPIN_US must be a number of microseconds, not {text!r}") from None
    if not v >= 0:
        raise ValueError(f"VKML_WAIT_SPIN_US must be >= 0, not {text!r}")
    return v


def gpu_timeout() -> float | None:
    """Seconds a session run waits for the GPU (VKML_GPU_TIMEOUT), None for no limit."""
    text = os.environ.get("VKML_GPU_TIMEOUT", "").strip()
    if not text:
        return DEFAULT_GPU_TIMEOUT
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    # nan, inf and negative numbers are mistakes, not "no limit": 0 says that.
    if not (math.isfinite(v) and v >= 0):
        raise ValueError(f"VKML_GPU_TIMEOUT must be a finite number of seconds >= 0 (0: wait forever), "
                         f"not {text!r}")
    return None if v == 0 else v


def queues() -> int:
    """Lanes per device (VKML_QUEUES), 1 to MAX_QUEUES."""
    text = os.environ.get("VKML_QUEUES", "").strip()
    if not text:
        return DEFAULT_QUEUES
    try:
        v = int(text)
    except ValueError:
        v = 0
    if not 1 <= v <= MAX_QUEUES:
        raise ValueError(f"VKML_QUEUES={text!r}: expected a whole number of lanes from 1 to {MAX_QUEUES}")
    return v
