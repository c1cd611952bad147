# cython: language_level=3
"""C-level interface of vkml.runtime._sched for other extension modules (for example the Vulkan device
task kind): make native tasks and complete asynchronous ones. cimport it:

    from vkml.runtime._sched cimport NativeTask, make_native_task, task_complete, run_arg, sched_run
"""
from libc.stdint cimport int32_t


cdef extern from "sched_types.h" nogil:
    ctypedef struct sched_run:
        pass
    ctypedef int (*sched_fn)(sched_run *run, int32_t task, void *arg) noexcept nogil
    enum:
        SCHED_DONE
        SCHED_ASYNC


cdef class NativeTask:
    cdef sched_fn fn
    cdef void *arg
    cdef bint free_arg      # arg was malloc'd for this task: freed with it
    cdef bint records       # needs the run's native_arg as int64[2 * n] (test recorders)
    cdef object owner       # keeps what arg points to alive
    cdef readonly str kind


# A task run by fn(run, task, arg) without the GIL; owner keeps arg's memory alive.
cdef NativeTask make_native_task(sched_fn fn, void *arg, object owner, str kind)

# Ends a task whose function returned SCHED_ASYNC; any thread, no GIL needed.
# status: 0 for success, anything else fails the run.
cdef void task_complete(sched_run *run, int32_t task, int status) noexcept nogil

# The run's native argument (the data pointer of the native_arg buffer given to Plan.start).
cdef void *run_arg(sched_run *run) noexcept nogil
