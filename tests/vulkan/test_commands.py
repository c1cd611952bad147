"""Command recording, hazard barriers, timeline submission and waits."""
import struct
import threading

import numpy as np
import pytest

import vkml.vulkan as vk
from vkml.vulkan._commands import CommandRecorder
from vkml.vulkan.tensor import DeviceTensor


def _relu(dev):
    return dev.pipeline("relu_f32", "rw", 16)


def _push(n):
    return struct.pack("<IIff", n, 0, 0.0, 0.0)


def _rand(n, seed=0):
    return np.random.default_rng(seed).standard_normal(n).astype(np.float32)


def test_one_dispatch(dev):
    x = _rand(1000)
    a = DeviceTensor.from_numpy(dev, x)
    o = DeviceTensor.empty(dev, x.shape, x.dtype)
    p = _relu(dev)
    rec = CommandRecorder(dev)
    rec.dispatch(p, [a.view, o.view], _push(x.size), p.groups_for(x.size))
    cb = rec.finish()
    v = cb.run()
    assert v == dev.last_submitted and dev.completed() >= v
    assert np.array_equal(o.numpy(), np.maximum(x, 0))


def test_deferred_recording_compiles_once_at_finish(dev):
    """defer=True: commands are checked when recorded, their pipelines compiled together at
    finish(); the command buffer is the same (results, barriers) as an immediate recording."""
    x = _rand(4096, seed=3)
    a, b, c = (DeviceTensor.from_numpy(dev, x) for _ in range(3))
    p = dev.pipeline("neg_f32", "rw", 16, (96,))
    q = dev.pipeline("abs_f32", "rw", 16, (96,))
    rec = CommandRecorder(dev, defer=True)
    rec.dispatch(p, [a.view, b.view], _push(x.size), p.groups_for(x.size))
    rec.copy(b.view, c.view)
    rec.dispatch(q, [c.view, a.view], _push(x.size), q.groups_for(x.size))
    assert set(rec.pending_pipelines()) == {pp for pp in (p, q) if not pp.compiled}
    with pytest.raises(ValueError, match="takes 2 buffers"):  # checked at record time
        rec.dispatch(p, [a.view], _push(x.size), 1)
    cb = rec.finish()
    assert p.compiled and q.compiled and cb.barriers == 2 and cb.dispatches == 2
    cb.run()
    assert np.array_equal(b.numpy(), -x) and np.array_equal(a.numpy(), np.abs(x))


def test_barriers_only_on_hazards(dev):
    x = _rand(4096)
    a, b, c, d = (DeviceTensor.from_numpy(dev, x) for _ in range(4))
    p = _relu(dev)
    pc = _push(x.size)
    rec = CommandRecorder(dev)
    rec.dispatch(p, [a.view, b.view], pc, 16)
    rec.dispatch(p, [c.view, d.view], pc, 16)   # independent: no barrier
    assert rec.cb.barriers == 0
    rec.dispatch(p, [b.view, c.view], pc, 16)   # reads b (written) and writes c (read): barrier
    assert rec.cb.barriers == 1
    rec.dispatch(p, [a.view, d.view], pc, 16)   # writes d, read by nobody since the barrier... but
    assert rec.cb.barriers == 1                 # d was written before the barrier: no new hazard
    rec.dispatch(p, [d.view, a.view], pc, 16)   # reads d, just written: barrier
    assert rec.cb.barriers == 2
    rec.finish().run()
    expect = np.maximum(x, 0)
    for t in (a, b, c, d):
        assert np.array_equal(t.numpy(), expect)


def test_sub_views_of_one_buffer(dev):
    """Hazards are per byte range: halves of one allocation do not conflict."""
    x = _rand(2048)
    whole = DeviceTensor.from_numpy(dev, x)
    out = DeviceTensor.empty(dev, x.shape, x.dtype)
    half = x.size // 2 * 4
    p = _relu(dev)
    rec = CommandRecorder(dev)
    rec.dispatch(p, [whole.view.sub(0, half), out.view.sub(0, half)], _push(x.size // 2), 4)
    rec.dispatch(p, [whole.view.sub(half, half), out.view.sub(half, half)], _push(x.size // 2), 4)
    assert rec.cb.barriers == 0
    rec.finish().run()
    assert np.array_equal(out.numpy(), np.maximum(x, 0))


def test_resubmit_and_gpu_waits(dev):
    x = _rand(100)
    a = DeviceTensor.from_numpy(dev, x)
    o = DeviceTensor.empty(dev, x.shape, x.dtype)
    p = _relu(dev)
    rec = CommandRecorder(dev)
    rec.dispatch(p, [a.view, o.view], _push(x.size), 1)
    cb = rec.finish()
    values = [cb.submit() for _ in range(5)]
    assert values == sorted(values) and len(set(values)) == 5
    v = cb.submit(wait=[values[-1]])
    dev.wait(v, timeout=60)
    assert dev.completed() >= v
    with pytest.raises(ValueError, match="never submitted"):
        cb.submit(wait=[dev.last_submitted + 1])
    with pytest.raises(ValueError, match="never submitted"):
        dev.wait(dev.last_submitted + 1)
    assert np.array_equal(o.numpy(), np.maximum(x, 0))


def test_copy_fill_and_constants(dev):
    a = dev.alloc(64)
    b = dev.alloc(64)
    rec = CommandRecorder(dev)
    rec.fill(a, 0x01020304)
    rec.copy(a, b, 32, 0, 32)
    c = rec.constants(b"\x07" * 16)
    rec.copy(c, b, 16, 0, 0)
    assert rec.cb.barriers == 1 and rec.cb.copies == 3  # copy after fill reads what fill wrote
    rec.finish().run()
    got = b.read(64)
    assert got[:16] == b"\x07" * 16
    assert got[32:] == bytes.fromhex("04030201") * 8
    with pytest.raises(ValueError, match="multiple of 4"):
        CommandRecorder(dev).fill(dev.alloc(6))


def test_recording_errors(dev):
    p = _relu(dev)
    a = dev.alloc(64)
    rec = CommandRecorder(dev)
    with pytest.raises(ValueError, match="takes 2 buffers"):
        rec.dispatch(p, [a], _push(16), 1)
    with pytest.raises(ValueError, match="16 bytes of push constants"):
        rec.dispatch(p, [a, a], b"1234", 1)
    with pytest.raises(ValueError, match="group count"):
        rec.dispatch(p, [a, a], _push(16), 0)
    with pytest.raises(TypeError, match="BufferView"):
        rec.dispatch(p, [a, "b"], _push(16), 1)
    with pytest.raises(ValueError, match="minStorageBufferOffsetAlignment"):
        rec.dispatch(p, [a.sub(4, 16), a.sub(32, 16)], _push(4), 1)
    cb = rec.finish()
    with pytest.raises(vk.VulkanError, match="finished"):
        rec.dispatch(p, [a, a], _push(16), 1)
    cb.run()


def test_concurrent_recording_and_submission(dev):
    p = _relu(dev)
    errors = []

    def work(seed):
        try:
            for k in range(5):
                x = _rand(3000, seed * 10 + k)
                a = DeviceTensor.from_numpy(dev, x)
                o = DeviceTensor.empty(dev, x.shape, x.dtype)
                rec = CommandRecorder(dev)
                rec.dispatch(p, [a.view, o.view], _push(x.size), p.groups_for(x.size))
                rec.finish().run(timeout=120)
                assert np.array_equal(o.numpy(), np.maximum(x, 0))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_descriptor_set_fallback_and_close(dev, vkml_env):
    """Without push descriptors the recorder allocates sets (and new pools when full)."""
    from vkml.vulkan import _instance
    from vkml.vulkan._device import Device

    vkml_env(VKML_DISABLE="push_descriptor")
    other = Device(_instance.instance(), dev.index)
    try:
        assert not other.push_descriptors
        x = _rand(64)
        a = DeviceTensor.from_numpy(other, x)
        bufs = [DeviceTensor.empty(other, x.shape, x.dtype) for _ in range(300)]
        p = _relu(other)
        rec = CommandRecorder(other)
        prev = a
        for b in bufs:
            rec.dispatch(p, [prev.view, b.view], _push(x.size), 1)
            prev = b
        cb = rec.finish()
        cb.run()
        assert np.array_equal(bufs[-1].numpy(), np.maximum(x, 0))
    finally:
        other.close()
    with pytest.raises(vk.VulkanError, match="closed"):
        cb.submit()


def test_timestamps(dev):
    if not dev.limits["timestamp_valid_bits"]:
        with pytest.raises(vk.VulkanError, match="no timestamps"):
            CommandRecorder(dev).timestamp("x")
        return
    x = _rand(1 << 16)
    a = DeviceTensor.from_numpy(dev, x)
    o = DeviceTensor.empty(dev, x.shape, x.dtype)
    p = _relu(dev)
    rec = CommandRecorder(dev)
    rec.timestamp("start")
    rec.dispatch(p, [a.view, o.view], _push(x.size), p.groups_for(x.size))
    rec.timestamp("relu")
    cb = rec.finish()
    with pytest.raises(vk.VulkanError, match="no submission"):
        cb.timestamps()
    cb.run()
    ts = cb.timestamps()
    assert [label for label, _ in ts] == ["start", "relu"]
    assert ts[0][1] == 0.0 and ts[1][1] >= 0.0


def test_scratch_shared_per_tag(dev):
    """scratch(tag, n): one buffer per tag for the whole recording, a new one only when a call
    needs more than the buffer so far; views of exactly n bytes."""
    rec = CommandRecorder(dev)
    a = rec.scratch("v", 1000)
    b = rec.scratch("v", 400)
    other = rec.scratch("m", 400)
    assert a.size == 1000 and b.size == 400
    assert b.block is a.block and b.offset == a.offset
    assert other.block is not a.block or other.offset >= a.offset + 1000 or other.offset + 400 <= a.offset
    c = rec.scratch("v", 5000)
    assert c.size == 5000 and (c.block is not a.block or c.offset != a.offset)
    assert rec.scratch("v", 10).offset == c.offset
    rec.finish()
    with pytest.raises(Exception, match="finished"):
        rec.scratch("v", 10)


def test_deferred_barriers_chain_across_transfers(dev):
    """Results of a deferred recording whose dependencies reach across a transfer-only stretch
    of commands (the validation layer checks the same recording: tests/vulkan/test_validation.py)."""
    x0 = _rand(4096, 3)
    x = DeviceTensor.from_numpy(dev, x0)
    y, z, w = dev.alloc(x.nbytes), dev.alloc(x.nbytes), dev.alloc(x.nbytes)
    p, pc = _relu(dev), _push(x0.size)
    rec = CommandRecorder(dev, defer=True)
    rec.dispatch(p, [x.view, y], pc, 16)
    rec.copy(y, z)
    rec.fill(w, 0)
    rec.copy(z, w)
    rec.dispatch(p, [y, x.view], pc, 16)
    rec.dispatch(p, [w, z], pc, 16)
    rec.finish().run()
    assert rec.cb.barriers == 3
    r = np.maximum(x0, 0)
    assert np.array_equal(x.numpy(), r)
    assert np.array_equal(np.frombuffer(z.read(), np.float32), r)
