#version 450
// MatMul / Gemm of bfloat16 and float64 (kernels/matmul.py routes only these dtypes here; the
// float32/float16 GEMMs are matmul.comp, matmul_small.comp, matmul_coop.comp): one invocation
// per output, its K products summed in order (fma), then alpha, beta * C as the CPU operator
// (y * alpha + beta * C, each step rounded separately: `precise`). Same push block as
// matmul.comp (split K and the epilogue fields unused); bindings A, B, C, O.
// Local type codes (vkml_types.glsl stops at 11):
//   TX = 12  float64: double loads, double accumulation (shaderFloat64);
//   TX = 13  bfloat16: stored as its 16 bits, widened exactly to float32, float32 accumulation,
//            the result rounded to nearest even on the bits (include/vkml_round16.glsl).
#extension GL_GOOGLE_include_directive : require
#define VKML_ST_12 double
#define VKML_CT_12 double
#include "include/vkml_gemm_types.glsl"  // (code 13)
#include "include/vkml_round16.glsl"

#if TX == 13
#define ACC float
#define LOAD(v) uintBitsToFloat(uint(v) << 16)
#define STORE(i, v) o[i] = uint16_t(bf16_bits(v))
#else
#define ACC double
#define LOAD(v) (v)
#define STORE(i, v) o[i] = (v)
#endif

layout(local_size_x = 256, local_size_x_id = 0) in;
layout(constant_id = 1) const bool TRANS_A = false; // A stored K x M (m contiguous)
layout(constant_id = 2) const bool TRANS_B = false; // B stored N x K (k contiguous)
layout(constant_id = 3) const bool HAS_C = false;

layout(std430, binding = 0) readonly buffer BA { SX a[]; };
layout(std430, binding = 1) readonly buffer BB { SX b[]; };
layout(std430, binding = 2) readonly buffer BC { SX c[]; };
layout(std430, binding = 3) writeonly buffer BO { SX o[]; };

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
    uint EPI;               // (unused)
    float ELO, EHI;
} pc;

void main() {
    uint total = pc.batch * pc.M * pc.N;
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < total; i += stride) {
        uint n = i % pc.N;
        uint t = i / pc.N;
        uint m = t % pc.M;
        uint r = t / pc.M, abase = 0u, bbase = 0u;
        for (int d = int(pc.brank) - 1; d >= 0; --d) {
            uint s = pc.bshape[d], q = r / s, co = r - q * s;
            r = q;
            abase += co * pc.sab[d];
            bbase += co * pc.sbb[d];
        }
        ACC acc = ACC(0.0);
        for (uint k = 0u; k < pc.K; ++k) {
            ACC av = LOAD(TRANS_A ? a[abase + k * pc.lda + m] : a[abase + m * pc.lda + k]);
            ACC bv = LOAD(TRANS_B ? b[bbase + n * pc.ldb + k] : b[bbase + k * pc.ldb + n]);
            acc = fma(av, bv, acc);
        }
        precise ACC v = acc;
        if (pc.alpha != 1.0) v = v * ACC(pc.alpha);
        if (HAS_C) {
            precise ACC cv = LOAD(c[m * pc.scm + n * pc.scn]);
            if (pc.beta != 1.0) cv = cv * ACC(pc.beta);
            v = v + cv;
        }
        STORE(i, v);
    }
}
