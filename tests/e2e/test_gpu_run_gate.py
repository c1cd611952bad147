"""VKML_GPU_RUNS: runs of a GPU plan on the native path pass a gate (vkml/runtime/gate.py), fixed
(N) or sized from the plan's fastest early runs (auto); answers unchanged, never more runs
inside than the width, a run that cannot get its turn in time says so."""
import threading
import time

import numpy as np
import pytest

import vkml
from vkml.runtime.gate import RunGate
from _models import cnn
from _threads import hammer


def _plan(sess):
    (plan,) = sess._gpu._plans.values()
    return plan


@pytest.mark.parametrize("width", [1, 3])
def test_gate_never_lets_more_than_its_width_through(width):
    gate = RunGate(width)
    inside, most, lock = [0], [0], threading.Lock()

    def worker():
        for _ in range(50):
            assert gate.acquire(5.0)
            with lock:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            time.sleep(0.0005)
            with lock:
                inside[0] -= 1
            gate.release()

    ts = [threading.Thread(target=worker) for _ in range(6)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert most[0] == width  # reached and never passed


def test_gate_times_out_and_refuses_width_zero():
    gate = RunGate(2)
    assert gate.acquire() and gate.acquire(0.0)
    t0 = time.monotonic()
    assert not gate.acquire(0.05)
    assert time.monotonic() - t0 >= 0.04
    gate.release()
    assert gate.acquire(0.0)
    with pytest.raises(ValueError):
        RunGate(0)


def _counting(plan):
    """Wrap the plan's ungated run to record how many runs are inside at once."""
    inner = plan._run
    state = {"in": 0, "most": 0}
    lock = threading.Lock()

    def run(feeds, timeout):
        with lock:
            state["in"] += 1
            state["most"] = max(state["most"], state["in"])
        try:
            time.sleep(0.001)  # (long enough for the threads to pile up at the gate)
            return inner(feeds, timeout)
        finally:
            with lock:
                state["in"] -= 1

    plan._run = run
    return state


def test_fixed_width_limits_runs_and_keeps_answers(gpu, vkml_env):
    vkml_env(VKML_GPU_RUNS="2")
    model = cnn()
    sess = vkml.InferenceSession(model, devices=[gpu], max_slots=4)
    ref = vkml.InferenceSession(model, devices=["cpu"])
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 3, 12, 12)).astype(np.float32)
    want = ref.run(None, {"x": x})[0]
    sess.run(None, {"x": x})
    plan = _plan(sess)
    assert plan.fast is not None and plan.gate is not None and plan.gate.width == 2
    state = _counting(plan)
    errors = hammer(sess, [(x, want)], 6, 20)
    assert not errors, errors[:3]
    assert state["most"] == 2


def test_auto_width_comes_from_the_fastest_early_runs(gpu, vkml_env, monkeypatch):
    from vkml import config

    vkml_env(VKML_GPU_RUNS=None)  # auto
    model = cnn()
    x = np.random.default_rng(1).standard_normal((1, 3, 12, 12)).astype(np.float32)
    sess = vkml.InferenceSession(model, devices=[gpu], max_slots=8)
    sess.run(None, {"x": x})
    plan = _plan(sess)
    assert plan.gate is None and plan._calib is not None
    monkeypatch.setattr(config, "GPU_RUNS_HOST_US", 1e9)  # every run "short": the narrowest gate
    for _ in range(plan.CALIBRATE_RUNS):
        sess.run(None, {"x": x})
    assert plan._calib is None and plan.gate is not None and plan.gate.width == 2

    sess2 = vkml.InferenceSession(model, devices=[gpu], max_slots=8)
    sess2.run(None, {"x": x})
    plan2 = _plan(sess2)
    monkeypatch.setattr(config, "GPU_RUNS_HOST_US", 1e-3)  # every run "long": no gate
    for _ in range(plan2.CALIBRATE_RUNS):
        sess2.run(None, {"x": x})
    assert plan2._calib is None and plan2.gate is None


def test_off_means_no_gate_and_a_blocked_turn_times_out(gpu, vkml_env):
    model = cnn()
    x = np.zeros((1, 3, 12, 12), np.float32)
    vkml_env(VKML_GPU_RUNS="off")
    sess = vkml.InferenceSession(model, devices=[gpu])
    sess.run(None, {"x": x})
    assert _plan(sess).gate is None and _plan(sess)._calib is None
    vkml_env(VKML_GPU_RUNS="1", VKML_GPU_TIMEOUT="0.2")
    sess = vkml.InferenceSession(model, devices=[gpu])
    sess.run(None, {"x": x})
    plan = _plan(sess)
    assert plan.gate.acquire(0.0)  # someone holds the only turn
    try:
        with pytest.raises(TimeoutError, match="VKML_GPU_RUNS"):
            sess.run(None, {"x": x})
    finally:
        plan.gate.release()
    sess.run(None, {"x": x})  # usable again


def test_bad_setting_is_an_error(vkml_env):
    from vkml import config

    vkml_env(VKML_GPU_RUNS="lots")
    with pytest.raises(ValueError, match="VKML_GPU_RUNS"):
        config.gpu_runs()
