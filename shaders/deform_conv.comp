#version 450
// DeformConv (ONNX opsets 19, 22; vkml/kernels/deform_conv.py): a direct kernel, one
// invocation per output element y[n, m, o...] summing over its group's input channels and
// the kernel taps. RANK (1 to 3 spatial axes) and the storage type TX (f32 or f16: X, W,
// offset, B, mask and Y alike) are compile-time choices.
//
// Each column value (a tap's bilinear sample of one channel, times the mask) repeats vkml's
// CPU operator (vkml/ops/conv.py, _deform_columns) step by step: the sampling coordinate is
// computed in double (NumPy's int64 grid plus the float32 offset gives float64), floor and
// fraction in double; a corner's weight starts at 1.0 (float32) and each axis multiplies it
// in double by frac or 1 - frac, rounded back to float32; a corner outside the input weighs
// 0; the corners' products with X sum in float32 in itertools.product order, then times the
// mask. Those are bit for bit the CPU operator's columns (without fma: `precise`). The final
// sum over channels x taps is a float32 dot product of W and the columns, where the CPU uses
// BLAS (its order and fma are its own): results agree to float32 rounding, not bitwise.
// Loops: taps x (channels of the group), bounded by the host (lavapipe ends an invocation's
// loops after 65535 iterations in all). Offsets are uint32 (tensors below 2^31 elements).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "include/vkml_types.glsl"
#include "include/vkml_round16.glsl"

layout(local_size_x = 256, local_size_x_id = 0) in;

layout(push_constant) uniform Push {
    uint n;         // output elements, N * M * O
    uint chans;     // C
    uint filters;   // M
    uint groups;    // group
    uint ogroups;   // offset_group
    uint npos;      // O = prod(out)
    uint taps;      // prod(kernel)
    uint flags;     // bit 0: mask given; bit 1: bias given; bit 2: bias has one element
    uint dims[3];   // input spatial sizes (unused ones 1)
    uint outs[3];   // output spatial sizes
    uint kern[3];   // kernel sizes
    uint stride[3];
    int pad[3];     // pads at the beginning
    uint dil[3];
} pc;

layout(std430, binding = 0) readonly buffer BX { SX x[]; };
layout(std430, binding = 1) readonly buffer BW { SX w[]; };
layout(std430, binding = 2) readonly buffer BF { SX off[]; };
layout(std430, binding = 3) readonly buffer BB { SX bias[]; };
layout(std430, binding = 4) readonly buffer BM { SX msk[]; };
layout(std430, binding = 5) writeonly buffer BO { SO o[]; };

#define CORNERS (1 << RANK)

void main() {
    for (uint e = gl_GlobalInvocationID.x; e < pc.n; e += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
        uint pos = e % pc.npos;
        uint q = e / pc.npos;
        uint m = q % pc.filters;
        uint b = q / pc.filters;
        uint cg = pc.chans / pc.groups;
        uint mg = pc.filters / pc.groups;
        uint cog = pc.chans / pc.ogroups;
        uint grp = m / mg;
        uint c0 = grp * cg;
        uint plane = 1u;
        int oc[RANK];
        uint rest = pos;
        [[unroll]] for (int k = RANK - 1; k >= 0; --k) {
            oc[k] = int(rest % pc.outs[k]);
            rest /= pc.outs[k];
        }
        [[unroll]] for (int k = 0; k < RANK; ++k) plane *= pc.dims[k];
        bool has_mask = (pc.flags & 1u) != 0u;

        float acc = 0.0;
        for (uint t = 0u; t < pc.taps; ++t) {
            int tc[RANK];
            uint tr = t;
            [[unroll]] for (int k = RANK - 1; k >= 0; --k) {
                tc[k] = int(tr % pc.kern[k]);
                tr /= pc.kern[k];
            }
            uint h = 0xFFFFFFFFu;  // the offset group whose corners are loaded
            uint idx[CORNERS];
            float wt[CORNERS];
            float mk = 1.0;
            for (uint c = c0; c < c0 + cg; ++c) {
                uint hc = c / cog;
                if (hc != h) {
                    h = hc;
                    uint head = (b * pc.ogroups + h) * pc.taps + t;
                    double low[RANK];
                    double frac[RANK];
                    [[unroll]] for (int k = 0; k < RANK; ++k) {
                        int base = oc[k] * int(pc.stride[k]) - pc.pad[k] + tc[k] * int(pc.dil[k]);
                        float f = float(off[(head * uint(RANK) + uint(k)) * pc.npos + pos]);
                        precise double coord = double(base) + double(f);
                        low[k] = floor(coord);
                        precise double fr = coord - low[k];
                        frac[k] = fr;
                    }
                    [[unroll]] for (int corner = 0; corner < CORNERS; ++corner) {
                        float weight = 1.0;
                        bool valid = true;
                        uint index = 0u;
                        [[unroll]] for (int k = 0; k < RANK; ++k) {
                            bool hi = ((corner >> (RANK - 1 - k)) & 1) != 0;
                            precise double g = hi ? frac[k] : 1.0LF - frac[k];
                            precise double prod = double(weight) * g;
                            weight = float(prod);
                            precise double p = low[k] + (hi ? 1.0LF : 0.0LF);
                            double fd = double(pc.dims[k]);
                            valid = valid && p >= 0.0LF && p < fd;
                            double cl = p >= 0.0LF ? p : 0.0LF;  // NaN: 0
                            precise double top = fd - 1.0LF;
                            cl = cl <= top ? cl : top;
                            index = index * pc.dims[k] + uint(cl);
                        }
                        idx[corner] = index;
                        wt[corner] = valid ? weight : 0.0;
                    }
                    if (has_mask) mk = float(msk[head * pc.npos + pos]);
                }
                uint xb = (b * pc.chans + c) * plane;
                float col = 0.0;
                [[unroll]] for (int corner = 0; corner < CORNERS; ++corner) {
                    precise float term = float(x[xb + idx[corner]]) * wt[corner];
                    precise float s = col + term;
                    col = s;
                }
                if (has_mask) {
                    precise float cm = col * mk;
                    col = cm;
                }
                precise float prod = float(w[(m * cg + (c - c0)) * pc.taps + t]) * col;
                precise float sum = acc + prod;
                acc = sum;
            }
        }
        if ((pc.flags & 2u) != 0u) {
            precise float yb = acc + float(bias[(pc.flags & 4u) != 0u ? 0u : m]);
            acc = yb;
        }
#if TX == 2
        o[e] = float16_t(unpackHalf2x16(f16_bits(acc)).x);
#else
        o[e] = SO(acc);
#endif
    }
}
