// float32 -> float16 / bfloat16 bits, rounded to nearest even on the bits, so that no
// driver's conversion decides a result (an H100 kept float(float16_t(x)) at float32
// precision, where NumPy rounds every float16 addition).
#ifndef VKML_ROUND16_GLSL
#define VKML_ROUND16_GLSL

// float32 -> float16 bits, to nearest even; NaN keeps its top payload bits (1 if none), as NumPy.
uint f16_bits(float v) {
    uint b = floatBitsToUint(v);
    uint s = (b >> 16) & 0x8000u;
    uint a = b & 0x7FFFFFFFu;
    if (a > 0x7F800000u) {
        uint pl = (a >> 13) & 0x3FFu;
        return s | 0x7C00u | (pl == 0u ? 1u : pl);
    }
    if (a >= 0x477FF000u) return s | 0x7C00u;  // 65520 and beyond round to infinity
    if (a < 0x38800000u) {                     // below 2^-14: multiples of 2^-24 (exact scaling)
        return s | uint(roundEven(uintBitsToFloat(a) * 16777216.0));
    }
    uint t = a - 0x38000000u;  // rebiased
    uint r = t >> 13, rem = t & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u) != 0u)) r += 1u;
    return s | r;
}

// v rounded to float16 and back on the bits: what float(float16_t(v)) means, whichever driver.
float f16_round(float v) {
    return unpackHalf2x16(f16_bits(v)).x;
}

// float32 -> bfloat16 bits, to nearest even; NaN is quiet without payload, as ml_dtypes.
uint bf16_bits(float v) {
    uint b = floatBitsToUint(v);
    if ((b & 0x7FFFFFFFu) > 0x7F800000u) return ((b >> 16) & 0x8000u) | 0x7FC0u;
    return (b + 0x7FFFu + ((b >> 16) & 1u)) >> 16;
}

#endif
