#version 450
// Batched GEMM on tensor cores: O[z] = alpha * op(A[z]) * op(B[z]) (+ beta * C), float16
// A, B, C and output, float32 accumulation, through GL_KHR_cooperative_matrix.
//
// A workgroup computes a BM x BN block; each subgroup a WM x WN warp tile made of
// (WM/CM) x (WN/CN) accumulators of the device's CM x CN x CK shape (chosen by the host
// from VkCooperativeMatrixPropertiesKHR). K advances in BK steps through shared tiles, each
// operand kept in its stored layout (row-major, or column-major when transposed) with one
// vector of padding per row against bank conflicts. The next tile is fetched into registers
// while the current one is multiplied; with STAGES = 2 it is stored to the other buffer
// behind the multiplies (one barrier per K step), with STAGES = 1 (half the shared memory)
// into the one buffer between two barriers. Results of ragged or scaled blocks go through
// small per-subgroup staging tiles (in A's buffers, free by then) so that alpha, beta * C, the
// epilogue (a fused residual Add and activation), the float16 rounding and the bounds checks
// happen in plain code.
//
// VEC (a define: 8 or 4) is the width of every global and shared access in halves: 16- or
// 8-byte vectors. The host guarantees: each operand's contiguous dimension, leading stride
// and batch strides are multiples of VEC, BM % WM == BN % WN == 0, WM % CM == WN % CN == 0,
// BK % CK == 0, tile sides multiples of VEC, and local_size_x = (BM/WM) * (BN/WN) * SG.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_control_flow_attributes : require

#if VEC == 8
#define VT uvec4
#else
#define VT uvec2
#endif

layout(local_size_x = 128, local_size_x_id = 0) in;
layout(constant_id = 1) const uint BM = 128;
layout(constant_id = 2) const uint BN = 128;
layout(constant_id = 3) const uint BK = 32;
layout(constant_id = 4) const uint WM = 64;
layout(constant_id = 5) const uint WN = 64;
// The cooperative-matrix shape is fixed per variant (matmul_coop_<M>x<N>x<K>_f16): matrix
// types sized by specialization constants are optional territory for drivers.
const uint CM = COOP_M, CN = COOP_N, CK = COOP_K;
layout(constant_id = 6) const bool TRANS_A = false;
layout(constant_id = 7) const bool TRANS_B = false;
layout(constant_id = 8) const bool HAS_C = false;
layout(constant_id = 9) const uint SG = 32;  // the device's subgroup size
// Shared buffers per operand: 2 = double-buffered (one barrier per K step), 1 = one buffer
// filled from registers between two barriers (half the shared memory, so a bigger BK fits).
layout(constant_id = 10) const uint STAGES = 2;

const uint WARPS_N = BN / WN;
const uint NWARPS = (BM / WM) * WARPS_N;
const uint FM = WM / CM;                     // accumulators per warp along m
const uint FN = WN / CN;
// Shared tiles in the operands' stored layouts; rows are the non-contiguous dimension.
const uint A_ROWS = TRANS_A ? BK : BM;
const uint A_COLS = TRANS_A ? BM : BK;
const uint A_LD = A_COLS / VEC + 1u;         // vectors per shared row, one of padding
const uint B_ROWS = TRANS_B ? BN : BK;
const uint B_COLS = TRANS_B ? BK : BN;
const uint B_LD = B_COLS / VEC + 1u;
const uint A_TILE = A_ROWS * A_LD;           // vectors per buffer
const uint B_TILE = B_ROWS * B_LD;
const uint A_CHUNKS = A_ROWS * A_COLS / VEC; // vector loads per tile
const uint B_CHUNKS = B_ROWS * B_COLS / VEC;
const uint NTHREADS = NWARPS * SG;
const uint SLOTS_A = (A_CHUNKS + NTHREADS - 1u) / NTHREADS;  // loads per invocation per tile
const uint SLOTS_B = (B_CHUNKS + NTHREADS - 1u) / NTHREADS;

// The epilogue's per-subgroup float32 staging tiles reuse As (the host checks it is big
// enough: STAGES * A_TILE vectors hold at least NWARPS * CM * CN floats).
shared VT As[STAGES * A_TILE];
shared VT Bs[STAGES * B_TILE];
const uint VF = VEC / 2u;                    // floats per vector

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
#define VKML_EPILOGUE_GEMM
#include "include/vkml_epilogue.glsl"

uint KEND;                  // the end of this split's k range

VT fetch_a(uint base, uint m0, uint k0, uint q) {
    uint r = q / (A_COLS / VEC), col = (q % (A_COLS / VEC)) * VEC;
    uint gm = m0 + (TRANS_A ? col : r), gk = k0 + (TRANS_A ? r : col);
    if (q >= A_CHUNKS || gm >= pc.M || gk >= KEND) return VT(0u);
    uint idx = TRANS_A ? base + gk * pc.lda + gm : base + gm * pc.lda + gk;
    return av[idx / VEC];
}

VT fetch_b(uint base, uint n0, uint k0, uint q) {
    uint r = q / (B_COLS / VEC), col = (q % (B_COLS / VEC)) * VEC;
    uint gn = n0 + (TRANS_B ? r : col), gk = k0 + (TRANS_B ? col : r);
    if (q >= B_CHUNKS || gn >= pc.N || gk >= KEND) return VT(0u);
    uint idx = TRANS_B ? base + gn * pc.ldb + gk : base + gk * pc.ldb + gn;
    return bv[idx / VEC];
}

void put_a(uint buf, uint q, VT v) {
    if (q < A_CHUNKS)
        As[buf * A_TILE + (q / (A_COLS / VEC)) * A_LD + q % (A_COLS / VEC)] = v;
}

void put_b(uint buf, uint q, VT v) {
    if (q < B_CHUNKS)
        Bs[buf * B_TILE + (q / (B_COLS / VEC)) * B_LD + q % (B_COLS / VEC)] = v;
}

void main() {
    uint tid = gl_LocalInvocationID.x;
    uint warp = gl_SubgroupID, lane = gl_SubgroupInvocationID;
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

        coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator> acc[FM * FN];
        [[unroll]] for (uint i = 0u; i < FM * FN; ++i)
            acc[i] = coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator>(0.0);

        VT ra[SLOTS_A];
        VT rb[SLOTS_B];
        [[unroll]] for (uint i = 0u; i < SLOTS_A; ++i) ra[i] = fetch_a(abase, m0, kbeg, tid + i * NTHREADS);
        [[unroll]] for (uint i = 0u; i < SLOTS_B; ++i) rb[i] = fetch_b(bbase, n0, kbeg, tid + i * NTHREADS);
        if (STAGES == 2u) {
            [[unroll]] for (uint i = 0u; i < SLOTS_A; ++i) put_a(0u, tid + i * NTHREADS, ra[i]);
            [[unroll]] for (uint i = 0u; i < SLOTS_B; ++i) put_b(0u, tid + i * NTHREADS, rb[i]);
            barrier();
        }

        for (uint t = 0u; t < ntiles; ++t) {
            uint buf = STAGES == 2u ? t & 1u : 0u;
            bool more = t + 1u < ntiles;
            if (STAGES == 1u) {
                // One buffer: wait until every subgroup has read the last tile, fill it
                // from the registers, wait again, then fetch the next tile behind the math.
                barrier();
                [[unroll]] for (uint i = 0u; i < SLOTS_A; ++i) put_a(0u, tid + i * NTHREADS, ra[i]);
                [[unroll]] for (uint i = 0u; i < SLOTS_B; ++i) put_b(0u, tid + i * NTHREADS, rb[i]);
                barrier();
            }
            if (more) {
                uint k1 = kbeg + (t + 1u) * BK;
                [[unroll]] for (uint i = 0u; i < SLOTS_A; ++i) ra[i] = fetch_a(abase, m0, k1, tid + i * NTHREADS);
                [[unroll]] for (uint i = 0u; i < SLOTS_B; ++i) rb[i] = fetch_b(bbase, n0, k1, tid + i * NTHREADS);
            }
            [[unroll]] for (uint kk = 0u; kk < BK; kk += CK) {
                // A fragments for the whole warp tile, then one B fragment at a time: fewer
                // live registers than holding every B fragment.
                coopmat<float16_t, gl_ScopeSubgroup, CM, CK, gl_MatrixUseA> fa[FM];
                [[unroll]] for (uint i = 0u; i < FM; ++i) {
                    uint m = wm0 + i * CM;
                    if (TRANS_A)
                        coopMatLoad(fa[i], As, buf * A_TILE + kk * A_LD + m / VEC, A_LD,
                                    gl_CooperativeMatrixLayoutColumnMajor);
                    else
                        coopMatLoad(fa[i], As, buf * A_TILE + m * A_LD + kk / VEC, A_LD,
                                    gl_CooperativeMatrixLayoutRowMajor);
                }
                [[unroll]] for (uint j = 0u; j < FN; ++j) {
                    coopmat<float16_t, gl_ScopeSubgroup, CK, CN, gl_MatrixUseB> fb;
                    uint n = wn0 + j * CN;
                    if (TRANS_B)
                        coopMatLoad(fb, Bs, buf * B_TILE + n * B_LD + kk / VEC, B_LD,
                                    gl_CooperativeMatrixLayoutColumnMajor);
                    else
                        coopMatLoad(fb, Bs, buf * B_TILE + kk * B_LD + n / VEC, B_LD,
                                    gl_CooperativeMatrixLayoutRowMajor);
                    [[unroll]] for (uint i = 0u; i < FM; ++i)
                        acc[i * FN + j] = coopMatMulAdd(fa[i], fb, acc[i * FN + j]);
                }
            }
            if (STAGES == 2u) {
                if (more) {
                    [[unroll]] for (uint i = 0u; i < SLOTS_A; ++i) put_a(buf ^ 1u, tid + i * NTHREADS, ra[i]);
                    [[unroll]] for (uint i = 0u; i < SLOTS_B; ++i) put_b(buf ^ 1u, tid + i * NTHREADS, rb[i]);
                }
                barrier();
            }
        }
        if (STAGES == 1u)
            barrier();  // the staging tiles below reuse As

        // Epilogue. Whole blocks without alpha or C: the accumulators go out directly as
        // float16. Otherwise through this subgroup's staging tile (alpha, beta * C, ragged
        // edges in plain code). Every loop here has a compile-time trip count: a loop the
        // driver cannot unroll would index the accumulator array dynamically and move it
        // to local memory (seen on an H100: 5x slower).
        // Split K: alpha * the partial in float32, through the staging tile, for splitk_reduce.
        bool split_k = pc.S > 1u;
        uint obase = z * pc.M * pc.N, pbase = (split * pc.batch + z) * pc.M * pc.N;
        bool direct = !split_k && !HAS_C && pc.EPI == 0u && pc.alpha == 1.0 && m0 + BM <= pc.M
                      && n0 + BN <= pc.N && pc.N % 8u == 0u;
        if (direct) {
            [[unroll]] for (uint i = 0u; i < FM; ++i) {
                [[unroll]] for (uint j = 0u; j < FN; ++j) {
                    coopmat<float16_t, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator> h =
                        coopmat<float16_t, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator>(acc[i * FN + j]);
                    coopMatStore(h, o, obase + (m0 + wm0 + i * CM) * pc.N + n0 + wn0 + j * CN, pc.N,
                                 gl_CooperativeMatrixLayoutRowMajor);
                }
            }
        } else {
            uint sbase = warp * CM * CN;  // in floats, within As
            [[unroll]] for (uint i = 0u; i < FM; ++i) {
                [[unroll]] for (uint j = 0u; j < FN; ++j) {
                    coopMatStore(acc[i * FN + j], As, sbase / VF, CN / VF, gl_CooperativeMatrixLayoutRowMajor);
                    subgroupMemoryBarrierShared();
                    subgroupBarrier();
                    [[unroll]] for (uint q = 0u; q < (CM * CN + SG - 1u) / SG; ++q) {
                        uint e = q * SG + lane;
                        uint r = e / CN, col = e - r * CN;
                        uint m = m0 + wm0 + i * CM + r, n = n0 + wn0 + j * CN + col;
                        if (e < CM * CN && m < pc.M && n < pc.N) {
                            uint f = sbase + e;
                            float v = pc.alpha * uintBitsToFloat(As[f / VF][f % VF]);
                            if (split_k) {
                                part[pbase + m * pc.N + n] = v;
                            } else {
                                if (HAS_C) v += pc.beta * float(c[m * pc.scm + n * pc.scn]);
                                uint oi = obase + m * pc.N + n;
                                o[oi] = float16_t(epilogue(v, oi, pc.EPI));
                            }
                        }
                    }
                    subgroupMemoryBarrierShared();
                    subgroupBarrier();
                }
            }
        }
        barrier();  // the next batch's first tile overwrites As
    }
}
