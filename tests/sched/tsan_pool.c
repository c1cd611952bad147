/* A stress workload for the CPU device's thread pool (vkml/include/cpu_pool.h), meant to be built
 * with -fsanitize=thread (tests/sched/test_tsan.py):
 *
 *   gcc -std=c11 -D_GNU_SOURCE -O1 -g -fsanitize=thread -pthread -Ivkml/include \
 *       tests/sched/tsan_pool.c -o /tmp/pool_tsan && /tmp/pool_tsan 200 1 1
 *
 * Runner threads act as runs in flight on a pool of 8 cores: each enters (pool_run_enter), opens
 * jobs of a few to many chunks one after another, some of whose chunks write a run-local array
 * that the runner reads back after the join, and checks that every chunk ran exactly once. The
 * runner count changes between rounds (widths of 8 down to 1), so helpers join jobs of other
 * runs, watch for work and sleep. Exits 0 and prints "ok" when all held.
 * Arguments: jobs per runner and round (default 200), pool_share (default 1), spin in
 * microseconds (default 200).
 */
#include <stdio.h>
#include <stdlib.h>

#include "cpu_pool.h"

#define MAX_CHUNKS 64

typedef struct check {
    atomic_int calls[MAX_CHUNKS];
    int out[MAX_CHUNKS];  /* plain memory: written by a chunk, read by the runner after the join */
    int spin;
} check;

static void chunk(void *arg, int64_t i)
{
    check *c = (check *)arg;
    for (volatile int k = 0; k < c->spin; k++)
        ;
    c->out[i] = (int)i * 3 + 1;
    atomic_fetch_add_explicit(&c->calls[i], 1, memory_order_relaxed);
}

static int jobs = 200;
static atomic_int failures;

static void *runner(void *arg)
{
    int id = (int)(intptr_t)arg;
    check c;
    for (int j = 0; j < jobs; j++) {
        int width = pool_run_enter();
        int n = 2 + (id * 7 + j * 13) % (MAX_CHUNKS - 1);
        for (int i = 0; i < n; i++) {
            atomic_init(&c.calls[i], 0);
            c.out[i] = 0;
        }
        c.spin = (j % 5) * 200;
        pool_for(n, chunk, &c, width);
        for (int i = 0; i < n; i++)
            if (atomic_load(&c.calls[i]) != 1 || c.out[i] != i * 3 + 1)
                atomic_fetch_add(&failures, 1);
        pool_run_exit();
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        jobs = atoi(argv[1]);
    pool_share = argc > 2 ? atoi(argv[2]) : 1;
    pool_spin_ns = (argc > 3 ? atoll(argv[3]) : 200) * 1000;
    pool_set_cores(8);
    static const int counts[] = {1, 3, 8, 12, 2};
    for (size_t r = 0; r < sizeof counts / sizeof counts[0]; r++) {
        pthread_t t[16];
        for (int k = 0; k < counts[r]; k++)
            if (pthread_create(&t[k], NULL, runner, (void *)(intptr_t)k) != 0)
                return 2;
        for (int k = 0; k < counts[r]; k++)
            pthread_join(t[k], NULL);
    }
    if (atomic_load(&failures)) {
        fprintf(stderr, "tsan_pool: %d chunks ran other than once\n", atomic_load(&failures));
        return 1;
    }
    printf("ok\n");
    return 0;
}
