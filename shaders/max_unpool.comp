#version 450
// MaxUnpool (opsets 9, 11, 22), as vkml/ops/pool.py's: y zeros except y.flat[I[i]] = x.flat[i],
// the indices addressing the unpooled tensor of the default shape (MaxPool's input), remapped
// (REMAP) to an explicit output_shape's strides (which extends each dim at its end). Two passes:
// PASS 0 (one invocation per index): check 0 <= I[i] < total (else report it through the fault
// word, include/vkml_fault.glsl, and skip it) and atomicMax i + 1 into its destination's mark
// word, so where indices repeat the last one wins, as NumPy's assignment; PASS 1 (one
// invocation per output element): y[d] = mark[d] != 0 ? x[mark[d] - 1] : 0. Elements move as
// ESIZE-byte words (every dtype, bit for bit); I is int64, read as two 32-bit halves.
#extension GL_GOOGLE_include_directive : require
#include "include/vkml_index.glsl"
#if PASS == 0
#define FAULT_BINDING 2
#include "include/vkml_fault.glsl"
#else
#include "include/vkml_elem.glsl"
#endif

layout(local_size_x = 256, local_size_x_id = 0) in;

layout(push_constant) uniform Push {
    uint n;       // PASS 0: indices; PASS 1: output elements
    uint rank;    // of the dims below (REMAP only)
    uint total;   // elements of the default shape: indices lie in [0, total)
    uint site;    // this node's site in the fault buffer
    uint remap;   // 1: output_shape differs from the default shape
    uint dims[VKML_MAX_RANK];     // the default shape
    uint ostride[VKML_MAX_RANK];  // the output's element strides
} pc;

#if PASS == 0
layout(std430, binding = 0) readonly buffer BI { ivec2 idx[]; };  // (low, high) halves
layout(std430, binding = 1) buffer BM { uint mark[]; };

void main() {
    VKML_FOR_EACH(i, pc.n) {
        ivec2 w = idx[i];
        if (w.y != 0 || w.x < 0 || uint(w.x) >= pc.total) {
            vkml_fault(pc.site, w.x, w.y);
            continue;
        }
        uint v = uint(w.x);
        uint d = v;
        if (pc.remap != 0u) {
            d = 0u;
            for (int k = int(pc.rank) - 1; k > 0; --k) {
                uint s = pc.dims[k];
                uint q = v / s;
                d += (v - q * s) * pc.ostride[k];
                v = q;
            }
            d += v * pc.ostride[0];
        }
        atomicMax(mark[d], i + 1u);
    }
}
#else
layout(std430, binding = 0) readonly buffer BM { uint mark[]; };
layout(std430, binding = 1) readonly buffer BX { ELEM x[]; };
layout(std430, binding = 2) writeonly buffer BO { ELEM o[]; };

void main() {
    VKML_FOR_EACH(e, pc.n) {
        uint m = mark[e];
        o[e] = m != 0u ? x[m - 1u] : ELEM(0);
    }
}
#endif
