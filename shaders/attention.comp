#version 450
// Attention (ONNX opsets 23-25) as four passes of one source, chosen by the PASS constant
// (vkml/kernels/attention.py records them):
//   0 scores:  one invocation per (batch, q head, query i, key j): raw = (q * root) . (k * root)
//              over the head dim, capped = softcap * tanh(raw / softcap), biased = capped + bias;
//              `biased` goes to the float32 scratch S, and raw / capped / biased to the qk output
//              when qk_matmul_output_mode is 0 / 1 / 2;
//   1 softmax: one invocation per row of S: shifted by the row's maximum when finite (else 0),
//              normalized, and zeros where the sum is 0 or every key of the row is disallowed (the
//              spec's fully masked row); probabilities back into S (and the qk output in mode 3);
//   2 output:  one invocation per output element: sum_j S[row, j] * V[j, e];
//   3 present: one invocation per element of present_key or present_value (B, kv heads, past +
//              new, head dim): past rows then the new K or V rows (bound at binding 1 / 3).
// Keys 0..P-1 come from past_key / past_value ((B, kv heads, P, D) contiguous), the rest from K / V
// through element strides (a 3-D input's heads are (B, S, H*D) read in place). Query head h uses
// kv head h / (q heads / kv heads) (grouped-query attention). The bias is the float mask's value
// (0 without one), or -inf where a boolean mask (or a mask narrower than the keys), causality,
// nonpad_kv_seqlen or the window (opset 25) disallows the key; a query's absolute position is
// i + P, or i + nonpad_kv_seqlen[b] - Sq with padding, as vkml/ops/attention.py.
// Defines: TX (Q, K, V, past, outputs: f32, f16 or 13 = bf16, computed in f32), TY (the mask:
// bool, f32, f16, or bf16 with bf16 inputs). bf16 is stored as 16 bits: widened exactly on load
// (LDX, LDY), rounded to nearest even on store (STX: include/vkml_round16.glsl, as ml_dtypes).
#extension GL_GOOGLE_include_directive : require
#define FAULT_BINDING 11
#if TX == 13 || TY == 13
#extension GL_EXT_shader_16bit_storage : require
#endif
#define VKML_ST_13 uint16_t
#include "include/vkml_types.glsl"
#include "include/vkml_fault.glsl"
#include "include/vkml_round16.glsl"
#if TX == 13
#define LDX(v) uintBitsToFloat(uint(v) << 16)
#define STX(v) uint16_t(bf16_bits(v))
#else
#define LDX(v) float(v)
#define STX(v) SX(v)
#endif
#if TY == 13
#define LDY(v) uintBitsToFloat(uint(v) << 16)
#else
#define LDY(v) float(v)
#endif

layout(local_size_x = 256, local_size_x_id = 0) in;
layout(constant_id = 1) const uint PASS = 0u;
layout(constant_id = 2) const uint MASK = 0u;      // 0 none, 1 the mask (boolean when TY is bool)
layout(constant_id = 3) const bool NONPAD = false; // nonpad_kv_seqlen (int64, read as two uints)
layout(constant_id = 4) const bool CAUSAL = false;
layout(constant_id = 5) const uint QK_MODE = 4u;   // qk_matmul_output_mode; 4: no such output

layout(push_constant) uniform Push {
    uint nb, hq, hkv, sq, t, p, d, dv;  // batch, heads, query length, keys (past + new), dims
    uint qsb, qsh, qss;                 // element strides of Q's batch, head, position
    uint ksb, ksh, kss;                 // K's (pass 3: the K or V being copied; d its head dim)
    uint vsb, vsh, vss;                 // V's
    uint mb, mh, ms, mw;                // the mask's batch, head, query strides (0: broadcast), width
    uint osb, osh, oss;                 // the output's
    int left, right;                    // window sizes, -1 unbounded
    float root, softcap;                // sqrt(scale); 0: no softcap
    uint site, n;                       // fault site; work items of this pass
} pc;

layout(std430, binding = 0) readonly buffer BQ { SX q[]; };
layout(std430, binding = 1) readonly buffer BK { SX kk[]; };
layout(std430, binding = 2) readonly buffer BV { SX vv[]; };
layout(std430, binding = 3) readonly buffer BPK { SX pk[]; };
layout(std430, binding = 4) readonly buffer BPV { SX pv[]; };
layout(std430, binding = 5) readonly buffer BM { SY mask[]; };
layout(std430, binding = 6) readonly buffer BL { uint lens[]; };
layout(std430, binding = 7) buffer BS { float s[]; };
layout(std430, binding = 8) writeonly buffer BO { SX o[]; };
layout(std430, binding = 9) writeonly buffer BP { SX present[]; };
layout(std430, binding = 10) writeonly buffer BQK { SX qk[]; };

#define NEG_INF uintBitsToFloat(0xFF800000u)

bool finite(float x) { return (floatBitsToUint(x) & 0x7F800000u) != 0x7F800000u; }

// nonpad_kv_seqlen[b], clamped to [0, t] (an out-of-range value faults in pass 0).
int valid_len(uint bi) {
    uint lo = lens[2u * bi], hi = lens[2u * bi + 1u];
    return hi != 0u ? 0 : int(min(lo, pc.t));
}

float bias(uint bi, uint h, uint i, uint j) {
    int pos = int(i) + int(pc.p);
    if (NONPAD) {
        int len = valid_len(bi);
        if (int(j) >= len) return NEG_INF;
        pos = int(i) + len - int(pc.sq);
    }
    if (CAUSAL && int(j) > pos) return NEG_INF;
    if (pc.left >= 0 && int(j) < pos - pc.left) return NEG_INF;
    if (pc.right >= 0 && int(j) > pos + pc.right) return NEG_INF;
    if (MASK == 0u) return 0.0;
    if (j >= pc.mw) return NEG_INF;
    uint mi = bi * pc.mb + h * pc.mh + i * pc.ms + j;
#if TY == 5
    return uint(mask[mi]) != 0u ? 0.0 : NEG_INF;
#else
    return LDY(mask[mi]);
#endif
}

void scores(uint e) {
    uint j = e % pc.t, r = e / pc.t;
    uint i = r % pc.sq, bh = r / pc.sq;
    uint h = bh % pc.hq, bi = bh / pc.hq;
    uint kh = h / (pc.hq / pc.hkv);
    uint qb = bi * pc.qsb + h * pc.qsh + i * pc.qss;
    float raw = 0.0;
    if (j < pc.p) {
        uint kb = ((bi * pc.hkv + kh) * pc.p + j) * pc.d;
        for (uint c = 0u; c < pc.d; c++) raw += (LDX(q[qb + c]) * pc.root) * (LDX(pk[kb + c]) * pc.root);
    } else {
        uint kb = bi * pc.ksb + kh * pc.ksh + (j - pc.p) * pc.kss;
        for (uint c = 0u; c < pc.d; c++) raw += (LDX(q[qb + c]) * pc.root) * (LDX(kk[kb + c]) * pc.root);
    }
    // tanh(10) rounds to 1 in float32: the clamp changes no result and keeps exp-based tanh finite.
    float capped = pc.softcap != 0.0 ? pc.softcap * tanh(clamp(raw / pc.softcap, -10.0, 10.0)) : raw;
    float biased = capped + bias(bi, h, i, j);
    s[e] = biased;
    if (QK_MODE < 3u) qk[e] = STX(QK_MODE == 0u ? raw : (QK_MODE == 1u ? capped : biased));
    if (NONPAD && i == 0u && h == 0u && j == 0u) {
        uint lo = lens[2u * bi], hi = lens[2u * bi + 1u];
        if (hi != 0u || lo > pc.t) vkml_fault(pc.site, int(lo), int(hi));
    }
}

void softmax_row(uint r) {
    uint i = r % pc.sq, bh = r / pc.sq;
    uint h = bh % pc.hq, bi = bh / pc.hq;
    uint base = r * pc.t;
    float top = NEG_INF;
    bool open = false;
    for (uint j = 0u; j < pc.t; j++) {
        top = max(top, s[base + j]);
        open = open || bias(bi, h, i, j) != NEG_INF;
    }
    float shift = finite(top) ? top : 0.0;
    float total = 0.0;
    for (uint j = 0u; j < pc.t; j++) {
        float x = s[base + j];
        float ex = x == NEG_INF ? 0.0 : exp(x - shift);
        s[base + j] = ex;
        total += ex;
    }
    bool keep = open && total > 0.0;
    for (uint j = 0u; j < pc.t; j++) {
        float pr = keep ? s[base + j] / total : 0.0;
        s[base + j] = pr;
        if (QK_MODE == 3u) qk[base + j] = STX(pr);
    }
}

void attend(uint e) {
    uint c = e % pc.dv, r = e / pc.dv;
    uint i = r % pc.sq, bh = r / pc.sq;
    uint h = bh % pc.hq, bi = bh / pc.hq;
    uint kh = h / (pc.hq / pc.hkv);
    uint base = r * pc.t;
    float acc = 0.0;
    uint pb = (bi * pc.hkv + kh) * pc.p * pc.dv + c;
    for (uint j = 0u; j < pc.p; j++) acc += s[base + j] * LDX(pv[pb + j * pc.dv]);
    uint vb = bi * pc.vsb + kh * pc.vsh + c;
    for (uint j = pc.p; j < pc.t; j++) acc += s[base + j] * LDX(vv[vb + (j - pc.p) * pc.vss]);
    o[bi * pc.osb + h * pc.osh + i * pc.oss + c] = STX(acc);
}

void copy_present(uint e) {
    uint c = e % pc.d, r = e / pc.d;
    uint j = r % pc.t, bh = r / pc.t;
    uint kh = bh % pc.hkv, bi = bh / pc.hkv;
    present[e] = j < pc.p ? pk[(bh * pc.p + j) * pc.d + c] : kk[bi * pc.ksb + kh * pc.ksh + (j - pc.p) * pc.kss + c];
}

void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint e = gl_GlobalInvocationID.x; e < pc.n; e += stride) {
        if (PASS == 0u) scores(e);
        else if (PASS == 1u) softmax_row(e);
        else if (PASS == 2u) attend(e);
        else copy_present(e);
    }
}
