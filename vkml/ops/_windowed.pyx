# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""Native loops for 2-D windowed ops whose NumPy form is one strided pass per kernel tap over a
padded copy: max and sum pooling and depthwise convolution.

Inputs are unpadded C-contiguous planes (P, H, W); the padding (top, left) is virtual: taps
that fall outside the plane are skipped, which is what zero padding means for sums and what
lowest-value padding means for max. Output rows are split into an interior, where every tap
is inside the plane and the loops run unchecked over whole rows, and the borders, where each
tap is checked. Outputs are preallocated (P', OH, OW).
"""
import numpy as np

from libc.string cimport memcpy

ctypedef fused real:
    float
    double

ctypedef fused maxable:
    float
    double
    signed char
    unsigned char


cdef int _geom(Geom *g, Py_ssize_t h, Py_ssize_t w, Py_ssize_t oh, Py_ssize_t ow, Py_ssize_t kh,
               Py_ssize_t kw, Py_ssize_t sh, Py_ssize_t sw, Py_ssize_t dh, Py_ssize_t dw, Py_ssize_t pt,
               Py_ssize_t pl) except -1:
    if kh < 1 or kw < 1 or sh < 1 or sw < 1 or dh < 1 or dw < 1:
        raise ValueError("kernel, strides and dilations must be positive")
    if pt < 0 or pl < 0 or oh < 0 or ow < 0:
        raise ValueError("pads and output sizes must be non-negative")
    g.h, g.w, g.oh, g.ow, g.kh, g.kw = h, w, oh, ow, kh, kw
    g.sh, g.sw, g.dh, g.dw, g.pt, g.pl = sh, sw, dh, dw, pt, pl
    cdef Py_ssize_t last = w - 1 - (kw - 1) * dw + pl
    g.j_lo = min((pl + sw - 1) // sw, ow)
    g.j_hi = min(last // sw + 1, ow) if last >= 0 else 0
    if g.j_hi < g.j_lo:
        g.j_hi = g.j_lo
    return 0


cdef inline Py_ssize_t _first_tap(Py_ssize_t start, Py_ssize_t d) noexcept nogil:
    """First tap t with start + t·d ≥ 0."""
    return 0 if start >= 0 else (-start + d - 1) // d


cdef inline Py_ssize_t _end_tap(Py_ssize_t start, Py_ssize_t d, Py_ssize_t size, Py_ssize_t taps) noexcept nogil:
    """One past the last tap t < taps with start + t·d < size."""
    if start > size - 1:
        return 0
    return min(taps, (size - 1 - start) // d + 1)


# ------------------------------------------------------------------------------------ max
cdef inline maxable _max2(maxable a, maxable b) noexcept nogil:
    return a if a > b else b


cdef void _max_rows(const maxable *src, maxable *out, Py_ssize_t n, Py_ssize_t sw, bint first) noexcept nogil:
    # Unconditional stores of a select: branch-free, so the compiler vectorises it.
    cdef Py_ssize_t j
    cdef maxable v, o
    if first:
        for j in range(n):
            out[j] = src[j * sw]
    elif sw == 1:
        for j in range(n):
            v = src[j]
            o = out[j]
            out[j] = v if v > o else o
    else:
        for j in range(n):
            v = src[j * sw]
            o = out[j]
            out[j] = v if v > o else o


cdef void _max3x3_row(const maxable *r0, const maxable *r1, const maxable *r2, maxable *out, Py_ssize_t n,
                      Py_ssize_t sw, Py_ssize_t dw) noexcept nogil:
    # The common 3x3 window: all nine taps per output element, one pass over the row.
    cdef Py_ssize_t j, c
    cdef Py_ssize_t d2 = 2 * dw
    for j in range(n):
        c = j * sw
        out[j] = _max2(_max2(_max2(r0[c], r0[c + dw]), _max2(r0[c + d2], r1[c])),
                       _max2(_max2(r1[c + dw], r1[c + d2]), _max2(_max2(r2[c], r2[c + dw]), r2[c + d2])))


cdef void _max_checked(const maxable *src, maxable *orow, const Geom *g, Py_ssize_t y0, Py_ssize_t i_lo,
                       Py_ssize_t i_hi, Py_ssize_t ja, Py_ssize_t jb, maxable lowest) noexcept nogil:
    # Border columns: only the taps inside the plane, ranges computed once per element.
    cdef Py_ssize_t j, i, k, x0, k_lo, k_hi
    cdef const maxable *row
    cdef maxable m, v
    for j in range(ja, jb):
        x0 = j * g.sw - g.pl
        k_lo = _first_tap(x0, g.dw)
        k_hi = _end_tap(x0, g.dw, g.w, g.kw)
        m = lowest
        for i in range(i_lo, i_hi):
            row = src + (y0 + i * g.dh) * g.w + x0
            for k in range(k_lo, k_hi):
                v = row[k * g.dw]
                m = v if v > m else m
        orow[j] = m


cdef void _max_plane(const maxable *src, maxable *out, const Geom *g, maxable lowest) noexcept nogil:
    cdef Py_ssize_t r, i, j, k, y0, x0, i_lo, i_hi
    cdef Py_ssize_t n = g.j_hi - g.j_lo
    cdef maxable *orow
    for r in range(g.oh):
        y0 = r * g.sh - g.pt
        orow = out + r * g.ow
        i_lo = _first_tap(y0, g.dh)
        i_hi = _end_tap(y0, g.dh, g.h, g.kh)
        if n > 0 and i_lo < i_hi:
            x0 = g.j_lo * g.sw - g.pl
            if g.kh == 3 and g.kw == 3 and i_lo == 0 and i_hi == 3:
                _max3x3_row(src + y0 * g.w + x0, src + (y0 + g.dh) * g.w + x0, src + (y0 + 2 * g.dh) * g.w + x0,
                            orow + g.j_lo, n, g.sw, g.dw)
            else:
                for i in range(i_lo, i_hi):
                    for k in range(g.kw):
                        _max_rows(src + (y0 + i * g.dh) * g.w + x0 + k * g.dw, orow + g.j_lo, n, g.sw,
                                  i == i_lo and k == 0)
            _max_checked(src, orow, g, y0, i_lo, i_hi, 0, g.j_lo, lowest)
            _max_checked(src, orow, g, y0, i_lo, i_hi, g.j_hi, g.ow, lowest)
        elif i_lo < i_hi:
            _max_checked(src, orow, g, y0, i_lo, i_hi, 0, g.ow, lowest)
        else:
            for j in range(g.ow):
                orow[j] = lowest


def window_max(const maxable[:, :, ::1] src, maxable[:, :, ::1] out, Py_ssize_t kh, Py_ssize_t kw,
               Py_ssize_t sh, Py_ssize_t sw, Py_ssize_t dh, Py_ssize_t dw, Py_ssize_t pt, Py_ssize_t pl,
               maxable lowest):
    """out[p, r, c] = max of the (kh, kw) window at (r·sh - pt, c·sw - pl), dilations (dh, dw);
    ``lowest`` where the window holds no input value."""
    cdef Geom g
    cdef Py_ssize_t p
    if src.shape[0] != out.shape[0]:
        raise ValueError("src and out must have the same number of planes")
    _geom(&g, src.shape[1], src.shape[2], out.shape[1], out.shape[2], kh, kw, sh, sw, dh, dw, pt, pl)
    if g.h == 0 or g.w == 0 or g.oh == 0 or g.ow == 0:
        return
    with nogil:
        for p in range(src.shape[0]):
            _max_plane(&src[p, 0, 0], &out[p, 0, 0], &g, lowest)


# ------------------------------------------------------------------------------------ weighted sums
cdef void _axpy_row(const real *src, real *out, real a, Py_ssize_t n, Py_ssize_t sw) noexcept nogil:
    cdef Py_ssize_t j
    if sw == 1:
        for j in range(n):
            out[j] += a * src[j]
    else:
        for j in range(n):
            out[j] += a * src[j * sw]


cdef void _dot3x3_row(const real *r0, const real *r1, const real *r2, const real *w, real b, real *out,
                      Py_ssize_t n, Py_ssize_t sw, Py_ssize_t dw) noexcept nogil:
    # The common 3x3 kernel: nine weights held in registers, one pass over the output row.
    cdef real w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3], w4 = w[4], w5 = w[5], w6 = w[6], w7 = w[7], w8 = w[8]
    cdef Py_ssize_t j, c
    cdef Py_ssize_t d2 = 2 * dw
    for j in range(n):
        c = j * sw
        out[j] = (b + w0 * r0[c] + w1 * r0[c + dw] + w2 * r0[c + d2]
                  + w3 * r1[c] + w4 * r1[c + dw] + w5 * r1[c + d2]
                  + w6 * r2[c] + w7 * r2[c + dw] + w8 * r2[c + d2])


cdef void _dot_checked(const real *src, const real *wt, real b, real *orow, const Geom *g, Py_ssize_t y0,
                       Py_ssize_t i_lo, Py_ssize_t i_hi, Py_ssize_t ja, Py_ssize_t jb) noexcept nogil:
    # Border columns: only the taps inside the plane, ranges computed once per element.
    cdef Py_ssize_t j, i, k, x0, k_lo, k_hi
    cdef const real *row
    cdef const real *wrow
    cdef real acc
    for j in range(ja, jb):
        x0 = j * g.sw - g.pl
        k_lo = _first_tap(x0, g.dw)
        k_hi = _end_tap(x0, g.dw, g.w, g.kw)
        acc = b
        for i in range(i_lo, i_hi):
            row = src + (y0 + i * g.dh) * g.w + x0
            wrow = wt + i * g.kw
            for k in range(k_lo, k_hi):
                acc = acc + wrow[k] * row[k * g.dw]
        orow[j] = acc


cdef void _dot_plane(const real *src, const real *wt, real b, real *out, const Geom *g) noexcept nogil:
    """out = b + the window's taps weighted by wt (kh·kw values), over one plane."""
    cdef Py_ssize_t r, i, k, j, y0, x0, i_lo, i_hi
    cdef Py_ssize_t n = g.j_hi - g.j_lo
    cdef real *orow
    for r in range(g.oh):
        y0 = r * g.sh - g.pt
        orow = out + r * g.ow
        i_lo = _first_tap(y0, g.dh)
        i_hi = _end_tap(y0, g.dh, g.h, g.kh)
        if i_hi < i_lo:
            i_hi = i_lo
        if n > 0:
            x0 = g.j_lo * g.sw - g.pl
            if g.kh == 3 and g.kw == 3 and i_lo == 0 and i_hi == 3:
                _dot3x3_row(src + y0 * g.w + x0, src + (y0 + g.dh) * g.w + x0, src + (y0 + 2 * g.dh) * g.w + x0,
                            wt, b, orow + g.j_lo, n, g.sw, g.dw)
            else:
                for j in range(g.j_lo, g.j_hi):
                    orow[j] = b
                for i in range(i_lo, i_hi):
                    for k in range(g.kw):
                        _axpy_row(src + (y0 + i * g.dh) * g.w + x0 + k * g.dw, orow + g.j_lo,
                                  wt[i * g.kw + k], n, g.sw)
            _dot_checked(src, wt, b, orow, g, y0, i_lo, i_hi, 0, g.j_lo)
            _dot_checked(src, wt, b, orow, g, y0, i_lo, i_hi, g.j_hi, g.ow)
        else:
            _dot_checked(src, wt, b, orow, g, y0, i_lo, i_hi, 0, g.ow)


def window_sum(const real[:, :, ::1] src, real[:, :, ::1] out, Py_ssize_t kh, Py_ssize_t kw,
               Py_ssize_t sh, Py_ssize_t sw, Py_ssize_t dh, Py_ssize_t dw, Py_ssize_t pt, Py_ssize_t pl):
    """out[p, r, c] = sum of the (kh, kw) window at (r·sh - pt, c·sw - pl), dilations (dh, dw)."""
    cdef Geom g
    cdef Py_ssize_t p
    cdef const real[::1] ones
    if src.shape[0] != out.shape[0]:
        raise ValueError("src and out must have the same number of planes")
    _geom(&g, src.shape[1], src.shape[2], out.shape[1], out.shape[2], kh, kw, sh, sw, dh, dw, pt, pl)
    if g.oh == 0 or g.ow == 0:
        return
    ones = np.ones(kh * kw, np.float32 if real is float else np.float64)
    if g.h == 0 or g.w == 0:
        out[:, :, :] = 0
        return
    with nogil:
        for p in range(src.shape[0]):
            _dot_plane(&src[p, 0, 0], &ones[0], 0, &out[p, 0, 0], &g)


def depthwise(const real[:, :, ::1] src, const real[:, :, ::1] w, const real[::1] bias, real[:, :, ::1] out,
              Py_ssize_t in_ch, Py_ssize_t sh, Py_ssize_t sw, Py_ssize_t dh, Py_ssize_t dw, Py_ssize_t pt,
              Py_ssize_t pl):
    """Grouped conv with one input channel per group: src (N·C, H, W), w (C·mult, kh, kw),
    bias (C·mult,), out (N·C·mult, OH, OW); output channel m reads input channel m // mult."""
    cdef Geom g
    cdef Py_ssize_t p, n, m, sp, mult
    cdef Py_ssize_t out_ch = w.shape[0]
    if in_ch < 1 or out_ch % in_ch or bias.shape[0] != out_ch:
        raise ValueError("weights and bias must have a multiple of the input channels")
    if src.shape[0] % in_ch or out.shape[0] != src.shape[0] // in_ch * out_ch:
        raise ValueError("plane counts of src and out do not match the channels")
    _geom(&g, src.shape[1], src.shape[2], out.shape[1], out.shape[2], w.shape[1], w.shape[2], sh, sw, dh, dw,
          pt, pl)
    if g.oh == 0 or g.ow == 0:
        return
    if g.h == 0 or g.w == 0:
        for p in range(out.shape[0]):
            out[p, :, :] = bias[p % out_ch]
        return
    mult = out_ch // in_ch
    with nogil:
        for p in range(out.shape[0]):
            n = p // out_ch
            m = p - n * out_ch
            sp = n * in_ch + m // mult
            _dot_plane(&src[sp, 0, 0], &w[m, 0, 0], bias[m], &out[p, 0, 0], &g)


# ------------------------------------------------------------------------------------ columns
cdef void _columns_plane(const real *src, real *cols, const Geom *g, Py_ssize_t r0, Py_ssize_t r1,
                         Py_ssize_t ld) noexcept nogil:
    # One plane's kh·kw rows of the column matrix, output rows r0..r1: each tap's row is the
    # plane read at that tap's offset with the output's strides, zeros where it falls outside.
    cdef Py_ssize_t i, k, r, j, y, x0, a, b
    cdef Py_ssize_t ow = g.ow
    cdef real *dst
    cdef const real *row
    for i in range(g.kh):
        for k in range(g.kw):
            dst = cols + (i * g.kw + k) * ld
            # Output columns j whose input column j·sw - pl + k·dw lies in [0, w): a <= j < b.
            x0 = k * g.dw - g.pl
            a = min(_first_tap(x0, g.sw), ow)
            b = max(a, _end_tap(x0, g.sw, g.w, ow))
            for r in range(r0, r1):
                y = r * g.sh - g.pt + i * g.dh
                if y < 0 or y >= g.h or a >= b:
                    for j in range(ow):
                        dst[j] = 0
                else:
                    for j in range(a):
                        dst[j] = 0
                    row = src + y * g.w + x0 + a * g.sw  # input column of output column a
                    if g.sw == 1:  # (memcpy: the compiler cannot rule out that dst and row overlap)
                        memcpy(dst + a, row, (b - a) * sizeof(real))
                    else:
                        for j in range(b - a):
                            dst[a + j] = row[j * g.sw]
                    for j in range(b, ow):
                        dst[j] = 0
                dst += ow


def columns(const real[:, :, ::1] src, real[:, ::1] cols, Py_ssize_t kh, Py_ssize_t kw, Py_ssize_t oh,
            Py_ssize_t ow, Py_ssize_t sh, Py_ssize_t sw, Py_ssize_t dh, Py_ssize_t dw, Py_ssize_t pt,
            Py_ssize_t pl, Py_ssize_t r0=0, Py_ssize_t r1=-1):
    """The im2col matrix of planes src (P, H, W) for output rows r0..r1 (all by default) of an
    (oh, ow) output: cols (P·kh·kw, (r1 - r0)·ow), row (p·kh + i)·kw + k holding input plane p
    at tap (i, k) for each output position; virtual zero padding (pt, pl), no padded copy.
    Without the GIL, so the row ranges of one convolution can be filled on several threads."""
    cdef Geom g
    cdef Py_ssize_t p, taps, ld
    if r1 < 0:
        r1 = oh
    if not 0 <= r0 <= r1 <= oh:
        raise ValueError(f"output rows {r0}..{r1} outside 0..{oh}")
    _geom(&g, src.shape[1], src.shape[2], oh, ow, kh, kw, sh, sw, dh, dw, pt, pl)
    taps = kh * kw
    ld = (r1 - r0) * ow
    if cols.shape[0] != src.shape[0] * taps or cols.shape[1] != ld:
        raise ValueError(f"cols must be ({src.shape[0] * taps}, {ld}), not ({cols.shape[0]}, {cols.shape[1]})")
    if ld == 0:
        return
    with nogil:
        for p in range(src.shape[0]):
            _columns_plane(&src[p, 0, 0], &cols[p * taps, 0], &g, r0, r1, ld)


# ------------------------------------------------------------------------------------ GEMM chunks
# NumPy's own OpenBLAS, called without the GIL: the runtime finds cblas_sgemm/dgemm in the
# library NumPy loaded (vkml/runtime/blas.py) and hands their addresses over (ops/_parallel.py),
# so a chunk of a split convolution is one call that holds the GIL only to start.
from libc.stdint cimport int64_t

ctypedef void (*sgemm32_t)(int, int, int, int, int, int, float, const float *, int, const float *, int,
                           float, float *, int) noexcept nogil
ctypedef void (*sgemm64_t)(int, int, int, int64_t, int64_t, int64_t, float, const float *, int64_t,
                           const float *, int64_t, float, float *, int64_t) noexcept nogil
ctypedef void (*dgemm32_t)(int, int, int, int, int, int, double, const double *, int, const double *, int,
                           double, double *, int) noexcept nogil
ctypedef void (*dgemm64_t)(int, int, int, int64_t, int64_t, int64_t, double, const double *, int64_t,
                           const double *, int64_t, double, double *, int64_t) noexcept nogil

cdef enum:
    ROW_MAJOR = 101
    NO_TRANS = 111


cdef void _gemm(const Gemm *g, Py_ssize_t m, Py_ssize_t n, Py_ssize_t k, const real *a, Py_ssize_t lda,
                const real *b, Py_ssize_t ldb, real *c, Py_ssize_t ldc) noexcept nogil:
    """c (m, n) = a (m, k) @ b (k, n), row-major with leading dimensions."""
    if m <= 0 or n <= 0:
        return
    if real is float:
        if g.ilp64:
            (<sgemm64_t>g.fn)(ROW_MAJOR, NO_TRANS, NO_TRANS, m, n, k, 1.0, a, lda, b, ldb, 0.0, c, ldc)
        else:
            (<sgemm32_t>g.fn)(ROW_MAJOR, NO_TRANS, NO_TRANS, <int>m, <int>n, <int>k, 1.0, a, <int>lda, b,
                              <int>ldb, 0.0, c, <int>ldc)
    else:
        if g.ilp64:
            (<dgemm64_t>g.fn)(ROW_MAJOR, NO_TRANS, NO_TRANS, m, n, k, 1.0, a, lda, b, ldb, 0.0, c, ldc)
        else:
            (<dgemm32_t>g.fn)(ROW_MAJOR, NO_TRANS, NO_TRANS, <int>m, <int>n, <int>k, 1.0, a, <int>lda, b,
                              <int>ldb, 0.0, c, <int>ldc)


cdef void _add_bias(real *c, Py_ssize_t ldc, Py_ssize_t m, Py_ssize_t n, const real *bias) noexcept nogil:
    cdef Py_ssize_t i, j
    cdef real v
    for i in range(m):
        v = bias[i]
        for j in range(n):
            c[i * ldc + j] += v


def conv_chunk(const real[:, :, ::1] src, const real[:, :, ::1] wm, real[:, :, :, ::1] y, const real[::1] bias,
               real[:, ::1] scratch, Py_ssize_t kh, Py_ssize_t kw, Py_ssize_t oh, Py_ssize_t ow, Py_ssize_t sh,
               Py_ssize_t sw, Py_ssize_t dh, Py_ssize_t dw, Py_ssize_t pt, Py_ssize_t pl, Py_ssize_t r0,
               Py_ssize_t r1, Py_ssize_t m0, Py_ssize_t m1, int mode, uintptr_t gemm, bint ilp64):
    """One chunk of a convolution y (N, G, Mg, OH·OW) = wm (G, Mg, K) @ columns + bias, without
    the GIL. mode 0: output rows r0..r1 of every channel, their columns filled into `scratch`
    (Cg·kh·kw, (r1 - r0)·ow) from the planes src (N·C, H, W); mode 1: a pointwise convolution,
    src's planes (N·C, 1, OH·OW) read in place, positions r0..r1; mode 2: output channels
    m0..m1 of every position, src the whole column matrix (N·G, K, OH·OW). `bias` has Mg·G
    entries or none; `gemm` is cblas_sgemm (float) or cblas_dgemm (double), 64-bit ints if ilp64."""
    cdef Gemm g
    cdef Geom geo
    cdef Py_ssize_t nb = y.shape[0], groups = y.shape[1], mg = y.shape[2], npos = y.shape[3]
    cdef Py_ssize_t kdim = wm.shape[2], cg, b, gi, p0, pc
    cdef real *c
    if gemm == 0:
        raise ValueError("no GEMM function")
    if wm.shape[0] != groups or wm.shape[1] != mg:
        raise ValueError("weights and output disagree on groups/channels")
    if bias.shape[0] not in (0, groups * mg):
        raise ValueError("bias must have one entry per output channel, or none")
    g.fn, g.ilp64 = gemm, ilp64
    if mode == 2:
        if src.shape[0] != nb * groups or src.shape[1] != kdim or src.shape[2] != npos:
            raise ValueError("the column matrix does not match the output")
        if not 0 <= m0 <= m1 <= mg:
            raise ValueError(f"channels {m0}..{m1} outside 0..{mg}")
        with nogil:
            for b in range(nb):
                for gi in range(groups):
                    c = &y[b, gi, 0, 0] + m0 * npos
                    _gemm(&g, m1 - m0, npos, kdim, &wm[gi, 0, 0] + m0 * kdim, kdim, &src[b * groups + gi, 0, 0],
                          npos, c, npos)
                    if bias.shape[0]:
                        _add_bias(c, npos, m1 - m0, npos, &bias[gi * mg + m0])
        return
    if src.shape[0] % (nb * groups):
        raise ValueError("planes do not divide into batches and groups")
    cg = src.shape[0] // (nb * groups)
    if mode == 1:
        if cg != kdim or src.shape[1] * src.shape[2] != npos or not 0 <= r0 <= r1 <= npos:
            raise ValueError("a pointwise chunk needs (N·C, 1, positions) planes and a range of positions")
        with nogil:
            for b in range(nb):
                for gi in range(groups):
                    c = &y[b, gi, 0, 0] + r0
                    _gemm(&g, mg, r1 - r0, kdim, &wm[gi, 0, 0], kdim, &src[(b * groups + gi) * cg, 0, 0] + r0,
                          npos, c, npos)
                    if bias.shape[0]:
                        _add_bias(c, npos, mg, r1 - r0, &bias[gi * mg])
        return
    if cg * kh * kw != kdim or oh * ow != npos or not 0 <= r0 <= r1 <= oh:
        raise ValueError("the window does not match the weights or the output")
    pc = (r1 - r0) * ow
    if scratch.shape[0] != kdim or scratch.shape[1] < pc:
        raise ValueError(f"scratch must be ({kdim}, {pc}) at least")
    _geom(&geo, src.shape[1], src.shape[2], oh, ow, kh, kw, sh, sw, dh, dw, pt, pl)
    if pc == 0:
        return
    with nogil:
        for b in range(nb):
            for gi in range(groups):
                for p0 in range(cg):
                    _columns_plane(&src[(b * groups + gi) * cg + p0, 0, 0], &scratch[p0 * kh * kw, 0], &geo, r0, r1,
                                   scratch.shape[1])
                c = &y[b, gi, 0, 0] + r0 * ow
                _gemm(&g, mg, pc, kdim, &wm[gi, 0, 0], kdim, &scratch[0, 0], scratch.shape[1], c, npos)
                if bias.shape[0]:
                    _add_bias(c, npos, mg, pc, &bias[gi * mg])


# ------------------------------------------------------------------------------------ float32 entry points
# Declared in _windowed.pxd for other extensions (a fused function cannot be cimported).
cdef void columns_f32(const float *src, float *cols, const Geom *g, Py_ssize_t r0, Py_ssize_t r1,
                      Py_ssize_t ld) noexcept nogil:
    _columns_plane(src, cols, g, r0, r1, ld)


cdef void max_plane_f32(const float *src, float *out, const Geom *g, float lowest) noexcept nogil:
    _max_plane(src, out, g, lowest)


cdef void dot_plane_f32(const float *src, const float *wt, float b, float *out, const Geom *g) noexcept nogil:
    _dot_plane(src, wt, b, out, g)


cdef void gemm_f32(const Gemm *g, Py_ssize_t m, Py_ssize_t n, Py_ssize_t k, const float *a, Py_ssize_t lda,
                   const float *b, Py_ssize_t ldb, float *c, Py_ssize_t ldc) noexcept nogil:
    _gemm(g, m, n, k, a, lda, b, ldb, c, ldc)
