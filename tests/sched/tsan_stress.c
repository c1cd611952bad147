/* A bounded stress workload for the scheduler core, meant to be built with
 * -fsanitize=thread (see tests/sched/test_tsan.py and docs/scheduler.md):
 *
 *   gcc -std=c11 -D_GNU_SOURCE -O1 -g -fsanitize=thread -pthread -Ivkml/include \
 *       tests/sched/tsan_stress.c -o /tmp/sched_tsan && /tmp/sched_tsan 300 1
 *
 * Several submitter threads run random DAGs concurrently (records, spins, asynchronous tasks
 * completed from other threads, nested runs waited on inside a task, injected failures) across
 * pool resizes, and check every run: each task ran at most once and exactly once without a
 * failure, never before its predecessors ended, nothing downstream of a failure ran, and the
 * reported failure is one that happened. Exits 0 and prints "ok" when all held.
 * Arguments: runs per submitter thread (default 200), seed (default 1).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched_core.h"
#include "sched_testing.h"

#define SUBMITTERS 3
#define WAIT_NS (60LL * 1000000000LL)

static void die(const char *msg)
{
    fprintf(stderr, "tsan_stress: %s\n", msg);
    exit(2);
}

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* A plan built from an edge list, owning its arrays. */
typedef struct owned_plan {
    sched_plan p;
    int32_t *indptr, *indices, *deps, *roots;
    uint8_t *single;
    sched_task *tasks;
    int32_t *kind;  /* 0 record, 1 record+fail, 2 async, 3 nested */
} owned_plan;

enum { K_RECORD, K_FAIL, K_ASYNC, K_NESTED };

static void plan_build(owned_plan *o, int32_t n, int32_t ne, const int32_t *src, const int32_t *dst)
{
    memset(o, 0, sizeof *o);
    o->indptr = calloc((size_t)n + 1, sizeof(int32_t));
    o->indices = malloc(sizeof(int32_t) * (size_t)(ne ? ne : 1));
    o->deps = calloc((size_t)n, sizeof(int32_t));
    o->roots = malloc(sizeof(int32_t) * (size_t)n);
    o->single = calloc((size_t)n, 1);
    o->tasks = calloc((size_t)n, sizeof(sched_task));
    o->kind = calloc((size_t)n, sizeof(int32_t));
    if (!o->indptr || !o->indices || !o->deps || !o->roots || !o->single || !o->tasks || !o->kind)
        die("out of memory");
    for (int32_t e = 0; e < ne; e++) {
        o->indptr[src[e] + 1]++;
        o->deps[dst[e]]++;
    }
    for (int32_t i = 0; i < n; i++)
        o->indptr[i + 1] += o->indptr[i];
    int32_t *fill = calloc((size_t)n + 1, sizeof(int32_t));
    memcpy(fill, o->indptr, sizeof(int32_t) * ((size_t)n + 1));
    for (int32_t e = 0; e < ne; e++)
        o->indices[fill[src[e]]++] = dst[e];
    free(fill);
    int32_t nr = 0;
    for (int32_t i = 0; i < n; i++) {
        o->single[i] = o->deps[i] == 1;
        if (o->deps[i] == 0)
            o->roots[nr++] = i;
    }
    o->p.n = n;
    o->p.nroots = nr;
    o->p.indptr = o->indptr;
    o->p.indices = o->indices;
    o->p.deps = o->deps;
    o->p.single = o->single;
    o->p.roots = o->roots;
    o->p.tasks = o->tasks;
}

static void plan_free(owned_plan *o)
{
    free(o->indptr);
    free(o->indices);
    free(o->deps);
    free(o->roots);
    free(o->single);
    free(o->tasks);
    free(o->kind);
}

/* Per-run data of the checking task kind. */
typedef struct run_data {
    int64_t *rec;      /* start/end sequence numbers, -1 when not run */
    atomic_int *count; /* times each task ran */
} run_data;

static int check_task(sched_run *run, int32_t task, void *arg)
{
    run_data *d = sched_run_arg(run);
    const sched_test_arg *a = arg;
    atomic_fetch_add(&d->count[task], 1);
    d->rec[2 * task] = atomic_fetch_add(&sched_test_seq, 1);
    sched_test_spin_us(a->us);
    d->rec[2 * task + 1] = atomic_fetch_add(&sched_test_seq, 1);
    return a->status;
}

static owned_plan chain_plan; /* what nested tasks run */

static int nested_task(sched_run *run, int32_t task, void *arg)
{
    (void)run, (void)task, (void)arg;
    sched_run *r = sched_run_new(&chain_plan.p, NULL);
    if (!r)
        return -12;
    if (sched_run_submit(r)) {
        sched_run_unref(r);
        return -5;
    }
    int rc = sched_run_wait(r, WAIT_NS);
    if (rc)
        die("nested run did not finish");
    int failed = sched_run_failed_task(r) >= 0;
    sched_run_unref(r);
    return failed ? -9 : SCHED_DONE;
}

static sched_test_arg spin_args[4] = {{0, 0}, {1, 0}, {3, 0}, {0, -7}};
static sched_test_arg async_ok = {20, 0};
static sched_test_arg async_fail = {20, -8};

typedef struct case_ {
    owned_plan plan;
    run_data data;
    sched_run *run;
    int32_t nedges;
    int32_t *src, *dst;
} case_;

static void case_make(case_ *c, uint64_t *s, int allow_fail)
{
    int32_t n = 1 + (int32_t)(rnd(s) % 200);
    int shape = (int)(rnd(s) % 4);
    int32_t cap = n * 4 + 4, ne = 0;
    c->src = malloc(sizeof(int32_t) * (size_t)cap);
    c->dst = malloc(sizeof(int32_t) * (size_t)cap);
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)n);
    for (int32_t i = 0; i < n; i++)
        perm[i] = i;
    for (int32_t i = n - 1; i > 0; i--) {
        int32_t j = (int32_t)(rnd(s) % (uint64_t)(i + 1)), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (int32_t v = 1; v < n; v++) { /* edges go from earlier to later positions of perm */
        int32_t k = shape == 0 ? 1 : shape == 1 ? (v < n - 1 ? 1 : 0) : (int32_t)(rnd(s) % 4);
        for (int32_t q = 0; q < k && ne < cap - 2; q++) {
            int32_t u = shape == 0 ? v - 1 : shape == 1 ? 0 : (int32_t)(rnd(s) % (uint64_t)v);
            c->src[ne] = perm[u];
            c->dst[ne++] = perm[v];
        }
        if (shape == 1 && v < n - 1 && n > 2) { /* fan-out from 0, fan-in to n-1 */
            c->src[ne] = perm[v];
            c->dst[ne++] = perm[n - 1];
        }
    }
    c->nedges = ne;
    plan_build(&c->plan, n, ne, c->src, c->dst);
    free(perm);
    for (int32_t i = 0; i < n; i++) {
        uint64_t r = rnd(s) % 100;
        int kind = r < 3 ? K_ASYNC : r < 5 ? K_NESTED : (allow_fail && r < 7) ? K_FAIL : K_RECORD;
        c->plan.kind[i] = kind;
        if (kind == K_ASYNC) {
            c->plan.tasks[i].fn = sched_test_async;
            c->plan.tasks[i].arg = (allow_fail && rnd(s) % 4 == 0) ? &async_fail : &async_ok;
        } else if (kind == K_NESTED) {
            c->plan.tasks[i].fn = nested_task;
        } else {
            c->plan.tasks[i].fn = check_task;
            c->plan.tasks[i].arg = kind == K_FAIL ? &spin_args[3] : &spin_args[rnd(s) % 3];
        }
    }
    c->data.rec = malloc(sizeof(int64_t) * 2 * (size_t)n);
    c->data.count = malloc(sizeof(atomic_int) * (size_t)n);
    for (int32_t i = 0; i < 2 * n; i++)
        c->data.rec[i] = -1;
    for (int32_t i = 0; i < n; i++)
        atomic_init(&c->data.count[i], 0);
    c->run = sched_run_new(&c->plan.p, &c->data);
    if (!c->run)
        die("out of memory");
}

/* Marks everything downstream of task f. */
static void mark_down(const owned_plan *o, int32_t f, uint8_t *mark)
{
    int32_t *stack = malloc(sizeof(int32_t) * (size_t)(o->p.n + o->indptr[o->p.n] + 1));
    int32_t sp = 0;
    stack[sp++] = f;
    while (sp) {
        int32_t u = stack[--sp];
        for (int32_t e = o->indptr[u]; e < o->indptr[u + 1]; e++) {
            int32_t v = o->indices[e];
            if (!mark[v]) {
                mark[v] = 1;
                stack[sp++] = v;
            }
        }
    }
    free(stack);
}

static void case_check(case_ *c)
{
    owned_plan *o = &c->plan;
    int32_t n = o->p.n, failed = sched_run_failed_task(c->run);
    if (!sched_run_done(c->run))
        die("wait returned but the run is not done");
    uint8_t *down = calloc((size_t)n, 1);
    int any_fail_ran = 0;
    for (int32_t i = 0; i < n; i++) {
        int cnt = atomic_load(&c->data.count[i]);
        if (cnt > 1)
            die("a task ran twice");
        if (o->kind[i] == K_RECORD || o->kind[i] == K_FAIL) {
            if (failed < 0 && cnt != 1)
                die("a task of a run without failure did not run");
            if (cnt && !(c->data.rec[2 * i] >= 0 && c->data.rec[2 * i] < c->data.rec[2 * i + 1]))
                die("bad start/end record");
            if (cnt && o->kind[i] == K_FAIL) {
                any_fail_ran = 1;
                mark_down(o, i, down);
            }
        }
    }
    if (any_fail_ran && failed < 0)
        die("a failure was not reported");
    if (failed >= 0) {
        int k = o->kind[failed];
        if (!(k == K_FAIL || k == K_ASYNC || k == K_NESTED))
            die("the reported failure is not a failing task");
        if (k == K_FAIL && atomic_load(&c->data.count[failed]) != 1)
            die("the reported failure did not run");
        mark_down(o, failed, down);
    }
    for (int32_t e = 0; e < c->nedges; e++) {
        int32_t u = c->src[e], v = c->dst[e];
        int kv = o->kind[v], ku = o->kind[u];
        if (!(kv == K_RECORD || kv == K_FAIL) || !atomic_load(&c->data.count[v]))
            continue;
        if (down[v])
            die("a task downstream of a failure ran");
        if ((ku == K_RECORD || ku == K_FAIL) &&
            !(atomic_load(&c->data.count[u]) && c->data.rec[2 * u + 1] < c->data.rec[2 * v]))
            die("a task started before its predecessor ended");
    }
    free(down);
}

static void case_free(case_ *c)
{
    sched_run_unref(c->run);
    plan_free(&c->plan);
    free(c->data.rec);
    free(c->data.count);
    free(c->src);
    free(c->dst);
}

typedef struct submitter {
    uint64_t seed;
    int runs;
} submitter;

static void *submit_main(void *arg)
{
    submitter *sb = arg;
    uint64_t s = sb->seed;
    for (int r = 0; r < sb->runs; r += 2) { /* two runs in flight at a time */
        case_ c[2];
        for (int k = 0; k < 2; k++) {
            case_make(&c[k], &s, (r / 2 + k) % 3 == 0);
            if (sched_run_submit(c[k].run))
                die("submit failed");
        }
        for (int k = 1; k >= 0; k--) {
            if (sched_run_wait(c[k].run, WAIT_NS))
                die("a run did not finish in time (deadlock?)");
            case_check(&c[k]);
            case_free(&c[k]);
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 200;
    uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 10) : 1;
    int32_t csrc[7], cdst[7];
    for (int32_t i = 0; i < 7; i++)
        csrc[i] = i, cdst[i] = i + 1;
    plan_build(&chain_plan, 8, 7, csrc, cdst);
    for (int32_t i = 0; i < 8; i++)
        chain_plan.tasks[i].fn = sched_test_noop;
    const int sizes[] = {1, 2, 4, 3};
    for (int phase = 0; phase < 4; phase++) {
        if (sched_set_num_threads(sizes[phase]))
            die("resize failed");
        pthread_t th[SUBMITTERS];
        submitter sb[SUBMITTERS];
        for (int t = 0; t < SUBMITTERS; t++) {
            sb[t].seed = seed * 1000003u + (uint64_t)(phase * SUBMITTERS + t) * 7919u + 1u;
            sb[t].runs = runs / 4 > 2 ? runs / 4 : 2;
            if (pthread_create(&th[t], NULL, submit_main, &sb[t]))
                die("pthread_create failed");
        }
        for (int t = 0; t < SUBMITTERS; t++)
            pthread_join(th[t], NULL);
        if (sched_pool_size() != sizes[phase])
            die("pool size changed");
    }
    if (sched_shutdown(5LL * 1000000000LL))
        die("shutdown with runs in flight");
    sched_run *late = sched_run_new(&chain_plan.p, NULL);
    if (sched_run_submit(late) != ESHUTDOWN)
        die("a run started after shutdown");
    sched_run_unref(late);
    plan_free(&chain_plan);
    printf("ok\n");
    return 0;
}
