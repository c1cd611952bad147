#version 450
// Pad (constant, reflect, edge, wrap), which also serves Tile (wrap with no crop).
// Per dimension d the host gives (all non-negative):
//   out_shape, in_stride (elements), pad_begin (>= 0), lo (first kept input index after a
//   negative pad cropped the front), len (input length kept after cropping).
// Output coordinate c maps to j = c - pad_begin in the cropped input; outside [0, len) the
// mode decides: constant writes the value, reflect mirrors (period 2(len-1), no edge
// repeat), edge clamps, wrap repeats (period len). Elements move as ESIZE-byte words; the
// constant is given as raw bits (value_lo, value_hi).
#extension GL_GOOGLE_include_directive : require
#include "include/vkml_elem.glsl"
#include "include/vkml_index.glsl"

layout(local_size_x = 256, local_size_x_id = 0) in;

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
layout(std430, binding = 2) readonly buffer BM {
    uint out_shape[VKML_MAX_RANK];
    uint in_stride[VKML_MAX_RANK];
    uint pad_begin[VKML_MAX_RANK];
    uint lo[VKML_MAX_RANK];
    uint len[VKML_MAX_RANK];
} m;

ELEM constant_value() {
#if ESIZE == 8
    return uvec2(pc.value_lo, pc.value_hi);
#else
    return ELEM(pc.value_lo);
#endif
}

void main() {
    VKML_FOR_EACH(e, pc.n) {
        uint r = e;
        uint src = 0u;
        bool inside = true;
        for (int d = int(pc.rank) - 1; d >= 0; --d) {
            uint s = m.out_shape[d];
            uint q = r / s;
            int j = int(r - q * s) - int(m.pad_begin[d]);
            r = q;
            int l = int(m.len[d]);
            if (j < 0 || j >= l) {
                if (pc.mode == MODE_CONSTANT) {
                    inside = false;
                    break;
                } else if (pc.mode == MODE_EDGE) {
                    j = clamp(j, 0, l - 1);
                } else if (pc.mode == MODE_WRAP) {
                    j %= l;
                    if (j < 0) j += l;
                } else {  // reflect
                    int p = 2 * (l - 1);
                    if (p == 0) {
                        j = 0;
                    } else {
                        j %= p;
                        if (j < 0) j += p;
                        if (j >= l) j = p - j;
                    }
                }
            }
            src += (m.lo[d] + uint(j)) * m.in_stride[d];
        }
        if (inside) {
            o[e] = x[src];
        } else {
            o[e] = constant_value();
        }
    }
}
