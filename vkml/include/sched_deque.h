/* A Chase-Lev work-stealing deque of pointers.
 *
 * The owner pushes and pops at the bottom (LIFO, cache-warm); thieves take from the top. Orderings
 * follow Le, Pop, Cohen and Zappa Nardelli (PPoPP 2013), with sequentially consistent accesses to
 * top/bottom in place of their fences, so that ThreadSanitizer can follow every edge. A full ring
 * grows by doubling; the old ring stays allocated until the deque is destroyed, because a thief
 * may still be reading it.
 */
#ifndef VKML_SCHED_DEQUE_H
#define VKML_SCHED_DEQUE_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define SCHED_STEAL_ABORT ((void *)1) /* lost a race with another thief or the owner */

typedef struct sched_ring {
    int64_t mask;
    struct sched_ring *retired; /* the ring this one replaced */
    _Atomic(void *) items[];
} sched_ring;

typedef struct sched_deque {
    _Alignas(64) atomic_llong top;
    _Alignas(64) atomic_llong bottom;
    _Atomic(sched_ring *) ring;
} sched_deque;

static sched_ring *sched_ring_new(int64_t cap)
{
    sched_ring *r = malloc(sizeof *r + (size_t)cap * sizeof(r->items[0]));
    if (r) {
        r->mask = cap - 1;
        r->retired = NULL;
    }
    return r;
}

/* cap: a power of two. Returns 0, or -1 when out of memory. */
static int sched_deque_init(sched_deque *d, int64_t cap)
{
    sched_ring *r = sched_ring_new(cap);
    if (!r)
        return -1;
    atomic_init(&d->top, 0);
    atomic_init(&d->bottom, 0);
    atomic_init(&d->ring, r);
    return 0;
}

static void sched_deque_destroy(sched_deque *d)
{
    sched_ring *r = atomic_load_explicit(&d->ring, memory_order_relaxed);
    while (r) {
        sched_ring *older = r->retired;
        free(r);
        r = older;
    }
    atomic_store_explicit(&d->ring, NULL, memory_order_relaxed);
}

static sched_ring *sched_deque_grow(sched_deque *d, sched_ring *old, int64_t t, int64_t b)
{
    sched_ring *r = sched_ring_new(2 * (old->mask + 1));
    if (!r) {
        fputs("vkml scheduler: out of memory growing a work deque\n", stderr);
        abort();
    }
    for (int64_t i = t; i < b; i++) {
        void *x = atomic_load_explicit(&old->items[i & old->mask], memory_order_relaxed);
        atomic_store_explicit(&r->items[i & r->mask], x, memory_order_relaxed);
    }
    r->retired = old;
    atomic_store_explicit(&d->ring, r, memory_order_release);
    return r;
}

/* Owner only. */
static inline void sched_deque_push(sched_deque *d, void *x)
{
    int64_t b = atomic_load_explicit(&d->bottom, memory_order_relaxed);
    int64_t t = atomic_load_explicit(&d->top, memory_order_acquire);
    sched_ring *r = atomic_load_explicit(&d->ring, memory_order_relaxed);
    if (b - t > r->mask)
        r = sched_deque_grow(d, r, t, b);
    atomic_store_explicit(&r->items[b & r->mask], x, memory_order_relaxed);
    atomic_store_explicit(&d->bottom, b + 1, memory_order_release);
}

/* Owner only. Returns NULL when empty. */
static inline void *sched_deque_pop(sched_deque *d)
{
    int64_t b = atomic_load_explicit(&d->bottom, memory_order_relaxed);
    /* top only grows, so a stale top that already reaches bottom proves the deque empty */
    if (atomic_load_explicit(&d->top, memory_order_relaxed) >= b)
        return NULL;
    b -= 1;
    sched_ring *r = atomic_load_explicit(&d->ring, memory_order_relaxed);
    atomic_store_explicit(&d->bottom, b, memory_order_seq_cst);
    int64_t t = atomic_load_explicit(&d->top, memory_order_seq_cst);
    if (t > b) {
        atomic_store_explicit(&d->bottom, b + 1, memory_order_relaxed);
        return NULL;
    }
    void *x = atomic_load_explicit(&r->items[b & r->mask], memory_order_relaxed);
    if (t == b) { /* the last item: race the thieves for it */
        if (!atomic_compare_exchange_strong_explicit(&d->top, &t, t + 1, memory_order_seq_cst,
                                                     memory_order_relaxed))
            x = NULL;
        atomic_store_explicit(&d->bottom, b + 1, memory_order_relaxed);
    }
    return x;
}

/* Any thread. Returns an item, NULL when empty, or SCHED_STEAL_ABORT after losing a race. */
static inline void *sched_deque_steal(sched_deque *d)
{
    int64_t t = atomic_load_explicit(&d->top, memory_order_seq_cst);
    int64_t b = atomic_load_explicit(&d->bottom, memory_order_seq_cst);
    if (t >= b)
        return NULL;
    sched_ring *r = atomic_load_explicit(&d->ring, memory_order_acquire);
    void *x = atomic_load_explicit(&r->items[t & r->mask], memory_order_relaxed);
    if (!atomic_compare_exchange_strong_explicit(&d->top, &t, t + 1, memory_order_seq_cst,
                                                 memory_order_relaxed))
        return SCHED_STEAL_ABORT;
    return x;
}

/* A hint: the number of items, possibly stale. */
static inline int64_t sched_deque_size(sched_deque *d)
{
    int64_t b = atomic_load_explicit(&d->bottom, memory_order_relaxed);
    int64_t t = atomic_load_explicit(&d->top, memory_order_relaxed);
    return b > t ? b - t : 0;
}

#endif
