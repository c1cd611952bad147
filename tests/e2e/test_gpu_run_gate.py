"""VKML_GPU_RUNS: runs of a GPU plan on the native path pass a gate (vkml/runtime/_fastrun.pyx
Gate, include/run_handoff.h: spin, then sleep), fixed (N) or sized from the plan's fastest early
runs (auto); answers unchanged, never more runs inside than the width, a run that cannot get
its turn in time says so. The CPU sessions' RunGate (vkml/runtime/gate.py) keeps the same rules.
VKML_HANDOFF_SPIN_US: threads hand the GIL over through the token and get the same answers."""
import threading
import time

import numpy as np
import pytest

import vkml
from vkml.runtime import _fastrun
from vkml.runtime.gate import RunGate
from _models import cnn
from _threads import cpu_cases, hammer


def _plan(sess):
    (plan,) = sess._gpu._plans.values()
    return plan


def _gates():
    """(name, make(width), acquire(gate, timeout)) for each gate kind and spin mode."""
    return [
        ("RunGate", RunGate, lambda g, t=None: g.acquire(t)),
        ("Gate-sleep", _fastrun.Gate, lambda g, t=None: g.acquire(t)),
        ("Gate-spin", _fastrun.Gate, lambda g, t=None: g.acquire(t, 200.0)),
    ]


def _run_threads(target, n: int, timeout: float = 120.0) -> bool:
    """n threads running target(i), started together and joined (each within `timeout` s):
    whether they all ended."""
    ts = [threading.Thread(target=target, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=timeout)
    return not any(t.is_alive() for t in ts)


@pytest.mark.parametrize("kind", _gates(), ids=lambda k: k[0])
@pytest.mark.parametrize("width", [1, 3])
def test_gate_never_lets_more_than_its_width_through(kind, width):
    _, make, acquire = kind
    gate = make(width)
    inside, most, lock = [0], [0], threading.Lock()

    def worker(_):
        for i in range(50):
            assert acquire(gate, 5.0)
            with lock:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            if i % 2:
                time.sleep(0.0005)
            with lock:
                inside[0] -= 1
            gate.release()

    assert _run_threads(worker, 6)
    assert most[0] == width  # reached and never passed


@pytest.mark.parametrize("kind", _gates(), ids=lambda k: k[0])
def test_gate_times_out_and_refuses_width_zero(kind):
    _, make, acquire = kind
    gate = make(2)
    assert acquire(gate) and acquire(gate, 0.0)
    t0 = time.monotonic()
    assert not acquire(gate, 0.05)
    assert time.monotonic() - t0 >= 0.04
    gate.release()
    assert acquire(gate, 0.0)
    with pytest.raises(ValueError):
        make(0)


@pytest.mark.parametrize("spin_us", [0.0, 50.0])
def test_native_gate_wakes_every_sleeper(spin_us):
    """Threads hand one turn around many times with no timeout: a lost wake-up would hang them
    (joined with a limit). Half of them hold the turn for no time at all, so releases race the
    sleepers' second look."""
    gate = _fastrun.Gate(1)
    count = [0]
    rounds = 2000

    def worker(t):
        for i in range(rounds):
            assert gate.acquire(None, spin_us)
            count[0] += 1
            if t % 2 and i % 100 == 0:
                time.sleep(0.0002)
            gate.release()

    assert _run_threads(worker, 4), "a gate sleeper was never woken"
    assert count[0] == 4 * rounds and gate.inflight == 0
    with pytest.raises(RuntimeError):
        gate.release()


@pytest.mark.parametrize("spin", [False, True])
def test_native_gate_lets_no_waiter_starve(spin):
    """Two threads that take turns back to back (barging in, spinning or not) and one that
    arrives later: it gets a turn soon after it has waited the starvation bound (2 ms), not
    when the others stop."""
    gate = _fastrun.Gate(1)
    stop, waited = [False], []

    def busy():
        while not stop[0]:
            assert gate.acquire(10.0, 200.0 if spin else 0.0)
            time.sleep(0.0003)
            gate.release()

    ts = [threading.Thread(target=busy) for _ in range(2)]
    for t in ts:
        t.start()
    time.sleep(0.05)
    for _ in range(5):
        t0 = time.monotonic()
        assert gate.acquire(10.0)
        waited.append(time.monotonic() - t0)
        gate.release()
        time.sleep(0.001)
    stop[0] = True
    for t in ts:
        t.join(timeout=30)
    assert max(waited) < 0.5, waited  # (the bound is 2 ms; a loaded CI box is given room)
    assert gate.inflight == 0


@pytest.mark.parametrize("spin", [False, True])
def test_native_gate_loses_no_turn_to_timeouts(spin):
    """Threads that hold turns for random short times and give up after random short waits:
    afterwards every turn is free again (a turn lost to a give-up would stay taken)."""
    import random

    width = 2
    gate = _fastrun.Gate(width)
    inside, most, lock = [0], [0], threading.Lock()

    def worker(seed):
        rng = random.Random(seed)
        for _ in range(300):
            if not gate.acquire(rng.choice((0.0, 0.0002, 0.001, None)), 50.0 if spin else 0.0):
                continue
            with lock:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            if rng.random() < 0.3:
                time.sleep(rng.random() * 0.0005)
            with lock:
                inside[0] -= 1
            gate.release()

    assert _run_threads(worker, 6)
    assert most[0] <= width and gate.inflight == 0
    assert all(gate.acquire(0.0) for _ in range(width)) and not gate.acquire(0.0)


def _inside(plan):
    """Sample how many runs are past the plan's gate while the caller hammers it."""
    state = {"most": 0, "stop": False}

    def watch():
        while not state["stop"]:
            state["most"] = max(state["most"], plan.gate.inflight)
            time.sleep(0.00005)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    state["thread"] = t
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
    state = _inside(plan)
    try:
        errors = hammer(sess, [(x, want)], 6, 20)
    finally:
        state["stop"] = True
        state["thread"].join()
    assert not errors, errors[:3]
    assert state["most"] == 2  # reached and never passed
    assert plan.gate.inflight == 0


@pytest.mark.parametrize("runs", ["2", "off"])
def test_gil_token_hand_offs_keep_answers(gpu, vkml_env, runs):
    """With the hand-off spin forced on (lavapipe, a CPU device, does not spin by default),
    threads sharing a session hand the GIL over through the token: the same answers, and the
    token used."""
    vkml_env(VKML_GPU_RUNS=runs, VKML_HANDOFF_SPIN_US="300")
    model = cnn()
    sess = vkml.InferenceSession(model, devices=[gpu], max_slots=4)
    rng = np.random.default_rng(2)
    cases = cpu_cases(model, [rng.standard_normal((1, 3, 12, 12)).astype(np.float32) for _ in range(3)])
    sess.run(None, {"x": cases[0][0]})
    plan = _plan(sess)
    slot = plan.pool.acquire()
    try:
        assert plan.fast is not None and slot.program.spin_ns == 300_000
    finally:
        plan.pool.release(slot)
    spins0, stolen0 = _fastrun.token_counts()
    errors = hammer(sess, cases, 4, 40)
    assert not errors, errors[:3]
    spins, stolen = _fastrun.token_counts()
    assert spins + stolen > spins0 + stolen0  # the threads met at the token


def test_hand_off_spin_setting(vkml_env):
    from vkml import config

    vkml_env(VKML_HANDOFF_SPIN_US=None)
    assert config.handoff_spin_us("cpu") == 0.0
    vkml_env(VKML_HANDOFF_SPIN_US="25")
    assert config.handoff_spin_us("discrete_gpu") == 25.0
    vkml_env(VKML_HANDOFF_SPIN_US="-1")
    with pytest.raises(ValueError, match="VKML_HANDOFF_SPIN_US"):
        config.handoff_spin_us("discrete_gpu")


def test_auto_width_comes_from_the_fastest_early_runs(gpu, vkml_env, monkeypatch):
    from vkml import config

    vkml_env(VKML_GPU_RUNS=None)  # auto
    model = cnn()
    x = np.random.default_rng(1).standard_normal((1, 3, 12, 12)).astype(np.float32)
    # Runs with options take the usual path, the one the gate is for (the C shortcut passes none).
    ro = vkml.RunOptions()
    sess = vkml.InferenceSession(model, devices=[gpu], max_slots=8)
    sess.run(None, {"x": x}, ro)
    plan = _plan(sess)
    assert plan.gate is None and plan._calib is not None
    monkeypatch.setattr(config, "GPU_RUNS_HOST_US", 1e9)  # every run "short": the narrowest gate
    for _ in range(plan.CALIBRATE_RUNS):
        sess.run(None, {"x": x}, ro)
    assert plan._calib is None and plan.gate is not None and plan.gate.width == 2

    sess2 = vkml.InferenceSession(model, devices=[gpu], max_slots=8)
    sess2.run(None, {"x": x}, ro)
    plan2 = _plan(sess2)
    monkeypatch.setattr(config, "GPU_RUNS_HOST_US", 1e-3)  # every run "long": no gate
    for _ in range(plan2.CALIBRATE_RUNS):
        sess2.run(None, {"x": x}, ro)
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
