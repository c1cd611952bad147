/* Python thread states for the scheduler's workers.
 *
 * A worker that runs Python tasks keeps one thread state for its whole life, so a Python task
 * costs one GIL acquire (PyGILState_Ensure on a thread that already has a state), not the
 * creation and destruction of a thread state each time.
 */
#ifndef VKML_SCHED_PY_H
#define VKML_SCHED_PY_H

#include <Python.h>

static _Thread_local int sched_py_pinned;

/* Gives this thread a lasting Python thread state, unless it has one (a Python thread). Called
 * without the GIL. */
static inline void sched_py_pin(void)
{
    if (sched_py_pinned || PyGILState_GetThisThreadState() != NULL)
        return;
    PyGILState_Ensure(); /* creates the state, count 1: it outlives later Ensure/Release pairs */
    sched_py_pinned = 1;
    PyEval_SaveThread();
}

/* A worker's exit hook: drop the pinned state (not once the interpreter is finalizing, when a
 * thread taking the GIL would be stopped). */
static void sched_py_unpin(void)
{
    if (!sched_py_pinned)
        return;
    sched_py_pinned = 0;
#if PY_VERSION_HEX >= 0x030D0000
    if (Py_IsFinalizing())
        return;
#else
    if (_Py_IsFinalizing())
        return;
#endif
    PyEval_RestoreThread(PyGILState_GetThisThreadState());
    PyGILState_Release(PyGILState_UNLOCKED);
}

#endif
