#version 450
// Pad (constant, reflect, edge, wrap), which also serves Tile (wrap with no crop).
// Per dimension d the host gives (all non-negative):
//   out_shape, in_stride (elements), pad_begin, lo (first kept input index after a
//   negative pad cropped the front), len (input length kept after cropping).
// Output coordinate c maps to j = c - pad_begin in the cropped input; outside [0, len) the
// mode decides: constant writes the value, reflect mirrors (period 2(len-1), no edge
// repeat), edge clamps, wrap repeats (period len). Elements move as ESIZE-byte words; the
// constant is given as raw bits (value_lo, value_hi). Each invocation moves UNROLL
// elements, loads before stores, to keep several memory requests in flight.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "include/vkml_elem.glsl"
#include "include/vkml_index.glsl"

layout(local_size_x = 256, local_size_x_id = 0) in;

#define UNROLL 4
#define MODE_CONSTANT 0u
#define MODE_REFLECT 1u
#define MODE_EDGE 2u
#define MODE_WRAP 3u

layout(push_constant) uniform Push {
    uint n;
    uint rank;
    uint mode;
    uint value_lo;
    uint value_hi;
} pc;

layout(std430, binding = 0) readonly buffer BX { ELEM x[]; };
layout(std430, binding = 1) writeonly buffer BO { ELEM o[]; };
// Per-dimension parameters: out_shape, in_stride, pad_begin, lo, len (VKML_MAX_RANK each).
// Copied to shared memory once per workgroup: reading them from the buffer for every
// element and dimension made the kernel bound by those loads.
#define META (5 * VKML_MAX_RANK)
layout(std430, binding = 2) readonly buffer BM { uint meta[META]; };
shared uint sm[META];
#define OUT_SHAPE(d) sm[(d)]
#define IN_STRIDE(d) sm[VKML_MAX_RANK + (d)]
#define PAD_BEGIN(d) sm[2 * VKML_MAX_RANK + (d)]
#define LO(d) sm[3 * VKML_MAX_RANK + (d)]
#define LEN(d) sm[4 * VKML_MAX_RANK + (d)]

// j modulo p (p > 0) for any sign of j. (GLSL leaves % undefined for negative operands.)
uint pos_mod(int j, uint p) {
    return j >= 0 ? uint(j) % p : (p - 1u) - (uint(-(j + 1)) % p);
}

// Source offset of output element e, or 0xFFFFFFFF for the constant.
uint source(uint e) {
    uint r = e;
    uint src = 0u;
    for (int d = int(pc.rank) - 1; d >= 0; --d) {
        uint s = OUT_SHAPE(d);
        uint q = r / s;
        int j = int(r - q * s) - int(PAD_BEGIN(d));
        r = q;
        uint l = LEN(d);
        uint k;
        if (j >= 0 && uint(j) < l) {
            k = uint(j);
        } else if (pc.mode == MODE_CONSTANT) {
            return 0xFFFFFFFFu;
        } else if (pc.mode == MODE_EDGE) {
            k = j < 0 ? 0u : l - 1u;
        } else if (pc.mode == MODE_WRAP) {
            k = pos_mod(j, l);
        } else {  // reflect
            uint p = 2u * (l - 1u);
            if (p == 0u) {
                k = 0u;
            } else {
                k = pos_mod(j, p);
                if (k >= l) k = p - k;
            }
        }
        src += (LO(d) + k) * IN_STRIDE(d);
    }
    return src;
}

ELEM32 constant_value() {
#if ESIZE == 8
    return uvec2(pc.value_lo, pc.value_hi);
#else
    return pc.value_lo;  // the store keeps the low ESIZE bytes
#endif
}

void main() {
    for (uint i = gl_LocalInvocationID.x; i < META; i += gl_WorkGroupSize.x) sm[i] = meta[i];
    barrier();
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint base = gl_GlobalInvocationID.x; base < pc.n; base += UNROLL * stride) {
        ELEM32 v[UNROLL];
        [[unroll]] for (uint k = 0u; k < UNROLL; ++k) {
            uint e = base + k * stride;
            if (e < pc.n) {
                uint src = source(e);
                if (src == 0xFFFFFFFFu) {
                    v[k] = constant_value();
                } else {
                    v[k] = ELEM32(x[src]);
                }
            }
        }
        [[unroll]] for (uint k = 0u; k < UNROLL; ++k) {
            uint e = base + k * stride;
            if (e < pc.n) o[e] = ELEM(v[k]);
        }
    }
}
