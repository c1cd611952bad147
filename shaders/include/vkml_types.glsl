// Element types of a shader variant, chosen by the build's defines.
//
// Each operand slot (X, Y, Z inputs; O output) gets a type code:
//   1 = f32, 2 = f16, 3 = i32, 4 = i64, 5 = bool (one byte, 0 or 1),
//   6 = i8, 7 = i16, 8 = u8, 9 = u16, 10 = u32, 11 = u64
// and this file derives, per slot, the storage type (SX, SY, SZ, SO: what the buffer holds)
// and the compute type (CX, CY, CZ, CO: what arithmetic uses). f16 is stored as float16_t
// and computed in float, which needs only 16-bit storage (not fp16 arithmetic) and
// rounds exactly like NumPy's float16 ufuncs (float32 compute, one final rounding).
// Likewise 8- and 16-bit integers are stored narrow and computed in int (signed) or uint
// (unsigned), which needs only 8/16-bit storage (not int8/int16 arithmetic); storing the
// result truncates it to the low bits, which is NumPy's wrap-around.
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

#define VKML_IS16_(t) ((t) == 2 || (t) == 7 || (t) == 9)
#define VKML_IS64_(t) ((t) == 4 || (t) == 11)
#define VKML_IS8_(t) ((t) == 5 || (t) == 6 || (t) == 8)
#if VKML_IS16_(TX) || VKML_IS16_(TY) || VKML_IS16_(TZ) || VKML_IS16_(TO)
#extension GL_EXT_shader_16bit_storage : require
#endif
#if VKML_IS64_(TX) || VKML_IS64_(TY) || VKML_IS64_(TZ) || VKML_IS64_(TO)
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#endif
#if VKML_IS8_(TX) || VKML_IS8_(TY) || VKML_IS8_(TZ) || VKML_IS8_(TO) || defined(NEEDS_BOOL)
#extension GL_EXT_shader_8bit_storage : require
#endif

#define VKML_ST_1 float
#define VKML_ST_2 float16_t
#define VKML_ST_3 int
#define VKML_ST_4 int64_t
#define VKML_ST_5 uint8_t
#define VKML_ST_6 int8_t
#define VKML_ST_7 int16_t
#define VKML_ST_8 uint8_t
#define VKML_ST_9 uint16_t
#define VKML_ST_10 uint
#define VKML_ST_11 uint64_t
#define VKML_CT_1 float
#define VKML_CT_2 float
#define VKML_CT_3 int
#define VKML_CT_4 int64_t
#define VKML_CT_5 uint
#define VKML_CT_6 int
#define VKML_CT_7 int
#define VKML_CT_8 uint
#define VKML_CT_9 uint
#define VKML_CT_10 uint
#define VKML_CT_11 uint64_t
// Bits of each integer storage type (BitShift's width).
#define VKML_BITS_3 32
#define VKML_BITS_4 64
#define VKML_BITS_6 8
#define VKML_BITS_7 16
#define VKML_BITS_8 8
#define VKML_BITS_9 16
#define VKML_BITS_10 32
#define VKML_BITS_11 64

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
#define IS_SINT(t) ((t) == 3 || (t) == 4 || (t) == 6 || (t) == 7)
#define IS_UINT(t) ((t) >= 8 && (t) <= 11)
#define IS_INT(t) (IS_SINT(t) || IS_UINT(t))
#define BITS_X VKML_CAT(VKML_BITS_, TX)

#endif
