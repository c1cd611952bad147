#version 450
// LRN (LocalResponseNormalization, ONNX opsets 1 and 13): one invocation per element of
// y = x (N, C, S), S the product of the dimensions after C:
//   square_sum = sum of x[n, c', s]^2 over c' in [max(0, c - before), min(C - 1, c + after)],
//   before = floor((size - 1) / 2), after = ceil((size - 1) / 2);
//   y = x / (bias + k * square_sum) ^ beta,   k = float32(alpha) / float32(size) (host).
// As vkml's CPU operator computes it (vkml/ops/normalization.py): in float32 (float16 data
// widened, the result rounded once), the squares summed in channel order, without fma
// contraction (`precise`), the quotient correctly rounded (vkml_div, lrn_quotient); the power is lrn_pow
// below, within a few float32 ulps of powf on any driver (it uses neither GLSL's pow, exp2
// nor log2, which Vulkan lets drivers approximate: 2^-21 absolute or 3 + 2|x| ulps).
// Offsets are uint32: the host keeps x below 2^31 elements and clamps before/after to C.
#extension GL_GOOGLE_include_directive : require
#include "include/vkml_types.glsl"
#include "include/vkml_math.glsl"

layout(local_size_x = 256, local_size_x_id = 0) in;

layout(push_constant) uniform Push {
    uint n;         // elements, N * C * S
    uint channels;  // C
    uint inner;     // S
    uint before;    // floor((size - 1) / 2), at most C
    uint after;     // ceil((size - 1) / 2), at most C
    float k;        // alpha / size in float32
    float bias;
    float beta;
} pc;

layout(std430, binding = 0) readonly buffer BX { SX x[]; };
layout(std430, binding = 1) writeonly buffer BO { SO o[]; };

// Veltkamp split of a float32 into two halves of 12 significant bits (products exact).
void split(float a, out float hi, out float lo) {
    precise float c = 4097.0 * a;
    precise float h = c - (c - a);
    precise float l = a - h;
    hi = h;
    lo = l;
}

// a * b as an unevaluated sum p + e, exactly (Dekker; no fma, which may run unfused).
void two_prod(float a, float b, out float p, out float e) {
    float ah, al, bh, bl;
    split(a, ah, al);
    split(b, bh, bl);
    precise float pp = a * b;
    precise float ee = ((ah * bh - pp) + ah * bl + al * bh) + al * bl;
    p = pp;
    e = ee;
}

// v^beta for v > 0 finite: log2(v) = e + log2(m), m in [sqrt(1/2), sqrt(2)), log(m) by the
// atanh series of s = (m - 1) / (m + 1) with s^2 < 0.0295 (leading term kept in two parts),
// t = beta * log2(v) in two parts, 2^t = 2^round(t) * exp(f ln 2), |f| <= 1/2, by a Taylor
// polynomial, and 2^round(t) applied in two exact steps.
float lrn_pow_pos(float v, float beta) {
    int e;
    float m = frexp(v, e);  // m in [0.5, 1)
    if (m < 0.70710678) {
        m *= 2.0;
        e -= 1;
    }
    precise float num = m - 1.0;  // exact (Sterbenz)
    precise float den = m + 1.0;
    float s = vkml_div(num, den);
    // s's residual: num - s * den exactly, over den (first order)
    float sp, se;
    two_prod(s, den, sp, se);
    precise float r = ((num - sp) - se) / den;
    float z = s * s;
    float p = 2.0 / 13.0;
    p = p * z + 2.0 / 11.0;
    p = p * z + 2.0 / 9.0;
    p = p * z + 2.0 / 7.0;
    p = p * z + 2.0 / 5.0;
    p = p * z + 2.0 / 3.0;
    // ln(m) = 2 s + 2 r + s z p; in log2 units, times 1 / ln 2 = L1 + L2
    const float L1 = 1.4426950216;     // float32(1 / ln 2)
    const float L2 = 1.9259629911e-8;  // 1 / ln 2 - L1
    precise float tail = 2.0 * r + s * z * p;
    float h1, h2;
    two_prod(2.0 * s, L1, h1, h2);
    precise float lo = h2 + (2.0 * s * L2 + tail * 1.4426950409);
    // log2(v) = e + h1 + lo; t = beta * that, in two parts
    float ep, ee, hp, he;
    two_prod(beta, float(e), ep, ee);
    two_prod(beta, h1, hp, he);
    precise float t_hi = ep + hp;
    precise float bv = t_hi - ep;
    precise float t_err = (ep - (t_hi - bv)) + (hp - bv);  // two_sum's rounding error
    precise float t_lo = t_err + ee + he + beta * lo;
    if (t_hi >= 128.0) return VKML_INF;  // 2^t_hi rounds beyond float32's largest (2^128 - 2^104)
    if (t_hi < -151.0) return 0.0;       // below half the smallest subnormal
    float nr = round(t_hi);
    precise float f = (t_hi - nr) + t_lo;  // t_hi - nr is exact
    // 2^f = exp(f ln 2), |f ln 2| <= 0.35: Taylor to degree 8 (truncation < 3e-10)
    precise float g = f * 0.69314718056;
    float q = 1.0 + g / 8.0;
    q = 1.0 + g / 7.0 * q;
    q = 1.0 + g / 6.0 * q;
    q = 1.0 + g / 5.0 * q;
    q = 1.0 + g / 4.0 * q;
    q = 1.0 + g / 3.0 * q;
    q = 1.0 + g / 2.0 * q;
    precise float ex = 1.0 + g * q;
    int ni = int(nr);  // in [-151, 128]
    if (ni == 128 && ex >= 1.0) return VKML_INF;
    // ex * 2^ni as two exact powers of two in [-76, 64] (no ldexp: GLSL leaves its overflow
    // undefined): the first product is exact, the second rounds once (to a subnormal, or to
    // zero where the device flushes them)
    int n1 = ni / 2;
    precise float y1 = ex * intBitsToFloat((n1 + 127) << 23);
    precise float y2 = y1 * intBitsToFloat((ni - n1 + 127) << 23);
    return y2;
}

// v^beta with NumPy's (powf's) conventions where the base is zero, negative, infinite or NaN.
float lrn_pow(float v, float beta) {
    if (beta == 0.0) return 1.0;
    if (beta == 1.0 || v == 1.0) return v;
    if (vkml_isnan(v) || vkml_isnan(beta)) return v + beta;
    if (v > 0.0 && v < VKML_INF) {
        if (v < 1.1754944e-38) {  // subnormal: frexp may not take it
            return lrn_pow_pos(v * 16777216.0, beta) * lrn_pow_pos(5.9604645e-8, beta);
        }
        return lrn_pow_pos(v, beta);
    }
    return vkml_pow(v, beta);  // 0, negative or infinite bases
}

// x / d, correctly rounded where vkml_div promises it. Vulkan leaves division by |d| > 2^126
// to the driver (NVIDIA's reciprocal of such a divisor is subnormal and flushes to zero, so
// the quotient came out 0): those divisors are scaled by 2^-64 first and the quotient scaled
// back once (exact unless the result is subnormal); an infinite divisor gives the signed zero.
float lrn_quotient(float a, float d) {
    float ad = abs(d);
    if (ad == VKML_INF && !vkml_isnan(a) && abs(a) < VKML_INF) {
        return a * (d > 0.0 ? 0.0 : uintBitsToFloat(0x80000000u));
    }
    if (ad > 8.5070592e37 && ad < VKML_INF) {  // 2^126
        precise float q = vkml_div(a, d * 5.421010862e-20);  // 2^-64
        precise float y = q * 5.421010862e-20;
        return y;
    }
    return vkml_div(a, d);
}

void main() {
    for (uint e = gl_GlobalInvocationID.x; e < pc.n; e += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
        uint t = e / pc.inner;
        uint c = t % pc.channels;
        uint c0 = c >= pc.before ? c - pc.before : 0u;
        uint c1 = min(c + pc.after, pc.channels - 1u);
        uint p = e - (c - c0) * pc.inner;
        precise float sum = 0.0;
        for (uint j = c0; j <= c1; ++j) {
            precise float a = float(x[p]);
            precise float sq = a * a;
            sum = sum + sq;
            p += pc.inner;
        }
        precise float kv = pc.k * sum;
        precise float base = pc.bias + kv;
        o[e] = SO(lrn_quotient(float(x[e]), lrn_pow(base, pc.beta)));
    }
}
