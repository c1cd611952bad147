"""The Khronos validation layer (VKML_VALIDATION=1, synchronization validation included)
reports nothing for vkml's own work, and its messages become Python exceptions.

Runs in subprocesses: the instance (and so the layer) is chosen once per process.
To validate the whole suite: VKML_VALIDATION=1 python -m pytest tests/vulkan
"""
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

WORKLOAD = textwrap.dedent("""
    import numpy as np
    import vkml.vulkan as vk
    from vkml.vulkan import _instance
    from vkml.vulkan._commands import CommandRecorder
    from vkml.vulkan.tensor import DeviceTensor
    from vkml.runtime.testing import run_ops

    assert _instance.instance().validation, "validation layer not enabled"
    dev = vk.device(int(__import__("os").environ.get("VKML_TEST_DEVICE", "0")))
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 1, 5)).astype(np.float32)
    b = rng.standard_normal((4, 1)).astype(np.float32)
    ops = [("Add", {}, ["a", "b"], ["c"]), ("Relu", {}, ["c"], ["d"]), ("Less", {}, ["a", "b"], ["m"]),
           ("Where", {}, ["m", "d", "b"], ["w"]), ("Cast", {"to": 10}, ["w"], ["h"]),
           ("Tanh", {}, ["h"], ["t"]), ("Cast", {"to": 7}, ["d"], ["i"]), ("Abs", {}, ["i"], ["j"]),
           ("Clip", {}, ["a", "lo", "hi"], ["k"]), ("Max", {}, ["a", "b", "c"], ["mx"]),
           ("Pow", {}, ["t", "i"], ["p"]), ("Identity", {}, ["p"], ["q"])]
    feeds = {"a": a, "b": b, "lo": np.float32(-0.5), "hi": np.float32(0.5)}
    out = run_ops(dev, ops, feeds)
    out2 = run_ops(dev, ops, feeds, consts=False)
    assert np.array_equal(out["d"], np.maximum(a + b, 0))
    assert np.array_equal(out2["k"], np.clip(a, -0.5, 0.5))
    # host transfers, copies, fills, resubmission with GPU-side waits, timestamps
    big = DeviceTensor.from_numpy(dev, rng.standard_normal(1 << 20).astype(np.float32))
    dst = dev.alloc(big.nbytes)
    rec = CommandRecorder(dev)
    rec.timestamp("start")
    rec.copy(big.view, dst)
    rec.fill(big.view, 0)
    rec.copy(dst, big.view)
    rec.timestamp("end")
    cb = rec.finish()
    v1 = cb.submit()
    v2 = cb.submit(wait=[v1])
    dev.wait(v2)
    assert len(cb.timestamps()) == 2
    assert big.numpy().shape == (1 << 20,)
    # a deferred recording whose dependencies reach across a stretch of transfers
    n = 1 << 12
    relu = dev.pipeline("relu_f32", "rw", 16)
    push = __import__("struct").pack("<IIff", n, 0, 0.0, 0.0)
    x0 = rng.standard_normal(n).astype(np.float32)
    x = DeviceTensor.from_numpy(dev, x0)
    y, z, w = dev.alloc(4 * n), dev.alloc(4 * n), dev.alloc(4 * n)
    rec = CommandRecorder(dev, defer=True)
    rec.dispatch(relu, [x.view, y], push, n // 256)   # compute writes y
    rec.copy(y, z)                                    # compute -> transfer
    rec.fill(w, 0)
    rec.copy(z, w)                                    # transfer -> transfer and compute
    rec.dispatch(relu, [y, x.view], push, n // 256)   # y from two barriers back; x read back then
    rec.dispatch(relu, [w, z], push, n // 256)        # transfer and compute -> compute
    rec.finish().run()
    r = np.maximum(x0, 0)
    assert np.array_equal(x.numpy(), r)
    assert np.array_equal(np.frombuffer(bytes(z.read()), np.float32), r)
    dev.save_pipeline_cache()
    vk.close_all()
    print("VALIDATION-CLEAN")
""")

HAZARD = textwrap.dedent("""
    import struct
    import numpy as np
    import vkml.vulkan as vk
    from vkml.vulkan._commands import CommandRecorder
    from vkml.vulkan.tensor import DeviceTensor

    dev = vk.device(int(__import__("os").environ.get("VKML_TEST_DEVICE", "0")))
    p = dev.pipeline("relu_f32", "rw", 16)
    x = np.ones(256, np.float32)
    a, o, o2 = (DeviceTensor.from_numpy(dev, x) for _ in range(3))
    rec = CommandRecorder(dev, auto_barriers=False)   # deliberately unsynchronised
    push = struct.pack("<IIff", 256, 0, 0, 0)
    try:
        rec.dispatch(p, [a.view, o.view], push, 1)
        rec.dispatch(p, [o.view, o2.view], push, 1)   # reads o right after it was written
        rec.finish().run()
    except vk.ValidationError as e:
        print("RAISED", e.messages[0][:200])
    else:
        print("NOT RAISED")
""")


def _run(code: str, extra_env: dict) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=ROOT, VKML_VALIDATION="1", **extra_env)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=600, cwd=ROOT)


@pytest.fixture(scope="module")
def layer(dev):
    r = _run("import vkml.vulkan as v; print(v.unavailable_reason())", {})
    if "validation" in r.stdout and "not installed" in r.stdout:
        pytest.skip("the Khronos validation layer is not installed")
    assert r.returncode == 0, r.stderr
    return True


@pytest.mark.parametrize("settings_env", [
    {},
    {"VKML_DISABLE": "push_descriptor,mapped_memory", "VKML_READBACK": "staging"},
], ids=["default", "fallbacks"])
def test_workload_is_validation_clean(layer, settings_env):
    r = _run(WORKLOAD, settings_env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "VALIDATION-CLEAN" in r.stdout


def test_messages_become_exceptions(layer):
    r = _run(HAZARD, {})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "RAISED" in r.stdout and "SYNC-HAZARD-READ-AFTER-WRITE" in r.stdout, r.stdout


def test_injected_message_raises_at_next_call(dev):
    """The C-side queue -> Python exception path, without needing the layer."""
    import vkml.vulkan as vk
    from vkml.vulkan import _instance

    _instance._push_test_message("something went wrong")
    with pytest.raises(vk.ValidationError, match="something went wrong"):
        dev.completed()   # any checked Vulkan call raises it
    dev.completed()       # and the queue is empty afterwards
    _instance._push_test_message("again")
    with pytest.raises(vk.ValidationError, match="again"):
        dev.alloc(64)     # allocation is an API boundary too, even without a Vulkan call


def test_a_layer_older_than_the_driver_is_logged_not_raised(dev, caplog):
    """A layer that does not know a structure of the driver's newer extensions (a pNext-pNext
    message) is not vkml's error: it goes to the vkml logger once, and other messages still
    raise."""
    import logging

    import vkml.vulkan as vk
    from vkml.vulkan import _instance

    old = ("[VUID-VkPhysicalDeviceProperties2-pNext-pNext] Validation Error: vkGetPhysicalDeviceProperties2: "
           "pProperties->pNext chain includes a structure with unknown VkStructureType (1000593002); "
           "Allowed structures are [...]")
    with caplog.at_level(logging.WARNING, logger="vkml"):
        for _ in range(3):
            _instance._push_test_message(old)
            dev.completed()
    assert sum("does not know a structure" in r.getMessage() for r in caplog.records) == 1
    _instance._push_test_message(old)
    _instance._push_test_message("a real error")
    with pytest.raises(vk.ValidationError, match="a real error") as e:
        dev.completed()
    assert "1000593002" not in str(e.value)
