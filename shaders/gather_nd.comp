#version 450
// GatherND (batch_dims b): data viewed as (nb, rest...), indices as (nb, m, k), the output as
// (nb, m, slice) with slice = prod(data.shape[b + k:]):
//   o[bb, q, s] = data[bb, idx[bb, q, 0], ..., idx[bb, q, k - 1], s]
// An invocation per output element (one ESIZE-byte word: the host widens slices that allow
// it) reads its row's k indices (int32, or int64 as two 32-bit halves: no shaderInt64 needed; a
// value beyond the int32 range is out of bounds anyway), wraps negative ones once and adds
// index x stride per indexed dim. An index outside [-dim, dim) yields zeros and is reported
// through the fault word (include/vkml_fault.glsl) with the dim's size in the site's aux word,
// which vkml/kernels/gather.py turns into the CPU operator's error.
#extension GL_GOOGLE_include_directive : require
#include "include/vkml_elem.glsl"
#include "include/vkml_index.glsl"
#define FAULT_BINDING 3
#include "include/vkml_fault.glsl"

layout(local_size_x = 256, local_size_x_id = 0) in;

layout(push_constant) uniform Push {
    uint n;             // output words
    uint slice;         // words per gathered slice
    uint m;             // index rows per batch
    uint k;             // index depth
    uint batch_stride;  // words of data per batch
    uint site;          // this node's site in the fault buffer
    uint dims[8];       // the indexed dims' sizes
    uint strides[8];    // their strides, in words
} pc;

layout(std430, binding = 0) readonly buffer BX { ELEM x[]; };
#if IDX == 32
layout(std430, binding = 1) readonly buffer BI { int idx[]; };
#else
layout(std430, binding = 1) readonly buffer BI { ivec2 idx[]; };  // (low, high) halves
#endif
layout(std430, binding = 2) writeonly buffer BO { ELEM o[]; };

// vkml_fault, and the size of the dim checked in the site's aux word (by the first reporter)
void fault_dim(uint site, int lo, int hi, uint dim) {
    uint w = 4u + 4u * site;
    if (fault[w] == 0u && atomicCompSwap(fault[w], 0u, 1u) == 0u) {
        fault[w + 1u] = uint(lo);
        fault[w + 2u] = uint(hi);
        fault[w + 3u] = dim;
    }
    fault[0] = 1u;
}

void main() {
    VKML_FOR_EACH(e, pc.n) {
        uint q = e / pc.slice;
        uint s = e - q * pc.slice;
        uint bb = q / pc.m;
        uint off = bb * pc.batch_stride + s;
        bool ok = true;
        for (uint j = 0u; j < pc.k; ++j) {
#if IDX == 32
            int v = idx[q * pc.k + j];
            int hi = v >> 31;
#else
            ivec2 w = idx[q * pc.k + j];
            int v = w.x;
            int hi = w.y;
#endif
            int d = int(pc.dims[j]);
            bool fits = hi == (v >> 31);  // (an int64 that fits in an int32)
            int given = v;
            if (v < 0) v += d;
            if (!fits || v < 0 || v >= d) {
                fault_dim(pc.site, given, hi, pc.dims[j]);
                ok = false;
                break;
            }
            off += uint(v) * pc.strides[j];
        }
        o[e] = ok ? x[off] : ELEM(0);
    }
}
