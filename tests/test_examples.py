"""The scripts in examples/ run as a user would run them: each in a fresh process, from a
directory outside the checkout, on the CPU and on a Vulkan device (the `gpu` fixture: skipped
without Vulkan, a failure under CI=true). Each must exit 0 and print the line that says it did
its job."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")


def run_example(tmp_path, name: str, *args: str, **env: str) -> str:
    """Run examples/<name> with `args` in tmp_path; its stdout, after asserting exit code 0."""
    full = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])), **env)
    r = subprocess.run([sys.executable, os.path.join(EXAMPLES, name), *args], cwd=tmp_path, env=full,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"{name} {' '.join(args)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}"
    return r.stdout


def device_args(where: str, request) -> tuple[str, list[str]]:
    """('cpu', []) or (the gpu fixture's device, ['--device', it])."""
    if where == "cpu":
        return "cpu", []
    dev = request.getfixturevalue("gpu")
    return dev, ["--device", dev]


@pytest.mark.parametrize("where", ["cpu", "gpu"])
def test_threaded_server(tmp_path, where, request):
    dev, args = device_args(where, request)
    out = run_example(tmp_path, "threaded_server.py", *args)
    assert f"session on {[dev] if dev == 'cpu' else [dev, 'cpu']}" in out, out
    m = re.search(r"served 120 requests on 4 threads: (\d+) right", out)
    assert m and int(m.group(1)) >= 110, out  # the shipped model gets 98.9% of its test set right
    assert "run_batch: 120 results in order, identical to the threaded answers" in out, out


@pytest.mark.parametrize("where", ["cpu", "gpu"])
def test_io_binding(tmp_path, where, request):
    dev, args = device_args(where, request)
    out = run_example(tmp_path, "io_binding.py", *args)
    assert f"encoder output: <vkml.Tensor [32, 128] float32 on {dev}>" in out, out
    assert f"chained 2 runs on {dev} with device-resident I/O" in out, out


def test_multi_gpu_cpu(tmp_path):
    out = run_example(tmp_path, "multi_gpu.py")
    assert "ran on cpu: 18 nodes, 0 device crossings" in out, out


def test_multi_gpu_one_gpu(tmp_path, gpu):
    out = run_example(tmp_path, "multi_gpu.py", "--device", gpu)
    assert f"ran on {gpu}, cpu: 18 nodes" in out, out  # the cap spilled the rest to the CPU
    assert "with placement=: 1 device crossing(s)" in out, out


def test_multi_gpu_split_device(tmp_path, gpu):
    # VKML_SPLIT_DEVICE=2 opens each Vulkan device as two: vulkan:k becomes vulkan:2k and 2k+1.
    k = int(gpu.split(":")[1])
    pair = f"vulkan:{2 * k},vulkan:{2 * k + 1}"
    out = run_example(tmp_path, "multi_gpu.py", "--device", pair, VKML_SPLIT_DEVICE="2")
    assert f"ran on {pair.replace(',', ', ')}: 18 nodes" in out, out
    assert "with placement=: 1 device crossing(s)" in out, out


@pytest.mark.parametrize("where", ["cpu", "gpu"])
def test_ort_migration(tmp_path, where, request):
    dev, args = device_args(where, request)
    out = run_example(tmp_path, "ort_migration.py", *args)
    want = ["CPUExecutionProvider"] if dev == "cpu" else ["VulkanExecutionProvider", "CPUExecutionProvider"]
    assert f"providers: {want}" in out, out
    assert "profile: 2 events, logids ['', 'second-run']" in out, out
    assert "model: classifier v3 by examples/ort_migration.py" in out, out
    assert not os.listdir(tmp_path), "the example leaves nothing behind in its working directory"
