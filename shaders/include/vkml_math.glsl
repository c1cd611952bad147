// Accurate float32 math that GLSL lacks or that drivers may approximate coarsely.
// Coefficients: tools/fit_math_coeffs.py (relative least squares, checked in float32).
#ifndef VKML_MATH_GLSL
#define VKML_MATH_GLSL

#define VKML_INF uintBitsToFloat(0x7F800000u)
#define VKML_NAN uintBitsToFloat(0x7FC00000u)

// A bit test, not x != x: drivers may fold that comparison away (NVIDIA does).
bool vkml_isnan(float x) { return (floatBitsToUint(x) & 0x7FFFFFFFu) > 0x7F800000u; }

// a / b correctly rounded where |a / b| and |b| lie in [2^-40, 2^40] (elsewhere the plain
// quotient). Vulkan allows float division 2.5 ulp of error and NVIDIA computes a * rcp(b); a
// quotient one ulp off changes what Round, Floor or a Cast to an integer make of it
// (DynamicQuantizeLinear's x / scale). The residual a - q*b is made exact with Dekker's
// product (Veltkamp halves; no fma, which a driver may run unfused), then corrects q. The range
// keeps every partial product a normal number.
float vkml_div(float a, float b) {
    precise float q = a / b;
    float aq = abs(q), ab = abs(b);
    if (!(aq >= 9.094947e-13 && aq <= 1.0995116e12 && ab >= 9.094947e-13 && ab <= 1.0995116e12)) return q;
    precise float cq = 4097.0 * q;
    precise float qh = cq - (cq - q);
    precise float ql = q - qh;
    precise float cb = 4097.0 * b;
    precise float bh = cb - (cb - b);
    precise float bl = b - bh;
    precise float p = q * b;
    precise float e = ((qh * bh - p) + qh * bl + ql * bh) + ql * bl;
    precise float r = (a - p) - e;
    precise float d = r / b;
    precise float out_ = q + d;
    return out_;
}

// log(1 + u) for u >= 0 (softplus, mish), accurate in relative terms. GLSL's log near 1
// only promises 2^-21 absolute error, so instead: log(1+u) = 2 atanh(s), s = u / (2 + u)
// in [0, 1/3] for u <= 1, as an odd series in s; plain log beyond.
float vkml_log1p(float u) {
    if (u > 1.0) return log(1.0 + u);
    float s = u / (2.0 + u);
    float z = s * s;
    float p = 1.0 / 17.0;
    p = p * z + 1.0 / 15.0;
    p = p * z + 1.0 / 13.0;
    p = p * z + 1.0 / 11.0;
    p = p * z + 1.0 / 9.0;
    p = p * z + 1.0 / 7.0;
    p = p * z + 1.0 / 5.0;
    p = p * z + 1.0 / 3.0;
    return 2.0 * s + 2.0 * s * z * p;
}

// exp(x) - 1 without cancellation near 0: the Taylor series (nested Horner form) for
// |x| < 0.5 (truncation error < 2e-11 relative), exp(x) - 1 beyond. (Kahan's
// (u-1)*x/log(u) trick needs a log accurate near 1, which Vulkan does not promise.)
float vkml_expm1(float x) {
    if (abs(x) < 0.5) {
        float p = 1.0 + x / 10.0;
        p = 1.0 + x / 9.0 * p;
        p = 1.0 + x / 8.0 * p;
        p = 1.0 + x / 7.0 * p;
        p = 1.0 + x / 6.0 * p;
        p = 1.0 + x / 5.0 * p;
        p = 1.0 + x / 4.0 * p;
        p = 1.0 + x / 3.0 * p;
        p = 1.0 + x / 2.0 * p;
        return x * p;
    }
    return exp(x) - 1.0;
}

// tanh with < 1 ulp error near 0 (polynomial) and no overflow for large |x|.
float vkml_tanh(float x) {
    float a = abs(x);
    if (a < 0.625) {
        float u = x * x;
        float p = 2.3079575200e-03;
        p = p * u - 8.3598933958e-03;
        p = p * u + 2.1774925816e-02;
        p = p * u - 5.3960227075e-02;
        p = p * u + 1.3333309589e-01;
        p = p * u - 3.3333333260e-01;
        return x + x * u * p;
    }
    float t = exp(-2.0 * a);
    float r = (1.0 - t) / (1.0 + t);
    return x < 0.0 ? -r : (x > 0.0 ? r : x);  // keeps NaN
}

// erfc(a) for a >= 1: exp(-a^2) G(1/a); a^2 is split into hi + lo with fma so that the
// rounding of a*a does not cost relative accuracy.
float vkml_erfc_tail(float a) {
    if (a >= 10.0) return 0.0;
    float t = 1.0 / a;
    float g = -4.8734065835e-02;
    g = g * t + 3.3093632122e-01;
    g = g * t - 9.9417238295e-01;
    g = g * t + 1.7177648170e+00;
    g = g * t - 1.8242634906e+00;
    g = g * t + 1.1038260830e+00;
    g = g * t - 1.6291762597e-01;
    g = g * t - 2.5669514898e-01;
    g = g * t - 2.4850337353e-03;
    g = g * t + 5.6432738825e-01;
    g = g * t - 3.2857037798e-06;
    float hi = a * a;
    float lo = fma(a, a, -hi);
    return exp(-hi) * (1.0 - lo) * g;
}

float vkml_erf(float x) {
    float a = abs(x);
    if (a < 1.0) {
        float u = x * x;
        float q = -9.6897334846e-06;
        q = q * u + 1.1274734952e-04;
        q = q * u - 8.4854384430e-04;
        q = q * u + 5.2211386573e-03;
        q = q * u - 2.6865475498e-02;
        q = q * u + 1.1283783443e-01;
        q = q * u - 3.7612638553e-01;
        q = q * u + 1.1283791671e+00;
        return x * q;
    }
    if (vkml_isnan(x)) return x;
    float r = 1.0 - vkml_erfc_tail(a);
    return x < 0.0 ? -r : r;
}

// erfc for any x, accurate in relative terms for large positive x.
float vkml_erfc(float x) {
    if (x >= 1.0) return vkml_erfc_tail(x);
    if (x <= -1.0) return 2.0 - vkml_erfc_tail(-x);
    return 1.0 - vkml_erf(x);
}

// x^y for float x and y with NumPy's conventions for negative bases.
float vkml_pow(float x, float y) {
    if (y == 0.0) return 1.0;
    if (vkml_isnan(x) || vkml_isnan(y)) return x + y;
    float ay = abs(y);
    bool y_int = floor(y) == y;
    if (x == 0.0) {
        if (y > 0.0) return (y_int && mod(ay, 2.0) == 1.0) ? x : 0.0;
        return (y_int && mod(ay, 2.0) == 1.0) ? (1.0 / x) : VKML_INF;
    }
    if (x < 0.0 && !y_int) return VKML_NAN;
    float r = exp2(y * log2(abs(x)));
    if (x < 0.0 && mod(ay, 2.0) == 1.0) r = -r;
    return r;
}

#endif
