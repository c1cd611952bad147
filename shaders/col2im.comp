#version 450
// Col2Im (vkml/kernels/col2im.py): the adjoint of im2col. x is (planes, taps, L) with planes =
// N * C, taps = prod(block_shape) and L = prod(blocks); output pixel p of a plane sums, over
// the kernel taps t in row-major order, the column entry x[plane, t, l] of the block l that
// covers p with tap t: per spatial dimension q = p + pad_begin - t * dilation must be a
// non-negative multiple of the stride with q / stride < blocks. One invocation per output
// pixel, no atomics: the same additions in the same order as the CPU operator's one strided
// `+=` per tap (vkml/ops/conv.py col2im_add), from zero, so results are bitwise equal.
// TX: f32; f16 and 13 = bf16 (stored as 16 bits) rounded after every addition, as NumPy's
// float16 / ml_dtypes' bfloat16 `+=` does (float32 addition, then the rounding: exact, since
// float32 holds more than twice their precision); 12 = f64 (double, shaderFloat64); integers
// (8/16-bit ones added in 32 bits and stored narrow: NumPy's wrap-around).
#extension GL_GOOGLE_include_directive : require
#if TX == 13
#extension GL_EXT_shader_16bit_storage : require
#endif
#define VKML_ST_12 double
#define VKML_CT_12 double
#define VKML_ST_13 uint16_t
#define VKML_CT_13 float
#include "include/vkml_types.glsl"
#include "include/vkml_index.glsl"
#include "include/vkml_round16.glsl"

layout(local_size_x = 64, local_size_x_id = 0) in;

#define MAXD 8

layout(push_constant) uniform Push {
    uint n;       // output elements: planes * pixels
    uint pixels;  // prod(image_shape)
    uint taps;    // prod(block_shape)
    uint L;       // blocks per plane: prod(blocks)
    uint nd;      // spatial dimensions
} pc;

layout(std430, binding = 0) readonly buffer BX { SX x[]; };
layout(std430, binding = 1) writeonly buffer BO { SX o[]; };
// image[MAXD], kernel[MAXD], stride[MAXD], dilation[MAXD], pad_begin[MAXD] (signed),
// blocks[MAXD]
layout(std430, binding = 2) readonly buffer BM { int meta[6 * MAXD]; };
shared int sm[6 * MAXD];
#define IMG(d) uint(sm[(d)])
#define KER(d) uint(sm[MAXD + (d)])
#define STR(d) uint(sm[2 * MAXD + (d)])
#define DIL(d) sm[3 * MAXD + (d)]
#define PADB(d) sm[4 * MAXD + (d)]
#define BLK(d) uint(sm[5 * MAXD + (d)])

#if TX == 13
#define LD(v) uintBitsToFloat(uint(v) << 16)
#define ADD(a, v) uintBitsToFloat(bf16_bits((a) + (v)) << 16)
#define ST(v) uint16_t(bf16_bits(v))
#elif TX == 2
#define LD(v) CX(v)
#define ADD(a, v) unpackHalf2x16(f16_bits((a) + (v))).x
#define ST(v) SX(v)
#else
#define LD(v) CX(v)
#define ADD(a, v) ((a) + (v))
#define ST(v) SX(v)
#endif

void main() {
    for (uint i = gl_LocalInvocationID.x; i < 6 * MAXD; i += gl_WorkGroupSize.x) sm[i] = meta[i];
    barrier();
    VKML_FOR_EACH(e, pc.n) {
        uint plane = e / pc.pixels;
        uint p = e - plane * pc.pixels;
        int pos[MAXD];
        for (int d = int(pc.nd) - 1; d >= 0; --d) {
            uint s = IMG(d);
            uint q = p / s;
            pos[d] = int(p - q * s);
            p = q;
        }
        CX acc = CX(0);
        uint xbase = plane * pc.taps;
        for (uint t = 0u; t < pc.taps; ++t) {
            uint r = t, l = 0u, mul = 1u;
            bool hit = true;
            for (int d = int(pc.nd) - 1; d >= 0; --d) {
                uint kd = KER(d);
                uint qk = r / kd;
                int tap = int(r - qk * kd);
                r = qk;
                int q = pos[d] + PADB(d) - tap * DIL(d);
                if (q < 0) { hit = false; break; }
                uint s = STR(d);
                uint b = uint(q) / s;
                if (b * s != uint(q) || b >= BLK(d)) { hit = false; break; }
                l += b * mul;
                mul *= BLK(d);
            }
            if (hit) acc = ADD(acc, LD(x[(xbase + t) * pc.L + l]));
        }
        o[e] = ST(acc);
    }
}
