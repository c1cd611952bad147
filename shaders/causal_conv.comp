#version 450
// CausalConvWithState (ONNX opset 27): a depthwise causal 1-D conv over seq = [past_state, x]
// along the last axis, that also returns the new state (seq's last k - 1 columns).
//   x (B, C, L), w (C, 1, k), bias (C), past_state (B, C, k - 1) (zeros when absent)
//   y[b, c, t] = act(sum_j seq[b, c, t + j] w[c, j] + bias[c]);  state[b, c, i] = seq[b, c, L + i]
// One invocation per element of y (the first B C L indices) or of the state (the next
// B C (k - 1)). As vkml/ops/conv.py's CPU operator, in float32 (float16 widened), the taps in
// order, each product and sum rounded (precise: no fma), then the bias, then SiLU as
// y / (1 + exp(-y)) (exp: Cephes' expf, within 1 ulp; the quotient correctly rounded), then one
// rounding to the storage type (float16 on the bits, to nearest even, as NumPy).
#extension GL_GOOGLE_include_directive : require
#include "include/vkml_types.glsl"
#include "include/vkml_index.glsl"
#include "include/vkml_math.glsl"
#include "include/vkml_round16.glsl"

layout(local_size_x = 64, local_size_x_id = 0) in;

#define HAS_BIAS 1u
#define HAS_PAST 2u
#define SILU 4u

layout(push_constant) uniform Push {
    uint bc;      // B * C
    uint chans;   // C
    uint len;     // L
    uint k;       // kernel taps
    uint flags;
    uint n;       // elements to write: B C L, plus B C (k - 1) when the state is wanted
} pc;

layout(std430, binding = 0) readonly buffer BX { SX x[]; };
layout(std430, binding = 1) readonly buffer BW { SX w[]; };
layout(std430, binding = 2) readonly buffer BB { SX bias[]; };
layout(std430, binding = 3) readonly buffer BP { SX past[]; };
layout(std430, binding = 4) writeonly buffer BY { SX y[]; };
layout(std430, binding = 5) writeonly buffer BS { SX st[]; };

SX store(float v) {
#if TX == 2
    return SX(unpackHalf2x16(f16_bits(v)).x);  // exact: already a float16 value
#else
    return SX(v);
#endif
}

// seq[row, p]: the past state for p < k - 1, then x
float seq_at(uint row, uint p) {
    uint km1 = pc.k - 1u;
    if (p < km1) return (pc.flags & HAS_PAST) != 0u ? float(past[row * km1 + p]) : 0.0;
    return float(x[row * pc.len + (p - km1)]);
}

// exp(x) for any float x (Cephes' expf): Cody-Waite reduction x = k ln2 + r, a degree-7
// polynomial, scaled by 2^k in two steps where 2^k is no normal float.
float cc_exp(float v) {
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
    uint ny = pc.bc * pc.len;
    VKML_FOR_EACH(i, pc.n) {
        if (i < ny) {
            uint row = i / pc.len, t = i - row * pc.len;
            uint c = row % pc.chans;
            precise float acc = 0.0;
            for (uint j = 0u; j < pc.k; ++j) {
                precise float prod = seq_at(row, t + j) * float(w[c * pc.k + j]);
                acc = acc + prod;
            }
            if ((pc.flags & HAS_BIAS) != 0u) acc = acc + float(bias[c]);
            float r = acc;
            if ((pc.flags & SILU) != 0u) {
                precise float den = 1.0 + cc_exp(-acc);
                r = vkml_div(acc, den);  // den = inf: the plain quotient, +-0
            }
            y[i] = store(r);
        } else {
            uint e = i - ny, km1 = pc.k - 1u;
            uint row = e / km1, p = e - row * km1;
            st[e] = SX(seq_at(row, pc.len + p));  // a copy: already of the storage type
        }
    }
}
