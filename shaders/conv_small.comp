#version 450
// Direct convolution for small convolutions (kernels/conv.py's "direct" route): too few
// outputs to fill the GPU through an implicit GEMM's tiles, each with a K (input channels of
// its group x taps) long enough that one invocation walking it alone waits on one load after
// another (mnist-12's 5x5 conv on 14x14: 3136 outputs, K 200). So LANES invocations share each
// output: lane j takes k = j, j + LANES, ... (channels outer, taps inner, as the GEMM orders
// k), then the lanes' sums are added in shared memory. fp32 accumulation; 1-3 spatial dims
// (missing ones are 1); the epilogue (include/vkml_epilogue.glsl) follows the bias.
// POOL = k (2 or 3): a k x k MaxPool with stride k follows (compile/epilogue.py fuses it;
// 2-D, no residual): the outputs, their count (total, P) and OH/OW are the pooled ones, and
// each output takes the max of its window's k * k convolution results (NaN wins, as
// np.maximum), each with its bias and epilogue; the lanes share the window's weight loads.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "include/vkml_types.glsl"

#define LANES 32u
#define PER_GROUP 8u  // outputs per workgroup of 256 invocations
layout(local_size_x = 256) in;
layout(constant_id = 1) const bool HAS_BIAS = false;
layout(constant_id = 2) const uint POOL = 1;  // 1, or k: a fused k x k / stride k max pool
const uint WIN = POOL * POOL;

layout(std430, binding = 0) readonly buffer BX { SX x[]; };
layout(std430, binding = 1) readonly buffer BW { SX w[]; };
layout(std430, binding = 2) readonly buffer BBias { SO bias[]; };
layout(std430, binding = 3) writeonly buffer BO { SO o[]; };
layout(std430, binding = 4) readonly buffer BR { SO res[]; };

layout(push_constant) uniform Push {
    uint total;             // N * M * P
    uint M, mg, cg, P;      // output channels; per group: output channels, input channels; positions
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

shared float part[256 * WIN];

bool nan_(float v) { return (floatBitsToUint(v) & 0x7FFFFFFFu) > 0x7F800000u; }

void main() {
    uint lane = gl_LocalInvocationID.x % LANES;
    uint slot = gl_LocalInvocationID.x / LANES;
    int hw = pc.H * pc.W;
    uint S = uint(pc.D * hw);
    uint C = (pc.M / pc.mg) * pc.cg;
    uint khw = uint(pc.KH * pc.KW);
    uint taps = uint(pc.KD) * khw;
    uint K = pc.cg * taps;
    // Every invocation runs every round (the barriers below need the whole workgroup).
    for (uint base = gl_WorkGroupID.x * PER_GROUP; base < pc.total; base += gl_NumWorkGroups.x * PER_GROUP) {
        uint i = base + slot;
        float acc[WIN];
        [[unroll]] for (uint q = 0u; q < WIN; ++q) acc[q] = 0.0;
        if (i < pc.total) {
            uint p = i % pc.P, nm = i / pc.P;
            uint m = nm % pc.M, img = nm / pc.M;
            uint ox = p % pc.OW, t = p / pc.OW;
            uint oy = t % pc.OH, oz = t / pc.OH;
            int bz = int(oz) * pc.sz - pc.pz;
            int byq[WIN], bxq[WIN];  // each window position's convolution output, its corner
            [[unroll]] for (uint q = 0u; q < WIN; ++q) {
                byq[q] = int(oy * POOL + q / POOL) * pc.sy - pc.py;
                bxq[q] = int(ox * POOL + q % POOL) * pc.sx - pc.px;
            }
            uint xbase = (img * C + (m / pc.mg) * pc.cg) * S;
            uint wbase = m * K;
            for (uint k = lane; k < K; k += LANES) {
                uint ci = k / taps, tap = k - ci * taps;
                uint kz = tap / khw, r = tap - kz * khw;
                uint ky = r / uint(pc.KW), kx = r - ky * uint(pc.KW);
                int iz = bz + int(kz) * pc.dz;
                if (iz < 0 || iz >= pc.D) continue;
                float wk = float(w[wbase + k]);
                [[unroll]] for (uint q = 0u; q < WIN; ++q) {
                    int iy = byq[q] + int(ky) * pc.dy, ix = bxq[q] + int(kx) * pc.dx;
                    if (iy < 0 || iy >= pc.H || ix < 0 || ix >= pc.W) continue;
                    acc[q] = fma(float(x[xbase + ci * S + uint(iz * hw + iy * pc.W + ix)]), wk, acc[q]);
                }
            }
        }
        [[unroll]] for (uint q = 0u; q < WIN; ++q) part[q * 256u + gl_LocalInvocationID.x] = acc[q];
        barrier();
        for (uint half_ = LANES / 2u; half_ > 0u; half_ >>= 1) {
            if (lane < half_) {
                [[unroll]] for (uint q = 0u; q < WIN; ++q)
                    part[q * 256u + gl_LocalInvocationID.x] += part[q * 256u + gl_LocalInvocationID.x + half_];
            }
            barrier();
        }
        if (lane == 0u && i < pc.total) {
            float best = 0.0;
            [[unroll]] for (uint q = 0u; q < WIN; ++q) {
                float v = part[q * 256u + gl_LocalInvocationID.x];
                if (HAS_BIAS) v += float(bias[(i / pc.P) % pc.M]);
                v = epilogue(v, i, pc.EPI);
                if (POOL > 1u) v = float(SO(v));  // the pool reads the convolution's rounded output
                if (q == 0u || nan_(v) || v > best) best = nan_(best) ? best : v;
            }
            o[i] = SO(best);
        }
        barrier();  // (part[] is reused by the next round)
    }
}
