#version 450
// Direct convolution for one input channel per group (depthwise, and depthwise with a
// channel multiplier): output channel m reads input channel m / mult only, so a GEMM would
// have K = taps; instead each invocation computes output elements by walking the kernel
// window. 1-3 spatial dims (missing ones are 1), fp32 accumulation. The epilogue
// (include/vkml_epilogue.glsl: residual Add, Relu) follows the bias, as in conv.comp.
//
// PLANE_MEAN (the conv_dw_mean_* variants): also the mean of each output plane (a
// GlobalAveragePool after the convolution: a squeeze-excitation block's, kernels/conv.py
// fusable_mean) into mean[image * M + m]. A workgroup per plane computes the plane's outputs
// into shared memory, one per invocation at a time; then its first RW invocations add them as a
// reduce_mean_wg_* workgroup of RW invocations would read and add them (shaders/reduce.comp,
// WG_MODE 1: four at a time, then VKML_WG_REDUCE_FIRST of include/vkml_reduce.glsl, its
// reduction over the first RW invocations), so the mean has the same bits as the separate
// GlobalAveragePool.
#extension GL_GOOGLE_include_directive : require
#include "include/vkml_types.glsl"
#include "include/vkml_index.glsl"
#ifdef PLANE_MEAN
#include "include/vkml_reduce.glsl"
#endif

layout(local_size_x = 256, local_size_x_id = 0) in;
layout(constant_id = 1) const bool HAS_BIAS = false;

layout(std430, binding = 0) readonly buffer BX { SX x[]; };
layout(std430, binding = 1) readonly buffer BW { SX w[]; };
layout(std430, binding = 2) readonly buffer BBias { SO bias[]; };
layout(std430, binding = 3) writeonly buffer BO { SO o[]; };
layout(std430, binding = 4) readonly buffer BR { SO res[]; };
#ifdef PLANE_MEAN
layout(std430, binding = 5) writeonly buffer BM { SO mean[]; };
#endif

layout(push_constant) uniform Push {
    uint total;             // N * M * P
    uint M, mult, cg, P;    // output channels, channel multiplier (M / C), (cg: conv_small.comp's
                            // input channels per group; 1 here: the push block is shared), positions
    uint OD, OH, OW;
    int D, H, W;
    int KD, KH, KW;
    int sz, sy, sx;
    int pz, py, px;
    int dz, dy, dx;         // dilations
    uint EPI;               // epilogue flags (vkml_epilogue.glsl)
    float ELO, EHI;         // Clip's bounds (EPI & 4), an activation's alpha, beta
} pc;

#include "include/vkml_epilogue.glsl"

// Output element i: computed, stored, and returned as stored (what a later reader gets).
float dw_out(uint i) {
    int hw = pc.H * pc.W;
    uint S = uint(pc.D * hw);
    uint C = pc.M / pc.mult;
    uint taps = uint(pc.KD * pc.KH * pc.KW);
    uint p = i % pc.P, nm = i / pc.P;
    uint m = nm % pc.M, img = nm / pc.M;
    uint ox = p % pc.OW, t = p / pc.OW;
    uint oy = t % pc.OH, oz = t / pc.OH;
    int bz = int(oz) * pc.sz - pc.pz, by = int(oy) * pc.sy - pc.py, bx = int(ox) * pc.sx - pc.px;
    uint xbase = (img * C + m / pc.mult) * S;
    uint wrow = m * taps;
    float acc = 0.0;
    for (int kz = 0; kz < pc.KD; ++kz) {
        int iz = bz + kz * pc.dz;
        if (iz < 0 || iz >= pc.D) continue;
        for (int ky = 0; ky < pc.KH; ++ky) {
            int iy = by + ky * pc.dy;
            if (iy < 0 || iy >= pc.H) continue;
            uint xrow = xbase + uint(iz * hw + iy * pc.W);
            uint wk = wrow + uint((kz * pc.KH + ky) * pc.KW);
            for (int kx = 0; kx < pc.KW; ++kx) {
                int ix = bx + kx * pc.dx;
                if (ix < 0 || ix >= pc.W) continue;
                acc = fma(float(x[xrow + uint(ix)]), float(w[wk + uint(kx)]), acc);
            }
        }
    }
    if (HAS_BIAS) acc += float(bias[m]);
    float v = float(SO(epilogue(acc, i, pc.EPI)));  // (exact in SO: stored as is)
    o[i] = SO(v);
    return v;
}

#ifndef PLANE_MEAN
void main() {
    VKML_FOR_EACH(i, pc.total) dw_out(i);
}
#else
layout(constant_id = 2) const uint RW = 64;  // the GlobalAveragePool's workgroup (kernels/reduce.py output_wg_size)
layout(constant_id = 3) const uint MAXP = 64;  // outputs per plane (pc.P; shared memory: 4 * (MAXP + workgroup) bytes)
shared float sh_v[MAXP];
VKML_WG_REDUCE_FIRST(rw_sum, float, VKML_OP_ADD, subgroupAdd, RW)

void main() {
    uint lid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
    uint planes = pc.total / pc.P;
    for (uint nm = gl_WorkGroupID.x; nm < planes; nm += gl_NumWorkGroups.x) {
        uint base = nm * pc.P;
        for (uint i = lid; i < pc.P; i += wg) sh_v[i] = dw_out(base + i);
        barrier();
        float a = 0.0;
        if (lid < RW) {
            uint r = lid;
            for (; r + 3u * RW < pc.P; r += 4u * RW)
                a = a + ((sh_v[r] + sh_v[r + RW]) + (sh_v[r + 2u * RW] + sh_v[r + 3u * RW]));
            for (; r < pc.P; r += RW) a = a + sh_v[r];
        }
        a = rw_sum(a);
        if (lid == 0u) mean[nm] = SO(a / float(pc.P));
    }
}
#endif
