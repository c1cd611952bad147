#version 450
// Resize by per-axis tables: the host runs the coordinate transformation of every resized
// axis (vkml/ops/resize.py, in float64, exactly as the CPU operator) and uploads, for each
// output position along it, the source offsets (already multiplied by the input stride)
// of the two taps and their weights. Axes without a table are copied (offset = c * stride).
//   NEAREST: o = x[sum of tap-0 offsets]; elements move as ESIZE-byte words.
//   LINEAR:  the taps of the interpolated axes are combined one axis ("level") at a time in
//            the order the CPU operator uses, each level as (a * w0) + (b * w1) in float32
//            without fma contraction, so results match NumPy's float32 arithmetic; TX/TO
//            pick f32 or f16 storage (include/vkml_types.glsl).
#extension GL_GOOGLE_include_directive : require
#include "include/vkml_index.glsl"
#ifdef NEAREST
#include "include/vkml_elem.glsl"
#define IN_T ELEM
#define OUT_T ELEM
#else
#include "include/vkml_types.glsl"
#define IN_T SX
#define OUT_T SO
#define MAX_LEVELS 4
#endif

layout(local_size_x = 256, local_size_x_id = 0) in;

layout(push_constant) uniform Push {
    uint n;
    uint rank;
    uint tabled;    // bit d: axis d reads the table
    uint level_of;  // 4 bits per axis: its interpolation level, 15 for none (LINEAR only)
    uint levels;    // number of interpolated axes (LINEAR only), <= MAX_LEVELS
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

void main() {
    VKML_FOR_EACH(e, pc.n) {
        uint r = e;
        uint base = 0u;
#ifndef NEAREST
        uint off0[MAX_LEVELS], off1[MAX_LEVELS];
        float w0[MAX_LEVELS], w1[MAX_LEVELS];
#endif
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
#ifndef NEAREST
            uint l = (pc.level_of >> (4 * d)) & 15u;
            if (l != 15u) {
                off0[l] = t.off0;
                off1[l] = t.off1;
                w0[l] = t.w0;
                w1[l] = t.w1;
                continue;
            }
#endif
            base += t.off0;
        }
#ifdef NEAREST
        o[e] = x[base];
#else
        float v[1 << MAX_LEVELS];
        uint taps = 1u << pc.levels;
        for (uint k = 0u; k < taps; ++k) {
            uint off = base;
            for (uint l = 0u; l < pc.levels; ++l) off += ((k >> l) & 1u) != 0u ? off1[l] : off0[l];
            v[k] = float(x[off]);
        }
        for (uint l = 0u; l < pc.levels; ++l) {
            uint half_ = taps >> (l + 1u);
            for (uint j = 0u; j < half_; ++j) {
                precise float a = v[2u * j] * w0[l];
                precise float b = v[2u * j + 1u] * w1[l];
                precise float s = a + b;
                v[j] = s;
            }
        }
        o[e] = OUT_T(v[0]);
#endif
    }
}
