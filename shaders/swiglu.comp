#version 450
// SwiGLU (ONNX opset 28): o = A * sigmoid(alpha A) * B, elementwise over A and B of one shape.
//
// In the CPU operator's order (vkml/ops/activations.py SwiGLU, float16 widened to float32):
//   z = alpha * a;  e = exp(-|z|);  s = 1 / (1 + e);  sig = z >= 0 ? s : e * s;
//   o = (a * sig) * b
// every step rounded to float (precise: no fma contraction), 1 / (1 + e) correctly rounded
// (vkml_div: Vulkan lets a division be 2.5 ulp off), so only exp may differ from NumPy's. The
// exp is this shader's own (swiglu_exp, Cephes' expf: within 1 ulp of the correctly rounded
// value, the same on every driver), not GLSL's, which Vulkan lets be 3 + 2|x| ulp off (lavapipe's
// is: up to ~13 ulp in SwiGLU's result). NumPy's own float32 exp is up to ~2.5 ulp off (its SIMD
// loops), so the two may differ by a few ulp, never more.
#extension GL_GOOGLE_include_directive : require
#include "include/vkml_types.glsl"
#include "include/vkml_index.glsl"
#include "include/vkml_math.glsl"

layout(local_size_x = 256, local_size_x_id = 0) in;

layout(push_constant) uniform Push {
    uint n;
    float alpha;
} pc;

layout(std430, binding = 0) readonly buffer BA { SX a[]; };
layout(std430, binding = 1) readonly buffer BB { SY b[]; };
layout(std430, binding = 2) writeonly buffer BO { SO o[]; };

// exp(x) for x <= 0 (the caller's -|z|; NaN passes through): Cody-Waite reduction
// x = k ln2 + r with ln2 = 0.693359375 - 2.12194440e-4 (k * 0.693359375 is exact), exp(r) by
// Cephes' degree-7 minimax polynomial, scaled by 2^k from its exponent bits (two steps for a
// subnormal result).
float swiglu_exp(float x) {
    if (!(x >= -104.0)) return vkml_isnan(x) ? x : 0.0;  // exp(-104) < 2^-150 rounds to 0
    float k = floor(x * 1.44269504088896341 + 0.5);
    precise float r = (x - k * 0.693359375) - k * -2.12194440e-4;
    precise float z = r * r;
    precise float p = 1.9875691500e-4;
    p = p * r + 1.3981999507e-3;
    p = p * r + 8.3334519073e-3;
    p = p * r + 4.1665795894e-2;
    p = p * r + 1.6666665459e-1;
    p = p * r + 5.0000001201e-1;
    precise float y = p * z + r + 1.0;
    int ki = int(k);  // in [-150, 0]
    if (ki < -126) return y * uintBitsToFloat(uint(ki + 64 + 127) << 23) * uintBitsToFloat(uint(127 - 64) << 23);
    return y * uintBitsToFloat(uint(ki + 127) << 23);
}

void main() {
    VKML_FOR_EACH(i, pc.n) {
        float x = float(a[i]);
        float y = float(b[i]);
        precise float z = pc.alpha * x;
        float e = swiglu_exp(-abs(z));
        precise float one_e = 1.0 + e;
        float s = vkml_div(1.0, one_e);
        precise float es = e * s;
        float sig = z >= 0.0 ? s : es;
        precise float xs = x * sig;
        precise float r = xs * y;
        o[i] = SO(r);
    }
}
