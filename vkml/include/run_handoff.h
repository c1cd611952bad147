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
 * The gate: at most `width` native runs of one plan at once, in arrival order, the waiters
 * nearest their turn spinning (at most a quarter of the cores' worth of threads spin at once,
 * gate and token together), the others asleep on a futex (sched_park.h) until their turn nears.
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
/* A FIFO semaphore of tickets: ticket t is through once (t - released) < width, `released`
 * counting the turns given back. A waiter sleeps on wake[t % VKML_GATE_SLOTS] until it is
 * `ahead` (VKML_GATE_AHEAD at most) turns from its own, then spins: every release wakes the
 * ticket it lets through (in case it slept) and the ticket that is now `ahead` turns away, so
 * that a waiter's wake-up happens while the ones in front of it still run and the turn itself
 * is taken by a spinning thread. Turns go in arrival order: a thread that just finished a run
 * cannot take the turn of one that has waited longer (a first version let spinners win every
 * time: at 16 threads a few ran and the rest waited up to 25 ms, H200).
 *
 * A waiter that gives up (a timeout, Ctrl-C) leaves its ticket in `abandoned`; the release that
 * lets it through passes the turn on at once. */
#define VKML_GATE_SLOTS 256u
#define VKML_GATE_AHEAD 4

typedef struct {
    unsigned width;
    unsigned ahead;                        /* waiters this close to their turn spin (0: none) */
    unsigned next;                         /* tickets handed out */
    atomic_uint released;                  /* turns given back */
    atomic_uint wake[VKML_GATE_SLOTS];     /* futex words, bumped by the releases */
    int asleep[VKML_GATE_SLOTS];           /* threads asleep (or about to be) on each */
    unsigned abandoned[VKML_GATE_SLOTS];   /* ticket + 1 of a waiter that gave up, or 0 */
} vkml_gate;

/* spin: whether its waiters will spin (then the VKML_GATE_AHEAD nearest their turn do, at most
 * as many as may spin at once). */
static inline void vkml_gate_init(vkml_gate *g, unsigned width, int spin)
{
    int ahead = vkml_handoff_max_spinning < VKML_GATE_AHEAD ? vkml_handoff_max_spinning : VKML_GATE_AHEAD;
    g->width = width < 1 ? 1 : width;
    g->ahead = spin ? (unsigned)ahead : 0u;
    g->next = 0;
    atomic_store(&g->released, 0u);
    for (unsigned i = 0; i < VKML_GATE_SLOTS; i++) {
        atomic_store(&g->wake[i], 0u);
        g->asleep[i] = 0;
        g->abandoned[i] = 0;
    }
}

/* Turns still to be given back before ticket t is through (<= 0: through). */
static inline int vkml_gate_behind(vkml_gate *g, unsigned t, unsigned released)
{
    return (int)(t - released) - (int)g->width + 1;
}

static inline void vkml_gate_wake(vkml_gate *g, unsigned t)
{
    unsigned s = t % VKML_GATE_SLOTS;
    atomic_fetch_add(&g->wake[s], 1u);
    if (__atomic_load_n(&g->asleep[s], __ATOMIC_SEQ_CST) > 0)
        sched_park_wake(&g->wake[s], INT_MAX);  /* (tickets sharing the slot look again) */
}

static inline void vkml_gate_release(vkml_gate *g)
{
    unsigned r = atomic_fetch_add(&g->released, 1u) + 1u;
    for (;;) {
        unsigned a = r + g->width - 1u;  /* the ticket this release lets through */
        unsigned *ab = &g->abandoned[a % VKML_GATE_SLOTS], want = a + 1u;
        if (__atomic_load_n(ab, __ATOMIC_SEQ_CST) == want
            && __atomic_compare_exchange_n(ab, &want, 0u, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
            r = atomic_fetch_add(&g->released, 1u) + 1u;  /* its waiter gave up: pass the turn on */
            continue;
        }
        vkml_gate_wake(g, a);
        if (g->ahead)
            vkml_gate_wake(g, a + g->ahead);
        return;
    }
}

/* A ticket; the caller then waits for it (vkml_gate_wait) or gives it up (vkml_gate_abandon). */
static inline unsigned vkml_gate_enter(vkml_gate *g) { return __atomic_fetch_add(&g->next, 1u, __ATOMIC_SEQ_CST); }

/* 1: ticket t is through; 0: timeout_ns passed first (the caller looks at signals and its
 * deadline, then waits again with the same ticket, or abandons it). Spins up to spin_ns while
 * within `ahead` turns of its own (at most that long in one go), sleeps otherwise. */
static inline int vkml_gate_wait(vkml_gate *g, unsigned t, uint64_t spin_ns, uint64_t timeout_ns)
{
    uint64_t deadline = vkml_handoff_now() + timeout_ns;
    unsigned s = t % VKML_GATE_SLOTS;
    int spun = 0;
    for (;;) {
        int behind = vkml_gate_behind(g, t, atomic_load(&g->released));
        if (behind <= 0)
            return 1;
        if (spin_ns && !spun && behind <= (int)g->ahead) {
            spun = 1;  /* once per wake-up: then asleep until the release that lets it through */
            if (vkml_handoff_spin_begin()) {
                uint64_t end = vkml_handoff_now() + spin_ns;
                unsigned n = 0;
                for (;;) {
                    VKML_HANDOFF_RELAX();
                    if (vkml_gate_behind(g, t, atomic_load_explicit(&g->released, memory_order_acquire)) <= 0) {
                        vkml_handoff_spin_end();
                        return 1;
                    }
                    if ((++n & 63u) == 0 && vkml_handoff_now() >= end)
                        break;
                }
                vkml_handoff_spin_end();
                continue;
            }
        }
        /* asleep before the second look, a release's bump of `released` and `wake` before its
         * look at asleep (all sequentially consistent): one of the two sees the other. */
        __atomic_add_fetch(&g->asleep[s], 1, __ATOMIC_SEQ_CST);
        unsigned w = atomic_load(&g->wake[s]);
        behind = vkml_gate_behind(g, t, atomic_load(&g->released));
        if (behind <= 0 || (spin_ns && !spun && behind <= (int)g->ahead)) {
            __atomic_sub_fetch(&g->asleep[s], 1, __ATOMIC_SEQ_CST);
            continue;
        }
        uint64_t now = vkml_handoff_now();
        if (now >= deadline) {
            __atomic_sub_fetch(&g->asleep[s], 1, __ATOMIC_SEQ_CST);
            return 0;
        }
        sched_park_wait(&g->wake[s], w, (int64_t)(deadline - now));
        __atomic_sub_fetch(&g->asleep[s], 1, __ATOMIC_SEQ_CST);
        spun = 0;  /* woken: the turn may be near again */
    }
}

/* Give up ticket t (not through, or through without the caller knowing): its turn, when it
 * comes, is passed on. */
static inline void vkml_gate_abandon(vkml_gate *g, unsigned t)
{
    unsigned *ab = &g->abandoned[t % VKML_GATE_SLOTS], free_ = 0, mine = t + 1u;
    if (!__atomic_compare_exchange_n(ab, &free_, mine, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
        /* The slot holds another give-up (VKML_GATE_SLOTS waiters behind): wait for the turn. */
        while (!vkml_gate_wait(g, t, 0, 50000000ull)) {
        }
        vkml_gate_release(g);
        return;
    }
    if (vkml_gate_behind(g, t, atomic_load(&g->released)) <= 0
        && __atomic_compare_exchange_n(ab, &mine, 0u, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        vkml_gate_release(g);  /* through already, and no release saw the give-up: give it back */
}

/* Runs through the gate and not yet released (at most width). */
static inline unsigned vkml_gate_inflight(vkml_gate *g)
{
    unsigned out = __atomic_load_n(&g->next, __ATOMIC_SEQ_CST) - atomic_load(&g->released);
    return out < g->width ? out : g->width;
}

#endif
