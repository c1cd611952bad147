// Element types of a shader variant, chosen by the build's defines.
//
// Each operand slot (X, Y, Z inputs; O output) gets a type code:
//   1 = f32, 2 = f16, 3 = i32, 4 = i64, 5 = bool (one byte, 0 or 1)
// and this file derives, per slot, the storage type (SX, SY, SZ, SO: what the buffer holds)
// and the compute type (CX, CY, CZ, CO: what arithmetic uses). f16 is stored as float16_t
// and computed in float, which needs only 16-bit storage (not fp16 arithmetic) and
// rounds exactly like NumPy's float16 ufuncs (float32 compute, one final rounding).
#ifndef VKML_TYPES_GLSL
#define VKML_TYPES_GLSL

#ifndef TX
#define TX 0
#endif
#ifndef TY
#define TY 0
#endif
#ifndef TZ
#define TZ 0
#endif
#ifndef TO
#define TO 0
#endif

#if TX == 2 || TY == 2 || TZ == 2 || TO == 2
#extension GL_EXT_shader_16bit_storage : require
#endif
#if TX == 4 || TY == 4 || TZ == 4 || TO == 4
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#endif
#if TX == 5 || TY == 5 || TZ == 5 || TO == 5 || defined(NEEDS_BOOL)
#extension GL_EXT_shader_8bit_storage : require
#endif

#define VKML_ST_1 float
#define VKML_ST_2 float16_t
#define VKML_ST_3 int
#define VKML_ST_4 int64_t
#define VKML_ST_5 uint8_t
#define VKML_CT_1 float
#define VKML_CT_2 float
#define VKML_CT_3 int
#define VKML_CT_4 int64_t
#define VKML_CT_5 uint

#define VKML_CAT_(a, b) a##b
#define VKML_CAT(a, b) VKML_CAT_(a, b)

#define SX VKML_CAT(VKML_ST_, TX)
#define SY VKML_CAT(VKML_ST_, TY)
#define SZ VKML_CAT(VKML_ST_, TZ)
#define SO VKML_CAT(VKML_ST_, TO)
#define CX VKML_CAT(VKML_CT_, TX)
#define CY VKML_CAT(VKML_CT_, TY)
#define CZ VKML_CAT(VKML_CT_, TZ)
#define CO VKML_CAT(VKML_CT_, TO)

#define IS_FLOAT(t) ((t) == 1 || (t) == 2)
#define IS_INT(t) ((t) == 3 || (t) == 4)

#endif
