"""End-to-end tests: whole models through InferenceSession on the GPUs (lavapipe on CI, named
explicitly as "vulkan:0"), the CPU, and both.

VKML_SPLIT_DEVICE=2 in the environment opens the one device as "vulkan:0" and "vulkan:1",
so the multi-GPU paths run too (test_multi_gpu.py does that in a subprocess regardless).
"""
import os
import sys
import tempfile

import pytest

os.environ.setdefault("VKML_CACHE_DIR", tempfile.mkdtemp(prefix="vkml-test-cache-"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import vkml.vulkan as vk  # noqa: E402


@pytest.fixture(scope="session")
def gpu_on_cpu(gpu) -> bool:
    """Whether `gpu` is a CPU-type Vulkan device (lavapipe): it runs on this machine's cores, so
    tests keep its work small; a real GPU needs more of it to outlast a wait's first spin."""
    return next(d for d in vk.list_devices() if d.name == gpu).device_type == "cpu"


@pytest.fixture(scope="session")
def gpus(gpu) -> list[str]:
    """Every usable Vulkan device (two with VKML_SPLIT_DEVICE=2 on one lavapipe)."""
    return [d.name for d in vk.list_devices() if d.usable]
