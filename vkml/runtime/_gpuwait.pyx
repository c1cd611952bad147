# cython: language_level=3
"""GPU waits as scheduler tasks: the "device" task kind of docs/scheduler.md.

A task that needs a GPU result (a readback) must first wait until the timeline of the device
lane its producer went to reaches the value the producer's submission signals. Blocking a
pool worker for that would idle a core for the whole GPU time, so the wait is asynchronous
instead: the task reads the value and the lane from the run's native argument (an int64
array: timeline values by unit, written by the submitting tasks, then the lane of each unit),
hands (run, task, lane, value) to its device's waiter thread and returns SCHED_ASYNC; the
waiter thread sleeps in vkWaitSemaphores (any of the lanes' smallest pending values) and
completes every task whose value was reached with task_complete(). One waiter per device,
started on first use, stopped when the device closes.
"""
from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memset
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec

from vkml.runtime._sched cimport (NativeTask, SCHED_ASYNC, SCHED_DONE, make_native_task, run_arg, sched_run,
                          task_complete)
from vkml.vulkan._device cimport Device
from vkml.vulkan.vkapi cimport *

import os
import threading
import weakref

cdef extern from "<pthread.h>" nogil:
    ctypedef struct pthread_t:
        pass
    ctypedef struct pthread_mutex_t:
        pass
    ctypedef struct pthread_cond_t:
        pass
    int pthread_mutex_init(pthread_mutex_t*, const void*)
    int pthread_mutex_lock(pthread_mutex_t*)
    int pthread_mutex_unlock(pthread_mutex_t*)
    int pthread_mutex_destroy(pthread_mutex_t*)
    int pthread_cond_init(pthread_cond_t*, const void*)
    int pthread_cond_wait(pthread_cond_t*, pthread_mutex_t*)
    int pthread_cond_signal(pthread_cond_t*)
    int pthread_cond_destroy(pthread_cond_t*)
    int pthread_create(pthread_t*, const void*, void *(*)(void *) noexcept nogil, void*)
    int pthread_join(pthread_t, void**)

cdef enum:
    SLICE_NS = 200000        # re-check for newly queued smaller values this often
    WAIT_FAILED = -2         # task status when the device could not be waited on (lost)
    WAIT_TIMEOUT = -110      # task status when the value was not reached in time (-ETIMEDOUT)


TIMEOUT_STATUS = WAIT_TIMEOUT  # a wait task's status past its deadline (vkml.runtime.gpurun reports a TimeoutError)


cdef struct Pending:
    sched_run *run
    int32_t task
    uint32_t lane
    uint64_t value
    uint64_t deadline        # CLOCK_MONOTONIC ns after which the task fails; 0: none


cdef struct WaiterState:
    pthread_mutex_t lock
    pthread_cond_t cond
    Pending *items
    int n
    int cap
    int stop
    int failed               # the device could not be waited on: fail everything queued
    uint64_t timeout_ns      # per wait (Waiter.timeout); 0: wait forever
    VkDevice device
    uint32_t nlanes
    VkSemaphore timelines[64]  # by lane (config.MAX_QUEUES)
    PFN_vkWaitSemaphores wait
    PFN_vkGetSemaphoreCounterValue counter


cdef struct WaitArg:
    WaiterState *w
    int32_t slot             # index of the timeline value in the run's int64 native argument
    int32_t lane_slot        # index of its lane there


cdef inline uint64_t _now_ns() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <uint64_t>ts.tv_sec * 1000000000ULL + <uint64_t>ts.tv_nsec


cdef int _push(WaiterState *w, sched_run *run, int32_t task, uint32_t lane, uint64_t value) noexcept nogil:
    cdef Pending *grown
    pthread_mutex_lock(&w.lock)
    if w.stop or w.failed:
        pthread_mutex_unlock(&w.lock)
        return WAIT_FAILED
    if w.n == w.cap:
        grown = <Pending *>realloc(w.items, sizeof(Pending) * (w.cap * 2 if w.cap else 16))
        if grown == NULL:
            pthread_mutex_unlock(&w.lock)
            return -12  # ENOMEM
        w.items = grown
        w.cap = w.cap * 2 if w.cap else 16
    w.items[w.n].run = run
    w.items[w.n].task = task
    w.items[w.n].lane = lane
    w.items[w.n].value = value
    w.items[w.n].deadline = _now_ns() + w.timeout_ns if w.timeout_ns else 0
    w.n += 1
    pthread_cond_signal(&w.cond)
    pthread_mutex_unlock(&w.lock)
    return SCHED_ASYNC


cdef int _wait_task(sched_run *run, int32_t task, void *arg) noexcept nogil:
    cdef WaitArg *a = <WaitArg *>arg
    cdef int64_t *values = <int64_t *>run_arg(run)
    cdef uint64_t cur = 0
    if values == NULL:
        return -22  # EINVAL: the run was started without its timeline array
    cdef int64_t v = values[a.slot]
    cdef int64_t lane = values[a.lane_slot]
    if v <= 0:
        return SCHED_DONE  # nothing was submitted for it
    if lane < 0 or lane >= a.w.nlanes:
        return -22
    if a.w.counter(a.w.device, a.w.timelines[lane], &cur) == VK_SUCCESS and cur >= <uint64_t>v:
        return SCHED_DONE
    return _push(a.w, run, task, <uint32_t>lane, <uint64_t>v)


cdef void *_waiter_main(void *p) noexcept nogil:
    cdef WaiterState *w = <WaiterState *>p
    cdef VkSemaphoreWaitInfo wi
    cdef VkSemaphore sems[64]
    cdef uint64_t targets[64]       # smallest pending value by lane (0: none)
    cdef uint64_t vals[64]
    cdef uint64_t cur[64]
    cdef uint32_t nsem, lane
    cdef VkResult r
    cdef int i, k, status
    cdef uint64_t now
    cdef Pending *done = NULL
    cdef int ndone = 0, capdone = 0
    memset(&wi, 0, sizeof(wi))
    wi.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO
    wi.flags = VK_SEMAPHORE_WAIT_ANY_BIT
    while True:
        pthread_mutex_lock(&w.lock)
        while w.n == 0 and not w.stop:
            pthread_cond_wait(&w.cond, &w.lock)
        if w.n == 0 and w.stop:
            pthread_mutex_unlock(&w.lock)
            break
        memset(targets, 0, sizeof(targets))
        for i in range(w.n):
            lane = w.items[i].lane
            if targets[lane] == 0 or w.items[i].value < targets[lane]:
                targets[lane] = w.items[i].value
        pthread_mutex_unlock(&w.lock)
        nsem = 0
        for lane in range(w.nlanes):
            if targets[lane]:
                sems[nsem] = w.timelines[lane]
                vals[nsem] = targets[lane]
                nsem += 1
        wi.semaphoreCount = nsem
        wi.pSemaphores = sems
        wi.pValues = vals
        r = w.wait(w.device, &wi, SLICE_NS)
        status = 0
        if r != VK_SUCCESS and r != VK_TIMEOUT:
            status = WAIT_FAILED
        else:
            for lane in range(w.nlanes):
                cur[lane] = 0
                if targets[lane] and w.counter(w.device, w.timelines[lane], &cur[lane]) != VK_SUCCESS:
                    status = WAIT_FAILED
        # Take out what is complete (everything, when the device failed), then complete it
        # outside the lock: completing may run scheduler code.
        pthread_mutex_lock(&w.lock)
        if status:
            w.failed = 1
        if capdone < w.n:
            free(done)
            capdone = w.n
            done = <Pending *>malloc(sizeof(Pending) * capdone)
        ndone = 0
        k = 0
        now = _now_ns()
        for i in range(w.n):
            lane = w.items[i].lane
            # (an item queued after the counters were read, on a lane not read: not complete)
            if done != NULL and (status or (targets[lane] and w.items[i].value <= cur[lane])
                                 or (w.items[i].deadline and now >= w.items[i].deadline)):
                done[ndone] = w.items[i]
                if not status and not (targets[lane] and w.items[i].value <= cur[lane]):
                    done[ndone].deadline = 1  # marks a timeout for the completion below
                else:
                    done[ndone].deadline = 0
                ndone += 1
            else:
                w.items[k] = w.items[i]
                k += 1
        w.n = k
        pthread_mutex_unlock(&w.lock)
        for i in range(ndone):
            task_complete(done[i].run, done[i].task, WAIT_TIMEOUT if done[i].deadline else status)
    free(done)
    return NULL


cdef class Waiter:
    """The waiter thread of one Device (see the module docstring)."""

    cdef WaiterState *state
    cdef pthread_t thread
    cdef bint _running
    cdef readonly object device_ref
    cdef object __weakref__

    def __cinit__(self):
        self.state = NULL
        self._running = False

    def __init__(self, Device dev):
        dev.ensure_open()
        self.state = <WaiterState *>malloc(sizeof(WaiterState))
        if self.state == NULL:
            raise MemoryError()
        memset(self.state, 0, sizeof(WaiterState))
        pthread_mutex_init(&self.state.lock, NULL)
        pthread_cond_init(&self.state.cond, NULL)
        self.state.device = dev.handle
        self.state.nlanes = dev.nlanes
        for i in range(dev.nlanes):
            self.state.timelines[i] = dev.lanes[i].timeline
        self.state.wait = dev.fn.vkWaitSemaphores
        self.state.counter = dev.fn.vkGetSemaphoreCounterValue
        if pthread_create(&self.thread, NULL, _waiter_main, self.state) != 0:
            raise OSError("cannot start the GPU waiter thread")
        self._running = True
        self.device_ref = weakref.ref(dev)
        dev.register(self)  # close() stops the thread before the semaphore goes

    def task(self, int slot, int lane_slot) -> NativeTask:
        """A scheduler task that waits for the timeline value at native_arg[slot] (int64) of
        the lane at native_arg[lane_slot]."""
        if not self._running:
            raise RuntimeError("this GPU waiter has stopped (its device was closed)")
        cdef WaitArg *a = <WaitArg *>malloc(sizeof(WaitArg))
        if a == NULL:
            raise MemoryError()
        a.w = self.state
        a.slot = slot
        a.lane_slot = lane_slot
        cdef NativeTask t = make_native_task(_wait_task, a, self, "gpu-wait")
        t.free_arg = True
        return t

    @property
    def running(self) -> bool:
        return self._running

    @property
    def timeout(self) -> float | None:
        """Seconds a wait may take before its task fails with WAIT_TIMEOUT (None: forever);
        applies to waits queued after it is set."""
        return self.state.timeout_ns / 1e9 if self.state != NULL and self.state.timeout_ns else None

    @timeout.setter
    def timeout(self, value) -> None:
        if self.state == NULL:
            return
        cdef uint64_t ns = 0 if value is None or value <= 0 else <uint64_t>(float(value) * 1e9)
        pthread_mutex_lock(&self.state.lock)
        self.state.timeout_ns = ns
        pthread_mutex_unlock(&self.state.lock)

    cdef void _abandon(self) noexcept:
        self._running = False
        self.state = NULL  # (the parent's: its mutex may be held, its thread is not here)

    def _release(self) -> None:
        """Stop the thread: it completes what is queued (the device is idle by now) first."""
        if not self._running:
            return
        self._running = False
        pthread_mutex_lock(&self.state.lock)
        self.state.stop = 1
        pthread_cond_signal(&self.state.cond)
        pthread_mutex_unlock(&self.state.lock)
        with nogil:
            pthread_join(self.thread, NULL)

    def __dealloc__(self):
        if self._running:
            self._release()
        if self.state != NULL:
            pthread_mutex_destroy(&self.state.lock)
            pthread_cond_destroy(&self.state.cond)
            free(self.state.items)
            free(self.state)
            self.state = NULL


_waiters: dict = {}
_lock = threading.Lock()


_inherited: list = []  # a forked child's waiters of the parent: abandoned, kept


def _after_fork_in_child() -> None:
    """The waiter threads stayed in the parent: their Waiters are abandoned here (never joined
    or freed: their threads and locks are the parent's), and a child starts its own."""
    global _lock
    for w in _waiters.values():
        (<Waiter>w)._abandon()
        _inherited.append(w)
    _waiters.clear()
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def waiter(Device dev) -> Waiter:
    """The device's waiter, started on first use (again after the device was reopened)."""
    w = _waiters.get(id(dev))
    if w is not None and w.running and w.device_ref() is dev:
        return w
    with _lock:
        w = _waiters.get(id(dev))
        if w is None or not w.running or w.device_ref() is not dev:
            w = _waiters[id(dev)] = Waiter(dev)
    return w
