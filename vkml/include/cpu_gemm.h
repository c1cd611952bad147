/* vkml's own float32 GEMM for the CPU device's native programs (vkml/runtime/_cpuprog.pyx).
 *
 * Why not NumPy's OpenBLAS alone: a convolution's weights are constants, yet every sgemm call
 * packs them again; the bias, residual and Relu after a Conv are one more pass over its output;
 * and a CNN's many mid-sized products (64-512 rows, a few hundred to a few thousand columns)
 * spend a large share of each call outside the inner kernel. Here the weights (A) are packed once,
 * when the program is made, into panels of MR rows; each call packs its columns (B) into panels
 * of NR, block by block (KC x NC, in the core's L2), and a register-blocked micro-kernel applies
 * the epilogue (bias, residual, Relu) to the tile it holds before storing it.
 *
 * The kernels are compiled for AVX-512F and for AVX2+FMA (function-level target attributes, so
 * the package builds with the compiler's default flags) and chosen at run time from what the
 * CPU has; elsewhere (other architectures, old x86) vkml_gemm_isa() is 0 and callers keep
 * cblas_sgemm.
 */
#ifndef VKML_CPU_GEMM_H
#define VKML_CPU_GEMM_H

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define VKML_GEMM_X86 1
#include <immintrin.h>
#else
#define VKML_GEMM_X86 0
#endif

enum { VKML_GEMM_NONE = 0, VKML_GEMM_AVX2 = 1, VKML_GEMM_AVX512 = 2 };

/* Blocking: KC rows of B by NC columns are packed at a time (256 x 512 floats = 512 KB, half a
 * core's L2 on the machines measured); probes change them through vkml_gemm_set_blocks. */
static int vkml_gemm_kc = 256;
static int vkml_gemm_nc = 512;
static int vkml_gemm_forced = -1; /* an ISA forced by VKML_CPU_GEMM (tests, probes); -1: detect */

static int vkml_gemm_detect(void)
{
#if VKML_GEMM_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        return VKML_GEMM_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return VKML_GEMM_AVX2;
#endif
    return VKML_GEMM_NONE;
}

/* The best kernel set the CPU has (detected once). */
static int vkml_gemm_detect_once(void)
{
    static int detected = -1;
    if (detected < 0)
        detected = vkml_gemm_detect();
    return detected;
}

/* The kernel set in use: the forced one where the CPU has it, else the best it has. */
static int vkml_gemm_isa(void)
{
    int detected = vkml_gemm_detect_once();
    if (vkml_gemm_forced >= 0 && vkml_gemm_forced <= detected)
        return vkml_gemm_forced;
    return detected;
}

static int vkml_gemm_mr512 = 8; /* 8, 12 or 14 rows a tile (probes); weights are packed for it */
static int vkml_gemm_mr(int isa) { return isa == VKML_GEMM_AVX512 ? vkml_gemm_mr512 : isa == VKML_GEMM_AVX2 ? 6 : 0; }
static int vkml_gemm_nr(int isa) { return isa == VKML_GEMM_AVX512 ? 32 : isa == VKML_GEMM_AVX2 ? 16 : 0; }

/* A (m x k, lda) into ceil(m / MR) panels, each k x MR (row r of the panel at [kk * MR + r]),
 * the last padded with zero rows: (ceil(m / MR) * MR * k) floats at ap. */
static void vkml_gemm_pack_a(const float *a, int64_t lda, int64_t m, int64_t k, int mr, float *ap)
{
    for (int64_t p = 0; p * mr < m; p++) {
        float *dst = ap + p * k * mr;
        for (int64_t kk = 0; kk < k; kk++) {
            for (int r = 0; r < mr; r++) {
                int64_t row = p * mr + r;
                dst[kk * mr + r] = row < m ? a[row * lda + kk] : 0.0f;
            }
        }
    }
}

#if VKML_GEMM_X86

/* One MR x NR tile: C = (load_c ? C : 0) + A·B over kc (A: kc x MR packed, B: kc rows of NR at
 * stride ldb), then (on the last block, epi != 0) + bias per row, + res (at C's offsets), Relu;
 * rows mr and columns nr of it are stored. Relu keeps NaN and turns -0 into +0, as the separate
 * op does (maximum(x, 0)). */
/* One k step of an MR x 32 tile: B's row of 32 against MR broadcasts of A's column. */
#define VKML_STEP512(MR)                                                                                     \
    do {                                                                                                     \
        __m512 b0 = _mm512_loadu_ps(bp), b1 = _mm512_loadu_ps(bp + 16);                                      \
        _Pragma("GCC unroll 16") for (int r = 0; r < MR; r++) {                                              \
            __m512 a_ = _mm512_set1_ps(ap[r]);                                                               \
            acc[2 * r] = _mm512_fmadd_ps(a_, b0, acc[2 * r]);                                                \
            acc[2 * r + 1] = _mm512_fmadd_ps(a_, b1, acc[2 * r + 1]);                                        \
        }                                                                                                    \
        ap += MR;                                                                                            \
        bp += ldb;                                                                                           \
    } while (0)

#define VKML_UKR512(MR)                                                                                      \
    __attribute__((target("avx512f"))) static void vkml_ukr512_##MR(                                         \
        int64_t kc, const float *ap, const float *bp, int64_t ldb, float *c, int64_t ldc, int mr, int nr,    \
        int load_c, int epi, const float *bias, const float *res, int relu)                                  \
    {                                                                                                        \
        __m512 acc[2 * MR];                                                                                  \
        _Pragma("GCC unroll 32") for (int r = 0; r < 2 * MR; r++) acc[r] = _mm512_setzero_ps();              \
        for (int64_t kk = 0; kk < kc; kk++)                                                                  \
            VKML_STEP512(MR);                                                                                \
        __mmask16 m0 = nr >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << nr) - 1);                          \
        __mmask16 m1 = nr >= 32 ? (__mmask16)0xffff : nr <= 16 ? (__mmask16)0 : (__mmask16)((1u << (nr - 16)) - 1); \
        const __m512 zero = _mm512_setzero_ps();                                                             \
        for (int r = 0; r < mr; r++) {                                                                       \
            float *row = c + r * ldc;                                                                        \
            __m512 v0 = acc[2 * r], v1 = acc[2 * r + 1];                                                     \
            if (load_c) {                                                                                    \
                v0 = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, row), v0);                                      \
                v1 = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, row + 16), v1);                                 \
            }                                                                                                \
            if (epi) {                                                                                       \
                if (bias) {                                                                                  \
                    __m512 bv = _mm512_set1_ps(bias[r]);                                                     \
                    v0 = _mm512_add_ps(v0, bv);                                                              \
                    v1 = _mm512_add_ps(v1, bv);                                                              \
                }                                                                                            \
                if (res) {                                                                                   \
                    v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, res + r * ldc));                        \
                    v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, res + r * ldc + 16));                   \
                }                                                                                            \
                if (relu) {                                                                                  \
                    v0 = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v0, zero, _CMP_NLE_UQ), v0);                 \
                    v1 = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v1, zero, _CMP_NLE_UQ), v1);                 \
                }                                                                                            \
            }                                                                                                \
            _mm512_mask_storeu_ps(row, m0, v0);                                                              \
            _mm512_mask_storeu_ps(row + 16, m1, v1);                                                         \
        }                                                                                                    \
    }

VKML_UKR512(8)
VKML_UKR512(12)
VKML_UKR512(14)

__attribute__((target("avx2,fma")))
static void vkml_ukr_avx2(int64_t kc, const float *ap, const float *bp, int64_t ldb, float *c, int64_t ldc,
                          int mr, int nr, int load_c, int epi, const float *bias, const float *res, int relu)
{
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00,
           c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
#define VKML_R256(r)                                                                                         \
    do {                                                                                                     \
        __m256 a_ = _mm256_broadcast_ss(ap + r);                                                             \
        c##r##0 = _mm256_fmadd_ps(a_, b0, c##r##0);                                                          \
        c##r##1 = _mm256_fmadd_ps(a_, b1, c##r##1);                                                          \
    } while (0)
    for (int64_t kk = 0; kk < kc; kk++) {
        __m256 b0 = _mm256_loadu_ps(bp), b1 = _mm256_loadu_ps(bp + 8);
        VKML_R256(0); VKML_R256(1); VKML_R256(2); VKML_R256(3); VKML_R256(4); VKML_R256(5);
        ap += 6;
        bp += ldb;
    }
#undef VKML_R256
    __m256 acc[12] = {c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51};
    int n0 = nr >= 8 ? 8 : nr, n1 = nr >= 16 ? 8 : nr <= 8 ? 0 : nr - 8;
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(n0), lanes);
    __m256i m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(n1), lanes);
    const __m256 zero = _mm256_setzero_ps();
    for (int r = 0; r < mr; r++) {
        float *row = c + r * ldc;
        __m256 v0 = acc[2 * r], v1 = acc[2 * r + 1];
        if (load_c) {
            v0 = _mm256_add_ps(_mm256_maskload_ps(row, m0), v0);
            v1 = _mm256_add_ps(_mm256_maskload_ps(row + 8, m1), v1);
        }
        if (epi) {
            if (bias) {
                __m256 bv = _mm256_set1_ps(bias[r]);
                v0 = _mm256_add_ps(v0, bv);
                v1 = _mm256_add_ps(v1, bv);
            }
            if (res) {
                v0 = _mm256_add_ps(v0, _mm256_maskload_ps(res + r * ldc, m0));
                v1 = _mm256_add_ps(v1, _mm256_maskload_ps(res + r * ldc + 8, m1));
            }
            if (relu) {
                v0 = _mm256_and_ps(_mm256_cmp_ps(v0, zero, _CMP_NLE_UQ), v0);
                v1 = _mm256_and_ps(_mm256_cmp_ps(v1, zero, _CMP_NLE_UQ), v1);
            }
        }
        _mm256_maskstore_ps(row, m0, v0);
        _mm256_maskstore_ps(row + 8, m1, v1);
    }
}

#endif /* VKML_GEMM_X86 */

/* The calling thread's B panels: grown as needed, kept for the thread's next call and freed when
 * the thread ends (a pthread key's destructor: callers' threads come and go, and a buffer a
 * thread left behind was half a megabyte each). The block's first 64 bytes hold its length. */
static pthread_key_t vkml_gemm_key;
static pthread_once_t vkml_gemm_key_once = PTHREAD_ONCE_INIT;
static int vkml_gemm_key_ok = 0;

static void vkml_gemm_key_init(void) { vkml_gemm_key_ok = pthread_key_create(&vkml_gemm_key, free) == 0; }

static float *vkml_gemm_scratch(int64_t floats)
{
    pthread_once(&vkml_gemm_key_once, vkml_gemm_key_init);
    if (!vkml_gemm_key_ok)
        return NULL;
    char *block = (char *)pthread_getspecific(vkml_gemm_key);
    if (block == NULL || *(int64_t *)block < floats) {
        free(block);
        pthread_setspecific(vkml_gemm_key, NULL);
        block = (char *)aligned_alloc(64, (size_t)(64 + (floats * 4 + 63) / 64 * 64));
        if (block == NULL)
            return NULL;
        *(int64_t *)block = floats;
        if (pthread_setspecific(vkml_gemm_key, block) != 0) {
            free(block);
            return NULL;
        }
    }
    return (float *)(block + 64);
}

/* Packed B, whole: K in blocks of kc rows, each block's columns in panels of nr (zero-padded to
 * npad = panels * nr), a panel's kc rows of nr floats contiguous. Element (kk, j) of a block
 * starting at row pc lives at pc * npad + (j / nr) * kcb * nr + (kk - pc) * nr + j % nr, kcb the
 * block's rows. Rows can be placed one at a time (vkml_gemm_place_row), from any thread. */
static int64_t vkml_gemm_npad(int64_t n, int nr) { return (n + nr - 1) / nr * nr; }

static void vkml_gemm_place_row(const float *row, int64_t kk, int64_t k, int64_t n, int nr, int kc, float *bpk)
{
    int64_t pc = kk / kc * kc, kcb = k - pc < kc ? k - pc : kc, npad = vkml_gemm_npad(n, nr);
    float *dst = bpk + pc * npad + (kk - pc) * nr;
    int64_t full = n / nr, tail = n - full * nr;
    /* (copies of a constant size, so the compiler inlines them: a call each cost as much as the
     * copy, and mnist's second convolution places 200 rows of 7 panels a run) */
    if (nr == 32)
        for (int64_t p = 0; p < full; p++)
            __builtin_memcpy(dst + p * kcb * 32, row + p * 32, 32 * sizeof(float));
    else if (nr == 16)
        for (int64_t p = 0; p < full; p++)
            __builtin_memcpy(dst + p * kcb * 16, row + p * 16, 16 * sizeof(float));
    else
        for (int64_t p = 0; p < full; p++)
            memcpy(dst + p * kcb * nr, row + p * nr, (size_t)nr * sizeof(float));
    if (tail) {
        float *t = dst + full * kcb * nr;
        for (int64_t j = 0; j < tail; j++)
            t[j] = row[full * nr + j];
        for (int64_t j = tail; j < nr; j++)
            t[j] = 0.0f;
    }
}

/* B's block (kc x nc from b, ldb) into panels of nr columns, each kc x nr, zero-padded: a whole
 * packed B of one block, row by row. */
static void vkml_gemm_pack_b(const float *b, int64_t ldb, int64_t kc, int64_t nc, int nr, float *bp)
{
    for (int64_t kk = 0; kk < kc; kk++)
        vkml_gemm_place_row(b + kk * ldb, kk, kc, nc, nr, (int)kc, bp);
}

#if VKML_GEMM_X86
/* One block: rows m of A (packed panels from ap, panel stride k * mr, at row pc of K) times a
 * block of B's panels (kc x nc at bp, panel stride kc * nr) into C. B's panel stays in L1 while
 * A's panels stream past it. */
static void vkml_gemm_block(int isa, int mr, int64_t m, int64_t nc, int64_t kc, int64_t k, const float *ap,
                            const float *bp, float *c, int64_t ldc, int load_c, int last, const float *bias,
                            const float *res, int relu)
{
    int nr = vkml_gemm_nr(isa);
    for (int64_t jr = 0; jr < nc; jr += nr) {
        int cols = nc - jr < nr ? (int)(nc - jr) : nr;
        const float *b = bp + jr * kc;
        for (int64_t ir = 0; ir < m; ir += mr) {
            int rows = m - ir < mr ? (int)(m - ir) : mr;
            const float *a = ap + (ir / mr) * k * mr;
            float *ct = c + ir * ldc + jr;
            const float *bt = bias ? bias + ir : NULL;
            const float *rt = res ? res + ir * ldc + jr : NULL;
            if (isa == VKML_GEMM_AVX2)
                vkml_ukr_avx2(kc, a, b, nr, ct, ldc, rows, cols, load_c, last, bt, rt, relu);
            else if (mr == 12)
                vkml_ukr512_12(kc, a, b, nr, ct, ldc, rows, cols, load_c, last, bt, rt, relu);
            else if (mr == 14)
                vkml_ukr512_14(kc, a, b, nr, ct, ldc, rows, cols, load_c, last, bt, rt, relu);
            else
                vkml_ukr512_8(kc, a, b, nr, ct, ldc, rows, cols, load_c, last, bt, rt, relu);
        }
    }
}
#endif

static void vkml_gemm_empty(int64_t m, int64_t n, float *c, int64_t ldc, const float *bias, const float *res,
                            int relu)
{
    /* an empty sum: zeros, then the epilogue */
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            float v = 0.0f;
            if (bias)
                v += bias[i];
            if (res)
                v += res[i * ldc + j];
            if (relu)
                v = (v > 0 || v != v) ? v : 0.0f;
            c[i * ldc + j] = v;
        }
}

static int vkml_gemm_valid(int isa, int mr)
{
    return (isa == VKML_GEMM_AVX2 && mr == 6) || (isa == VKML_GEMM_AVX512 && (mr == 8 || mr == 12 || mr == 14));
}

/* What a call does before any kernel: 0 where nothing is left to do (an empty C, or an empty
 * sum whose epilogue is written here), -1 where no kernel takes (isa, mr), 1 to go on. */
static int vkml_gemm_trivial(int isa, int mr, int64_t m, int64_t n, int64_t k, float *c, int64_t ldc,
                             const float *bias, const float *res, int relu)
{
    if (m <= 0 || n <= 0)
        return 0;
    if (!vkml_gemm_valid(isa, mr))
        return -1;
    if (k <= 0) {
        vkml_gemm_empty(m, n, c, ldc, bias, res, relu);
        return 0;
    }
    return 1;
}

/* C (m x n, ldc) = A · B (k x n, ldb), then + bias[row], + res (at C's offsets), Relu where
 * given. ap: A packed by vkml_gemm_pack_a with mr rows a panel, from the panel of C's row 0.
 * B is packed here, KC x NC at a time, into the calling thread's buffer. Returns -1 (nothing
 * written) where there is no such kernel or no memory for the B panels, so the caller can fall
 * back. */
static int vkml_sgemm(int isa, int mr, int64_t m, int64_t n, int64_t k, const float *ap, const float *b,
                      int64_t ldb, float *c, int64_t ldc, const float *bias, const float *res, int relu)
{
    int early = vkml_gemm_trivial(isa, mr, m, n, k, c, ldc, bias, res, relu);
    if (early != 1)
        return early;
#if VKML_GEMM_X86
    int nr = vkml_gemm_nr(isa);
    int64_t kcb = k < vkml_gemm_kc ? k : vkml_gemm_kc;
    int64_t ncb = vkml_gemm_npad(n < vkml_gemm_nc ? n : vkml_gemm_nc, nr);
    float *bp = vkml_gemm_scratch(kcb * ncb);
    if (bp == NULL)
        return -1;
    for (int64_t jc = 0; jc < n; jc += ncb) {
        int64_t nc = n - jc < ncb ? n - jc : ncb;
        for (int64_t pc = 0; pc < k; pc += kcb) {
            int64_t kc = k - pc < kcb ? k - pc : kcb;
            vkml_gemm_pack_b(b + pc * ldb + jc, ldb, kc, nc, nr, bp);
            vkml_gemm_block(isa, mr, m, nc, kc, k, ap + pc * mr, bp, c + jc, ldc, pc > 0, pc + kc >= k, bias,
                            res ? res + jc : NULL, relu);
        }
    }
    return 0;
#else
    (void)ap; (void)b; (void)ldb; (void)c; (void)ldc; (void)bias; (void)res; (void)relu;
    return -1;
#endif
}

/* The same with B already packed whole (vkml_gemm_place_row, blocks of kc rows): columns
 * [j0, j0 + n) of it, j0 a multiple of NR (a caller's share of a B all its parts read). */
static int vkml_sgemm_packed(int isa, int mr, int kc, int64_t m, int64_t n, int64_t k, const float *ap,
                             const float *bpk, int64_t npad, int64_t j0, float *c, int64_t ldc, const float *bias,
                             const float *res, int relu)
{
    int early = vkml_gemm_trivial(isa, mr, m, n, k, c, ldc, bias, res, relu);
    if (early != 1)
        return early;
#if VKML_GEMM_X86
    for (int64_t pc = 0; pc < k; pc += kc) {
        int64_t kcb = k - pc < kc ? k - pc : kc;
        vkml_gemm_block(isa, mr, m, n, kcb, k, ap + pc * mr, bpk + pc * npad + j0 * kcb, c, ldc, pc > 0,
                        pc + kcb >= k, bias, res, relu);
    }
    return 0;
#else
    (void)kc; (void)ap; (void)bpk; (void)npad; (void)j0; (void)c; (void)ldc; (void)bias; (void)res; (void)relu;
    return -1;
#endif
}

/* One K block of a B packed whole (rows pc .. pc + kc of K): C (m x n, ldc) = A[:, block] ·
 * B[block, :], nothing added (a split-K part's partial sum; its reduce applies the epilogue). */
static int vkml_sgemm_kblock(int isa, int mr, int kc, int64_t m, int64_t n, int64_t k, const float *ap,
                             const float *bpk, int64_t npad, int64_t pc, float *c, int64_t ldc)
{
    int early = vkml_gemm_trivial(isa, mr, m, n, k - pc, c, ldc, NULL, NULL, 0);
    if (early != 1)
        return early;
#if VKML_GEMM_X86
    int64_t kcb = k - pc < kc ? k - pc : kc;
    vkml_gemm_block(isa, mr, m, n, kcb, k, ap + pc * mr, bpk + pc * npad, c, ldc, 0, 0, NULL, NULL, 0);
    return 0;
#else
    (void)kc; (void)ap; (void)bpk; (void)npad; (void)c; (void)ldc;
    return -1;
#endif
}

#endif
