#version 450
// A chain of float32 elementwise ops with scalar operands, fused into one pass:
// v = x[i]; v = op_k(v, c_k) for each instruction k; o[i] = v.
// The program is a storage buffer of (opcode, constant) pairs, read uniformly by every thread,
// so one pipeline serves every chain (vkml/compile/fusion.py builds the programs, OPCODES there).
// Each step rounds to float32 as the separate ops would (`precise`: no fused multiply-add
// across steps), and uses the same formulas as unary.comp and binary.comp.
#extension GL_GOOGLE_include_directive : require
#include "include/vkml_types.glsl"
#include "include/vkml_index.glsl"
#include "include/vkml_math.glsl"

layout(local_size_x = 256, local_size_x_id = 0) in;

layout(push_constant) uniform Push {
    uint n;      // elements
    uint len;    // instructions
} pc;

layout(std430, binding = 0) readonly buffer BX { float x[]; };
layout(std430, binding = 1) readonly buffer BP { vec2 prog[]; };
layout(std430, binding = 2) writeonly buffer BO { float o[]; };

float step_op(uint op, float v, float c) {
    precise float r;
#ifdef FUSED_DIV
    // Divisions correctly rounded (vkml_div), inlined once after the switch: the host picks this
    // variant for programs that divide. vkml_div is long: in every case of the switch it slowed
    // each instruction by half on lavapipe, and even the deferred form below cost long Add chains
    // ~7% on the H100, so the plain variant keeps the one-line cases.
    float dn = 1.0, dd = 1.0;
    bool div = false;
#define DIV(n, d) { dn = (n); dd = (d); div = true; }
#else
#define DIV(n, d) r = (n) / (d);
#endif
    switch (op) {
    case 0u: r = v + c; break;                 // Add
    case 1u: r = v - c; break;                 // Sub, constant second
    case 2u: r = c - v; break;                 // Sub, constant first
    case 3u: r = v * c; break;                 // Mul
    case 4u: DIV(v, c) break;                  // Div, constant second
    case 5u: DIV(c, v) break;                  // Div, constant first
    case 6u: {                                 // Relu, on the bits as in unary.comp
        uint b = floatBitsToUint(v);
        r = (b > 0x80000000u && b <= 0xFF800000u) ? 0.0 : v;
        break;
    }
    case 7u: r = -v; break;                    // Neg
    case 8u: r = abs(v); break;                // Abs
    case 9u: r = exp(v); break;                // Exp
    case 10u: r = log(v); break;               // Log
    case 11u: r = sqrt(v); break;              // Sqrt
    case 12u: r = 1.0 / (1.0 + exp(-v)); break; // Sigmoid
    case 13u: r = vkml_tanh(v); break;         // Tanh
    case 14u: DIV(1.0, v) break;               // Reciprocal
    default: r = v; break;
    }
#ifdef FUSED_DIV
    if (div) r = vkml_div(dn, dd);
#endif
    return r;
}

void main() {
    VKML_FOR_EACH(i, pc.n) {
        float v = x[i];
        for (uint k = 0u; k < pc.len; ++k) {
            vec2 ins = prog[k];
            v = step_op(uint(ins.x), v, ins.y);
        }
        o[i] = v;
    }
}
