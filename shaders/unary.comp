#version 450
// Elementwise unary ops and casts over a contiguous tensor: o[i] = f(x[i]).
// One op per variant, chosen by the define OP_<NAME>; types by TX (input) and TO (output).
// Push constants: element count and up to two parameters (alpha/beta, min/max...).
#extension GL_GOOGLE_include_directive : require
// Local type codes (vkml_types.glsl stops at 11): 12 = float64 (double arithmetic, needs
// shaderFloat64; exp/log of its own below since GLSL has none for double), 13 = bfloat16
// (stored as its 16 bits, computed in float32, rounded to nearest even on the bits as
// ml_dtypes does: one rounding of the float32 result).
#define VKML_ST_12 double
#define VKML_CT_12 double
#define VKML_ST_13 uint16_t
#define VKML_CT_13 float
#if TX == 13 || TO == 13
#extension GL_EXT_shader_16bit_storage : require
#endif
#include "include/vkml_types.glsl"
#include "include/vkml_index.glsl"
#include "include/vkml_math.glsl"
#include "include/vkml_round16.glsl"
#undef IS_FLOAT
#define IS_FLOAT(t) ((t) == 1 || (t) == 2 || (t) == 13)
#if TX == 13
#define LOAD_X(v) uintBitsToFloat(uint(v) << 16)
#else
#define LOAD_X(v) CX(v)
#endif
#if TO == 13
#define STORE_O(i, v) o[i] = uint16_t(bf16_bits(v))
#else
#define STORE_O(i, v) o[i] = SO(v)
#endif
#if TX == 12
#include "include/vkml_round64.glsl"
// float64 exp and log (as shaders/reduce.comp's log-sum-exp): exp by Cody-Waite reduction
// x = k ln2 + r and exp(r) by its Taylor series to r^13, scaled by 2^k from the exponent
// bits; log as fdlibm's e_log.c. Both within 1 ulp of the correctly rounded value.
const double LN2_HI = 6.93147180369123816490e-01lf;
const double LN2_LO = 1.90821492927058770002e-10lf;
#define D_INF packDouble2x32(uvec2(0u, 0x7FF00000u))
bool nan64(double v) {
    uvec2 b = unpackDouble2x32(v);
    uint h = b.y & 0x7FFFFFFFu;
    return h > 0x7FF00000u || (h == 0x7FF00000u && b.x != 0u);
}
double pow2_64(int k) { return packDouble2x32(uvec2(0u, uint(k + 1023) << 20)); }
double exp64(double x) {
    if (nan64(x)) return x;
    if (x > 709.782712893384lf) return D_INF;
    if (x < -745.1332191019412lf) return 0.0lf;
    int k = int(floor(x * 1.44269504088896338700lf + 0.5lf));
    double dk = double(k);
    precise double hi = x - dk * LN2_HI;
    precise double lo = dk * LN2_LO;
    precise double r = hi - lo;
    double p = 1.0lf / 6227020800.0lf;
    p = p * r + 1.0lf / 479001600.0lf;
    p = p * r + 1.0lf / 39916800.0lf;
    p = p * r + 1.0lf / 3628800.0lf;
    p = p * r + 1.0lf / 362880.0lf;
    p = p * r + 1.0lf / 40320.0lf;
    p = p * r + 1.0lf / 5040.0lf;
    p = p * r + 1.0lf / 720.0lf;
    p = p * r + 1.0lf / 120.0lf;
    p = p * r + 1.0lf / 24.0lf;
    p = p * r + 1.0lf / 6.0lf;
    p = p * r + 0.5lf;
    precise double y = 1.0lf + (r + r * r * p);
    if (k > 1023) return y * 2.0lf * pow2_64(k - 1);
    if (k < -1022) return y * pow2_64(k + 1000) * pow2_64(-1000);
    return y * pow2_64(k);
}
double log64(double x) {
    if (nan64(x)) return x;
    if (x < 0.0lf) return packDouble2x32(uvec2(0u, 0x7FF80000u));
    if (x == 0.0lf) return -D_INF;
    if (x == D_INF) return x;
    int k = 0;
    if (x < 2.2250738585072014e-308lf) { x *= 18014398509481984.0lf; k = -54; }
    uvec2 b = unpackDouble2x32(x);
    int e = int(b.y >> 20) - 1023;
    uint hm = b.y & 0x000FFFFFu;
    uint i = (hm + 0x95F64u) & 0x100000u;
    double m = packDouble2x32(uvec2(b.x, hm | (i ^ 0x3FF00000u)));
    k += e + int(i >> 20);
    precise double f = m - 1.0lf;
    precise double s = f / (2.0lf + f);
    precise double z = s * s;
    precise double w = z * z;
    precise double t1 = w * (3.999999999940941908e-01lf + w * (2.222219843214978396e-01lf + w * 1.531383769920937332e-01lf));
    precise double t2 = z * (6.666666666666735130e-01lf + w * (2.857142874366239149e-01lf
                        + w * (1.818357216161805012e-01lf + w * 1.479819860511658591e-01lf)));
    precise double R = t2 + t1;
    precise double hfsq = 0.5lf * f * f;
    double dk = double(k);
    precise double out_ = dk * LN2_HI - ((hfsq - (s * (hfsq + R) + dk * LN2_LO)) - f);
    return out_;
}
#endif

layout(local_size_x = 256, local_size_x_id = 0) in;

#if IS_INT(TX) && !defined(OP_CAST)
#define PARAM_T CX
#else
#define PARAM_T float
#endif

layout(push_constant) uniform Push {
    uint n;
    uint pad;
    PARAM_T alpha;
    PARAM_T beta;
} pc;

layout(std430, binding = 0) readonly buffer BX { SX x[]; };
layout(std430, binding = 1) writeonly buffer BO { SO o[]; };

#if defined(OP_ASIN) || defined(OP_ACOS)
// asin for |s| <= 0.5 by its Taylor series (14 terms: < 1e-11 relative), since GLSL's own
// asin/acos may be coarse (lavapipe's are off by 1e-4); the callers fold wider arguments into
// this range (asin(a) = pi/2 - 2 asin(sqrt((1 - a) / 2))).
float vkml_asin_half(float s) {
    float z = s * s;
    float p = 0.005153309682319905;
    p = p * z + 0.005740037670841924;
    p = p * z + 0.006447210311889649;
    p = p * z + 0.0073125258735988454;
    p = p * z + 0.008390335809616815;
    p = p * z + 0.009761609529194078;
    p = p * z + 0.011551800896139705;
    p = p * z + 0.01396484375;
    p = p * z + 0.017352764423076924;
    p = p * z + 0.022372159090909092;
    p = p * z + 0.030381944444444444;
    p = p * z + 0.044642857142857144;
    p = p * z + 0.075;
    p = p * z + 0.16666666666666666;
    return s + s * z * p;
}
#endif

CO apply(CX v) {
    PARAM_T alpha = pc.alpha;
    PARAM_T beta = pc.beta;
#if defined(OP_CAST)
#if TO == 5
    return CO(v != CX(0) ? 1u : 0u);
#elif IS_FLOAT(TX) && (TO == 8 || TO == 9)
    // Float to a narrow unsigned type through int, so negative values wrap as NumPy's do
    // (a direct float -> uint conversion of a negative value is undefined).
    return CO(int(v));
#elif IS_FLOAT(TX) && TO == 10
    return v < 0.0 ? CO(int(v)) : CO(v);
#elif IS_FLOAT(TX) && TO == 11
    return v < 0.0 ? CO(int64_t(v)) : CO(v);
#else
    return CO(v);
#endif
#elif defined(OP_ABS)
#if IS_UINT(TX)
    return v;
#else
    return abs(v);
#endif
#elif defined(OP_NEG)
    return -v;
#elif defined(OP_SIGN)
#if IS_UINT(TX)
    return v > CX(0) ? CX(1) : CX(0);
#elif TX == 13
    return vkml_isnan(v) ? v : sign(v);  // NumPy's sign(NaN) is NaN
#else
    return sign(v);
#endif
#elif defined(OP_BITNOT)
    return ~v;
#elif defined(OP_ISNAN)
    return vkml_isnan(v) ? 1u : 0u;
#elif defined(OP_ISINF)
    // alpha = detect_negative, beta = detect_positive (0 or 1)
    uint b = floatBitsToUint(v);
    bool inf = (b & 0x7FFFFFFFu) == 0x7F800000u;
    return (inf && ((b >> 31) != 0u ? alpha != 0.0 : beta != 0.0)) ? 1u : 0u;
#elif defined(OP_RELU)
#if TX == 13
    return (vkml_isnan(v) || v > 0.0) ? v : 0.0;  // ml_dtypes' maximum(x, 0): -0 gives +0
#elif IS_FLOAT(TX)
    // On the bits: NVIDIA turns `v < 0 ? 0 : v` into max(v, 0), which drops NaN and -0.
    // Negative, non-zero and not NaN: above -0 (0x80000000) and at most -inf (0xFF800000).
    uint b = floatBitsToUint(v);
    return (b > 0x80000000u && b <= 0xFF800000u) ? CX(0) : v;
#else
    return v < CX(0) ? CX(0) : v;
#endif
#elif defined(OP_CLIP)
#if IS_FLOAT(TX)
    return vkml_isnan(v) ? v : min(max(v, alpha), beta);
#else
    return min(max(v, alpha), beta);
#endif
#elif defined(OP_EXP) && TX == 12
    return exp64(v);
#elif defined(OP_LOG) && TX == 12
    return log64(v);
#elif defined(OP_RECIPROCAL) && TX == 12
    return 1.0lf / v;
#elif defined(OP_EXP)
    return exp(v);
#elif defined(OP_LOG)
    return log(v);
#elif defined(OP_SQRT)
    return sqrt(v);
#elif defined(OP_RECIPROCAL)
    return vkml_div(1.0, v);
#elif defined(OP_SIN)
    return sin(v);
#elif defined(OP_COS)
    return cos(v);
#elif defined(OP_TANH)
    return vkml_tanh(v);
#elif defined(OP_SIGMOID)
    return 1.0 / (1.0 + exp(-v));
#elif defined(OP_LEAKY_RELU)
    return v < 0.0 ? alpha * v : v;
#elif defined(OP_ELU)
    return v < 0.0 ? alpha * vkml_expm1(v) : v;
#elif defined(OP_SELU)
    // alpha = Selu's alpha, beta = its gamma
    return v <= 0.0 ? beta * (alpha * vkml_expm1(v)) : beta * v;
#elif defined(OP_GELU)
    float z = v * 0.70710678118654752;
    return z < 0.0 ? 0.5 * v * vkml_erfc(-z) : 0.5 * v * (1.0 + vkml_erf(z));
#elif defined(OP_GELU_TANH)
    // 0.5 (1 + tanh(z)) = 1 / (1 + exp(-2z)): no cancellation for negative v.
    float z = 0.7978845608028654 * (v + 0.044715 * v * v * v);
    return v / (1.0 + exp(-2.0 * z));
#elif defined(OP_HARD_SIGMOID)
#if TX == 13
    if (vkml_isnan(v)) return v;  // GLSL's max/min may drop NaN; the CPU's clip keeps it
#endif
    // precise: no fma, each step rounded as NumPy's (and include/vkml_epilogue.glsl's, which
    // must give the same bits: NVIDIA contracted one and not the other)
    precise float t = alpha * v + beta;
    return max(0.0, min(1.0, t));
#elif defined(OP_HARD_SWISH)
#if TX == 13
    if (vkml_isnan(v)) return v;  // GLSL's max/min may drop NaN; the CPU's clip keeps it
#endif
    precise float t = alpha * v + beta;  // (as HardSigmoid's)
    return v * max(0.0, min(1.0, t));
#elif defined(OP_SOFTPLUS)
    return max(v, 0.0) + vkml_log1p(exp(-abs(v)));
#elif defined(OP_SOFTSIGN)
    return v / (1.0 + abs(v));
#elif defined(OP_MISH)
    return v * vkml_tanh(max(v, 0.0) + vkml_log1p(exp(-abs(v))));
#elif defined(OP_THRESHOLDED_RELU)
    return v > alpha ? v : 0.0;
#elif defined(OP_CELU)
#if TX == 13
    if (vkml_isnan(v)) return v;  // GLSL's max/min may drop NaN; the CPU keeps it
#endif
    return max(v, 0.0) + min(0.0, alpha * vkml_expm1(min(v, 0.0) / alpha));
#elif defined(OP_SWISH)
    // v * sigmoid(alpha v), with exp of a non-positive number only
    float z = alpha * v;
    float e = exp(-abs(z));
    return z >= 0.0 ? v / (1.0 + e) : v * e / (1.0 + e);
#elif defined(OP_TAN)
    return tan(v);
#elif defined(OP_ASIN)
    float a = abs(v);
    if (!(a <= 1.0)) return VKML_NAN;
    float r = a <= 0.5 ? vkml_asin_half(a) : 1.5707963267948966 - 2.0 * vkml_asin_half(sqrt(0.5 * (1.0 - a)));
    return v < 0.0 ? -r : r;
#elif defined(OP_ACOS)
    if (!(abs(v) <= 1.0)) return VKML_NAN;
    if (v > 0.5) return 2.0 * vkml_asin_half(sqrt(0.5 * (1.0 - v)));
    if (v < -0.5) return 3.141592653589793 - 2.0 * vkml_asin_half(sqrt(0.5 * (1.0 + v)));
    return 1.5707963267948966 - vkml_asin_half(v);
#elif defined(OP_ATAN)
    return atan(v);
#elif defined(OP_SINH)
    // (e^a - e^-a) / 2 through expm1: no cancellation near 0
    float a = abs(v);
    float e = vkml_expm1(a);
    float r = 0.5 * (e + e / (e + 1.0));
    return v < 0.0 ? -r : r;
#elif defined(OP_COSH)
    float e = exp(abs(v));
    return 0.5 * (e + 1.0 / e);
#elif defined(OP_ASINH)
    // log(a + sqrt(a^2 + 1)) = log1p(a + a^2 / (1 + sqrt(a^2 + 1))), odd
    float a = abs(v);
    float r = a > 1e18 ? log(a) + 0.6931471805599453 : vkml_log1p(a + a * a / (1.0 + sqrt(a * a + 1.0)));
    return v < 0.0 ? -r : r;
#elif defined(OP_ACOSH)
    // log(v + sqrt(v^2 - 1)) = log1p(t + sqrt(t (v + 1))), t = v - 1; NaN below 1
    if (!(v >= 1.0)) return VKML_NAN;
    float t = v - 1.0;
    return v > 1e18 ? log(v) + 0.6931471805599453 : vkml_log1p(t + sqrt(t * (v + 1.0)));
#elif defined(OP_ATANH)
    // 0.5 log((1 + a) / (1 - a)) = 0.5 log1p(2a / (1 - a)), odd; NaN beyond 1
    float a = abs(v);
    if (!(a <= 1.0)) return VKML_NAN;
    float r = a == 1.0 ? VKML_INF : 0.5 * vkml_log1p(2.0 * a / (1.0 - a));
    return v < 0.0 ? -r : r;
#elif defined(OP_FLOOR)
    return floor(v);
#elif defined(OP_CEIL)
    return ceil(v);
#elif defined(OP_ROUND) && TX == 12
    return vkml_round_even64(v);
#elif defined(OP_ROUND)
    return roundEven(v);
#elif defined(OP_ERF)
    return vkml_erf(v);
#elif defined(OP_NOT)
    return v == 0u ? 1u : 0u;
#else
#error "unary.comp: no OP_<NAME> defined"
#endif
}

void main() {
    VKML_FOR_EACH(i, pc.n) {
        STORE_O(i, apply(LOAD_X(x[i])));
    }
}
