// Element storage types by size, for dtype-agnostic data movement (copy, gather, pad...).
//
// ESIZE (bytes per element: 1, 2, 4, 8 or 16) picks ELEM, the type a buffer holds; the bits
// are moved, never interpreted, so one variant serves every dtype of that size (bool, uint8,
// float16, int32, float32, int64, float64...). 8-byte elements are uvec2, so int64 data
// needs no shaderInt64; 16-byte "elements" (uvec4) are runs of smaller ones that the host
// found contiguous on both sides, moved in one 128-bit access. ELEM32 is a 32-bit-or-wider type that ELEM converts to losslessly,
// for shared memory (8/16-bit shared variables would need more device features).
#ifndef VKML_ELEM_GLSL
#define VKML_ELEM_GLSL

#if ESIZE == 1
#extension GL_EXT_shader_8bit_storage : require
#define ELEM uint8_t
#define ELEM32 uint
#elif ESIZE == 2
#extension GL_EXT_shader_16bit_storage : require
#define ELEM uint16_t
#define ELEM32 uint
#elif ESIZE == 4
#define ELEM uint
#define ELEM32 uint
#elif ESIZE == 8
#define ELEM uvec2
#define ELEM32 uvec2
#elif ESIZE == 16
#define ELEM uvec4
#define ELEM32 uvec4
#else
#error "ESIZE must be 1, 2, 4, 8 or 16"
#endif

#endif
