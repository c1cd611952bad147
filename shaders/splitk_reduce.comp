#version 450
// The second pass of a split-K GEMM or convolution (conv.comp, matmul.comp with S > 1):
// out = sum over the S partial products + beta * bias, fp32 sums, one rounding to the output type.
// part is [S][rows][cols] float32; element e = row * cols + col of one split goes to
//   out[(col / P * rows + row) * P + col % P]
// Then the epilogue (vkml_epilogue.glsl: a residual add, Relu) as the GEMM's own would.
// (P = cols for a plain row-major output; P = positions per image for NCHW convolutions,
// where cols run over images x positions) and takes bias[row * br + col * bc].
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
// bfloat16 outputs (TO = 13): the sum rounded to nearest even on the bits.
#include "include/vkml_gemm_types.glsl"

layout(local_size_x = 256, local_size_x_id = 0) in;
layout(constant_id = 1) const bool HAS_BIAS = false;
// Partials loaded per round, all issued before any is added (kernels/gemm.py SPLITK_RUN).
layout(constant_id = 2) const uint RUN = 8u;

layout(std430, binding = 0) readonly buffer BP { float part[]; };
layout(std430, binding = 1) readonly buffer BB { SO bias[]; };
layout(std430, binding = 2) writeonly buffer BO { SO o[]; };
layout(std430, binding = 3) readonly buffer BR { SO res[]; };

layout(push_constant) uniform Push {
    uint total;             // rows * cols
    uint rows, cols, P, S;
    uint br, bc;            // bias strides over (row, col)
    float beta;
    uint EPI;               // epilogue (vkml_epilogue.glsl)
    float ELO, EHI;         // Clip's bounds (EPI & 4), an activation's alpha, beta
} pc;

#if TO != 13  // (no bfloat16 GEMM takes an epilogue)
#define VKML_EPILOGUE_GEMM
#include "include/vkml_epilogue.glsl"
#endif

void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint e = gl_GlobalInvocationID.x; e < pc.total; e += stride) {
        // The partials added in the order of the splits, loaded RUN at a time first: loaded in
        // the loop as it was, they cost one memory latency each. Past the last split a round
        // adds +0, which changes no sum that starts from +0 (NaN, infinities and signs kept).
        float v = 0.0;
        for (uint s = 0u; s < pc.S; s += RUN) {
            float t[RUN];
            [[unroll]] for (uint i = 0u; i < RUN; ++i) t[i] = s + i < pc.S ? part[(s + i) * pc.total + e] : 0.0;
            [[unroll]] for (uint i = 0u; i < RUN; ++i) v += t[i];
        }
        uint row = e / pc.cols, col = e - row * pc.cols;
        if (HAS_BIAS) v += pc.beta * VKML_OF(bias[row * pc.br + col * pc.bc]);
        uint img = col / pc.P, p = col - img * pc.P;
        uint oi = (img * pc.rows + row) * pc.P + p;
#if TO == 13
        o[oi] = VKML_OS(v);  // (no bfloat16 GEMM takes an epilogue: kernels/matmul.py)
#else
        o[oi] = SO(epilogue(v, oi, pc.EPI));
#endif
    }
}
