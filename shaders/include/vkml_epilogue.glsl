// Epilogue of a GEMM or convolution: what follows it in the model, done before the store
// (vkml/compile/epilogue.py fuses Conv [+ Add] [+ Relu] into one node). The including shader
// declares `SO res[]` (the residual, laid out like the output) and a push-constant block `pc`
// with `float ELO, EHI` (Clip's bounds), and passes its flags: bit 0 adds res[i], bit 1
// applies Relu, bit 2 Clip(ELO, EHI) (NaN kept, as shaders/unary.comp's Clip), bit 3 SiLU
// (v * Sigmoid(v), the Sigmoid rounded to the output type as the separate op's would be). Each step rounds to the output type first, as
// the separate ops would (exact for float32; for float16 the same roundings as Conv, Add, Relu).
// Shaders that define VKML_EPILOGUE_GEMM before including this (the GEMMs' and split-K's) also
// take bit 6 first: v / ELO, correctly rounded as binary.comp's Div (attention's scores / sqrt(d));
// bit 4: GELU as
// exporters write it, ((v / ELO) -> Erf -> + 1 -> * v) * EHI (ELO = sqrt(2), EHI = 0.5), each
// step as its separate op computes it (shaders/unary.comp's Erf, binary.comp's correctly
// rounded Div) and none contracted into an fma with the next; and bit 5: GELU's tanh form as
// torch writes it, 0.5 * (v * (1 + tanh(EHI * (v + ELO * (v * (v * v)))))) (ELO = 0.044715, EHI
// = sqrt(2 / pi)), Tanh as unary.comp's.
#ifndef VKML_EPILOGUE_GLSL
#define VKML_EPILOGUE_GLSL
#ifdef VKML_EPILOGUE_GEMM
#include "vkml_math.glsl"
#endif

const uint EPI_RESIDUAL = 1u;
const uint EPI_RELU = 2u;
const uint EPI_CLIP = 4u;
const uint EPI_SILU = 8u;
const uint EPI_GELU = 16u;
const uint EPI_GELU_TANH = 32u;
const uint EPI_DIV = 64u;

float epilogue(float v, uint i, uint flags) {
    if (flags == 0u) return v;
    v = float(SO(v));
#ifdef VKML_EPILOGUE_GEMM
    if ((flags & EPI_DIV) != 0u) v = float(SO(vkml_div(v, pc.ELO)));
#endif
    if ((flags & EPI_RESIDUAL) != 0u) v = float(SO(v + float(res[i])));
    // Relu on the bits, as shaders/unary.comp (NVIDIA turns `v < 0 ? 0 : v` into max, which
    // drops NaN and -0): negative, non-zero and not NaN becomes +0.
    if ((flags & EPI_RELU) != 0u) {
        uint b = floatBitsToUint(v);
        if (b > 0x80000000u && b <= 0xFF800000u) v = 0.0;
    }
    if ((flags & EPI_CLIP) != 0u && (floatBitsToUint(v) & 0x7FFFFFFFu) <= 0x7F800000u)
        v = min(max(v, pc.ELO), pc.EHI);
    if ((flags & EPI_SILU) != 0u) v = float(SO(v * float(SO(1.0 / (1.0 + exp(-v))))));
#ifdef VKML_EPILOGUE_GEMM
    if ((flags & EPI_GELU) != 0u) {
        precise float t = float(SO(vkml_div(v, pc.ELO)));
        t = float(SO(vkml_erf(t)));
        t = float(SO(t + 1.0));
        t = float(SO(v * t));
        v = float(SO(t * pc.EHI));
    }
    if ((flags & EPI_GELU_TANH) != 0u) {
        precise float x3 = float(SO(v * float(SO(v * v))));
        precise float s = float(SO(v + float(SO(pc.ELO * x3))));
        precise float t = float(SO(1.0 + float(SO(vkml_tanh(float(SO(pc.EHI * s)))))));
        v = float(SO(float(SO(v * t)) * 0.5));
    }
#endif
    return v;
}

#endif
