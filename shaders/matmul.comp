#version 450
// Batched GEMM: O[z] = alpha * op(A[z]) * op(B[z]) (+ beta * C), fp32 accumulation.
// Serves MatMul (batch broadcasting, 1-D operands folded by the host) and Gemm (transA,
// transB, alpha, beta, C broadcast through strides). TX: storage type of A and B
// (1 = f32, 2 = f16, 13 = bf16), TO: of C and the output. Core and tiling: include/vkml_gemm.glsl.
// bfloat16: float32 accumulation, one rounding at the end (include/vkml_gemm_types.glsl).
#extension GL_GOOGLE_include_directive : require
#include "include/vkml_gemm_types.glsl"

layout(local_size_x = 256, local_size_x_id = 0) in;
#include "include/vkml_gemm.glsl"

layout(constant_id = 6) const uint VEC_A = 1;      // 4: A's slots are single vec4 loads
layout(constant_id = 7) const uint VEC_B = 1;
layout(constant_id = 8) const bool TRANS_A = false; // A stored K x M (m contiguous)
layout(constant_id = 9) const bool TRANS_B = false; // B stored N x K (k contiguous)
layout(constant_id = 10) const bool HAS_C = false;
// B's rows scaled as they are read, each value rounded to B's type as a separate Mul would:
// 1 by ks[z * K + k] (a squeeze-excitation gate per image and channel before a pointwise
// convolution, kernels/conv.py), 2 by ks[k].
layout(constant_id = 11) const uint KSCALE = 0;
#if TX == 2
#include "include/vkml_round16.glsl"
#define XROUND(v) f16_round(v)  /* (on the bits: an H200 kept float(float16_t(x)) unrounded) */
#else
#define XROUND(v) float(SX(v))
#endif

layout(std430, binding = 0) readonly buffer BA { SX a[]; };
layout(std430, binding = 0) readonly buffer BA4 { SX4 a4[]; };
layout(std430, binding = 1) readonly buffer BB { SX b[]; };
layout(std430, binding = 1) readonly buffer BB4 { SX4 b4[]; };
layout(std430, binding = 2) readonly buffer BC { SO c[]; };
layout(std430, binding = 3) writeonly buffer BO { SO o[]; };
// Split K (S > 1): z runs over (split, batch); split s sums k in [s * KS, min(K, (s + 1) * KS))
// and writes alpha * its partial to part[((s * batch + z) * M + m) * N + n]; splitk_reduce
// adds the partials and beta * C into the output.
layout(std430, binding = 4) writeonly buffer BP { float part[]; };
layout(std430, binding = 5) readonly buffer BR { SO res[]; };
layout(std430, binding = 6) readonly buffer BS { SX ks[]; };

// Batch: output batch z (row-major over bshape[0..brank)) reads A at sum(coord * sab) and B
// at sum(coord * sbb); the output batches are contiguous M x N blocks. 92 bytes.
layout(push_constant) uniform Push {
    uint M, N, K, batch;
    uint brank;
    uint bshape[4];
    uint sab[4];
    uint sbb[4];
    uint lda, ldb;          // row strides of A and B as stored
    float alpha, beta;
    uint scm, scn;          // C's strides over (m, n), 0 where it broadcasts
    uint KS, S;             // k per split, splits (1: no split, part[] unused)
    uint EPI;               // epilogue (vkml_epilogue.glsl): 1 adds res[] (the output's layout), 2 Relu, 4 Clip
    float ELO, EHI;         // Clip's bounds (EPI & 4), an activation's alpha, beta
} pc;

#if TO != 13  // (no bfloat16 GEMM takes an epilogue)
#define VKML_EPILOGUE_GEMM
#include "include/vkml_epilogue.glsl"
#endif

uint KEND;                  // the end of this split's k range
uint KSBASE;                // where this batch's row scales start in ks[] (KSCALE)

// Output element (m, n) of the batch (or split K partial) at obase: alpha * v, then beta * C
// and the epilogue; a split's partial (S > 1) is stored as alpha * v for splitk_reduce.
void store1(uint obase, uint m, uint n, float v) {
    if (n >= pc.N) return;
    uint oi = obase + m * pc.N + n;
    v *= pc.alpha;
    if (pc.S > 1u) {
        part[oi] = v;
        return;
    }
    if (HAS_C) v += pc.beta * VKML_OF(c[m * pc.scm + n * pc.scn]);
#if TO == 13
    o[oi] = VKML_OS(v);  // (no bfloat16 GEMM takes an epilogue: kernels/matmul.py)
#else
    o[oi] = SO(epilogue(v, oi, pc.EPI));
#endif
}

// Four values of A starting at (gm, gk), along m if TRANS_A else along k; zeros outside.
vec4 load_a(uint base, uint gm, uint gk) {
    vec4 v = vec4(0.0);
    if (gm >= pc.M || gk >= KEND) return v;
    if (TRANS_A) {
        uint idx = base + gk * pc.lda + gm;
        if (VEC_A == 4u) return XF4(a4[idx >> 2u]);
        for (uint c_ = 0u; c_ < 4u; ++c_) if (gm + c_ < pc.M) v[c_] = XF(a[idx + c_]);
    } else {
        uint idx = base + gm * pc.lda + gk;
        if (VEC_A == 4u) return XF4(a4[idx >> 2u]);
        for (uint c_ = 0u; c_ < 4u; ++c_) if (gk + c_ < KEND) v[c_] = XF(a[idx + c_]);
    }
    return v;
}

// Four values of B starting at (gk, gn), along n unless TRANS_B (then along k).
vec4 load_b_raw(uint base, uint gk, uint gn) {
    vec4 v = vec4(0.0);
    if (gk >= KEND || gn >= pc.N) return v;
    if (TRANS_B) {
        uint idx = base + gn * pc.ldb + gk;
        if (VEC_B == 4u) return XF4(b4[idx >> 2u]);
        for (uint c_ = 0u; c_ < 4u; ++c_) if (gk + c_ < KEND) v[c_] = XF(b[idx + c_]);
    } else {
        uint idx = base + gk * pc.ldb + gn;
        if (VEC_B == 4u) return XF4(b4[idx >> 2u]);
        for (uint c_ = 0u; c_ < 4u; ++c_) if (gn + c_ < pc.N) v[c_] = XF(b[idx + c_]);
    }
    return v;
}

vec4 load_b(uint base, uint gk, uint gn) {
    vec4 v = load_b_raw(base, gk, gn);
#if TX != 13  // (the host scales no bfloat16 GEMM's rows)
    if (KSCALE == 0u || gk >= KEND || gn >= pc.N) return v;
    if (!TRANS_B) {
        v *= float(ks[KSBASE + gk]);
        return vec4(XROUND(v.x), XROUND(v.y), XROUND(v.z), XROUND(v.w));
    }
    for (uint c_ = 0u; c_ < 4u; ++c_) if (gk + c_ < KEND) v[c_] = XROUND(v[c_] * float(ks[KSBASE + gk + c_]));
#endif
    return v;
}

void main() {
    uint tid = gl_LocalInvocationID.x;
    uint tx = tid % WGX, ty = tid / WGX;
    uint n0 = gl_WorkGroupID.x * BN, m0 = gl_WorkGroupID.y * BM;
    for (uint zs = gl_WorkGroupID.z; zs < pc.batch * pc.S; zs += gl_NumWorkGroups.z) {
        uint split = zs / pc.batch, z = zs - split * pc.batch;
        uint kbeg = split * pc.KS;
        KEND = min(pc.K, kbeg + pc.KS);
        KSBASE = KSCALE == 1u ? z * pc.K : 0u;
        uint ntiles = KEND > kbeg ? (KEND - kbeg + BK - 1u) / BK : 0u;
        uint abase = 0u, bbase = 0u, r = z;
        for (int d = int(pc.brank) - 1; d >= 0; --d) {
            uint s = pc.bshape[d], q = r / s, co = r - q * s;
            r = q;
            abase += co * pc.sab[d];
            bbase += co * pc.sbb[d];
        }

        GEMM_ACC_DECL;
        GEMM_ACC_ZERO;
#define GEMM_A_ALONG_M TRANS_A
#define GEMM_B_ALONG_N (!TRANS_B)
#define GEMM_FETCH_A(m_, k_) load_a(abase, m0 + (m_), (k_))
#define GEMM_FETCH_B(k_, n_) load_b(bbase, (k_), n0 + (n_))
        GEMM_K_LOOP(kbeg, ntiles, tid, tx, ty)

        uint obase = pc.S > 1u ? (split * pc.batch + z) * pc.M * pc.N : z * pc.M * pc.N;
        if (GEMM_STORE_UNROLLED) {
            [[unroll]] for (uint i = 0u; i < TM; ++i) {
                uint m = m0 + gemm_row(i, ty);
                if (m >= pc.M) continue;
                [[unroll]] for (uint j = 0u; j < TN; ++j)
                    store1(obase, m, n0 + gemm_col(j, tx), acc4[i * TN4 + (j >> 2u)][j & 3u]);
            }
        } else {
            [[dont_unroll]] for (uint q = 0u; q < TM * TN4; ++q) {
                vec4 v4;
                GEMM_ACC_TAKE(v4);
                uint i = q / TN4;
                uint m = m0 + gemm_row(i, ty), nb = n0 + gemm_col((q - i * TN4) * 4u, tx);
                if (m >= pc.M) continue;
                [[dont_unroll]] for (uint e = 0u; e < 4u; ++e) store1(obase, m, nb + e, v4[e]);
            }
        }
    }
}
