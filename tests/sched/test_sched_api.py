"""The scheduler's Python API: validation, errors, asynchronous and nested tasks, waiting."""
import gc
import pickle
import signal
import sys
import threading
import time
import weakref

import numpy as np
import pytest

from sched_dags import check_order, make_dag
from vkml.runtime import _sched as S


def chain(n: int, callables, deps=None) -> S.Plan:
    indptr = np.minimum(np.arange(n + 1), n - 1).astype(np.int32)
    indices = np.arange(1, n, dtype=np.int32)
    return S.Plan(indptr, indices, [f"t{i}" for i in range(n)], callables, deps=deps)


@pytest.fixture(autouse=True, scope="module")
def _restore_pool():
    yield
    S.set_num_threads(None)


# ---- validation --------------------------------------------------------------------------------

@pytest.mark.parametrize("indptr, indices, match", [
    ([0, 1], [0], "cycle"),                           # a self-loop
    ([0, 1, 2], [1, 0], "cycle"),
    ([0, 1, 2, 3], [1, 2, 1], "cycle"),
    ([0, 2, 1], [1], "non-decreasing"),
    ([1, 1], [], "start at 0"),
    ([0, 1, 1], [], "end at len"),
    ([0, 1, 1], [5], r"indices must lie in \[0, 2\)"),
    ([0, 1, 1], [-1], "indices must lie"),
    ([], [], "n \\+ 1 entries"),
    ([[0, 1]], [], "one-dimensional"),
])
def test_bad_graphs_are_rejected(indptr, indices, match):
    n = max(len(np.asarray(indptr).ravel()) - 1, 0)
    with pytest.raises(ValueError, match=match):
        S.Plan(indptr, indices, ["x"] * n, [None] * n)


def test_bad_arguments_are_rejected():
    ok = ([0, 1, 1], [1])
    with pytest.raises(TypeError, match="integers"):
        S.Plan([0.0, 1.0, 1.0], [1], ["a", "b"], [None, None])
    with pytest.raises(ValueError, match="2 names and 2 callables"):
        S.Plan(*ok, ["a"], [None, None])
    with pytest.raises(TypeError, match="names\\[1\\]"):
        S.Plan(*ok, ["a", 3], [None, None])
    with pytest.raises(TypeError, match="callables\\[0\\] \\('a'\\) must be callable"):
        S.Plan(*ok, ["a", "b"], [42, None])
    with pytest.raises(ValueError, match=r"deps\[1\] \('b'\) is 2"):
        S.Plan(*ok, ["a", "b"], [None, None], deps=[0, 2])
    with pytest.raises(ValueError, match="deps needs 2"):
        S.Plan(*ok, ["a", "b"], [None, None], deps=[0])
    with pytest.raises(ValueError, match="int32"):
        S.Plan([0, 1, 2**40], [1], ["a", "b"], [None, None])
    with pytest.raises(TypeError):
        S.NativeTask()
    with pytest.raises(ValueError, match="empty NativeTask"):
        S.Plan(*ok, ["a", "b"], [S.NativeTask.__new__(S.NativeTask), None])
    with pytest.raises(TypeError):
        S.RunHandle()
    for bad in (-1, 0, 10**6):
        with pytest.raises(ValueError):
            S.set_num_threads(bad)
    with pytest.raises(ValueError):
        S.native_spin(-5)
    with pytest.raises(ValueError, match="asynchronous"):
        S.native_spin(1, status=1)
    with pytest.raises(ValueError, match="nonzero"):
        S.native_fail(0)


def test_record_tasks_need_a_native_arg():
    plan = chain(3, [S.native_record()] * 3)
    with pytest.raises(ValueError, match="int64 array of 6"):
        plan.run()
    with pytest.raises(ValueError, match="int64 array of 6"):
        plan.run(native_arg=np.zeros(5, np.int64))
    with pytest.raises(ValueError, match="writable"):
        plan.run(native_arg=bytes(48))
    with pytest.raises(ValueError, match="contiguous"):
        plan.run(native_arg=np.zeros(12, np.int64)[::2])
    rec = np.full(6, -1, np.int64)
    plan.run(native_arg=rec)
    assert 0 <= rec[0] < rec[1] < rec[2] < rec[3] < rec[4] < rec[5]


def test_empty_plan_and_no_op_tasks():
    S.Plan([0], [], [], []).run()
    assert S.Plan([0], [], [], []).start().done
    S.Plan([0, 0, 0], [], ["a", "b"], [None, S.native_noop()]).run(timeout=5)


# ---- errors ------------------------------------------------------------------------------------

def test_python_exception_keeps_identity_traceback_and_names_the_task():
    err = KeyError("missing")

    def raiser(arg):
        raise err

    plan = chain(3, [None, raiser, None])
    with pytest.raises(KeyError) as info:
        plan.run(timeout=10)
    assert info.value is err
    assert info.value.__notes__ == ["in task 't1' (index 1) of a vkml plan"]
    tb, names = info.value.__traceback__, []
    while tb:
        names.append(tb.tb_frame.f_code.co_name)
        tb = tb.tb_next
    assert "raiser" in names


def test_native_failure_is_a_task_error():
    plan = chain(4, [None, None, S.native_fail(-42), None])
    with pytest.raises(S.TaskError, match="'t2' \\(index 2\\) failed with status -42") as info:
        plan.run(timeout=10)
    e = info.value
    assert (e.task_name, e.task_index, e.status) == ("t2", 2, -42)
    again = pickle.loads(pickle.dumps(e))
    assert (again.task_name, again.task_index, again.status, str(again)) == ("t2", 2, -42, str(e))


def test_base_exceptions_from_tasks_reach_the_caller():
    def exits(arg):
        raise SystemExit(3)

    with pytest.raises(SystemExit):
        chain(2, [exits, None]).run(timeout=10)


def test_every_waiter_sees_the_failure_and_the_note_is_added_once():
    def fail(arg):
        time.sleep(0.05)
        raise ValueError("shared")

    h = chain(2, [fail, None]).start()
    seen = []

    def waiter():
        try:
            h.wait(10)
        except ValueError as e:
            seen.append(e)

    threads = [threading.Thread(target=waiter) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert len(seen) == 4 and all(e is seen[0] for e in seen)
    assert len(seen[0].__notes__) == 1
    with pytest.raises(ValueError):
        h.wait()


def test_pool_stays_healthy_after_many_failures():
    plan = chain(50, [S.native_noop()] * 25 + [S.native_fail()] + [S.native_noop()] * 24)

    def py_fail(arg):
        raise RuntimeError("x")

    pyplan = chain(5, [None, py_fail, None, None, None])
    for _ in range(200):
        with pytest.raises(S.TaskError):
            plan.run(timeout=10)
        with pytest.raises(RuntimeError):
            pyplan.run(timeout=10)
    out = []
    chain(10, [lambda a, i=i: a.append(i) for i in range(10)]).run(out, timeout=10)
    assert out == list(range(10))


# ---- asynchronous and nested tasks -------------------------------------------------------------

def test_async_tasks_complete_from_other_threads():
    n = 30
    dag = make_dag(n, "random", seed=3, density=2.0)
    kinds = [S.native_async(delay_us=(i * 37) % 500) if i % 3 == 0 else S.native_record()
             for i in range(n)]
    plan = S.Plan(dag.indptr, dag.indices, [str(i) for i in range(n)], kinds)
    for _ in range(5):
        rec = np.full(2 * n, -1, np.int64)
        plan.run(native_arg=rec, timeout=10)
        recorded = np.array([i % 3 != 0 for i in range(n)])
        keep = recorded[dag.src] & recorded[dag.dst]
        sub = type(dag)(n, dag.indptr, dag.indices, dag.src[keep], dag.dst[keep])
        check_order(sub, rec, recorded)


def test_async_failure_fails_the_run():
    plan = chain(3, [None, S.native_async(delay_us=1000, status=-9), S.native_noop()])
    with pytest.raises(S.TaskError) as info:
        plan.run(timeout=10)
    assert info.value.status == -9 and info.value.task_index == 1


@pytest.mark.parametrize("threads", [1, 2])
def test_a_task_may_run_a_nested_plan(threads):
    """A worker waiting on a nested run runs tasks meanwhile: even one worker cannot deadlock."""
    S.set_num_threads(threads)
    inner = chain(20, [lambda a: a.append("inner")] + [S.native_noop()] * 19)

    def outer_task(arg):
        inner.run(arg, timeout=10)
        arg.append("outer")

    out = []
    chain(3, [outer_task, outer_task, lambda a: a.append("end")]).run(out, timeout=20)
    assert out == ["inner", "outer", "inner", "outer", "end"]


# ---- waiting -----------------------------------------------------------------------------------

def test_wait_times_out_and_can_be_retried():
    h = chain(2, [S.native_sleep(1_000_000), None]).start()
    t0 = time.monotonic()
    with pytest.raises(TimeoutError):
        h.wait(timeout=0.02)
    assert 0.02 <= time.monotonic() - t0 < 0.6
    assert not h.done
    h.wait(timeout=10)
    assert h.done
    with pytest.raises(ValueError):
        h.wait(timeout=-1)


def test_a_dropped_handle_lets_the_run_finish_and_frees_its_argument():
    class Arg(list):
        pass

    arg = Arg()
    ref = weakref.ref(arg)
    plan = chain(20, [S.native_sleep(2000)] + [lambda a: a.append(1)] * 19)
    plan.start(arg)  # the handle is dropped at once
    del arg
    deadline = time.monotonic() + 10
    while ref() is not None and time.monotonic() < deadline:
        time.sleep(0.005)
        gc.collect()
    assert ref() is None, "the run never released its argument"


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs setitimer")
def test_a_signal_interrupts_a_wait():
    class Interrupted(Exception):
        pass

    def handler(signum, frame):
        raise Interrupted

    old = signal.signal(signal.SIGALRM, handler)
    try:
        h = chain(1, [S.native_sleep(1_000_000)]).start()
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        t0 = time.monotonic()
        with pytest.raises(Interrupted):
            h.wait(timeout=10)
        assert time.monotonic() - t0 < 0.6
        h.wait(timeout=10)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def test_many_python_threads_share_the_pool():
    """16 threads run the same plan at once, each with its own per-run dict."""
    S.set_num_threads(None)
    dag = make_dag(60, "layered", seed=11, density=2.0)
    preds = [dag.src[dag.dst == i] for i in range(dag.n)]

    def task(i):
        def body(values):
            values[i] = 1 + sum(values[p] for p in preds[i])
        return body

    plan = S.Plan(dag.indptr, dag.indices, [str(i) for i in range(dag.n)],
                  [task(i) for i in range(dag.n)])
    expected = {}
    plan.run(expected)
    errors = []

    def worker():
        try:
            for _ in range(30):
                values = {}
                plan.run(values, timeout=20)
                assert values == expected
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a run never ended"
    assert not errors, errors[0]


# ---- the pool ----------------------------------------------------------------------------------

def _worker_threads() -> int:
    import os
    names = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                names.append(f.read().strip())
        except OSError:
            pass
    return sum(n.startswith("vkml-sched-") for n in names)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts threads in /proc")
def test_resizing_leaves_no_threads_behind():
    plan = chain(10, [S.native_noop()] * 10)
    for k in (3, 1, 4, 2):
        S.set_num_threads(k)
        assert S.pool_size() == k
        plan.run(timeout=10)
        assert _worker_threads() == k
    S.set_num_threads(None)


def test_resizing_while_a_run_is_in_flight_is_refused():
    S.set_num_threads(2)
    h = chain(1, [S.native_sleep(500_000)]).start()
    with pytest.raises(RuntimeError, match="in flight"):
        S.set_num_threads(3)
    h.wait(10)
    S.set_num_threads(3)
    assert S.pool_size() == 3
