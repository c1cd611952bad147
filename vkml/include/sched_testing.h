/* Native task kinds for tests and benchmarks: no-op, spin, sleep, fail, record, asynchronous.
 *
 * "record" writes a global sequence number (one atomic fetch-add) into the run's argument, an
 * int64 array of 2 * n: [2i] when task i starts and [2i+1] when it ends. A task that starts
 * before a predecessor ended shows up as start[succ] < end[pred].
 */
#ifndef VKML_SCHED_TESTING_H
#define VKML_SCHED_TESTING_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "sched_core.h"

typedef struct sched_test_arg {
    int64_t us;  /* how long to spin, sleep, or delay the completion */
    int status;  /* what the task returns (or completes with): 0 or a failure */
} sched_test_arg;

static atomic_llong sched_test_seq;

/* The next sequence number, for Python tasks that record on the same clock as native ones. */
static inline int64_t sched_test_seq_next(void) { return atomic_fetch_add(&sched_test_seq, 1); }

static void sched_test_spin_us(int64_t us)
{
    if (us <= 0)
        return;
    int64_t end = sched_now_ns() + us * 1000;
    while (sched_now_ns() < end)
        sched_cpu_relax();
}

static void sched_test_sleep_us(int64_t us)
{
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

static int sched_test_noop(sched_run *run, int32_t task, void *arg)
{
    (void)run, (void)task, (void)arg;
    return SCHED_DONE;
}

static int sched_test_spin(sched_run *run, int32_t task, void *arg)
{
    (void)run, (void)task;
    const sched_test_arg *a = arg;
    sched_test_spin_us(a->us);
    return a->status;
}

static int sched_test_sleep(sched_run *run, int32_t task, void *arg)
{
    (void)run, (void)task;
    const sched_test_arg *a = arg;
    sched_test_sleep_us(a->us);
    return a->status;
}

static int sched_test_record(sched_run *run, int32_t task, void *arg)
{
    const sched_test_arg *a = arg;
    int64_t *rec = (int64_t *)sched_run_arg(run);
    rec[2 * (int64_t)task] = atomic_fetch_add(&sched_test_seq, 1);
    sched_test_spin_us(a->us);
    rec[2 * (int64_t)task + 1] = atomic_fetch_add(&sched_test_seq, 1);
    return a->status;
}

typedef struct sched_test_job {
    sched_run *run;
    int32_t task;
    sched_test_arg a;
} sched_test_job;

static void *sched_test_async_thread(void *p)
{
    sched_test_job *job = p;
    sched_test_sleep_us(job->a.us);
    sched_task_complete(job->run, job->task, job->a.status);
    free(job);
    return NULL;
}

/* Starts a detached thread that completes the task after a.us microseconds, the way a fence
 * waiter will complete a device task. */
static int sched_test_async(sched_run *run, int32_t task, void *arg)
{
    sched_test_job *job = malloc(sizeof *job);
    if (!job)
        return -ENOMEM;
    job->run = run;
    job->task = task;
    job->a = *(const sched_test_arg *)arg;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    int rc = pthread_create(&t, &attr, sched_test_async_thread, job);
    pthread_attr_destroy(&attr);
    if (rc) {
        free(job);
        return -rc;
    }
    return SCHED_ASYNC;
}

#endif
