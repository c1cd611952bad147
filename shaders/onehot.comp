#version 450
// OneHot: o[outer, c, inner] = values[1] (on) where the index idx[outer, inner] names class c,
// else values[0] (off), o of shape idx.shape[:axis] + (depth,) + idx.shape[axis:], as
// vkml/ops/gather.py's OneHot: an index is truncated toward zero (float indices) and taken as an
// int64 (NumPy's astype: a uint64 wraps), a negative one counts from the end once (v + depth);
// indices still outside [0, depth) match no class (their rows are all off). One invocation per
// output element; the values move as ESIZE-byte words (every dtype), the output takes their bits.
// Index types: IDX64 (int64 or uint64 as two 32-bit halves: no shaderInt64), else TX (i8, i16,
// i32, u8, u16, u32, f16, f32; vkml_types.glsl). The host keeps depth <= 2^30.
#extension GL_GOOGLE_include_directive : require
#include "include/vkml_elem.glsl"
#ifndef IDX64
#include "include/vkml_types.glsl"
#endif
#include "include/vkml_index.glsl"

layout(local_size_x = 256, local_size_x_id = 0) in;

layout(push_constant) uniform Push {
    uint n;       // output elements
    uint depth;
    uint inner;   // prod(idx.shape[axis:])
} pc;

#ifdef IDX64
layout(std430, binding = 0) readonly buffer BI { ivec2 idx[]; };  // (low, high) halves
#else
layout(std430, binding = 0) readonly buffer BI { SX idx[]; };
#endif
layout(std430, binding = 1) readonly buffer BV { ELEM vals[]; };
layout(std430, binding = 2) writeonly buffer BO { ELEM o[]; };

// Whether index element i names class c (c < depth).
bool hot(uint i, uint c) {
    int d = int(pc.depth);
#ifdef IDX64
    ivec2 w = idx[i];
    int lo = w.x, hi = w.y;
    if (hi == 0) return lo >= 0 && uint(lo) == c;                 // 0 <= v < 2^31
    return hi == -1 && lo < 0 && lo == int(c) - d;                // -2^31 <= v < 0: v + depth == c
#else
    CX v = CX(idx[i]);
#if TX == 1 || TX == 2
    float t = trunc(v);
    if (!(abs(t) < 2147483648.0)) return false;  // NaN, inf, beyond int32: never in [-depth, depth)
    int iv = int(t);
#elif TX == 10
    if (v >= 0x80000000u) return false;  // uint32 beyond int32: >= depth
    int iv = int(v);
#else
    int iv = int(v);
#endif
    return iv >= 0 ? uint(iv) == c : iv + d == int(c);
#endif
}

void main() {
    VKML_FOR_EACH(e, pc.n) {
        uint in_ = e % pc.inner;
        uint q = e / pc.inner;
        uint c = q % pc.depth;
        uint out_ = q / pc.depth;
        o[e] = hot(out_ * pc.inner + in_, c) ? vals[1] : vals[0];
    }
}
