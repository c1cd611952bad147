#version 450
// Cast between any two element types where at least one is "exotic" (float64, bfloat16, the
// float8 flavours, float8e8m0, float4e2m1, int4/uint4/int2/uint2), bit-exact with vkml/ops/cast.py.
// float8e8m0 (powers of two 2^(c - 127), 255 NaN, no sign) is encoded from the value's float32
// bits by the round mode (up, down, nearest with ties up) as the CPU's _to_e8m0 does.
// Everything is integer bit manipulation (no float arithmetic, so no shaderFloat64): each
// element is decoded into sign * m * 2^e (m a 64-bit integer) and re-encoded with rounding to
// nearest even. Types come as codes in push constants (vkml/kernels/cast_ext.py lists them), so
// one variant serves every pair whose storage sizes match: castx_b<in>_b<out> (1, 2, 4, 8 bytes;
// 4-bit and 2-bit types are one byte per element, as ml_dtypes keeps them).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#if SIN == 1 || SOUT == 1
#extension GL_EXT_shader_8bit_storage : require
#endif
#if SIN == 2 || SOUT == 2
#extension GL_EXT_shader_16bit_storage : require
#endif
#include "include/vkml_index.glsl"

layout(local_size_x = 256, local_size_x_id = 0) in;

layout(push_constant) uniform Push {
    uint n;
    uint src;       // type code of the input
    uint dst;       // type code of the output
    uint saturate;  // float8 targets: clamp out-of-range values (and infinities) to the largest finite
    uint round;     // float8e8m0 targets: 0 up, 1 down, 2 nearest
} pc;

#if SIN == 1
#define SX uint8_t
#elif SIN == 2
#define SX uint16_t
#elif SIN == 4
#define SX uint
#else
#define SX uint64_t
#endif
#if SOUT == 1
#define SO uint8_t
#elif SOUT == 2
#define SO uint16_t
#elif SOUT == 4
#define SO uint
#else
#define SO uint64_t
#endif

layout(std430, binding = 0) readonly buffer BX { SX x[]; };
layout(std430, binding = 1) writeonly buffer BO { SO o[]; };

// Type codes (vkml/kernels/cast_ext.py: CODES).
const uint F32 = 1u, F16 = 2u, I32 = 3u, I64 = 4u, BOOL = 5u, I8 = 6u, I16 = 7u, U8 = 8u, U16 = 9u,
           U32 = 10u, U64 = 11u, F64 = 12u, BF16 = 13u, E4M3FN = 14u, E4M3FNUZ = 15u, E5M2 = 16u,
           E5M2FNUZ = 17u, F4E2M1 = 18u, I4 = 19u, U4 = 20u, I2 = 21u, U2 = 22u, E8M0 = 23u;

// A decoded value: kind 0 finite (sign, m * 2^e), 1 infinity, 2 NaN (payload: the top fraction
// bits, left-aligned in 52 bits as in float64).
const uint64_t CANON = ~0ul;  // payload of a NaN that has none (the float8 types')

struct Val {
    uint kind;
    uint sign;
    uint64_t m;
    int e;
    uint64_t payload;
};

bool is_float(uint c) {
    return c == F32 || c == F16 || c == F64 || (c >= BF16 && c <= F4E2M1) || c == E8M0;
}

// Float format of a code: exponent bits, mantissa bits, bias.
void fmt(uint c, out int eb, out int mb, out int bias) {
    if (c == F32) { eb = 8; mb = 23; bias = 127; }
    else if (c == F16) { eb = 5; mb = 10; bias = 15; }
    else if (c == F64) { eb = 11; mb = 52; bias = 1023; }
    else if (c == BF16) { eb = 8; mb = 7; bias = 127; }
    else if (c == E4M3FN) { eb = 4; mb = 3; bias = 7; }
    else if (c == E4M3FNUZ) { eb = 4; mb = 3; bias = 8; }
    else if (c == E5M2) { eb = 5; mb = 2; bias = 15; }
    else if (c == E5M2FNUZ) { eb = 5; mb = 2; bias = 16; }
    else { eb = 2; mb = 1; bias = 1; }  // F4E2M1
}

int bits_of(uint c) {
    if (c == F64 || c == I64 || c == U64) return 64;
    if (c == F32 || c == I32 || c == U32) return 32;
    if (c == F16 || c == BF16 || c == I16 || c == U16) return 16;
    if (c == I4 || c == U4 || c == F4E2M1) return 4;
    if (c == I2 || c == U2) return 2;
    return 8;
}

Val decode(uint c, uint64_t r) {
    Val v;
    v.kind = 0u; v.sign = 0u; v.m = 0ul; v.e = 0; v.payload = 0ul;
    if (c == E8M0) {  // 2^(r - 127); 255 is NaN
        r &= 0xFFul;
        if (r == 0xFFul) { v.kind = 2u; v.payload = CANON; return v; }
        v.m = 1ul;
        v.e = int(r) - 127;
        return v;
    }
    if (!is_float(c)) {
        int nb = bits_of(c);
        uint64_t mask = nb == 64 ? ~0ul : ((1ul << nb) - 1ul);
        r &= mask;
        bool signed_ = c == I32 || c == I64 || c == I8 || c == I16 || c == I4 || c == I2;
        if (c == BOOL) r = r != 0ul ? 1ul : 0ul;
        if (signed_ && ((r >> (nb - 1)) & 1ul) != 0ul) {
            v.sign = 1u;
            v.m = (~r + 1ul) & mask;          // |value|; the most negative one stays 2^(nb-1)
            if (v.m == 0ul) v.m = 1ul << (nb - 1);
        } else {
            v.m = r;
        }
        return v;
    }
    int eb, mb, bias;
    fmt(c, eb, mb, bias);
    int nb = 1 + eb + mb;
    uint64_t fracmask = (1ul << mb) - 1ul;
    uint64_t emax = (1ul << eb) - 1ul;
    uint64_t frac = r & fracmask;
    uint64_t ex = (r >> mb) & emax;
    v.sign = uint((r >> (nb - 1)) & 1ul);
    if (c == E4M3FNUZ || c == E5M2FNUZ) {
        if ((r & 0xFFul) == 0x80ul) { v.kind = 2u; v.sign = 1u; v.payload = CANON; return v; }
    } else if (c == E4M3FN) {
        if ((r & 0x7Ful) == 0x7Ful) { v.kind = 2u; v.payload = CANON; return v; }
    } else if (c != F4E2M1 && ex == emax) {
        v.kind = frac == 0ul ? 1u : 2u;
        v.payload = mb <= 3 ? CANON : frac << (52 - mb);
        return v;
    }
    if (ex == 0ul) {
        v.m = frac;
        v.e = 1 - bias - mb;
    } else {
        v.m = frac | (1ul << mb);
        v.e = int(ex) - bias - mb;
    }
    return v;
}

// Index of the highest set bit of m (m != 0).
int msb64(uint64_t m) {
    uint hi = uint(m >> 32);
    return hi != 0u ? 32 + findMSB(hi) : findMSB(uint(m));
}

// m * 2^e rounded to an integer multiple of 2^q, to nearest even: the multiple's count.
uint64_t round_to(uint64_t m, int e, int q) {
    int s = q - e;  // bits to drop
    if (s <= 0) return s < -63 ? 0ul : m << (-s);  // (callers keep this in range)
    if (s > 64) return 0ul;
    uint64_t kept = s == 64 ? 0ul : m >> s;
    uint64_t rem = s == 64 ? m : (m & ((1ul << s) - 1ul));
    uint64_t hw = 1ul << (s - 1);
    if (rem > hw || (rem == hw && (kept & 1ul) != 0ul)) kept += 1ul;
    return kept;
}

uint64_t encode_float(uint c, Val v, bool sat) {
    int eb, mb, bias;
    fmt(c, eb, mb, bias);
    int nb = 1 + eb + mb;
    uint64_t sbit = uint64_t(v.sign) << (nb - 1);
    bool fnuz = c == E4M3FNUZ || c == E5M2FNUZ;
    bool ieee = !(fnuz || c == E4M3FN || c == F4E2M1);  // has infinities
    uint64_t emaxf = (1ul << eb) - 1ul;
    // largest finite magnitude's bits
    uint64_t maxf = fnuz ? 0x7Ful : (c == E4M3FN ? 0x7Eul : (c == F4E2M1 ? 0x7ul : ((emaxf << mb) - 1ul)));
    uint64_t nanb;
    if (fnuz) nanb = 0x80ul;
    else if (c == E4M3FN) nanb = sbit | 0x7Ful;
    else if (c == F4E2M1) nanb = v.sign != 0u ? 0ul : 0x8ul;  // ml_dtypes: NaN -> the other zero
    else {
        // The float8 NaNs and ml_dtypes' bfloat16 encoder give a quiet NaN without payload, and
        // so does bfloat16 -> float16; bfloat16 -> float32 keeps the bits. NumPy's float16
        // keeps the top payload bits (1 if they are 0); float32 <-> float64 quiet the NaN.
        uint64_t pl = v.payload >> (52 - mb);
        uint src = pc.src;
        if (v.payload == CANON || c == BF16 || mb <= 3 || (c == F16 && src == BF16)) pl = 1ul << (mb - 1);
        else if (c == F16) pl = pl == 0ul ? 1ul : pl;
        else if (src == F32 || src == F64 || (src == BF16 && c == F64)) pl |= 1ul << (mb - 1);
        nanb = sbit | (emaxf << mb) | pl;
    }
    if (v.kind == 2u) return nanb;
    uint64_t over = ieee ? (sbit | (emaxf << mb)) : (c == F4E2M1 ? (sbit | maxf) : nanb);
    if (sat) over = sbit | maxf;
    if (v.kind == 1u) return over;
    if (v.m == 0ul) return fnuz ? 0ul : sbit;
    int top = msb64(v.m) + v.e;          // exponent of the leading bit
    int emin = 1 - bias;                 // smallest normal exponent
    int emaxv = ieee ? int(emaxf) - 1 - bias : int(emaxf) - bias;
    if (top > emaxv + 1) return over;
    int q = max(top, emin) - mb;         // the quantum's exponent
    if (top < emin - mb - 2) return fnuz ? 0ul : sbit;   // below half the smallest subnormal
    uint64_t k = round_to(v.m, v.e, q);
    // k counts quanta: with the leading bit it is the encoding's magnitude past exponent emin
    uint64_t mag = (uint64_t(max(top, emin) - emin) << mb) + k;
    if (top < emin) mag = k;
    if (mag > maxf) return over;
    if (mag == 0ul) return fnuz ? 0ul : sbit;
    return sbit | mag;
}

// Truncated toward zero, in the low `nb` bits (two's complement). `wide`: the conversion goes
// through int64 (else int32, as x86's cvtt* do): NaN and out-of-range give the most negative.
uint64_t encode_int_from_float(Val v, int nb, bool wide) {
    uint64_t imin = wide ? 0x8000000000000000ul : 0xFFFFFFFF80000000ul;
    if (v.kind != 0u) return imin;
    uint64_t t;
    if (v.m == 0ul) t = 0ul;
    else {
        int top = msb64(v.m) + v.e;
        if (top >= (wide ? 63 : 31)) {
            return imin;
        }
        t = v.e >= 0 ? v.m << v.e : (v.e <= -64 ? 0ul : v.m >> (-v.e));
    }
    return v.sign != 0u ? ~t + 1ul : t;
}

// float32 bits -> float8e8m0, as vkml/ops/cast.py _to_e8m0 (the sign is ignored).
uint64_t encode_e8m0(uint b, bool sat, uint mode) {
    uint e = (b >> 23) & 0xFFu, m = b & 0x7FFFFFu, hm = 0x400000u;
    bool normal = e > 0u;
    uint code;
    bool below;
    if (mode == 0u) {         // up
        code = normal ? e + (m != 0u ? 1u : 0u) : (m > hm ? 1u : 0u);
        below = false;
    } else if (mode == 1u) {  // down
        code = normal ? e : 0u;
        below = !normal && m < hm;
    } else {                  // nearest, ties up; denormals lie between 0 and 2^-126, code 0 being 2^-127
        code = normal ? e + (m >= hm ? 1u : 0u) : (m >= hm + hm / 2u ? 1u : 0u);
        below = !normal && m < hm / 2u;
    }
    uint a = b & 0x7FFFFFFFu;
    bool over = code > 254u, inf = a == 0x7F800000u;
    if (sat) code = (over || inf) ? 254u : (below ? 0u : code);
    else if (over || inf || below) code = 255u;
    if (a > 0x7F800000u) code = 255u;
    return uint64_t(code);
}

uint64_t convert(uint64_t r) {
    uint src = pc.src, dst = pc.dst;
    Val v = decode(src, r);
    if (dst == E8M0)  // through float32, as the CPU
        return encode_e8m0(uint(encode_float(F32, v, false)), pc.saturate != 0u, pc.round);
    bool sat = pc.saturate != 0u && dst >= E4M3FN && dst <= E5M2FNUZ;
    if (is_float(dst)) {
        // float64 and integers go to the narrow ml_dtypes types through float32, as the CPU does
        if (dst != F32 && dst != F64 && dst != F16 && (src == F64 || !is_float(src))) {
            v = decode(F32, encode_float(F32, v, false));
        } else if (dst == F16 && !is_float(src) && bits_of(src) > 16) {
            v = decode(F32, encode_float(F32, v, false));   // NumPy: int -> float16 via float
        }
        return encode_float(dst, v, sat);
    }
    if (dst == BOOL) {
        return (v.kind != 0u || v.m != 0ul) ? 1ul : 0ul;
    }
    int nb = bits_of(dst);
    uint64_t mask = nb == 64 ? ~0ul : ((1ul << nb) - 1ul);
    if (!is_float(src)) {
        uint64_t t = v.sign != 0u ? ~v.m + 1ul : v.m;
        return t & mask;
    }
    // From a float: truncated through int32 (int64 for 64-bit and uint32 targets), then wrapped.
    // The CPU's results for NaN, infinities and values beyond that range are what its C casts
    // happen to give (undefined behaviour, differing between ml_dtypes' and NumPy's loops);
    // these give the most negative integer of the intermediate, as x86's scalar conversions do.
    if (src >= E4M3FN && src <= E5M2FNUZ && nb >= 8 && v.kind != 0u) {
        // ml_dtypes' float8 -> integer loops: NaN is 0, infinities saturate
        bool sgn = dst == I8 || dst == I16 || dst == I32 || dst == I64;
        if (v.kind == 2u) return 0ul;
        if (v.sign == 0u) return sgn ? (mask >> 1) : mask;
        return sgn ? ((~(mask >> 1)) & mask) : 0ul;
    }
    bool wide = nb == 64 || dst == U32;
    return encode_int_from_float(v, nb, wide) & mask;
}

void main() {
    VKML_FOR_EACH(i, pc.n) {
#if SIN < 4
        uint64_t r = uint64_t(uint(x[i]));
#else
        uint64_t r = uint64_t(x[i]);
#endif
#if SOUT < 4
        o[i] = SO(uint(convert(r)));
#else
        o[i] = SO(convert(r));
#endif
    }
}
