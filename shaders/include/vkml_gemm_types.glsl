// Storage types of the GEMM shaders (matmul.comp, splitk_reduce.comp, gemv.comp,
// matmul_direct.comp), included in place of vkml_types.glsl: its codes, plus bfloat16 as the
// local code 13 (kernels/matmul.py), stored as its 16 bits, widened exactly to float32 and
// rounded to nearest even on the bits (vkml_round16.glsl). XF / XF4 read A and B values (TX) as
// float / vec4 (SX4: their 4-value type); VKML_OF reads an output-typed value (TO: C, a bias) as
// float, VKML_OS stores a float result. (reduce.comp declares code 13 for its own macros.)
#ifndef VKML_GEMM_TYPES_GLSL
#define VKML_GEMM_TYPES_GLSL
#define VKML_ST_13 uint16_t
#define VKML_CT_13 float
#if TX == 13 || TO == 13
#extension GL_EXT_shader_16bit_storage : require
#endif
#include "vkml_types.glsl"
#if TO == 13
#include "vkml_round16.glsl"
#define VKML_OF(x) uintBitsToFloat(uint(x) << 16u)
#define VKML_OS(v) uint16_t(bf16_bits(v))
#else
#define VKML_OF(x) float(x)
#define VKML_OS(v) SO(v)
#endif
#if TX == 13
#define SX4 u16vec4
#define XF(x) uintBitsToFloat(uint(x) << 16u)
#define XF4(x) uintBitsToFloat(uvec4(x) << 16u)
#else
#if TX == 2
#define SX4 f16vec4
#else
#define SX4 vec4
#endif
#define XF(x) float(x)
#define XF4(x) vec4(x)
#endif
#endif
