#version 450
// The two transforms of a Winograd convolution F(T x T, 3x3) (kernels/winograd.py), T = WINO_T
// (2 or 4): a 3x3 Conv of stride 1 and dilation 1, one group, as (T + 2)^2 GEMMs over T x T
// output tiles, 36 / (T + 2)^2 x T^2 / 9 of the direct product's multiply-adds (2.25x fewer at
// T = 2, 4x at T = 4). With A = T + 2, for tile p = (image n, tile row ty, tile column tx) of
// P = N x TH x TW (TH = ceil(OH / T), TW = ceil(OW / T)):
//   WINO_IN:  the A x A input patch d at (T ty - py, T tx - px) (zeros outside the input)
//             becomes v = B^T d B, stored as V[xi][c][p] (xi = A i + j): the GEMMs' B operands;
//   (the GEMMs, matmul.comp: M[xi] = U[xi] (Mout x C) @ V[xi], U[xi] = (G g G^T)[xi] of each
//   filter g, computed once on the host)
//   WINO_OUT: the A x A m = M[.][k][p] becomes the T x T outputs y = A^T m A (those inside the
//             output), plus the bias, then the epilogue (include/vkml_epilogue.glsl) as conv.comp
//             applies it.
// The matrices are Lavin and Gray's (arXiv:1509.09308), written out as sums (no products with
// zero, so no NaN from an infinity times 0 where the direct product has none).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "include/vkml_types.glsl"

#ifndef WINO_T
#define WINO_T 2
#endif
#define WA (WINO_T + 2)

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

// B^T d for one column d of the patch
float[WA] bt(float d[WA]) {
    float r[WA];
#if WINO_T == 2
    r[0] = d[0] - d[2];
    r[1] = d[1] + d[2];
    r[2] = d[2] - d[1];
    r[3] = d[1] - d[3];
#else
    r[0] = 4.0 * d[0] - 5.0 * d[2] + d[4];
    r[1] = -4.0 * d[1] - 4.0 * d[2] + d[3] + d[4];
    r[2] = 4.0 * d[1] - 4.0 * d[2] - d[3] + d[4];
    r[3] = -2.0 * d[1] - d[2] + 2.0 * d[3] + d[4];
    r[4] = 2.0 * d[1] - d[2] - 2.0 * d[3] + d[4];
    r[5] = 4.0 * d[1] - 5.0 * d[3] + d[5];
#endif
    return r;
}

// A^T m for one column m of the products
float[WINO_T] at(float m[WA]) {
    float y[WINO_T];
#if WINO_T == 2
    y[0] = m[0] + m[1] + m[2];
    y[1] = m[1] - m[2] - m[3];
#else
    y[0] = m[0] + m[1] + m[2] + m[3] + m[4];
    y[1] = m[1] - m[2] + 2.0 * m[3] - 2.0 * m[4];
    y[2] = m[1] + m[2] + 4.0 * m[3] + 4.0 * m[4];
    y[3] = m[1] - m[2] + 8.0 * m[3] - 8.0 * m[4] + m[5];
#endif
    return y;
}

void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    uint tiles = pc.TH * pc.TW;
    uint plane = pc.total;  // one xi's values: channels x P
    for (uint e = gl_GlobalInvocationID.x; e < pc.total; e += stride) {
        uint c = e / pc.P, p = e - c * pc.P;
        uint n = p / tiles, t = p - n * tiles;
        uint ty = t / pc.TW, tx = t - ty * pc.TW;
#ifdef WINO_IN
        int y0 = int(WINO_T * ty) - pc.py, x0 = int(WINO_T * tx) - pc.px;
        uint base = (n * pc.C + c) * uint(pc.H * pc.W);
        float r[WA][WA];  // r[j] = B^T (column j of d)
        [[unroll]] for (int j = 0; j < WA; ++j) {
            int xx = x0 + j;
            bool col_ok = xx >= 0 && xx < pc.W;
            float d[WA];
            [[unroll]] for (int i = 0; i < WA; ++i) {
                int yy = y0 + i;
                d[i] = col_ok && yy >= 0 && yy < pc.H ? float(x[base + uint(yy * pc.W + xx)]) : 0.0;
            }
            r[j] = bt(d);
        }
        [[unroll]] for (int i = 0; i < WA; ++i) {  // row i of (B^T d) B = B^T (row i of B^T d)
            float row[WA];
            [[unroll]] for (int j = 0; j < WA; ++j) row[j] = r[j][i];
            float q[WA] = bt(row);
            [[unroll]] for (int j = 0; j < WA; ++j) v[uint(WA * i + j) * plane + e] = q[j];
        }
#else
        float r[WA][WINO_T];  // r[j] = A^T (column j of m)
        [[unroll]] for (int j = 0; j < WA; ++j) {
            float m[WA];
            [[unroll]] for (int i = 0; i < WA; ++i) m[i] = mt[uint(WA * i + j) * plane + e];
            r[j] = at(m);
        }
        float b = HAS_BIAS ? float(bias[c]) : 0.0;
        [[unroll]] for (int i = 0; i < WINO_T; ++i) {
            uint oy = WINO_T * ty + uint(i);
            if (oy >= uint(pc.H)) continue;
            float row[WA];
            [[unroll]] for (int j = 0; j < WA; ++j) row[j] = r[j][i];
            float y[WINO_T] = at(row);
            [[unroll]] for (int j = 0; j < WINO_T; ++j) {
                uint ox = WINO_T * tx + uint(j);
                if (ox >= uint(pc.W)) continue;
                float val = y[j];
                if (HAS_BIAS) val += b;
                uint oi = ((n * pc.C + c) * uint(pc.H) + oy) * uint(pc.W) + ox;
                o[oi] = SO(epilogue(val, oi, pc.EPI));
            }
        }
#endif
    }
}
