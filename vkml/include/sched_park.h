/* Sleeping on a 32-bit atomic word until another thread changes it and wakes the sleepers.
 *
 * Linux: futex. Elsewhere (or with -DSCHED_NO_FUTEX, which the stress test uses to check this
 * path too): a fixed table of mutex/condvar buckets hashed by address, futex emulation.
 */
#ifndef VKML_SCHED_PARK_H
#define VKML_SCHED_PARK_H

#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#if defined(__linux__) && !defined(SCHED_NO_FUTEX)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Sleeps while *word == expected, for at most timeout_ns (< 0: no limit). Returns 0 (woken, or
 * the word had already changed; callers re-check), ETIMEDOUT or EINTR. */
static int sched_park_wait(atomic_uint *word, unsigned expected, int64_t timeout_ns)
{
    struct timespec ts, *tp = NULL;
    if (timeout_ns >= 0) {
        ts.tv_sec = (time_t)(timeout_ns / 1000000000);
        ts.tv_nsec = (long)(timeout_ns % 1000000000);
        tp = &ts;
    }
    if (syscall(SYS_futex, (void *)word, FUTEX_WAIT_PRIVATE, expected, tp, NULL, 0) == 0)
        return 0;
    if (errno == ETIMEDOUT || errno == EINTR)
        return errno;
    return 0;
}

static void sched_park_wake(atomic_uint *word, int n)
{
    syscall(SYS_futex, (void *)word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

static void sched_park_prepare_fork(void) {}
static void sched_park_after_fork(void) {}

#else
#include <pthread.h>

#define SCHED_PARK_BUCKETS 64

static struct sched_park_bucket {
    pthread_mutex_t m;
    pthread_cond_t c;
} sched_park_tab[SCHED_PARK_BUCKETS];
static pthread_once_t sched_park_once = PTHREAD_ONCE_INIT;

static void sched_park_init(void)
{
    for (int i = 0; i < SCHED_PARK_BUCKETS; i++) {
        pthread_mutex_init(&sched_park_tab[i].m, NULL);
        pthread_cond_init(&sched_park_tab[i].c, NULL);
    }
}

static struct sched_park_bucket *sched_park_bucket_of(const void *word)
{
    pthread_once(&sched_park_once, sched_park_init);
    uintptr_t h = (uintptr_t)word;
    h ^= h >> 17;
    h *= 0x9E3779B97F4A7C15u;
    return &sched_park_tab[(h >> 40) % SCHED_PARK_BUCKETS];
}

static int sched_park_wait(atomic_uint *word, unsigned expected, int64_t timeout_ns)
{
    struct sched_park_bucket *b = sched_park_bucket_of(word);
    int rc = 0;
    pthread_mutex_lock(&b->m);
    if (atomic_load(word) == expected) {
        if (timeout_ns < 0) {
            pthread_cond_wait(&b->c, &b->m);
        } else {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            int64_t ns = (int64_t)ts.tv_nsec + timeout_ns % 1000000000;
            ts.tv_sec += (time_t)(timeout_ns / 1000000000 + ns / 1000000000);
            ts.tv_nsec = (long)(ns % 1000000000);
            if (pthread_cond_timedwait(&b->c, &b->m, &ts) == ETIMEDOUT)
                rc = ETIMEDOUT;
        }
    }
    pthread_mutex_unlock(&b->m);
    return rc;
}

static void sched_park_wake(atomic_uint *word, int n)
{
    (void)n; /* a bucket is shared by several words: wake them all, they re-check */
    struct sched_park_bucket *b = sched_park_bucket_of(word);
    pthread_mutex_lock(&b->m);
    pthread_cond_broadcast(&b->c);
    pthread_mutex_unlock(&b->m);
}

static void sched_park_prepare_fork(void)
{
    pthread_once(&sched_park_once, sched_park_init);
    for (int i = 0; i < SCHED_PARK_BUCKETS; i++)
        pthread_mutex_lock(&sched_park_tab[i].m);
}

/* In the parent and in the child: the forking thread holds every bucket lock. */
static void sched_park_after_fork(void)
{
    for (int i = 0; i < SCHED_PARK_BUCKETS; i++)
        pthread_mutex_unlock(&sched_park_tab[i].m);
}
#endif

#endif
