#version 450
// QuantizeLinear (QUANTIZE defined) and DequantizeLinear: one invocation per element, bit-exact
// with vkml/ops/quantize.py (vkml/kernels/quantize.py says what runs here).
//
// Layout of scale and zero point (the same index for both): x seen as (outer, k, inner) around
// the axis, element (o, j, i) reads parameter o * s_outer + (j / block) * s_k + i * s_inner:
// per-tensor (all strides 0), per-axis (s_k = 1) or blocked (s_outer = blocks * inner,
// s_k = inner, s_inner = 1).
//
// Quantized side (storage QB bytes, read as unsigned): integers of qbits bits (2, 4, 8, 16, 32;
// 2- and 4-bit ones one byte per element in the low bits, as ml_dtypes keeps them), signed when
// lo < 0; or a narrow float (qcode: cast_ext.comp's codes 14-18, the float8 flavours and
// float4e2m1), decoded and encoded with integer operations.
// Float side: float32, or 16 bits (XB / SB / OB = 2) that a flag reads as float16 or bfloat16.
// Roundings to float16/bfloat16 are done on the bits (round half to even, as NumPy and
// ml_dtypes do), never by a driver's conversion.
//
// Quantize: q = x / scale, correctly rounded (vkml_div; both rounded to the precision first and
// the quotient after, when that is float16/bfloat16); integers: round half to even, add the
// zero point, clamp to [lo, hi], NaN gives 0 (NumPy's clip-and-cast on x86); narrow floats:
// q + zero point (float32, only when there is one: -0 stays -0), clamped to +-max when
// saturating (float4e2m1 always), encoded to nearest even, overflow and NaN as ml_dtypes.
// Dequantize: (x - zero point) in float32 (exact, or the exact difference rounded once, as the
// CPU's float64 difference cast to float32) times scale, rounded to the output type.
#extension GL_GOOGLE_include_directive : require
#ifndef XB
#define XB 4
#endif
#ifndef OB
#define OB 4
#endif
#if QB == 1
#extension GL_EXT_shader_8bit_storage : require
#endif
#if QB == 2 || XB == 2 || SB == 2 || OB == 2
#extension GL_EXT_shader_16bit_storage : require
#endif
#include "include/vkml_index.glsl"
#include "include/vkml_math.glsl"
#include "include/vkml_round16.glsl"

layout(local_size_x = 256, local_size_x_id = 0) in;

layout(push_constant) uniform Push {
    uint n;        // elements
    uint k;        // the axis' extent
    uint inner;    // elements after the axis
    uint block;    // block_size (1 unless blocked)
    uint s_outer;  // parameter strides (see above)
    uint s_k;
    uint s_inner;
    uint flags;    // bit 0: zero point given; bits 1-2: x's (Q) / y's (DQ) 16-bit float kind;
                   // bits 3-4: scale's; bits 5-6: precision (Q: 0 float32); bit 7: saturate;
                   // bit 8: the zero point is per-tensor (index 0)
    uint qcode;    // 0: integer; else the narrow float's code
    uint qbits;    // integer bits
    int lo;        // integer range
    int hi;
} pc;

const uint K_F16 = 1u, K_BF16 = 2u;  // 16-bit float kinds
const uint E4M3FN = 14u, E4M3FNUZ = 15u, E5M2 = 16u, E5M2FNUZ = 17u, F4E2M1 = 18u;

#if QB == 1
#define SQ uint8_t
#elif QB == 2
#define SQ uint16_t
#else
#define SQ uint
#endif
#if SB == 2
#define SS uint16_t
#else
#define SS float
#endif

#ifdef QUANTIZE
#if XB == 2
#define SXF uint16_t
#else
#define SXF float
#endif
layout(std430, binding = 0) readonly buffer BX { SXF x[]; };
layout(std430, binding = 1) readonly buffer BS { SS sc[]; };
layout(std430, binding = 2) readonly buffer BZ { SQ zp[]; };
layout(std430, binding = 3) writeonly buffer BO { SQ o[]; };
#else
#if OB == 2
#define SOF uint16_t
#else
#define SOF float
#endif
layout(std430, binding = 0) readonly buffer BX { SQ x[]; };
layout(std430, binding = 1) readonly buffer BS { SS sc[]; };
layout(std430, binding = 2) readonly buffer BZ { SQ zp[]; };
layout(std430, binding = 3) writeonly buffer BO { SOF o[]; };
#endif

// ---------------------------------------------------------------- 16-bit floats
float from16(uint bits, uint kind) {
    return kind == K_BF16 ? uintBitsToFloat(bits << 16) : unpackHalf2x16(bits).x;
}

uint to16(float v, uint kind) {
    return kind == K_BF16 ? bf16_bits(v) : f16_bits(v);
}

// v rounded to float16 or bfloat16 (kind), back in float32; kind 0: v.
float round_to(float v, uint kind) {
    if (kind == 0u) return v;
    return from16(to16(v, kind), kind);
}

// ---------------------------------------------------------------- narrow floats
// Exponent bits, mantissa bits and bias of a narrow float code.
void fmt(uint c, out int eb, out int mb, out int bias) {
    if (c == E4M3FN) { eb = 4; mb = 3; bias = 7; }
    else if (c == E4M3FNUZ) { eb = 4; mb = 3; bias = 8; }
    else if (c == E5M2) { eb = 5; mb = 2; bias = 15; }
    else if (c == E5M2FNUZ) { eb = 5; mb = 2; bias = 16; }
    else { eb = 2; mb = 1; bias = 1; }  // F4E2M1
}

// Largest finite magnitude of a narrow float, as a float.
float narrow_max(uint c) {
    if (c == E4M3FN) return 448.0;
    if (c == E4M3FNUZ) return 240.0;
    if (c == E5M2) return 57344.0;
    if (c == E5M2FNUZ) return 57344.0;
    return 6.0;
}

float decode_narrow(uint r, uint c) {
    int eb, mb, bias;
    fmt(c, eb, mb, bias);
    int nb = 1 + eb + mb;
    r &= (1u << nb) - 1u;
    uint frac = r & ((1u << mb) - 1u);
    uint ex = (r >> mb) & ((1u << eb) - 1u);
    bool neg = ((r >> (nb - 1)) & 1u) != 0u;
    // NaNs as ml_dtypes decodes them: quiet, no payload, the sign kept (fnuz: negative)
    uint sbits = neg ? 0x80000000u : 0u;
    if (c == E4M3FNUZ || c == E5M2FNUZ) {
        if (r == 0x80u) return uintBitsToFloat(0xFFC00000u);
    } else if (c == E4M3FN) {
        if ((r & 0x7Fu) == 0x7Fu) return uintBitsToFloat(sbits | 0x7FC00000u);
    } else if (c == E5M2 && ex == 31u) {
        return uintBitsToFloat(sbits | (frac == 0u ? 0x7F800000u : 0x7FC00000u));
    }
    // m * 2^e, exact in float32 (at most 4 significant bits, e within [-17, 13]); the power
    // of two is built from its bits (no exp2 or ldexp, which drivers may approximate)
    float m = ex == 0u ? float(frac) : float(frac | (1u << mb));
    int e = ex == 0u ? 1 - bias - mb : int(ex) - bias - mb;
    precise float v = m * uintBitsToFloat(uint(e + 127) << 23);
    return neg ? -v : v;
}

// float32 -> narrow float bits, to nearest even; beyond the largest finite value: infinity
// (float8e5m2), NaN (e4m3fn, the fnuz types) or the largest (float4e2m1), as ml_dtypes.
uint encode_narrow(float v, uint c) {
    int eb, mb, bias;
    fmt(c, eb, mb, bias);
    int nb = 1 + eb + mb;
    uint b = floatBitsToUint(v);
    uint sign = b >> 31;
    uint a = b & 0x7FFFFFFFu;
    uint sbit = sign << (nb - 1);
    bool fnuz = c == E4M3FNUZ || c == E5M2FNUZ;
    bool ieee = c == E5M2;  // has infinities
    uint emaxf = (1u << eb) - 1u;
    uint maxf = fnuz ? 0x7Fu : (c == E4M3FN ? 0x7Eu : (c == F4E2M1 ? 0x7u : ((emaxf << mb) - 1u)));
    uint nanb;
    if (fnuz) nanb = 0x80u;
    else if (c == E4M3FN) nanb = sbit | 0x7Fu;
    else if (c == F4E2M1) nanb = sign != 0u ? 0u : 0x8u;  // ml_dtypes: NaN -> the other zero
    else nanb = sbit | (emaxf << mb) | (1u << (mb - 1));
    if (a > 0x7F800000u) return nanb;
    uint over = ieee ? (sbit | (emaxf << mb)) : (c == F4E2M1 ? (sbit | maxf) : nanb);
    if (a == 0x7F800000u) return over;
    uint zero = fnuz ? 0u : sbit;
    if (a == 0u) return zero;
    uint ex = a >> 23;
    uint m = ex == 0u ? (a & 0x7FFFFFu) : ((a & 0x7FFFFFu) | 0x800000u);
    int e = ex == 0u ? -149 : int(ex) - 150;
    int top = findMSB(m) + e;  // exponent of the leading bit
    int emin = 1 - bias;       // smallest normal exponent
    int emaxv = ieee ? int(emaxf) - 1 - bias : int(emaxf) - bias;
    if (top > emaxv + 1) return over;
    if (top < emin - mb - 2) return zero;  // below half the smallest subnormal
    int q = max(top, emin) - mb;           // the quantum's exponent
    int s = q - e;                         // bits to drop: 1..25 here
    uint kept = m >> s, rem = m & ((1u << s) - 1u), hw = 1u << (s - 1);
    if (rem > hw || (rem == hw && (kept & 1u) != 0u)) kept += 1u;
    uint mag = top < emin ? kept : (uint(top - emin) << mb) + kept;
    if (mag > maxf) return over;
    if (mag == 0u) return zero;
    return sbit | mag;
}

// ---------------------------------------------------------------- the quantized side
// An integer's value from its storage bits (sign-extended from qbits when signed).
int int_of(uint r) {
    if (pc.lo < 0) return bitfieldExtract(int(r), 0, int(pc.qbits));
    return int(bitfieldExtract(r, 0, int(pc.qbits)));
}

float load_scale(uint at) {
#if SB == 2
    return from16(uint(sc[at]), (pc.flags >> 3) & 3u);
#else
    return sc[at];
#endif
}

#ifdef QUANTIZE
// a / b correctly rounded where vkml_div promises it; IEEE results for zero and infinite
// divisors, and divisors beyond 2^126 scaled first (lrn.comp's lrn_quotient does the same).
float quotient(float a, float b) {
    float ab = abs(b);
    if (vkml_isnan(a)) return a;  // NaNs pass as x86 passes them (the first operand's)
    if (vkml_isnan(b)) return b;
    bool neg = ((floatBitsToUint(a) ^ floatBitsToUint(b)) & 0x80000000u) != 0u;
    if (ab == 0.0) {
        if (a == 0.0) return VKML_NAN;
        return neg ? -VKML_INF : VKML_INF;
    }
    if (ab == VKML_INF) {
        if (abs(a) == VKML_INF) return VKML_NAN;
        return neg ? uintBitsToFloat(0x80000000u) : 0.0;
    }
    if (ab > 8.5070592e37) {  // 2^126
        precise float q = vkml_div(a, b * 5.421010862e-20);  // 2^-64
        precise float y = q * 5.421010862e-20;
        return y;
    }
    return vkml_div(a, b);
}

float load_x(uint at) {
#if XB == 2
    return from16(uint(x[at]), (pc.flags >> 1) & 3u);
#else
    return x[at];
#endif
}

uint quantize(float xv, float sv, uint zr, bool has_zp) {
    uint prec = (pc.flags >> 5) & 3u;
    float q = round_to(quotient(round_to(xv, prec), round_to(sv, prec)), prec);
    if (pc.qcode != 0u) {
        float v = q;
        if (has_zp && !vkml_isnan(q)) {
            float z = decode_narrow(zr, pc.qcode);
            precise float t = q + z;
            v = vkml_isnan(z) ? z : t;
        }
        if (((pc.flags >> 7) & 1u) != 0u || pc.qcode == F4E2M1) {
            float big = narrow_max(pc.qcode);
            if (!vkml_isnan(v)) v = clamp(v, -big, big);
        }
        return encode_narrow(v, pc.qcode);
    }
    if (vkml_isnan(q)) return 0u;
    int r = int(clamp(roundEven(q), -1048576.0, 1048576.0));  // beyond every range either way
    if (has_zp) r += int_of(zr);
    r = clamp(r, pc.lo, pc.hi);
    return uint(r) & (pc.qbits >= 32u ? 0xFFFFFFFFu : ((1u << pc.qbits) - 1u));
}
#else
float dequantize(uint xr, float sv, uint zr, bool has_zp) {
    float d;
    if (pc.qcode != 0u) {
        float xv = decode_narrow(xr, pc.qcode);
        d = xv;
        if (has_zp && !vkml_isnan(xv)) {
            float z = decode_narrow(zr, pc.qcode);
            precise float t = xv - z;
            d = vkml_isnan(z) ? z : t;
        }
    } else {
        // 8/16-bit differences are exact in int; int32 comes without a zero point
        int di = int_of(xr);
        if (has_zp) di -= int_of(zr);
        d = float(di);
    }
    precise float y = d * sv;
    return y;
}
#endif

void main() {
    bool has_zp = (pc.flags & 1u) != 0u;
    bool zp_scalar = ((pc.flags >> 8) & 1u) != 0u;  // a per-tensor zero point beside another scale layout
    VKML_FOR_EACH(i, pc.n) {
        uint ks = i / pc.inner;
        uint in_ = i - ks * pc.inner;
        uint ou = ks / pc.k;
        uint j = ks - ou * pc.k;
        uint at = ou * pc.s_outer + (j / pc.block) * pc.s_k + in_ * pc.s_inner;
        float sv = load_scale(at);
        uint zr = has_zp ? uint(zp[zp_scalar ? 0u : at]) : 0u;
#ifdef QUANTIZE
        o[i] = SQ(quantize(load_x(i), sv, zr, has_zp));
#else
        float y = dequantize(uint(x[i]), sv, zr, has_zp);
#if OB == 2
        o[i] = uint16_t(to16(y, (pc.flags >> 1) & 3u));
#else
        o[i] = y;
#endif
#endif
    }
}
