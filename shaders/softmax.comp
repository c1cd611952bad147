#version 450
// Softmax / LogSoftmax along rows of a C-contiguous tensor viewed as (outer, K, inner): row r
// is outer r / inner, column r % inner, its K elements `inner` apart. Numerically stable as
// the NumPy operator: shift by the row maximum when it is finite, else by 0.
// Defines: OP_SOFTMAX or OP_LOGSOFTMAX; WG_MODE 1 (a workgroup per row: long rows) or 0 (an
// invocation per row: short rows, or inner > 1 where neighbouring rows are adjacent);
// VKML_SUBGROUP, TX = TO (the dtype; f16 is computed in f32). Local type codes for Softmax and
// LogSoftmax (vkml_types.glsl stops at 11): 13 = bfloat16 (stored as its 16 bits, computed in
// float32 like f16, rounded to nearest even on the bits: include/vkml_round16.glsl); 12 =
// float64 (double arithmetic, shaderFloat64; exp/log of its own below as GLSL has none for
// double; WG_MODE 0, or 1 with a shared-memory tree: VKML_SUBGROUP 0).
// The same rows serve OP_HARDMAX (1 at the row's first maximum, NaN counting as the largest, as
// NumPy's argmax; 0 elsewhere) and OP_LPNORM1 / OP_LPNORM2 (x / (sum |x| or sqrt(sum x^2)), 0
// where the norm is 0): an invocation per row (WG_MODE 0) only.
#extension GL_GOOGLE_include_directive : require
#define VKML_ST_12 double
#define VKML_CT_12 double
#define VKML_ST_13 uint16_t
#define VKML_CT_13 float
#if TX == 13
#extension GL_EXT_shader_16bit_storage : require
#endif
#include "include/vkml_types.glsl"
#include "include/vkml_reduce.glsl"
#if TX == 13
#include "include/vkml_round16.glsl"
#define XF(i) uintBitsToFloat(uint(x[i]) << 16)
#define STORE_O(i, v) o[i] = uint16_t(bf16_bits(v))
#else
#define XF(i) float(x[i])
#define STORE_O(i, v) o[i] = SO(v)
#endif

layout(local_size_x = 256, local_size_x_id = 0) in;

#ifndef WG_MODE
#define WG_MODE 1
#endif

layout(push_constant) uniform Push {
    uint rows;   // outer * inner
    uint k;      // row length
    uint inner;  // distance between a row's elements
    uint pad;
} pc;

layout(std430, binding = 0) readonly buffer BX { SX x[]; };
layout(std430, binding = 1) writeonly buffer BO { SO o[]; };

#if TX != 12
VKML_WG_REDUCE(wg_max, uint, VKML_OP_MAX, subgroupMax)
VKML_WG_REDUCE(wg_sum, float, VKML_OP_ADD, subgroupAdd)
#endif

uint row_base(uint r) {
    uint outer = r / pc.inner;
    return outer * pc.k * pc.inner + (r - outer * pc.inner);
}

#if TX != 12
float shift_of(uint key) {
    float m = vkml_unkey(key);
    return vkml_isfinite(m) ? m : 0.0;
}

CO result(float v, float shift, float s) {
#if defined(OP_LOGSOFTMAX)
    return CO((v - shift) - log(s));
#else
    return CO(exp(v - shift) / s);
#endif
}
#endif

#if TX == 12
// ---- float64 Softmax / LogSoftmax. exp64 and log64 as shaders/reduce.comp's log-sum-exp (each
// within 1 ulp of the correctly rounded value): exp by Cody-Waite reduction x = k ln2 + r and
// exp(r) by its Taylor series to r^13, scaled by 2^k from the exponent bits; log as fdlibm's
// e_log.c. The row maximum ignores NaN: it only picks the shift, and a NaN element makes the
// row's sum, so every output of the row, NaN as on the CPU.
const double LN2_HI = 6.93147180369123816490e-01lf;
const double LN2_LO = 1.90821492927058770002e-10lf;
#define D_INF packDouble2x32(uvec2(0u, 0x7FF00000u))

bool nan64(double v) {
    uvec2 b = unpackDouble2x32(v);
    uint h = b.y & 0x7FFFFFFFu;
    return h > 0x7FF00000u || (h == 0x7FF00000u && b.x != 0u);
}

bool finite64(double v) { return (unpackDouble2x32(v).y & 0x7FF00000u) != 0x7FF00000u; }

double pow2_64(int k) { return packDouble2x32(uvec2(0u, uint(k + 1023) << 20)); }  // k in [-1022, 1023]

double exp64(double x) {
    if (nan64(x)) return x;
    if (x > 709.782712893384lf) return D_INF;
    if (x < -745.1332191019412lf) return 0.0lf;
    int k = int(floor(x * 1.44269504088896338700lf + 0.5lf));
    double dk = double(k);
    precise double hi = x - dk * LN2_HI;
    precise double lo = dk * LN2_LO;
    precise double r = hi - lo;
    double p = 1.0lf / 6227020800.0lf;                     // 1/13!
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

#if defined(OP_LOGSOFTMAX)
double log64(double x) {
    if (nan64(x)) return x;
    if (x < 0.0lf) return packDouble2x32(uvec2(0u, 0x7FF80000u));  // NaN
    if (x == 0.0lf) return -D_INF;
    if (x == D_INF) return x;
    int k = 0;
    if (x < 2.2250738585072014e-308lf) { x *= 18014398509481984.0lf; k = -54; }  // subnormal: * 2^54
    uvec2 b = unpackDouble2x32(x);
    int e = int(b.y >> 20) - 1023;
    uint hm = b.y & 0x000FFFFFu;
    uint i = (hm + 0x95F64u) & 0x100000u;  // as e_log.c: set when 1.m >= sqrt(2)
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

double result64(double v, double shift, double s) {
#if defined(OP_LOGSOFTMAX)
    precise double r = (v - shift) - log64(s);
#else
    precise double r = exp64(v - shift) / s;
#endif
    return r;
}

#if WG_MODE
shared double buf64[gl_WorkGroupSize.x];
// A shared-memory tree over the workgroup: the maximum (of non-NaN values) or the sum.
double wg64(double v, bool is_max) {
    uint l_ = gl_LocalInvocationID.x;
    buf64[l_] = v;
    barrier();
    for (uint s_ = gl_WorkGroupSize.x >> 1; s_ > 0u; s_ >>= 1) {
        if (l_ < s_) buf64[l_] = is_max ? max(buf64[l_], buf64[l_ + s_]) : buf64[l_] + buf64[l_ + s_];
        barrier();
    }
    double r_ = buf64[0];
    barrier();
    return r_;
}

void main() {
    uint lid = gl_LocalInvocationID.x;
    uint wg = gl_WorkGroupSize.x;
    uint step = pc.inner * wg;
    for (uint r = gl_WorkGroupID.x; r < pc.rows; r += gl_NumWorkGroups.x) {
        uint base = row_base(r);
        uint end = base + pc.k * pc.inner;
        double m = -D_INF;
        for (uint i = base + lid * pc.inner; i < end; i += step) if (!nan64(x[i])) m = max(m, x[i]);
        m = wg64(m, true);
        double shift = finite64(m) ? m : 0.0lf;
        double s = 0.0lf;
        for (uint i = base + lid * pc.inner; i < end; i += step) s += exp64(x[i] - shift);
        s = wg64(s, false);
        for (uint i = base + lid * pc.inner; i < end; i += step) o[i] = result64(x[i], shift, s);
    }
}
#else
void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint r = gl_GlobalInvocationID.x; r < pc.rows; r += stride) {
        uint base = row_base(r);
        uint end = base + pc.k * pc.inner;
        double m = -D_INF;
        for (uint i = base; i < end; i += pc.inner) if (!nan64(x[i])) m = max(m, x[i]);
        double shift = finite64(m) ? m : 0.0lf;
        double s = 0.0lf;
        for (uint i = base; i < end; i += pc.inner) s += exp64(x[i] - shift);
        for (uint i = base; i < end; i += pc.inner) o[i] = result64(x[i], shift, s);
    }
}
#endif
#elif defined(OP_HARDMAX) || defined(OP_LPNORM1) || defined(OP_LPNORM2)
void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint r = gl_GlobalInvocationID.x; r < pc.rows; r += stride) {
        uint base = row_base(r);
        uint end = base + pc.k * pc.inner;
#if defined(OP_HARDMAX)
        uint best = base;
        float m = XF(base);
        if ((floatBitsToUint(m) & 0x7FFFFFFFu) <= 0x7F800000u) {  // not NaN
            for (uint i = base + pc.inner; i < end; i += pc.inner) {
                float v = XF(i);
                if ((floatBitsToUint(v) & 0x7FFFFFFFu) > 0x7F800000u) { best = i; break; }
                if (v > m) { m = v; best = i; }
            }
        }
        for (uint i = base; i < end; i += pc.inner) o[i] = SO(i == best ? 1.0 : 0.0);
#else
        float s = 0.0;
#if defined(OP_LPNORM1)
        for (uint i = base; i < end; i += pc.inner) s += abs(XF(i));
#else
        for (uint i = base; i < end; i += pc.inner) { float v = XF(i); s += v * v; }
        s = sqrt(s);
#endif
        for (uint i = base; i < end; i += pc.inner) o[i] = SO(s == 0.0 ? 0.0 : XF(i) / s);
#endif
    }
}
#elif WG_MODE
void main() {
    uint lid = gl_LocalInvocationID.x;
    uint wg = gl_WorkGroupSize.x;
    uint step = pc.inner * wg;
    for (uint r = gl_WorkGroupID.x; r < pc.rows; r += gl_NumWorkGroups.x) {
        uint base = row_base(r);
        uint end = base + pc.k * pc.inner;
        uint mk = vkml_key_order(0xFF800000u);
        uint i = base + lid * pc.inner;
        for (; i + 3u * step < end; i += 4u * step)  // four loads in flight
            mk = max(max(mk, max(vkml_key_max(XF(i)), vkml_key_max(XF(i + step)))),
                     max(vkml_key_max(XF(i + 2u * step)), vkml_key_max(XF(i + 3u * step))));
        for (; i < end; i += step) mk = max(mk, vkml_key_max(XF(i)));
        float shift = shift_of(wg_max(mk));
        float s = 0.0;
        i = base + lid * pc.inner;
        for (; i + 3u * step < end; i += 4u * step)
            s += (exp(XF(i) - shift) + exp(XF(i + step) - shift))
                 + (exp(XF(i + 2u * step) - shift) + exp(XF(i + 3u * step) - shift));
        for (; i < end; i += step) s += exp(XF(i) - shift);
        s = wg_sum(s);
        for (uint i = base + lid * pc.inner; i < end; i += step) STORE_O(i, result(XF(i), shift, s));
    }
}
#else
void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint r = gl_GlobalInvocationID.x; r < pc.rows; r += stride) {
        uint base = row_base(r);
        uint end = base + pc.k * pc.inner;
        uint mk = vkml_key_order(0xFF800000u);
        for (uint i = base; i < end; i += pc.inner) mk = max(mk, vkml_key_max(XF(i)));
        float shift = shift_of(mk);
        float s = 0.0;
        for (uint i = base; i < end; i += pc.inner) s += exp(XF(i) - shift);
        for (uint i = base; i < end; i += pc.inner) STORE_O(i, result(XF(i), shift, s));
    }
}
#endif
