#version 450
// Elementwise unary ops and casts over a contiguous tensor: o[i] = f(x[i]).
// One op per variant, chosen by the define OP_<NAME>; types by TX (input) and TO (output).
// Push constants: element count and up to two parameters (alpha/beta, min/max...).
#extension GL_GOOGLE_include_directive : require
#include "include/vkml_types.glsl"
#include "include/vkml_index.glsl"
#include "include/vkml_math.glsl"

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

CO apply(CX v) {
    PARAM_T alpha = pc.alpha;
    PARAM_T beta = pc.beta;
#if defined(OP_CAST)
#if TO == 5
    return CO(v != CX(0) ? 1u : 0u);
#elif TX == 5
    return CO(v);
#else
    return CO(v);
#endif
#elif defined(OP_ABS)
    return abs(v);
#elif defined(OP_NEG)
    return -v;
#elif defined(OP_SIGN)
    return sign(v);
#elif defined(OP_RELU)
#if IS_FLOAT(TX)
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
#elif defined(OP_EXP)
    return exp(v);
#elif defined(OP_LOG)
    return log(v);
#elif defined(OP_SQRT)
    return sqrt(v);
#elif defined(OP_RECIPROCAL)
    return 1.0 / v;
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
    return max(0.0, min(1.0, alpha * v + beta));
#elif defined(OP_HARD_SWISH)
    return v * max(0.0, min(1.0, alpha * v + beta));
#elif defined(OP_SOFTPLUS)
    return max(v, 0.0) + vkml_log1p(exp(-abs(v)));
#elif defined(OP_SOFTSIGN)
    return v / (1.0 + abs(v));
#elif defined(OP_MISH)
    return v * vkml_tanh(max(v, 0.0) + vkml_log1p(exp(-abs(v))));
#elif defined(OP_FLOOR)
    return floor(v);
#elif defined(OP_CEIL)
    return ceil(v);
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
        o[i] = SO(apply(CX(x[i])));
    }
}
