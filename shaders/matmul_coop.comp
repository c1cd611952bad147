#version 450
// Batched GEMM on tensor cores: O[z] = alpha * op(A[z]) * op(B[z]) (+ beta * C), float16
// A, B, C and output, float32 accumulation, through GL_KHR_cooperative_matrix.
//
// The tiles, the K loop and the staged stores are include/vkml_coop.glsl's (shared with
// conv_coop.comp); this file reads the operands (each in its stored layout: row-major, or
// column-major when transposed), walks the batches and splits, and stores: whole blocks
// without alpha, C or an epilogue go out directly as float16, the others through the staging
// tiles so that alpha, beta * C, the epilogue (a fused residual Add and activation), the
// float16 rounding and the bounds checks happen in plain code.
//
// VEC (a define: 8 or 4) is the width of every global and shared access in halves: 16- or
// 8-byte vectors. The host guarantees, besides the include's conditions: each operand's
// contiguous dimension, leading stride and batch strides are multiples of VEC.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x = 128, local_size_x_id = 0) in;
layout(constant_id = 6) const bool TRANS_A = false;
layout(constant_id = 7) const bool TRANS_B = false;
layout(constant_id = 8) const bool HAS_C = false;
// Every block whole and K a multiple of BK (so every split's range too): the operand fetches
// skip their bounds checks.
layout(constant_id = 11) const bool ALIGNED = false;
#include "include/vkml_coop.glsl"

layout(std430, binding = 0) readonly buffer BA { VT av[]; };
layout(std430, binding = 1) readonly buffer BB { VT bv[]; };
layout(std430, binding = 2) readonly buffer BC { float16_t c[]; };
layout(std430, binding = 3) writeonly buffer BO { float16_t o[]; };
// Split K (S > 1, skinny GEMMs that would leave most of the GPU idle): z runs over (split,
// batch); split s sums k in [s * KS, min(K, (s + 1) * KS)) and writes alpha * its partial,
// in float32, to part[((s * batch + z) * M + m) * N + n]; splitk_reduce adds the partials
// and beta * C and rounds to float16 (as matmul.comp's split K).
layout(std430, binding = 4) writeonly buffer BP { float part[]; };

// The same block as matmul.comp (one host-side mirror serves both).
layout(push_constant) uniform Push {
    uint M, N, K, batch;
    uint brank;
    uint bshape[4];
    uint sab[4];
    uint sbb[4];
    uint lda, ldb;
    float alpha, beta;
    uint scm, scn;
    uint KS, S;             // k per split, splits (1: no split, part[] unused)
    uint EPI;               // epilogue (include/vkml_epilogue.glsl): residual, Relu, Clip, SiLU
    float ELO, EHI;         // Clip's bounds (EPI & 4)
} pc;

// The epilogue's residual, laid out like the output (bound to the output when unused).
layout(std430, binding = 5) readonly buffer BR { float16_t res[]; };
#define SO float16_t
// GELU and the division by a constant (the transformer epilogues) only in the EPI_GEMM=1
// variants: their code (erf, tanh, a correctly rounded division) in the same shader as the
// cooperative-matrix loop made a 4096^3 product 5.6x slower on an H100 (157 -> 28 TFLOPS,
// bench/results/checks/h100-2026-11-25-coop-epilogue-variant.txt), whatever EPI was; Sigmoid,
// HardSigmoid, HardSwish and LeakyRelu there too (+8% at 512^3 in the plain variants).
#if EPI_GEMM
#define VKML_EPILOGUE_GEMM
#else
#define VKML_EPILOGUE_BASIC
#endif
#include "include/vkml_epilogue.glsl"

uint KEND;                  // the end of this split's k range

VT fetch_a(uint base, uint m0, uint k0, uint q) {
    uint r = q / (A_COLS / VEC), col = (q % (A_COLS / VEC)) * VEC;
    uint gm = m0 + (TRANS_A ? col : r), gk = k0 + (TRANS_A ? r : col);
    if (q >= A_CHUNKS || (!ALIGNED && (gm >= pc.M || gk >= KEND))) return VT(0u);
    uint idx = TRANS_A ? base + gk * pc.lda + gm : base + gm * pc.lda + gk;
    return av[idx / VEC];
}

VT fetch_b(uint base, uint n0, uint k0, uint q) {
    uint r = q / (B_COLS / VEC), col = (q % (B_COLS / VEC)) * VEC;
    uint gn = n0 + (TRANS_B ? r : col), gk = k0 + (TRANS_B ? col : r);
    if (q >= B_CHUNKS || (!ALIGNED && (gn >= pc.N || gk >= KEND))) return VT(0u);
    uint idx = TRANS_B ? base + gn * pc.ldb + gk : base + gk * pc.ldb + gn;
    return bv[idx / VEC];
}

// The staged epilogue's stores (COOP_STORE_STAGED): alpha, then the split's float32 partial,
// or beta * C, the epilogue and the rounding to float16.
bool SPLIT_K;               // this dispatch splits K (pc.S > 1)
uint OBASE, PBASE;          // this batch's output, this (split, batch)'s partials

void coop_store(uint m, uint n, float v) {
    if (m >= pc.M || n >= pc.N) return;
    v *= pc.alpha;
    if (SPLIT_K) {
        part[PBASE + m * pc.N + n] = v;
        return;
    }
    if (HAS_C) v += pc.beta * float(c[m * pc.scm + n * pc.scn]);
    uint oi = OBASE + m * pc.N + n;
    o[oi] = float16_t(epilogue(v, oi, pc.EPI));
}

void main() {
    uint tid = gl_LocalInvocationID.x;
    uint warp = gl_SubgroupID;
    uint wm0 = (warp / WARPS_N) * WM, wn0 = (warp % WARPS_N) * WN;
    uint n0 = gl_WorkGroupID.x * BN, m0 = gl_WorkGroupID.y * BM;
    for (uint zs = gl_WorkGroupID.z; zs < pc.batch * pc.S; zs += gl_NumWorkGroups.z) {
        uint split = zs / pc.batch, z = zs - split * pc.batch;
        uint kbeg = split * pc.KS;
        KEND = min(pc.K, kbeg + pc.KS);
        uint ntiles = KEND > kbeg ? (KEND - kbeg + BK - 1u) / BK : 0u;
        uint abase = 0u, bbase = 0u, rem = z;
        for (int d = int(pc.brank) - 1; d >= 0; --d) {
            uint s = pc.bshape[d], qq = rem / s, co = rem - qq * s;
            rem = qq;
            abase += co * pc.sab[d];
            bbase += co * pc.sbb[d];
        }

        COOP_ACC_DECL;
        COOP_K_LOOP(abase, bbase, m0, n0, kbeg, ntiles, tid, wm0, wn0);

        // Epilogue. Whole blocks without alpha or C: the accumulators go out directly as
        // float16. Otherwise through the staging tiles (alpha, beta * C, ragged edges in plain
        // code; split K: alpha * the partial in float32, for splitk_reduce).
        SPLIT_K = pc.S > 1u;
        OBASE = z * pc.M * pc.N;
        PBASE = (split * pc.batch + z) * pc.M * pc.N;
        bool direct = !SPLIT_K && !HAS_C && pc.EPI == 0u && pc.alpha == 1.0 && m0 + BM <= pc.M
                      && n0 + BN <= pc.N && pc.N % 8u == 0u;
        if (direct) {
            [[unroll]] for (uint i = 0u; i < FM; ++i) {
                [[unroll]] for (uint j = 0u; j < FN; ++j) {
                    coopmat<float16_t, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator> h =
                        coopmat<float16_t, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator>(acc[i * FN + j]);
                    coopMatStore(h, o, OBASE + (m0 + wm0 + i * CM) * pc.N + n0 + wn0 + j * CN, pc.N,
                                 gl_CooperativeMatrixLayoutRowMajor);
                }
            }
        } else {
            COOP_STORE_STAGED(m0 + wm0, n0 + wn0);
        }
        barrier();  // the next batch's first tile overwrites As
    }
}
