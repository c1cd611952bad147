"""Fixtures for the Vulkan runtime tests: the device under test, skipped without Vulkan.

VKML_TEST_DEVICE=N picks the physical device (default 0). On CI it is lavapipe.
"""
import os
import tempfile

import pytest

# Pipeline caches of test runs go to a scratch directory, not ~/.cache/vkml.
os.environ.setdefault("VKML_CACHE_DIR", tempfile.mkdtemp(prefix="vkml-test-cache-"))

import vkml.vulkan as vk


def _index() -> int:
    return int(os.environ.get("VKML_TEST_DEVICE", "0"))


@pytest.fixture(scope="session")
def dev():
    reason = vk.unavailable_reason()
    if reason is not None:
        pytest.skip(f"no Vulkan: {reason}")
    return vk.device(_index())


@pytest.fixture(scope="session")
def info():
    reason = vk.unavailable_reason()
    if reason is not None:
        pytest.skip(f"no Vulkan: {reason}")
    return vk.list_devices()[_index()]


@pytest.fixture(params=["subgroups", "shared"])
def path(request, dev, vkml_env):
    """Both workgroup reductions: subgroup arithmetic (where the device has it) and the
    shared-memory tree (VKML_NO_SUBGROUPS, read as each kernel is recorded)."""
    import vkml.kernels.reduce as kreduce

    if request.param == "shared":
        vkml_env(VKML_NO_SUBGROUPS="1")
        assert kreduce.wg_mode_name(dev) == "wgs"
    else:
        vkml_env(VKML_NO_SUBGROUPS=None)
        if not kreduce.subgroup_arith(dev):
            pytest.skip("the device has no subgroup arithmetic in compute shaders")
    return request.param
