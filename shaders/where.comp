#version 450
// Where(cond, x, y) with broadcasting up to rank 8. Three operands' strides do not fit in
// 128 bytes of push constants, so shape and strides come from a small storage buffer:
//   meta = [rank, shape[8], s_cond[8], s_x[8], s_y[8]]   (uint32 each)
// Types: TX = TY = value type, TO = output type; the condition is bool (one byte).
#extension GL_GOOGLE_include_directive : require
#define NEEDS_BOOL 1
#include "include/vkml_types.glsl"
#include "include/vkml_index.glsl"

layout(local_size_x = 256, local_size_x_id = 0) in;

layout(push_constant) uniform Push { uint n; } pc;

layout(std430, binding = 0) readonly buffer BC { uint8_t cond[]; };
layout(std430, binding = 1) readonly buffer BX { SX x[]; };
layout(std430, binding = 2) readonly buffer BY { SY y[]; };
layout(std430, binding = 3) writeonly buffer BO { SO o[]; };
layout(std430, binding = 4) readonly buffer BM {
    uint rank;
    uint shape[VKML_MAX_RANK];
    uint sc[VKML_MAX_RANK];
    uint sx[VKML_MAX_RANK];
    uint sy[VKML_MAX_RANK];
} meta;

void main() {
    VKML_FOR_EACH(i, pc.n) {
        uint ic, ix, iy;
        VKML_BCAST3(i, meta.rank, meta.shape, meta.sc, meta.sx, meta.sy, ic, ix, iy);
        o[i] = SO(uint(cond[ic]) != 0u ? CX(x[ix]) : CY(y[iy]));
    }
}
