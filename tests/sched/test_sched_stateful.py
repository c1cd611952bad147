"""A hypothesis state machine: runs are started, polled, waited on (with and without timeouts,
several threads at once) and failed, concurrently from several Python threads."""
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, rule

from sched_dags import make_dag
from vkml.runtime import _sched as S

WAIT = 30.0  # seconds: longer means a deadlock


def chain_plan(tasks) -> S.Plan:
    n = len(tasks)
    ip = np.minimum(np.arange(n + 1), n - 1).astype(np.int32)
    return S.Plan(ip, np.arange(1, n, dtype=np.int32), [f"c{i}" for i in range(n)], tasks)


def fan_plan(tasks, prefix: str) -> S.Plan:
    """Task 0 fans out to 1..n-2, which all feed task n-1."""
    n = len(tasks)
    succ = [list(range(1, n - 1))] + [[n - 1]] * (n - 2) + [[]]
    ip = np.cumsum([0] + [len(x) for x in succ]).astype(np.int32)
    ix = np.array([j for x in succ for j in x], np.int32)
    return S.Plan(ip, ix, [f"{prefix}{i}" for i in range(n)], tasks)


def appender(i):
    return lambda arg: arg.append(i)


def python_boom(arg):
    raise ValueError("stateful failure")


def build_plans() -> dict:
    layered = make_dag(80, "layered", seed=6, density=2.0)
    return {
        "python_chain": (chain_plan([appender(i) for i in range(15)]), "ok"),
        "native_fan": (fan_plan([S.native_spin(20)] * 40, "n"), "ok"),
        "mixed_layered": (S.Plan(layered.indptr, layered.indices, [str(i) for i in range(80)],
                                 [appender(i) if i % 3 else S.native_noop() for i in range(80)]),
                          "ok"),
        "async": (chain_plan([S.native_async(300), appender(1), S.native_async(0)]), "ok"),
        "slow": (chain_plan([S.native_sleep(20_000), appender(0), S.native_sleep(20_000)]), "ok"),
        "python_fail": (chain_plan([S.native_sleep(2_000), python_boom, appender(2)]), "py"),
        "native_fail": (fan_plan([S.native_fail(-7) if i == 20 else appender(i)
                                  for i in range(40)], "f"), "native"),
    }


PLANS = build_plans()
EXPECTED_APPENDS = {"python_chain": list(range(15)), "async": [1], "slow": [0]}


@dataclass
class Started:
    name: str
    handle: S.RunHandle
    arg: list


def check(entry: Started, error: BaseException | None) -> None:
    kind = PLANS[entry.name][1]
    if kind == "ok":
        assert error is None, repr(error)
        if entry.name in EXPECTED_APPENDS:
            assert entry.arg == EXPECTED_APPENDS[entry.name]
        elif entry.name == "mixed_layered":
            assert sorted(entry.arg) == [i for i in range(80) if i % 3]
    elif kind == "py":
        assert isinstance(error, ValueError) and str(error) == "stateful failure", repr(error)
        assert error.__notes__ == ["in task 'c1' (index 1) of a vkml plan"]
        assert entry.arg == []
    else:
        assert isinstance(error, S.TaskError) and error.status == -7, repr(error)
        assert error.task_name == "f20"
        assert 39 not in entry.arg  # the fan-in task is downstream of the failure


def wait_and_check(entry: Started, timeout: float | None) -> None:
    try:
        entry.handle.wait(WAIT if timeout is None else timeout)
    except TimeoutError:
        assert timeout is not None, f"{entry.name} did not end within {WAIT} s (deadlock)"
        return
    except BaseException as e:  # noqa: BLE001 - checked below
        check(entry, e)
        assert entry.handle.done
        return
    assert entry.handle.done
    check(entry, None)


class SchedulerMachine(RuleBasedStateMachine):
    runs = Bundle("runs")

    def __init__(self):
        super().__init__()
        self.pool = ThreadPoolExecutor(4)
        self.started: list[Started] = []

    @rule(target=runs, name=st.sampled_from(sorted(PLANS)), from_thread=st.booleans())
    def start(self, name, from_thread):
        arg = []
        plan = PLANS[name][0]
        if from_thread:
            handle = self.pool.submit(plan.start, arg).result(timeout=WAIT)
        else:
            handle = plan.start(arg)
        entry = Started(name, handle, arg)
        self.started.append(entry)
        return entry

    @rule(entry=runs, timeout=st.sampled_from([0.0, 0.001, 0.02, None]))
    def wait(self, entry, timeout):
        self.pool.submit(wait_and_check, entry, timeout).result(timeout=WAIT + 5)

    @rule(entries=st.lists(runs, min_size=2, max_size=5))
    def wait_concurrently(self, entries):
        futures = [self.pool.submit(wait_and_check, e, None) for e in entries]
        for f in futures:
            f.result(timeout=WAIT + 5)

    @rule(name=st.sampled_from(sorted(PLANS)), k=st.integers(2, 6))
    def run_from_threads(self, name, k):
        def one():
            entry = Started(name, None, [])
            try:
                entry.handle = PLANS[name][0].start(entry.arg)
                entry.handle.wait(WAIT)
            except TimeoutError:
                raise AssertionError(f"{name} did not end within {WAIT} s (deadlock)")
            except BaseException as e:  # noqa: BLE001
                check(entry, e)
                return
            check(entry, None)

        futures = [self.pool.submit(one) for _ in range(k)]
        for f in futures:
            f.result(timeout=WAIT + 5)

    @rule(entry=runs)
    def poll(self, entry):
        assert entry.handle.done in (True, False)

    def teardown(self):
        try:
            for entry in self.started:
                wait_and_check(entry, None)
        finally:
            self.pool.shutdown(wait=True)


SchedulerMachine.TestCase.settings = settings(
    max_examples=25, stateful_step_count=25, deadline=None,
    suppress_health_check=[HealthCheck.too_slow])
TestScheduler = SchedulerMachine.TestCase
