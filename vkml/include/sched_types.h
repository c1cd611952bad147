/* Types shared by the scheduler core and the code that defines task kinds.
 *
 * A task kind is nothing but a function with this signature plus a void* argument; the core
 * calls it and reads its status, so a new kind (such as Vulkan submission) needs no change here.
 */
#ifndef VKML_SCHED_TYPES_H
#define VKML_SCHED_TYPES_H

#include <stdint.h>

typedef struct sched_run sched_run;

/* Runs task `task` of `run`, without the GIL. Returns SCHED_DONE when finished, SCHED_ASYNC when
 * it started work that will end later with sched_task_complete() (called from any thread), or
 * any other value (by convention negative) on failure. After returning SCHED_ASYNC the function
 * must not touch `run` again: the run may already be over. */
typedef int (*sched_fn)(sched_run *run, int32_t task, void *arg);

enum { SCHED_DONE = 0, SCHED_ASYNC = 1 };

typedef struct sched_task {
    sched_fn fn;
    void *arg;
} sched_task;

/* An immutable task graph. successors of task i: indices[indptr[i]:indptr[i+1]]; deps[i]: how
 * many predecessors must finish before task i is ready; single[i]: 1 when task i has exactly one
 * predecessor edge and deps[i] == 1 (it is ready without an atomic decrement); roots: the tasks
 * with deps == 0. */
typedef struct sched_plan {
    int32_t n;
    int32_t nroots;
    const int32_t *indptr;
    const int32_t *indices;
    const int32_t *deps;
    const uint8_t *single;
    const int32_t *roots;
    const sched_task *tasks;
} sched_plan;

#endif
