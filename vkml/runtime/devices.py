"""The devices vkml can run on, and the user's choice among them."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Sequence

_TYPE_ORDER = {"discrete": 0, "integrated": 1, "virtual": 2, "other": 3, "cpu": 4}


@dataclass(frozen=True)
class DeviceInfo:
    """A device as vkml names it. ``vulkan`` carries the full Vulkan description for GPUs."""

    name: str  # "cpu", "vulkan:0", ...
    kind: str  # "cpu", or the Vulkan device type: discrete, integrated, virtual, cpu, other
    description: str
    details: dict[str, Any] = field(default_factory=dict)
    vulkan: Any = field(default=None, repr=False)


def gpu_unavailable_reason() -> str | None:
    """None when at least one Vulkan device is usable, else why there is none."""
    from .. import vulkan

    reason = vulkan.unavailable_reason()
    if reason is not None:
        return reason
    usable = [d for d in vulkan.list_devices() if d.usable]
    return None if usable else "no usable Vulkan device: " + "; ".join(
        f"{d.name}: {d.unusable_reason}" for d in vulkan.list_devices())


def devices() -> list[DeviceInfo]:
    """Every device vkml can use: GPUs (discrete first, then by memory), then the CPU."""
    from .. import vulkan

    gpus = []
    for d in vulkan.list_devices():
        if not d.usable:
            continue
        details = {
            "driver": f"{d.driver_name} {d.driver_version}",
            "api": d.api_version,
            "subgroup size": d.subgroup_size,
            "device-local memory": f"{d.device_local_bytes / 2**30:.1f} GiB",
            "features": ", ".join(k for k, v in sorted(d.features.items()) if v),
        }
        if d.uuid:
            details["uuid"] = d.uuid
        if d.pci_bus:
            details["pci bus"] = d.pci_bus
        gpus.append(DeviceInfo(d.name, d.device_type, f"{d.device_name} ({d.vendor})", details, d))
    gpus.sort(key=lambda g: (_TYPE_ORDER.get(g.kind, 3), -g.vulkan.device_local_bytes, g.name))
    cpu_details = {}
    reason = gpu_unavailable_reason()
    if reason:
        cpu_details["no GPU"] = reason
    cpu = DeviceInfo("cpu", "cpu", f"NumPy on the host ({os.cpu_count()} cores)", cpu_details)
    return gpus + [cpu]


def _vulkan_index(name: str) -> int:
    """N of "vulkan:N" (ValueError for any other name)."""
    if not isinstance(name, str) or not name.startswith("vulkan:") or not name[7:].isdigit():
        raise ValueError(f"not a Vulkan device name: {name!r} (expected 'vulkan:N')")
    return int(name[7:])


def vulkan_device(name: str):
    """The opened vkml.vulkan.Device for "vulkan:N" (ValueError for any other name)."""
    from .. import vulkan

    return vulkan.device(_vulkan_index(name))


def cpu_only(names: Sequence[str] | str | None) -> bool:
    """Whether a devices= value names the CPU alone: such a session never opens Vulkan (which
    maps every installed driver; lavapipe's LLVM alone is 40 MiB)."""
    return names == "cpu" or (names is not None and not isinstance(names, str) and list(names) == ["cpu"])


def resolve_devices(names: Sequence[str] | None) -> list[str]:
    """Validate a user's devices= list against what exists, in order of preference, the CPU
    last (it runs whatever no GPU can). None: every real GPU, then the CPU; a CPU-type
    Vulkan device (lavapipe) only when named, so plain sessions on GPU-less machines stay on
    NumPy."""
    if cpu_only(names):
        return ["cpu"]
    all_devices = devices()
    if names is None:
        return [d.name for d in all_devices if d.kind != "cpu"] + ["cpu"]
    if isinstance(names, str):
        names = [names]
    available = [d.name for d in all_devices]
    unknown = [n for n in names if n not in available]
    if unknown:
        raise ValueError(f"unknown device(s) {unknown}; available: {available}")
    if not names:
        raise ValueError("devices= is empty; give at least one of " + str(available))
    if len(set(names)) != len(names):
        raise ValueError(f"devices= names a device twice: {list(names)}")
    return [n for n in names if n != "cpu"] + ["cpu"]


@dataclass(frozen=True)
class GpuFacts:
    """What compiling a plan (vkml/compile/pipeline.py) needs to know of one GPU, read when the
    plan is made: its memory budget changes with what else holds memory, and a GPU that ran
    out of memory for a plan gets a lower cap (runtime/gpurun.GpuRunner)."""

    name: str  # "vulkan:N"
    device: Any = field(repr=False)  # the vkml.vulkan.Device: kernels' check() reads its features and limits
    budget: int  # bytes placement may put there: the allocator's budget, lowered to the cap
    alignment: int  # of the values laid out in its arenas
    largest_binding: int  # bytes of the largest value it binds to a shader as one buffer


def largest_binding(dev) -> int:
    """Bytes of the largest value `dev` (a vkml.vulkan.Device) can hold in one buffer and bind
    to a shader."""
    return int(min(dev.max_storage_buffer_range, dev.limits["max_memory_allocation_size"]))


def gpu_budget(dev, cap: int | None) -> int:
    """Bytes placement may put on `dev` (an opened Device, or its DeviceFacts while it opens):
    the allocator's budget for its device-memory heap, lowered to the user's cap."""
    from ..vulkan.facts import DeviceFacts

    if isinstance(dev, DeviceFacts):
        budget = dev.budget()
    else:
        alloc = dev.allocator
        budget = int(alloc.budget(alloc.pools["device"].heap))
    return budget if cap is None else min(budget, int(cap))


def gpu_facts(name: str, cap: int | None = None) -> GpuFacts:
    """The facts of GPU `name` ("vulkan:N") now, its budget lowered to `cap` bytes. While
    another thread still opens the device (a new session), they come from the physical device
    (vkml/vulkan/facts.py), so planning overlaps vkCreateDevice."""
    from .. import vulkan
    from ..vulkan.facts import DeviceFacts

    dev = vulkan.device_facts(_vulkan_index(name))
    alignment = dev.alignment if isinstance(dev, DeviceFacts) else dev.allocator.alignment
    return GpuFacts(name, dev, gpu_budget(dev, cap), int(alignment), largest_binding(dev))
