#version 450
// CumSum / CumProd (OP_PROD) of x viewed as (outer, k, inner) along k: one invocation per
// (outer, inner) line, scanning in order (as NumPy's accumulate does, so float results match
// bitwise), optionally exclusive (starting from the identity) and reversed. TX: f32 or f16
// (computed in float, as the CPU operator widens float16), f64 (type code 12, as cast_ext.comp
// numbers it: double, which needs shaderFloat64) or any integer (8/16-bit ones computed in 32
// bits and stored narrow: the same wrap-around as NumPy's accumulate in the dtype).
#extension GL_GOOGLE_include_directive : require
#define VKML_ST_12 double
#define VKML_CT_12 double
#include "include/vkml_types.glsl"
#include "include/vkml_index.glsl"

layout(local_size_x = 64, local_size_x_id = 0) in;

layout(push_constant) uniform Push {
    uint lines;    // outer * inner
    uint k;
    uint inner;
    uint exclusive;
    uint reverse;
} pc;

layout(std430, binding = 0) readonly buffer BX { SX x[]; };
layout(std430, binding = 1) writeonly buffer BO { SX o[]; };

void main() {
    VKML_FOR_EACH(l, pc.lines) {
        uint outer = l / pc.inner, in_ = l - outer * pc.inner;
        uint base = outer * pc.k * pc.inner + in_;
#ifdef OP_PROD
        CX acc = CX(1);
#else
        CX acc = CX(0);
#endif
        for (uint j = 0u; j < pc.k; ++j) {
            uint at = base + (pc.reverse != 0u ? pc.k - 1u - j : j) * pc.inner;
            CX v = CX(x[at]);
            if (pc.exclusive != 0u) o[at] = SX(acc);
#ifdef OP_PROD
            acc = acc * v;
#else
            acc = acc + v;
#endif
            if (pc.exclusive == 0u) o[at] = SX(acc);
        }
    }
}
