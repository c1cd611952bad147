#version 450
// Batched float16 GEMM on tensor cores through VK_NV_cooperative_matrix2: O[z] = alpha *
// op(A[z]) * op(B[z]), float32 accumulation, for NVIDIA drivers that offer workgroup-scope
// matrices of flexible sizes and tensor-addressed loads.
//
// Why a second tensor-core shader beside matmul_coop.comp: there each subgroup multiplies its
// own 16x16 fragments out of shared tiles that the shader fills through registers (GLSL has no
// asynchronous global-to-shared copy), so the loads wait in registers. Here the whole workgroup
// owns one BM x BN accumulator and loads BM x BK / BK x BN tiles straight from the buffers by
// tensor layout (coopMatLoadTensorNV): the driver stages them in shared memory its own way,
// asynchronously where the hardware can.
//
// The tensor layouts carry the operands' dimensions, so ragged edges read zeros (clamp mode
// constant) and the stores drop what lies outside; ALIGNED (every block whole and K a
// multiple of BK) takes layouts without the clamp. What this shader leaves to matmul_coop.comp
// (kernels/matmul_cm2.py decides): beta * C and the epilogues. Split K writes alpha times each
// split's float32 partial for splitk_reduce, as matmul_coop.comp does.
//
// Needs glslang 15 or newer (GL_NV_cooperative_matrix2), and SPIR-V 1.6 (vulkan1.3).
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x = 256, local_size_x_id = 0) in;
layout(constant_id = 1) const uint BM = 128;
layout(constant_id = 2) const uint BN = 256;
layout(constant_id = 3) const uint BK = 32;
layout(constant_id = 6) const bool TRANS_A = false;
layout(constant_id = 7) const bool TRANS_B = false;
// Every block whole and K a multiple of BK (so every split's range too): no clamping.
layout(constant_id = 11) const bool ALIGNED = false;
// K tiles per trip of the main loop, unrolled (the driver overlaps their loads).
layout(constant_id = 12) const uint UNROLL = 2;

layout(std430, binding = 0) readonly buffer BA { float16_t a[]; };
layout(std430, binding = 1) readonly buffer BB { float16_t b[]; };
layout(std430, binding = 2) readonly buffer BC { float16_t c[]; };  // (bound, unread)
layout(std430, binding = 3) writeonly buffer BO { float16_t o[]; };
layout(std430, binding = 4) writeonly buffer BP { float part[]; };

// matmul.comp's block (kernels/gemm.py MATMUL_PUSH); beta, scm/scn and the epilogue's fields
// are unused here.
layout(push_constant) uniform Push {
    uint M, N, K, batch;
    uint brank;
    uint bshape[4];
    uint sab[4];
    uint sbb[4];
    uint lda, ldb;
    float alpha, beta;
    uint scm, scn;
    uint KS, S;
    uint EPI;
    float ELO, EHI;
} pc;

#define MAT_A coopmat<float16_t, gl_ScopeWorkgroup, BM, BK, gl_MatrixUseA>
#define MAT_B coopmat<float16_t, gl_ScopeWorkgroup, BK, BN, gl_MatrixUseB>
#define ACC coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>

// One K tile at k0 of A's BM rows from m0 times B's BN columns from n0, added to `acc`;
// la / lb are the operands' layouts (clamped or not), each in its stored orientation.
#define CM2_TILE(acc, la, lb, abase, bbase, m0, n0, k0) { \
    MAT_A ma; \
    MAT_B mb; \
    if (TRANS_A) \
        coopMatLoadTensorNV(ma, a, abase, sliceTensorLayoutNV(la, k0, BK, m0, BM), transposed); \
    else \
        coopMatLoadTensorNV(ma, a, abase, sliceTensorLayoutNV(la, m0, BM, k0, BK)); \
    if (TRANS_B) \
        coopMatLoadTensorNV(mb, b, bbase, sliceTensorLayoutNV(lb, n0, BN, k0, BK), transposed); \
    else \
        coopMatLoadTensorNV(mb, b, bbase, sliceTensorLayoutNV(lb, k0, BK, n0, BN)); \
    acc = coopMatMulAdd(ma, mb, acc); \
}

// The K loop over [kbeg, kend) with layouts la / lb: UNROLL tiles a trip, then the rest.
#define CM2_K_LOOP(acc, la, lb, abase, bbase, m0, n0, kbeg, kend) { \
    uint kk = (kbeg); \
    for (; kk + UNROLL * BK <= (kend); kk += UNROLL * BK) { \
        [[unroll]] for (uint u = 0u; u < UNROLL; ++u) \
            CM2_TILE(acc, la, lb, abase, bbase, m0, n0, kk + u * BK) \
    } \
    for (; kk < (kend); kk += BK) \
        CM2_TILE(acc, la, lb, abase, bbase, m0, n0, kk) \
}

void main() {
    uint n0 = gl_WorkGroupID.x * BN, m0 = gl_WorkGroupID.y * BM;
    tensorViewNV<2, false, 1, 0> transposed = createTensorViewNV(2, false, 1, 0);
    for (uint zs = gl_WorkGroupID.z; zs < pc.batch * pc.S; zs += gl_NumWorkGroups.z) {
        uint split = zs / pc.batch, z = zs - split * pc.batch;
        uint kbeg = (split * pc.KS) & ~(BK - 1u);  // (a whole number of K tiles: BK is a power of two)
        uint kend = min(pc.K, kbeg + pc.KS);
        uint abase = 0u, bbase = 0u, rem = z;
        for (int d = int(pc.brank) - 1; d >= 0; --d) {
            uint s = pc.bshape[d], qq = rem / s, co = rem - qq * s;
            rem = qq;
            abase += co * pc.sab[d];
            bbase += co * pc.sbb[d];
        }
        // The host guarantees 16-byte rows and batch offsets (multiples of 8 halves); saying
        // so lets the driver vectorize the loads.
        abase &= ~7u;
        bbase &= ~7u;
        uint lda = pc.lda & ~7u, ldb = pc.ldb & ~7u;
        // The stored layouts: A is M x K (K x M when transposed), B is K x N (N x K).
        uint ar = TRANS_A ? kend : pc.M, ac = TRANS_A ? pc.M : kend;
        uint br = TRANS_B ? pc.N : kend, bc = TRANS_B ? kend : pc.N;

        ACC acc = ACC(0.0);
        if (ALIGNED) {
            tensorLayoutNV<2> la = createTensorLayoutNV(2);
            tensorLayoutNV<2> lb = createTensorLayoutNV(2);
            la = setTensorLayoutDimensionNV(la, ar, ac);
            lb = setTensorLayoutDimensionNV(lb, br, bc);
            la = setTensorLayoutStrideNV(la, lda, 1);
            lb = setTensorLayoutStrideNV(lb, ldb, 1);
            CM2_K_LOOP(acc, la, lb, abase, bbase, m0, n0, kbeg, kend)
        } else {
            tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> la =
                createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
            tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lb =
                createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
            la = setTensorLayoutDimensionNV(la, ar, ac);
            lb = setTensorLayoutDimensionNV(lb, br, bc);
            la = setTensorLayoutStrideNV(la, lda, 1);
            lb = setTensorLayoutStrideNV(lb, ldb, 1);
            CM2_K_LOOP(acc, la, lb, abase, bbase, m0, n0, kbeg, kend)
        }
        if (pc.alpha != 1.0)
            acc = acc * pc.alpha;

        // The stores drop what lies outside M x N (clamped layouts).
        tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lo =
            createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
        lo = setTensorLayoutDimensionNV(lo, pc.M, pc.N);
        lo = setTensorLayoutStrideNV(lo, pc.N, 1);
        if (pc.S > 1u) {
            coopMatStoreTensorNV(acc, part, ((split * pc.batch + z) * pc.M) * pc.N,
                                 sliceTensorLayoutNV(lo, m0, BM, n0, BN));
        } else {
            coopmat<float16_t, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator> h =
                coopmat<float16_t, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>(acc);
            coopMatStoreTensorNV(h, o, z * pc.M * pc.N, sliceTensorLayoutNV(lo, m0, BM, n0, BN));
        }
    }
}
