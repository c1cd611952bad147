#version 450
// Strided copy over an index space of rank <= 8:
//     o[obase + sum_d c_d * os_d] = x[ibase + sum_d c_d * is_d]
// The host chooses shape and strides (negative for reversed slices, 0 for broadcast), so one
// shader serves Transpose, Slice, Expand, Concat, Split, DepthToSpace... Elements are moved
// as ESIZE-byte words (include/vkml_elem.glsl; the host widens runs contiguous on both sides
// to 16-byte words). Offsets use wrapping uint arithmetic: a negative stride is its two's
// complement and the final offset lands in [0, 2^32). Each invocation moves UNROLL
// elements, loads before stores, to keep several memory requests in flight.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "include/vkml_elem.glsl"
#include "include/vkml_index.glsl"

layout(local_size_x = 256, local_size_x_id = 0) in;

#define UNROLL 4

layout(push_constant) uniform Push {
    uint n;
    uint rank;
    uint ibase;
    uint obase;
    uint shape[VKML_MAX_RANK];
    uint istride[VKML_MAX_RANK];
    uint ostride[VKML_MAX_RANK];
} pc;

layout(std430, binding = 0) readonly buffer BX { ELEM x[]; };
layout(std430, binding = 1) writeonly buffer BO { ELEM o[]; };

void offsets(uint i, out uint io, out uint oo) {
    uint r = i;
    io = pc.ibase;
    oo = pc.obase;
    for (int d = int(pc.rank) - 1; d > 0; --d) {
        uint s = pc.shape[d];
        uint q = r / s;
        uint c = r - q * s;
        r = q;
        io += c * pc.istride[d];
        oo += c * pc.ostride[d];
    }
    io += r * pc.istride[0];
    oo += r * pc.ostride[0];
}

void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint base = gl_GlobalInvocationID.x; base < pc.n; base += UNROLL * stride) {
        ELEM32 v[UNROLL];
        uint oo[UNROLL];
        [[unroll]] for (uint k = 0u; k < UNROLL; ++k) {
            uint e = base + k * stride;
            if (e < pc.n) {
                uint io;
                offsets(e, io, oo[k]);
                v[k] = ELEM32(x[io]);
            }
        }
        [[unroll]] for (uint k = 0u; k < UNROLL; ++k) {
            if (base + k * stride < pc.n) o[oo[k]] = ELEM(v[k]);
        }
    }
}
