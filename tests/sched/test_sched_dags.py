"""Property tests: random DAGs, thread counts, durations and failures on the scheduler.

Ordering is checked with sequence numbers taken at each task's start and end from one global
atomic counter (in C for native tasks, through seq_next() for Python ones). The counter also
proves each task ran once: it advances by exactly two per task execution.
"""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sched_dags import check_order, dags, make_dag
from vkml.runtime import _sched as S

WAIT = 60.0  # seconds: a run that has not ended by then is a deadlock, reported as a failure

KINDS = ("native", "python", "async")


class Boom(Exception):
    """What a failing Python task raises: one instance per task, to check identity."""


def python_task(i: int, exc: BaseException | None = None):
    def py_task_body(arg):
        rec, counts = arg
        rec[2 * i] = S.seq_next()
        counts[i] += 1
        rec[2 * i + 1] = S.seq_next()
        if exc is not None:
            raise exc
    return py_task_body


@pytest.fixture(autouse=True, scope="module")
def _restore_pool():
    yield
    S.set_num_threads(None)


@st.composite
def workloads(draw, failures: bool):
    dag = draw(dags())
    n = dag.n
    threads = draw(st.integers(1, 4))
    p_python = draw(st.sampled_from([0.0, 0.2, 1.0]))
    spin = draw(st.sampled_from([0, 0, 2, 20]))
    seed = draw(st.integers(0, 2**32 - 1))
    fail = draw(st.lists(st.integers(0, n - 1), max_size=3, unique=True)) if failures else []
    return dag, threads, p_python, spin, seed, fail


def build(dag, p_python, spin, seed, fail):
    """Tasks: native recorders (some spinning), Python recorders, a few asynchronous tasks;
    the tasks in fail fail (half native, half Python). Returns the plan and the failure info."""
    rng = np.random.default_rng(seed)
    n = dag.n
    kinds = np.where(rng.random(n) < p_python, 1, 0)
    asyncs = rng.choice(n, size=min(n // 20, 10), replace=False) if n >= 20 else []
    kinds[np.asarray(asyncs, int)] = 2
    callables, expect = [], {}
    spinner = S.native_record(spin_us=spin)
    plain = S.native_record()
    for i in range(n):
        if i in fail:
            if i % 2:
                exc = Boom(f"task {i} failed")
                callables.append(python_task(i, exc))
                expect[i] = exc
                kinds[i] = 1
            else:
                callables.append(S.native_record(status=-(100 + i % 50)))
                expect[i] = -(100 + i % 50)
                kinds[i] = 0
        elif kinds[i] == 1:
            callables.append(python_task(i))
        elif kinds[i] == 2:
            callables.append(S.native_async(delay_us=int(rng.integers(0, 200))))
        else:
            callables.append(spinner if rng.random() < 0.3 else plain)
    names = [f"node_{i}" for i in range(n)]
    return S.Plan(dag.indptr, dag.indices, names, callables), kinds, expect


def run_and_record(plan, n):
    rec = np.full(2 * n, -1, np.int64)
    counts = np.zeros(n, np.int64)
    before = S.seq_next()
    error = None
    try:
        plan.start((rec, counts), native_arg=rec).wait(timeout=WAIT)
    except TimeoutError:
        raise AssertionError(f"run of {n} tasks did not end within {WAIT} s (deadlock)")
    except BaseException as e:  # noqa: BLE001 - checked by the caller
        error = e
    used = S.seq_next() - before - 1
    return rec, counts, error, used


def check_edges_between_recorders(dag, kinds, rec, ran):
    rec_kind = kinds != 2
    keep = rec_kind[dag.src] & rec_kind[dag.dst]
    sub = type(dag)(dag.n, dag.indptr, dag.indices, dag.src[keep], dag.dst[keep])
    check_order(sub, rec, ran)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(failures=False))
def test_every_task_runs_once_after_its_predecessors(w):
    dag, threads, p_python, spin, seed, _ = w
    S.set_num_threads(threads)
    plan, kinds, _ = build(dag, p_python, spin, seed, [])
    rec, counts, error, used = run_and_record(plan, dag.n)
    assert error is None, repr(error)
    recorders = kinds != 2
    assert used == 2 * int(recorders.sum()), "a task ran more or less than once"
    assert np.all(counts[kinds == 1] == 1)
    check_edges_between_recorders(dag, kinds, rec, recorders)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(failures=True))
def test_failures_cancel_the_run_and_propagate(w):
    dag, threads, p_python, spin, seed, fail = w
    S.set_num_threads(threads)
    plan, kinds, expect = build(dag, p_python, spin, seed, fail)
    rec, counts, error, used = run_and_record(plan, dag.n)
    recorders = kinds != 2
    ran = rec[0::2] >= 0
    assert used == 2 * int(ran.sum()), "a task ran more than once"
    assert np.all(counts <= 1)
    check_edges_between_recorders(dag, kinds, rec, ran)
    failed_and_ran = [i for i in fail if ran[i]]
    if not fail:
        assert error is None, repr(error)
        assert np.all(ran[recorders])
        return
    # Some failing task must have run: had none, nothing was cancelled and all would have run.
    assert failed_and_ran, "no failing task ran, yet tasks were skipped"
    assert error is not None, "a failure was not raised"
    if isinstance(error, S.TaskError):
        t = error.task_index
        assert t in failed_and_ran and error.status == expect[t]
        assert error.task_name == f"node_{t}"
    else:
        assert isinstance(error, Boom), repr(error)
        t = next(i for i in failed_and_ran if expect[i] is error)  # the very instance raised
        assert f"in task 'node_{t}'" in " ".join(getattr(error, "__notes__", []))
        frames = []
        tb = error.__traceback__
        while tb is not None:
            frames.append(tb.tb_frame.f_code.co_name)
            tb = tb.tb_next
        assert "py_task_body" in frames, frames
    downstream = dag.descendants(failed_and_ran)
    assert not np.any(ran & downstream), "a task downstream of a failure ran"


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dags(max_n=500), st.integers(1, 4), st.integers(0, 2**32 - 1))
def test_given_dependency_counts(dag, threads, seed):
    """deps[i] < in-degree: task i starts once deps[i] of its predecessors have ended."""
    S.set_num_threads(threads)
    rng = np.random.default_rng(seed)
    indeg = np.bincount(dag.indices, minlength=dag.n)
    deps = (rng.random(dag.n) * (indeg + 1)).astype(np.int32)
    plan = S.Plan(dag.indptr, dag.indices, [str(i) for i in range(dag.n)],
                  [S.native_record()] * dag.n, deps=deps)
    rec = np.full(2 * dag.n, -1, np.int64)
    before = S.seq_next()
    plan.run(native_arg=rec, timeout=WAIT)
    assert S.seq_next() - before - 1 == 2 * dag.n
    check_order(dag, rec, np.ones(dag.n, bool), deps=deps)


@pytest.mark.parametrize("shape", ["chain", "fan", "layered", "random"])
def test_large_plans_many_times(shape):
    """2000-task plans run back to back on the default pool: each run is independent."""
    S.set_num_threads(None)
    dag = make_dag(2000, shape, seed=7, density=2.0)
    plan = S.Plan(dag.indptr, dag.indices, [""] * dag.n, [S.native_record()] * dag.n)
    for _ in range(20):
        rec = np.full(2 * dag.n, -1, np.int64)
        plan.run(native_arg=rec, timeout=WAIT)
        check_order(dag, rec, np.ones(dag.n, bool))
