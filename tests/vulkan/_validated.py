"""Run a workload in a fresh process under the Khronos validation layer (VKML_VALIDATION=1:
every layer message raises there). The workload prints VALIDATION-CLEAN when it gets through;
the test skips where the layer is not installed."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_validated(code: str, timeout: float = 600, **extra_env: str) -> None:
    env = dict(os.environ, PYTHONPATH=ROOT, VKML_VALIDATION="1", **extra_env)
    probe = subprocess.run([sys.executable, "-c", "import vkml.vulkan as v; print(v.unavailable_reason())"],
                           env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)
    if "validation" in probe.stdout and "not installed" in probe.stdout:
        pytest.skip("the Khronos validation layer is not installed")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=timeout, cwd=ROOT)
    assert r.returncode == 0 and "VALIDATION-CLEAN" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
