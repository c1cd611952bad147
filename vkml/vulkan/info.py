"""What each Vulkan physical device is and can do, as plain data (no open device needed)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

VENDORS = {
    0x10DE: "NVIDIA", 0x1002: "AMD", 0x1022: "AMD", 0x8086: "Intel", 0x13B5: "ARM",
    0x5143: "Qualcomm", 0x106B: "Apple", 0x1010: "Imagination", 0x10005: "Mesa",
    0x10002: "VeriSilicon", 0x1AE0: "Google", 0x14E4: "Broadcom", 0x1D17: "Zhaoxin",
}
DEVICE_TYPES = {0: "other", 1: "integrated", 2: "discrete", 3: "virtual", 4: "cpu"}
COMPONENT_TYPES = {0: "f16", 1: "f32", 2: "f64", 3: "i8", 4: "i16", 5: "i32", 6: "i64",
                   7: "u8", 8: "u16", 9: "u32", 10: "u64", 1000141000: "bf16",
                   1000491000: "e4m3", 1000491001: "e5m2"}
SCOPES = {1: "device", 2: "workgroup", 3: "subgroup", 5: "queue_family"}


@dataclass(frozen=True)
class MemoryHeap:
    index: int
    size: int
    device_local: bool
    budget: int | None  # VK_EXT_memory_budget heapBudget, None without the extension
    usage: int | None   # VK_EXT_memory_budget heapUsage (all processes' view of this one)


@dataclass(frozen=True)
class CoopMatrixShape:
    """One VkCooperativeMatrixPropertiesKHR entry: C[MxN] (+)= A[MxK] * B[KxN]."""
    m: int
    n: int
    k: int
    a_type: str
    b_type: str
    c_type: str
    result_type: str
    saturating: bool
    scope: str


@dataclass(frozen=True)
class CoopFlexible(CoopMatrixShape):
    """One VkCooperativeMatrixFlexibleDimensionsPropertiesNV entry (VK_NV_cooperative_matrix2):
    matrices of any size that is a multiple of the granule m x n x k, in workgroups of exactly
    `invocations` invocations (workgroup scope)."""
    invocations: int = 0


@dataclass(frozen=True)
class DeviceInfo:
    index: int
    name: str            # "vulkan:N", the name vkml.devices() uses
    device_name: str     # what the driver calls it
    vendor: str
    vendor_id: int
    device_id: int
    device_type: str     # discrete, integrated, virtual, cpu, other
    api_version: str
    driver_name: str
    driver_info: str
    driver_version: str
    subgroup_size: int
    min_subgroup_size: int
    max_subgroup_size: int
    heaps: tuple[MemoryHeap, ...]
    features: dict[str, bool]
    cooperative_matrix: tuple[CoopMatrixShape, ...]
    limits: dict[str, Any]
    extensions: tuple[str, ...] = field(repr=False)
    usable: bool = True
    unusable_reason: str | None = None
    uuid: str | None = None      # the device UUID, 32 hex digits (what CUDA and nvidia-smi call GPU-...)
    pci_bus: str | None = None   # "domain:bus:device.function" (VK_EXT_pci_bus_info)
    coop_flexible: tuple[CoopFlexible, ...] = ()
    # VkPhysicalDeviceCooperativeMatrix2PropertiesNV: max_workgroup_size, max_dimension,
    # reserved_shared_memory (bytes a workgroup-scope shader must leave the driver)
    coop2_limits: dict[str, int] = field(default_factory=dict)

    @property
    def device_local_bytes(self) -> int:
        return sum(h.size for h in self.heaps if h.device_local)

    def summary(self) -> str:
        """One line: name, type, driver, memory."""
        mem = _gib(self.device_local_bytes)
        return (f"{self.name}: {self.device_name} ({self.vendor} {self.device_type}, "
                f"{self.driver_name or 'driver'} {self.driver_version}, Vulkan {self.api_version}, "
                f"{mem} device-local)")


def _version(v: int) -> str:
    return f"{(v >> 22) & 0x7F}.{(v >> 12) & 0x3FF}.{v & 0xFFF}"


def _driver_version(vendor_id: int, v: int) -> str:
    if vendor_id == 0x10DE:  # NVIDIA packs 10.8.8.6 bits
        return f"{(v >> 22) & 0x3FF}.{(v >> 14) & 0xFF}.{(v >> 6) & 0xFF}.{v & 0x3F}"
    return _version(v)


def _gib(n: int | None) -> str:
    if n is None:
        return "n/a"
    return f"{n / (1 << 30):.1f} GiB" if n >= (1 << 30) else f"{n / (1 << 20):.0f} MiB"


def unusable_reason(raw: dict) -> str | None:
    """Why vkml cannot open this device, or None: it needs Vulkan 1.1, timeline semaphores
    and a compute queue."""
    if raw["effective_api_version"] < ((1 << 22) | (1 << 12)):
        return "needs Vulkan 1.1"
    if not raw["features"]["timeline_semaphore"]:
        return "no timeline semaphores (Vulkan 1.2 or VK_KHR_timeline_semaphore)"
    if not any(flags & 0x2 for flags, _, _ in raw["queue_families"]):
        return "no compute queue"
    return None


def _coop_fields(m, n, k, a, b, c, r, sat, scope) -> tuple:
    """A cooperative-matrix entry's fields with the component types and scope by name."""
    t = COMPONENT_TYPES
    return (m, n, k, t.get(a, str(a)), t.get(b, str(b)), t.get(c, str(c)), t.get(r, str(r)), sat,
            SCOPES.get(scope, str(scope)))


def from_raw(raw: dict) -> DeviceInfo:
    vendor_id = raw["vendor_id"]
    heaps = tuple(
        MemoryHeap(i, h["size"], bool(h["flags"] & 1), h["budget"], h["usage"])
        for i, h in enumerate(raw["heaps"])
    )
    coop = tuple(CoopMatrixShape(*_coop_fields(*e)) for e in raw["cooperative_matrix"])
    flexible = tuple(CoopFlexible(*_coop_fields(*e[:9]), e[9]) for e in raw.get("cooperative_matrix_flexible", ()))
    reason = unusable_reason(raw)
    return DeviceInfo(
        index=raw["index"],
        name=f"vulkan:{raw['index']}",
        device_name=raw["device_name"],
        vendor=VENDORS.get(vendor_id, f"0x{vendor_id:04x}"),
        vendor_id=vendor_id,
        device_id=raw["device_id"],
        device_type=DEVICE_TYPES.get(raw["device_type"], "other"),
        api_version=_version(raw["api_version"]),
        driver_name=raw["driver_name"],
        driver_info=raw["driver_info"],
        driver_version=_driver_version(vendor_id, raw["driver_version"]),
        subgroup_size=raw["subgroup_size"],
        min_subgroup_size=raw["min_subgroup_size"],
        max_subgroup_size=raw["max_subgroup_size"],
        heaps=heaps,
        features=dict(raw["features"]),
        cooperative_matrix=coop,
        limits=dict(raw["limits"]),
        extensions=tuple(raw["extensions"]),
        usable=reason is None,
        unusable_reason=reason,
        uuid=raw.get("device_uuid"),
        pci_bus=raw.get("pci_bus"),
        coop_flexible=flexible,
        coop2_limits=dict(raw.get("cooperative_matrix2_limits", {})),
    )


def format_table(devices: list[DeviceInfo]) -> str:
    """A human-readable block per device (for `python -m vkml info`)."""
    lines = []
    for d in devices:
        lines.append(d.summary())
        if d.driver_info:
            lines.append(f"    driver info   : {d.driver_info}")
        if not d.usable:
            lines.append(f"    NOT USABLE    : {d.unusable_reason}")
        for h in d.heaps:
            kind = "device-local" if h.device_local else "host"
            budget = (f", budget {_gib(h.budget)}, in use {_gib(h.usage)}" if h.budget is not None
                      else ", no VK_EXT_memory_budget")
            lines.append(f"    heap {h.index}        : {_gib(h.size)} {kind}{budget}")
        sg = (f"{d.subgroup_size}" if d.min_subgroup_size == d.max_subgroup_size
              else f"{d.subgroup_size} ({d.min_subgroup_size}-{d.max_subgroup_size})")
        lines.append(f"    subgroup size : {sg}")
        on = [k for k, v in d.features.items() if v]
        off = [k for k, v in d.features.items() if not v]
        lines.append(f"    features      : {', '.join(on) or '-'}")
        if off:
            lines.append(f"    missing       : {', '.join(off)}")
        if d.cooperative_matrix:
            shapes = sorted({f"{c.m}x{c.n}x{c.k} {c.a_type}*{c.b_type}+{c.c_type}->{c.result_type}"
                             for c in d.cooperative_matrix if c.scope == "subgroup"})
            lines.append(f"    coop matrix   : {'; '.join(shapes)}")
        if d.coop_flexible:
            granules = sorted({f"{c.m}x{c.n}x{c.k} {c.a_type}*{c.b_type}+{c.c_type} ({c.invocations} invocations)"
                               for c in d.coop_flexible})
            lines.append(f"    coop matrix 2 : {'; '.join(granules)}")
        lim = d.limits
        lines.append(
            f"    limits        : storage buffer range {_gib(lim['max_storage_buffer_range'])}, "
            f"push constants {lim['max_push_constants_size']} B, "
            f"allocations {lim['max_memory_allocation_count']} of at most "
            f"{_gib(lim['max_memory_allocation_size'])}, "
            f"shared memory {lim['max_compute_shared_memory_size'] // 1024} KiB")
    return "\n".join(lines)
