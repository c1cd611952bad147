#version 450
// Resize by per-axis tables: the host runs the coordinate transformation of every resized
// axis (vkml/ops/resize.py, in float64, exactly as the CPU operator) and uploads, for each
// output position along it, the source offsets (already multiplied by the input stride)
// of the two taps and their weights. Axes without a table are copied (offset = c * stride).
//   NEAREST: o = x[sum of tap-0 offsets]; elements move as ESIZE-byte words, UNROLL per
//            invocation (loads first).
//   LINEAR:  the taps of the up to 4 interpolated axes ("levels") are combined one level at
//            a time in the order the CPU operator uses, each as (a * w0) + (b * w1) in float32
//            without fma contraction, so results match NumPy's float32 arithmetic; TX/TO
//            pick f32 or f16 storage (include/vkml_types.glsl). The per-level taps live in
//            scalars (not arrays indexed at run time, which GPUs spill to memory).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "include/vkml_index.glsl"
#ifdef NEAREST
#include "include/vkml_elem.glsl"
#define IN_T ELEM
#define OUT_T ELEM
#else
#include "include/vkml_types.glsl"
#define IN_T SX
#define OUT_T SO
#endif

layout(local_size_x = 256, local_size_x_id = 0) in;

#define UNROLL 4

layout(push_constant) uniform Push {
    uint n;
    uint rank;
    uint tabled;    // bit d: axis d reads the table
    uint level_of;  // 4 bits per axis: its interpolation level (0..3), 15 for none (LINEAR only)
    uint levels;    // number of interpolated axes (LINEAR only), <= 4
    uint shape[VKML_MAX_RANK];  // output shape
    uint param[VKML_MAX_RANK];  // tabled: first table entry of the axis; else input stride
} pc;

struct Tap {
    uint off0;
    uint off1;
    float w0;
    float w1;
};

layout(std430, binding = 0) readonly buffer BX { IN_T x[]; };
layout(std430, binding = 1) writeonly buffer BO { OUT_T o[]; };
layout(std430, binding = 2) readonly buffer BT { Tap tab[]; };

#ifdef NEAREST
uint source(uint e) {
    uint r = e;
    uint base = 0u;
    for (int d = int(pc.rank) - 1; d >= 0; --d) {
        uint s = pc.shape[d];
        uint q = r / s;
        uint c = r - q * s;
        r = q;
        base += (pc.tabled & (1u << d)) == 0u ? c * pc.param[d] : tab[pc.param[d] + c].off0;
    }
    return base;
}

void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint b = gl_GlobalInvocationID.x; b < pc.n; b += UNROLL * stride) {
        ELEM32 v[UNROLL];
        [[unroll]] for (uint k = 0u; k < UNROLL; ++k) {
            uint e = b + k * stride;
            if (e < pc.n) v[k] = ELEM32(x[source(e)]);
        }
        [[unroll]] for (uint k = 0u; k < UNROLL; ++k) {
            uint e = b + k * stride;
            if (e < pc.n) o[e] = ELEM(v[k]);
        }
    }
}
#else
// Taps of levels 0..3: offsets a/b, weights p/q (this invocation's current element).
uint a0, b0, a1, b1, a2, b2, a3, b3;
float p0, q0, p1, q1, p2, q2, p3, q3;

float mix2(float u, float w, float p, float q) {
    precise float s = u * p;
    precise float t = w * q;
    precise float r = s + t;
    return r;
}

float level0(uint b) { return mix2(float(x[b + a0]), float(x[b + b0]), p0, q0); }
float level1(uint b) { return mix2(level0(b + a1), level0(b + b1), p1, q1); }
float level2(uint b) { return mix2(level1(b + a2), level1(b + b2), p2, q2); }
float level3(uint b) { return mix2(level2(b + a3), level2(b + b3), p3, q3); }

void main() {
    VKML_FOR_EACH(e, pc.n) {
        uint r = e;
        uint base = 0u;
        for (int d = int(pc.rank) - 1; d >= 0; --d) {
            uint s = pc.shape[d];
            uint q = r / s;
            uint c = r - q * s;
            r = q;
            if ((pc.tabled & (1u << d)) == 0u) {
                base += c * pc.param[d];
                continue;
            }
            Tap t = tab[pc.param[d] + c];
            uint l = (pc.level_of >> (4 * d)) & 15u;
            if (l == 0u) {
                a0 = t.off0; b0 = t.off1; p0 = t.w0; q0 = t.w1;
            } else if (l == 1u) {
                a1 = t.off0; b1 = t.off1; p1 = t.w0; q1 = t.w1;
            } else if (l == 2u) {
                a2 = t.off0; b2 = t.off1; p2 = t.w0; q2 = t.w1;
            } else if (l == 3u) {
                a3 = t.off0; b3 = t.off1; p3 = t.w0; q3 = t.w1;
            } else {
                base += t.off0;
            }
        }
        float v;
        if (pc.levels == 0u) {
            v = float(x[base]);
        } else if (pc.levels == 1u) {
            v = level0(base);
        } else if (pc.levels == 2u) {
            v = level1(base);
        } else if (pc.levels == 3u) {
            v = level2(base);
        } else {
            v = level3(base);
        }
        o[e] = OUT_T(v);
    }
}
#endif
