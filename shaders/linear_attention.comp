#version 450
// LinearAttention (ONNX opset 27): recurrent linear attention with a (dk x dv) state per
// (batch, kv head), update rules linear, gated, delta and gated_delta, as vkml/ops/attention.py's
// CPU operator, step by step over time in float32 (float16 widened):
//   gated:  S = exp(g_t) * S                          (rows: g per key dim, or one per head)
//   delta:  u = beta_t * (v_t - S^T k_t)   else  u = v_t
//           S = S + k_t u^T
//   y_t[qh] = scale * (S^T q_t[qh])                   for the group of query heads of kv head h
// Every column v of S evolves on its own (the products S^T k and S^T q sum over k within a
// column), so one invocation owns one (batch, kv head, column): its column of S lives in
// registers (DKMAX floats, the loops over k unrolled: no loop but the one over time and query
// heads, which keeps lavapipe's per-invocation loop budget), and no invocation waits on another.
// Each product and sum rounded in order (precise: no fma); exp is Cephes' expf (within 1 ulp).
// Inputs (B, T, heads * dim) read in place; decay (B, T, Hk dk | Hk | 1) and beta
// (B, T, Hk | 1) through a head stride and a key stride (0 where broadcast).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "include/vkml_types.glsl"
#include "include/vkml_index.glsl"
#include "include/vkml_math.glsl"
#include "include/vkml_round16.glsl"

#ifndef DKMAX
#define DKMAX 32
#endif

layout(local_size_x = 64, local_size_x_id = 0) in;

#define GATED 1u
#define DELTA 2u
#define HAS_PAST 4u
#define WANT_Y 8u
#define WANT_STATE 16u

layout(push_constant) uniform Push {
    uint nb, seq, hk, group, dk, dv;
    uint flags;
    uint d_last, d_head, d_key;  // decay: last dim, head stride, key stride
    uint b_last, b_head;         // beta: last dim, head stride
    float scale;
    uint n;                      // nb * hk * dv
} pc;

layout(std430, binding = 0) readonly buffer BQ { SX q[]; };
layout(std430, binding = 1) readonly buffer BK { SX key[]; };
layout(std430, binding = 2) readonly buffer BV { SX val[]; };
layout(std430, binding = 3) readonly buffer BP { SX past[]; };
layout(std430, binding = 4) readonly buffer BD { SX decay[]; };
layout(std430, binding = 5) readonly buffer BB { SX beta[]; };
layout(std430, binding = 6) writeonly buffer BY { SX y[]; };
layout(std430, binding = 7) writeonly buffer BS { SX st[]; };

SX store(float v) {
#if TX == 2
    return SX(unpackHalf2x16(f16_bits(v)).x);  // exact: already a float16 value
#else
    return SX(v);
#endif
}

// exp(x) for any float x (Cephes' expf): Cody-Waite reduction x = k ln2 + r, a degree-7
// polynomial, scaled by 2^k in two steps where 2^k is no normal float.
float la_exp(float v) {
    if (vkml_isnan(v)) return v;
    if (v > 88.72283935546875) return VKML_INF;
    if (v < -104.0) return 0.0;
    float kf = floor(v * 1.44269504088896341 + 0.5);
    precise float r = (v - kf * 0.693359375) - kf * -2.12194440e-4;
    precise float z = r * r;
    precise float p = 1.9875691500e-4;
    p = p * r + 1.3981999507e-3;
    p = p * r + 8.3334519073e-3;
    p = p * r + 4.1665795894e-2;
    p = p * r + 1.6666665459e-1;
    p = p * r + 5.0000001201e-1;
    precise float e = p * z + r + 1.0;
    int ki = int(kf);  // in [-150, 128]
    if (ki < -126) return e * uintBitsToFloat(uint(ki + 64 + 127) << 23) * uintBitsToFloat(uint(127 - 64) << 23);
    if (ki > 127) return e * uintBitsToFloat(uint(ki - 1 + 127) << 23) * 2.0;
    return e * uintBitsToFloat(uint(ki + 127) << 23);
}

void main() {
    uint dk = pc.dk, dv = pc.dv, hq = pc.hk * pc.group;
    VKML_FOR_EACH(i, pc.n) {
        uint col = i % dv;
        uint bh = i / dv;           // b * hk + h
        uint h = bh % pc.hk, b = bh / pc.hk;
        float s[DKMAX];
        [[unroll]] for (uint k = 0u; k < DKMAX; ++k) {
            s[k] = (k < dk && (pc.flags & HAS_PAST) != 0u) ? float(past[(bh * dk + k) * dv + col]) : 0.0;
        }
        for (uint t = 0u; t < pc.seq; ++t) {
            uint row = b * pc.seq + t;
            uint kb = (row * pc.hk + h) * dk;
            if ((pc.flags & GATED) != 0u) {
                uint db = row * pc.d_last + h * pc.d_head;
                [[unroll]] for (uint k = 0u; k < DKMAX; ++k) {
                    if (k < dk) {
                        precise float sk = la_exp(float(decay[db + k * pc.d_key])) * s[k];
                        s[k] = sk;
                    }
                }
            }
            precise float u = float(val[(row * pc.hk + h) * dv + col]);
            if ((pc.flags & DELTA) != 0u) {
                precise float rec = 0.0;
                [[unroll]] for (uint k = 0u; k < DKMAX; ++k) {
                    if (k < dk) {
                        precise float pr = s[k] * float(key[kb + k]);
                        rec = rec + pr;
                    }
                }
                precise float diff = u - rec;
                u = float(beta[row * pc.b_last + h * pc.b_head]) * diff;
            }
            [[unroll]] for (uint k = 0u; k < DKMAX; ++k) {
                if (k < dk) {
                    precise float pr = float(key[kb + k]) * u;
                    precise float sk = s[k] + pr;
                    s[k] = sk;
                }
            }
            if ((pc.flags & WANT_Y) != 0u) {
                for (uint g = 0u; g < pc.group; ++g) {
                    uint qh = h * pc.group + g;
                    uint qb = (row * hq + qh) * dk;
                    precise float dot = 0.0;
                    [[unroll]] for (uint k = 0u; k < DKMAX; ++k) {
                        if (k < dk) {
                            precise float pr = float(q[qb + k]) * s[k];
                            dot = dot + pr;
                        }
                    }
                    precise float o = pc.scale * dot;
                    y[(row * hq + qh) * dv + col] = store(o);
                }
            }
        }
        if ((pc.flags & WANT_STATE) != 0u) {
            [[unroll]] for (uint k = 0u; k < DKMAX; ++k) {
                if (k < dk) st[(bh * dk + k) * dv + col] = store(s[k]);
            }
        }
    }
}
