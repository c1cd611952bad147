#version 450
// GridSample (ONNX opsets 16, 20, 22): one invocation per output element y[n, c, s...] of
// y (N, C, S1..Sr), read from x (N, C, D1..Dr) at grid[n, s..., :] (r coordinates, the
// innermost spatial axis first). Compile-time choices: MODE (0 nearest, 1 linear, 2 cubic),
// RANK (r = 1, 2 or 3) and the storage types TX (x and y) and TY (grid), f32 or f16
// (include/vkml_types.glsl); padding_mode and align_corners come in the push block.
//
// The steps are vkml's CPU operator's (vkml/ops/detection.py, GridSample), one float32
// operation at a time in its order, without fma contraction (`precise`) and with a
// correctly rounded division (vkml_div), so results match it bit for bit on devices whose
// float32 add and multiply are correctly rounded:
//   denormalize: align_corners ? ((p + 1) * 0.5) * (D - 1) : (((p + 1) * D) - 1) * 0.5;
//   nearest: roundEven (NumPy's rint: ties to even);
//   border: a coordinate outside [lo, hi] is clamped to [0, D - 1]; reflection: folded into
//     [lo, hi] (lo, hi = 0, D - 1 with align_corners, else -0.5, D - 0.5) by the CPU
//     operator's _reflect; taps: nearest trunc(p); linear floor(p) + 0, 1 with weights
//     1 - t, t; cubic floor(p) - 1 .. + 2 with Keys weights (a = -0.75), t = p - floor(p);
//   each tap index: valid iff in [0, D) (zeros padding reads 0 elsewhere); reflection
//     folds it again, trunc; then clamped to [0, D - 1] (a NaN index reads 0);
//   taps combine in the CPU operator's order (the first spatial axis slowest): weight =
//     (w1 * w2) * w3, term = value * weight, summed left to right from the first term.
// The taps' indices and weights live in arrays indexed by unrolled loops (static indices:
// registers, not memory). Offsets are uint32: the host keeps x, grid and y below 2^31
// elements and each D below 2^22 (tap positions stay exact in float32).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "include/vkml_types.glsl"
#include "include/vkml_math.glsl"

layout(local_size_x = 256, local_size_x_id = 0) in;

layout(push_constant) uniform Push {
    uint n;         // output elements, N * C * S
    uint channels;  // C
    uint spatial;   // S = S1 * ... * Sr
    uint flags;     // bits 0-1: padding (0 zeros, 1 border, 2 reflection); bit 2: align_corners
    uint dims[3];   // D1..Dr (tensor order; unused ones 1)
    uint unused;
} pc;

layout(std430, binding = 0) readonly buffer BX { SX x[]; };
layout(std430, binding = 1) readonly buffer BG { SY grid[]; };
layout(std430, binding = 2) writeonly buffer BO { SO o[]; };

#if MODE == 0
#define TAPS 1
#define FIRST 0
#elif MODE == 1
#define TAPS 2
#define FIRST 0
#else
#define TAPS 4
#define FIRST (-1)
#endif
#if RANK == 1
#define COMBOS TAPS
#elif RANK == 2
#define COMBOS (TAPS * TAPS)
#else
#define COMBOS (TAPS * TAPS * TAPS)
#endif

// The CPU operator's _reflect: fold v into [lo, hi] by mirroring at the borders.
float fold(float v, float lo, float hi) {
    precise float span = hi - lo;
    if (!(span > 0.0)) return lo;
    bool below = v < lo;
    bool above = v > hi;
    if (!below && !above) return v;
    precise float d = below ? lo - v : v - hi;
    float k = trunc(vkml_div(d, span));
    precise float ks = k * span;
    precise float r = d - ks;
    precise float h = k * 0.5;
    bool even = floor(h) == h;  // NumPy's k % 2 == 0 (false for NaN)
    precise float from_lo = lo + r;
    precise float from_hi = hi - r;
    return below == even ? from_lo : from_hi;
}

// Tap at integral position q of an axis of size d: its clamped index, and whether it lies inside.
uint tap_index(float q, float fd, float lo, float hi, uint padding, out bool inside) {
    inside = q >= 0.0 && q < fd;
    if (padding == 2u) q = trunc(fold(q, lo, hi));
    float c = q >= 0.0 ? q : 0.0;  // NaN: 0, as NumPy's int64 of NaN clipped
    precise float top = fd - 1.0;
    c = c <= top ? c : top;
    return uint(c);
}

// Keys cubic convolution, a = -0.75: |s| <= 1 and 1 < |s| < 2, in the CPU operator's order.
float cubic_near(float s) {
    precise float a = 1.25 * s;
    precise float b = a - 2.25;
    precise float c = b * s;
    precise float d = c * s;
    precise float e = d + 1.0;
    return e;
}

float cubic_far(float s) {
    precise float a = -0.75 * s;
    precise float b = a + 3.75;
    precise float c = b * s;
    precise float d = c - 6.0;
    precise float e = d * s;
    precise float f = e + 3.0;
    return f;
}

void main() {
    uint padding = pc.flags & 3u;
    bool align = (pc.flags & 4u) != 0u;
    for (uint e = gl_GlobalInvocationID.x; e < pc.n; e += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
        uint q = e / pc.spatial;
        uint s = e - q * pc.spatial;
        uint b = q / pc.channels;
        uint c = q - b * pc.channels;
        uint g = (b * pc.spatial + s) * uint(RANK);

        uint idx[RANK][TAPS];
        bool inside[RANK][TAPS];
        float w[RANK][TAPS];
        uint plane = 1u;
        [[unroll]] for (int k = 0; k < RANK; ++k) {
            uint d = pc.dims[k];
            float fd = float(d);
            precise float dm1 = fd - 1.0;
            precise float hi_half = fd - 0.5;
            float lo = align ? 0.0 : -0.5;
            float hi = align ? dm1 : hi_half;
            precise float p1 = float(grid[g + uint(RANK - 1 - k)]) + 1.0;
            precise float p;
            if (align) {
                precise float h = p1 * 0.5;
                p = h * dm1;
            } else {
                precise float m = p1 * fd;
                precise float m1 = m - 1.0;
                p = m1 * 0.5;
            }
#if MODE == 0
            p = roundEven(p);
#endif
            if (padding == 1u) {
                if (p < lo || p > hi) p = min(max(p, 0.0), dm1);
            } else if (padding == 2u) {
                p = fold(p, lo, hi);
            }
#if MODE == 0
            idx[k][0] = tap_index(trunc(p), fd, lo, hi, padding, inside[k][0]);
            w[k][0] = 1.0;
#else
            float f = floor(p);
            precise float t = p - f;
#if MODE == 1
            precise float u = 1.0 - t;
            w[k][0] = u;
            w[k][1] = t;
#else
            precise float t1 = t + 1.0;
            precise float t2 = 1.0 - t;
            precise float t3 = 2.0 - t;
            w[k][0] = cubic_far(t1);
            w[k][1] = cubic_near(t);
            w[k][2] = cubic_near(t2);
            w[k][3] = cubic_far(t3);
#endif
            [[unroll]] for (int j = 0; j < TAPS; ++j) {
                precise float at = f + float(j + FIRST);
                idx[k][j] = tap_index(at, fd, lo, hi, padding, inside[k][j]);
            }
#endif
            plane *= d;
        }

        uint base = (b * pc.channels + c) * plane;
        float acc = 0.0;
        [[unroll]] for (int m = 0; m < COMBOS; ++m) {
            uint off = 0u;
            bool ok = true;
            precise float weight = 1.0;
            int rest = m;
            int digit[RANK];
            [[unroll]] for (int k = RANK - 1; k >= 0; --k) {
                digit[k] = rest % TAPS;
                rest /= TAPS;
            }
            [[unroll]] for (int k = 0; k < RANK; ++k) {
                off = off * pc.dims[k] + idx[k][digit[k]];
                ok = ok && inside[k][digit[k]];
                if (k == 0) {
                    weight = w[0][digit[0]];
                } else {
                    precise float wk = weight * w[k][digit[k]];
                    weight = wk;
                }
            }
            float v = (padding == 0u && !ok) ? 0.0 : float(x[base + off]);
#if MODE == 0
            acc = v;
#else
            precise float term = v * weight;
            if (m == 0) {
                acc = term;
            } else {
                precise float sum = acc + term;
                acc = sum;
            }
#endif
        }
        o[e] = SO(acc);
    }
}
