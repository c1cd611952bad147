"""vkml's Vulkan runtime: devices, memory, pipelines, command recording, submission.

Vulkan is reached at run time (dlopen of libvulkan.so.1); with no loader, no driver or no
usable device everything here still imports, `available()` is False and
`unavailable_reason()` says why. See docs/vulkan.md for the whole API.
"""
from __future__ import annotations

import atexit
import os
import threading

from .errors import (
    BufferTooLarge,
    DeviceLost,
    OutOfDeviceMemory,
    ValidationError,
    VulkanError,
    VulkanUnavailable,
)
from .info import CoopMatrixShape, DeviceInfo, MemoryHeap, format_table

try:
    from . import _device, _instance
except ImportError as _e:  # extensions not built
    _device = _instance = None
    _IMPORT_ERROR = (f"vkml's Vulkan extension modules are not built ({_e}); run "
                     "`python setup.py build_ext --inplace`")
else:
    _IMPORT_ERROR = None

__all__ = [
    "available", "unavailable_reason", "list_devices", "preferred_index", "device", "device_facts", "close_all",
    "DeviceInfo", "MemoryHeap", "CoopMatrixShape", "format_table",
    "VulkanError", "VulkanUnavailable", "DeviceLost", "ValidationError",
    "OutOfDeviceMemory", "BufferTooLarge",
]

_devices: dict[int, object] = {}
_devices_lock = threading.Lock()


def unavailable_reason() -> str | None:
    """None when at least one Vulkan device can be listed; else why not (one sentence)."""
    if _instance is None:
        return _IMPORT_ERROR
    return _instance.unavailable_reason()


def available() -> bool:
    return unavailable_reason() is None


def preferred_index() -> int:
    """Index of the first usable discrete GPU, else 0: the device a benchmark or probe measures
    when none is named."""
    for d in list_devices():
        if d.device_type == "discrete" and d.usable:
            return d.index
    return 0


def list_devices() -> list[DeviceInfo]:
    """Every Vulkan physical device, usable or not; [] when Vulkan is unavailable."""
    if not available():
        return []
    from .info import from_raw

    inst = _instance.instance()
    return [from_raw(inst.describe(i)) for i in range(inst.nphys)]


def device(index: int = 0):
    """The opened vkml.vulkan.Device for physical device `index` (opened once, then shared)."""
    with _devices_lock:
        dev = _devices.get(index)
        if dev is not None and not dev.closed:
            return dev
        if _instance is None:
            raise VulkanUnavailable(_IMPORT_ERROR)
        inst = _instance.instance()
        from ._device import Device

        dev = Device(inst, index)
        _devices[index] = dev
        return dev


def device_facts(index: int):
    """What planning needs of physical device `index`: the opened Device when it is open, else
    its DeviceFacts (vkml/vulkan/facts.py), without waiting for a device another thread is
    opening (only for the instance)."""
    dev = _devices.get(index)
    if dev is not None and not dev.closed:
        return dev
    if _instance is None:
        raise VulkanUnavailable(_IMPORT_ERROR)
    from .facts import facts_of

    return facts_of(_instance.instance().describe(index))


def close_all() -> None:
    """Close every opened device (saving pipeline caches), then the instance."""
    with _devices_lock:
        for dev in list(_devices.values()):
            dev.close()
        _devices.clear()
    if _instance is not None:
        _instance.shutdown()


atexit.register(close_all)

_inherited: list = []  # a forked child's devices of the parent: kept, never used or closed there
FORK_GENERATION = 0  # how many forks this process is a child of (sessions compare theirs)


def _after_fork_in_child() -> None:
    """The parent's devices and instance are unusable in a child (their driver threads stayed
    in the parent; touching them can hang): they refuse use with a clear error, close_all()
    leaves them alone, and device() opens new ones here."""
    global _devices_lock, FORK_GENERATION
    FORK_GENERATION += 1
    _inherited.extend(_devices.values())
    _devices.clear()
    for dev in _inherited:
        dev._forget_after_fork()
    _devices_lock = threading.Lock()  # (another thread may have held it at the fork)
    if _instance is not None:
        _device.forked_in_child()
        _instance.forget_after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
