# The native loops other extensions call without the GIL (vkml/runtime/_cpuprog.pyx runs a
# whole CPU plan with them): float32 entry points of the fused loops in _windowed.pyx.
from libc.stdint cimport uintptr_t


cdef struct Geom:
    Py_ssize_t h, w, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl
    Py_ssize_t j_lo, j_hi  # output columns whose every tap lies inside the plane


cdef struct Gemm:
    uintptr_t fn  # cblas_sgemm or cblas_dgemm of NumPy's OpenBLAS (vkml/runtime/blas.py)
    bint ilp64


cdef int _geom(Geom *g, Py_ssize_t h, Py_ssize_t w, Py_ssize_t oh, Py_ssize_t ow, Py_ssize_t kh,
               Py_ssize_t kw, Py_ssize_t sh, Py_ssize_t sw, Py_ssize_t dh, Py_ssize_t dw, Py_ssize_t pt,
               Py_ssize_t pl) except -1

cdef void columns_f32(const float *src, float *cols, const Geom *g, Py_ssize_t r0, Py_ssize_t r1,
                      Py_ssize_t ld) noexcept nogil
cdef void max_plane_f32(const float *src, float *out, const Geom *g, float lowest) noexcept nogil
cdef void dot_plane_f32(const float *src, const float *wt, float b, float *out, const Geom *g) noexcept nogil
cdef void gemm_f32(const Gemm *g, Py_ssize_t m, Py_ssize_t n, Py_ssize_t k, const float *a, Py_ssize_t lda,
                   const float *b, Py_ssize_t ldb, float *c, Py_ssize_t ldc) noexcept nogil
