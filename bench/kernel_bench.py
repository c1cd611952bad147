"""What the kernel benchmarks (bench_matmul, bench_movement, bench_reductions) share: their
common options, the device they measure, and where their JSON goes."""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import time
from typing import Any, Callable

import vkml.vulkan as vk

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def add_common_args(ap: argparse.ArgumentParser, inner: int = 10, outer: int = 3) -> None:
    ap.add_argument("--device", type=int, default=None, help="Vulkan device index (default: first discrete GPU)")
    ap.add_argument("--inner", type=int, default=inner, help="dispatches per submission")
    ap.add_argument("--outer", type=int, default=outer, help="submissions; the best one counts")
    ap.add_argument("--check", action="store_true", help="compare with NumPy")


def open_device(index: int | None):
    """(index, Device, DeviceInfo) of the device to measure."""
    idx = vk.preferred_index() if index is None else index
    return idx, vk.device(idx), vk.list_devices()[idx]


def open_or_report(index: int | None):
    """(Device, DeviceInfo) of the device to measure, its summary printed; None, with the
    reason printed, when there is no Vulkan."""
    reason = vk.unavailable_reason()
    if reason:
        print("Vulkan unavailable:", reason)
        return None
    _, dev, info = open_device(index)
    print(info.summary())
    return dev, info


def write_results(kind: str, info, payload: dict[str, Any], path: str | None = None) -> str:
    """bench/results/<kind>-<device>.json (or `path`) with the machine's description; returns it."""
    tag = re.sub(r"[^A-Za-z0-9]+", "-", info.device_name).strip("-").lower()
    path = path or os.path.join(RESULTS, f"{kind}-{tag}.json")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump({"device": info.device_name, "driver": f"{info.driver_name} {info.driver_info}",
                   "host": platform.node(), "time": time.strftime("%Y-%m-%d %H:%M:%S"), **payload}, f, indent=1)
        f.write("\n")
    return path


def best_seconds(dev, record_once: Callable[[Any], None], inner: int, outer: int,
                 warm_s: float = 0.0) -> float:
    """GPU seconds of one `record_once(rec)`, from timestamps around `inner` of them in one
    command buffer; the best of `outer` submissions. With warm_s, the command buffer first runs
    for that long: a GPU that idles at a low clock (an H100 at 345 of 1980 MHz) only boosts
    under sustained load, and short bursts would otherwise be timed at the idle clock."""
    from vkml.vulkan._commands import CommandRecorder

    rec = CommandRecorder(dev)
    rec.timestamp("start")
    for _ in range(inner):
        record_once(rec)
    rec.timestamp("end")
    cb = rec.finish()
    t_end = time.perf_counter() + warm_s
    while time.perf_counter() < t_end:
        cb.run(timeout=600)
    best = math.inf
    for _ in range(outer):
        cb.run(timeout=600)
        best = min(best, cb.timestamps()[-1][1] / inner)
    return best
