#version 450
// Small GEMMs (kernels/matmul.py: at most SMALL_MAX_MACS multiply-adds, K at least SMALL_MIN_K;
// mnist-12's 1x256 @ 256x10 took 7.8 us tiled plus 3.6 us of split-K reduction on the H100):
// too few outputs to fill the GPU through tiles, so LANES invocations share each output's K
// (lane j takes k = j, j + LANES, ...) and add their sums in shared memory, then alpha, beta * C
// and the epilogue as in matmul.comp's store. Same push block and bindings as matmul.comp
// (the split-K partials binding is unused). fp32 accumulation.
#extension GL_GOOGLE_include_directive : require
#include "include/vkml_types.glsl"

#define LANES 32u
#define PER_GROUP 8u  // outputs per workgroup of 256 invocations
layout(local_size_x = 256, local_size_x_id = 0) in;
layout(constant_id = 1) const bool TRANS_A = false; // A stored K x M (m contiguous)
layout(constant_id = 2) const bool TRANS_B = false; // B stored N x K (k contiguous)
layout(constant_id = 3) const bool HAS_C = false;
layout(constant_id = 4) const uint KSCALE = 0;  // B's rows scaled as matmul.comp's KSCALE
#if TX == 2
#include "include/vkml_round16.glsl"
#define XROUND(v) f16_round(v)  /* (on the bits: an H200 kept float(float16_t(x)) unrounded) */
#else
#define XROUND(v) float(SX(v))
#endif

layout(std430, binding = 0) readonly buffer BA { SX a[]; };
layout(std430, binding = 1) readonly buffer BB { SX b[]; };
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

#define VKML_EPILOGUE_GEMM
#include "include/vkml_epilogue.glsl"

shared float sums[256];

void main() {
    uint lid = gl_LocalInvocationID.x;
    uint lane = lid % LANES, slot = lid / LANES;
    uint total = pc.batch * pc.M * pc.N;
    // Every invocation runs every round (the barriers below need the whole workgroup).
    for (uint base = gl_WorkGroupID.x * PER_GROUP; base < total; base += gl_NumWorkGroups.x * PER_GROUP) {
        uint i = base + slot;
        uint n = 0u, m = 0u;
        float acc = 0.0;
        if (i < total) {
            n = i % pc.N;
            uint t = i / pc.N;
            m = t % pc.M;
            uint r = t / pc.M, abase = 0u, bbase = 0u;
            uint ksb = KSCALE == 1u ? r * pc.K : 0u;
            for (int d = int(pc.brank) - 1; d >= 0; --d) {
                uint s = pc.bshape[d], q = r / s, co = r - q * s;
                r = q;
                abase += co * pc.sab[d];
                bbase += co * pc.sbb[d];
            }
            for (uint k = lane; k < pc.K; k += LANES) {
                float av = float(TRANS_A ? a[abase + k * pc.lda + m] : a[abase + m * pc.lda + k]);
                float bv = float(TRANS_B ? b[bbase + n * pc.ldb + k] : b[bbase + k * pc.ldb + n]);
                if (KSCALE != 0u) bv = XROUND(bv * float(ks[ksb + k]));
                acc = fma(av, bv, acc);
            }
        }
        sums[lid] = acc;
        barrier();
        for (uint h = LANES / 2u; h > 0u; h >>= 1) {
            if (lane < h) sums[lid] += sums[lid + h];
            barrier();
        }
        if (lane == 0u && i < total) {
            float v = sums[lid] * pc.alpha;
            if (HAS_C) v += pc.beta * float(c[m * pc.scm + n * pc.scn]);
            o[i] = SO(epilogue(v, i, pc.EPI));
        }
        barrier();  // (sums[] is reused by the next round)
    }
}
