"""The scheduler and its process: fork, interpreter exit, VKML_NUM_THREADS, idle CPU."""
import multiprocessing as mp
import os
import subprocess
import sys
import textwrap
import threading
import time
import traceback

import numpy as np
import pytest

from sched_dags import check_order, make_dag
from vkml.runtime import _sched as S

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc and fork")
PKG_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(S.__file__)))


@pytest.fixture(autouse=True, scope="module")
def _restore_pool():
    yield
    S.set_num_threads(None)


def worker_threads() -> int:
    count = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                count += f.read().startswith("vkml-sched-")
        except OSError:
            pass
    return count


def run_checked(seed: int = 0) -> bool:
    """A 300-task plan of native and Python recorders; True when every ordering held."""
    dag = make_dag(300, "layered", seed=seed, density=2.0)

    def py(i):
        def body(rec):
            rec[2 * i] = S.seq_next()
            rec[2 * i + 1] = S.seq_next()
        return body

    tasks = [py(i) if i % 4 == 0 else S.native_record() for i in range(dag.n)]
    plan = S.Plan(dag.indptr, dag.indices, [str(i) for i in range(dag.n)], tasks)
    for _ in range(3):
        rec = np.full(2 * dag.n, -1, np.int64)
        plan.run(rec, native_arg=rec, timeout=30)
        check_order(dag, rec, np.ones(dag.n, bool))
    return True


def in_child(fn) -> int:
    """Runs fn in a forked child; returns its exit status (0: fn returned True)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = 0 if fn() else 2
        except BaseException:  # noqa: BLE001 - reported through the exit status
            traceback.print_exc()
        finally:
            os._exit(code)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    raise AssertionError("the forked child hung")


def run_script(code: str, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = PKG_ROOT + os.pathsep + full_env.get("PYTHONPATH", "")
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full_env,
                          capture_output=True, text=True, timeout=timeout)


# ---- idle ----------------------------------------------------------------------------------------

def test_an_idle_pool_uses_no_cpu():
    S.set_num_threads(None)
    run_checked()
    time.sleep(0.05)  # past the short spin before parking
    t0 = time.process_time()
    time.sleep(0.5)
    used = time.process_time() - t0
    assert used < 0.05, f"idle pool used {used:.3f} s of CPU in 0.5 s"


# ---- fork ----------------------------------------------------------------------------------------

@linux_only
def test_a_forked_child_gets_a_fresh_pool():
    S.set_num_threads(3)
    run_checked()
    assert worker_threads() == 3

    def child():
        assert worker_threads() == 0  # the parent's workers do not exist here
        run_checked(1)
        return worker_threads() == 3

    assert in_child(child) == 0
    run_checked(2)  # the parent's pool is unharmed


@linux_only
def test_multiprocessing_fork_children_run_plans():
    run_checked()
    ctx = mp.get_context("fork")
    with ctx.Pool(2) as pool:
        assert pool.map_async(run_checked, range(4)).get(timeout=60) == [True] * 4


@linux_only
def test_a_run_in_flight_at_fork_fails_in_the_child_instead_of_hanging():
    n = 4
    indptr = np.minimum(np.arange(n + 1), n - 1).astype(np.int32)
    plan = S.Plan(indptr, np.arange(1, n, dtype=np.int32), list("abcd"), [S.native_sleep(100_000)] * n)
    h = plan.start()

    def child():
        try:
            h.wait(timeout=5)
        except RuntimeError as e:
            return "forked" in str(e) and run_checked()
        return False

    assert in_child(child) == 0
    h.wait(timeout=10)


@linux_only
def test_fork_while_other_threads_run_plans():
    stop = threading.Event()
    errors = []

    def loop(seed):
        try:
            while not stop.is_set():
                run_checked(seed)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=loop, args=(s,)) for s in range(3)]
    for t in threads:
        t.start()
    try:
        for k in range(8):
            time.sleep(0.01)
            assert in_child(lambda: run_checked(k)) == 0
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert not errors, errors[0]


# ---- interpreter exit and environment --------------------------------------------------------------

def test_exit_is_clean_with_runs_and_failures_in_flight():
    r = run_script("""
        import atexit, threading, time
        import numpy as np

        def late():  # runs after vkml's own exit handler (registered later, so it runs first)
            try:
                S.Plan([0, 0], [], ["x"], [None]).run()
            except RuntimeError as e:
                print("late:", e)
        atexit.register(late)

        from vkml.runtime import _sched as S

        def chain(tasks):
            n = len(tasks)
            ip = np.minimum(np.arange(n + 1), n - 1).astype(np.int32)
            return S.Plan(ip, np.arange(1, n, dtype=np.int32), [str(i) for i in range(n)], tasks)

        def boom(arg):
            raise ValueError("boom")

        try:
            chain([None, boom, None]).run(timeout=10)
        except ValueError:
            print("caught")
        chain([None, boom]).start()                        # a failure nobody waits for
        chain([S.native_sleep(300_000), None]).start()     # a run still going at exit
        chain([lambda a: time.sleep(0.3), None]).start()   # a Python task still going at exit

        def spin():
            plan = chain([lambda a: None] * 20)
            try:
                while True:
                    plan.run(timeout=10)
            except RuntimeError:
                pass
        threading.Thread(target=spin, daemon=True).start()
        time.sleep(0.1)
        print("exiting")
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:2] == ["caught", "exiting"], r.stdout
    assert "late: the vkml scheduler is shut down" in r.stdout
    assert "Traceback" not in r.stderr and "Fatal" not in r.stderr, r.stderr


@linux_only
def test_shutdown_joins_every_worker():
    r = run_script("""
        import os
        from vkml.runtime import _sched as S
        def workers():
            n = 0
            for t in os.listdir("/proc/self/task"):
                with open(f"/proc/self/task/{t}/comm") as f:
                    n += f.read().startswith("vkml-sched-")
            return n
        import time
        S.Plan([0, 1, 1], [1], ["a", "b"], [S.native_noop(), lambda a: None]).run()
        print(workers())
        S._at_exit()
        # pthread_join returns when the kernel clears the thread's tid, a moment before the
        # dead thread leaves /proc/self/task: give the kernel up to 2 s to reap it.
        deadline = time.monotonic() + 2
        while workers() and time.monotonic() < deadline:
            time.sleep(0.01)
        print(workers())
    """, env={"VKML_NUM_THREADS": "3"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["3", "0"]


def test_vkml_num_threads_sets_the_pool_size():
    r = run_script("from vkml.runtime import _sched as S; print(S.pool_size())",
                   env={"VKML_NUM_THREADS": "5"})
    assert r.returncode == 0 and r.stdout.strip() == "5", r.stderr
    r = run_script("from vkml.runtime import _sched", env={"VKML_NUM_THREADS": "lots"})
    assert r.returncode != 0 and "VKML_NUM_THREADS must be an integer" in r.stderr
