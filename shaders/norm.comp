#version 450
// Row normalizations: LayerNormalization, RMSNormalization, InstanceNormalization,
// GroupNormalization (18, 21).
// The input is `rows` contiguous rows of `k` elements (LayerNorm: the dims from axis on;
// Instance: one (n, c) plane; Group: one (n, g) group of channels). Per row, in float32:
//   mean = sum(x) / k, var = sum((x - mean)^2) / k            (two passes, as the NumPy operator)
//   (RMS: mean = 0, so var = sum(x^2) / k, one pass)
//   norm = (x - mean) * (1 / sqrt(var + eps))   or, with DIV, (x - mean) / sqrt(var + eps)
//   norm rounded to float16 first with NARROW (LayerNorm and GroupNorm-21 on float16 inputs)
//   y = norm * scale[i] + bias[i], with i by `pmode`:
//     0: k-index % psize (LayerNorm's scale/bias over the trailing dims, broadcast allowed)
//     1: row % psize      (Instance: channel; GroupNorm-18: group)
//     2: (row % groups) * cpg + k-index / spatial  (GroupNorm-21: the channel)
// Optional outputs (LayerNorm): per-row mean and 1/sqrt(var + eps), float32.
// Defines: TX = TO (x, y), TY (scale, bias), WG_MODE (1: a workgroup per row; 0: an invocation
// per row), VKML_SUBGROUP.
#extension GL_GOOGLE_include_directive : require
#include "include/vkml_types.glsl"
#include "include/vkml_reduce.glsl"

layout(local_size_x = 256, local_size_x_id = 0) in;

#ifndef WG_MODE
#define WG_MODE 1
#endif

layout(push_constant) uniform Push {
    uint rows;
    uint k;
    uint pmode;
    uint psize_s;   // scale elements (pmode 0) / divisor (pmode 1)
    uint psize_b;   // bias elements (pmode 0)
    uint groups;    // pmode 2
    uint cpg;       // pmode 2: channels per group
    uint spatial;   // pmode 2: elements per channel
    float eps;
    uint flags;     // 1: DIV, 2: NARROW, 4: has bias, 8: write mean, 16: write inv std, 32: RMS
} pc;

layout(std430, binding = 0) readonly buffer BX { SX x[]; };
layout(std430, binding = 1) readonly buffer BS { SY scale[]; };
layout(std430, binding = 2) readonly buffer BB { SY bias[]; };
layout(std430, binding = 3) writeonly buffer BO { SO o[]; };
layout(std430, binding = 4) writeonly buffer BM { float mean_out[]; };
layout(std430, binding = 5) writeonly buffer BI { float inv_out[]; };

VKML_WG_REDUCE(wg_sum, float, VKML_OP_ADD, subgroupAdd)

// float32 -> nearest float16 (ties to even) -> float32, in integer arithmetic: no float16
// arithmetic needed, and the same on every device.
float round_f16(float v) {
    uint b = floatBitsToUint(v);
    uint sgn = b & 0x80000000u;
    uint a = b & 0x7FFFFFFFu;
    if (a >= 0x7F800000u) return v;                                   // inf, NaN
    if (a >= 0x477FF000u) return uintBitsToFloat(sgn | 0x7F800000u);  // rounds past 65504
    if (a < 0x38800000u) {                                            // float16 subnormals
        float r = roundEven(uintBitsToFloat(a) * 16777216.0) * (1.0 / 16777216.0);
        return uintBitsToFloat(sgn | floatBitsToUint(r));
    }
    a += 0x0FFFu + ((a >> 13) & 1u);
    return uintBitsToFloat(sgn | (a & ~0x1FFFu));
}

void param_index(uint row, uint i, out uint si, out uint bi) {
    if (pc.pmode == 0u) {
        si = i % pc.psize_s;
        bi = i % pc.psize_b;
    } else if (pc.pmode == 1u) {
        si = row % pc.psize_s;
        bi = si;
    } else {
        si = (row % pc.groups) * pc.cpg + i / pc.spatial;
        bi = si;
    }
}

float normalized(float v, float mean, float sd, float inv, uint row, uint i) {
    float n = (pc.flags & 1u) != 0u ? (v - mean) / sd : (v - mean) * inv;
    if ((pc.flags & 2u) != 0u) n = round_f16(n);
    uint si, bi;
    param_index(row, i, si, bi);
    float y = n * float(scale[si]);
    if ((pc.flags & 4u) != 0u) y += float(bias[bi]);
    return y;
}

void write_stats(uint row, float mean, float inv) {
    if ((pc.flags & 8u) != 0u) mean_out[row] = mean;
    if ((pc.flags & 16u) != 0u) inv_out[row] = inv;
}

#if WG_MODE
void main() {
    uint lid = gl_LocalInvocationID.x;
    uint wg = gl_WorkGroupSize.x;
    float kf = float(pc.k);
    for (uint row = gl_WorkGroupID.x; row < pc.rows; row += gl_NumWorkGroups.x) {
        uint base = row * pc.k;
        float mean = 0.0;
        if ((pc.flags & 32u) == 0u) {
            float s = 0.0;
            uint i = lid;
            for (; i + 3u * wg < pc.k; i += 4u * wg)  // four loads in flight
                s += (float(x[base + i]) + float(x[base + i + wg])) + (float(x[base + i + 2u * wg]) + float(x[base + i + 3u * wg]));
            for (; i < pc.k; i += wg) s += float(x[base + i]);
            mean = wg_sum(s) / kf;
        }
        float q = 0.0;
        uint j = lid;
        for (; j + 3u * wg < pc.k; j += 4u * wg) {
            float d0 = float(x[base + j]) - mean, d1 = float(x[base + j + wg]) - mean;
            float d2 = float(x[base + j + 2u * wg]) - mean, d3 = float(x[base + j + 3u * wg]) - mean;
            q += (d0 * d0 + d1 * d1) + (d2 * d2 + d3 * d3);
        }
        for (; j < pc.k; j += wg) { float d = float(x[base + j]) - mean; q += d * d; }
        float sd = sqrt(wg_sum(q) / kf + pc.eps);
        float inv = 1.0 / sd;
        for (uint i = lid; i < pc.k; i += wg) o[base + i] = SO(normalized(float(x[base + i]), mean, sd, inv, row, i));
        if (lid == 0u) write_stats(row, mean, inv);
    }
}
#else
void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    float kf = float(pc.k);
    for (uint row = gl_GlobalInvocationID.x; row < pc.rows; row += stride) {
        uint base = row * pc.k;
        float mean = 0.0;
        if ((pc.flags & 32u) == 0u) {
            float s = 0.0;
            for (uint i = 0u; i < pc.k; ++i) s += float(x[base + i]);
            mean = s / kf;
        }
        float q = 0.0;
        for (uint i = 0u; i < pc.k; ++i) { float d = float(x[base + i]) - mean; q += d * d; }
        float sd = sqrt(q / kf + pc.eps);
        float inv = 1.0 / sd;
        for (uint i = 0u; i < pc.k; ++i) o[base + i] = SO(normalized(float(x[base + i]), mean, sd, inv, row, i));
        write_stats(row, mean, inv);
    }
}
#endif
