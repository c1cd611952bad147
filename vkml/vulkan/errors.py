"""Exceptions of the Vulkan runtime: each says which device and what limit, so callers can
fall back to the CPU on purpose rather than by accident."""
from __future__ import annotations


class VulkanError(RuntimeError):
    """A Vulkan call failed; `result` is the VkResult code and `call` the function name."""

    def __init__(self, message: str, result: int | None = None, call: str | None = None):
        super().__init__(message)
        self.result = result
        self.call = call


class VulkanUnavailable(VulkanError):
    """No usable Vulkan loader, driver or device; the message says why."""


class DeviceLost(VulkanError):
    """VK_ERROR_DEVICE_LOST: the device (or its driver) crashed; it cannot be used again."""


class ValidationError(VulkanError):
    """The Khronos validation layer (VKML_VALIDATION=1) reported an error or warning.

    `messages` lists every message collected since the previous API boundary."""

    def __init__(self, messages: list[str], dropped: int = 0):
        text = "\n".join(messages)
        if dropped:
            text += f"\n(and {dropped} more message(s) not kept)"
        super().__init__("Vulkan validation layer reported:\n" + text)
        self.messages = messages


class OutOfDeviceMemory(MemoryError):
    """An allocation would exceed the device's memory budget (or the driver refused it)."""

    def __init__(self, device: str, requested: int, budget: int, in_use: int, detail: str = ""):
        msg = (
            f"{device}: cannot allocate {_fmt(requested)}: {_fmt(in_use)} of the "
            f"{_fmt(budget)} budget already in use"
        )
        if detail:
            msg += f" ({detail})"
        super().__init__(msg)
        self.device = device
        self.requested = requested
        self.budget = budget
        self.in_use = in_use


class BufferTooLarge(MemoryError):
    """One buffer larger than the device can bind (maxStorageBufferRange) was requested."""

    def __init__(self, device: str, requested: int, limit: int):
        super().__init__(
            f"{device}: a single buffer of {_fmt(requested)} exceeds the device's "
            f"maxStorageBufferRange of {_fmt(limit)}; split the tensor or run it on the CPU"
        )
        self.device = device
        self.requested = requested
        self.limit = limit


def _fmt(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} B"
