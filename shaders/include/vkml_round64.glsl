// roundEven for double from floor and compares alone (ties to even, zero keeping x's sign,
// NaN and infinities through). Mesa's lavapipe (22.3, on an AMD EPYC host with AVX2 and no
// AVX-512, 2026-12-01) rounded doubles' ties the wrong way with the builtin (1.5 -> 1, 3.5 -> 3,
// -0.5 -> +0) while floor was right; float roundEven was right there. Include only where
// doubles are used: the function needs shaderFloat64.
#ifndef VKML_ROUND64_GLSL
#define VKML_ROUND64_GLSL

double vkml_round_even64(double x) {
    double f = floor(x);
    double d = x - f;  // exact, in [0, 1); NaN for NaN and infinities (then f is returned)
    double r = f;
    if (d > 0.5lf || (d == 0.5lf && f * 0.5lf != floor(f * 0.5lf)))
        r = f + 1.0lf;  // above the middle, or at it with f odd
    if (r == 0.0lf)     // +-0 with x's sign, by its bits (x * 0.0 could be folded away)
        r = packDouble2x32(uvec2(0u, unpackDouble2x32(x).y & 0x80000000u));
    return r;
}

#endif
