#version 450
// Elementwise binary ops with NumPy broadcasting up to rank 8: o[i] = f(a[ia], b[ib]).
// Types: TX (a), TY (b), TO (output). Shape and strides (in elements, 0 = broadcast) are
// push constants: 4 + 4 + 3 * 32 = 104 bytes.
#extension GL_GOOGLE_include_directive : require
// float64 (type code 12, as cast_ext.comp numbers it; vkml_types.glsl stops at 11) is Mod's
// alone: held as its bits (uint64_t) and computed with integer operations only, so it needs
// shaderInt64 and no shaderFloat64.
// Every other float64 op (arithmetic, Max/Min, comparisons) computes in double (needs
// shaderFloat64). Type code 13 = bfloat16: stored as its 16 bits, computed in float32 and
// rounded to nearest even on the bits (bf16_bits), which is what ml_dtypes' ufuncs do.
#if defined(OP_MOD) || defined(OP_FMOD)
#define VKML_ST_12 uint64_t
#define VKML_CT_12 uint64_t
#if TX == 12
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#endif
#else
#define VKML_ST_12 double
#define VKML_CT_12 double
#endif
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
#define LOAD_Y(v) uintBitsToFloat(uint(v) << 16)
#else
#define LOAD_X(v) CX(v)
#define LOAD_Y(v) CY(v)
#endif
#if TO == 13
#define STORE_O(i, v) o[i] = uint16_t(bf16_bits(v))
#else
#define STORE_O(i, v) o[i] = SO(v)
#endif
#if (defined(OP_FMOD) || defined(OP_MOD)) && IS_FLOAT(TX)
// Float Mod reads and writes bits (float16's widened and narrowed by f16_to_f32/f32_to_f16):
// device float loads and conversions may drop NaN payloads or flush subnormals.
#undef SX
#undef SY
#undef SO
#undef CX
#undef CY
#undef CO
#if TX == 2
#define SX uint16_t
#define SY uint16_t
#define SO uint16_t
#else
#define SX uint
#define SY uint
#define SO uint
#endif
#define CX uint
#define CY uint
#define CO uint
#endif

layout(local_size_x = 256, local_size_x_id = 0) in;

layout(push_constant) uniform Push {
    uint n;
    uint rank;
    uint shape[VKML_MAX_RANK];
    uint sa[VKML_MAX_RANK];
    uint sb[VKML_MAX_RANK];
} pc;

layout(std430, binding = 0) readonly buffer BA { SX a[]; };
layout(std430, binding = 1) readonly buffer BB { SY b[]; };
layout(std430, binding = 2) writeonly buffer BO { SO o[]; };

#if IS_INT(TX) && IS_INT(TY)
// Integer power by squaring (wraps like NumPy); negative exponents truncate toward zero.
CX ipow(CX base, CY e) {
    if (e < CY(0)) {
        if (base == CX(1)) return CX(1);
        if (base == CX(-1)) return (e % CY(2)) == CY(0) ? CX(1) : CX(-1);
        return CX(0);
    }
    CX r = CX(1);
    while (e > CY(0)) {
        if ((e & CY(1)) != CY(0)) r *= base;
        base *= base;
        e >>= 1;
    }
    return r;
}
#endif

#if (defined(OP_FMOD) || defined(OP_MOD)) && (IS_FLOAT(TX) || TX == 12)
// Float Mod on the operands' bits, with integer operations only: exact on every device
// (whatever its float division, denormal flushing or fp64 support) and bit-equal to the CPU
// operator (NumPy's fmod; for fmod=0 its remainder: fmod, then + y where the signs differ,
// rounded once). float16 goes through float32 as NumPy does (exact widening, one rounding
// to float16 at the end). NaNs as NumPy makes them on x86-64: a NaN operand comes back
// quieted (fmod: x's before y's), an invalid operation (x infinite, y zero) gives the
// default NaN (sign set).
#if TX == 12
#define FU uint64_t
#define FU1 1ul
const int FM_MB = 52;          // fraction bits
const FU FM_SIGN = FU1 << 63;
#else
#define FU uint
#define FU1 1u
const int FM_MB = 23;
const FU FM_SIGN = FU1 << 31;
#endif
const FU FM_ABS = FM_SIGN - FU1;
const FU FM_HIDDEN = FU1 << FM_MB;
const FU FM_FRAC = FM_HIDDEN - FU1;
const FU FM_INF = FM_ABS & ~FM_FRAC;
const FU FM_QUIET = FU1 << (FM_MB - 1);

// C's fmod(x, y) (the dividend's sign) by long division of the significands, as musl does it.
FU fmod_bits(FU ux, FU uy) {
    FU sx = ux & FM_SIGN, ax = ux & FM_ABS, ay = uy & FM_ABS;
    if (ax > FM_INF) return ux | FM_QUIET;
    if (ay > FM_INF) return uy | FM_QUIET;
    if (ax == FM_INF || ay == FU(0)) return FM_SIGN | FM_INF | FM_QUIET;
    if (ax < ay) return ux;              // also x zero, y infinite
    if (ax == ay) return sx;
    int ex = int(ax >> FM_MB), ey = int(ay >> FM_MB);
    FU mx = ax & FM_FRAC, my = ay & FM_FRAC;
    if (ex == 0) { ex = 1; while (mx < FM_HIDDEN) { mx <<= 1; --ex; } } else mx |= FM_HIDDEN;
    if (ey == 0) { ey = 1; while (my < FM_HIDDEN) { my <<= 1; --ey; } } else my |= FM_HIDDEN;
    for (; ex > ey; --ex) {
        if (mx >= my) { mx -= my; if (mx == FU(0)) return sx; }
        mx <<= 1;
    }
    if (mx >= my) { mx -= my; if (mx == FU(0)) return sx; }
    while (mx < FM_HIDDEN) { mx <<= 1; --ex; }
    FU r = ex > 0 ? (FU(ex) << FM_MB) | (mx & FM_FRAC) : mx >> uint(1 - ex);  // exact either way
    return r | sx;
}

#if TX == 2
// float16 <-> float32 bits, exactly as NumPy converts (float32 -> float16 rounds to nearest
// even; NaNs keep their sign and top payload bits).
uint f16_to_f32(uint h) {
    uint s = (h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    if (e == 0x1Fu) return s | 0x7F800000u | (m << 13);
    if (e == 0u) {
        if (m == 0u) return s;
        e = 113u;
        while ((m & 0x400u) == 0u) { m <<= 1; --e; }
        return s | (e << 23) | ((m & 0x3FFu) << 13);
    }
    return s | ((e + 112u) << 23) | (m << 13);
}

uint f32_to_f16(uint f) {
    uint s = (f >> 16) & 0x8000u, a = f & 0x7FFFFFFFu;
    if (a > 0x7F800000u) {
        uint h = 0x7C00u | ((a >> 13) & 0x3FFu);
        return s | (h == 0x7C00u ? 0x7C01u : h);
    }
    if (a >= 0x47800000u) return s | 0x7C00u;
    uint h, rem, half_;
    if (a < 0x38800000u) {                          // a float16 subnormal (or zero)
        if (a < 0x33000000u) return s;
        uint e = a >> 23, m = (a & 0x7FFFFFu) | 0x800000u, sh = 126u - e;
        h = m >> sh;
        rem = m & ((1u << sh) - 1u);
        half_ = 1u << (sh - 1u);
    } else {
        h = (a >> 13) - (112u << 10);
        rem = a & 0x1FFFu;
        half_ = 0x1000u;
    }
    if (rem > half_ || (rem == half_ && (h & 1u) != 0u)) h += 1u;  // a carry moves up a binade
    return s | h;
}
#endif

#if defined(OP_MOD)
// a - b for finite magnitudes a > b > 0 (bits without the sign), rounded to nearest even:
// guard, round and sticky bits below the significands.
FU sub_mag(FU a, FU b) {
    int ea = int(a >> FM_MB), eb = int(b >> FM_MB);
    FU ma = a & FM_FRAC, mb = b & FM_FRAC;
    if (ea == 0) ea = 1; else ma |= FM_HIDDEN;
    if (eb == 0) eb = 1; else mb |= FM_HIDDEN;
    ma <<= 3;
    mb <<= 3;
    int d = ea - eb;
    if (d > FM_MB + 4) {
        mb = FU1;                                   // all of it sticky (b is not zero)
    } else if (d > 0) {
        FU lost = mb & ((FU1 << d) - FU1);
        mb = (mb >> d) | (lost != FU(0) ? FU1 : FU(0));
    }
    FU m = ma - mb;
    int e = ea;
    while (m < (FM_HIDDEN << 3) && e > 1) { m <<= 1; --e; }
    FU low = m & FU(7);
    m >>= 3;
    if (low > FU(4) || (low == FU(4) && (m & FU1) != FU(0))) m += FU1;
    return (FU(e - 1) << FM_MB) + m;                // a carry out of the significand bumps e
}
#endif

FU mod_bits(FU ux, FU uy) {
    FU r = fmod_bits(ux, uy);
#if defined(OP_MOD)
    FU qx = (ux & FM_ABS) | FM_QUIET, qy = (uy & FM_ABS) | FM_QUIET;
    if ((ux & FM_ABS) > FM_INF && (uy & FM_ABS) > FM_INF) {
        // Two NaNs: NumPy's remainder (x87 fprem on x86-64) keeps the larger payload, the
        // positive one of equal payloads.
        return (qx > qy ? ux : qx < qy ? uy : ux & uy) | FM_QUIET;
    }
    FU ar = r & FM_ABS, ay = uy & FM_ABS;
    if (ay == FU(0) || ar > FM_INF) return r;      // y zero, or a NaN: as fmod gives it
    if (ar == FU(0)) return uy & FM_SIGN;          // a zero takes the divisor's sign
    if (((r ^ uy) & FM_SIGN) != FU(0)) {           // r + y, the signs differing: |y| > |r|
        if (ay == FM_INF) return uy;
        r = (uy & FM_SIGN) | sub_mag(ay, ar);
    }
#endif
    return r;
}
#endif

CO apply(CX u, CY v) {
#if defined(OP_ADD)
    return u + v;
#elif defined(OP_SUB)
    return u - v;
#elif defined(OP_MUL)
    return u * v;
#elif defined(OP_DIV)
#if IS_SINT(TX)
    // C semantics (truncation); x/0 gives 0 and MIN/-1 wraps, instead of undefined behaviour.
    if (v == CY(0)) return CX(0);
    if (v == CY(-1)) return -u;
    return u / v;
#elif IS_UINT(TX)
    return v == CY(0) ? CX(0) : u / v;
#elif TX == 12
    return u / v;
#else
    return CO(vkml_div(float(u), float(v)));
#endif
#elif defined(OP_FMOD) || defined(OP_MOD)
    // Floats: mod_bits above. Integers: C's remainder (sign of the dividend); OP_MOD then
    // moves it to the divisor's sign (floor division). x % 0 and MIN % -1 give 0, as NumPy.
#if TX == 2
    return f32_to_f16(mod_bits(f16_to_f32(u), f16_to_f32(v)));
#elif TX == 1 || TX == 12
    return mod_bits(u, v);
#elif IS_UINT(TX)
    return v == CY(0) ? CX(0) : u % v;
#else
    if (v == CY(0) || v == CY(-1)) return CX(0);
    CX r = u - (u / v) * v;
#if defined(OP_MOD)
    if (r != CX(0) && ((r < CX(0)) != (v < CY(0)))) r += v;
#endif
    return r;
#endif
#elif defined(OP_POW)
#if IS_INT(TX)
    return ipow(u, v);
#else
    return vkml_pow(u, float(v));
#endif
#elif defined(OP_MAX)
#if TX == 12
    return (isnan(u) || isnan(v)) ? u + v : max(u, v);
#elif TX == 13
    // as ml_dtypes: equal operands (+0 and -0) give the second
    return (vkml_isnan(u) || vkml_isnan(v)) ? u + v : (u > v ? u : v);
#elif IS_FLOAT(TX)
    return (vkml_isnan(u) || vkml_isnan(v)) ? u + v : max(u, v);
#else
    return max(u, v);
#endif
#elif defined(OP_MIN)
#if TX == 12
    return (isnan(u) || isnan(v)) ? u + v : min(u, v);
#elif TX == 13
    // as ml_dtypes: equal operands (+0 and -0) give the second
    return (vkml_isnan(u) || vkml_isnan(v)) ? u + v : (u < v ? u : v);
#elif IS_FLOAT(TX)
    return (vkml_isnan(u) || vkml_isnan(v)) ? u + v : min(u, v);
#else
    return min(u, v);
#endif
#elif defined(OP_PRELU)
    return u < CX(0) ? u * v : u;
#elif defined(OP_EQUAL)
    return u == v ? 1u : 0u;
#elif defined(OP_LESS)
    return u < v ? 1u : 0u;
#elif defined(OP_LESS_OR_EQUAL)
    return u <= v ? 1u : 0u;
#elif defined(OP_GREATER)
    return u > v ? 1u : 0u;
#elif defined(OP_GREATER_OR_EQUAL)
    return u >= v ? 1u : 0u;
#elif defined(OP_BITAND)
    return u & v;
#elif defined(OP_BITOR)
    return u | v;
#elif defined(OP_BITXOR)
    return u ^ v;
#elif defined(OP_SHL) || defined(OP_SHR)
    // BitShift (TX = TY): a shift amount that is negative or at least the width gives what
    // the sign fill alone gives (0 to the left; 0 or -1 to the right, arithmetic if signed).
#if IS_SINT(TY)
    bool out_of_range = v < CY(0) || v >= CY(BITS_X);
#else
    bool out_of_range = v >= CY(BITS_X);
#endif
#if defined(OP_SHL)
    return out_of_range ? CX(0) : (u << v);
#elif IS_SINT(TX)
    return out_of_range ? (u < CX(0) ? CX(-1) : CX(0)) : (u >> v);
#else
    return out_of_range ? CX(0) : (u >> v);
#endif
#elif defined(OP_AND)
    return (u != 0u && v != 0u) ? 1u : 0u;
#elif defined(OP_OR)
    return (u != 0u || v != 0u) ? 1u : 0u;
#elif defined(OP_XOR)
    return ((u != 0u) != (v != 0u)) ? 1u : 0u;
#else
#error "binary.comp: no OP_<NAME> defined"
#endif
}

void main() {
    VKML_FOR_EACH(i, pc.n) {
        uint ia, ib;
        VKML_BCAST2(i, pc.rank, pc.shape, pc.sa, pc.sb, ia, ib);
        STORE_O(i, apply(LOAD_X(a[ia]), LOAD_Y(b[ib])));
    }
}
