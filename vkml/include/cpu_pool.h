/* A parallel-for over a small pool of native threads, for the CPU device's native programs
 * (vkml/runtime/_cpuprog.pyx): one op's chunks run on the calling thread and up to width - 1
 * helpers, with no GIL and no Python objects, so several runs in flight each split their ops.
 *
 * pool_for(n, fn, arg, width) calls fn(arg, i) once for each i in [0, n) and returns when all
 * calls have returned. The caller takes chunks too; helpers are started on first need (at most
 * pool_set_cores's count less one) and sleep on a condition variable between jobs. A job lives on its
 * caller's stack: it leaves the open list before the caller waits, and the caller returns only
 * once no helper is inside it. After fork() the child has no helpers; its first job starts new
 * ones (pthread_atfork resets the state).
 *
 * With several runs in flight, a job wakes width - 1 helpers, but any helper with nothing to do
 * may join any job that has chunks left, while fewer threads than cores are working (the runs in
 * flight, less the callers asleep at a join, plus the helpers inside jobs; pool_share). With a
 * cap of width - 1 helpers a job, a run's share of the cores idled while it waited at a join for
 * its last chunks, or ran an op of few chunks: resnet18 on a 16-core H200 host made 186-190
 * runs/s from 4 threads capped, 232-238 shared (bench/results/checks/h200-2026-12-03-cpu-pool-share.jsonl).
 * Callers that ran other jobs' chunks while waiting at their joins made 194-201 and were not kept.
 *
 * Where cores would idle anyway, helpers that have just finished chunks, and callers at their
 * joins while runs have at most half the cores, watch for work for pool_spin_ns before sleeping
 * (pool_may_spin, pool_caller_may_spin): a lone resnet18 run on the H200 host took 6.3-6.4 ms
 * against 7.2-10.6 without watching and 7.2-8.4 with the capped pool, 4 threads made 221-222
 * runs/s against 177-185 capped (h200-2026-12-03-cpu-pool-spin.jsonl, 2 interleaved rounds; a
 * noisy host).
 */
#ifndef VKML_CPU_POOL_H
#define VKML_CPU_POOL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "run_handoff.h"
#include "sched_park.h"

typedef void (*pool_fn)(void *arg, int64_t i);

typedef struct pool_job {
    pool_fn fn;
    void *arg;
    int64_t n;
    atomic_llong next;     /* the next chunk to claim */
    atomic_llong done;     /* chunks finished */
    atomic_uint finished;  /* 1 once done == n: the caller's futex word */
    int helpers;           /* helpers that may still join (under pool_mu) */
    atomic_int inside;     /* helpers working on it now */
} pool_job;

#define POOL_MAX_JOBS 256
#define POOL_MAX_THREADS 256

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_cv = PTHREAD_COND_INITIALIZER;
static pool_job *pool_open[POOL_MAX_JOBS];
static int pool_nopen = 0;
static int pool_started = 0;
static int pool_max = 0;
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;

static void pool_fork_prepare(void) { pthread_mutex_lock(&pool_mu); }
static void pool_fork_parent(void) { pthread_mutex_unlock(&pool_mu); }
static atomic_int pool_sleeping;      /* helpers asleep on pool_cv */
static int pool_cores = 1;
static atomic_int pool_runs;
/* A run's turn (run_handoff.h's gate, no spinning): at most `cores` big runs execute at once,
 * since more would only share the cores' caches (resnet18 on the 2-core VM: 16 threads made 33
 * runs/s against 38 from one). */
static vkml_gate pool_gate = {0, 1, 0, 0};

static int pool_share = 1;            /* idle helpers join any job while there is room */
static atomic_int pool_joined;        /* callers asleep at a join */
static atomic_int pool_working;       /* helpers inside a job */
/* Where a core would idle anyway, a helper that has just finished its chunks watches for the
 * next job, and a caller at its join for its last chunks, this long before sleeping: a
 * sleeper's wake-up costs 20-50 us on virtual machines, at every op of a run. */
static int64_t pool_spin_ns = 200000;
static atomic_uint pool_listed;       /* jobs listed so far (what spinning helpers watch) */
static atomic_int pool_spinning;      /* helpers watching */

/* Threads working on the cores: the runs in flight, less the callers asleep at a join, plus the
 * helpers inside jobs. */
static inline int pool_working_threads(void)
{
    return atomic_load_explicit(&pool_working, memory_order_relaxed) +
           atomic_load_explicit(&pool_runs, memory_order_relaxed) -
           atomic_load_explicit(&pool_joined, memory_order_relaxed);
}

/* Whether a helper may watch without more threads on the cores than cores (those working and
 * the other helpers watching). */
static inline int pool_may_spin(void)
{
    return pool_spin_ns > 0 &&
           pool_working_threads() + atomic_load_explicit(&pool_spinning, memory_order_relaxed) < pool_cores;
}

/* Whether a caller at its join may watch: with no more runs than half the cores, so that its own
 * helpers, still working, have cores. */
static inline int pool_caller_may_spin(void)
{
    return pool_spin_ns > 0 && atomic_load_explicit(&pool_runs, memory_order_relaxed) * 2 <= pool_cores;
}

/* Whether one more thread may start on a chunk without more threads working than cores. */
static inline int pool_room(void) { return pool_working_threads() < pool_cores; }

/* The first open job a helper may join (under pool_mu), or NULL. */
static pool_job *pool_find(void)
{
    for (int k = 0; k < pool_nopen; k++) {
        pool_job *j = pool_open[k];
        if (j->helpers > 0 && atomic_load_explicit(&j->next, memory_order_relaxed) < j->n)
            return j;
    }
    return NULL;
}

static void pool_fork_child(void)
{
    pthread_mutex_init(&pool_mu, NULL);
    pthread_cond_init(&pool_cv, NULL);
    pool_nopen = 0;
    pool_started = 0;
    atomic_store(&pool_sleeping, 0);
    atomic_store(&pool_joined, 0);
    atomic_store(&pool_working, 0);
    atomic_store(&pool_listed, 0);
    atomic_store(&pool_spinning, 0);
    /* the parent's other threads, and their runs, are not in the child */
    atomic_store(&pool_runs, 0);
    vkml_gate_init(&pool_gate, (unsigned)pool_cores);
}
static void pool_init_once(void) { pthread_atfork(pool_fork_prepare, pool_fork_parent, pool_fork_child); }

/* The cores runs may use: the pool starts at most cores - 1 helpers, and the gate lets `cores`
 * runs through. Set once, before the first run. */
static void pool_set_cores(int cores)
{
    pthread_once(&pool_once, pool_init_once);
    pthread_mutex_lock(&pool_mu);
    pool_cores = cores < 1 ? 1 : cores;
    pool_max = pool_cores - 1 > POOL_MAX_THREADS ? POOL_MAX_THREADS : pool_cores - 1;
    pool_gate.width = (unsigned)pool_cores;
    pthread_mutex_unlock(&pool_mu);
}

/* A run with its turn starts: the width its ops may split to, the cores shared by the runs in
 * flight. */
static int pool_run_enter(void)
{
    int n = atomic_fetch_add_explicit(&pool_runs, 1, memory_order_relaxed) + 1;
    int w = pool_cores / n;
    return w < 1 ? 1 : w;
}

static void pool_run_exit(void) { atomic_fetch_sub_explicit(&pool_runs, 1, memory_order_relaxed); }

static void pool_work(pool_job *job)
{
    for (;;) {
        int64_t i = atomic_fetch_add_explicit(&job->next, 1, memory_order_relaxed);
        if (i >= job->n)
            return;
        job->fn(job->arg, i);
        if (atomic_fetch_add_explicit(&job->done, 1, memory_order_acq_rel) + 1 == job->n) {
            atomic_store_explicit(&job->finished, 1, memory_order_release);
            sched_park_wake(&job->finished, 1);
        }
    }
}

/* Spins while *word == value and the clock is before `until`; whether the word changed. */
static int pool_watch(atomic_uint *word, unsigned value, uint64_t until)
{
    while (atomic_load_explicit(word, memory_order_acquire) == value) {
        if (vkml_handoff_now() >= until)
            return 0;
        for (int k = 0; k < 32; k++)
            VKML_HANDOFF_RELAX();
    }
    return 1;
}

static void *pool_main(void *unused)
{
    (void)unused;
    uint64_t idle_since = 0;  /* when this helper last finished work (0: it has not since waking) */
    pthread_mutex_lock(&pool_mu);
    for (;;) {
        pool_job *job = pool_share && !pool_room() ? NULL : pool_find();
        /* only helpers that just worked watch: as many as the runs' jobs took (mnist's jobs of
         * a few chunks kept all 15 of a 16-core host spinning, and its runs 30% slower) */
        if (job == NULL && idle_since && pool_may_spin() && vkml_handoff_now() - idle_since < (uint64_t)pool_spin_ns) {
            unsigned seen = atomic_load_explicit(&pool_listed, memory_order_acquire);
            atomic_fetch_add_explicit(&pool_spinning, 1, memory_order_relaxed);
            pthread_mutex_unlock(&pool_mu);
            pool_watch(&pool_listed, seen, idle_since + (uint64_t)pool_spin_ns);
            atomic_fetch_sub_explicit(&pool_spinning, 1, memory_order_relaxed);
            pthread_mutex_lock(&pool_mu);
            continue; /* (a job listed meanwhile, or time to sleep: look again) */
        }
        if (job == NULL) {
            atomic_fetch_add(&pool_sleeping, 1);
            pthread_cond_wait(&pool_cv, &pool_mu);
            atomic_fetch_sub(&pool_sleeping, 1);
            idle_since = 0;
            continue;
        }
        job->helpers--;
        atomic_fetch_add_explicit(&job->inside, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&pool_working, 1, memory_order_relaxed);
        pthread_mutex_unlock(&pool_mu);
        pool_work(job);
        atomic_fetch_sub_explicit(&pool_working, 1, memory_order_relaxed);
        atomic_fetch_sub_explicit(&job->inside, 1, memory_order_release);
        idle_since = vkml_handoff_now();
        pthread_mutex_lock(&pool_mu);
    }
    return NULL;
}

/* Waits until job is finished. */
static void pool_join(pool_job *job)
{
    if (atomic_load_explicit(&job->finished, memory_order_acquire) != 0)
        return;
    if (pool_caller_may_spin() && pool_watch(&job->finished, 0, vkml_handoff_now() + (uint64_t)pool_spin_ns))
        return;
    int share = pool_share;  /* (read once: a probe may switch it meanwhile) */
    if (share) {
        /* this core goes idle: a sleeping helper may take it for a job with chunks left */
        atomic_fetch_add_explicit(&pool_joined, 1, memory_order_relaxed);
        if (atomic_load(&pool_sleeping) > 0) {
            pthread_mutex_lock(&pool_mu);
            if (pool_find() != NULL)
                pthread_cond_signal(&pool_cv);
            pthread_mutex_unlock(&pool_mu);
        }
    }
    while (atomic_load_explicit(&job->finished, memory_order_acquire) == 0)
        sched_park_wait(&job->finished, 0, -1);
    if (share)
        atomic_fetch_sub_explicit(&pool_joined, 1, memory_order_relaxed);
}

static void pool_for(int64_t n, pool_fn fn, void *arg, int width)
{
    if (n <= 0)
        return;
    int helpers = width - 1;   /* the helpers woken */
    if (helpers > n - 1)
        helpers = (int)(n - 1);
    int joiners = pool_share ? (int)(n - 1 < POOL_MAX_THREADS ? n - 1 : POOL_MAX_THREADS)
                             : helpers;  /* the helpers that may join */
    pool_job job;
    job.fn = fn;
    job.arg = arg;
    job.n = n;
    atomic_init(&job.next, 0);
    atomic_init(&job.done, 0);
    atomic_init(&job.finished, 0);
    atomic_init(&job.inside, 0);
    job.helpers = 0;
    int listed = 0;
    if (helpers > 0) {
        pthread_once(&pool_once, pool_init_once);
        pthread_mutex_lock(&pool_mu);
        if (helpers > pool_max)
            helpers = pool_max;
        while (pool_started < helpers) {
            pthread_t t;
            pthread_attr_t attr;
            pthread_attr_init(&attr);
            pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
            int rc = pthread_create(&t, &attr, pool_main, NULL);
            pthread_attr_destroy(&attr);
            if (rc != 0)
                break; /* fewer helpers: the caller does the rest */
            pool_started++;
        }
        if (helpers > pool_started)
            helpers = pool_started;
        if (joiners > pool_started)
            joiners = pool_started;
        if (joiners > 0 && pool_nopen < POOL_MAX_JOBS) {
            job.helpers = joiners;
            pool_open[pool_nopen++] = &job;
            atomic_fetch_add_explicit(&pool_listed, 1, memory_order_release);
            listed = 1;
            /* wake only as many sleepers as the job takes (helpers between jobs find it) */
            int wake = helpers < atomic_load(&pool_sleeping) ? helpers : atomic_load(&pool_sleeping);
            for (int k = 0; k < wake; k++)
                pthread_cond_signal(&pool_cv);
        }
        pthread_mutex_unlock(&pool_mu);
    }
    pool_work(&job);
    if (listed) {
        pthread_mutex_lock(&pool_mu);
        for (int k = 0; k < pool_nopen; k++) {
            if (pool_open[k] == &job) {
                pool_open[k] = pool_open[--pool_nopen];
                break;
            }
        }
        pthread_mutex_unlock(&pool_mu);
    }
    pool_join(&job);
    while (atomic_load_explicit(&job.inside, memory_order_acquire) != 0)
        ; /* a helper between its last claim and leaving: a few instructions */
}

#endif
