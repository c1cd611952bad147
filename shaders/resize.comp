#version 450
// Resize by per-axis tables: the host runs the coordinate transformation of every resized
// axis (vkml/ops/resize.py, in float64, exactly as the CPU operator) and uploads, for each
// output position along it, the source offsets (already multiplied by the input stride)
// of the two taps and their weights. Axes without a table are copied (offset = c * stride).
//   NEAREST: o = x[sum of tap-0 offsets]; elements move as ESIZE-byte words, UNROLL per
//            invocation (loads first).
//   LINEAR:  the taps of the up to 4 interpolated axes ("levels") are combined one level at
//            a time in the order the CPU operator uses, each as (a * w0) + (b * w1) in float32
//            without fma contraction, so results match NumPy's float32 arithmetic; TX/TO
//            pick f32 or f16 storage (include/vkml_types.glsl). The per-level taps live in
//            scalars (not arrays indexed at run time, which GPUs spill to memory).
//   NEAREST + EXTRAP (tf_crop_and_resize with coordinates outside the input): a table entry
//            whose off0 is ~0u is outside; the output is then the fill value, whose bits
//            (the extrapolation_value in the element's dtype) sit in entry 0 (off0, off1);
//            the axis tables start at entry 1.
//   INTERP:  the general filter (cubic, antialias, extrapolation, integer data): T taps per
//            level (pc.taps), each table row [off_0, w_0, off_1, w_1, ...] (weights as
//            float32 bits; off_0 = ~0u for a tf_crop_and_resize coordinate outside the input,
//            whose value is then the fill, the float32 bits in word 0). A level sums
//            x*w_0 + x*w_1 + ... left to right in float32 without fma contraction, as the CPU
//            operator accumulates its taps; integer outputs round half to even and clamp.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "include/vkml_index.glsl"
#ifdef NEAREST
#include "include/vkml_elem.glsl"
#define IN_T ELEM
#define OUT_T ELEM
#else  // LINEAR, INTERP
#include "include/vkml_types.glsl"
#define IN_T SX
#define OUT_T SO
#endif

layout(local_size_x = 256, local_size_x_id = 0) in;

#define UNROLL 4

layout(push_constant) uniform Push {
    uint n;
    uint rank;
    uint tabled;    // bit d: axis d reads the table
    uint level_of;  // 4 bits per axis: its interpolation level (0..3), 15 for none (LINEAR, INTERP)
    uint levels;    // number of interpolated axes (LINEAR, INTERP), <= 4
    uint shape[VKML_MAX_RANK];  // output shape
    uint param[VKML_MAX_RANK];  // tabled: first table entry (INTERP: word) of the axis; else input stride
#ifdef INTERP
    uint taps[4];   // taps per level (INTERP only)
#endif
} pc;

layout(std430, binding = 0) readonly buffer BX { IN_T x[]; };
layout(std430, binding = 1) writeonly buffer BO { OUT_T o[]; };
#ifdef INTERP
layout(std430, binding = 2) readonly buffer BT { uint tw[]; };
#else
struct Tap {
    uint off0;
    uint off1;
    float w0;
    float w1;
};
layout(std430, binding = 2) readonly buffer BT { Tap tab[]; };
#endif

#ifdef NEAREST
#ifdef EXTRAP
const uint OUTSIDE = 0xFFFFFFFFu;

// The input offset of output element e, or OUTSIDE.
uint source(uint e) {
    uint r = e;
    uint base = 0u;
    bool out_ = false;
    for (int d = int(pc.rank) - 1; d >= 0; --d) {
        uint s = pc.shape[d];
        uint q = r / s;
        uint c = r - q * s;
        r = q;
        if ((pc.tabled & (1u << d)) == 0u) {
            base += c * pc.param[d];
        } else {
            uint t = tab[pc.param[d] + c].off0;
            out_ = out_ || t == OUTSIDE;
            base += t;
        }
    }
    return out_ ? OUTSIDE : base;
}

#if ESIZE == 8
#define FILL32 uvec2(tab[0].off0, tab[0].off1)
#else
#define FILL32 ELEM32(tab[0].off0)
#endif
#else
uint source(uint e) {
    uint r = e;
    uint base = 0u;
    for (int d = int(pc.rank) - 1; d >= 0; --d) {
        uint s = pc.shape[d];
        uint q = r / s;
        uint c = r - q * s;
        r = q;
        base += (pc.tabled & (1u << d)) == 0u ? c * pc.param[d] : tab[pc.param[d] + c].off0;
    }
    return base;
}
#endif

void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
#ifdef EXTRAP
    ELEM32 fill = FILL32;
#endif
    for (uint b = gl_GlobalInvocationID.x; b < pc.n; b += UNROLL * stride) {
        ELEM32 v[UNROLL];
        [[unroll]] for (uint k = 0u; k < UNROLL; ++k) {
            uint e = b + k * stride;
#ifdef EXTRAP
            if (e < pc.n) {
                uint src = source(e);
                v[k] = src == OUTSIDE ? fill : ELEM32(x[src]);
            }
#else
            if (e < pc.n) v[k] = ELEM32(x[source(e)]);
#endif
        }
        [[unroll]] for (uint k = 0u; k < UNROLL; ++k) {
            uint e = b + k * stride;
            if (e < pc.n) o[e] = ELEM(v[k]);
        }
    }
}
#elif defined(INTERP)
const uint OUTSIDE = 0xFFFFFFFFu;

// Table row of this invocation's current coordinate at levels 0..3.
uint r0, r1, r2, r3;

float fill_value() { return uintBitsToFloat(tw[0]); }
float weight(uint row, uint t) { return uintBitsToFloat(tw[row + 2u * t + 1u]); }
float load(uint i) { return float(CX(x[i])); }

// One level: the taps of its axis at row R, each value V(b + offset); the CPU's
// acc = x_0 * w_0; acc = acc + x_t * w_t (float32, no contraction).
#define VKML_LEVEL(NAME, R, L, V)                                   \
float NAME(uint b) {                                                \
    uint off = tw[R];                                               \
    if (off == OUTSIDE) return fill_value();                        \
    precise float acc = V(b + off) * weight(R, 0u);                 \
    uint n = pc.taps[L];                                            \
    for (uint t = 1u; t < n; ++t) {                                 \
        precise float term = V(b + tw[R + 2u * t]) * weight(R, t);  \
        acc = acc + term;                                           \
    }                                                               \
    return acc;                                                     \
}
VKML_LEVEL(level0, r0, 0, load)
VKML_LEVEL(level1, r1, 1, level0)
VKML_LEVEL(level2, r2, 2, level1)
VKML_LEVEL(level3, r3, 3, level2)

#if TO == 6
#define VKML_LO -128.0
#define VKML_HI 127.0
#elif TO == 8
#define VKML_LO 0.0
#define VKML_HI 255.0
#elif TO == 7
#define VKML_LO -32768.0
#define VKML_HI 32767.0
#elif TO == 9
#define VKML_LO 0.0
#define VKML_HI 65535.0
#endif

void main() {
    VKML_FOR_EACH(e, pc.n) {
        uint r = e;
        uint base = 0u;
        for (int d = int(pc.rank) - 1; d >= 0; --d) {
            uint s = pc.shape[d];
            uint q = r / s;
            uint c = r - q * s;
            r = q;
            if ((pc.tabled & (1u << d)) == 0u) {
                base += c * pc.param[d];
                continue;
            }
            uint l = (pc.level_of >> (4 * d)) & 15u;
            uint row = pc.param[d] + c * 2u * pc.taps[l];
            if (l == 0u) {
                r0 = row;
            } else if (l == 1u) {
                r1 = row;
            } else if (l == 2u) {
                r2 = row;
            } else {
                r3 = row;
            }
        }
        float v;
        if (pc.levels == 0u) {
            v = load(base);
        } else if (pc.levels == 1u) {
            v = level0(base);
        } else if (pc.levels == 2u) {
            v = level1(base);
        } else if (pc.levels == 3u) {
            v = level2(base);
        } else {
            v = level3(base);
        }
#ifdef VKML_LO
        o[e] = OUT_T(CO(clamp(roundEven(v), VKML_LO, VKML_HI)));  // np.clip(np.rint(y)), astype
#else
        o[e] = OUT_T(v);
#endif
    }
}
#else
// Taps of levels 0..3: offsets a/b, weights p/q (this invocation's current element).
uint a0, b0, a1, b1, a2, b2, a3, b3;
float p0, q0, p1, q1, p2, q2, p3, q3;

float mix2(float u, float w, float p, float q) {
    precise float s = u * p;
    precise float t = w * q;
    precise float r = s + t;
    return r;
}

float level0(uint b) { return mix2(float(x[b + a0]), float(x[b + b0]), p0, q0); }
float level1(uint b) { return mix2(level0(b + a1), level0(b + b1), p1, q1); }
float level2(uint b) { return mix2(level1(b + a2), level1(b + b2), p2, q2); }
float level3(uint b) { return mix2(level2(b + a3), level2(b + b3), p3, q3); }

void main() {
    VKML_FOR_EACH(e, pc.n) {
        uint r = e;
        uint base = 0u;
        for (int d = int(pc.rank) - 1; d >= 0; --d) {
            uint s = pc.shape[d];
            uint q = r / s;
            uint c = r - q * s;
            r = q;
            if ((pc.tabled & (1u << d)) == 0u) {
                base += c * pc.param[d];
                continue;
            }
            Tap t = tab[pc.param[d] + c];
            uint l = (pc.level_of >> (4 * d)) & 15u;
            if (l == 0u) {
                a0 = t.off0; b0 = t.off1; p0 = t.w0; q0 = t.w1;
            } else if (l == 1u) {
                a1 = t.off0; b1 = t.off1; p1 = t.w0; q1 = t.w1;
            } else if (l == 2u) {
                a2 = t.off0; b2 = t.off1; p2 = t.w0; q2 = t.w1;
            } else if (l == 3u) {
                a3 = t.off0; b3 = t.off1; p3 = t.w0; q3 = t.w1;
            } else {
                base += t.off0;
            }
        }
        float v;
        if (pc.levels == 0u) {
            v = float(x[base]);
        } else if (pc.levels == 1u) {
            v = level0(base);
        } else if (pc.levels == 2u) {
            v = level1(base);
        } else if (pc.levels == 3u) {
            v = level2(base);
        } else {
            v = level3(base);
        }
        o[e] = OUT_T(v);
    }
}
#endif
