#version 450
// GatherElements: o[c] = x[c with its `axis` coordinate replaced by idx[c]], for o and idx of
// one shape (rank <= 8, row-major) and x of the same rank. Negative indices count from the
// end; an index still outside [0, axis_len) yields zeros and is reported through the fault
// word (include/vkml_fault.glsl), which the run turns into the CPU operator's error. Elements move as ESIZE-byte words; indices are int32 (IDX=32) or int64
// (IDX=64, read as two 32-bit halves: a value beyond int32 is out of bounds anyway).
#extension GL_GOOGLE_include_directive : require
#include "include/vkml_elem.glsl"
#include "include/vkml_index.glsl"
#define FAULT_BINDING 3
#include "include/vkml_fault.glsl"

layout(local_size_x = 256, local_size_x_id = 0) in;

layout(push_constant) uniform Push {
    uint n;
    uint rank;
    uint axis;
    uint axis_len;
    uint site;         // this node's site in the fault buffer
    uint shape[8];     // of idx and o
    uint xstride[8];   // of x, in elements
} pc;

layout(std430, binding = 0) readonly buffer BX { ELEM x[]; };
#if IDX == 32
layout(std430, binding = 1) readonly buffer BI { int idx[]; };
#else
layout(std430, binding = 1) readonly buffer BI { ivec2 idx[]; };  // (low, high) halves
#endif
layout(std430, binding = 2) writeonly buffer BO { ELEM o[]; };

void main() {
    VKML_FOR_EACH(e, pc.n) {
#if IDX == 32
        int j = idx[e];
        int hi = j >> 31;
#else
        ivec2 w = idx[e];
        int j = w.x;
        int hi = w.y;
#endif
        bool ok = hi == (j >> 31);  // (an int64 that fits in an int32)
        int given = j;
        if (j < 0) j += int(pc.axis_len);
        if (!ok || j < 0 || uint(j) >= pc.axis_len) {
            vkml_fault(pc.site, given, hi);
            o[e] = ELEM(0);
            continue;
        }
        uint r = e, src = 0u;
        for (int d = int(pc.rank) - 1; d >= 0; --d) {
            uint s = pc.shape[d], q = r / s, c = r - q * s;
            r = q;
            src += (uint(d) == pc.axis ? uint(j) : c) * pc.xstride[d];
        }
        o[e] = x[src];
    }
}
