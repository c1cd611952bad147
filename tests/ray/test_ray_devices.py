"""How a Ray worker finds its Vulkan devices (vkml/ray/_devices.py), without a cluster: Ray's
GPU ids against fake device lists, by UUID, PCI bus and index, and the host-wide claims of
the custom "vulkan" resource."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import pytest

from _ray_support import need_ray

need_ray()
import vkml.ray  # noqa: E402
from vkml.ray import _devices  # noqa: E402

NV, INTEL = 0x10DE, 0x8086
UUIDS = ["8d6b5a1c-43f5-2e06-1a3b-0f6a6e1c2d11", "0b1e7a3f-9c2d-4e5f-8a6b-7c8d9e0f1a2b"]


@dataclass
class FakeVulkan:
    index: int
    vendor_id: int


@dataclass
class FakeDevice:
    """Shaped like vkml.DeviceInfo; `details` may carry "uuid" and "pci bus"."""
    name: str
    kind: str = "discrete"
    details: dict[str, Any] = field(default_factory=dict)
    vulkan: Any = None


def gpu(index: int, vendor: int = NV, **details) -> FakeDevice:
    return FakeDevice(f"vulkan:{index}", "integrated" if vendor == INTEL else "discrete", details,
                      FakeVulkan(index, vendor))


def test_index_is_the_fallback_within_the_vendor():
    gpus = [gpu(0, INTEL), gpu(1), gpu(2)]  # an integrated GPU enumerated first
    assert vkml.ray.match_gpus(["0"], gpus, {}, NV) == (["vulkan:1"], "index")
    assert vkml.ray.match_gpus(["1", "0"], gpus, {}, NV) == (["vulkan:2", "vulkan:1"], "index")
    assert vkml.ray.match_gpus(["0"], gpus, {}, None) == (["vulkan:0"], "index")  # vendor unknown


def test_uuid_wins_over_enumeration_order():
    gpus = [gpu(0, uuid="GPU-" + UUIDS[1]), gpu(1, uuid=bytes.fromhex(UUIDS[0].replace("-", "")))]
    host = {"0": {"uuid": "GPU-" + UUIDS[0], "pci": "00000000:17:00.0"},
            "1": {"uuid": "GPU-" + UUIDS[1], "pci": "00000000:65:00.0"}}
    assert vkml.ray.match_gpus(["0"], gpus, host, NV) == (["vulkan:1"], "uuid")
    # the raylet started with CUDA_VISIBLE_DEVICES=GPU-...: Ray's ids are UUIDs
    assert vkml.ray.match_gpus(["GPU-" + UUIDS[1]], gpus, {}, NV) == (["vulkan:0"], "uuid")


def test_pci_bus_when_there_is_no_uuid():
    gpus = [gpu(0, **{"pci bus": "0000:65:00.0"}), gpu(1, **{"pci bus": "0000:17:00.0"})]
    host = {"0": {"uuid": "GPU-" + UUIDS[0], "pci": "00000000:17:00.0"},
            "1": {"uuid": "GPU-" + UUIDS[1], "pci": "00000000:65:00.0"}}
    assert vkml.ray.match_gpus(["0", "1"], gpus, host, NV) == (["vulkan:1", "vulkan:0"], "pci")
    assert vkml.ray.match_gpus(["GPU-" + UUIDS[1]], gpus, host, NV) == (["vulkan:0"], "pci")


def test_a_driver_that_hides_unassigned_gpus():
    # One GPU visible to Vulkan, Ray's id 3: the driver honoured the visible-devices variable.
    assert vkml.ray.match_gpus(["3"], [gpu(0)], {}, NV) == (["vulkan:0"], "index")


def test_unmatched_ids_say_what_was_seen():
    with pytest.raises(RuntimeError, match=r"vkml sees 2 Vulkan GPU\(s\)"):
        vkml.ray.match_gpus(["5"], [gpu(0), gpu(1)], {}, NV)
    with pytest.raises(RuntimeError, match="names no Vulkan device"):
        vkml.ray.match_gpus(["GPU-" + UUIDS[0]], [gpu(0), gpu(1)], {}, NV)


def test_normalizing_identities():
    assert _devices.normalize_uuid("GPU-" + UUIDS[0].upper()) == UUIDS[0].replace("-", "")
    assert _devices.normalize_uuid(b"\x01" * 16) == "01" * 16
    assert _devices.normalize_uuid("GPU-123") is None and _devices.normalize_uuid(None) is None
    assert _devices.normalize_pci("00000000:17:00.0") == _devices.normalize_pci("0000:17:00.0") == (0, 0x17, 0, 0)
    assert _devices.normalize_pci("17:00.1") == (0, 0x17, 0, 1) and _devices.normalize_pci("nope") is None


def test_vulkan_resource_claims_are_exclusive_per_host(tmp_path):
    held = len(_devices._held_locks)
    try:
        names = ["vulkan:0", "vulkan:1"]
        assert _devices._claim(names, 1, str(tmp_path)) == ["vulkan:0"]
        assert _devices._claim(names, 1, str(tmp_path)) == ["vulkan:1"]  # (flock conflicts within a process too)
        with pytest.raises(RuntimeError, match=r"only 0 of this host's Vulkan devices"):
            _devices._claim(names, 1, str(tmp_path))
        assert sorted(os.listdir(tmp_path)) == ["vulkan-0.lock", "vulkan-1.lock"]
    finally:
        while len(_devices._held_locks) > held:
            os.close(_devices._held_locks.pop())
    assert _devices._claim(["vulkan:0"], 1, str(tmp_path)) == ["vulkan:0"]  # free again once released
    os.close(_devices._held_locks.pop())


def test_explicit_devices_are_used_as_given():
    assert vkml.ray.assigned_devices(["vulkan:0", ["vulkan:1", "vulkan:2"]]) == (
        ["vulkan:0", ["vulkan:1", "vulkan:2"]], {"ray_gpu_ids": [], "vulkan_units": 0.0, "matched_by": "explicit"})
    assert vkml.ray.assigned_devices("cpu")[0] == ["cpu"]
    with pytest.raises(ValueError, match="devices= is empty"):
        vkml.ray.assigned_devices([])


def test_outside_a_ray_worker_it_is_the_cpu_and_ray_stays_off():
    import ray

    if ray.is_initialized():
        pytest.skip("a Ray instance is already up in this process")
    devices, record = vkml.ray.assigned_devices()
    assert devices == ["cpu"] and record["matched_by"].endswith("the CPU device"), record
    assert not ray.is_initialized()  # asking Ray's runtime context would have started one
