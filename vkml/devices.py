"""The devices vkml can run on, and the user's choice among them."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence


@dataclass(frozen=True)
class DeviceInfo:
    name: str  # "cpu", "vulkan:0", ...
    kind: str  # "cpu" or the Vulkan device type
    description: str
    details: dict[str, Any] = field(default_factory=dict)


def devices() -> list[DeviceInfo]:
    """Every device vkml can use, GPUs first, then the CPU."""
    import os

    cpu = DeviceInfo("cpu", "cpu", f"NumPy on the host ({os.cpu_count()} cores)")
    return [cpu]


def resolve_devices(names: Sequence[str] | None) -> list[str]:
    available = [d.name for d in devices()]
    if names is None:
        return available
    if isinstance(names, str):
        names = [names]
    unknown = [n for n in names if n not in available]
    if unknown:
        raise ValueError(f"unknown device(s) {unknown}; available: {available}")
    if not names:
        raise ValueError("devices= is empty; give at least one of " + str(available))
    return list(names)
