#version 450
// The two transforms of a Winograd F(2x2, 3x3) convolution (kernels/winograd.py): a 3x3 Conv of
// stride 1 and dilation 1, one group, as 16 GEMMs over 2x2 output tiles, 2.25x fewer
// multiply-adds than the direct product. For tile p = (image n, tile row ty, tile column tx) of
// P = N x TH x TW (TH = ceil(OH / 2), TW = ceil(OW / 2)):
//   WINO_IN:  the 4x4 input patch d at (2 ty - py, 2 tx - px) (zeros outside the input) becomes
//             v = B^T d B, stored as V[xi][c][p] (xi = 4 i + j): the GEMMs' B operands (C x P);
//   (the GEMMs, matmul.comp: M[xi] = U[xi] (Mout x C) @ V[xi], U[xi] = (G g G^T)[xi] of each
//   filter g, computed once on the host)
//   WINO_OUT: the 4x4 m = M[.][k][p] becomes the 2x2 outputs y = A^T m A (those inside the
//             output), plus the bias, then the epilogue (include/vkml_epilogue.glsl) as conv.comp
//             applies it.
// B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], A^T = [1 1 1 0; 0 1 -1 -1]: additions only,
// in float32.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "include/vkml_types.glsl"

layout(local_size_x = 256, local_size_x_id = 0) in;
layout(constant_id = 1) const bool HAS_BIAS = false;

#ifdef WINO_IN
layout(std430, binding = 0) readonly buffer BX { SX x[]; };
layout(std430, binding = 1) writeonly buffer BV { float v[]; };
#else
layout(std430, binding = 0) readonly buffer BM { float mt[]; };
layout(std430, binding = 1) readonly buffer BBias { SO bias[]; };
layout(std430, binding = 2) writeonly buffer BO { SO o[]; };
layout(std430, binding = 3) readonly buffer BR { SO res[]; };
#endif

layout(push_constant) uniform Push {
    uint total;             // channels x P: input channels (WINO_IN) or output channels (WINO_OUT)
    uint C, P, TH, TW;      // those channels, tiles (all images), tile rows and columns per image
    int H, W;               // WINO_IN: the input's height and width; WINO_OUT: the output's
    int py, px;             // pads at the beginning (WINO_IN)
    uint EPI;               // epilogue flags (WINO_OUT)
    float ELO, EHI;         // Clip's bounds (EPI & 4), an activation's alpha, beta
} pc;

#ifndef WINO_IN
#include "include/vkml_epilogue.glsl"
#endif

void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    uint tiles = pc.TH * pc.TW;
    uint plane = pc.total;  // one xi's values: channels x P
    for (uint e = gl_GlobalInvocationID.x; e < pc.total; e += stride) {
        uint c = e / pc.P, p = e - c * pc.P;
        uint n = p / tiles, t = p - n * tiles;
        uint ty = t / pc.TW, tx = t - ty * pc.TW;
#ifdef WINO_IN
        int y0 = int(2u * ty) - pc.py, x0 = int(2u * tx) - pc.px;
        uint base = (n * pc.C + c) * uint(pc.H * pc.W);
        float d[4][4];
        [[unroll]] for (int i = 0; i < 4; ++i) {
            int yy = y0 + i;
            bool row_ok = yy >= 0 && yy < pc.H;
            [[unroll]] for (int j = 0; j < 4; ++j) {
                int xx = x0 + j;
                d[i][j] = row_ok && xx >= 0 && xx < pc.W ? float(x[base + uint(yy * pc.W + xx)]) : 0.0;
            }
        }
        float r[4][4];  // B^T d
        [[unroll]] for (int j = 0; j < 4; ++j) {
            r[0][j] = d[0][j] - d[2][j];
            r[1][j] = d[1][j] + d[2][j];
            r[2][j] = d[2][j] - d[1][j];
            r[3][j] = d[1][j] - d[3][j];
        }
        [[unroll]] for (int i = 0; i < 4; ++i) {  // (B^T d) B
            v[(4u * uint(i) + 0u) * plane + e] = r[i][0] - r[i][2];
            v[(4u * uint(i) + 1u) * plane + e] = r[i][1] + r[i][2];
            v[(4u * uint(i) + 2u) * plane + e] = r[i][2] - r[i][1];
            v[(4u * uint(i) + 3u) * plane + e] = r[i][1] - r[i][3];
        }
#else
        float m[4][4];
        [[unroll]] for (uint q = 0u; q < 16u; ++q) m[q >> 2u][q & 3u] = mt[q * plane + e];
        float r[2][4];  // A^T m
        [[unroll]] for (int j = 0; j < 4; ++j) {
            r[0][j] = m[0][j] + m[1][j] + m[2][j];
            r[1][j] = m[1][j] - m[2][j] - m[3][j];
        }
        float b = HAS_BIAS ? float(bias[c]) : 0.0;
        [[unroll]] for (uint i = 0u; i < 2u; ++i) {
            uint oy = 2u * ty + i;
            if (oy >= uint(pc.H)) continue;
            float y2[2];
            y2[0] = r[i][0] + r[i][1] + r[i][2];
            y2[1] = r[i][1] - r[i][2] - r[i][3];
            [[unroll]] for (uint j = 0u; j < 2u; ++j) {
                uint ox = 2u * tx + j;
                if (ox >= uint(pc.W)) continue;
                float y = y2[j];
                if (HAS_BIAS) y += b;
                uint oi = ((n * pc.C + c) * uint(pc.H) + oy) * uint(pc.W) + ox;
                o[oi] = SO(epilogue(y, oi, pc.EPI));
            }
        }
#endif
    }
}
