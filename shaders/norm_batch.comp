#version 450
// BatchNormalization in inference mode, elementwise over (N, C, *spatial):
//   y = (x - mean[p]) * (scale[p] / sqrt(var[p] + eps)) + bias[p]      (float32, as the NumPy operator)
// with p the channel (params of shape (C,)) or the channel and spatial position (params of
// shape (C, *spatial), the pre-opset-9 spatial=0 form).
// Defines: TX = TO (x, y), TY (the four parameters).
#extension GL_GOOGLE_include_directive : require
#include "include/vkml_types.glsl"
#include "include/vkml_index.glsl"

layout(local_size_x = 256, local_size_x_id = 0) in;

layout(push_constant) uniform Push {
    uint n;
    uint c;
    uint inner;       // elements per channel of one batch item
    uint per_element; // 1: params are (C, *spatial)
    float eps;
} pc;

layout(std430, binding = 0) readonly buffer BX { SX x[]; };
layout(std430, binding = 1) readonly buffer BS { SY scale[]; };
layout(std430, binding = 2) readonly buffer BB { SY bias[]; };
layout(std430, binding = 3) readonly buffer BM { SY mean[]; };
layout(std430, binding = 4) readonly buffer BV { SY var[]; };
layout(std430, binding = 5) writeonly buffer BO { SO o[]; };

void main() {
    uint ci = pc.c * pc.inner;
    VKML_FOR_EACH(i, pc.n) {
        uint p = pc.per_element != 0u ? i % ci : (i / pc.inner) % pc.c;
        float f = float(scale[p]) / sqrt(float(var[p]) + pc.eps);
        o[i] = SO((float(x[i]) - float(mean[p])) * f + float(bias[p]));
    }
}
