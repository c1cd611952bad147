# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""A whole CPU run in C: the steps of a small float32 plan as one list of instructions that runs
without the GIL (vkml/runtime/cpuprog.py lowers a plan to it, once per input signature).

Why: a small model's run on the CPU device is mostly Python between short NumPy calls (mnist:
11 steps, ~9 µs each, of which ~2 µs is arithmetic). Such runs hold the GIL nearly all the time,
so two threads got less done than one. Here a run takes the GIL to check its feeds and make its
outputs, then runs every step in C: convolutions as columns and NumPy's own cblas_sgemm
(vkml/ops/_windowed.pyx), the rest as plain loops.

Tensors live at (base, byte offset): base 0 is the run's arena (intermediates and the column
scratch), 1 an absolute address (constants the program keeps alive), then the inputs, then the
outputs. Each run takes an arena from the program's free list (one per run in flight).
"""
import numpy as np

cimport numpy as cnp
from libc.math cimport expf, fabsf, logf, sqrtf, tanhf
from libc.stdint cimport int64_t, uintptr_t
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset

from vkml.ops._windowed cimport Gemm, Geom, _geom, columns_f32, dot_plane_f32, gemm_f32, max_plane_f32

cnp.import_array()


cdef extern from "run_handoff.h" nogil:
    ctypedef struct vkml_gate:
        pass
    ctypedef struct vkml_gate_wait:
        unsigned long long since
        int starved
    int vkml_gate_may(vkml_gate *g, vkml_gate_wait *w)
    int vkml_gate_try(vkml_gate *g)
    int vkml_gate_acquire(vkml_gate *g, unsigned long long spin_ns, unsigned long long timeout_ns,
                          vkml_gate_wait *w)
    void vkml_gate_release(vkml_gate *g)


cdef extern from "cpu_pool.h" nogil:
    vkml_gate pool_gate
    ctypedef void (*pool_fn)(void *arg, int64_t i) noexcept nogil
    void pool_for(int64_t n, pool_fn fn, void *arg, int width)
    void pool_set_cores(int cores)
    int pool_run_enter()
    void pool_run_exit()
    int pool_share
    int64_t pool_spin_ns


cdef extern from "cpu_gemm.h" nogil:
    int vkml_gemm_kc, vkml_gemm_nc, vkml_gemm_forced, vkml_gemm_mr512
    int vkml_gemm_isa()
    int vkml_gemm_detect_once()
    int vkml_gemm_mr(int isa)
    int vkml_gemm_nr(int isa)
    int64_t vkml_gemm_npad(int64_t n, int nr)
    void vkml_gemm_pack_a(const float *a, int64_t lda, int64_t m, int64_t k, int mr, float *ap)
    void vkml_gemm_place_row(const float *row, int64_t kk, int64_t k, int64_t n, int nr, int kc, float *bpk)
    int vkml_sgemm(int isa, int mr, int64_t m, int64_t n, int64_t k, const float *ap, const float *b, int64_t ldb,
                   float *c, int64_t ldc, const float *bias, const float *res, int relu)
    int vkml_sgemm_packed(int isa, int mr, int kc, int64_t m, int64_t n, int64_t k, const float *ap,
                          const float *bpk, int64_t npad, int64_t j0, float *c, int64_t ldc, const float *bias,
                          const float *res, int relu)
    int vkml_sgemm_kblock(int isa, int mr, int kc, int64_t m, int64_t n, int64_t k, const float *ap,
                          const float *bpk, int64_t npad, int64_t pc, float *c, int64_t ldc)


cdef extern from "cpu_winograd.h" nogil:
    void vkml_wino_in_plane(int isa, int t, const float *x, int64_t h, int64_t w, int64_t py, int64_t px,
                            int64_t th, int64_t tw, float *v, int64_t vstride)
    void vkml_wino_out_plane(int isa, int t, const float *m, int64_t mstride, int64_t th, int64_t tw, float bias,
                             const float *res, int relu, float *y, int64_t oh, int64_t ow)


cdef extern from *:
    """
    #define vkml_add64(p, v) __atomic_fetch_add((p), (v), __ATOMIC_RELAXED)
    """
    void vkml_add64(int64_t *p, int64_t v) nogil


cdef inline int64_t _now_ns() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec * 1000000000 + ts.tv_nsec


cdef struct Timed:
    pool_fn fn
    void *arg
    int64_t *busy


cdef void _timed(void *arg, int64_t i) noexcept nogil:
    cdef Timed *t = <Timed *>arg
    cdef int64_t t0 = _now_ns()
    t.fn(t.arg, i)
    vkml_add64(t.busy, _now_ns() - t0)


cdef void _for(int64_t n, pool_fn fn, void *arg, int width, int64_t *busy) noexcept nogil:
    """fn(arg, i) for each i < n: on this thread where n is 1, else on the pool; while profiling
    (busy not NULL) each call's time is added to *busy."""
    cdef Timed timed
    if busy != NULL:
        timed.fn, timed.arg, timed.busy = fn, arg, busy
        fn, arg = _timed, &timed
    if n == 1:
        fn(arg, 0)
    elif n > 1:
        pool_for(n, fn, arg, width)


cdef bint adaptive_parts = True
cdef int parts_per_thread = 2
# A convolution split by channels on the own GEMM gives each chunk at least this many weight
# panels (MR rows each), and splits its columns too when that leaves too few chunks: a chunk of
# one panel reads all of the packed columns for MR rows of output (0: channels only). H200 host,
# resnet18, 2 interleaved rounds (bench/results/checks/h200-2026-12-03-cpu-split-panels.jsonl): a
# lone run 7.5-9.3 ms channels only, 7.0-8.0 at 4, 6.7-6.9 at 8; 16 threads 318-331, 332-345 and
# 312-338 runs/s; 4 threads 158-180, 148-190, 171-185 (the same bits either way: a chunk's
# columns are summed in the same K order).
cdef int split_panels = 4


def set_split_panels(int panels) -> int:
    """The weight panels a chunk of channels has at least before columns split too (0: channels
    only); returns the previous (probes)."""
    global split_panels
    old = split_panels
    split_panels = max(0, panels)
    return old


def set_parts_per_thread(int parts) -> int:
    """A convolution's or GEMM's chunks per thread of its run (the default 2); returns the
    previous (probes)."""
    global parts_per_thread
    old = parts_per_thread
    if parts > 0:
        parts_per_thread = parts
    return old


def set_adaptive_parts(bint on) -> None:
    """Whether a convolution takes fewer, bigger chunks while other runs are in flight (probes)."""
    global adaptive_parts
    adaptive_parts = on


def set_pool_share(int on=-1, long long spin_ns=-1) -> tuple:
    """Whether idle helpers of the pool join any run's job while fewer threads than cores work
    (include/cpu_pool.h; 1, the default) or at most its width - 1 (0), and how long helpers and
    callers at joins watch for work before sleeping while at most half the cores have runs; -1
    keeps a value. Returns the previous (share, spin_ns) (probes, tests)."""
    global pool_share, pool_spin_ns
    old = (pool_share, pool_spin_ns)
    if on >= 0:
        pool_share = on
    if spin_ns >= 0:
        pool_spin_ns = spin_ns
    return old


cdef struct PoolCheck:
    int64_t *calls
    int64_t spin


cdef void _pool_check_chunk(void *arg, int64_t i) noexcept nogil:
    cdef PoolCheck *c = <PoolCheck *>arg
    cdef int64_t k
    for k in range(c.spin):  # (a little work, so that chunks overlap)
        vkml_add64(&c.calls[i], 0)
    vkml_add64(&c.calls[i], 1)


def pool_check(int jobs, int chunks, long long spin=200) -> int:
    """Runs `jobs` pool jobs of `chunks` chunks one after another, as a run in flight does (the
    pool's tests, from many threads at once): the chunks that did not run exactly once."""
    cdef PoolCheck c
    cdef int64_t bad = 0, i
    cdef int j, width
    calls = np.zeros(max(1, chunks), np.int64)
    cdef int64_t[::1] cv = calls
    c.calls, c.spin = &cv[0], spin
    with nogil:
        width = pool_run_enter()
        for j in range(jobs):
            for i in range(chunks):
                c.calls[i] = 0
            pool_for(chunks, _pool_check_chunk, &c, width)
            for i in range(chunks):
                if c.calls[i] != 1:
                    bad += 1
        pool_run_exit()
    return bad


def set_cores(int cores) -> None:
    """The cores the programs' runs share (vkml/runtime/cpuprog.py sets the usable cores)."""
    pool_set_cores(cores)


def gemm_info(int want=-1) -> tuple:
    """(kernel set, MR, NR) of vkml's own GEMM (include/cpu_gemm.h): 2 AVX-512, 1 AVX2, 0 none
    (convolutions then keep NumPy's cblas_sgemm). want: the best the CPU has up to that set
    (VKML_CPU_GEMM); -1, the one set_gemm forced, else the best."""
    cdef int isa = vkml_gemm_isa() if want < 0 else min(want, vkml_gemm_detect_once())
    return isa, vkml_gemm_mr(isa), vkml_gemm_nr(isa)


def set_gemm(int isa=-1, int kc=0, int nc=0, int mr512=0) -> tuple:
    """Force a kernel set (-1: the best the CPU has), the blocking and AVX-512's rows a tile (0:
    keep each); returns the previous (forced, kc, nc, mr512). Programs made before keep the
    kernel and rows they were packed for, and take kc when a convolution starts."""
    global vkml_gemm_forced, vkml_gemm_kc, vkml_gemm_nc, vkml_gemm_mr512
    old = (vkml_gemm_forced, vkml_gemm_kc, vkml_gemm_nc, vkml_gemm_mr512)
    vkml_gemm_forced = isa
    if kc > 0:
        vkml_gemm_kc = kc
    if nc > 0:
        vkml_gemm_nc = nc
    if mr512 in (8, 12, 14):
        vkml_gemm_mr512 = mr512
    return old


def pack_weights(w, int isa, int mr=0) -> np.ndarray:
    """A (groups, rows, K) float32 weight array as panels of mr rows (0: the kernel set's), group
    after group: what a conv instruction of that kernel set reads."""
    cdef cnp.ndarray[cnp.float32_t, ndim=3, mode="c"] a = np.ascontiguousarray(w, np.float32)
    if mr == 0:
        mr = vkml_gemm_mr(isa)
    if mr == 0:
        raise ValueError(f"no GEMM kernel set {isa}")
    cdef Py_ssize_t g, groups = a.shape[0], m = a.shape[1], k = a.shape[2]
    cdef Py_ssize_t panels = (m + mr - 1) // mr
    cdef cnp.ndarray[cnp.float32_t, ndim=1, mode="c"] out = np.empty(groups * panels * mr * k, np.float32)
    if out.shape[0]:
        for g in range(groups):
            vkml_gemm_pack_a(&a[g, 0, 0], k, m, k, mr, &out[g * panels * mr * k])
    return out


def gemm(a, b, bias=None, res=None, bint relu=False, int isa=-1, bint packed_b=False, Py_ssize_t j0=0,
         ap=None) -> np.ndarray:
    """relu(a @ b[:, j0:] + bias[:, None] + res) through the own kernel: B packed per call, or
    (packed_b) whole first, as a convolution's shared columns are; ap: a already packed (timing
    the kernel alone). Tests check it against NumPy."""
    isa = vkml_gemm_isa() if isa < 0 else min(isa, vkml_gemm_detect_once())  # (never a set the CPU lacks)
    if isa == 0:
        raise ValueError("this CPU has no kernel set of vkml's own GEMM")
    cdef int mr = vkml_gemm_mr(isa), nr = vkml_gemm_nr(isa), kc = vkml_gemm_kc
    cdef cnp.ndarray[cnp.float32_t, ndim=2, mode="c"] aa = np.ascontiguousarray(a, np.float32)
    cdef cnp.ndarray[cnp.float32_t, ndim=1, mode="c"] apk = pack_weights(aa[None], isa) if ap is None else ap
    cdef cnp.ndarray[cnp.float32_t, ndim=2, mode="c"] bb = np.ascontiguousarray(b, np.float32)
    cdef Py_ssize_t m = aa.shape[0], k = aa.shape[1], nall = bb.shape[1], n = nall - j0, kk
    if bb.shape[0] != k or not 0 <= j0 <= nall or (packed_b and j0 % nr):
        raise ValueError(f"a is {(<object>aa).shape}, b {(<object>bb).shape}, j0 {j0}")
    cdef cnp.ndarray[cnp.float32_t, ndim=2, mode="c"] c = np.empty((m, n), np.float32)
    cdef cnp.ndarray[cnp.float32_t, ndim=1, mode="c"] bv
    cdef cnp.ndarray[cnp.float32_t, ndim=2, mode="c"] rv
    cdef cnp.ndarray[cnp.float32_t, ndim=1, mode="c"] bpk
    cdef const float *biasp = NULL
    cdef const float *resp = NULL
    cdef int64_t npad = vkml_gemm_npad(nall, nr) if nr else 0
    if bias is not None:
        bv = np.ascontiguousarray(bias, np.float32).reshape(m)
        biasp = &bv[0] if m else NULL
    if res is not None:
        rv = np.ascontiguousarray(np.broadcast_to(res, (m, n)), np.float32)
        resp = &rv[0, 0] if m * n else NULL
    cdef int rc
    cdef const float *app = &apk[0] if apk.shape[0] else NULL
    cdef float *cp = &c[0, 0] if m * n else NULL
    if packed_b:
        bpk = np.empty(max(1, k * npad), np.float32)
        for kk in range(k):
            vkml_gemm_place_row(&bb[kk, 0], kk, k, nall, nr, kc, &bpk[0])
        with nogil:
            rc = vkml_sgemm_packed(isa, mr, kc, m, n, k, app, &bpk[0], npad, j0, cp, n, biasp, resp, relu)
    else:
        with nogil:
            rc = vkml_sgemm(isa, mr, m, n, k, app, &bb[0, j0] if k * n else NULL, nall, cp, n, biasp, resp, relu)
    if rc != 0:
        raise MemoryError("no kernel or no memory for the GEMM's panels")
    return c


# Elementwise and pooling work (outputs x taps) below this stays on one thread: a hand-off to a
# helper costs a few microseconds.
cdef Py_ssize_t min_split_elements = 1 << 16


def set_min_split(Py_ssize_t n) -> int:
    """Set the least work an elementwise op or pool splits at; returns the previous (tests)."""
    global min_split_elements
    old = min_split_elements
    min_split_elements = max(1, n)
    return old

cdef enum:
    N_REFS = 6
    N_PARAMS = 20
    MAX_RANK = 6
    MAX_BASES = 66  # arena, absolute, 32 inputs, 32 outputs

# Opcodes (cpuprog.py names them).
cdef enum:
    OP_CONV = 1       # r0 x, r1 w (G, Mg, K), r2 bias or none, r3 y, r4 column scratch, r5 residual or none
    OP_GEMM = 2       # r0 a, r1 b, r3 y: batches of y (M, N) = alpha · a (M, K) @ b (K, N)
    OP_BINARY = 3     # r0 a, r1 b, r3 y, broadcast by strides
    OP_UNARY = 4      # r0 x, r3 y
    OP_MAXPOOL = 5    # r0 x planes, r3 y planes
    OP_AVGPOOL = 6    # r0 x planes, r1 divisors' reciprocals (OH·OW) or none, r2 ones (taps), r3 y
    OP_MEAN = 7       # r0 x (P, L), r3 y (P): means of rows
    OP_SOFTMAX = 8    # r0 x (R, L), r3 y (R, L)
    OP_AFFINE = 9     # r0 x (N, C, L), r1 scale (C), r2 shift (C), r3 y
    OP_COPY = 10      # r0 src, r3 dst: rows of bytes with strides
    OP_CHAIN = 11     # r0 x, r1 (opcode, constant) rows of a FusedElementwise (ops/fused.py), r3 y

cdef enum:
    B_ADD = 1
    B_SUB = 2
    B_MUL = 3
    B_DIV = 4
    B_MAX = 5
    B_MIN = 6

cdef enum:
    U_RELU = 1
    U_LEAKY = 2
    U_SIGMOID = 3
    U_TANH = 4
    U_CLIP = 5
    U_HARDSIGMOID = 6
    U_NEG = 7
    U_ABS = 8
    U_EXP = 9
    U_LOG = 10
    U_SQRT = 11
    U_RECIPROCAL = 12

OPS = {"conv": OP_CONV, "gemm": OP_GEMM, "binary": OP_BINARY, "unary": OP_UNARY, "maxpool": OP_MAXPOOL,
       "avgpool": OP_AVGPOOL, "mean": OP_MEAN, "softmax": OP_SOFTMAX, "affine": OP_AFFINE, "copy": OP_COPY,
       "chain": OP_CHAIN}
BINARY = {"Add": B_ADD, "Sub": B_SUB, "Mul": B_MUL, "Div": B_DIV, "Max": B_MAX, "Min": B_MIN}
UNARY = {"Relu": U_RELU, "LeakyRelu": U_LEAKY, "Sigmoid": U_SIGMOID, "Tanh": U_TANH, "Clip": U_CLIP,
         "HardSigmoid": U_HARDSIGMOID, "Neg": U_NEG, "Abs": U_ABS, "Exp": U_EXP, "Log": U_LOG, "Sqrt": U_SQRT,
         "Reciprocal": U_RECIPROCAL}


cdef struct Ref:
    int base  # -1: absent
    Py_ssize_t off


cdef struct Ins:
    int op, code
    Ref r[N_REFS]
    Py_ssize_t p[N_PARAMS]
    float f[2]
    Geom g


cdef inline char *_at(char **bases, Ref r) noexcept nogil:
    if r.base == 1:
        return <char *>r.off
    return bases[r.base] + r.off if r.base >= 0 else NULL


cdef inline float _bin(int code, float a, float b) noexcept nogil:
    if code == B_ADD:
        return a + b
    if code == B_SUB:
        return a - b
    if code == B_MUL:
        return a * b
    if code == B_DIV:
        return a / b
    if code == B_MAX:
        return a if a >= b or b != b else b  # NaN propagates like np.maximum
    return a if a <= b or b != b else b


cdef void _binary_row(int code, const float *a, Py_ssize_t sa, const float *b, Py_ssize_t sb, float *y,
                      Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t j
    cdef float s
    if sa == 1 and sb == 1:
        if code == B_ADD:
            for j in range(n):
                y[j] = a[j] + b[j]
        elif code == B_MUL:
            for j in range(n):
                y[j] = a[j] * b[j]
        else:
            for j in range(n):
                y[j] = _bin(code, a[j], b[j])
    elif sa == 1 and sb == 0:
        s = b[0]
        if code == B_ADD:
            for j in range(n):
                y[j] = a[j] + s
        elif code == B_MUL:
            for j in range(n):
                y[j] = a[j] * s
        else:
            for j in range(n):
                y[j] = _bin(code, a[j], s)
    elif sa == 0 and sb == 1:
        s = a[0]
        for j in range(n):
            y[j] = _bin(code, s, b[j])
    else:
        for j in range(n):
            y[j] = _bin(code, a[j * sa], b[j * sb])


cdef void _binary(const Ins *t, const float *a, const float *b, float *y, Py_ssize_t o0,
                  Py_ssize_t o1) noexcept nogil:
    # p: rank, shape[6], a's strides[6], b's strides[6] (elements; 0 where broadcast); output rows
    # (all dims but the last) o0..o1
    cdef Py_ssize_t rank = t.p[0], d, inner, o, oa, ob, q
    cdef Py_ssize_t idx[MAX_RANK]
    cdef const Py_ssize_t *shape = &t.p[1]
    cdef const Py_ssize_t *sa = &t.p[1 + MAX_RANK]
    cdef const Py_ssize_t *sb = &t.p[1 + 2 * MAX_RANK]
    inner = shape[rank - 1]
    q = o0
    d = rank - 2
    while d >= 0:
        idx[d] = q % shape[d]
        q //= shape[d]
        d -= 1
    for o in range(o0, o1):
        oa = 0
        ob = 0
        for d in range(rank - 1):
            oa += idx[d] * sa[d]
            ob += idx[d] * sb[d]
        _binary_row(t.code, a + oa, sa[rank - 1], b + ob, sb[rank - 1], y + o * inner, inner)
        d = rank - 2
        while d >= 0:
            idx[d] += 1
            if idx[d] < shape[d]:
                break
            idx[d] = 0
            d -= 1


cdef void _unary(const Ins *t, const float *x, float *y, Py_ssize_t first, Py_ssize_t n) noexcept nogil:
    # elements first..n
    cdef Py_ssize_t j
    cdef float v, lo = t.f[0], hi = t.f[1]
    x += first
    y += first
    n -= first
    if t.code == U_RELU:  # NaN passes, -0 becomes +0: as NumPy's maximum(x, 0)
        for j in range(n):
            v = x[j]
            y[j] = v if (v > 0 or v != v) else 0
    elif t.code == U_LEAKY:
        for j in range(n):
            v = x[j]
            y[j] = v if v >= 0 else v * lo
    elif t.code == U_CLIP:
        for j in range(n):
            v = x[j]
            v = lo if v < lo else v
            y[j] = hi if v > hi else v
    elif t.code == U_HARDSIGMOID:
        for j in range(n):
            v = lo * x[j] + hi
            y[j] = 0.0 if v < 0 else (1.0 if v > 1 else v)
    else:  # the functions a fused chain also has: the same formulas, so the same bits
        _function(t.code, x, y, n)


cdef int _CHAIN_FN[8]
_CHAIN_FN[:] = [U_NEG, U_ABS, U_EXP, U_LOG, U_SQRT, U_SIGMOID, U_TANH, U_RECIPROCAL]


cdef void _function(int code, const float *x, float *y, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t j
    cdef float v
    if code == U_NEG:
        for j in range(n):
            y[j] = -x[j]
    elif code == U_ABS:
        for j in range(n):
            y[j] = fabsf(x[j])
    elif code == U_EXP:
        for j in range(n):
            y[j] = expf(x[j])
    elif code == U_LOG:
        for j in range(n):
            y[j] = logf(x[j])
    elif code == U_SQRT:
        for j in range(n):
            y[j] = sqrtf(x[j])
    elif code == U_RECIPROCAL:
        for j in range(n):
            y[j] = 1.0 / x[j]
    elif code == U_SIGMOID:
        for j in range(n):
            v = x[j]
            if v >= 0:
                y[j] = 1.0 / (1.0 + expf(-v))
            else:
                v = expf(v)
                y[j] = v / (1.0 + v)
    elif code == U_TANH:
        for j in range(n):
            y[j] = tanhf(x[j])


cdef enum:
    CONV_WHOLE = 0      # one call for the whole op
    CONV_ROWS = 1       # chunks of output rows, each with its own columns
    CONV_POSITIONS = 2  # a pointwise convolution in chunks of positions (no columns)
    CONV_CHANNELS = 3   # all columns first (chunks of planes), then chunks of output channels
    CONV_KSPLIT = 4     # (own kernel, one image and group) all columns packed first, then chunks of
                        # K into partial sums, then chunks of rows adding them with the epilogue
    CONV_WINO = 5       # (own kernel, 3x3, stride 1, one group) Winograd F(T x T, 3x3), T = p[18] (4 or
                        # 2): every input plane transformed (p[16], p[17]: the pads at the top and
                        # left), the (T + 2)^2 GEMMs in chunks of columns, every output plane
                        # transformed back with the epilogue


cdef struct ConvJob:
    const Ins *t
    const Gemm *gm
    const float *x
    const float *w
    const float *bias
    const float *res
    float *y
    float *scratch
    float *packed  # (own kernel, CONV_CHANNELS/KSPLIT) the columns as packed B panels, after them
    float *partial # (CONV_KSPLIT) each K chunk's sums (M x positions), after the panels
    Py_ssize_t kparts
    int kc         # the own kernel's K block, read once a convolution
    Py_ssize_t parts
    Py_ssize_t tiles  # (CONV_WINO) T x T output tiles an image, and over all images
    Py_ssize_t ptot
    Py_ssize_t cparts  # (own kernel, CONV_CHANNELS) chunks of column panels per chunk of channels


cdef inline Py_ssize_t _part(Py_ssize_t n, Py_ssize_t parts, Py_ssize_t i) noexcept nogil:
    return n * i // parts


cdef void _epilogue(const Ins *t, const float *bias, const float *res, float *c, Py_ssize_t rows,
                    Py_ssize_t cols, Py_ssize_t ld) noexcept nogil:
    # c (rows, cols), leading dimension ld: + bias per row, + the residual at c's offsets, Relu;
    # the order of the separate ops (Conv's bias, then Add, then Relu), so the same bits.
    cdef Py_ssize_t i, j
    cdef float v
    cdef float *row
    cdef const float *r
    cdef bint relu = t.p[11]
    if bias == NULL and res == NULL and not relu:
        return
    for i in range(rows):
        row = c + i * ld
        if bias != NULL:
            v = bias[i]
            for j in range(cols):
                row[j] += v
        if res != NULL:
            r = res + i * ld
            for j in range(cols):
                row[j] += r[j]
        if relu:  # (a select, not a branch: signs of data are a coin toss to the predictor)
            for j in range(cols):
                v = row[j]
                row[j] = v if (v > 0 or v != v) else 0


cdef void _conv_part(void *arg, int64_t part) noexcept nogil:
    cdef ConvJob *job = <ConvJob *>arg
    cdef const Ins *t = job.t
    cdef Py_ssize_t nb = t.p[0], groups = t.p[1], cg = t.p[2], mg = t.p[3], h = t.p[4], wd = t.p[5]
    cdef Py_ssize_t oh = t.p[6], ow = t.p[7], npos = t.p[6] * t.p[7], taps = t.p[8] * t.p[9]
    cdef Py_ssize_t kdim = cg * taps, mode = t.p[12], parts = job.parts
    cdef Py_ssize_t b, gi, p0, q, lo = 0, hi = npos, m0 = 0, m1 = mg, pc, off, ldb, npad
    cdef int isa = <int>t.p[14], mr = <int>t.p[15] if t.p[14] else 1, nr = vkml_gemm_nr(isa)
    cdef Py_ssize_t panels = (mg + mr - 1) // mr  # (own kernel: the weights' panels of mr rows a group)
    cdef const float *wg
    cdef const float *src
    cdef const float *cols
    cdef const float *bias
    cdef const float *res
    cdef float *c
    cdef float *scratch
    cdef float *tmp
    if mode == CONV_ROWS:
        lo, hi = _part(oh, parts, part) * ow, _part(oh, parts, part + 1) * ow
    elif mode == CONV_POSITIONS:
        lo, hi = _part(npos, parts, part), _part(npos, parts, part + 1)
    elif mode == CONV_CHANNELS:  # (whole panels a part; of columns too with the own kernel)
        q = part // job.cparts
        m0, m1 = _part(panels, parts // job.cparts, q) * mr, min(mg, _part(panels, parts // job.cparts, q + 1) * mr)
        if job.cparts > 1:
            q = part % job.cparts
            npad = (npos + nr - 1) // nr
            lo, hi = _part(npad, job.cparts, q) * nr, min(npos, _part(npad, job.cparts, q + 1) * nr)
    pc = hi - lo
    if pc <= 0 or m1 <= m0:
        return
    if isa and not t.p[10] and mode != CONV_CHANNELS:
        # own kernel, a chunk of rows (or all): the chunk's columns made plane by plane in its
        # region's tail and placed straight into packed panels at its head
        npad = vkml_gemm_npad((oh + parts - 1) // parts * ow, nr)
        scratch = job.scratch + part * (kdim * npad + taps * npad)
        tmp = scratch + kdim * npad
    else:
        scratch = job.scratch + lo * kdim  # (a row chunk's own columns: (K, pc) at its rows' share)
    for b in range(nb):
        for gi in range(groups):
            src = job.x + (b * groups + gi) * cg * h * wd
            off = (b * groups + gi) * mg * npos + m0 * npos + lo
            c = job.y + off
            bias = job.bias + gi * mg + m0 if job.bias != NULL else NULL
            res = job.res + off if job.res != NULL else NULL
            if isa:  # vkml's own kernel on the packed weights, the epilogue in its tiles
                wg = job.w + gi * panels * mr * kdim + m0 * kdim
                if t.p[10]:  # pointwise: the input planes are B (packed per block by the kernel)
                    if vkml_sgemm(isa, mr, m1 - m0, pc, kdim, wg, src + lo, npos, c, npos, bias, res,
                                  <int>t.p[11]) != 0:
                        _gemm_packed(mr, m1 - m0, pc, kdim, wg, src + lo, npos, c, npos)
                        _epilogue(t, bias, res, c, m1 - m0, pc, npos)
                elif mode == CONV_CHANNELS:  # B packed whole by the columns pass, shared by the parts
                    npad = vkml_gemm_npad(npos, nr)
                    vkml_sgemm_packed(isa, mr, job.kc, m1 - m0, pc, kdim, wg,
                                      job.packed + (b * groups + gi) * kdim * npad, npad, lo, c, npos, bias, res,
                                      <int>t.p[11])
                else:
                    for p0 in range(cg):
                        columns_f32(src + p0 * h * wd, tmp, &t.g, lo // ow, hi // ow, pc)
                        for q in range(taps):
                            vkml_gemm_place_row(tmp + q * pc, p0 * taps + q, kdim, pc, nr, job.kc, scratch)
                    vkml_sgemm_packed(isa, mr, job.kc, m1 - m0, pc, kdim, wg, scratch, vkml_gemm_npad(pc, nr), 0,
                                      c, npos, bias, res, <int>t.p[11])
                continue
            if t.p[10]:  # pointwise: the input planes are the columns
                cols = src + lo
            elif mode == CONV_CHANNELS:
                cols = job.scratch + (b * groups + gi) * kdim * npos
            else:
                for p0 in range(cg):
                    columns_f32(src + p0 * h * wd, scratch + p0 * taps * pc, &t.g, lo // ow, hi // ow, pc)
                cols = scratch
            ldb = npos if t.p[10] or mode == CONV_CHANNELS else pc
            gemm_f32(job.gm, m1 - m0, pc, kdim, job.w + (gi * mg + m0) * kdim, kdim, cols, ldb, c, npos)
            _epilogue(t, bias, res, c, m1 - m0, pc, npos)


cdef void _gemm_packed(int mr, Py_ssize_t m, Py_ssize_t n, Py_ssize_t k, const float *ap, const float *b,
                       Py_ssize_t ldb, float *c, Py_ssize_t ldc) noexcept nogil:
    # c = a @ b from packed panels, plainly: where the kernel found no memory for its B panels
    cdef Py_ssize_t i, j, kk
    cdef const float *a
    for i in range(m):
        for j in range(n):
            c[i * ldc + j] = 0
        a = ap + (i // mr) * k * mr + i % mr
        for kk in range(k):
            for j in range(n):
                c[i * ldc + j] += a[kk * mr] * b[kk * ldb + j]


cdef void _conv_columns(void *arg, int64_t plane) noexcept nogil:
    # CONV_CHANNELS' first pass: one input plane's kh·kw rows of the column matrix
    cdef ConvJob *job = <ConvJob *>arg
    cdef const Ins *t = job.t
    cdef Py_ssize_t cg = t.p[2], npos = t.p[6] * t.p[7], taps = t.p[8] * t.p[9]
    cdef Py_ssize_t bg = plane // cg, p0 = plane % cg, q, kdim = cg * taps
    cdef float *rows = job.scratch + (bg * cg * taps + p0 * taps) * npos
    cdef int nr
    columns_f32(job.x + plane * t.p[4] * t.p[5], rows, &t.g, 0, t.p[6], npos)
    if t.p[14]:  # the own kernel's packed B, shared by the parts: these rows placed while in cache
        nr = vkml_gemm_nr(<int>t.p[14])
        for q in range(taps):
            vkml_gemm_place_row(rows + q * npos, p0 * taps + q, kdim, npos, nr, job.kc,
                                job.packed + bg * kdim * vkml_gemm_npad(npos, nr))


cdef void _conv(const Ins *t, const Gemm *gm, char **bases, int width, int64_t *busy) noexcept nogil:
    cdef ConvJob job
    # At most two chunks per thread this run may use: alone, all the planned chunks; with other
    # runs in flight, fewer and bigger ones (GEMMs of more columns run faster a multiply-add):
    # resnet18 on the H200 host from 4 / 16 threads 128-134 / 228-247 runs/s against 104-108 /
    # 140-142 with the planned chunks always (bench/results/checks/h200-2026-12-03-cpu-native-probe.jsonl).
    # The price: a run beside others may differ from a lone run in the last bits.
    cdef Py_ssize_t parts = t.p[13] if t.p[12] != CONV_WHOLE else 1
    if adaptive_parts:
        parts = min(parts, parts_per_thread * width)
    cdef Py_ssize_t panels, rparts, cols
    job.cparts = 1
    if t.p[12] == CONV_CHANNELS and t.p[14]:  # whole weight panels a part
        panels = (t.p[3] + t.p[15] - 1) // t.p[15]
        parts = max(1, min(parts, panels))
        if split_panels > 0 and panels < split_panels * parts:
            # chunks of split_panels weight panels at least, the rest of the parts over column panels
            rparts = max(1, panels // split_panels)
            cols = (t.p[6] * t.p[7] + vkml_gemm_nr(<int>t.p[14]) - 1) // vkml_gemm_nr(<int>t.p[14])
            job.cparts = max(1, min(cols, parts // rparts))
            parts = rparts * job.cparts
    job.t, job.gm, job.parts = t, gm, max(1, parts)
    if busy != NULL and t.p[12] != CONV_WINO:  # (CONV_WINO counts its own)
        vkml_add64(busy + 1, job.parts)
    job.x = <float *>_at(bases, t.r[0])
    job.w = <float *>_at(bases, t.r[1])
    job.bias = <float *>_at(bases, t.r[2])
    job.y = <float *>_at(bases, t.r[3])
    job.scratch = <float *>_at(bases, t.r[4])
    job.kc = vkml_gemm_kc
    job.packed = job.scratch + t.p[0] * t.p[1] * t.p[2] * t.p[8] * t.p[9] * t.p[6] * t.p[7]
    job.res = <float *>_at(bases, t.r[5])
    if t.p[12] == CONV_KSPLIT:
        _conv_ksplit(&job, width, busy)
        return
    if t.p[12] == CONV_WINO:
        _conv_wino(&job, width, busy)
        return
    if t.p[12] == CONV_CHANNELS and not t.p[10]:
        _for(t.p[0] * t.p[1] * t.p[2], _conv_columns, &job, width, NULL)
    _for(job.parts, _conv_part, &job, width, busy)


cdef Py_ssize_t WINO_COLUMNS = 192  # a chunk of one of CONV_WINO's GEMMs has this many columns at least


cdef inline Py_ssize_t _wino_side(const Ins *t, Py_ssize_t n) noexcept nogil:
    # tiles along an output side of n for CONV_WINO's tile side t.p[18]
    return (n + t.p[18] - 1) // t.p[18]


cdef void _conv_wino(ConvJob *job, int width, int64_t *busy) noexcept nogil:
    # V (A2, C, P) then M (A2, Mout, P) in the scratch, A2 = (T + 2)^2 (include/cpu_winograd.h
    # has the layouts)
    cdef const Ins *t = job.t
    cdef Py_ssize_t a2 = (t.p[18] + 2) * (t.p[18] + 2)
    job.tiles = _wino_side(t, t.p[6]) * _wino_side(t, t.p[7])
    job.ptot = t.p[0] * job.tiles
    job.packed = job.scratch + a2 * t.p[2] * job.ptot  # (M)
    job.kparts = max(1, job.ptot // WINO_COLUMNS)
    if busy != NULL:
        vkml_add64(busy + 1, t.p[0] * (t.p[2] + t.p[3]) + a2 * job.kparts)
    _for(t.p[0] * t.p[2], _wino_in, job, width, busy)
    _for(a2 * job.kparts, _wino_gemm, job, width, busy)
    _for(t.p[0] * t.p[3], _wino_out, job, width, busy)


cdef void _wino_in(void *arg, int64_t plane) noexcept nogil:
    # input plane (image b, channel c) -> V[.][c][its tiles]
    cdef ConvJob *job = <ConvJob *>arg
    cdef const Ins *t = job.t
    cdef Py_ssize_t c = t.p[2], b = plane // c, ch = plane % c
    vkml_wino_in_plane(<int>t.p[14], <int>t.p[18], job.x + plane * t.p[4] * t.p[5], t.p[4], t.p[5], t.p[16],
                       t.p[17], _wino_side(t, t.p[6]), _wino_side(t, t.p[7]),
                       job.scratch + ch * job.ptot + b * job.tiles, c * job.ptot)


cdef void _wino_gemm(void *arg, int64_t i) noexcept nogil:
    # M[xi][:, lo:hi] = U[xi] @ V[xi][:, lo:hi] for chunk i = (xi, columns)
    cdef ConvJob *job = <ConvJob *>arg
    cdef const Ins *t = job.t
    cdef Py_ssize_t c = t.p[2], m = t.p[3], p = job.ptot, xi = i // job.kparts, q = i % job.kparts
    cdef Py_ssize_t lo = _part(p, job.kparts, q), hi = _part(p, job.kparts, q + 1)
    cdef int isa = <int>t.p[14], mr = <int>t.p[15]
    cdef const float *u = job.w + xi * ((m + mr - 1) // mr) * mr * c
    cdef const float *v = job.scratch + xi * c * p + lo
    cdef float *mm = job.packed + xi * m * p + lo
    if hi <= lo:
        return
    if vkml_sgemm(isa, mr, m, hi - lo, c, u, v, p, mm, p, NULL, NULL, 0) != 0:
        _gemm_packed(mr, m, hi - lo, c, u, v, p, mm, p)


cdef void _wino_out(void *arg, int64_t plane) noexcept nogil:
    # output plane (image b, channel k) <- M[.][k][its tiles], bias, residual, Relu
    cdef ConvJob *job = <ConvJob *>arg
    cdef const Ins *t = job.t
    cdef Py_ssize_t m = t.p[3], b = plane // m, k = plane % m, npos = t.p[6] * t.p[7]
    vkml_wino_out_plane(<int>t.p[14], <int>t.p[18], job.packed + k * job.ptot + b * job.tiles, m * job.ptot,
                        _wino_side(t, t.p[6]), _wino_side(t, t.p[7]), job.bias[k] if job.bias != NULL else -0.0,
                        job.res + plane * npos if job.res != NULL else NULL, <int>t.p[11],
                        job.y + plane * npos, t.p[6], t.p[7])


cdef void _conv_ksplit(ConvJob *job, int width, int64_t *busy) noexcept nogil:
    # Chunks of K, each a partial sum over every channel and position, then chunks of channels
    # adding them in K's order with the epilogue. For short rows (few positions) and long K,
    # where chunks of channels would each read all of the packed columns: resnet18's 7x7 layers
    # have 0.9 MB of them and 9.4 MB of weights.
    cdef const Ins *t = job.t
    cdef Py_ssize_t kdim = t.p[2] * t.p[8] * t.p[9], npos = t.p[6] * t.p[7], mg = t.p[3]
    cdef Py_ssize_t kc = (kdim + job.parts - 1) // job.parts
    kc = max(kc, 16)
    job.kc = <int>kc
    job.kparts = (kdim + kc - 1) // kc
    job.partial = job.packed + kdim * vkml_gemm_npad(npos, vkml_gemm_nr(<int>t.p[14]))
    _for(t.p[2], _conv_columns, job, width, NULL)
    _for(job.kparts, _conv_kpart, job, width, busy)
    job.parts = max(1, min(<Py_ssize_t>width, max(1, job.kparts * mg * npos // min_split_elements), mg))
    _for(job.parts, _conv_ksum, job, width, busy)


cdef void _conv_kpart(void *arg, int64_t part) noexcept nogil:
    cdef ConvJob *job = <ConvJob *>arg
    cdef const Ins *t = job.t
    cdef Py_ssize_t kdim = t.p[2] * t.p[8] * t.p[9], npos = t.p[6] * t.p[7], mg = t.p[3]
    cdef int isa = <int>t.p[14], mr = <int>t.p[15]
    vkml_sgemm_kblock(isa, mr, job.kc, mg, npos, kdim, job.w, job.packed, vkml_gemm_npad(npos, vkml_gemm_nr(isa)),
                      part * job.kc, job.partial + part * mg * npos, npos)


cdef void _conv_ksum(void *arg, int64_t part) noexcept nogil:
    # rows r0..r1 of y = the K chunks' partials in order, then the conv's epilogue
    cdef ConvJob *job = <ConvJob *>arg
    cdef const Ins *t = job.t
    cdef Py_ssize_t npos = t.p[6] * t.p[7], mg = t.p[3], q, i, j
    cdef Py_ssize_t r0 = _part(mg, job.parts, part), r1 = _part(mg, job.parts, part + 1)
    cdef float *y
    cdef const float *src
    for i in range(r0, r1):
        y = job.y + i * npos
        memcpy(y, job.partial + i * npos, npos * sizeof(float))
        for q in range(1, job.kparts):
            src = job.partial + q * mg * npos + i * npos
            for j in range(npos):
                y[j] += src[j]
    _epilogue(t, job.bias + r0 if job.bias != NULL else NULL, job.res + r0 * npos if job.res != NULL else NULL,
              job.y + r0 * npos, r1 - r0, npos, npos)


cdef struct GemmJob:
    const Ins *t
    const Gemm *gm
    const float *a
    const float *b
    float *y
    Py_ssize_t parts  # chunks of each batch's columns (or rows, t.p[8])


cdef void _gemm_part(void *arg, int64_t i) noexcept nogil:
    # chunk i: batch i // parts, its share of the columns (p[8] == 0) or of the rows
    cdef GemmJob *job = <GemmJob *>arg
    cdef const Ins *t = job.t
    cdef Py_ssize_t m = t.p[1], n = t.p[2], kd = t.p[3], parts = job.parts, r, j
    cdef Py_ssize_t k = i // parts, q = i % parts, lo, hi
    cdef float alpha = t.f[0]
    cdef const float *a = job.a + k * t.p[4]
    cdef const float *b = job.b + k * t.p[5]
    cdef float *y = job.y + k * t.p[6]
    if t.p[8]:
        lo, hi = _part(m, parts, q), _part(m, parts, q + 1)
        if hi > lo:
            gemm_f32(job.gm, hi - lo, n, kd, a + lo * kd, kd, b, n, y + lo * n, n)
            if alpha != 1:
                for j in range(lo * n, hi * n):
                    y[j] *= alpha
    else:
        lo, hi = _part(n, parts, q), _part(n, parts, q + 1)
        if hi > lo:
            gemm_f32(job.gm, m, hi - lo, kd, a, kd, b + lo, n, y + lo, n)
            if alpha != 1:
                for r in range(m):
                    for j in range(lo, hi):
                        y[r * n + j] *= alpha


cdef void _gemm_batches(const Ins *t, const Gemm *gm, const float *a, const float *b, float *y, int width,
                        int64_t *busy) noexcept nogil:
    # p: batches, M, N, K, a's batch stride, b's, y's (elements), chunks planned a batch, and
    # whether they split the rows (else the columns); a run beside others takes fewer
    cdef GemmJob job
    job.t, job.gm, job.a, job.b, job.y = t, gm, a, b, y
    job.parts = max(1, min(t.p[7], parts_per_thread * width)) if adaptive_parts else max(1, t.p[7])
    if busy != NULL:
        vkml_add64(busy + 1, job.parts * t.p[0])
    # (a GEMM planned whole, p[7] == 0, runs its batches on this thread: the pool at width 1)
    _for(job.parts * t.p[0], _gemm_part, &job, width if t.p[7] else 1, busy)


cdef void _avgpool(const Ins *t, const float *x, const float *inv, const float *ones, float *y, Py_ssize_t p0,
                   Py_ssize_t p1) noexcept nogil:
    cdef Py_ssize_t p, j, hw = t.g.h * t.g.w, ohw = t.g.oh * t.g.ow
    cdef float s = t.f[0]
    cdef float *o
    for p in range(p0, p1):
        o = y + p * ohw
        if hw == 0:
            memset(o, 0, ohw * sizeof(float))
            continue
        dot_plane_f32(x + p * hw, ones, 0, o, &t.g)
        if inv != NULL:
            for j in range(ohw):
                o[j] *= inv[j]
        else:
            for j in range(ohw):
                o[j] *= s


cdef void _mean(const Ins *t, const float *x, float *y, Py_ssize_t p0, Py_ssize_t p1) noexcept nogil:
    cdef Py_ssize_t p, j, n = t.p[1]
    cdef double acc
    for p in range(p0, p1):
        acc = 0
        for j in range(n):
            acc += x[p * n + j]
        y[p] = <float>(acc / n)


cdef void _softmax(const Ins *t, const float *x, float *y, Py_ssize_t r0, Py_ssize_t r1) noexcept nogil:
    cdef Py_ssize_t r, j, n = t.p[1]
    cdef float m, e
    cdef double acc
    cdef const float *row
    cdef float *out
    for r in range(r0, r1):
        row = x + r * n
        out = y + r * n
        m = row[0]
        for j in range(1, n):
            if row[j] > m:
                m = row[j]
        acc = 0
        for j in range(n):
            e = expf(row[j] - m)
            out[j] = e
            acc += e
        e = <float>(1.0 / acc)
        for j in range(n):
            out[j] *= e


cdef void _affine(const Ins *t, const float *x, const float *s, const float *h, float *y, Py_ssize_t q0,
                  Py_ssize_t q1) noexcept nogil:
    # planes q0..q1 of (N·C, L), channel q % C
    cdef Py_ssize_t q, j, chans = t.p[1], n = t.p[2]
    cdef float sc, sh
    for q in range(q0, q1):
        sc = s[q % chans]
        sh = h[q % chans]
        for j in range(n):
            y[q * n + j] = x[q * n + j] * sc + sh


cdef void _chain(const Ins *t, const float *x, const float *rows, float *y, Py_ssize_t lo,
                 Py_ssize_t n) noexcept nogil:
    # p: elements, steps; elements lo..n. Each step over the range, in place after the first
    # (rounded to float32 after every step, as the separate ops). Opcodes: shaders/fused.comp, ops/fused.py.
    cdef Py_ssize_t j, k
    cdef int code
    cdef float c, v
    cdef const float *src
    x += lo
    y += lo
    n -= lo
    src = x
    for k in range(t.p[1]):
        code = <int>rows[2 * k]
        c = rows[2 * k + 1]
        if code == 0:
            for j in range(n):
                y[j] = src[j] + c
        elif code == 1:
            for j in range(n):
                y[j] = src[j] - c
        elif code == 2:
            for j in range(n):
                y[j] = c - src[j]
        elif code == 3:
            for j in range(n):
                y[j] = src[j] * c
        elif code == 4:
            for j in range(n):
                y[j] = src[j] / c
        elif code == 5:
            for j in range(n):
                y[j] = c / src[j]
        elif code == 6:
            for j in range(n):
                v = src[j]
                y[j] = v if (v > 0 or v != v) else 0
        elif 7 <= code <= 14:  # ops/fused.py's unary opcodes: Neg Abs Exp Log Sqrt Sigmoid Tanh Reciprocal
            _function(_CHAIN_FN[code - 7], src, y, n)
        src = y


cdef void _copy(const Ins *t, const char *src, char *dst) noexcept nogil:
    # p: rows, bytes per row, source stride, destination stride (bytes)
    cdef Py_ssize_t r
    for r in range(t.p[0]):
        memcpy(dst + r * t.p[3], src + r * t.p[2], t.p[1])


cdef struct RangeJob:
    const Ins *t
    char **bases
    Py_ssize_t units, parts


cdef void _range(const Ins *t, char **bases, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
    """Units lo..hi of an op that splits evenly (elements, rows or planes; see _units)."""
    cdef Py_ssize_t p
    cdef float *x = <float *>_at(bases, t.r[0])
    cdef float *y = <float *>_at(bases, t.r[3])
    if t.op == OP_BINARY:
        _binary(t, x, <float *>_at(bases, t.r[1]), y, lo, hi)
    elif t.op == OP_UNARY:
        _unary(t, x, y, lo, hi)
    elif t.op == OP_CHAIN:
        _chain(t, x, <float *>_at(bases, t.r[1]), y, lo, hi)
    elif t.op == OP_MAXPOOL:
        for p in range(lo, hi):
            max_plane_f32(x + p * t.g.h * t.g.w, y + p * t.g.oh * t.g.ow, &t.g, t.f[0])
    elif t.op == OP_AVGPOOL:
        _avgpool(t, x, <float *>_at(bases, t.r[1]), <float *>_at(bases, t.r[2]), y, lo, hi)
    elif t.op == OP_MEAN:
        _mean(t, x, y, lo, hi)
    elif t.op == OP_SOFTMAX:
        _softmax(t, x, y, lo, hi)
    elif t.op == OP_AFFINE:
        _affine(t, x, <float *>_at(bases, t.r[1]), <float *>_at(bases, t.r[2]), y, lo, hi)


cdef void _range_part(void *arg, int64_t part) noexcept nogil:
    cdef RangeJob *job = <RangeJob *>arg
    _range(job.t, job.bases, _part(job.units, job.parts, part), _part(job.units, job.parts, part + 1))


cdef Py_ssize_t _units(const Ins *t, Py_ssize_t *work) noexcept nogil:
    """How many units an op splits into, and (work) about how many element steps they take."""
    cdef Py_ssize_t d, n = 1
    if t.op == OP_BINARY:
        for d in range(t.p[0] - 1):
            n *= t.p[1 + d]
        work[0] = n * t.p[t.p[0]]
        return n
    if t.op == OP_UNARY:
        work[0] = t.p[0]
        return t.p[0]
    if t.op == OP_CHAIN:
        work[0] = t.p[0] * t.p[1]
        return t.p[0]
    if t.op == OP_MAXPOOL or t.op == OP_AVGPOOL:
        work[0] = t.p[0] * t.g.oh * t.g.ow * t.g.kh * t.g.kw
        return t.p[0]
    if t.op == OP_MEAN or t.op == OP_SOFTMAX:
        work[0] = t.p[0] * t.p[1]
        return t.p[0]
    if t.op == OP_AFFINE:
        work[0] = t.p[0] * t.p[1] * t.p[2]
        return t.p[0] * t.p[1]
    work[0] = 0
    return 0


cdef void _exec(const Ins *ins, Py_ssize_t n, char **bases, const Gemm *gm, int width, int64_t *prof) noexcept nogil:
    # prof: NULL, or per instruction (calls, wall ns, busy ns summed over its chunks, chunks)
    cdef Py_ssize_t k, work = 0
    cdef const Ins *t
    cdef RangeJob job
    cdef int64_t t0 = 0
    cdef int64_t *busy = NULL
    for k in range(n):
        t = &ins[k]
        if prof != NULL:
            busy = &prof[4 * k + 2]
            t0 = _now_ns()
        if t.op == OP_CONV:
            _conv(t, gm, bases, width, busy)
        elif t.op == OP_GEMM:
            _gemm_batches(t, gm, <float *>_at(bases, t.r[0]), <float *>_at(bases, t.r[1]),
                          <float *>_at(bases, t.r[3]), width, busy)
        elif t.op == OP_COPY:
            _copy(t, _at(bases, t.r[0]), _at(bases, t.r[3]))
        else:
            job.t, job.bases = t, bases
            job.units = _units(t, &work)
            job.parts = max(1, min(<Py_ssize_t>width, work // min_split_elements, job.units))
            if busy != NULL:
                vkml_add64(busy + 1, job.parts)
            _for(job.parts, _range_part, &job, width, busy)
        if prof != NULL:
            t0 = _now_ns() - t0
            vkml_add64(&prof[4 * k], 1)
            vkml_add64(&prof[4 * k + 1], t0)
            if t.op == OP_COPY:
                vkml_add64(&prof[4 * k + 2], t0)


cdef class Program:
    """One input signature's run of a plan, in C. Built by vkml/runtime/cpuprog.py from
    instructions (opcode name, code, refs, int params, float params, window geometry or None)."""

    cdef Ins *ins
    cdef Py_ssize_t n_ins
    cdef Py_ssize_t arena_bytes
    cdef Gemm gemm
    cdef int n_in, n_out
    cdef readonly tuple in_shapes, out_shapes
    cdef object keep    # the constants the instructions point at
    cdef list arenas    # free arenas; a run pops one (list.pop/append are atomic under the GIL)
    cdef readonly bint gated  # whether runs take a turn at the cores' gate (big programs)
    cdef int64_t *prof        # per instruction: calls, wall ns, busy ns, chunks (profile on)
    cdef bint profiling
    cdef list names

    def __cinit__(self):
        self.ins = NULL
        self.prof = NULL
        self.profiling = False

    def __init__(self, list instructions, Py_ssize_t arena_bytes, in_shapes, out_shapes, keep,
                 uintptr_t gemm, bint ilp64, bint gated=False):
        cdef Py_ssize_t k, j
        cdef Ins *t
        if gemm == 0:
            raise ValueError("no GEMM function")
        if len(in_shapes) + len(out_shapes) + 2 > MAX_BASES:
            raise ValueError(f"a native program takes at most {(MAX_BASES - 2) // 2} inputs and outputs")
        self.n_in, self.n_out = len(in_shapes), len(out_shapes)
        self.in_shapes = tuple(tuple(int(d) for d in s) for s in in_shapes)
        self.out_shapes = tuple(tuple(int(d) for d in s) for s in out_shapes)
        self.arena_bytes = arena_bytes
        self.gemm.fn, self.gemm.ilp64 = gemm, ilp64
        self.keep = keep
        self.arenas = []
        self.gated = gated
        self.n_ins = len(instructions)
        self.names = [ins[0] for ins in instructions]
        self.ins = <Ins *>malloc(max(1, self.n_ins) * sizeof(Ins))
        if self.ins == NULL:
            raise MemoryError()
        memset(self.ins, 0, max(1, self.n_ins) * sizeof(Ins))
        for k, (op, code, refs, params, floats, geom) in enumerate(instructions):
            t = &self.ins[k]
            t.op = OPS[op]
            t.code = code
            if len(refs) > N_REFS or len(params) > N_PARAMS or len(floats) > 2:
                raise ValueError(f"instruction {k} ({op}) has too many operands")
            for j in range(N_REFS):
                t.r[j].base = -1
            for j, ref in enumerate(refs):
                if ref is not None:
                    t.r[j].base, t.r[j].off = ref
                    if not -1 <= t.r[j].base < 2 + self.n_in + self.n_out:
                        raise ValueError(f"instruction {k} ({op}) refers to base {t.r[j].base}")
            for j, v in enumerate(params):
                t.p[j] = v
            for j, v in enumerate(floats):
                t.f[j] = v
            if geom is not None:
                if len(geom) != 12:
                    raise ValueError(f"instruction {k} ({op}): a window has 12 numbers, not {len(geom)}")
                _geom(&t.g, geom[0], geom[1], geom[2], geom[3], geom[4], geom[5], geom[6], geom[7], geom[8],
                      geom[9], geom[10], geom[11])

    def __dealloc__(self):
        free(self.ins)
        free(self.prof)

    def set_profile(self, bint on) -> None:
        """Count each instruction's calls, wall time, busy time over its chunks and chunks, from
        now (on: the counters start at zero; probes and `vkml profile`-style reports)."""
        if on:
            if self.prof == NULL:
                self.prof = <int64_t *>malloc(max(1, 4 * self.n_ins) * sizeof(int64_t))
                if self.prof == NULL:
                    raise MemoryError()
            memset(self.prof, 0, max(1, 4 * self.n_ins) * sizeof(int64_t))
        self.profiling = on and self.prof != NULL

    def profile(self) -> list:
        """Per instruction: (op, its int params, calls, wall ns, busy ns, chunks)."""
        cdef Py_ssize_t k
        if self.prof == NULL:
            return []
        return [(self.names[k], tuple(self.ins[k].p[j] for j in range(N_PARAMS)), self.prof[4 * k],
                 self.prof[4 * k + 1], self.prof[4 * k + 2], self.prof[4 * k + 3]) for k in range(self.n_ins)]

    def run(self, list inputs) -> list:
        """The outputs (new float32 arrays) for the inputs (C-contiguous float32 arrays of the
        planned shapes, in the program's input order)."""
        cdef char *bases[MAX_BASES]
        cdef cnp.ndarray x
        cdef Py_ssize_t k, d
        cdef cnp.npy_intp *dims
        cdef tuple shape
        cdef int width
        cdef vkml_gate_wait turn
        if len(inputs) != self.n_in:
            raise ValueError(f"the program takes {self.n_in} inputs, not {len(inputs)}")
        for k in range(self.n_in):
            x = inputs[k]
            shape = self.in_shapes[k]
            if (cnp.PyArray_TYPE(x) != cnp.NPY_FLOAT32 or not cnp.PyArray_ISCARRAY_RO(x)
                    or not cnp.PyArray_ISNOTSWAPPED(x) or cnp.PyArray_NDIM(x) != len(shape)):
                raise ValueError(f"input {k} must be a C-contiguous float32 array of shape {shape}")
            dims = cnp.PyArray_DIMS(x)
            for d in range(len(shape)):
                if dims[d] != <Py_ssize_t>shape[d]:
                    raise ValueError(f"input {k} must have shape {shape}, not {(<object>x).shape}")
            bases[2 + k] = <char *>cnp.PyArray_DATA(x)
        outs = [np.empty(s, np.float32) for s in self.out_shapes]
        for k in range(self.n_out):
            x = outs[k]
            bases[2 + self.n_in + k] = <char *>cnp.PyArray_DATA(x)
        # A turn first, then an arena: at most `cores` arenas in use. Small programs pass no
        # gate: the futex hand-offs would cost more than their runs share.
        turn.since, turn.starved = 0, 0
        if self.gated and not (vkml_gate_may(&pool_gate, &turn) and vkml_gate_try(&pool_gate)):
            with nogil:
                while not vkml_gate_acquire(&pool_gate, 0, 1000000000, &turn):
                    pass
        try:
            try:
                arena = self.arenas.pop()
            except IndexError:
                arena = np.empty(self.arena_bytes + 64, np.uint8)
            x = arena
            bases[0] = <char *>((<uintptr_t>cnp.PyArray_DATA(x) + 63) & ~(<uintptr_t>63))
            bases[1] = NULL
            with nogil:
                width = pool_run_enter()
                _exec(self.ins, self.n_ins, bases, &self.gemm, width, self.prof if self.profiling else NULL)
                pool_run_exit()
            self.arenas.append(arena)
        finally:
            if self.gated:
                vkml_gate_release(&pool_gate)
        return outs
