#version 450
// Gather along one axis, with x viewed as (outer, axis_len, inner) and the indices flattened
// to (count): o[q, k, i] = x[q, idx[k], i] for o of shape (outer, count, inner).
// Negative indices count from the end (ONNX); an index still outside [0, axis_len) yields
// zeros and is reported through the fault word (include/vkml_fault.glsl), which the run turns
// into the CPU operator's error. Elements move as ESIZE-byte
// words (16 when the host found rows that allow it); indices are int32 (IDX=32) or int64
// (IDX=64, read as two 32-bit halves, so no shaderInt64 is needed: a value beyond the int32
// range is out of bounds anyway). Each invocation moves UNROLL elements, loads first.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "include/vkml_elem.glsl"
#include "include/vkml_index.glsl"
#define FAULT_BINDING 3
#include "include/vkml_fault.glsl"

layout(local_size_x = 256, local_size_x_id = 0) in;

#define UNROLL 4

layout(push_constant) uniform Push {
    uint n;
    uint inner;
    uint count;
    uint axis_len;
    uint site;         // this node's site in the fault buffer
} pc;

layout(std430, binding = 0) readonly buffer BX { ELEM x[]; };
#if IDX == 32
layout(std430, binding = 1) readonly buffer BI { int idx[]; };
#else
layout(std430, binding = 1) readonly buffer BI { ivec2 idx[]; };  // (low, high) halves
#endif
layout(std430, binding = 2) writeonly buffer BO { ELEM o[]; };

// Source offset of output element e, or 0xFFFFFFFF when its index is out of range.
uint source(uint e) {
    uint q = e / pc.inner;
    uint i = e - q * pc.inner;
    uint outer = q / pc.count;
    uint k = q - outer * pc.count;
#if IDX == 32
    int j = idx[k];
    int hi = j >> 31;
#else
    ivec2 w = idx[k];
    int j = w.x;
    int hi = w.y;
#endif
    bool ok = hi == (j >> 31);  // (an int64 that fits in an int32)
    int given = j;
    if (j < 0) j += int(pc.axis_len);
    if (!ok || j < 0 || uint(j) >= pc.axis_len) {
        vkml_fault(pc.site, given, hi);
        return 0xFFFFFFFFu;
    }
    return (outer * pc.axis_len + uint(j)) * pc.inner + i;
}

void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint base = gl_GlobalInvocationID.x; base < pc.n; base += UNROLL * stride) {
        ELEM32 v[UNROLL];
        [[unroll]] for (uint k = 0u; k < UNROLL; ++k) {
            uint e = base + k * stride;
            if (e < pc.n) {
                uint src = source(e);
                if (src == 0xFFFFFFFFu) {
                    v[k] = ELEM32(0);
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
