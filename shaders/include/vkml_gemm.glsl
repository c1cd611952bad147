// Register-blocked GEMM core shared by matmul.comp and conv.comp (the SIMT path).
//
// A workgroup computes a BM x BN block of C = A (BM x K) * B (K x BN), walking K in tiles of
// BK through double-buffered shared memory. Each invocation owns a TM x TN micro-tile made of
// (TM/4) x (TN/4) groups of 4x4 values, the groups strided by a quarter of the block so that
// the vec4 reads of neighbouring invocations hit consecutive shared-memory banks.
//
// Shared tiles are float32 and k-major: As[k][m], Bs[k][n], stored as vec4 (128-bit reads).
// The including shader provides the load stage: it fills vec4 "slots" (four values
// consecutive along m for A or n for B, or along k, see GEMM_SLOT_*) and calls
// gemm_store_a / gemm_store_b; everything else is here.
//
// Specialization constants (ids 1..5; id 0 is the workgroup size = (BM/TM) * (BN/TN)):
#ifndef VKML_GEMM_GLSL
#define VKML_GEMM_GLSL
#extension GL_EXT_control_flow_attributes : require

layout(constant_id = 1) const uint BM = 64;
layout(constant_id = 2) const uint BN = 64;
layout(constant_id = 3) const uint BK = 16;
layout(constant_id = 4) const uint TM = 4;   // multiples of 4
layout(constant_id = 5) const uint TN = 4;

const uint WGX = BN / TN;          // invocations along n
const uint WGY = BM / TM;          // invocations along m
const uint NWG = WGX * WGY;        // = gl_WorkGroupSize.x (checked by the host)
const uint BM4 = BM / 4;
const uint BN4 = BN / 4;
const uint TM4 = TM / 4;
const uint TN4 = TN / 4;

shared vec4 As[2 * BK * BM4];
shared vec4 Bs[2 * BK * BN4];

// How many vec4 slots each invocation loads per K tile (the tiles are BM x BK and BK x BN).
const uint SLOTS_A = (BM * BK / 4 + NWG - 1) / NWG;
const uint SLOTS_B = (BK * BN / 4 + NWG - 1) / NWG;

// A slot of the A tile: which (m, k) it starts at, and whether its four values run along m
// (k-major source: the vec4 goes to shared memory as is) or along k (m-major source: four
// scalar stores). Slot s of the tile: s in [0, BM*BK/4).
void gemm_slot_a(uint s, bool along_m, out uint m, out uint k) {
    if (along_m) { k = s / BM4; m = (s - k * BM4) * 4u; }
    else { m = s / (BK / 4u); k = (s - m * (BK / 4u)) * 4u; }
}

void gemm_slot_b(uint s, bool along_n, out uint k, out uint n) {
    if (along_n) { k = s / BN4; n = (s - k * BN4) * 4u; }
    else { n = s / (BK / 4u); k = (s - n * (BK / 4u)) * 4u; }
}

void gemm_store_a(uint buf, uint m, uint k, bool along_m, vec4 v) {
    uint base = buf * BK * BM4;
    if (along_m) {
        As[base + k * BM4 + m / 4u] = v;
    } else {
        uint q = m / 4u, c = m & 3u;
        As[base + (k + 0u) * BM4 + q][c] = v.x;
        As[base + (k + 1u) * BM4 + q][c] = v.y;
        As[base + (k + 2u) * BM4 + q][c] = v.z;
        As[base + (k + 3u) * BM4 + q][c] = v.w;
    }
}

void gemm_store_b(uint buf, uint k, uint n, bool along_n, vec4 v) {
    uint base = buf * BK * BN4;
    if (along_n) {
        Bs[base + k * BN4 + n / 4u] = v;
    } else {
        uint q = n / 4u, c = n & 3u;
        Bs[base + (k + 0u) * BN4 + q][c] = v.x;
        Bs[base + (k + 1u) * BN4 + q][c] = v.y;
        Bs[base + (k + 2u) * BN4 + q][c] = v.z;
        Bs[base + (k + 3u) * BN4 + q][c] = v.w;
    }
}

// The accumulators: TM x TN float32 values held as TM x (TN/4) vec4s, row i's columns
// 4*j4 .. 4*j4+3 in acc4[i * TN4 + j4], one FMA per vec4. Indices must be constants once
// loops are unrolled: a dynamically indexed accumulator array lives in local memory.
#define GEMM_ACC_DECL vec4 acc4[TM * TN4]
#define GEMM_ACC_ZERO [[unroll]] for (uint i_ = 0u; i_ < TM * TN4; ++i_) acc4[i_] = vec4(0.0)
#define GEMM_FMA(i_, a_, rb_) [[unroll]] for (uint j_ = 0u; j_ < TN4; ++j_) \
    acc4[i_ * TN4 + j_] = fma(vec4(a_), rb_[j_], acc4[i_ * TN4 + j_]);
// Storing the accumulators: with at most 16 per invocation (4x4) the stores are unrolled
// (GEMM_STORE_UNROLLED: many loads and stores of the epilogue in flight at once). Bigger
// micro-tiles walk them in a loop that is not unrolled, trip q taking acc4[0] (row q / TN4,
// columns 4 * (q % TN4) ...) and shifting the others down: constant indices, and one copy
// of the store and its epilogue. Unrolled, the 64 epilogues of an 8x8 micro-tile cost
// NVIDIA's compiler the registers of the main loop: every 8x8 tiling ran at 2 TFLOPS
// instead of 35 (bench/results/probe_gemm_core-h100-2026-11-25.jsonl).
const bool GEMM_STORE_UNROLLED = TM * TN <= 16u;
#define GEMM_ACC_TAKE(v4) { v4 = acc4[0]; \
    [[unroll]] for (uint r_ = 0u; r_ + 1u < TM * TN4; ++r_) acc4[r_] = acc4[r_ + 1u]; }

// The k loop is not fully [[unroll]]ed: fully unrolled (BK x TM x TN FMAs) it took NVIDIA's
// compiler 0.5 s (64x64x16, 4x4) to 4 s (64x128x8, 8x8) and over 15 s (64x128x16, 8x8) per
// pipeline (bench/results/checks/h100-2026-11-23-compile-probe.md). GEMM_KSTEP k values are
// unrolled per trip instead (0: the whole tile).
#ifndef GEMM_KSTEP
#define GEMM_KSTEP 1
#endif
#define GEMM_KBODY(kk_, abase_, bbase_, tx, ty) { \
    vec4 ra_[TM4]; vec4 rb_[TN4]; \
    [[unroll]] for (uint i_ = 0u; i_ < TM4; ++i_) ra_[i_] = As[abase_ + (kk_) * BM4 + i_ * WGY + (ty)]; \
    [[unroll]] for (uint j_ = 0u; j_ < TN4; ++j_) rb_[j_] = Bs[bbase_ + (kk_) * BN4 + j_ * WGX + (tx)]; \
    [[unroll]] for (uint i_ = 0u; i_ < TM; ++i_) { \
        float a_ = ra_[i_ >> 2u][i_ & 3u]; \
        GEMM_FMA(i_, a_, rb_) \
    } \
}
#if GEMM_KSTEP == 0
#define GEMM_TILE(buf, tx, ty) { \
    uint abase_ = (buf) * BK * BM4, bbase_ = (buf) * BK * BN4; \
    [[unroll]] for (uint kk_ = 0u; kk_ < BK; ++kk_) GEMM_KBODY(kk_, abase_, bbase_, tx, ty) \
}
#else
#define GEMM_TILE(buf, tx, ty) { \
    uint abase_ = (buf) * BK * BM4, bbase_ = (buf) * BK * BN4; \
    for (uint k0_ = 0u; k0_ < BK; k0_ += GEMM_KSTEP) { \
        [[unroll]] for (uint ku_ = 0u; ku_ < GEMM_KSTEP; ++ku_) GEMM_KBODY(k0_ + ku_, abase_, bbase_, tx, ty) \
    } \
}
#endif

// The K loop over `ntiles` tiles from `kbeg` into the accumulators (GEMM_ACC_DECL, zeroed),
// shared by matmul.comp and conv.comp: each K tile is fetched into registers before the
// multiplies on the tile before it and stored to the other shared buffer behind them (one
// barrier per tile). Fetching two tiles ahead (a second register set) was slower on every CNN
// tried: resnet18 553 -> 591 us, ResNet-50 1200 -> 1227 on an H200
// (bench/results/checks/h200-2026-12-04-gemm-prefetch2.jsonl).
// The includer defines, before expanding it (they may name main()'s locals):
//   GEMM_A_ALONG_M, GEMM_B_ALONG_N: the slots' orientation (gemm_slot_a / gemm_slot_b);
//   GEMM_FETCH_A(m, k), GEMM_FETCH_B(k, n): the vec4 of the slot at block row m / column n
//     (within the block) and absolute k, zeros outside the problem.
#define GEMM_FETCH_TILE(ra_, rb_, kt_) { \
    [[unroll]] for (uint i_ = 0u; i_ < SLOTS_A; ++i_) { \
        uint m_, k_; \
        gemm_slot_a(min(gk_tid + i_ * NWG, BM * BK / 4u - 1u), GEMM_A_ALONG_M, m_, k_); \
        ra_[i_] = GEMM_FETCH_A(m_, (kt_) + k_); \
    } \
    [[unroll]] for (uint i_ = 0u; i_ < SLOTS_B; ++i_) { \
        uint k_, n_; \
        gemm_slot_b(min(gk_tid + i_ * NWG, BK * BN / 4u - 1u), GEMM_B_ALONG_N, k_, n_); \
        rb_[i_] = GEMM_FETCH_B((kt_) + k_, n_); \
    } \
}
#define GEMM_PUT_TILE(buf_, ra_, rb_) { \
    [[unroll]] for (uint i_ = 0u; i_ < SLOTS_A; ++i_) { \
        uint s_ = gk_tid + i_ * NWG, m_, k_; \
        if (s_ < BM * BK / 4u) { \
            gemm_slot_a(s_, GEMM_A_ALONG_M, m_, k_); \
            gemm_store_a(buf_, m_, k_, GEMM_A_ALONG_M, ra_[i_]); \
        } \
    } \
    [[unroll]] for (uint i_ = 0u; i_ < SLOTS_B; ++i_) { \
        uint s_ = gk_tid + i_ * NWG, k_, n_; \
        if (s_ < BK * BN / 4u) { \
            gemm_slot_b(s_, GEMM_B_ALONG_N, k_, n_); \
            gemm_store_b(buf_, k_, n_, GEMM_B_ALONG_N, rb_[i_]); \
        } \
    } \
}
#define GEMM_K_LOOP(kbeg, ntiles, tid, tx, ty) { \
    uint gk_tid = (tid), gk_kbeg = (kbeg), gk_n = (ntiles); \
    vec4 gk_a[SLOTS_A]; vec4 gk_b[SLOTS_B]; \
    if (gk_n > 0u) { \
        GEMM_FETCH_TILE(gk_a, gk_b, gk_kbeg) \
        GEMM_PUT_TILE(0u, gk_a, gk_b) \
    } \
    barrier(); \
    for (uint t_ = 0u; t_ < gk_n; ++t_) { \
        uint buf_ = t_ & 1u; \
        bool more_ = t_ + 1u < gk_n; \
        if (more_) GEMM_FETCH_TILE(gk_a, gk_b, gk_kbeg + (t_ + 1u) * BK) \
        GEMM_TILE(buf_, tx, ty); \
        if (more_) GEMM_PUT_TILE(buf_ ^ 1u, gk_a, gk_b) \
        barrier(); \
    } \
}

// Row (within the block) of accumulator row i, column of accumulator column j.
uint gemm_row(uint i, uint ty) { return ((i >> 2u) * WGY + ty) * 4u + (i & 3u); }
uint gemm_col(uint j, uint tx) { return ((j >> 2u) * WGX + tx) * 4u + (j & 3u); }

#endif
