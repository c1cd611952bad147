#version 450
// Window pools (MaxPool, AveragePool, LpPool) over (N, C, D, H, W) inputs, 1-D and 2-D
// ones padded to 3-D with unit dims. An invocation per output element walks its window;
// taps outside the input are padding (the lowest finite value for MaxPool, as the NumPy
// operator and onnxruntime; nothing for the sums).
// Defines: OP_MAX, OP_AVG, OP_LP1, OP_LP2, OP_LPP (LpPool of any other p: sum |v|^p, by repeated
// multiplication for an integer p, else vkml_pow, then the sum to the power 1/p; the CPU operator
// calls powf both times); TX = TO; WITH_INDICES (MaxPool's second output:
// int64 flat indices, written as two uint32 words, with the CPU operator's tie rule).
#extension GL_GOOGLE_include_directive : require
#include "include/vkml_types.glsl"
#if defined(OP_LPP)
#include "include/vkml_math.glsl"
#endif

layout(local_size_x = 256, local_size_x_id = 0) in;

layout(push_constant) uniform Push {
    uint n;         // output elements
    uint flags;     // bit 0: count_include_pad, bit 1: storage_order (column-major indices)
    uint isz[3];    // input D, H, W
    uint osz[3];    // output D, H, W
    uint k[3];      // kernel
    uint s[3];      // strides
    uint d[3];      // dilations
    uint pb[3];     // padding at the beginning
    uint pe[3];     // declared padding at the end (count_include_pad counts it)
#if defined(OP_LPP)
    float p;        // LpPool's p, float32(1 / p), p when it is a small integer (else 0)
    float inv_p;
    uint p_int;
#endif
} pc;

layout(std430, binding = 0) readonly buffer BX { SX x[]; };
layout(std430, binding = 1) writeonly buffer BO { SO o[]; };
#if defined(WITH_INDICES)
layout(std430, binding = 2) writeonly buffer BI { uint oi[]; };
#endif

#if TX == 2
#define LOWEST (-65504.0)
#else
#define LOWEST (-3.40282347e38)
#endif

bool nan_(float v) { return (floatBitsToUint(v) & 0x7FFFFFFFu) > 0x7F800000u; }

void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    uint plane = pc.isz[0] * pc.isz[1] * pc.isz[2];
    for (uint t = gl_GlobalInvocationID.x; t < pc.n; t += stride) {
        uint r = t;
        uint ow = r % pc.osz[2]; r /= pc.osz[2];
        uint oh = r % pc.osz[1]; r /= pc.osz[1];
        uint od = r % pc.osz[0]; uint nc = r / pc.osz[0];
        int p0 = int(od * pc.s[0]) - int(pc.pb[0]);
        int p1 = int(oh * pc.s[1]) - int(pc.pb[1]);
        int p2 = int(ow * pc.s[2]) - int(pc.pb[2]);
        uint base = nc * plane;
#if defined(OP_MAX)
        float acc = LOWEST;
        bool first = true;
        int best0 = p0, best1 = p1, best2 = p2;
#else
        float acc = 0.0;
        uint count = 0u;
#endif
        for (uint a = 0u; a < pc.k[0]; ++a) {
            int q0 = p0 + int(a * pc.d[0]);
            bool in0 = q0 >= 0 && q0 < int(pc.isz[0]);
            for (uint b = 0u; b < pc.k[1]; ++b) {
                int q1 = p1 + int(b * pc.d[1]);
                bool in1 = in0 && q1 >= 0 && q1 < int(pc.isz[1]);
                for (uint c = 0u; c < pc.k[2]; ++c) {
                    int q2 = p2 + int(c * pc.d[2]);
                    bool inside = in1 && q2 >= 0 && q2 < int(pc.isz[2]);
#if defined(OP_MAX)
                    float v = inside ? float(x[base + (uint(q0) * pc.isz[1] + uint(q1)) * pc.isz[2] + uint(q2)]) : LOWEST;
#if defined(WITH_INDICES)
                    // The CPU rule: the first tap, then each strictly greater one.
                    if (first || v > acc) { acc = v; best0 = q0; best1 = q1; best2 = q2; }
#else
                    // np.maximum: NaN wins.
                    if (first || nan_(v) || v > acc) acc = nan_(acc) ? acc : v;
#endif
                    first = false;
#else
                    if (inside) {
                        float v = float(x[base + (uint(q0) * pc.isz[1] + uint(q1)) * pc.isz[2] + uint(q2)]);
#if defined(OP_LP1)
                        acc += abs(v);
#elif defined(OP_LP2)
                        acc += v * v;
#elif defined(OP_LPP)
                        float a_ = abs(v), t_ = a_;
                        if (pc.p_int != 0u) {
                            for (uint e_ = 1u; e_ < pc.p_int; ++e_) t_ *= a_;
                        } else {
                            t_ = vkml_pow(a_, pc.p);
                        }
                        acc += t_;
#else
                        acc += v;
#endif
                        count += 1u;
                    } else if ((pc.flags & 1u) != 0u) {
                        // count_include_pad counts declared padding only (not ceil mode's overhang)
                        bool pad0 = q0 >= -int(pc.pb[0]) && q0 < int(pc.isz[0] + pc.pe[0]);
                        bool pad1 = q1 >= -int(pc.pb[1]) && q1 < int(pc.isz[1] + pc.pe[1]);
                        bool pad2 = q2 >= -int(pc.pb[2]) && q2 < int(pc.isz[2] + pc.pe[2]);
                        if (pad0 && pad1 && pad2) count += 1u;
                    }
#endif
                }
            }
        }
#if defined(OP_MAX)
        o[t] = SO(acc);
#if defined(WITH_INDICES)
        int inner;
        if ((pc.flags & 2u) != 0u) {
            inner = (best2 * int(pc.isz[1]) + best1) * int(pc.isz[0]) + best0;
        } else {
            inner = (best0 * int(pc.isz[1]) + best1) * int(pc.isz[2]) + best2;
        }
        int fi = int(base) + inner;
        oi[2u * t] = uint(fi);
        oi[2u * t + 1u] = fi < 0 ? 0xFFFFFFFFu : 0u;
#endif
#elif defined(OP_AVG)
        o[t] = SO(acc * (1.0 / float(max(count, 1u))));  // no tap counted (all padding): 0, as the CPU
#elif defined(OP_LP1)
        o[t] = SO(acc);
#elif defined(OP_LPP)
        o[t] = SO(vkml_pow(acc, pc.inv_p));
#else
        o[t] = SO(sqrt(acc));
#endif
    }
}
