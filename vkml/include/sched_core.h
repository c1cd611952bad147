/* The scheduler core: one process-wide pool of worker threads, each with a work-stealing deque,
 * running task graphs (sched_plan) as independent runs (sched_run).
 *
 * No coordinator: a finishing task decrements its successors' counters and the thread that takes
 * a counter to zero owns that successor (it runs the first one next, pushes the others onto its
 * own deque). Idle workers steal, then park on a futex; a pusher only wakes someone when a worker
 * sleeps. Runs started from outside the pool enter through a small locked injection queue.
 *
 * This header holds the pool as static state: include it in exactly one place per process image
 * (vkml/runtime/_sched.pyx, or the C stress driver). Other modules reach it through vkml/runtime/_sched.pxd.
 */
#ifndef VKML_SCHED_CORE_H
#define VKML_SCHED_CORE_H

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__linux__)
#include <sched.h>
#endif

#include "sched_deque.h"
#include "sched_park.h"
#include "sched_types.h"

#ifndef ESHUTDOWN
#define ESHUTDOWN 108
#endif

#define SCHED_MAX_THREADS 1024
#define SCHED_SPIN_NS 50000   /* an idle worker looks for work this long before it parks */
#define SCHED_SPIN_PAUSES 32  /* cpu pauses between two looks */
#define SCHED_WAIT_SPIN_NS 20000 /* a waiter checks this long before it sleeps (short runs) */
#define SCHED_WAIT_SPINNERS 1  /* waiters allowed to spin at once: more would starve workers */
#define SCHED_HELP_POLL_NS 200000 /* a worker waiting on a nested run looks for work this often */

static inline void sched_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static inline int64_t sched_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- runs ------------------------------------------------------------------------------------ */

/* A task's counter; deque items point at these, and idx leads back to the run. */
typedef struct sched_slot {
    atomic_int pending;
    int32_t idx;
} sched_slot;

struct sched_run {
    const sched_plan *plan;
    void *arg;                        /* the native tasks' per-run argument */
    void *owner;                      /* opaque to the core: the creator's context */
    void *error;                      /* opaque to the core: the creator's error object */
    void (*release)(sched_run *run);  /* called when the last reference goes; NULL: free() */
    unsigned generation;              /* the pool generation it was submitted in (see fork) */
    int fail_status;                  /* written by the first failing task, read after done */
    atomic_int refs;                  /* the creator's, and the pool's while it runs */
    atomic_int remaining;             /* tasks not yet finished */
    atomic_int cancelled;             /* set by every failure (and cancel): pending tasks are skipped */
    atomic_int failed_task;           /* index of the first failing task, -1 if none */
    atomic_uint done;                 /* 0 -> 1 when the last task ends; a futex word */
    atomic_int waiters;               /* threads sleeping on done */
    sched_slot slots[];
};

static inline sched_run *sched_run_of(sched_slot *s)
{
    return (sched_run *)((char *)(s - s->idx) - offsetof(sched_run, slots));
}

/* ---- the pool -------------------------------------------------------------------------------- */

typedef struct sched_worker {
    sched_deque dq;
    pthread_t thread;
    uint64_t rng;
    int id;
    int started;
} sched_worker;

enum { SCHED_STOPPED, SCHED_RUNNING, SCHED_STOPPING, SCHED_FINAL };

typedef struct sched_pool {
    pthread_mutex_t lock;   /* start/stop; held briefly, never while waiting on the GIL */
    pthread_cond_t cv;      /* signalled when a stop ends */
    int requested;          /* threads for the next start; 0: one per core */
    int nworkers;           /* constant while running */
    sched_worker *workers;
    void (*exit_hook)(void); /* run by each worker as it exits (drops its Python thread state) */
    int atfork_registered;
    _Alignas(64) atomic_int state;
    _Alignas(64) atomic_int active; /* runs submitted and not finished */
    _Alignas(64) atomic_int sleepers;
    atomic_uint epoch;       /* futex word the idle workers sleep on */
    atomic_int stop;
    atomic_int spinning_waiters;
    atomic_uint generation;  /* bumped in a forked child: older runs can never finish there */
    _Alignas(64) pthread_mutex_t inj_lock;
    sched_slot **inj_buf;    /* ring, capacity a power of two */
    size_t inj_head, inj_len, inj_cap;
    atomic_size_t inj_count;
} sched_pool;

static sched_pool sched_P = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .cv = PTHREAD_COND_INITIALIZER,
    .inj_lock = PTHREAD_MUTEX_INITIALIZER,
};

static _Thread_local sched_worker *sched_self; /* the worker running on this thread, if any */

static void sched_oom(const char *what)
{
    fprintf(stderr, "vkml scheduler: out of memory (%s)\n", what);
    abort();
}

static inline uint64_t sched_rng(sched_worker *w)
{
    uint64_t x = w->rng; /* xorshift64 */
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return w->rng = x;
}

/* Wakes up to n parked workers, but only if any is parked. The fence pairs with the one in
 * sched_park: either the sleeper sees the new work, or this sees the sleeper. */
static inline void sched_notify(int n)
{
    atomic_thread_fence(memory_order_seq_cst);
    int s = atomic_load_explicit(&sched_P.sleepers, memory_order_relaxed);
    if (s > 0) {
        atomic_fetch_add_explicit(&sched_P.epoch, 1, memory_order_seq_cst);
        sched_park_wake(&sched_P.epoch, n < s ? n : s);
    }
}

/* Makes room for k more items; inj_lock held. */
static void sched_inj_reserve(size_t k)
{
    if (sched_P.inj_len + k <= sched_P.inj_cap)
        return;
    size_t cap = sched_P.inj_cap ? sched_P.inj_cap : 1024;
    while (cap < sched_P.inj_len + k)
        cap *= 2;
    sched_slot **buf = malloc(cap * sizeof *buf);
    if (!buf)
        sched_oom("injection queue");
    for (size_t i = 0; i < sched_P.inj_len; i++)
        buf[i] = sched_P.inj_buf[(sched_P.inj_head + i) & (sched_P.inj_cap - 1)];
    free(sched_P.inj_buf);
    sched_P.inj_buf = buf;
    sched_P.inj_head = 0;
    sched_P.inj_cap = cap;
}

static inline void sched_inj_append(sched_slot *s)
{
    sched_P.inj_buf[(sched_P.inj_head + sched_P.inj_len++) & (sched_P.inj_cap - 1)] = s;
}

/* Hands ready tasks to the pool from a thread that is not a worker. */
static void sched_inject(sched_slot *const *items, size_t k)
{
    if (!k)
        return;
    pthread_mutex_lock(&sched_P.inj_lock);
    sched_inj_reserve(k);
    for (size_t i = 0; i < k; i++)
        sched_inj_append(items[i]);
    atomic_store_explicit(&sched_P.inj_count, sched_P.inj_len, memory_order_relaxed);
    pthread_mutex_unlock(&sched_P.inj_lock);
    sched_notify(k > INT_MAX ? INT_MAX : (int)k);
}

static void sched_inject_roots(sched_run *run)
{
    const sched_plan *p = run->plan;
    pthread_mutex_lock(&sched_P.inj_lock);
    sched_inj_reserve((size_t)p->nroots);
    for (int32_t i = 0; i < p->nroots; i++)
        sched_inj_append(&run->slots[p->roots[i]]);
    atomic_store_explicit(&sched_P.inj_count, sched_P.inj_len, memory_order_relaxed);
    pthread_mutex_unlock(&sched_P.inj_lock);
    sched_notify(p->nroots);
}

/* A worker takes a share of the injection queue: one item to run, the rest onto its deque where
 * the others can steal them. */
static sched_slot *sched_inj_take(sched_worker *w)
{
    if (atomic_load_explicit(&sched_P.inj_count, memory_order_relaxed) == 0)
        return NULL;
    pthread_mutex_lock(&sched_P.inj_lock);
    size_t len = sched_P.inj_len;
    if (!len) {
        pthread_mutex_unlock(&sched_P.inj_lock);
        return NULL;
    }
    size_t take = len / (size_t)sched_P.nworkers;
    take = take < 1 ? 1 : take > 256 ? 256 : take;
    size_t mask = sched_P.inj_cap - 1, head = sched_P.inj_head;
    sched_slot *first = sched_P.inj_buf[head];
    for (size_t i = 1; i < take; i++)
        sched_deque_push(&w->dq, sched_P.inj_buf[(head + i) & mask]);
    sched_P.inj_head = (head + take) & mask;
    sched_P.inj_len = len - take;
    atomic_store_explicit(&sched_P.inj_count, sched_P.inj_len, memory_order_relaxed);
    pthread_mutex_unlock(&sched_P.inj_lock);
    if (take > 1)
        sched_notify(1);
    return first;
}

/* One pass over the other workers' deques from a random start. *busy is set when a steal lost a
 * race (work exists). With spread, a successful thief wakes a sleeper when the victim still has
 * work, so parallelism fans out without a storm of wake-ups. */
static sched_slot *sched_steal(sched_worker *w, int *busy, int spread)
{
    int n = sched_P.nworkers;
    if (n < 2)
        return NULL;
    int start = (int)(sched_rng(w) % (uint64_t)n);
    for (int k = 0; k < n; k++) {
        int v = start + k < n ? start + k : start + k - n;
        if (v == w->id)
            continue;
        sched_deque *dq = &sched_P.workers[v].dq;
        void *x = sched_deque_steal(dq);
        if (x == SCHED_STEAL_ABORT) {
            *busy = 1;
            continue;
        }
        if (x) {
            if (spread && sched_deque_size(dq) > 0)
                sched_notify(1);
            return x;
        }
    }
    return NULL;
}

static sched_slot *sched_find_work(sched_worker *w, int *busy, int spread)
{
    sched_slot *s = sched_deque_pop(&w->dq);
    if (!s)
        s = sched_inj_take(w);
    if (!s)
        s = sched_steal(w, busy, spread);
    return s;
}

/* ---- running tasks --------------------------------------------------------------------------- */

static void sched_run_free(sched_run *run) { free(run); }

static inline void sched_run_unref(sched_run *run)
{
    if (atomic_fetch_sub_explicit(&run->refs, 1, memory_order_acq_rel) == 1) {
        if (run->release)
            run->release(run);
        else
            sched_run_free(run);
    }
}

/* Records the first failure of a run and cancels its pending tasks. Returns 1 for the first.
 * Every failing task sets `cancelled` itself, before it releases its successors: were only the
 * first one to set it (after its CAS), a second failure could lose the CAS, release its own
 * successors and have them run while the first thread sat between its CAS and its store (the
 * TSan stress driver caught a task downstream of a failure running, once in some 30 runs). */
static int sched_run_fail(sched_run *run, int32_t task, int status)
{
    int expected = -1;
    atomic_store_explicit(&run->cancelled, 1, memory_order_release);
    if (atomic_compare_exchange_strong(&run->failed_task, &expected, task)) {
        run->fail_status = status;
        return 1;
    }
    return 0;
}

/* The run is no longer active before it is done, so whoever saw it done may resize the pool. */
static void sched_run_finish(sched_run *run)
{
    atomic_fetch_sub_explicit(&sched_P.active, 1, memory_order_seq_cst);
    atomic_store_explicit(&run->done, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&run->waiters, memory_order_seq_cst) > 0)
        sched_park_wake(&run->done, INT_MAX);
    sched_run_unref(run);
}

/* Task i of run ended with status st: release its successors. On a worker (w != NULL) the first
 * ready successor is returned to be run next and the others go onto w's deque; elsewhere they go
 * to the injection queue. */
static sched_slot *sched_task_done(sched_worker *w, sched_run *run, int32_t i, int st)
{
    const sched_plan *p = run->plan;
    if (st != SCHED_DONE)
        sched_run_fail(run, i, st);
    sched_slot *next = NULL, *buf[64];
    size_t nbuf = 0;
    int pushed = 0;
    for (int32_t e = p->indptr[i], end = p->indptr[i + 1]; e < end; e++) {
        int32_t j = p->indices[e];
        sched_slot *s = &run->slots[j];
        if (!p->single[j] &&
            atomic_fetch_sub_explicit(&s->pending, 1, memory_order_acq_rel) != 1)
            continue;
        if (w) {
            if (!next) {
                next = s;
            } else {
                sched_deque_push(&w->dq, s);
                pushed++;
            }
        } else {
            buf[nbuf++] = s;
            if (nbuf == 64) {
                sched_inject(buf, nbuf);
                nbuf = 0;
            }
        }
    }
    if (nbuf)
        sched_inject(buf, nbuf);
    if (pushed)
        sched_notify(pushed);
    if (atomic_fetch_sub_explicit(&run->remaining, 1, memory_order_acq_rel) == 1)
        sched_run_finish(run); /* no successor can be pending then: next is NULL */
    return next;
}

/* Runs s, then whatever it releases first, until a task goes asynchronous or nothing is ready. */
static void sched_execute(sched_worker *w, sched_slot *s)
{
    while (s) {
        sched_run *run = sched_run_of(s);
        int32_t i = s->idx;
        int st = SCHED_DONE;
        if (!atomic_load_explicit(&run->cancelled, memory_order_relaxed)) {
            const sched_task *t = &run->plan->tasks[i];
            st = t->fn(run, i, t->arg);
            if (st == SCHED_ASYNC)
                return;
        }
        s = sched_task_done(w, run, i, st);
    }
}

/* Ends an asynchronous task (one whose function returned SCHED_ASYNC), from any thread. status:
 * 0 for success, anything else fails the run. */
static void sched_task_complete(sched_run *run, int32_t task, int status)
{
    sched_worker *w = sched_self;
    sched_slot *next = sched_task_done(w, run, task, status);
    if (next) {
        sched_deque_push(&w->dq, next);
        sched_notify(1);
    }
}

/* ---- workers --------------------------------------------------------------------------------- */

static sched_slot *sched_park(sched_worker *w)
{
    unsigned e = atomic_load_explicit(&sched_P.epoch, memory_order_seq_cst);
    atomic_fetch_add_explicit(&sched_P.sleepers, 1, memory_order_seq_cst);
    atomic_thread_fence(memory_order_seq_cst);
    int busy = 0;
    sched_slot *s = sched_find_work(w, &busy, 0);
    if (!s && !busy && !atomic_load_explicit(&sched_P.stop, memory_order_seq_cst))
        sched_park_wait(&sched_P.epoch, e, -1);
    atomic_fetch_sub_explicit(&sched_P.sleepers, 1, memory_order_seq_cst);
    return s;
}

static void *sched_worker_main(void *arg)
{
    sched_worker *w = arg;
    sched_self = w;
    for (;;) {
        int busy = 0;
        sched_slot *s = sched_find_work(w, &busy, 1);
        if (!s) {
            int64_t until = sched_now_ns() + SCHED_SPIN_NS;
            do {
                if (atomic_load_explicit(&sched_P.stop, memory_order_relaxed))
                    break;
                for (int j = 0; j < SCHED_SPIN_PAUSES; j++)
                    sched_cpu_relax();
                s = sched_find_work(w, &busy, 1);
            } while (!s && sched_now_ns() < until);
        }
        if (!s) {
            if (atomic_load_explicit(&sched_P.stop, memory_order_seq_cst))
                break;
            s = sched_park(w);
        }
        if (s)
            sched_execute(w, s);
    }
    if (sched_P.exit_hook)
        sched_P.exit_hook();
    sched_self = NULL;
    return NULL;
}

static int sched_default_threads(void)
{
    int n = 0;
#if defined(__linux__) && defined(CPU_COUNT)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        n = CPU_COUNT(&set);
#endif
    if (n <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n = c > 0 ? (int)c : 1;
    }
    return n > SCHED_MAX_THREADS ? SCHED_MAX_THREADS : n;
}

static void sched_atfork_prepare(void)
{
    pthread_mutex_lock(&sched_P.lock);
    pthread_mutex_lock(&sched_P.inj_lock);
    sched_park_prepare_fork();
}

static void sched_atfork_parent(void)
{
    sched_park_after_fork();
    pthread_mutex_unlock(&sched_P.inj_lock);
    pthread_mutex_unlock(&sched_P.lock);
}

/* The child has no workers: forget them (their memory is left alone, the forking thread may be
 * one of them) and start a fresh pool on the next run. Runs of the parent can never finish here;
 * the new generation makes waiting on them an error instead of a hang. */
static void sched_atfork_child(void)
{
    sched_park_after_fork();
    pthread_mutex_unlock(&sched_P.inj_lock);
    pthread_mutex_unlock(&sched_P.lock);
    pthread_cond_init(&sched_P.cv, NULL);
    if (atomic_load(&sched_P.state) != SCHED_FINAL)
        atomic_store(&sched_P.state, SCHED_STOPPED);
    sched_P.workers = NULL;
    sched_P.nworkers = 0;
    atomic_store(&sched_P.active, 0);
    atomic_store(&sched_P.sleepers, 0);
    atomic_store(&sched_P.stop, 0);
    atomic_store(&sched_P.spinning_waiters, 0);
    sched_P.inj_head = sched_P.inj_len = 0;
    atomic_store(&sched_P.inj_count, 0);
    atomic_fetch_add(&sched_P.generation, 1);
    sched_self = NULL;
}

/* P.lock held. */
static int sched_pool_start_locked(void)
{
    if (!sched_P.atfork_registered) {
        if (pthread_atfork(sched_atfork_prepare, sched_atfork_parent, sched_atfork_child))
            return ENOMEM;
        sched_P.atfork_registered = 1;
    }
    int n = sched_P.requested > 0 ? sched_P.requested : sched_default_threads();
    sched_worker *ws = NULL;
    if (posix_memalign((void **)&ws, 64, (size_t)n * sizeof *ws))
        return ENOMEM;
    memset(ws, 0, (size_t)n * sizeof *ws);
    for (int i = 0; i < n; i++) {
        ws[i].id = i;
        ws[i].rng = 0x9E3779B97F4A7C15u * (uint64_t)(i + 1) ^ (uint64_t)sched_now_ns();
        if (!ws[i].rng)
            ws[i].rng = 1;
        if (sched_deque_init(&ws[i].dq, 256)) {
            for (int j = 0; j < i; j++)
                sched_deque_destroy(&ws[j].dq);
            free(ws);
            return ENOMEM;
        }
    }
    sched_P.workers = ws;
    sched_P.nworkers = n;
    atomic_store(&sched_P.stop, 0);
    /* workers take no signals: they belong to the threads that called into vkml */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int started = 0, rc = 0;
    for (int i = 0; i < n; i++) {
        rc = pthread_create(&ws[i].thread, NULL, sched_worker_main, &ws[i]);
        if (rc)
            break;
        ws[i].started = 1;
        started++;
#if defined(__linux__) && defined(_GNU_SOURCE)
        char name[16]; /* named here, not by the thread, so it is named before anyone looks */
        snprintf(name, sizeof name, "vkml-sched-%d", i % 10000);
        pthread_setname_np(ws[i].thread, name);
#endif
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!started) {
        for (int i = 0; i < n; i++)
            sched_deque_destroy(&ws[i].dq);
        free(ws);
        sched_P.workers = NULL;
        sched_P.nworkers = 0;
        return rc ? rc : EAGAIN;
    }
    atomic_store(&sched_P.state, SCHED_RUNNING);
    return 0;
}

/* Counts a run as active, starting the pool first if needed. Returns 0 or an errno. The seq_cst
 * pair (active, then state) against (state, then active) in sched_pool_stop means a stop never
 * misses a run that is being submitted. */
static int sched_pool_enter(void)
{
    for (;;) {
        atomic_fetch_add(&sched_P.active, 1);
        if (atomic_load(&sched_P.state) == SCHED_RUNNING)
            return 0;
        atomic_fetch_sub(&sched_P.active, 1);
        pthread_mutex_lock(&sched_P.lock);
        while (atomic_load(&sched_P.state) == SCHED_STOPPING)
            pthread_cond_wait(&sched_P.cv, &sched_P.lock);
        int rc = 0, st = atomic_load(&sched_P.state);
        if (st == SCHED_FINAL)
            rc = ESHUTDOWN;
        else if (st == SCHED_STOPPED)
            rc = sched_pool_start_locked();
        pthread_mutex_unlock(&sched_P.lock);
        if (rc)
            return rc;
    }
}

/* Stops the workers and joins them. With final, later runs fail with ESHUTDOWN, and runs still in
 * flight get wait_ns to end (after that the workers are left to the process exit); without,
 * it returns EBUSY when any run is in flight. */
static int sched_pool_stop(int final, int64_t wait_ns)
{
    pthread_mutex_lock(&sched_P.lock);
    while (atomic_load(&sched_P.state) == SCHED_STOPPING)
        pthread_cond_wait(&sched_P.cv, &sched_P.lock);
    if (atomic_load(&sched_P.state) != SCHED_RUNNING) {
        if (final)
            atomic_store(&sched_P.state, SCHED_FINAL);
        pthread_mutex_unlock(&sched_P.lock);
        return 0;
    }
    atomic_store(&sched_P.state, SCHED_STOPPING);
    if (atomic_load(&sched_P.active) != 0) {
        int busy = 1;
        if (final) {
            pthread_mutex_unlock(&sched_P.lock);
            int64_t deadline = sched_now_ns() + wait_ns;
            while ((busy = atomic_load(&sched_P.active) != 0) && sched_now_ns() < deadline) {
                struct timespec ms = {0, 1000000};
                nanosleep(&ms, NULL);
            }
            pthread_mutex_lock(&sched_P.lock);
        }
        if (busy) {
            atomic_store(&sched_P.state, final ? SCHED_FINAL : SCHED_RUNNING);
            pthread_cond_broadcast(&sched_P.cv);
            pthread_mutex_unlock(&sched_P.lock);
            return EBUSY;
        }
    }
    sched_worker *ws = sched_P.workers;
    int n = sched_P.nworkers;
    atomic_store(&sched_P.stop, 1);
    atomic_fetch_add(&sched_P.epoch, 1);
    sched_park_wake(&sched_P.epoch, INT_MAX);
    pthread_mutex_unlock(&sched_P.lock); /* a fork may come while joining: the child resets */
    for (int i = 0; i < n; i++)
        if (ws[i].started)
            pthread_join(ws[i].thread, NULL);
    pthread_mutex_lock(&sched_P.lock);
    for (int i = 0; i < n; i++)
        sched_deque_destroy(&ws[i].dq);
    free(ws);
    sched_P.workers = NULL;
    sched_P.nworkers = 0;
    atomic_store(&sched_P.stop, 0);
    atomic_store(&sched_P.state, final ? SCHED_FINAL : SCHED_STOPPED);
    pthread_cond_broadcast(&sched_P.cv);
    pthread_mutex_unlock(&sched_P.lock);
    return 0;
}

/* ---- the API --------------------------------------------------------------------------------- */

/* A run of plan p, one allocation: the bookkeeping and a counter per task. NULL when out of
 * memory. The caller holds one reference. */
static sched_run *sched_run_new(const sched_plan *p, void *arg)
{
    sched_run *r = malloc(offsetof(sched_run, slots) + (size_t)p->n * sizeof(sched_slot));
    if (!r)
        return NULL;
    r->plan = p;
    r->arg = arg;
    r->owner = NULL;
    r->error = NULL;
    r->release = NULL;
    r->generation = 0;
    r->fail_status = 0;
    atomic_init(&r->refs, 1);
    atomic_init(&r->remaining, p->n);
    atomic_init(&r->cancelled, 0);
    atomic_init(&r->failed_task, -1);
    atomic_init(&r->done, p->n == 0);
    atomic_init(&r->waiters, 0);
    for (int32_t i = 0; i < p->n; i++) {
        atomic_init(&r->slots[i].pending, p->deps[i]);
        r->slots[i].idx = i;
    }
    return r;
}

/* Starts the run. Returns 0 or an errno (ESHUTDOWN after interpreter exit, or a thread start
 * failure); on error the run never started and the caller still owns it. */
static int sched_run_submit(sched_run *r)
{
    if (r->plan->n == 0)
        return 0;
    int rc = sched_pool_enter();
    if (rc)
        return rc;
    r->generation = atomic_load_explicit(&sched_P.generation, memory_order_relaxed);
    atomic_fetch_add_explicit(&r->refs, 1, memory_order_relaxed); /* the pool's */
    sched_inject_roots(r);
    return 0;
}

static inline int sched_run_done(sched_run *r)
{
    return (int)atomic_load_explicit(&r->done, memory_order_acquire);
}

/* Waits until the run ends, at most timeout_ns (< 0: no limit). Returns 0 when done, ETIMEDOUT,
 * EINTR (a signal: the caller checks for it and calls again), or ESRCH when the run was in flight
 * across a fork (this is the child). A worker thread (a task waiting on a nested run) runs other
 * tasks meanwhile, so nesting cannot starve the pool. */
static int sched_run_wait(sched_run *r, int64_t timeout_ns)
{
    if (atomic_load_explicit(&r->done, memory_order_acquire))
        return 0;
    int64_t now = sched_now_ns(), until = now + SCHED_WAIT_SPIN_NS;
    int64_t deadline = timeout_ns < 0 ? -1 : now + timeout_ns;
    if (deadline >= 0 && deadline < until)
        until = deadline;
    sched_worker *w = sched_self; /* a worker helps instead of spinning */
    if (atomic_fetch_add(&sched_P.spinning_waiters, 1) < SCHED_WAIT_SPINNERS && !w) {
        int done = 0;
        do {
            for (int k = 0; k < SCHED_SPIN_PAUSES && !done; k++) {
                done = (int)atomic_load_explicit(&r->done, memory_order_acquire);
                sched_cpu_relax();
            }
        } while (!done && sched_now_ns() < until);
        if (done) {
            atomic_fetch_sub(&sched_P.spinning_waiters, 1);
            return 0;
        }
    }
    atomic_fetch_sub(&sched_P.spinning_waiters, 1);
    int rc = 0;
    atomic_fetch_add(&r->waiters, 1);
    for (;;) {
        if (atomic_load(&r->done))
            break;
        if (r->generation != atomic_load_explicit(&sched_P.generation, memory_order_relaxed)) {
            rc = ESRCH;
            break;
        }
        int64_t rel = -1;
        if (deadline >= 0 && (rel = deadline - sched_now_ns()) <= 0) {
            rc = ETIMEDOUT;
            break;
        }
        if (w) {
            int busy = 0;
            sched_slot *s = sched_find_work(w, &busy, 1);
            if (s) {
                sched_execute(w, s);
                continue;
            }
            if (rel < 0 || rel > SCHED_HELP_POLL_NS)
                rel = SCHED_HELP_POLL_NS;
        }
        if (sched_park_wait(&r->done, 0, rel) == EINTR) {
            rc = EINTR;
            break;
        }
    }
    atomic_fetch_sub(&r->waiters, 1);
    return rc;
}

static inline int32_t sched_run_failed_task(sched_run *r)
{
    return atomic_load_explicit(&r->failed_task, memory_order_acquire);
}

static inline int sched_run_fail_status(sched_run *r) { return r->fail_status; }
static inline void *sched_run_arg(sched_run *r) { return r->arg; }
static inline void *sched_run_owner(sched_run *r) { return r->owner; }
static inline void *sched_run_error(sched_run *r) { return r->error; }
static inline void sched_run_set_error(sched_run *r, void *e) { r->error = e; }

static inline void sched_run_set_owner(sched_run *r, void *owner, void (*release)(sched_run *))
{
    r->owner = owner;
    r->release = release;
}

/* Threads for the next pool start (0: one per core); does not touch a running pool. */
static void sched_configure(int n)
{
    pthread_mutex_lock(&sched_P.lock);
    sched_P.requested = n < 0 ? 0 : n > SCHED_MAX_THREADS ? SCHED_MAX_THREADS : n;
    pthread_mutex_unlock(&sched_P.lock);
}

/* Resizes the pool: stops it (EBUSY when runs are in flight) so the next run starts n workers. */
static int sched_set_num_threads(int n)
{
    pthread_mutex_lock(&sched_P.lock);
    int old = sched_P.requested;
    int want = n <= 0 ? sched_default_threads() : n > SCHED_MAX_THREADS ? SCHED_MAX_THREADS : n;
    int st = atomic_load(&sched_P.state);
    int same = st == SCHED_RUNNING && sched_P.nworkers == want;
    sched_P.requested = n <= 0 ? 0 : want;
    pthread_mutex_unlock(&sched_P.lock);
    if (st == SCHED_FINAL)
        return ESHUTDOWN;
    if (same || st != SCHED_RUNNING)
        return 0;
    int rc = sched_pool_stop(0, 0);
    if (rc) {
        pthread_mutex_lock(&sched_P.lock);
        sched_P.requested = old;
        pthread_mutex_unlock(&sched_P.lock);
    }
    return rc;
}

/* Workers running now, or that the next start will make. */
static int sched_pool_size(void)
{
    pthread_mutex_lock(&sched_P.lock);
    int n = atomic_load(&sched_P.state) == SCHED_RUNNING ? sched_P.nworkers
            : sched_P.requested > 0                       ? sched_P.requested
                                                          : sched_default_threads();
    pthread_mutex_unlock(&sched_P.lock);
    return n;
}

static inline void sched_set_thread_exit_hook(void (*hook)(void)) { sched_P.exit_hook = hook; }

/* At process exit: no new runs; in-flight ones get wait_ns to finish, then workers are joined. */
static int sched_shutdown(int64_t wait_ns) { return sched_pool_stop(1, wait_ns); }

#endif
