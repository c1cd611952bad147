/* Winograd F(4x4, 3x3) transforms for the CPU device's native programs (vkml/runtime/_cpuprog.pyx,
 * CONV_WINO; the GPU's are shaders/winograd.comp, the same matrices).
 *
 * Why: a 3x3 convolution of stride 1 computed on 4x4 output tiles needs 36 multiply-adds per
 * tile and channel pair in the transformed domain against 144 directly, so its GEMMs (the
 * filters' transforms U[xi] (M x C) times the inputs' V[xi] (C x tiles), one per xi of the 6x6
 * transform) do a quarter of the work. The two transforms here are a pass over the input and
 * one over the products, vectorized across the tiles of a row: each tile row is gathered into
 * per-offset arrays (d[i][k][t] = input row i at column 4 t + k), after which every sum runs
 * along t on contiguous memory.
 *
 * Layouts: V is [36][C][P] and M [36][Mout][P] (P = tiles over all images, tile p = (image,
 * tile row, tile column)); a plane's tiles are consecutive in p. B^T, G and A^T are Lavin and
 * Gray's (arXiv:1509.09308), as shaders/winograd.comp writes them out.
 */
#ifndef VKML_CPU_WINOGRAD_H
#define VKML_CPU_WINOGRAD_H

#include <stdint.h>
#include <string.h>

#define VKML_WINO_CHUNK 64 /* tiles transformed at a time: whole tile rows, or part of one */

/* The transforms' matrices, one product each: B^T d (F(4x4): 6 values to 6; F(2x2): 4 to 4) and
 * A^T m (6 to 4; 4 to 2), TAIL appended to each output's sum (the bias in the last pass). Both
 * passes of a transform expand the same text, so the same code and bits. */
#define VKML_WINO4_BT(d0, d1, d2, d3, d4, d5, o0, o1, o2, o3, o4, o5)                             \
    o0 = 4.0f * d0 - 5.0f * d2 + d4;                                                               \
    o1 = -4.0f * d1 - 4.0f * d2 + d3 + d4;                                                         \
    o2 = 4.0f * d1 - 4.0f * d2 - d3 + d4;                                                          \
    o3 = -2.0f * d1 - d2 + 2.0f * d3 + d4;                                                         \
    o4 = 2.0f * d1 - d2 - 2.0f * d3 + d4;                                                          \
    o5 = 4.0f * d1 - 5.0f * d3 + d5;
#define VKML_WINO4_AT(m0, m1, m2, m3, m4, m5, o0, o1, o2, o3, TAIL)                                \
    o0 = m0 + m1 + m2 + m3 + m4 TAIL;                                                              \
    o1 = m1 - m2 + 2.0f * m3 - 2.0f * m4 TAIL;                                                     \
    o2 = m1 + m2 + 4.0f * m3 + 4.0f * m4 TAIL;                                                     \
    o3 = m1 - m2 + 8.0f * m3 - 8.0f * m4 + m5 TAIL;
#define VKML_WINO2_BT(d0, d1, d2, d3, o0, o1, o2, o3)                                              \
    o0 = d0 - d2;                                                                                  \
    o1 = d1 + d2;                                                                                  \
    o2 = d2 - d1;                                                                                  \
    o3 = d1 - d3;
#define VKML_WINO2_AT(m0, m1, m2, m3, o0, o1, TAIL)                                                \
    o0 = m0 + m1 + m2 TAIL;                                                                        \
    o1 = m1 - m2 - m3 TAIL;

/* Input rows T ty - py .. + rows of the tile row ty into pr[0 .. rows), each the span floats
 * from column x0 on, zero outside the input. */
#define VKML_WINO_ROWS(T, rows)                                                                    \
    for (int i = 0; i < rows; i++) {                                                               \
        int64_t iy = (T) * ty - py + i;                                                            \
        if (iy < 0 || iy >= h) {                                                                   \
            memset(pr[i], 0, (size_t)span * sizeof(float));                                        \
            continue;                                                                              \
        }                                                                                          \
        const float *row = x + iy * w;                                                             \
        int64_t lo = x0 < 0 ? -x0 : 0, hi = x0 + span > w ? w - x0 : span;                         \
        if (hi < lo)                                                                               \
            hi = lo;                                                                               \
        if (lo > 0)                                                                                \
            memset(pr[i], 0, (size_t)lo * sizeof(float));                                          \
        if (hi > lo)                                                                               \
            memcpy(pr[i] + lo, row + x0 + lo, (size_t)(hi - lo) * sizeof(float));                 \
        if (span > hi)                                                                             \
            memset(pr[i] + hi, 0, (size_t)(span - hi) * sizeof(float));                            \
    }

/* A chunk of one input plane x (h x w): tile rows ty0 .. ty0 + nrows, tiles t0 .. t0 + nt of each
 * (nrows > 1 only with whole rows, t0 = 0 and nt = tw), into V at v (V[0][c][first tile of the
 * chunk]; a chunk's tiles are consecutive there). The patch of tile (ty, t) starts at input
 * (4 ty - py, 4 t - px). */
#define VKML_WINO4_IN_BODY                                                                          \
    float r[6][6][VKML_WINO_CHUNK]; /* r[i][k][q]: row i of B^T d, column k, tile q */             \
    float pr[6][4 * VKML_WINO_CHUNK + 4]; /* the tile row's six input rows, zero padded */         \
    int64_t x0 = 4 * t0 - px, span = 4 * nt + 2, np = nrows * nt;                                  \
    for (int64_t rr = 0; rr < nrows; rr++) {                                                       \
        int64_t ty = ty0 + rr;                                                                     \
        VKML_WINO_ROWS(4, 6)                                                                      \
        for (int k = 0; k < 6; k++) { /* r[.][k] = B^T (column k of each patch) */                 \
            const float *p0 = pr[0] + k, *p1 = pr[1] + k, *p2 = pr[2] + k;                         \
            const float *p3 = pr[3] + k, *p4 = pr[4] + k, *p5 = pr[5] + k;                         \
            float *r0 = &r[0][k][rr * nt], *r1 = &r[1][k][rr * nt], *r2 = &r[2][k][rr * nt];       \
            float *r3 = &r[3][k][rr * nt], *r4 = &r[4][k][rr * nt], *r5 = &r[5][k][rr * nt];       \
            for (int64_t t = 0; t < nt; t++) {                                                     \
                float d0 = p0[4 * t], d1 = p1[4 * t], d2 = p2[4 * t];                              \
                float d3 = p3[4 * t], d4 = p4[4 * t], d5 = p5[4 * t];                              \
                VKML_WINO4_BT(d0, d1, d2, d3, d4, d5, r0[t], r1[t], r2[t], r3[t], r4[t], r5[t])    \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    for (int i = 0; i < 6; i++) { /* row i of (B^T d) B, stored at V[6 i + j] */                   \
        float *restrict v0 = v + (6 * i) * vstride, *restrict v1 = v0 + vstride;                   \
        float *restrict v2 = v1 + vstride, *restrict v3 = v2 + vstride;                            \
        float *restrict v4 = v3 + vstride, *restrict v5 = v4 + vstride;                            \
        for (int64_t q = 0; q < np; q++) {                                                         \
            float q0 = r[i][0][q], q1 = r[i][1][q], q2 = r[i][2][q];                               \
            float q3 = r[i][3][q], q4 = r[i][4][q], q5 = r[i][5][q];                               \
            VKML_WINO4_BT(q0, q1, q2, q3, q4, q5, v0[q], v1[q], v2[q], v3[q], v4[q], v5[q])        \
        }                                                                                          \
    }

/* Output row oy from ob (its cols values with the bias): + the residual row, Relu (NaN kept, -0
 * made +0), stored at y. */
#define VKML_WINO_STORE_ROW                                                                        \
    {                                                                                              \
        float *restrict yr = y + oy * ow + ox0;                                                    \
        if (res != NULL) {                                                                         \
            const float *restrict rq = res + oy * ow + ox0;                                        \
            for (int64_t j = 0; j < cols; j++)                                                     \
                ob[j] += rq[j];                                                                    \
        }                                                                                          \
        if (relu)                                                                                  \
            for (int64_t j = 0; j < cols; j++) {                                                   \
                float val = ob[j];                                                                 \
                yr[j] = (val > 0.0f || val != val) ? val : 0.0f;                                   \
            }                                                                                      \
        else                                                                                       \
            memcpy(yr, ob, (size_t)cols * sizeof(float));                                          \
    }

/* The chunk's output rows from yo (yo[i][j][q]: output (i, j) of tile q, the bias added): each
 * row's T values a tile interleaved into ob, then stored with the residual and Relu. */
#define VKML_WINO_OUT_ROWS(T)                                                                      \
    int64_t ox0 = (T) * t0, cols = ow - ox0 < (T) * nt ? ow - ox0 : (T) * nt;                      \
    for (int64_t rr = 0; rr < nrows; rr++)                                                         \
        for (int i = 0; i < (T); i++) {                                                            \
            int64_t oy = (T) * (ty0 + rr) + i;                                                     \
            if (oy >= oh)                                                                          \
                break;                                                                             \
            for (int64_t t = 0; t < nt; t++)                                                       \
                for (int j = 0; j < (T); j++)                                                      \
                    ob[(T) * t + j] = yo[i][j][rr * nt + t];                                       \
            VKML_WINO_STORE_ROW                                                                    \
        }

/* The same chunk of one output plane y (oh x ow) from M (m points at M[0][k][first tile of the
 * chunk], mstride = Mout x P): A^T m A, + bias, + the residual plane res (or NULL), Relu (NaN
 * kept, -0 made +0) when relu: the direct kernel's epilogue, in its order. */
#define VKML_WINO4_OUT_BODY                                                                         \
    float r[4][6][VKML_WINO_CHUNK];                                                                \
    float yo[4][4][VKML_WINO_CHUNK]; /* yo[i][j][q] = output (i, j) of tile q */                   \
    float ob[4 * VKML_WINO_CHUNK];                                                                 \
    int64_t np = nrows * nt;                                                                       \
    for (int j = 0; j < 6; j++) { /* r[.][j] = A^T (column j of each tile's products) */           \
        const float *restrict c0 = m + j * mstride, *restrict c1 = c0 + 6 * mstride;               \
        const float *restrict c2 = c1 + 6 * mstride, *restrict c3 = c2 + 6 * mstride;              \
        const float *restrict c4 = c3 + 6 * mstride, *restrict c5 = c4 + 6 * mstride;              \
        for (int64_t q = 0; q < np; q++) {                                                         \
            float m0 = c0[q], m1 = c1[q], m2 = c2[q], m3 = c3[q], m4 = c4[q], m5 = c5[q];          \
            VKML_WINO4_AT(m0, m1, m2, m3, m4, m5, r[0][j][q], r[1][j][q], r[2][j][q], r[3][j][q], ) \
        }                                                                                          \
    }                                                                                              \
    for (int i = 0; i < 4; i++)                                                                    \
        for (int64_t q = 0; q < np; q++) {                                                         \
            float q0 = r[i][0][q], q1 = r[i][1][q], q2 = r[i][2][q];                               \
            float q3 = r[i][3][q], q4 = r[i][4][q], q5 = r[i][5][q];                               \
            VKML_WINO4_AT(q0, q1, q2, q3, q4, q5, yo[i][0][q], yo[i][1][q], yo[i][2][q], yo[i][3][q], \
                          + bias)                                                                  \
        }                                                                                          \
    VKML_WINO_OUT_ROWS(4)

/* F(2x2, 3x3): the same chunks with 4x4 patches at (2 ty - py, 2 t - px) and 2x2 outputs. */
#define VKML_WINO2_IN_BODY                                                                         \
    float r[4][4][VKML_WINO_CHUNK];                                                                \
    float pr[4][2 * VKML_WINO_CHUNK + 2];                                                          \
    int64_t x0 = 2 * t0 - px, span = 2 * nt + 2, np = nrows * nt;                                  \
    for (int64_t rr = 0; rr < nrows; rr++) {                                                       \
        int64_t ty = ty0 + rr;                                                                     \
        VKML_WINO_ROWS(2, 4)                                                                      \
        for (int k = 0; k < 4; k++) {                                                              \
            const float *p0 = pr[0] + k, *p1 = pr[1] + k, *p2 = pr[2] + k, *p3 = pr[3] + k;        \
            float *r0 = &r[0][k][rr * nt], *r1 = &r[1][k][rr * nt];                                \
            float *r2 = &r[2][k][rr * nt], *r3 = &r[3][k][rr * nt];                                \
            for (int64_t t = 0; t < nt; t++) {                                                     \
                float d0 = p0[2 * t], d1 = p1[2 * t], d2 = p2[2 * t], d3 = p3[2 * t];              \
                VKML_WINO2_BT(d0, d1, d2, d3, r0[t], r1[t], r2[t], r3[t])                          \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    for (int i = 0; i < 4; i++) {                                                                  \
        float *restrict v0 = v + (4 * i) * vstride, *restrict v1 = v0 + vstride;                   \
        float *restrict v2 = v1 + vstride, *restrict v3 = v2 + vstride;                            \
        for (int64_t q = 0; q < np; q++) {                                                         \
            float q0 = r[i][0][q], q1 = r[i][1][q], q2 = r[i][2][q], q3 = r[i][3][q];              \
            VKML_WINO2_BT(q0, q1, q2, q3, v0[q], v1[q], v2[q], v3[q])                              \
        }                                                                                          \
    }

#define VKML_WINO2_OUT_BODY                                                                        \
    float r[2][4][VKML_WINO_CHUNK];                                                                \
    float yo[2][2][VKML_WINO_CHUNK];                                                               \
    float ob[2 * VKML_WINO_CHUNK];                                                                 \
    int64_t np = nrows * nt;                                                                       \
    for (int j = 0; j < 4; j++) {                                                                  \
        const float *restrict c0 = m + j * mstride, *restrict c1 = c0 + 4 * mstride;               \
        const float *restrict c2 = c1 + 4 * mstride, *restrict c3 = c2 + 4 * mstride;              \
        for (int64_t q = 0; q < np; q++) {                                                         \
            float m0 = c0[q], m1 = c1[q], m2 = c2[q], m3 = c3[q];                                  \
            VKML_WINO2_AT(m0, m1, m2, m3, r[0][j][q], r[1][j][q], )                                \
        }                                                                                          \
    }                                                                                              \
    for (int i = 0; i < 2; i++)                                                                    \
        for (int64_t q = 0; q < np; q++) {                                                         \
            float q0 = r[i][0][q], q1 = r[i][1][q], q2 = r[i][2][q], q3 = r[i][3][q];              \
            VKML_WINO2_AT(q0, q1, q2, q3, yo[i][0][q], yo[i][1][q], + bias)                        \
        }                                                                                          \
    VKML_WINO_OUT_ROWS(2)

#define VKML_WINO_IN_ARGS                                                                          \
    const float *restrict x, int64_t h, int64_t w, int64_t py, int64_t px, int64_t ty0,            \
        int64_t nrows, int64_t t0, int64_t nt, float *restrict v, int64_t vstride
#define VKML_WINO_OUT_ARGS                                                                         \
    const float *restrict m, int64_t mstride, int64_t ty0, int64_t nrows, int64_t t0, int64_t nt,  \
        float bias, const float *restrict res, int relu, float *restrict y, int64_t oh, int64_t ow
#define VKML_WINO_IN_CALL x, h, w, py, px, ty0, nrows, t0, nt, vt, vstride
#define VKML_WINO_OUT_CALL mt, mstride, ty0, nrows, t0, nt, bias, res, relu, y, oh, ow

/* Each transform for each tile side and kernel set (generic; AVX-512F with 512-bit vectors, which
 * GCC's generic tuning does not prefer even with AVX-512F; AVX2+FMA). */
#define VKML_WINO_FNS(T, ATTR, SUFFIX)                                                             \
    ATTR static void vkml_wino##T##_in_##SUFFIX(VKML_WINO_IN_ARGS) { VKML_WINO##T##_IN_BODY }      \
    ATTR static void vkml_wino##T##_out_##SUFFIX(VKML_WINO_OUT_ARGS) { VKML_WINO##T##_OUT_BODY }
VKML_WINO_FNS(2, , generic)
VKML_WINO_FNS(4, , generic)
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define VKML_WINO_X86 1
VKML_WINO_FNS(2, __attribute__((target("avx512f,prefer-vector-width=512"))), avx512)
VKML_WINO_FNS(4, __attribute__((target("avx512f,prefer-vector-width=512"))), avx512)
VKML_WINO_FNS(2, __attribute__((target("avx2,fma"))), avx2)
VKML_WINO_FNS(4, __attribute__((target("avx2,fma"))), avx2)
#define VKML_WINO_PICK(T, DIR, isa, args)                                                          \
    (isa == 2 ? vkml_wino##T##_##DIR##_avx512(args)                                                \
              : isa == 1 ? vkml_wino##T##_##DIR##_avx2(args) : vkml_wino##T##_##DIR##_generic(args))
#else
#define VKML_WINO_X86 0
#define VKML_WINO_PICK(T, DIR, isa, args) vkml_wino##T##_##DIR##_generic(args)
#endif

/* The chunks of a plane of th x tw tiles: whole tile rows, as many as fit in VKML_WINO_CHUNK
 * tiles, or pieces of one row where a row has more. */
#define VKML_WINO_CHUNKS(call)                                                                     \
    if (tw <= VKML_WINO_CHUNK) {                                                                   \
        int64_t rows = VKML_WINO_CHUNK / tw;                                                       \
        for (int64_t ty0 = 0; ty0 < th; ty0 += rows) {                                             \
            int64_t nrows = th - ty0 < rows ? th - ty0 : rows, t0 = 0, nt = tw;                    \
            call;                                                                                  \
        }                                                                                          \
    } else {                                                                                       \
        for (int64_t ty0 = 0; ty0 < th; ty0++)                                                     \
            for (int64_t t0 = 0; t0 < tw; t0 += VKML_WINO_CHUNK) {                                 \
                int64_t nrows = 1, nt = tw - t0 < VKML_WINO_CHUNK ? tw - t0 : VKML_WINO_CHUNK;     \
                call;                                                                              \
            }                                                                                      \
    }

/* One input plane's tiles (th x tw of them, t x t outputs each, t = 4 or 2) into V at v
 * (V[0][c][first tile of the plane]), for the kernel set `isa` (cpu_gemm.h's: 2 AVX-512,
 * 1 AVX2, else generic). */
static void vkml_wino_in_plane(int isa, int t, const float *x, int64_t h, int64_t w, int64_t py, int64_t px,
                               int64_t th, int64_t tw, float *v, int64_t vstride)
{
    VKML_WINO_CHUNKS({
        float *vt = v + ty0 * tw + t0;
        if (t == 4)
            VKML_WINO_PICK(4, in, isa, VKML_WINO_IN_CALL);
        else
            VKML_WINO_PICK(2, in, isa, VKML_WINO_IN_CALL);
    })
}

/* One output plane (oh x ow at y) from M at m (M[0][k][first tile of the plane]). */
static void vkml_wino_out_plane(int isa, int t, const float *m, int64_t mstride, int64_t th, int64_t tw,
                                float bias, const float *res, int relu, float *y, int64_t oh, int64_t ow)
{
    VKML_WINO_CHUNKS({
        const float *mt = m + ty0 * tw + t0;
        if (t == 4)
            VKML_WINO_PICK(4, out, isa, VKML_WINO_OUT_CALL);
        else
            VKML_WINO_PICK(2, out, isa, VKML_WINO_OUT_CALL);
    })
}

#endif
