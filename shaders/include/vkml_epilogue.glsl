// Epilogue of a GEMM or convolution: what follows it in the model, done before the store
// (vkml/compile/epilogue.py fuses Conv [+ Add] [+ Relu] into one node). The including shader
// declares `SO res[]` (the residual, laid out like the output) and a push-constant block `pc`
// with `float ELO, EHI` (Clip's bounds or an activation's parameters), and passes its flags:
// bit 0 adds res[i], bit 1 applies Relu, bit 2 Clip(ELO, EHI) (NaN kept, as shaders/unary.comp's
// Clip), bit 3 SiLU (v * Sigmoid(v), the Sigmoid rounded to the output type as the separate
// op's would be); bits 7-10 the activations CNNs put after convolutions, each computed as
// shaders/unary.comp computes it (the same operations in the same order, HardSigmoid's
// alpha * v + beta `precise` in both, so the same bits): Sigmoid, HardSigmoid(alpha ELO, beta
// EHI), HardSwish (ELO = 1/6, EHI = 0.5, as kernels/elementwise.py pushes them) and
// LeakyRelu(alpha ELO). Each step rounds to the output type first, as the separate ops would
// (exact for float32; for float16 the same roundings as Conv, Add, Relu).
// Shaders that define VKML_EPILOGUE_GEMM before including this (the GEMMs' and split-K's) also
// take bit 6 first: v / ELO, correctly rounded as binary.comp's Div (attention's scores / sqrt(d));
// bit 4: GELU as
// exporters write it, ((v / ELO) -> Erf -> + 1 -> * v) * EHI (ELO = sqrt(2), EHI = 0.5), each
// step as its separate op computes it (shaders/unary.comp's Erf, binary.comp's correctly
// rounded Div) and none contracted into an fma with the next; and bit 5: GELU's tanh form as
// torch writes it, 0.5 * (v * (1 + tanh(EHI * (v + ELO * (v * (v * v)))))) (ELO = 0.044715, EHI
// = sqrt(2 / pi)), Tanh as unary.comp's.
// Shaders that define VKML_EPILOGUE_BASIC (the plain cooperative-matrix GEMMs, whose speed
// suffers from every line of epilogue code: +8% at 512^3 with the four activations below,
// bench/results/checks/h200-2026-11-28-cnn-activation-epilogues.txt) keep residual, Relu, Clip
// and SiLU only; kernels/matmul_coop.py sends the other flags to the _epi variants.
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
const uint EPI_SIGMOID = 128u;
const uint EPI_HARD_SIGMOID = 256u;
const uint EPI_HARD_SWISH = 512u;
const uint EPI_LEAKY_RELU = 1024u;

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
#ifdef VKML_EPILOGUE_BASIC
    if ((flags & EPI_SILU) != 0u) v = float(SO(v * float(SO(1.0 / (1.0 + exp(-v))))));
#else
    // (SiLU and Sigmoid share one exp, HardSwish and HardSigmoid one clamp: less code in every
    // GEMM and conv shader, including the plain cooperative-matrix ones)
    if ((flags & (EPI_SILU | EPI_SIGMOID)) != 0u) {
        float s = float(SO(1.0 / (1.0 + exp(-v))));
        v = (flags & EPI_SILU) != 0u ? float(SO(v * s)) : s;
    }
    if ((flags & (EPI_HARD_SIGMOID | EPI_HARD_SWISH)) != 0u) {
        precise float t = pc.ELO * v + pc.EHI;  // (no fma, as unary.comp's)
        float s = max(0.0, min(1.0, t));
        v = float(SO((flags & EPI_HARD_SWISH) != 0u ? v * s : s));
    }
    if ((flags & EPI_LEAKY_RELU) != 0u) v = float(SO(v < 0.0 ? pc.ELO * v : v));
#endif
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
