#version 450
// Einsum as a direct sum (vkml/kernels/einsum.py): one invocation per output element sums,
// over the contracted index space (row-major, an odometer carrying per-operand offsets), the
// product of the NOPS operands (left to right). The host turns the equation into strides:
// per output dimension and per contracted dimension, each operand's stride in elements (a
// diagonal is the sum of its axes' strides, a broadcast or missing label stride 0), merging
// the dimensions every operand walks contiguously, so both ranks stay <= MAXR.
// TX: f32 or f16 (computed in float, rounded once), 12 = f64 (double, shaderFloat64),
// 13 = bf16 (stored as 16 bits, widened on load, rounded to nearest even once at the end, NaN
// quiet without payload as ml_dtypes), or an integer (8/16-bit ones computed in 32 bits and
// stored narrow: the same wrap-around as NumPy's einsum in the dtype).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#if TX == 13
#extension GL_EXT_shader_16bit_storage : require
#endif
#define VKML_ST_12 double
#define VKML_CT_12 double
#define VKML_ST_13 uint16_t
#define VKML_CT_13 float
#include "include/vkml_types.glsl"
#include "include/vkml_index.glsl"

layout(local_size_x = 64, local_size_x_id = 0) in;

#ifndef NOPS
#define NOPS 1
#endif
#define MAXR 8

layout(push_constant) uniform Push {
    uint n;          // output elements
    uint out_rank;   // output dimensions (>= 1)
    uint red_rank;   // contracted dimensions (>= 1; a single size-1 one when nothing is summed)
    uint red_total;  // contracted terms per output element (0: an empty contraction)
} pc;

layout(std430, binding = 0) readonly buffer B0 { SX a0[]; };
#if NOPS > 1
layout(std430, binding = 1) readonly buffer B1 { SX a1[]; };
#endif
#if NOPS > 2
layout(std430, binding = 2) readonly buffer B2 { SX a2[]; };
#endif
#if NOPS > 3
layout(std430, binding = 3) readonly buffer B3 { SX a3[]; };
#endif
layout(std430, binding = NOPS) writeonly buffer BO { SX o[]; };
// out_shape[MAXR], out_stride[NOPS][MAXR], red_shape[MAXR], red_stride[NOPS][MAXR]: copied to
// shared memory once per workgroup (read for every term otherwise).
#define META (2 * (NOPS + 1) * MAXR)
layout(std430, binding = NOPS + 1) readonly buffer BM { uint meta[META]; };
shared uint sm[META];
#define OSHAPE(d) sm[(d)]
#define OSTR(k, d) sm[MAXR * (1 + (k)) + (d)]
#define RSHAPE(d) sm[MAXR * (NOPS + 1) + (d)]
#define RSTR(k, d) sm[MAXR * (NOPS + 2 + (k)) + (d)]

#if TX == 13
#define LD(v) uintBitsToFloat(uint(v) << 16)
// float32 -> bfloat16 bits, to nearest even; NaN quiet without payload (as ml_dtypes).
uint bf16_bits(float v) {
    uint b = floatBitsToUint(v);
    if ((b & 0x7FFFFFFFu) > 0x7F800000u) return ((b >> 16) & 0x8000u) | 0x7FC0u;
    return (b + 0x7FFFu + ((b >> 16) & 1u)) >> 16;
}
#define ST(v) uint16_t(bf16_bits(v))
#else
#define LD(v) CX(v)
#define ST(v) SX(v)
#endif

void main() {
    for (uint i = gl_LocalInvocationID.x; i < META; i += gl_WorkGroupSize.x) sm[i] = meta[i];
    barrier();
    VKML_FOR_EACH(e, pc.n) {
        uint off[NOPS];
        [[unroll]] for (uint k = 0u; k < NOPS; ++k) off[k] = 0u;
        uint r = e;
        for (int d = int(pc.out_rank) - 1; d >= 0; --d) {
            uint s = OSHAPE(d);
            uint q = r / s;
            uint c = r - q * s;
            r = q;
            [[unroll]] for (uint k = 0u; k < NOPS; ++k) off[k] += c * OSTR(k, d);
        }
        uint idx[MAXR];
        for (uint d = 0u; d < pc.red_rank; ++d) idx[d] = 0u;
        CX acc = CX(0);
        for (uint t = 0u; t < pc.red_total; ++t) {
            CX p = LD(a0[off[0]]);
#if NOPS > 1
            p = p * LD(a1[off[1]]);
#endif
#if NOPS > 2
            p = p * LD(a2[off[2]]);
#endif
#if NOPS > 3
            p = p * LD(a3[off[3]]);
#endif
            acc = acc + p;
            // next term: the last contracted dimension moves fastest
            for (int d = int(pc.red_rank) - 1; d >= 0; --d) {
                [[unroll]] for (uint k = 0u; k < NOPS; ++k) off[k] += RSTR(k, d);
                if (++idx[d] < RSHAPE(d)) break;
                idx[d] = 0u;
                [[unroll]] for (uint k = 0u; k < NOPS; ++k) off[k] -= RSHAPE(d) * RSTR(k, d);
            }
        }
        o[e] = ST(acc);
    }
}
