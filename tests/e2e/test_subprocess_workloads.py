"""The mixed workload of _workload.py in fresh processes (the Vulkan instance, its device
list and the validation layer are chosen once per process):

- VKML_SPLIT_DEVICE=2: one lavapipe as two logical GPUs, so splitting across GPUs and
  GPU->GPU transfers run on every commit;
- VKML_VALIDATION=1 (Khronos layer with synchronization validation; any message raises),
  with the default settings and with the fallbacks (no push descriptors, no mapped device
  memory: uploads through staging buffers, staged readback).
"""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def _run(env: dict) -> subprocess.CompletedProcess:
    full = dict(os.environ, PYTHONPATH=ROOT, VKML_SPLIT_DEVICE="2", E2E_EXPECT_GPUS="2", **env)
    return subprocess.run([sys.executable, os.path.join(HERE, "_workload.py")], env=full, capture_output=True,
                          text=True, timeout=600, cwd=ROOT)


def test_two_logical_gpus(gpu):
    r = _run({})
    assert r.returncode == 0 and "E2E-OK" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]


@pytest.mark.parametrize("settings_env", [
    {},
    {"VKML_DISABLE": "push_descriptor,mapped_memory", "VKML_READBACK": "staging"},
], ids=["default", "fallbacks"])
def test_validation_layer_is_clean(gpu, settings_env):
    probe = subprocess.run([sys.executable, "-c", "import vkml.vulkan as v; print(v.unavailable_reason())"],
                           env=dict(os.environ, PYTHONPATH=ROOT, VKML_VALIDATION="1"), capture_output=True,
                           text=True, timeout=120, cwd=ROOT)
    if "validation" in probe.stdout and "not installed" in probe.stdout:
        pytest.skip("the Khronos validation layer is not installed")
    r = _run({"VKML_VALIDATION": "1", "E2E_GRAPHS": "6", "E2E_RUNS": "5", **settings_env})
    assert r.returncode == 0 and "E2E-OK" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]


def test_split_setting_is_checked(gpu):
    code = "import vkml.vulkan as v; print(len(v.list_devices())); print(v.unavailable_reason())"
    ok = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=ROOT, VKML_SPLIT_DEVICE="3"),
                        capture_output=True, text=True, timeout=120, cwd=ROOT)
    one = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=ROOT, VKML_SPLIT_DEVICE="1"),
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert int(ok.stdout.split()[0]) == 3 * int(one.stdout.split()[0])
    bad = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=ROOT, VKML_SPLIT_DEVICE="two"),
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert "VKML_SPLIT_DEVICE must be an integer" in bad.stdout, bad.stdout + bad.stderr


OOM = """
import sys
sys.path.insert(0, {here!r})
import numpy as np, vkml, vkml.vulkan as vk
from _models import mlp
model = mlp(hidden=1024)
x = np.random.default_rng(0).standard_normal((512, 16)).astype(np.float32)
want = vkml.InferenceSession(model, devices=["cpu"]).run(None, {{"x": x}})[0]
dev = vk.device(0)
hog = dev.alloc(30 << 20)   # the budget (40 MiB) is mostly taken: the plan's slot cannot fit
sess = vkml.InferenceSession(model, devices=["vulkan:0"])
got = sess.run(None, {{"x": x}})[0]
np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
rows = sess.placement()
assert any(r["device"] == "cpu" and "budget full" in r["reason"] for r in rows), rows
print("OOM-OK", sum(r["device"] == "vulkan:0" for r in rows))
"""


def test_no_room_for_a_slot_spills_to_the_cpu(gpu):
    r = subprocess.run([sys.executable, "-c", OOM.format(here=HERE)], capture_output=True, text=True, timeout=300,
                       cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT, VKML_MEMORY_BUDGET="40MiB"))
    assert r.returncode == 0 and "OOM-OK" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
