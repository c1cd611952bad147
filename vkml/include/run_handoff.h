/* Hand-offs between threads running GPU plans on the native path (vkml/runtime/_fastrun.pyx)
 * that spin briefly before they sleep.
 *
 * Why: on the virtual machines the GPUs come in, waking a sleeping thread costs about as much as
 * a whole mnist run (20-50 us: the woken vCPU was halted). CPython's GIL sleeps on a condition
 * variable as soon as it is taken, and a run gate built on a lock or a queue does too, so every
 * run of N threads sharing a session paid one or two such wake-ups, and 4 threads made fewer
 * runs than one (H200, 2026-11-28).
 *
 * The GIL token. A native run drops the GIL for its copies, submits and waits; when it is done
 * it needs the GIL back, usually while another runner holds it for its few microseconds of
 * Python (building outputs, the caller's loop, the next run's feed checks). Instead of sleeping
 * in the GIL, it spins on this token until that runner drops the GIL at its own next native
 * run, then takes the GIL uncontended. The token is taken by a runner just before it takes the
 * GIL and given back just after it drops it for its next run, so it stands for "a runner is in
 * its Python part". It only orders runners among themselves and never replaces the GIL: a
 * runner that spun for spin_ns without getting it takes it anyway and then the GIL the usual
 * way (the holder may have left vkml for other work, or for good).
 *
 * The gate: at most `width` native runs of one plan at once; arrivals spin for a turn (at most
 * a quarter of the cores' worth of threads spin at once, gate and token together), the others
 * sleep on a futex (sched_park.h), and none is left waiting much past 2 ms (see below).
 */
#ifndef VKML_RUN_HANDOFF_H
#define VKML_RUN_HANDOFF_H

#include <limits.h>
#include <stdint.h>
#include <time.h>

#include "sched_park.h"

#if defined(__x86_64__) || defined(__i386__)
#define VKML_HANDOFF_RELAX() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define VKML_HANDOFF_RELAX() __asm__ __volatile__("yield")
#else
#define VKML_HANDOFF_RELAX() ((void)0)
#endif

static inline uint64_t vkml_handoff_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Threads spinning in vkml_token_enter or vkml_gate_acquire, and how many may. */
static int vkml_handoff_spinning;
static int vkml_handoff_max_spinning = 1;

static inline void vkml_handoff_set_max_spinning(int n) { vkml_handoff_max_spinning = n < 1 ? 1 : n; }

static inline int vkml_handoff_spin_begin(void)
{
    if (__atomic_add_fetch(&vkml_handoff_spinning, 1, __ATOMIC_RELAXED) <= vkml_handoff_max_spinning)
        return 1;
    __atomic_sub_fetch(&vkml_handoff_spinning, 1, __ATOMIC_RELAXED);
    return 0;
}

static inline void vkml_handoff_spin_end(void) { __atomic_sub_fetch(&vkml_handoff_spinning, 1, __ATOMIC_RELAXED); }

/* ------------------------------------------------------------------ the GIL token */
static int vkml_token;                /* 1: a runner is in its Python part */
static __thread int vkml_token_mine;  /* this thread took it last */
static uint64_t vkml_token_spins, vkml_token_stolen;  /* (counters for the tests and probes) */

/* Just after dropping the GIL: give the token back if this thread holds it. */
static inline void vkml_token_leave(void)
{
    if (vkml_token_mine) {
        vkml_token_mine = 0;
        __atomic_store_n(&vkml_token, 0, __ATOMIC_RELEASE);
    }
}

/* Just before taking the GIL back: take the token, spinning up to spin_ns for it (0: not at
 * all, the token unused). */
static inline void vkml_token_enter(uint64_t spin_ns)
{
    int free_ = 0;
    if (!spin_ns)
        return;
    if (__atomic_compare_exchange_n(&vkml_token, &free_, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
        vkml_token_mine = 1;
        return;
    }
    if (vkml_handoff_spin_begin()) {
        uint64_t end = vkml_handoff_now() + spin_ns;
        unsigned n = 0;
        __atomic_add_fetch(&vkml_token_spins, 1, __ATOMIC_RELAXED);
        for (;;) {
            VKML_HANDOFF_RELAX();
            free_ = 0;
            if (__atomic_load_n(&vkml_token, __ATOMIC_RELAXED) == 0
                && __atomic_compare_exchange_n(&vkml_token, &free_, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
                vkml_handoff_spin_end();
                vkml_token_mine = 1;
                return;
            }
            if ((++n & 63u) == 0 && vkml_handoff_now() >= end)
                break;
        }
        vkml_handoff_spin_end();
    }
    /* Taken anyway: its holder is in other Python, or spinning is not allowed now. */
    __atomic_add_fetch(&vkml_token_stolen, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&vkml_token, 1, __ATOMIC_RELAXED);
    vkml_token_mine = 1;
}

/* ------------------------------------------------------------------ the gate */
/* A counting semaphore that arrivals may barge into: a thread back from its run spins for the
 * next turn and usually takes it, while the others sleep; that keeps the few threads that are
 * running at full speed and the rest out of the GIL's way. A sleeper that has waited
 * VKML_GATE_STARVE_NS is starving: from then until no sleeper is, only sleepers take turns
 * (every release wakes them all), so no thread waits much longer than that.
 *
 * What was measured (H200, mnist, 1/2/4/8/16 threads, bench/results/checks/
 * h200-2026-12-01-threads-handoff.jsonl): barging spinners kept 8 and 16 threads at 20-22k
 * runs/s against 18-21k from one thread, where sleeping hand-offs made 13-18k, but starved some
 * threads for up to 25 ms (p99); a FIFO ticket gate with the waiters nearest their turn
 * spinning was fair and made 9-14k, fewer than one thread: every thread then runs, and the GIL
 * is what they queue on. */
#define VKML_GATE_STARVE_NS 2000000ull

typedef struct {
    atomic_uint inflight;  /* runs past the gate */
    unsigned width;
    int sleepers;          /* threads in (or about to enter) sched_park_wait */
    int starving;          /* sleepers past VKML_GATE_STARVE_NS: no barging while > 0 */
} vkml_gate;

static inline void vkml_gate_init(vkml_gate *g, unsigned width)
{
    atomic_store(&g->inflight, 0u);
    g->width = width < 1 ? 1 : width;
    g->sleepers = 0;
    g->starving = 0;
}

static inline int vkml_gate_try(vkml_gate *g)
{
    unsigned c = atomic_load(&g->inflight);
    while (c < g->width)
        if (atomic_compare_exchange_weak(&g->inflight, &c, c + 1))
            return 1;
    return 0;
}

/* A waiter's state across calls of vkml_gate_acquire (one wait may take several calls). */
typedef struct {
    uint64_t since;  /* when it began to wait (0: not waiting) */
    int starved;     /* it counts in g->starving */
} vkml_gate_wait;

static inline int vkml_gate_took(vkml_gate *g, vkml_gate_wait *w)
{
    if (w->starved)
        __atomic_sub_fetch(&g->starving, 1, __ATOMIC_SEQ_CST);
    w->starved = 0;
    w->since = 0;
    return 1;
}

/* A waiter that gives up (its timeout, Ctrl-C) stops counting as starving. */
static inline void vkml_gate_forget(vkml_gate *g, vkml_gate_wait *w)
{
    if (w->starved)
        __atomic_sub_fetch(&g->starving, 1, __ATOMIC_SEQ_CST);
    w->starved = 0;
    w->since = 0;
}

static inline int vkml_gate_may(vkml_gate *g, vkml_gate_wait *w)
{
    return w->starved || __atomic_load_n(&g->starving, __ATOMIC_SEQ_CST) == 0;
}

/* 1: through the gate; 0: timeout_ns passed first (the caller looks at signals and its
 * deadline, then calls again with the same `w`, or vkml_gate_forget). Spins up to spin_ns
 * before sleeping. */
static inline int vkml_gate_acquire(vkml_gate *g, uint64_t spin_ns, uint64_t timeout_ns, vkml_gate_wait *w)
{
    if (vkml_gate_may(g, w) && vkml_gate_try(g))
        return vkml_gate_took(g, w);
    uint64_t now = vkml_handoff_now(), deadline = now + timeout_ns;
    if (!w->since)
        w->since = now;
    if (spin_ns && !w->starved && vkml_handoff_spin_begin()) {
        uint64_t end = now + (spin_ns < timeout_ns ? spin_ns : timeout_ns);
        unsigned n = 0;
        for (;;) {
            VKML_HANDOFF_RELAX();
            if (atomic_load_explicit(&g->inflight, memory_order_relaxed) < g->width && vkml_gate_may(g, w)
                && vkml_gate_try(g)) {
                vkml_handoff_spin_end();
                return vkml_gate_took(g, w);
            }
            if ((++n & 63u) == 0 && vkml_handoff_now() >= end)
                break;
        }
        vkml_handoff_spin_end();
    }
    for (;;) {
        /* sleepers before the second look, the release's decrement before its look at
         * sleepers (both sequentially consistent): one of the two sees the other. */
        __atomic_add_fetch(&g->sleepers, 1, __ATOMIC_SEQ_CST);
        unsigned c = atomic_load(&g->inflight);
        if (c < g->width && vkml_gate_may(g, w)) {
            __atomic_sub_fetch(&g->sleepers, 1, __ATOMIC_SEQ_CST);
            if (vkml_gate_try(g))
                return vkml_gate_took(g, w);
            continue;
        }
        now = vkml_handoff_now();
        if (!w->starved && now - w->since >= VKML_GATE_STARVE_NS) {
            w->starved = 1;  /* from now on the turns are the sleepers' */
            __atomic_add_fetch(&g->starving, 1, __ATOMIC_SEQ_CST);
            __atomic_sub_fetch(&g->sleepers, 1, __ATOMIC_SEQ_CST);
            continue;
        }
        if (now >= deadline) {
            __atomic_sub_fetch(&g->sleepers, 1, __ATOMIC_SEQ_CST);
            return 0;
        }
        uint64_t nap = deadline - now;
        if (!w->starved && w->since + VKML_GATE_STARVE_NS - now < nap)
            nap = w->since + VKML_GATE_STARVE_NS - now;  /* wake to become starving */
        sched_park_wait(&g->inflight, c, (int64_t)nap);
        __atomic_sub_fetch(&g->sleepers, 1, __ATOMIC_SEQ_CST);
    }
}

static inline void vkml_gate_release(vkml_gate *g)
{
    atomic_fetch_sub(&g->inflight, 1u);
    if (__atomic_load_n(&g->sleepers, __ATOMIC_SEQ_CST) > 0)
        /* all of them while some starve: the one woken must be one that may take the turn */
        sched_park_wake(&g->inflight, __atomic_load_n(&g->starving, __ATOMIC_SEQ_CST) > 0 ? INT_MAX : 1);
}

static inline unsigned vkml_gate_inflight(vkml_gate *g) { return atomic_load(&g->inflight); }

#endif
