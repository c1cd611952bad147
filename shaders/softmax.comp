#version 450
// Softmax / LogSoftmax along rows of a C-contiguous tensor viewed as (outer, K, inner): row r
// is outer r / inner, column r % inner, its K elements `inner` apart. Numerically stable as
// the NumPy operator: shift by the row maximum when it is finite, else by 0.
// Defines: OP_SOFTMAX or OP_LOGSOFTMAX; WG_MODE 1 (a workgroup per row: long rows) or 0 (an
// invocation per row: short rows, or inner > 1 where neighbouring rows are adjacent);
// VKML_SUBGROUP, TX = TO (the dtype; f16 is computed in f32).
// The same rows serve OP_HARDMAX (1 at the row's first maximum, NaN counting as the largest, as
// NumPy's argmax; 0 elsewhere) and OP_LPNORM1 / OP_LPNORM2 (x / (sum |x| or sqrt(sum x^2)), 0
// where the norm is 0): an invocation per row (WG_MODE 0) only.
#extension GL_GOOGLE_include_directive : require
#include "include/vkml_types.glsl"
#include "include/vkml_reduce.glsl"

layout(local_size_x = 256, local_size_x_id = 0) in;

#ifndef WG_MODE
#define WG_MODE 1
#endif

layout(push_constant) uniform Push {
    uint rows;   // outer * inner
    uint k;      // row length
    uint inner;  // distance between a row's elements
    uint pad;
} pc;

layout(std430, binding = 0) readonly buffer BX { SX x[]; };
layout(std430, binding = 1) writeonly buffer BO { SO o[]; };

VKML_WG_REDUCE(wg_max, uint, VKML_OP_MAX, subgroupMax)
VKML_WG_REDUCE(wg_sum, float, VKML_OP_ADD, subgroupAdd)

uint row_base(uint r) {
    uint outer = r / pc.inner;
    return outer * pc.k * pc.inner + (r - outer * pc.inner);
}

float shift_of(uint key) {
    float m = vkml_unkey(key);
    return vkml_isfinite(m) ? m : 0.0;
}

CO result(float v, float shift, float s) {
#if defined(OP_LOGSOFTMAX)
    return CO((v - shift) - log(s));
#else
    return CO(exp(v - shift) / s);
#endif
}

#if defined(OP_HARDMAX) || defined(OP_LPNORM1) || defined(OP_LPNORM2)
void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint r = gl_GlobalInvocationID.x; r < pc.rows; r += stride) {
        uint base = row_base(r);
        uint end = base + pc.k * pc.inner;
#if defined(OP_HARDMAX)
        uint best = base;
        float m = float(x[base]);
        if ((floatBitsToUint(m) & 0x7FFFFFFFu) <= 0x7F800000u) {  // not NaN
            for (uint i = base + pc.inner; i < end; i += pc.inner) {
                float v = float(x[i]);
                if ((floatBitsToUint(v) & 0x7FFFFFFFu) > 0x7F800000u) { best = i; break; }
                if (v > m) { m = v; best = i; }
            }
        }
        for (uint i = base; i < end; i += pc.inner) o[i] = SO(i == best ? 1.0 : 0.0);
#else
        float s = 0.0;
#if defined(OP_LPNORM1)
        for (uint i = base; i < end; i += pc.inner) s += abs(float(x[i]));
#else
        for (uint i = base; i < end; i += pc.inner) { float v = float(x[i]); s += v * v; }
        s = sqrt(s);
#endif
        for (uint i = base; i < end; i += pc.inner) o[i] = SO(s == 0.0 ? 0.0 : float(x[i]) / s);
#endif
    }
}
#elif WG_MODE
void main() {
    uint lid = gl_LocalInvocationID.x;
    uint wg = gl_WorkGroupSize.x;
    uint step = pc.inner * wg;
    for (uint r = gl_WorkGroupID.x; r < pc.rows; r += gl_NumWorkGroups.x) {
        uint base = row_base(r);
        uint end = base + pc.k * pc.inner;
        uint mk = vkml_key_order(0xFF800000u);
        uint i = base + lid * pc.inner;
        for (; i + 3u * step < end; i += 4u * step)  // four loads in flight
            mk = max(max(mk, max(vkml_key_max(float(x[i])), vkml_key_max(float(x[i + step])))),
                     max(vkml_key_max(float(x[i + 2u * step])), vkml_key_max(float(x[i + 3u * step]))));
        for (; i < end; i += step) mk = max(mk, vkml_key_max(float(x[i])));
        float shift = shift_of(wg_max(mk));
        float s = 0.0;
        i = base + lid * pc.inner;
        for (; i + 3u * step < end; i += 4u * step)
            s += (exp(float(x[i]) - shift) + exp(float(x[i + step]) - shift))
                 + (exp(float(x[i + 2u * step]) - shift) + exp(float(x[i + 3u * step]) - shift));
        for (; i < end; i += step) s += exp(float(x[i]) - shift);
        s = wg_sum(s);
        for (uint i = base + lid * pc.inner; i < end; i += step) o[i] = SO(result(float(x[i]), shift, s));
    }
}
#else
void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint r = gl_GlobalInvocationID.x; r < pc.rows; r += stride) {
        uint base = row_base(r);
        uint end = base + pc.k * pc.inner;
        uint mk = vkml_key_order(0xFF800000u);
        for (uint i = base; i < end; i += pc.inner) mk = max(mk, vkml_key_max(float(x[i])));
        float shift = shift_of(mk);
        float s = 0.0;
        for (uint i = base; i < end; i += pc.inner) s += exp(float(x[i]) - shift);
        for (uint i = base; i < end; i += pc.inner) o[i] = SO(result(float(x[i]), shift, s));
    }
}
#endif
