#version 450
// Reductions (ReduceSum ... ReduceLogSumExp, ArgMax/ArgMin) over a C-contiguous tensor.
//
// The host collapses the input into kept dims (the output's, krank <= 4) and reduced dims
// (rrank <= 4), each with its element strides, so any set of axes is one dispatch.
// Defines:
//   OP_<NAME>    SUM MEAN MAX MIN PROD L1 L2 SUMSQ LOGSUM LOGSUMEXP ARGMAX ARGMIN
//   WG_MODE      1: a workgroup per (output, chunk) with a workgroup reduction (long reductions);
//                0: an invocation per output, reducing serially (short ones, or kept axes
//                innermost, where neighbouring invocations read neighbouring elements)
//   PASS         0: one pass, x in, finished values out;
//                1: partial accumulators of `chunks` chunks per output out (raw uint bits),
//                   at o * chunks + c (WG_MODE 1) or c * n_out + o (WG_MODE 0: coalesced);
//                2: combine those partials (the host describes their layout) and finish
//   VKML_SUBGROUP (see include/vkml_reduce.glsl), TX/TO (include/vkml_types.glsl); ArgMax/ArgMin
//                take every integer TX (64-bit ones with uint64 keys, modes th and wgs only);
//                ReduceLogSumExp and ReduceSum also take TX = 12 (float64: double arithmetic,
//                shaderFloat64; modes th and wgs only, with exp/log of its own below: GLSL has
//                none for double); ReduceMax takes TX = 12 too (NaN-propagating double max, modes
//                th and wgs). ReduceMax/ReduceMin take TX = 13 (bfloat16: stored as its 16 bits,
//                widened exactly to float32 and keyed as float32, every mode; the result is an
//                input element, re-narrowed exactly on the bits)
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
#endif

layout(local_size_x = 256, local_size_x_id = 0) in;

#ifndef WG_MODE
#define WG_MODE 1
#endif
#ifndef PASS
#define PASS 0
#endif

layout(push_constant) uniform Push {
    uint n_out;      // outputs
    uint n_red;      // elements reduced per output (in this pass)
    uint chunks;     // chunks per output (PASS 1), else 1
    uint chunk_len;  // elements per chunk (PASS 1), else n_red
    uint count;      // the full reduction size (ReduceMean's divisor)
    uint flags;      // bit 0: select_last_index
    uint krank;
    uint rrank;
    uint kshape[4];
    uint kstride[4];
    uint rshape[4];
    uint rstride[4];
} pc;

#if PASS == 2
layout(std430, binding = 0) readonly buffer BX { uint x[]; };
#else
layout(std430, binding = 0) readonly buffer BX { SX x[]; };
#endif
#if PASS == 1 || defined(OP_ARGMAX) || defined(OP_ARGMIN)
layout(std430, binding = 1) writeonly buffer BO { uint o[]; };
#else
layout(std430, binding = 1) writeonly buffer BO { SO o[]; };
#endif

// ---- accumulator per op
#if defined(OP_MAX) || defined(OP_MIN) || defined(OP_ARGMAX) || defined(OP_ARGMIN)
#define KEYED 1
#endif
#if defined(OP_LOGSUMEXP) && TX == 12
#define LSE64 1
#endif
#if defined(OP_SUM) && TX == 12
#define SUM64 1  // ReduceSum of float64: double accumulation (modes th and wgs only)
#endif
#if defined(OP_MAX) && TX == 12
#define MAX64 1  // ReduceMax of float64: double max, NaN if any element is NaN (modes th and wgs only)
#endif

// ArgMax/ArgMin of 64-bit integers compare 64-bit keys (no subgroup variant: subgroup operations
// on 64-bit values need an extension; the host takes the shared-memory tree).
#if (defined(OP_ARGMAX) || defined(OP_ARGMIN)) && VKML_IS64_(TX)
#define ARG64 1
#define KEY uint64_t
#else
#define KEY uint
#endif

#if defined(OP_MAX) || defined(OP_ARGMAX)
#define ACC KEY
#define COMBINE(a, b) max((a), (b))
VKML_WG_REDUCE(wg_reduce, KEY, VKML_OP_MAX, subgroupMax)
#elif defined(OP_MIN) || defined(OP_ARGMIN)
#define ACC KEY
#define COMBINE(a, b) min((a), (b))
VKML_WG_REDUCE(wg_reduce, KEY, VKML_OP_MIN, subgroupMin)
#elif defined(OP_PROD)
#define ACC float
#define COMBINE(a, b) ((a) * (b))
VKML_WG_REDUCE(wg_reduce, float, VKML_OP_MUL, subgroupMul)
#elif defined(SUM64)
#define ACC double
#define COMBINE(a, b) ((a) + (b))
#else
#define ACC float
#define COMBINE(a, b) ((a) + (b))
#if !defined(LSE64)
VKML_WG_REDUCE(wg_reduce, float, VKML_OP_ADD, subgroupAdd)
#endif
#endif
#if defined(OP_LOGSUMEXP) && !defined(LSE64)
VKML_WG_REDUCE(wg_max, uint, VKML_OP_MAX, subgroupMax)
#endif
#if defined(OP_ARGMAX) || defined(OP_ARGMIN)
VKML_WG_REDUCE(wg_idx_min, uint, VKML_OP_MIN, subgroupMin)
VKML_WG_REDUCE(wg_idx_max, uint, VKML_OP_MAX, subgroupMax)
#endif

ACC identity() {
#if defined(OP_MAX)
#if IS_INT(TX)
    return 0u;  // the smallest int key
#else
    return vkml_key_order(0xFF800000u);  // -inf
#endif
#elif defined(OP_MIN)
#if IS_INT(TX)
    return 0xFFFFFFFFu;
#else
    return vkml_key_order(0x7F800000u);  // +inf
#endif
#elif defined(OP_ARGMAX)
    return ACC(0);       // below every element's key
#elif defined(OP_ARGMIN)
    return ~ACC(0);      // above every element's key
#elif defined(OP_PROD)
    return 1.0;
#else
    return 0.0;
#endif
}

#if !defined(LSE64) && !defined(MAX64)
// One input element, transformed into the accumulator's terms.
ACC load(uint i) {
#if PASS == 2
#if defined(KEYED)
    return x[i];
#else
    return uintBitsToFloat(x[i]);
#endif
#else
#if TX == 13
    float v = uintBitsToFloat(uint(x[i]) << 16);
#else
    CX v = CX(x[i]);
#endif
#if IS_INT(TX)
#if defined(ARG64) && IS_SINT(TX)
    return uint64_t(v) ^ 0x8000000000000000ul;  // order-preserving: flip the sign bit
#elif defined(ARG64)
    return uint64_t(v);
#elif IS_UINT(TX)
    return uint(v);  // u8, u16, u32: the value is its key
#elif defined(OP_MAX) || defined(OP_MIN) || defined(OP_ARGMAX) || defined(OP_ARGMIN)
    return vkml_key_int(int(v));
#endif
#elif defined(OP_MAX) || defined(OP_ARGMAX)
    return vkml_key_max(v);
#elif defined(OP_MIN) || defined(OP_ARGMIN)
    return vkml_key_min(v);
#elif defined(OP_L1)
    return abs(v);
#elif defined(OP_L2) || defined(OP_SUMSQ)
    return v * v;
#else
    return v;
#endif
#endif
}
#endif

uint kept_offset(uint o) {
    uint off = 0u;
    for (int d = int(pc.krank) - 1; d > 0; --d) {
        uint s = pc.kshape[d];
        uint q = o / s;
        off += (o - q * s) * pc.kstride[d];
        o = q;
    }
    return off + o * pc.kstride[0];
}

uint red_offset(uint r) {
    if (pc.rrank == 1u) return r * pc.rstride[0];
    uint off = 0u;
    for (int d = int(pc.rrank) - 1; d > 0; --d) {
        uint s = pc.rshape[d];
        uint q = r / s;
        off += (r - q * s) * pc.rstride[d];
        r = q;
    }
    return off + r * pc.rstride[0];
}

#if !defined(OP_ARGMAX) && !defined(OP_ARGMIN)
// The finished value of a full reduction's accumulator.
void store(uint t, ACC a) {
#if PASS == 1
#if defined(KEYED)
    o[t] = a;
#else
    o[t] = floatBitsToUint(a);
#endif
#elif defined(OP_MAX) || defined(OP_MIN)
#if IS_INT(TX)
    o[t] = SO(vkml_unkey_int(a));
#elif TO == 13
    o[t] = uint16_t(bf16_bits(vkml_unkey(a)));
#else
    o[t] = SO(vkml_unkey(a));
#endif
#elif defined(OP_MEAN)
    o[t] = SO(a / float(pc.count));
#elif defined(OP_L2)
    o[t] = SO(sqrt(a));
#elif defined(OP_LOGSUM)
    o[t] = SO(log(a));
#else
    o[t] = SO(a);
#endif
}
#endif

#if defined(OP_LOGSUMEXP) && !defined(LSE64)
// The shift of log-sum-exp: the maximum when it is finite, else 0 (as the NumPy operator).
float lse_shift(uint k) {
    float m = vkml_unkey(k);
    return vkml_isfinite(m) ? m : 0.0;
}
#endif

#if defined(LSE64) || defined(SUM64) || defined(MAX64)
// ---- float64 log-sum-exp. GLSL's exp and log take no doubles, so: exp by Cody-Waite
// reduction x = k ln2 + r (|r| <= ln2/2) and exp(r) by its Taylor series to r^13 (truncation
// < 2^-57 relative), scaled by 2^k built from the exponent bits; log as fdlibm's e_log.c
// (x = 2^k (1 + f), log(1 + f) = f - hfsq + s (hfsq + R(s^2)), s = f / (2 + f)). Both are
// within 1 ulp of the correctly rounded value (checked against NumPy over 10^5 arguments).
// The max ignores NaN (it only picks the shift; a NaN element makes the sum NaN anyway).
const double LN2_HI = 6.93147180369123816490e-01lf;  // ln2's leading 32 bits: k * LN2_HI is exact
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
    // m in [sqrt(2)/2, sqrt(2)): the exponent of 1.m, or of m/2 where 1.m > sqrt(2)
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

// The shift: the maximum when it is finite, else 0 (as the NumPy operator).
double lse_shift64(double m) { return finite64(m) ? m : 0.0lf; }

#if WG_MODE
// A shared-memory tree over the workgroup (max, or sum): one buffer for both.
shared double lse_buf[gl_WorkGroupSize.x];
double lse_wg(double v, bool is_max) {
    uint l_ = gl_LocalInvocationID.x;
    lse_buf[l_] = v;
    barrier();
    for (uint s_ = gl_WorkGroupSize.x >> 1; s_ > 0u; s_ >>= 1) {
        if (l_ < s_) lse_buf[l_] = is_max ? max(lse_buf[l_], lse_buf[l_ + s_]) : lse_buf[l_] + lse_buf[l_ + s_];
        barrier();
    }
    double r_ = lse_buf[0];
    barrier();
    return r_;
}
#endif
#endif

#if defined(OP_ARGMAX) || defined(OP_ARGMIN)
// Whether element key k (met in index order) replaces the best so far: the first element, a
// strictly better one, or with select_last_index an equal one.
bool arg_takes(ACC k, ACC best, bool seen, bool last) {
    return !seen || (k != best && COMBINE(best, k) == k) || (last && k == best);
}
#endif

#if WG_MODE
// ------------------------------------------------------------ a workgroup per (output, chunk)
void main() {
    uint lid = gl_LocalInvocationID.x;
    uint wg = gl_WorkGroupSize.x;
    uint total = pc.n_out * pc.chunks;
    for (uint t = gl_WorkGroupID.x; t < total; t += gl_NumWorkGroups.x) {
        uint out_i = t / pc.chunks;
        uint c = t - out_i * pc.chunks;
        uint base = kept_offset(out_i);
        uint r0 = c * pc.chunk_len;
        uint r1 = min(r0 + pc.chunk_len, pc.n_red);
#if defined(SUM64)
        double s = 0.0lf;
        for (uint r = r0 + lid; r < r1; r += wg) s += x[base + red_offset(r)];
        s = lse_wg(s, false);
        if (lid == 0u) o[t] = s;
#elif defined(MAX64)
        double m = -D_INF;
        double nn = 0.0lf;  // 1 where this invocation met a NaN (summed: any NaN in the workgroup)
        for (uint r = r0 + lid; r < r1; r += wg) {
            double v = x[base + red_offset(r)];
            if (nan64(v)) nn = 1.0lf; else m = max(m, v);
        }
        m = lse_wg(m, true);
        nn = lse_wg(nn, false);
        if (lid == 0u) o[t] = nn != 0.0lf ? packDouble2x32(uvec2(0u, 0x7FF80000u)) : m;
#elif defined(LSE64)
        double m = -D_INF;
        for (uint r = r0 + lid; r < r1; r += wg) {
            double v = x[base + red_offset(r)];
            if (!nan64(v)) m = max(m, v);
        }
        double shift = lse_shift64(lse_wg(m, true));
        double s = 0.0lf;
        for (uint r = r0 + lid; r < r1; r += wg) s += exp64(x[base + red_offset(r)] - shift);
        s = lse_wg(s, false);
        if (lid == 0u) o[t] = log64(s) + shift;
#elif defined(OP_LOGSUMEXP)
        uint mk = vkml_key_order(0xFF800000u);
        for (uint r = r0 + lid; r < r1; r += wg) mk = max(mk, vkml_key_max(float(x[base + red_offset(r)])));
        float shift = lse_shift(wg_max(mk));
        float s = 0.0;
        for (uint r = r0 + lid; r < r1; r += wg) s += exp(float(x[base + red_offset(r)]) - shift);
        s = wg_reduce(s);
        if (lid == 0u) o[t] = SO(log(s) + shift);
#elif defined(OP_ARGMAX) || defined(OP_ARGMIN)
        bool last = (pc.flags & 1u) != 0u;
        ACC best = identity();
        uint bi = 0u;
        bool seen = false;
        for (uint r = r0 + lid; r < r1; r += wg) {
            ACC k = load(base + red_offset(r));
            if (arg_takes(k, best, seen, last)) { best = k; bi = r; seen = true; }
        }
        ACC all_best = wg_reduce(best);
        uint cand = seen && best == all_best ? bi : (last ? 0u : 0xFFFFFFFFu);
        uint idx = last ? wg_idx_max(cand) : wg_idx_min(cand);
        if (lid == 0u) { o[2u * t] = idx; o[2u * t + 1u] = 0u; }
#else
        ACC a = identity();
        uint r = r0 + lid;
        for (; r + 3u * wg < r1; r += 4u * wg) {  // four loads in flight: latency, not bandwidth, bounds one
            ACC v0 = load(base + red_offset(r));
            ACC v1 = load(base + red_offset(r + wg));
            ACC v2 = load(base + red_offset(r + 2u * wg));
            ACC v3 = load(base + red_offset(r + 3u * wg));
            a = COMBINE(a, COMBINE(COMBINE(v0, v1), COMBINE(v2, v3)));
        }
        for (; r < r1; r += wg) a = COMBINE(a, load(base + red_offset(r)));
        a = wg_reduce(a);
        if (lid == 0u) store(t, a);
#endif
    }
}
#else
// ------------------------------------------------------------ an invocation per output
void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    uint total = pc.n_out * pc.chunks;
    for (uint t = gl_GlobalInvocationID.x; t < total; t += stride) {
        uint c = t / pc.n_out;
        uint base = kept_offset(t - c * pc.n_out);
#if PASS == 1
        uint r0 = c * pc.chunk_len;
        uint n = min(r0 + pc.chunk_len, pc.n_red);
#else
        const uint r0 = 0u;
        uint n = pc.n_red;
#endif
#if defined(SUM64)
        double s = 0.0lf;
        for (uint r = 0u; r < n; ++r) s += x[base + red_offset(r)];
        o[t] = s;
#elif defined(MAX64)
        double m = -D_INF;
        bool nn = false;
        for (uint r = 0u; r < n; ++r) {
            double v = x[base + red_offset(r)];
            if (nan64(v)) nn = true; else m = max(m, v);
        }
        o[t] = nn ? packDouble2x32(uvec2(0u, 0x7FF80000u)) : m;
#elif defined(LSE64)
        double m = -D_INF;
        for (uint r = 0u; r < n; ++r) {
            double v = x[base + red_offset(r)];
            if (!nan64(v)) m = max(m, v);
        }
        double shift = lse_shift64(m);
        double s = 0.0lf;
        for (uint r = 0u; r < n; ++r) s += exp64(x[base + red_offset(r)] - shift);
        o[t] = log64(s) + shift;
#elif defined(OP_LOGSUMEXP)
        uint mk = vkml_key_order(0xFF800000u);
        for (uint r = 0u; r < n; ++r) mk = max(mk, vkml_key_max(float(x[base + red_offset(r)])));
        float shift = lse_shift(mk);
        float s = 0.0;
        for (uint r = 0u; r < n; ++r) s += exp(float(x[base + red_offset(r)]) - shift);
        o[t] = SO(log(s) + shift);
#elif defined(OP_ARGMAX) || defined(OP_ARGMIN)
        bool last = (pc.flags & 1u) != 0u;
        ACC best = identity();
        uint bi = 0u;
        bool seen = false;
        for (uint r = 0u; r < n; ++r) {
            ACC k = load(base + red_offset(r));
            if (arg_takes(k, best, seen, last)) { best = k; bi = r; seen = true; }
        }
        o[2u * t] = bi;
        o[2u * t + 1u] = 0u;
#else
        ACC a = identity();
        uint r = r0;
        for (; r + 3u < n; r += 4u) {
            ACC v0 = load(base + red_offset(r));
            ACC v1 = load(base + red_offset(r + 1u));
            ACC v2 = load(base + red_offset(r + 2u));
            ACC v3 = load(base + red_offset(r + 3u));
            a = COMBINE(a, COMBINE(COMBINE(v0, v1), COMBINE(v2, v3)));
        }
        for (; r < n; ++r) a = COMBINE(a, load(base + red_offset(r)));
        store(t, a);
#endif
    }
}
#endif
