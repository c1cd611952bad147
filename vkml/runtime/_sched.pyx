# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The task scheduler: runs task graphs (Plan) on one process-wide pool of native threads.

Each worker has a work-stealing deque; a finished task releases its successors onto its own
deque (it runs the first one itself), idle workers steal and then sleep. Many runs of many plans,
started from any number of Python threads, share the pool, each with its own counters and error.
Workers hold the GIL only while running a Python task. See docs/scheduler.md.

    plan = Plan(indptr, indices, names, callables)   # successors of i: indices[indptr[i]:indptr[i+1]]
    plan.run(arg)                  # or run_plan(plan, arg); each Python task is called as fn(arg)
    handle = plan.start(arg)       # non-blocking; handle.wait(timeout) raises what a task raised
"""
import atexit
import os
import time

import numpy as np

from vkml import config

from cpython.exc cimport PyErr_CheckSignals
from cpython.ref cimport PyObject, Py_INCREF, Py_XDECREF
from libc.errno cimport EBUSY, EINTR, ENOMEM, ESRCH, ETIMEDOUT
from libc.stdint cimport int32_t, int64_t, uint8_t, uintptr_t
from libc.stdlib cimport free, malloc

cdef extern from "sched_core.h" nogil:
    ctypedef struct sched_task:
        sched_fn fn
        void *arg
    ctypedef struct sched_plan:
        int32_t n
        int32_t nroots
        const int32_t *indptr
        const int32_t *indices
        const int32_t *deps
        const uint8_t *single
        const int32_t *roots
        const sched_task *tasks
    int ESHUTDOWN
    int SCHED_MAX_THREADS
    sched_run *sched_run_new(const sched_plan *p, void *arg)
    int sched_run_submit(sched_run *r)
    int sched_run_wait(sched_run *r, int64_t timeout_ns)
    int sched_run_done(sched_run *r)
    void sched_run_unref(sched_run *r)
    void sched_run_free(sched_run *r)
    int sched_run_fail(sched_run *r, int32_t task, int status)
    int32_t sched_run_failed_task(sched_run *r)
    int sched_run_fail_status(sched_run *r)
    void *sched_run_arg(sched_run *r)
    void *sched_run_owner(sched_run *r)
    void *sched_run_error(sched_run *r)
    void sched_run_set_error(sched_run *r, void *e)
    void sched_run_set_owner(sched_run *r, void *owner, void (*release)(sched_run *) noexcept nogil)
    void sched_task_complete(sched_run *r, int32_t task, int status)
    void sched_configure(int n)
    int sched_set_num_threads(int n)
    int sched_pool_size()
    void sched_set_thread_exit_hook(void (*hook)() noexcept nogil)
    int sched_shutdown(int64_t wait_ns)

cdef extern from "sched_py.h" nogil:
    void sched_py_pin()
    void sched_py_unpin()

cdef extern from "sched_testing.h" nogil:
    ctypedef struct sched_test_arg:
        int64_t us
        int status
    int sched_test_noop(sched_run *run, int32_t task, void *arg)
    int sched_test_spin(sched_run *run, int32_t task, void *arg)
    int sched_test_sleep(sched_run *run, int32_t task, void *arg)
    int sched_test_record(sched_run *run, int32_t task, void *arg)
    int sched_test_async(sched_run *run, int32_t task, void *arg)
    int64_t sched_test_seq_next()

__all__ = [
    "Plan", "RunHandle", "NativeTask", "TaskError", "run_plan", "pool_size", "set_num_threads",
    "native_noop", "native_spin", "native_sleep", "native_fail", "native_record", "native_async",
    "seq_next",
]


class TaskError(RuntimeError):
    """A native task failed (a Python task's own exception is raised as it is)."""

    def __init__(self, task_name: str, task_index: int, status: int) -> None:
        super().__init__(f"native task {task_name!r} (index {task_index}) failed with status {status}")
        self.task_name = task_name
        self.task_index = task_index
        self.status = status

    def __reduce__(self):
        return (TaskError, (self.task_name, self.task_index, self.status))


# ---- task kinds --------------------------------------------------------------------------------

cdef class NativeTask:
    """A task run by a C function without the GIL. C code makes them with make_native_task (see
    _sched.pxd); tests use native_noop(), native_spin() and the other factories below."""

    def __init__(self, *args, **kwargs):
        raise TypeError("NativeTask is made by C code (make_native_task) or the native_* factories")

    def __dealloc__(self):
        if self.free_arg:
            free(self.arg)

    def __repr__(self) -> str:
        return f"<NativeTask {self.kind}>"


cdef NativeTask make_native_task(sched_fn fn, void *arg, object owner, str kind):
    cdef NativeTask t = NativeTask.__new__(NativeTask)
    t.fn = fn
    t.arg = arg
    t.owner = owner
    t.kind = kind
    return t


cdef void task_complete(sched_run *run, int32_t task, int status) noexcept nogil:
    sched_task_complete(run, task, status)


cdef void *run_arg(sched_run *run) noexcept nogil:
    return sched_run_arg(run)


cdef int _call_python(sched_run *run, int32_t task, object fn) noexcept:
    try:
        fn((<tuple>sched_run_owner(run))[1])
    except BaseException as exc:
        if sched_run_fail(run, task, -1):
            Py_INCREF(exc)
            sched_run_set_error(run, <void *>exc)
        return -1
    return 0


# The Python task kind: one GIL acquire on the worker's lasting thread state.
cdef int _python_task(sched_run *run, int32_t task, void *fn) noexcept nogil:
    sched_py_pin()
    with gil:
        return _call_python(run, task, <object>fn)


# Drops what a run kept alive; runs on whichever thread lets go of the run last.
cdef void _release_run(sched_run *run) noexcept nogil:
    sched_py_pin()
    with gil:
        Py_XDECREF(<PyObject *>sched_run_owner(run))
        Py_XDECREF(<PyObject *>sched_run_error(run))
    sched_run_free(run)


cdef NativeTask _test_task(sched_fn fn, int64_t us, int status, str kind, bint records=False):
    cdef sched_test_arg *a = <sched_test_arg *>malloc(sizeof(sched_test_arg))
    if a is NULL:
        raise MemoryError()
    a.us = us
    a.status = status
    cdef NativeTask t = make_native_task(fn, a, None, kind)
    t.free_arg = True
    t.records = records
    return t


def _micros(us) -> int:
    us = int(us)
    if not 0 <= us <= 60_000_000:
        raise ValueError(f"a duration must be 0 to 60e6 microseconds, got {us}")
    return us


def _status(status, allow_async=False) -> int:
    status = int(status)
    if not -2**31 <= status < 2**31:
        raise ValueError(f"status must fit in int32, got {status}")
    if status == SCHED_ASYNC and not allow_async:
        raise ValueError("status 1 means 'asynchronous'; use 0 for success or another failure code")
    return status


def native_noop() -> NativeTask:
    """A native task that does nothing (for overhead measurements)."""
    return make_native_task(sched_test_noop, NULL, None, "noop")


def native_spin(us: int, status: int = 0) -> NativeTask:
    """A native task that busy-waits us microseconds, then returns status (nonzero: failure)."""
    return _test_task(sched_test_spin, _micros(us), _status(status), f"spin({us})")


def native_sleep(us: int, status: int = 0) -> NativeTask:
    """A native task that sleeps us microseconds, then returns status."""
    return _test_task(sched_test_sleep, _micros(us), _status(status), f"sleep({us})")


def native_fail(status: int = -1) -> NativeTask:
    """A native task that fails at once with status (nonzero)."""
    if int(status) == 0:
        raise ValueError("a failing task needs a nonzero status")
    return _test_task(sched_test_spin, 0, _status(status), f"fail({status})")


def native_record(spin_us: int = 0, status: int = 0) -> NativeTask:
    """A native task that records global sequence numbers at its start and end into the run's
    native_arg (int64 array of 2 * len(plan): [2i] start, [2i+1] end), spinning between them."""
    return _test_task(sched_test_record, _micros(spin_us), _status(status), "record", True)


def native_async(delay_us: int = 0, status: int = 0) -> NativeTask:
    """An asynchronous native task: it starts a thread that completes it with status after
    delay_us microseconds, the way a device fence will complete a GPU task."""
    return _test_task(sched_test_async, _micros(delay_us), _status(status, True), "async")


def seq_next() -> int:
    """The next number of the record tasks' global sequence (one atomic fetch-add), so Python
    tasks in tests can record on the same clock."""
    return sched_test_seq_next()


# ---- plans and runs ----------------------------------------------------------------------------

def _index_array(x, str what) -> np.ndarray:
    a = np.asarray(x)
    if a.ndim != 1:
        raise ValueError(f"{what} must be one-dimensional, got shape {a.shape}")
    if a.size == 0:
        return np.zeros(0, np.int32)
    if a.dtype.kind not in "iu":
        raise TypeError(f"{what} must hold integers, got dtype {a.dtype}")
    if a.min() < -2**31 or a.max() >= 2**31:
        raise ValueError(f"{what} values must fit in int32")
    return np.array(a, dtype=np.int32, copy=True, order="C")


# Kahn's algorithm on the in-degrees: returns -1 for a DAG, else a task that can never start.
cdef int32_t _stuck_task(const int32_t[::1] ip, const int32_t[::1] ix, int32_t[::1] deg,
                         int32_t[::1] stack) noexcept nogil:
    cdef int32_t n = <int32_t>ip.shape[0] - 1, sp = 0, seen = 0, i, u, v, e
    for i in range(n):
        if deg[i] == 0:
            stack[sp] = i
            sp += 1
    while sp:
        sp -= 1
        u = stack[sp]
        seen += 1
        for e in range(ip[u], ip[u + 1]):
            v = ix[e]
            deg[v] -= 1
            if deg[v] == 0:
                stack[sp] = v
                sp += 1
    if seen == n:
        return -1
    for i in range(n):
        if deg[i] > 0:
            return i
    return -1


cdef class Plan:
    """A task graph, built once and run many times, from many threads at once.

    indptr, indices: int32 CSR of successors: task i's are indices[indptr[i]:indptr[i+1]].
    names: one str per task; a failure says which task failed.
    callables: one per task: a Python callable, run as fn(arg) holding the GIL; a NativeTask,
        run without the GIL; or None, a no-op.
    deps: how many predecessors must end before each task may start: the in-degree unless
        given (0 <= deps[i] <= in-degree[i]; fewer lets a task start after that many ended).
    The graph must be acyclic.
    """
    cdef sched_plan c
    cdef sched_task *tasks
    cdef object _arrays      # the numpy arrays behind c's pointers
    cdef tuple _callables    # keeps the task objects alive
    cdef readonly tuple names
    cdef Py_ssize_t _record_bytes

    def __cinit__(self):
        self.tasks = NULL

    def __dealloc__(self):
        free(self.tasks)

    def __init__(self, indptr, indices, names, callables, deps=None) -> None:
        if self._arrays is not None:
            raise RuntimeError("Plan.__init__ called twice")
        ip = _index_array(indptr, "indptr")
        ix = _index_array(indices, "indices")
        cdef Py_ssize_t n = ip.shape[0] - 1, i
        if n < 0:
            raise ValueError("indptr needs n + 1 entries for n tasks (at least [0])")
        if n >= 2**31 - 1:
            raise ValueError("too many tasks")
        if ip[0] != 0 or ip[n] != ix.shape[0]:
            raise ValueError(f"indptr must start at 0 and end at len(indices) = {ix.shape[0]}, "
                             f"got {ip[0]} and {ip[n]}")
        if n and np.any(np.diff(ip) < 0):
            raise ValueError("indptr must be non-decreasing")
        if ix.shape[0] and (ix.min() < 0 or ix.max() >= n):
            raise ValueError(f"indices must lie in [0, {n}), got values from {ix.min()} to {ix.max()}")
        names = tuple(names)
        callables = tuple(callables)
        if len(names) != n or len(callables) != n:
            raise ValueError(f"{n} tasks need {n} names and {n} callables, "
                             f"got {len(names)} and {len(callables)}")
        for i in range(n):
            if not isinstance(names[i], str):
                raise TypeError(f"names[{i}] must be a str, got {type(names[i]).__name__}")
            f = callables[i]
            if isinstance(f, NativeTask):
                if (<NativeTask>f).fn is NULL:
                    raise ValueError(f"callables[{i}] ({names[i]!r}) is an empty NativeTask")
            elif f is not None and not callable(f):
                raise TypeError(f"callables[{i}] ({names[i]!r}) must be callable, a NativeTask "
                                f"or None, got {type(f).__name__}")
        indeg = np.bincount(ix, minlength=n).astype(np.int32) if n else np.zeros(0, np.int32)
        if deps is None:
            dp = indeg.copy()
        else:
            dp = _index_array(deps, "deps")
            if dp.shape[0] != n:
                raise ValueError(f"deps needs {n} entries, got {dp.shape[0]}")
            bad = np.flatnonzero((dp < 0) | (dp > indeg))
            if bad.size:
                j = int(bad[0])
                raise ValueError(f"deps[{j}] ({names[j]!r}) is {dp[j]}, outside [0, in-degree "
                                 f"{indeg[j]}]")
        cdef int32_t stuck = _stuck_task(ip, ix, indeg.copy(), np.empty(max(n, 1), np.int32))
        if stuck >= 0:
            raise ValueError(f"the task graph has a cycle: task {names[stuck]!r} (index {stuck}) "
                             f"could never start")
        single = ((indeg == 1) & (dp == 1)).astype(np.uint8)
        roots = np.flatnonzero(dp == 0).astype(np.int32)

        self.tasks = <sched_task *>malloc(max(n, 1) * sizeof(sched_task))
        if self.tasks is NULL:
            raise MemoryError()
        cdef bint records = False
        for i in range(n):
            f = callables[i]
            if f is None:
                self.tasks[i].fn = sched_test_noop
                self.tasks[i].arg = NULL
            elif isinstance(f, NativeTask):
                self.tasks[i].fn = (<NativeTask>f).fn
                self.tasks[i].arg = (<NativeTask>f).arg
                records = records or (<NativeTask>f).records
            else:
                self.tasks[i].fn = _python_task
                self.tasks[i].arg = <void *>f
        self._record_bytes = 16 * n if records else 0
        self._callables = callables
        self.names = names
        self._arrays = (ip, ix, dp, single, roots)
        cdef const int32_t[::1] v_ip = ip, v_ix = ix, v_dp = dp, v_roots = roots
        cdef const uint8_t[::1] v_single = single
        self.c.n = <int32_t>n
        self.c.nroots = <int32_t>roots.shape[0]
        self.c.indptr = &v_ip[0]
        self.c.indices = &v_ix[0] if ix.shape[0] else NULL
        self.c.deps = &v_dp[0] if n else NULL
        self.c.single = &v_single[0] if n else NULL
        self.c.roots = &v_roots[0] if roots.shape[0] else NULL
        self.c.tasks = self.tasks

    def __len__(self) -> int:
        return self.c.n

    def __repr__(self) -> str:
        return f"<Plan of {self.c.n} tasks>"

    def start(self, arg=None, *, native_arg=None) -> RunHandle:
        """Starts a run and returns at once. Python tasks get arg; native tasks get the data
        pointer of native_arg, a writable contiguous buffer (record tasks need int64[2 * n])."""
        if self._arrays is None:
            raise RuntimeError("Plan was not initialized")
        cdef void *ptr = NULL
        cdef unsigned char[::1] bytes_view
        view = None
        if native_arg is not None:
            view = memoryview(native_arg)
            if view.readonly:
                raise ValueError("native_arg must be a writable buffer")
            if not view.c_contiguous:
                raise ValueError("native_arg must be C-contiguous")
            if view.nbytes:
                bytes_view = view.cast("B")
                ptr = &bytes_view[0]
        if self._record_bytes:
            if view is None or view.nbytes < self._record_bytes or (<uintptr_t>ptr) % 8:
                raise ValueError(f"this plan's record tasks need native_arg: an int64 array of "
                                 f"{2 * self.c.n} entries")
        keep = (self, arg, view)
        cdef sched_run *run = sched_run_new(&self.c, ptr)
        if run is NULL:
            raise MemoryError()
        Py_INCREF(keep)
        sched_run_set_owner(run, <void *>keep, _release_run)
        cdef RunHandle h = RunHandle.__new__(RunHandle)
        h.run = run
        h.plan = self
        cdef int rc
        with nogil:  # may wait for a pool resize, whose exiting workers need the GIL
            rc = sched_run_submit(run)
        if rc:
            raise _errno_error(rc)
        return h

    def run(self, arg=None, *, native_arg=None, timeout: float | None = None) -> None:
        """Runs the plan and returns when it is over, raising the first failure (see
        RunHandle.wait)."""
        self.start(arg, native_arg=native_arg).wait(timeout)


cdef int64_t SIGNAL_SLICE_NS = 50000000  # RunHandle.wait looks for pending signals this often
cdef int32_t CANCELLED_TASK = -2        # failed_task of a cancelled run (no task failed)


cdef class RunHandle:
    """One run of a Plan, from Plan.start(). Dropping it does not stop or wait for the run."""
    cdef sched_run *run
    cdef readonly Plan plan
    cdef bint _noted

    def __init__(self, *args, **kwargs):
        raise TypeError("RunHandle is made by Plan.start()")

    def __dealloc__(self):
        if self.run is not NULL:
            sched_run_unref(self.run)
            self.run = NULL

    @property
    def done(self) -> bool:
        """Whether every task has ended (or was skipped after a failure)."""
        return self.run is NULL or bool(sched_run_done(self.run))

    def cancel(self) -> None:
        """Skips the run's tasks that have not started (those running or waiting
        asynchronously end as they would); wait() then returns without raising for it. For a
        caller that gives up on the run (an interrupt): nothing more is started for it."""
        if self.run is not NULL:
            sched_run_fail(self.run, CANCELLED_TASK, 0)

    def wait(self, timeout: float | None = None) -> None:
        """Waits, with the GIL released, until the run ends; then raises what failed, if
        anything: a Python task's own exception (traceback kept, a note names the task) or
        TaskError for a native task. TimeoutError when timeout seconds pass first (the run goes
        on; wait again). Any number of threads may wait on one handle."""
        if self.run is NULL:
            raise RuntimeError("RunHandle has no run")
        cdef int64_t ns = -1
        cdef int rc
        deadline = None
        if timeout is not None:
            timeout = float(timeout)
            if not timeout >= 0:
                raise ValueError(f"timeout must be >= 0 or None, got {timeout}")
            if timeout != float("inf"):
                deadline = time.monotonic() + timeout
        while True:
            # In slices: a signal (Ctrl-C) that another thread took wakes no one here, so look
            # for pending ones every SIGNAL_SLICE_NS.
            ns = SIGNAL_SLICE_NS
            if deadline is not None:
                ns = min(ns, max(0, int((deadline - time.monotonic()) * 1e9)))
            with nogil:
                rc = sched_run_wait(self.run, ns)
            if rc == 0:
                break
            if rc == EINTR or (rc == ETIMEDOUT and (deadline is None or time.monotonic() < deadline)):
                PyErr_CheckSignals()
                continue
            if rc == ETIMEDOUT:
                raise TimeoutError(f"a run of {self.plan!r} did not end within {timeout} s")
            if rc == ESRCH:
                raise RuntimeError("this run was in flight when the process forked; "
                                   "it cannot end in the child")
            raise OSError(rc, os.strerror(rc))
        self._raise_failure()

    cdef _raise_failure(self):
        cdef int32_t t = sched_run_failed_task(self.run)
        if t < 0:
            return
        name = self.plan.names[t]
        cdef void *err = sched_run_error(self.run)
        if err is NULL:
            raise TaskError(name, t, sched_run_fail_status(self.run))
        exc = <object>err
        if not self._noted:
            self._noted = True
            exc.add_note(f"in task {name!r} (index {t}) of a vkml plan")
        raise exc


def run_plan(plan: Plan, arg=None, *, native_arg=None, timeout: float | None = None) -> None:
    """Runs plan and returns when it is over; see Plan.start and RunHandle.wait."""
    plan.start(arg, native_arg=native_arg).wait(timeout)


def _errno_error(int rc):
    if rc == ESHUTDOWN:
        return RuntimeError("the vkml scheduler is shut down (the interpreter is exiting)")
    if rc == ENOMEM:
        return MemoryError("the vkml scheduler is out of memory")
    return OSError(rc, f"the vkml scheduler could not start its threads: {os.strerror(rc)}")


# ---- the pool ----------------------------------------------------------------------------------

def pool_size() -> int:
    """Worker threads in the pool (or that its next start will make)."""
    return sched_pool_size()


def set_num_threads(n: int | None) -> None:
    """Resizes the pool to n workers (None: one per core), from the next run on. Raises
    RuntimeError while runs are in flight."""
    cdef int k = 0, rc
    if n is not None:
        k = int(n)
        if not 1 <= k <= SCHED_MAX_THREADS:
            raise ValueError(f"thread count must be 1 to {SCHED_MAX_THREADS}, got {n}")
    with nogil:
        rc = sched_set_num_threads(k)
    if rc == EBUSY:
        raise RuntimeError("cannot resize the scheduler pool while runs are in flight")
    if rc:
        raise _errno_error(rc)


def _threads_from_env() -> int:
    """The pool size VKML_NUM_THREADS asks for (vkml/config.py), 0 for the default."""
    return config.num_threads(SCHED_MAX_THREADS)


def _at_exit() -> None:
    # Runs in flight (from daemon threads) get 2 s to end; then the workers are left to the exit.
    with nogil:
        sched_shutdown(2_000_000_000)


sched_configure(_threads_from_env())
sched_set_thread_exit_hook(sched_py_unpin)
atexit.register(_at_exit)
