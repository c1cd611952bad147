"""Shared pytest set-up: the slow/gpu markers and the ONNX node-suite tally."""
import collections
import os
import sys
import warnings

import numpy as np
import pytest
from hypothesis import settings

NODE_SUITE_BAR = 1500  # issue 2: at least this many of the 1884 node cases pass

# CI (.ci/run) draws the same hypothesis examples on every run, so a landing never hangs on a
# lucky search; developers' runs keep searching afresh (and remember what failed).
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.load_profile(os.environ.get("VKML_HYPOTHESIS_PROFILE", "default"))


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", help="run tests marked slow")


def pytest_collection_modifyitems(config, items):
    if not config.getoption("--runslow") and not os.environ.get("VKML_RUN_SLOW"):
        skip = pytest.mark.skip(reason="slow: run with --runslow")
        for item in items:
            if "slow" in item.keywords:
                item.add_marker(skip)


_tally = collections.Counter()


def pytest_runtest_logreport(report):
    # Each case is generated for every device; vkml's backend is "CPU" (the _cuda twins skip).
    if "OnnxBackendNodeModelTest" not in report.nodeid or not report.nodeid.endswith("_cpu"):
        return
    if report.when == "call":
        _tally[report.outcome] += 1
    elif report.when == "setup" and report.outcome == "skipped":
        _tally["skipped"] += 1


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    total = sum(_tally.values())
    mod = next((m for n, m in list(sys.modules.items()) if n.endswith("test_gpu_node_suite")), None)
    gpu = getattr(mod, "TALLY", None)
    if not total and not gpu:
        return
    terminalreporter.write_sep("=", "ONNX backend node suite")
    if total:
        terminalreporter.write_line(
            f"node suite: {_tally['passed']} of {total} cases pass ({_tally['failed']} failed, "
            f"{_tally['skipped']} skipped by tests/conformance/skips.py); bar {NODE_SUITE_BAR}"
        )
    if gpu:
        terminalreporter.write_line(
            f"node suite through GPU sessions on {gpu['device']}: "
            f"{gpu['gpu'] + gpu['mixed'] + gpu['nogpu']} of {gpu['total']} run cases pass, "
            f"{gpu['gpu']} entirely on the GPU, {gpu['mixed']} mixed, {gpu['nogpu']} with no GPU dispatch")


def pytest_sessionfinish(session, exitstatus):
    total = sum(_tally.values())
    # Enforce the bar only when the whole node suite ran (not under -k filtering).
    if total >= 1800 and _tally["passed"] < NODE_SUITE_BAR:
        session.exitstatus = 1


@pytest.fixture(autouse=True)
def _quiet_numpy():
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


@pytest.fixture
def vkml_env(monkeypatch):
    """Sets vkml's settings (VKML_* variables, vkml/config.py) for one test, through the
    environment: vkml reads each when it needs it, so running sessions see the change.
    vkml_env(VKML_GPU_TIMEOUT="1e-9") sets, vkml_env(VKML_GPU_TIMEOUT=None) unsets; a name that
    is no setting of vkml/config.py is a KeyError."""
    from vkml import config

    def set_(**values):
        for name, value in values.items():
            if name not in config.SETTINGS:
                raise KeyError(f"{name} is not a setting of vkml/config.py")
            if value is None:
                monkeypatch.delenv(name, raising=False)
            else:
                monkeypatch.setenv(name, str(value))
    return set_


@pytest.fixture(scope="session")
def gpu() -> str:
    """The first usable Vulkan device (lavapipe on CI, named as "vulkan:N"); without one this
    skips, except under CI=true, where a missing device is a failure."""
    import vkml.vulkan as vk

    reason = vk.unavailable_reason()
    usable = [] if reason is not None else [d.name for d in vk.list_devices() if d.usable]
    if not usable:
        why = f"no Vulkan: {reason}" if reason is not None else "no usable Vulkan device"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but {why}")
        pytest.skip(why)
    return usable[0]
