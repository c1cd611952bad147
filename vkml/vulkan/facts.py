"""What planning needs of a GPU before its VkDevice exists.

Opening a device costs most of a warm start (on the H100: vkCreateInstance ~85 ms, then
vkCreateDevice ~70 ms plus ~20 ms per queue), and planning a model (kernel checks, placement
in the memory budget) needs only the physical device's description. `DeviceFacts` is that
description in the shape the kernels' check() reads from an opened vkml.vulkan.Device (name,
features, limits, sizes), so a session plans on one thread while another creates the device.
The opened Device computes its features and queue family with the same functions, so a plan
made on the facts is the plan the Device would have made.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from .. import config
from .errors import VulkanUnavailable
from .info import DeviceInfo, from_raw

VK_QUEUE_GRAPHICS_BIT = 0x1
VK_QUEUE_COMPUTE_BIT = 0x2
MEMORY_DEVICE_LOCAL = 0x1
MEMORY_BAD = 0x20 | 0x10  # PROTECTED | LAZILY_ALLOCATED (the allocator never picks them)
MIN_ALIGNMENT = 256  # offsets of laid-out values: max(minStorageBufferOffsetAlignment, this)


def usable_info(raw: Mapping[str, Any]) -> DeviceInfo:
    """The DeviceInfo of an Instance.describe() dict; VulkanUnavailable when vkml cannot use
    the device (why, from info.unusable_reason)."""
    info = from_raw(dict(raw))
    if not info.usable:
        raise VulkanUnavailable(f"{info.name} ({info.device_name}) cannot be used by vkml: {info.unusable_reason}")
    return info


def compute_family(raw: Mapping[str, Any]) -> int:
    """The queue family runs go to: a compute-only family if there is one (async compute on
    discrete GPUs), else the first family with compute."""
    fams = raw["queue_families"]
    compute = [i for i, (flags, count, _) in enumerate(fams) if flags & VK_QUEUE_COMPUTE_BIT and count]
    dedicated = [i for i in compute if not fams[i][0] & VK_QUEUE_GRAPHICS_BIT]
    return (dedicated or compute)[0]


def enabled_features(raw: Mapping[str, Any]) -> set[str]:
    """The features vkml enables on this device: what it supports, less VKML_DISABLE,
    plus timeline semaphores (required), push constants of 16 bits only with 16-bit storage."""
    disabled = config.disabled_features()
    enabled = {name for name, on in raw["features"].items() if on and name not in disabled}
    enabled.add("timeline_semaphore")
    if "storage_16bit" not in enabled:
        enabled.discard("push_constant_16bit")
    return enabled


def device_limits(raw: Mapping[str, Any], family: int) -> dict:
    """The limits kernels read, with the timestamp bits of the queue family runs use (0: that
    family writes no timestamps)."""
    limits = dict(raw["limits"])
    limits["timestamp_valid_bits"] = raw["queue_families"][family][2]
    return limits


def budget_bytes(size: int, heap_budget: int | None, setting) -> int:
    """Bytes vkml may hold in a heap of `size` bytes whose VK_EXT_memory_budget heapBudget is
    `heap_budget` (None without the extension), under `setting` (config.budget_setting())."""
    if setting is None:
        if heap_budget is not None:
            return int(config.DEFAULT_BUDGET_FRACTION * heap_budget)
        return int(config.DEFAULT_NO_BUDGET_FRACTION * size)
    kind, v = setting
    if kind == "fraction":
        return int(v * (heap_budget if heap_budget is not None else size))
    return int(v)


def device_heap(raw: Mapping[str, Any]) -> int:
    """The heap the allocator's device pool will use: the largest heap behind a DEVICE_LOCAL
    memory type, else the heap of the first usable type (the allocator also asks the device
    which types can back a storage buffer, which only an opened device can answer)."""
    types = [(t["flags"], t["heap"]) for t in raw["memory_types"] if not t["flags"] & MEMORY_BAD]
    local = {h for f, h in types if f & MEMORY_DEVICE_LOCAL}
    if local:
        return max(local, key=lambda h: raw["heaps"][h]["size"])
    return types[0][1] if types else 0


@dataclass(frozen=True)
class DeviceFacts:
    """A GPU as planning sees it before it is open (see the module docstring): the attributes
    of vkml.vulkan.Device that kernels' check() read, and what placement needs (budget,
    alignment)."""

    index: int
    name: str
    info: Any = field(repr=False)  # vkml.vulkan.info.DeviceInfo
    features: frozenset
    limits: dict = field(repr=False)
    max_storage_buffer_range: int
    max_push_constants_size: int
    storage_alignment: int
    alignment: int  # of the values placement lays out (the allocator's)
    heap: int
    closed: bool = False

    def budget(self) -> int:
        """The device pool's budget as an opened device's allocator would report it now."""
        from . import _instance

        size, heap_budget, _ = _instance.instance().heap_budgets(self.index)[self.heap]
        if "memory_budget" not in self.features:
            heap_budget = None
        return budget_bytes(size, heap_budget, config.budget_setting())


def facts_of(raw: Mapping[str, Any]) -> DeviceFacts:
    """DeviceFacts from an Instance.describe() dict (VulkanUnavailable for a device vkml
    cannot use)."""
    info = usable_info(raw)
    family = compute_family(raw)
    lim = device_limits(raw, family)
    align = int(lim["min_storage_buffer_offset_alignment"])
    return DeviceFacts(info.index, info.name, info, frozenset(enabled_features(raw)), lim,
                       int(lim["max_storage_buffer_range"]), int(lim["max_push_constants_size"]), align,
                       max(align, MIN_ALIGNMENT), device_heap(raw))
