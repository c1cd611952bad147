"""Device listing, and what happens without a Vulkan loader."""
import os
import re
import shutil
import subprocess
import sys

import pytest

import vkml.vulkan as vk

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(code: str, **env) -> subprocess.CompletedProcess:
    e = dict(os.environ, PYTHONPATH=ROOT, **env)
    return subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True,
                          timeout=120, cwd=ROOT)


def test_listing_fields(info):
    assert info.name == f"vulkan:{info.index}"
    assert info.device_name
    assert info.device_type in ("discrete", "integrated", "virtual", "cpu", "other")
    assert info.heaps and any(h.device_local for h in info.heaps)
    assert info.subgroup_size >= 1
    assert info.min_subgroup_size <= info.subgroup_size <= info.max_subgroup_size
    # Spec minimums: a limit below them means the structure layout is wrong.
    assert info.limits["max_storage_buffer_range"] >= 1 << 27
    assert info.limits["max_push_constants_size"] >= 128
    assert info.limits["max_compute_work_group_invocations"] >= 128
    assert info.limits["min_storage_buffer_offset_alignment"] in (1, 2, 4, 8, 16, 32, 64, 128, 256)
    assert info.limits["non_coherent_atom_size"] in (1, 2, 4, 8, 16, 32, 64, 128, 256)
    for key in ("fp16_arithmetic", "storage_16bit", "timeline_semaphore", "push_descriptor",
                "cooperative_matrix", "memory_budget"):
        assert key in info.features
    if info.features["memory_budget"]:
        assert all(h.budget is not None and h.budget <= h.size * 2 for h in info.heaps)
    else:
        assert all(h.budget is None for h in info.heaps)
    if info.features["cooperative_matrix"]:
        assert info.cooperative_matrix
    assert info.usable, info.unusable_reason


def test_format_table(info):
    text = vk.format_table(vk.list_devices())
    assert info.name in text and info.device_name in text
    assert "subgroup size" in text


@pytest.mark.skipif(shutil.which("vulkaninfo") is None, reason="vulkaninfo not installed")
def test_matches_vulkaninfo(info):
    out = subprocess.run(["vulkaninfo"], capture_output=True, text=True, timeout=120).stdout
    if "maxStorageBufferRange" not in out:
        pytest.skip("vulkaninfo printed no device properties")
    # One block per GPU; ours must be among them (column alignment varies by version).
    assert info.device_name in re.findall(r"deviceName\s*=\s*(.+)", out)
    assert str(info.limits["max_storage_buffer_range"]) in re.findall(r"maxStorageBufferRange\s*=\s*(\d+)", out)
    assert str(info.subgroup_size) in re.findall(r"\bsubgroupSize\s*=\s*(\d+)", out)
    # the device UUID (VkPhysicalDeviceIDProperties) as vulkaninfo prints it, dashes or not
    uuids = {u.replace("-", "").lower() for u in re.findall(r"deviceUUID\s*=\s*([0-9a-fA-F-]+)", out)}
    assert info.uuid is not None and re.fullmatch(r"[0-9a-f]{32}", info.uuid)
    if uuids:
        assert info.uuid in uuids
    if info.pci_bus is not None:
        assert re.fullmatch(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", info.pci_bus)
    nc = re.findall(r"nonCoherentAtomSize\s*=\s*(0x[0-9a-fA-F]+|\d+)", out)
    assert info.limits["non_coherent_atom_size"] in {int(v, 0) for v in nc}


def test_no_loader_imports_and_says_why():
    r = _run("import vkml, vkml.vulkan as v; print(v.available()); print(v.unavailable_reason()); "
             "print(v.list_devices())", VKML_VULKAN_LIBRARY="/nonexistent/libvulkan.so.1")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "False"
    assert "/nonexistent/libvulkan.so.1" in lines[1] and "cannot load the Vulkan loader" in lines[1]
    assert lines[2] == "[]"


def test_not_a_loader():
    r = _run("import vkml.vulkan as v; print(v.unavailable_reason())", VKML_VULKAN_LIBRARY="libm.so.6")
    assert r.returncode == 0, r.stderr
    assert "vkGetInstanceProcAddr" in r.stdout


def test_disabled_by_env():
    r = _run("import vkml.vulkan as v; print(v.unavailable_reason())\n"
             "try:\n    v.device(0)\nexcept v.VulkanUnavailable as e:\n    print('raised', e)",
             VKML_VULKAN="0")
    assert r.returncode == 0, r.stderr
    assert "VKML_VULKAN=0" in r.stdout and "raised" in r.stdout


def test_bad_index(dev):
    with pytest.raises(IndexError, match="no Vulkan device vulkan:99"):
        vk.device(99)
