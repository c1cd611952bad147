// The tensor-core GEMM core shared by matmul_coop.comp and conv_coop.comp: float16 A and B
// tiles in shared memory, float32 accumulators of the device's CM x CN x CK subgroup shape,
// through GL_KHR_cooperative_matrix.
//
// A workgroup computes a BM x BN block; each subgroup a WM x WN warp tile made of
// (WM/CM) x (WN/CN) accumulators. K advances in BK steps through shared tiles, each operand
// kept in its stored layout (A: BM rows of BK, or BK rows of BM when TRANS_A; B: BK rows of BN,
// or BN rows of BK when TRANS_B) with one vector of padding per row against bank conflicts.
// The next tile is fetched into registers while the current one is multiplied; with STAGES = 2
// it is stored to the other buffer behind the multiplies (one barrier per K step), with
// STAGES = 1 (half the shared memory) into the one buffer between two barriers. Results go
// out through small per-subgroup float32 staging tiles (in A's buffers, free by then) so that
// the including shader's stores (bias, epilogue, rounding, bounds) happen in plain code.
//
// The including shader, before including this:
//   defines VEC (8 or 4: the width of every shared access in halves, 16- or 8-byte vectors) and
//   COOP_M, COOP_N, COOP_K (the variant's matrix shape); declares local_size_x_id = 0 and
//   TRANS_A, TRANS_B (constants or specialization constants: ids 6-8 and 11 are the includer's,
//   this file declares 1-5, 9 and 10);
//   may define COOP_B_SLOT(q), the chunk of B's stored layout that load slot q fills (default:
//   chunk q, row-major over the stored rows), to order B's loads its own way.
// and then provides, before main():
//   VT fetch_a(uint base, uint m0, uint k0, uint q): chunk q of the A tile at (m0, k0), VEC
//     values along the stored rows (zero outside the problem);
//   VT fetch_b(uint base, uint n0, uint k0, uint q): load slot q of the B tile at (n0, k0);
//   void coop_store(uint m, uint n, float v): one result (m, n in the whole output, unchecked).
// The host guarantees: BM % WM == BN % WN == 0, WM % CM == WN % CN == 0, BK % CK == 0, tile
// sides multiples of VEC, local_size_x = (BM/WM) * (BN/WN) * SG, and that the staging tiles fit
// in A's buffers (STAGES * A_TILE vectors hold NWARPS * CM * CN floats).
#ifndef VKML_COOP_GLSL
#define VKML_COOP_GLSL
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

layout(constant_id = 1) const uint BM = 128;
layout(constant_id = 2) const uint BN = 128;
layout(constant_id = 3) const uint BK = 32;
layout(constant_id = 4) const uint WM = 64;
layout(constant_id = 5) const uint WN = 64;
// The cooperative-matrix shape is fixed per variant (<shader>_<M>x<N>x<K>_...): matrix types
// sized by specialization constants are optional territory for drivers.
const uint CM = COOP_M, CN = COOP_N, CK = COOP_K;
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

shared VT As[STAGES * A_TILE];
shared VT Bs[STAGES * B_TILE];
const uint VF = VEC / 2u;                    // floats per vector

#ifndef COOP_B_SLOT
#define COOP_B_SLOT(q) (q)
#endif

void put_a(uint buf, uint q, VT v) {
    if (q < A_CHUNKS)
        As[buf * A_TILE + (q / (A_COLS / VEC)) * A_LD + q % (A_COLS / VEC)] = v;
}

void put_b(uint buf, uint q, VT v) {
    if (q < B_CHUNKS)
        Bs[buf * B_TILE + (q / (B_COLS / VEC)) * B_LD + q % (B_COLS / VEC)] = v;
}

// The accumulators of this subgroup's warp tile, zeroed.
#define COOP_ACC_DECL \
    coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator> acc[FM * FN]; \
    [[unroll]] for (uint i = 0u; i < FM * FN; ++i) \
        acc[i] = coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator>(0.0)

// One K tile's multiplies on shared buffer `buf`.
#define COOP_MATH(buf, wm0, wn0) { \
    [[unroll]] for (uint kk = 0u; kk < BK; kk += CK) { \
        /* A fragments for the whole warp tile, then one B fragment at a time: fewer live \
           registers than holding every B fragment. */ \
        coopmat<float16_t, gl_ScopeSubgroup, CM, CK, gl_MatrixUseA> fa[FM]; \
        [[unroll]] for (uint i = 0u; i < FM; ++i) { \
            uint m = (wm0) + i * CM; \
            if (TRANS_A) \
                coopMatLoad(fa[i], As, (buf) * A_TILE + kk * A_LD + m / VEC, A_LD, \
                            gl_CooperativeMatrixLayoutColumnMajor); \
            else \
                coopMatLoad(fa[i], As, (buf) * A_TILE + m * A_LD + kk / VEC, A_LD, \
                            gl_CooperativeMatrixLayoutRowMajor); \
        } \
        [[unroll]] for (uint j = 0u; j < FN; ++j) { \
            coopmat<float16_t, gl_ScopeSubgroup, CK, CN, gl_MatrixUseB> fb; \
            uint n = (wn0) + j * CN; \
            if (TRANS_B) \
                coopMatLoad(fb, Bs, (buf) * B_TILE + n * B_LD + kk / VEC, B_LD, \
                            gl_CooperativeMatrixLayoutColumnMajor); \
            else \
                coopMatLoad(fb, Bs, (buf) * B_TILE + kk * B_LD + n / VEC, B_LD, \
                            gl_CooperativeMatrixLayoutRowMajor); \
            [[unroll]] for (uint i = 0u; i < FM; ++i) \
                acc[i * FN + j] = coopMatMulAdd(fa[i], fb, acc[i * FN + j]); \
        } \
    } \
}

// Fetch K tile `t` (of the loop's range) into the registers ra / rb.
#define COOP_FETCH(t) { \
    uint k1 = ck_kbeg + (t) * BK; \
    [[unroll]] for (uint i = 0u; i < SLOTS_A; ++i) ra[i] = fetch_a(ck_abase, ck_m0, k1, ck_tid + i * NTHREADS); \
    [[unroll]] for (uint i = 0u; i < SLOTS_B; ++i) rb[i] = fetch_b(ck_bbase, ck_n0, k1, ck_tid + i * NTHREADS); \
}

// Store the registers into shared buffer `buf`.
#define COOP_PUT(buf) { \
    [[unroll]] for (uint i = 0u; i < SLOTS_A; ++i) put_a(buf, ck_tid + i * NTHREADS, ra[i]); \
    [[unroll]] for (uint i = 0u; i < SLOTS_B; ++i) put_b(buf, COOP_B_SLOT(ck_tid + i * NTHREADS), rb[i]); \
}

// Double-buffered step t on buffer `buf`: the next tile is fetched before the multiplies and
// stored into the other buffer behind them, then one barrier.
#define COOP_STEP2(buf, t) { \
    bool more = (t) + 1u < ck_ntiles; \
    if (more) COOP_FETCH((t) + 1u) \
    COOP_MATH(buf, ck_wm0, ck_wn0) \
    if (more) COOP_PUT((buf) ^ 1u) \
    barrier(); \
}

// acc += the block's A rows from m0 times its B columns from n0 over `ntiles` K tiles from
// `kbeg` (fetch_a(abase, ...), fetch_b(bbase, ...)); `tid` is the local invocation index,
// (wm0, wn0) the warp tile's corner in the block. Ends with every subgroup past its last read
// of the shared tiles, so that the staging tiles may reuse As. (A macro: the accumulator array
// must stay in registers, indexed by constants once the loops are unrolled.)
#define COOP_K_LOOP(abase, bbase, m0, n0, kbeg, ntiles, tid, wm0, wn0) { \
    uint ck_abase = (abase), ck_bbase = (bbase), ck_m0 = (m0), ck_n0 = (n0), ck_kbeg = (kbeg); \
    uint ck_ntiles = (ntiles), ck_tid = (tid), ck_wm0 = (wm0), ck_wn0 = (wn0); \
    VT ra[SLOTS_A]; \
    VT rb[SLOTS_B]; \
    COOP_FETCH(0u) \
    if (STAGES == 2u) { \
        COOP_PUT(0u) \
        barrier(); \
        for (uint t = 0u; t < ck_ntiles; ++t) \
            COOP_STEP2(t & 1u, t) \
    } else { \
        for (uint t = 0u; t < ck_ntiles; ++t) { \
            /* One buffer: wait until every subgroup has read the last tile, fill it from the \
               registers, wait again, then fetch the next tile behind the math. */ \
            barrier(); \
            COOP_PUT(0u) \
            barrier(); \
            if (t + 1u < ck_ntiles) COOP_FETCH(t + 1u) \
            COOP_MATH(0u, ck_wm0, ck_wn0) \
        } \
        barrier(); /* the staging tiles reuse As */ \
    } \
}

// The staged store: each accumulator of this subgroup's warp tile, whose corner is (mw, nw) in
// the whole output, goes to float32 in the subgroup's staging tile, then each lane passes its
// elements to coop_store. Every loop has a compile-time trip count: a loop the driver cannot
// unroll would index the accumulator array dynamically and move it to local memory (seen on
// an H100: 5x slower).
#define COOP_STORE_STAGED(mw, nw) { \
    uint sbase = gl_SubgroupID * CM * CN;  /* in floats, within As */ \
    [[unroll]] for (uint i = 0u; i < FM; ++i) { \
        [[unroll]] for (uint j = 0u; j < FN; ++j) { \
            coopMatStore(acc[i * FN + j], As, sbase / VF, CN / VF, gl_CooperativeMatrixLayoutRowMajor); \
            subgroupMemoryBarrierShared(); \
            subgroupBarrier(); \
            [[unroll]] for (uint q = 0u; q < (CM * CN + SG - 1u) / SG; ++q) { \
                uint e = q * SG + gl_SubgroupInvocationID; \
                uint r = e / CN, f = sbase + e; \
                if (e < CM * CN) \
                    coop_store((mw) + i * CM + r, (nw) + j * CN + e - r * CN, uintBitsToFloat(As[f / VF][f % VF])); \
            } \
            subgroupMemoryBarrierShared(); \
            subgroupBarrier(); \
        } \
    } \
}

#endif
