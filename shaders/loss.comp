#version 450
// NegativeLogLikelihoodLoss over x (N, C, D...) as log-probabilities and targets t (N, D...):
// loss[e] = -x[n, t[e], d] * w[t[e]] (w = 1 without weights), 0 where t[e] == ignore_index.
// RED 0 writes loss[e] per element (any grid); RED 1 (sum) and RED 2 (mean: the sum over the
// summed weights of the counted elements, NaN when they sum to 0) run one workgroup that
// sums in float and writes one value. SoftmaxCrossEntropyLoss is LogSoftmax then this.
// A target outside [0, C) that is not ignored counts 0 and is reported through the fault
// word (include/vkml_fault.glsl), which the run turns into the CPU operator's error.
// TX: f32 or f16 (computed in float); IDX: 32 or 64 (int64 read as two 32-bit halves);
// WT: 1 when binding 2 holds weights (else it is any buffer, never read).
#extension GL_GOOGLE_include_directive : require
#include "include/vkml_types.glsl"
#include "include/vkml_index.glsl"
#define FAULT_BINDING 4
#include "include/vkml_fault.glsl"

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
    uint n;        // elements of t (N * D)
    uint c;        // classes
    uint d;        // D: elements per (n, class)
    int ignore;    // ignore_index (its low 32 bits) ...
    int ignore_hi; // ... and high ones
    uint has_ignore;
    uint site;     // this node's site in the fault buffer
} pc;

layout(std430, binding = 0) readonly buffer BX { SX x[]; };
#if IDX == 32
layout(std430, binding = 1) readonly buffer BT { int t[]; };
#else
layout(std430, binding = 1) readonly buffer BT { ivec2 t[]; };  // (low, high) halves
#endif
layout(std430, binding = 2) readonly buffer BW { SX w[]; };
layout(std430, binding = 3) writeonly buffer BO { SX o[]; };

// (loss, weight) of element e
vec2 term(uint e) {
#if IDX == 32
    int j = t[e];
    int hi = j >> 31;
#else
    ivec2 v = t[e];
    int j = v.x;
    int hi = v.y;
#endif
    if (pc.has_ignore != 0u && j == pc.ignore && hi == pc.ignore_hi) return vec2(0.0);
    if (hi != (j >> 31) || j < 0 || uint(j) >= pc.c) {
        vkml_fault(pc.site, j, hi);
        return vec2(0.0);
    }
    uint nn = e / pc.d, dd = e - nn * pc.d;
#if WT
    float wt = float(w[j]);
#else
    float wt = 1.0;
#endif
    return vec2(-float(x[(nn * pc.c + uint(j)) * pc.d + dd]) * wt, wt);
}

#if RED == 0
void main() {
    VKML_FOR_EACH(e, pc.n) {
        o[e] = SX(term(e).x);
    }
}
#else
shared vec2 part[256];

void main() {
    uint i = gl_LocalInvocationID.x;
    vec2 s = vec2(0.0);
    for (uint e = i; e < pc.n; e += 256u) s += term(e);
    part[i] = s;
    barrier();
    for (uint h = 128u; h > 0u; h >>= 1) {
        if (i < h) part[i] += part[i + h];
        barrier();
    }
    if (i == 0u) {
#if RED == 1
        o[0] = SX(part[0].x);
#else
        o[0] = SX(part[0].x / part[0].y);
#endif
    }
}
#endif
