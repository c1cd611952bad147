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
 * The gate: at most `width` native runs of one plan at once, the others spinning (at most a
 * quarter of the cores' worth of threads spin at once, gate and token together), then sleeping
 * on a futex (sched_park.h).
 */
#ifndef VKML_RUN_HANDOFF_H
#define VKML_RUN_HANDOFF_H

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
typedef struct {
    atomic_uint inflight;  /* runs past the gate */
    unsigned width;
    int sleepers;          /* threads in (or about to enter) sched_park_wait */
} vkml_gate;

static inline void vkml_gate_init(vkml_gate *g, unsigned width)
{
    atomic_store(&g->inflight, 0u);
    g->width = width < 1 ? 1 : width;
    g->sleepers = 0;
}

static inline int vkml_gate_try(vkml_gate *g)
{
    unsigned c = atomic_load(&g->inflight);
    while (c < g->width)
        if (atomic_compare_exchange_weak(&g->inflight, &c, c + 1))
            return 1;
    return 0;
}

/* 1: through the gate; 0: timeout_ns passed first (the caller looks at signals and its
 * deadline, then comes back). Spins up to spin_ns before sleeping. */
static inline int vkml_gate_acquire(vkml_gate *g, uint64_t spin_ns, uint64_t timeout_ns)
{
    if (vkml_gate_try(g))
        return 1;
    uint64_t now = vkml_handoff_now(), deadline = now + timeout_ns;
    if (spin_ns && vkml_handoff_spin_begin()) {
        uint64_t end = now + (spin_ns < timeout_ns ? spin_ns : timeout_ns);
        unsigned n = 0;
        for (;;) {
            VKML_HANDOFF_RELAX();
            if (atomic_load_explicit(&g->inflight, memory_order_relaxed) < g->width && vkml_gate_try(g)) {
                vkml_handoff_spin_end();
                return 1;
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
        if (c < g->width) {
            __atomic_sub_fetch(&g->sleepers, 1, __ATOMIC_SEQ_CST);
            if (vkml_gate_try(g))
                return 1;
            continue;
        }
        now = vkml_handoff_now();
        if (now >= deadline) {
            __atomic_sub_fetch(&g->sleepers, 1, __ATOMIC_SEQ_CST);
            return 0;
        }
        sched_park_wait(&g->inflight, c, (int64_t)(deadline - now));
        __atomic_sub_fetch(&g->sleepers, 1, __ATOMIC_SEQ_CST);
        if (vkml_gate_try(g))
            return 1;
    }
}

static inline void vkml_gate_release(vkml_gate *g)
{
    atomic_fetch_sub(&g->inflight, 1u);
    if (__atomic_load_n(&g->sleepers, __ATOMIC_SEQ_CST) > 0)
        sched_park_wake(&g->inflight, 1);
}

static inline unsigned vkml_gate_inflight(vkml_gate *g) { return atomic_load(&g->inflight); }

#endif
