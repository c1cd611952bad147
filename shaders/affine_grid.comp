#version 450
// AffineGrid (ONNX opset 20; vkml/kernels/affine_grid.py): one invocation per grid point
// (n, s...) of the output (N, D1..Dr, r), r = 2 or 3, writing its r coordinates
//   grid[n, s, j] = sum_k base[k] * theta[n, j, k],  base = (x, y[, z], 1)
// (the innermost spatial axis first). The base coordinates come from the host in a table
// (base[], each axis' positions in tensor order, at pc.at[k]): vkml's CPU operator's own
// float64 linspace / arange rounded to float32, so they are its values exactly. The sum
// repeats NumPy's einsum order for float32 (vkml/ops/detection.py, AffineGrid): three terms
// (r = 2) left to right, four (r = 3) as (p0 + p1) + (p2 + p3); the last term is theta
// itself (base 1). Without fma (`precise`), results are bit for bit the CPU operator's.
// TX: theta and grid storage, f32 or f16 (computed in float32, rounded once as NumPy does).
#extension GL_GOOGLE_include_directive : require
#include "include/vkml_types.glsl"
#include "include/vkml_round16.glsl"

layout(local_size_x = 256, local_size_x_id = 0) in;

layout(push_constant) uniform Push {
    uint n;        // grid points, N * S
    uint spatial;  // S = D1 * ... * Dr
    uint rank;     // r, 2 or 3
    uint unused;
    uint dims[3];  // D1..Dr (tensor order; unused ones 1)
    uint unused2;
    uint at[3];    // where each axis' positions start in base[]
} pc;

layout(std430, binding = 0) readonly buffer BT { SX theta[]; };
layout(std430, binding = 1) readonly buffer BB { float base[]; };
layout(std430, binding = 2) writeonly buffer BO { SO o[]; };

void store(uint i, float v) {
#if TX == 2
    o[i] = float16_t(unpackHalf2x16(f16_bits(v)).x);
#else
    o[i] = SO(v);
#endif
}

void main() {
    for (uint e = gl_GlobalInvocationID.x; e < pc.n; e += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
        uint r = pc.rank;
        uint q = e / pc.spatial;
        uint s = e - q * pc.spatial;
        float b[3];
        uint rest = s;
        for (int k = 2; k >= 0; --k) {  // tensor axis k; coordinate index r - 1 - k
            if (uint(k) >= r) continue;
            uint i = rest % pc.dims[k];
            rest /= pc.dims[k];
            b[r - 1u - uint(k)] = base[pc.at[k] + i];
        }
        for (uint j = 0u; j < r; ++j) {
            uint t = (q * r + j) * (r + 1u);
            precise float p0 = b[0] * float(theta[t]);
            precise float p1 = b[1] * float(theta[t + 1u]);
            precise float v;
            if (r == 2u) {
                precise float s01 = p0 + p1;
                v = s01 + float(theta[t + 2u]);
            } else {
                precise float p2 = b[2] * float(theta[t + 2u]);
                precise float s01 = p0 + p1;
                precise float s23 = p2 + float(theta[t + 3u]);
                v = s01 + s23;
            }
            store(e * r + j, v);
        }
    }
}
