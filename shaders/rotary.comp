#version 450
// RotaryEmbedding (ONNX opset 23): one invocation per output element.
//
// X is (B, H, S, D) or (B, S, H*D); element i sits in a head row of D elements at offset
// d = i % D, its sequence position s = (i / s_div) % S and batch b = i / b_div (the host gives
// s_div and b_div for either layout). Elements d >= 2*half (the rotary_embedding_dim) are
// copied. The rest are pairs (x1, x2): interleaved (2j, 2j+1), else (j, j+half); with c, s
// the caches' entry j of row p (p = position_ids[b, s], or b*S + s without position ids):
//   first of the pair:  c*x1 - s*x2        second:  s*x1 + c*x2
// each product rounded to the compute type and then summed (precise: no fma), as NumPy's
// float32 (float16 widened: exactly the CPU operator's order) or float64 (TX = 12: double,
// which needs shaderFloat64). A position outside [0, n_pos) writes 0 and reports through the
// fault word (include/vkml_fault.glsl); position ids are int32 (pos_mode 1) or int64
// (pos_mode 2, read as two 32-bit halves: no shaderInt64).
#extension GL_GOOGLE_include_directive : require
#define VKML_ST_12 double
#define VKML_CT_12 double
#include "include/vkml_types.glsl"
#include "include/vkml_index.glsl"
#define FAULT_BINDING 5
#include "include/vkml_fault.glsl"

layout(local_size_x = 256, local_size_x_id = 0) in;

layout(push_constant) uniform Push {
    uint n;            // output elements
    uint head;         // D
    uint half_;        // rotary_embedding_dim / 2
    uint interleaved;
    uint seq;          // S
    uint s_div;        // elements per step of s
    uint b_div;        // elements per batch
    uint n_pos;        // cache rows (position ids are checked against it)
    uint pos_mode;     // 0: no position ids, 1: int32, 2: int64
    uint site;         // this node's site in the fault buffer
} pc;

layout(std430, binding = 0) readonly buffer BX { SX x[]; };
layout(std430, binding = 1) readonly buffer BC { SX cosc[]; };
layout(std430, binding = 2) readonly buffer BS { SX sinc[]; };
layout(std430, binding = 3) readonly buffer BP { uint pos[]; };
layout(std430, binding = 4) writeonly buffer BO { SO o[]; };

void main() {
    VKML_FOR_EACH(i, pc.n) {
        uint d = i % pc.head;
        if (d >= 2u * pc.half_) {
            o[i] = x[i];
            continue;
        }
        uint base = i - d;
        bool second;
        uint j, p1;
        if (pc.interleaved != 0u) {
            j = d >> 1;
            second = (d & 1u) != 0u;
            p1 = base + 2u * j;
        } else {
            second = d >= pc.half_;
            j = second ? d - pc.half_ : d;
            p1 = base + j;
        }
        uint p2 = p1 + (pc.interleaved != 0u ? 1u : pc.half_);
        uint bs = (i / pc.b_div) * pc.seq + (i / pc.s_div) % pc.seq;
        uint row = bs;
        if (pc.pos_mode != 0u) {
            int lo, hi;
            if (pc.pos_mode == 1u) {
                lo = int(pos[bs]);
                hi = lo >> 31;
            } else {
                lo = int(pos[2u * bs]);
                hi = int(pos[2u * bs + 1u]);
            }
            if (hi != 0 || uint(lo) >= pc.n_pos) {  // negative, beyond the cache, or past int32
                vkml_fault(pc.site, lo, hi);
                o[i] = SO(0.0);  // (SO(0) from an int literal: glslang 13 folded it to 0 or to 2^128, build to build)
                continue;
            }
            row = uint(lo);
        }
        CX c = CX(cosc[row * pc.half_ + j]);
        CX s = CX(sinc[row * pc.half_ + j]);
        CX x1 = CX(x[p1]);
        CX x2 = CX(x[p2]);
        precise CX a = (second ? s : c) * x1;
        precise CX b = (second ? c : s) * x2;
        precise CX r = second ? a + b : a - b;
        o[i] = SO(r);
    }
}
