"""The sub-allocator: alignment, reuse, budget, size limits, and host round trips."""
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import vkml.vulkan as vk
from vkml.vulkan.tensor import DeviceTensor

HYP = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _intervals_disjoint(views):
    spans = sorted((v.block.id, v.offset, v.offset + v.size) for v in views)
    for (b0, _, e0), (b1, s1, _) in zip(spans, spans[1:]):
        if b0 == b1:
            assert e0 <= s1, spans


@HYP
@given(st.lists(st.integers(1, 3 << 20), min_size=1, max_size=40))
def test_alignment_and_disjoint(dev, sizes):
    views = [dev.alloc(n) for n in sizes]
    align = dev.allocator.alignment
    assert align % dev.limits["min_storage_buffer_offset_alignment"] == 0
    for v, n in zip(views, sizes):
        assert v.offset % align == 0
        assert v.size == n
        assert v.offset + v.size <= v.block.size
    _intervals_disjoint(views)


def test_reuse_without_new_blocks(dev):
    first = [dev.alloc(1 << 20) for _ in range(4)]
    offsets = sorted((v.block.id, v.offset) for v in first)
    allocations = dev.allocator.allocations
    del first
    again = [dev.alloc(1 << 20) for _ in range(4)]
    assert sorted((v.block.id, v.offset) for v in again) == offsets
    assert dev.allocator.allocations == allocations


def test_free_coalesces(dev):
    keep = dev.alloc(256)  # keeps the block alive
    block = keep.block
    ranges_before = len(block.free_ranges)
    views = [dev.alloc(4096) for _ in range(8)]
    assert all(v.block is block for v in views)
    lo = min(v.offset for v in views)
    hi = max(v.offset + 4096 for v in views)
    adjacent = hi - lo == 8 * 4096  # unless earlier tests left holes that first fit reused
    for v in views[::2]:
        v.free()
    if adjacent:
        assert sum(1 for off, size in block.free_ranges if lo <= off < hi) == 4
    for v in views[1::2]:
        v.free()
    assert keep.block is block
    # Freeing merges with free neighbours: no range is left split, whatever the layout was.
    assert len(block.free_ranges) <= ranges_before, block.free_ranges
    for v in views:
        assert any(off <= v.offset and v.offset + 4096 <= off + size for off, size in block.free_ranges)
    if adjacent:
        assert any(off <= lo and hi <= off + size for off, size in block.free_ranges), block.free_ranges
    assert sum(size for _, size in block.free_ranges) == block.size - block.used
    with pytest.raises(ValueError, match="freed"):
        views[0].write(b"x")


def test_dedicated_block_for_large_request(dev):
    cap = dev.allocator.pools["device"].block_cap
    v = dev.alloc(cap // 2 + 4096)
    assert v.block.dedicated and v.offset == 0
    n = dev.allocator.allocations
    del v
    assert dev.allocator.allocations == n - 1


def test_too_large_for_one_binding(dev):
    limit = dev.max_storage_buffer_range
    with pytest.raises(vk.BufferTooLarge) as e:
        dev.alloc(limit + 1)
    assert dev.name in str(e.value) and "maxStorageBufferRange" in str(e.value)
    assert isinstance(e.value, MemoryError)


def test_budget_exceeded(dev):
    try:
        in_use = sum(h["reserved"] for h in dev.memory_stats()["heaps"].values())
        dev.set_memory_budget(in_use + (8 << 20))
        with pytest.raises(vk.OutOfDeviceMemory) as e:
            dev.alloc(dev.allocator.pools["device"].block_cap // 2 + (16 << 20))
        msg = str(e.value)
        assert dev.name in msg and "budget" in msg and "MiB" in msg
        assert e.value.requested > e.value.budget - e.value.in_use
        # Small blocks still fit: the allocator shrinks a new block to what is left.
        views = [dev.alloc(1 << 20) for _ in range(4)]
        assert views
    finally:
        dev.set_memory_budget(None)


def test_budget_parsing():
    from vkml.config import parse_budget

    assert parse_budget("0.5") == ("fraction", 0.5)
    assert parse_budget("6GiB") == ("bytes", float(6 << 30))
    assert parse_budget("512 MiB") == ("bytes", float(512 << 20))
    assert parse_budget(1000) == ("bytes", 1000.0)
    assert parse_budget(None) is None
    for bad in ("lots", "-1", "0", "5 parsecs"):
        with pytest.raises(ValueError):
            parse_budget(bad)


@HYP
@given(st.integers(0, 1 << 16), st.integers(0, 4096), st.sampled_from(["device", "host", "readback"]))
def test_round_trip_bytes(dev, n, offset, kind):
    data = np.random.default_rng(n).integers(0, 256, n, dtype=np.uint8)
    v = dev.alloc(n + offset, kind)
    v.write(data, offset)
    out = np.zeros(n, np.uint8)
    v.read_into(out, offset)
    assert np.array_equal(out, data)
    assert v.read(n, offset) == data.tobytes()


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "int64", "bool"])
def test_tensor_round_trip(dev, dtype):
    rng = np.random.default_rng(0)
    a = (rng.standard_normal((3, 5, 7)) * 100).astype(dtype)
    t = DeviceTensor.from_numpy(dev, a)
    assert t.shape == a.shape and t.dtype == a.dtype
    assert np.array_equal(t.numpy(), a)
    assert DeviceTensor.from_numpy(dev, np.zeros((0, 3), dtype)).numpy().shape == (0, 3)


def test_bounds_and_layout_errors(dev):
    v = dev.alloc(64)
    with pytest.raises(ValueError, match="overflows"):
        v.write(bytes(65))
    with pytest.raises(ValueError, match="overruns"):
        v.read_into(bytearray(8), 60)
    with pytest.raises(ValueError, match="contiguous"):
        v.write(np.zeros((4, 4), np.float32)[:, ::2])
    with pytest.raises(ValueError, match="exceeds"):
        v.sub(32, 64)
    s = v.sub(16, 16)
    s.write(b"0123456789abcdef")
    assert v.read(16, 16) == b"0123456789abcdef"
    with pytest.raises(ValueError, match="unknown memory kind"):
        dev.alloc(16, "vram")


@pytest.mark.parametrize("settings_env", [
    {"VKML_DISABLE": "mapped_memory", "VKML_READBACK": "staging"},
    {"VKML_READBACK": "map"},
])
def test_staging_and_mapping_paths(dev, monkeypatch, settings_env):
    """A second logical device with other settings: staging copies vs. direct mapping."""
    from vkml.vulkan import _instance
    from vkml.vulkan._device import Device

    for k, v in settings_env.items():
        monkeypatch.setenv(k, v)
    other = Device(_instance.instance(), dev.index)
    try:
        rng = np.random.default_rng(1)
        a = rng.standard_normal(3 << 20).astype(np.float32)  # 12 MiB
        t = DeviceTensor.from_numpy(other, a)
        assert t.view.mapped == ("mapped_memory" not in settings_env.get("VKML_DISABLE", ""))
        before = other.last_submitted
        assert np.array_equal(t.numpy(), a)
        if not t.view.mapped:
            assert other.last_submitted > before  # the copy went through the queue
            assert other.completed() == other.last_submitted
    finally:
        other.close()
    with pytest.raises(vk.VulkanError, match="closed"):
        t.numpy()


def test_wait_rejects_unsubmitted_value(dev):
    with pytest.raises(ValueError, match="never submitted"):
        dev.wait(dev.last_submitted + 5)
