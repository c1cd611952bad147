#version 450
// Trilu: keep the upper (diagonal - row >= k) or lower (<= k) triangle of every matrix in the
// last two dimensions, zeros elsewhere. o[i] for a contiguous tensor of `rows` x `cols` matrices.
#extension GL_GOOGLE_include_directive : require
#include "include/vkml_types.glsl"
#include "include/vkml_index.glsl"

layout(local_size_x = 256, local_size_x_id = 0) in;

layout(push_constant) uniform Push {
    uint n;
    uint rows;
    uint cols;
    int k;        // the diagonal, clamped by the host to the matrix size
    uint upper;   // 1: keep the upper triangle, 0: the lower
} pc;

layout(std430, binding = 0) readonly buffer BX { SX x[]; };
layout(std430, binding = 1) writeonly buffer BO { SO o[]; };

void main() {
    VKML_FOR_EACH(i, pc.n) {
        uint col = i % pc.cols;
        uint row = (i / pc.cols) % pc.rows;
        int d = int(col) - int(row);
        bool keep = pc.upper != 0u ? d >= pc.k : d <= pc.k;
        // In the compute type: with 16-bit storage alone, float16_t only loads, stores, converts.
        o[i] = SO(keep ? CX(x[i]) : CX(0));
    }
}
