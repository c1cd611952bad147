#version 450
// O = alpha * A @ B (+ beta * C) for products of at most ROWS rows (kernels/matmul.py GEMV_ROWS:
// batch-1 MatMuls and Gemms, a decoder's token), where GEMM blocks would be almost all padding
// and walk K alone: B (K x N, row-major) is read once, 4 consecutive columns a vec4 at a time.
// A workgroup takes 4 COLS columns: COLS invocations side by side along n, GROUPS = 256 / COLS
// groups of them along K (group g takes k = g, g + GROUPS, ..., UNROLL rows in flight); the
// groups' sums meet in shared memory and are added in a fixed tree, then alpha, beta * C and the
// epilogue as in matmul.comp's store. fp32 accumulation. Same push block and bindings as matmul.comp (the split-K partials and
// row-scale bindings are unused). TX / TO: 1 f32, 2 f16, 13 bf16 (include/vkml_gemm_types.glsl;
// no epilogue for bfloat16).
//
// TRANS_B: B stored N x K (Gemm's transB = 1, how torch exports nn.Linear's weight), each column
// of the product a row of B. A workgroup then takes 256 / LANES columns, LANES invocations along
// each one's K (lane l reads k = 4 l + 4 LANES i as vec4s of B's row and A's rows, UNROLL in
// flight); each lane
// keeps its 4 k positions apart, and the lanes meet in a fixed tree in shared memory.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "include/vkml_gemm_types.glsl"

layout(local_size_x = 256, local_size_x_id = 0) in;  // (the host keeps 256: COLS x GROUPS)
layout(constant_id = 1) const uint ROWS = 1u;      // M, at most kernels/matmul.py GEMV_ROWS
layout(constant_id = 2) const bool VEC_B = false;  // N % 4 == 0 and B 16-byte aligned: vec4 loads
layout(constant_id = 3) const bool HAS_C = false;
layout(constant_id = 4) const bool TRANS_B = false;  // B stored N x K
layout(constant_id = 5) const bool VEC_A = false;    // (TRANS_B) K % 4 == 0, A 16-byte aligned: vec4 loads
// The shapes of the work (kernels/matmul.py GEMV_COLS, GEMV_LANES, GEMV_UNROLL; powers of two)
layout(constant_id = 6) const uint COLS = 4u;    // invocations side by side along n, 4 columns each
const uint GROUPS = 256u / COLS;                 // groups of them along K
layout(constant_id = 7) const uint LANES = 64u;  // TRANS_B: invocations along each column's K;
                                                 // 256 / LANES columns a workgroup
layout(constant_id = 8) const uint UNROLL = 4u;  // loads of B in flight per invocation

layout(std430, binding = 0) readonly buffer BA { SX a[]; };
layout(std430, binding = 0) readonly buffer BA4 { SX4 a4[]; };
layout(std430, binding = 1) readonly buffer BB { SX b[]; };
layout(std430, binding = 1) readonly buffer BB4 { SX4 b4[]; };
layout(std430, binding = 2) readonly buffer BC { SO c[]; };
layout(std430, binding = 3) writeonly buffer BO { SO o[]; };
layout(std430, binding = 4) writeonly buffer BP { float part[]; };
layout(std430, binding = 5) readonly buffer BR { SO res[]; };
layout(std430, binding = 6) readonly buffer BS { SX ks[]; };

layout(push_constant) uniform Push {
    uint M, N, K, batch;
    uint brank;
    uint bshape[4];
    uint sab[4];
    uint sbb[4];
    uint lda, ldb;
    float alpha, beta;
    uint scm, scn;
    uint KS, S;             // (split K: unused here)
    uint EPI;
    float ELO, EHI;
} pc;

#if TO != 13  // (no bfloat16 GEMM takes an epilogue)
#define VKML_EPILOGUE_GEMM
#include "include/vkml_epilogue.glsl"
#endif

shared vec4 sums[GROUPS * COLS * ROWS];

vec4 load_b(uint k, uint n) {
    if (VEC_B) return XF4(b4[(k * pc.ldb + n) >> 2u]);
    vec4 v = vec4(0.0);
    [[unroll]] for (uint j = 0u; j < 4u; ++j)
        if (n + j < pc.N) v[j] = XF(b[k * pc.ldb + n + j]);
    return v;
}

// TRANS_B: 4 consecutive k of A's row r and of B's row n (zero past K).
vec4 load_at(uint r, uint k) {
    if (VEC_A) return XF4(a4[(r * pc.lda + k) >> 2u]);
    vec4 v = vec4(0.0);
    [[unroll]] for (uint j = 0u; j < 4u; ++j)
        if (k + j < pc.K) v[j] = XF(a[r * pc.lda + k + j]);
    return v;
}

vec4 load_bt(uint n, uint k) {
    if (VEC_B) return XF4(b4[(n * pc.ldb + k) >> 2u]);
    vec4 v = vec4(0.0);
    [[unroll]] for (uint j = 0u; j < 4u; ++j)
        if (k + j < pc.K) v[j] = XF(b[n * pc.ldb + k + j]);
    return v;
}

// alpha, beta * C, the epilogue and the store of result v at (r, col), as matmul.comp's store.
void store(uint r, uint col, float v) {
    uint oi = r * pc.N + col;
    v *= pc.alpha;
    if (HAS_C) v += pc.beta * VKML_OF(c[r * pc.scm + col * pc.scn]);
#if TO == 13
    o[oi] = VKML_OS(v);
#else
    o[oi] = SO(epilogue(v, oi, pc.EPI));
#endif
}

void main_trans_b() {
    uint lid = gl_LocalInvocationID.x;
    uint lane = lid % LANES, n = gl_WorkGroupID.x * (256u / LANES) + lid / LANES;
    vec4 acc[ROWS];
    [[unroll]] for (uint r = 0u; r < ROWS; ++r) acc[r] = vec4(0.0);
    if (n < pc.N) {
        const uint STEP = 4u * LANES;
        uint k = 4u * lane;
        for (; k + (UNROLL - 1u) * STEP + 3u < pc.K; k += UNROLL * STEP) {
            vec4 w[UNROLL];
            [[unroll]] for (uint u = 0u; u < UNROLL; ++u) w[u] = load_bt(n, k + u * STEP);
            [[unroll]] for (uint u = 0u; u < UNROLL; ++u)
                [[unroll]] for (uint r = 0u; r < ROWS; ++r) acc[r] = fma(load_at(r, k + u * STEP), w[u], acc[r]);
        }
        for (; k < pc.K; k += STEP) {
            vec4 w = load_bt(n, k);
            [[unroll]] for (uint r = 0u; r < ROWS; ++r) acc[r] = fma(load_at(r, k), w, acc[r]);
        }
    }
    [[unroll]] for (uint r = 0u; r < ROWS; ++r) sums[r * 256u + lid] = acc[r];
    barrier();
    [[unroll]] for (uint h = LANES / 2u; h > 0u; h >>= 1u) {
        if (lane < h)
            [[unroll]] for (uint r = 0u; r < ROWS; ++r) sums[r * 256u + lid] += sums[r * 256u + lid + h];
        barrier();
    }
    if (lid < ROWS * (256u / LANES)) {
        uint r = lid / (256u / LANES), cl = lid % (256u / LANES);
        uint col = gl_WorkGroupID.x * (256u / LANES) + cl;
        vec4 s = sums[r * 256u + cl * LANES];
        if (col < pc.N) store(r, col, (s.x + s.y) + (s.z + s.w));
    }
}

void main() {
    if (TRANS_B) {
        main_trans_b();
        return;
    }
    uint lid = gl_LocalInvocationID.x;
    uint q = lid % COLS, grp = lid / COLS;
    uint n = (gl_WorkGroupID.x * COLS + q) * 4u;
    vec4 acc[ROWS];
    [[unroll]] for (uint r = 0u; r < ROWS; ++r) acc[r] = vec4(0.0);
    if (n < pc.N) {
        uint k = grp;
        for (; k + (UNROLL - 1u) * GROUPS < pc.K; k += UNROLL * GROUPS) {
            vec4 w[UNROLL];
            [[unroll]] for (uint u = 0u; u < UNROLL; ++u) w[u] = load_b(k + u * GROUPS, n);
            [[unroll]] for (uint u = 0u; u < UNROLL; ++u)
                [[unroll]] for (uint r = 0u; r < ROWS; ++r)
                    acc[r] = fma(vec4(XF(a[r * pc.lda + k + u * GROUPS])), w[u], acc[r]);
        }
        for (; k < pc.K; k += GROUPS) {
            vec4 w = load_b(k, n);
            [[unroll]] for (uint r = 0u; r < ROWS; ++r) acc[r] = fma(vec4(XF(a[r * pc.lda + k])), w, acc[r]);
        }
    }
    [[unroll]] for (uint r = 0u; r < ROWS; ++r) sums[(r * GROUPS + grp) * COLS + q] = acc[r];
    barrier();
    [[unroll]] for (uint h = GROUPS / 2u; h > 0u; h >>= 1u) {
        if (grp < h)
            [[unroll]] for (uint r = 0u; r < ROWS; ++r)
                sums[(r * GROUPS + grp) * COLS + q] += sums[(r * GROUPS + grp + h) * COLS + q];
        barrier();
    }
    // Invocation (r, q, j) stores column j of quad q of row r.
    uint e = lid;
    if (e < ROWS * COLS * 4u) {
        uint r = e / (COLS * 4u), qq = (e / 4u) % COLS, j = e % 4u;
        uint col = (gl_WorkGroupID.x * COLS + qq) * 4u + j;
        if (col < pc.N) store(r, col, sums[r * GROUPS * COLS + qq][j]);
    }
}
