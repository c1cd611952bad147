#version 450
// Batched 2-D transpose through shared memory: x is (batch, rows, cols) row-major, o is
// (batch, cols, rows). A workgroup moves one TILE x TILE tile at a time: reads along rows
// of x and writes along rows of o are both contiguous, which a strided copy cannot give
// when the innermost dimension moves. Tiles are walked by a grid-stride loop (uniform per
// workgroup, so the barriers are safe), so any size works with a capped dispatch.
#extension GL_GOOGLE_include_directive : require
#include "include/vkml_elem.glsl"

#define TILE 32
#define ROWS 8  // threads per column of a tile: each moves TILE / ROWS elements

layout(local_size_x = TILE, local_size_y = ROWS) in;

layout(push_constant) uniform Push {
    uint batch;
    uint rows;
    uint cols;
    uint tiles_r;  // ceil(rows / TILE)
    uint tiles_c;  // ceil(cols / TILE)
} pc;

layout(std430, binding = 0) readonly buffer BX { ELEM x[]; };
layout(std430, binding = 1) writeonly buffer BO { ELEM o[]; };

shared ELEM32 tile[TILE][TILE + 1];  // +1: no bank conflicts on the transposed read

void main() {
    uint lx = gl_LocalInvocationID.x;
    uint ly = gl_LocalInvocationID.y;
    uint per_batch = pc.tiles_r * pc.tiles_c;
    uint total = per_batch * pc.batch;
    uint plane = pc.rows * pc.cols;
    for (uint t = gl_WorkGroupID.x; t < total; t += gl_NumWorkGroups.x) {
        uint b = t / per_batch;
        uint rem = t - b * per_batch;
        uint tr = rem / pc.tiles_c;
        uint r0 = tr * TILE;
        uint c0 = (rem - tr * pc.tiles_c) * TILE;
        uint base = b * plane;
        for (uint k = ly; k < TILE; k += ROWS) {
            uint r = r0 + k;
            uint c = c0 + lx;
            if (r < pc.rows && c < pc.cols) tile[k][lx] = ELEM32(x[base + r * pc.cols + c]);
        }
        barrier();
        for (uint k = ly; k < TILE; k += ROWS) {
            uint c = c0 + k;
            uint r = r0 + lx;
            if (r < pc.rows && c < pc.cols) o[base + c * pc.rows + r] = ELEM(tile[lx][k]);
        }
        barrier();
    }
}
