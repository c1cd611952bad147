#version 450
// LSTM's recurrence (ONNX LSTM, default activations Sigmoid / Tanh / Tanh, no clip, no
// input_forget), after vkml/kernels/lstm.py has put the input projection X·Wᵀ of every time step
// and direction into the float32 scratch `proj` ([dirs][rows][4H], rows in X's own order: t * batch
// + b for layout 0, b * seq + t for layout 1) with one GEMM.
// One workgroup per (direction, batch row) walks the time steps in order; its invocations share
// the 4H gate rows by hidden unit (unit j: rows j, H + j, 2H + j, 3H + j, gate order i, o, f, c).
// h_{t-1} sits in shared memory (two buffers, swapped each step, so a step's writes never race
// the dot products still reading the previous h); c_j stays with the invocation that owns unit j.
// Per step, as vkml/ops/rnn.py's _LSTM._cell in float32:
//   gates = (proj + Wb) + R·h + Rb;  i = σ(gi + Pi c);  f = σ(gf + Pf c);  c' = f c + i tanh(gc);
//   o = σ(go + Po c');  h' = o tanh(c').
// sequence_lens: sample b runs its first len steps (reverse: from len - 1 down to 0); Y is 0 at the
// steps beyond, Y_h / Y_c the state after the last step run (the initial state when len is 0). A
// length outside [0, seq] faults (the CPU operator's error) and is clamped.
// Defines: TX (X, W, R, B, states, P, outputs: f32 or f16, computed in f32).
#extension GL_GOOGLE_include_directive : require
#define FAULT_BINDING 10
#include "include/vkml_types.glsl"
#include "include/vkml_math.glsl"
#include "include/vkml_fault.glsl"

layout(local_size_x = 64, local_size_x_id = 0) in;
layout(constant_id = 1) const uint HMAX = 32u;  // shared memory per state buffer, >= hidden

// flags
#define HAS_B 1u
#define HAS_H0 2u
#define HAS_C0 4u
#define HAS_P 8u
#define HAS_LENS 16u
#define WANT_Y 32u
#define WANT_YH 64u
#define WANT_YC 128u

layout(push_constant) uniform Push {
    uint seq, batch, hidden, dirs;
    uint reverse;  // 1: a single reverse direction (direction 1 of bidirectional is always reversed)
    uint layout_;  // 0: [seq, batch, ...] / [dirs, batch, H]; 1: [batch, seq, ...] / [batch, dirs, H]
    uint flags;
    uint site;     // fault site of sequence_lens
} pc;

layout(std430, binding = 0) readonly buffer BP { float proj[]; };
layout(std430, binding = 1) readonly buffer BR { SX r[]; };
layout(std430, binding = 2) readonly buffer BB { SX bias[]; };
layout(std430, binding = 3) readonly buffer BH0 { SX h0[]; };
layout(std430, binding = 4) readonly buffer BC0 { SX c0[]; };
layout(std430, binding = 5) readonly buffer BPP { SX peep[]; };
layout(std430, binding = 6) readonly buffer BL { int lens[]; };
layout(std430, binding = 7) writeonly buffer BY { SX y[]; };
layout(std430, binding = 8) writeonly buffer BYH { SX yh[]; };
layout(std430, binding = 9) writeonly buffer BYC { SX yc[]; };

shared float sh_h[2u * HMAX];
shared float sh_c[HMAX];

// As the NumPy operator: split by sign so exp never overflows.
float sigmoid(float x) {
    float e = exp(-abs(x));
    return x >= 0.0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
}

// Index of (direction d, batch b, unit j) in initial_h / Y_h / Y_c.
uint state_index(uint d, uint b, uint j) {
    return (pc.layout_ == 0u ? d * pc.batch + b : b * pc.dirs + d) * pc.hidden + j;
}

// Index of (step t, direction d, batch b, unit j) in Y.
uint y_index(uint t, uint d, uint b, uint j) {
    return (pc.layout_ == 0u ? (t * pc.dirs + d) * pc.batch + b : (b * pc.seq + t) * pc.dirs + d) * pc.hidden + j;
}

void main() {
    uint H = pc.hidden;
    uint G = 4u * H;
    uint d = gl_WorkGroupID.x / pc.batch;
    uint b = gl_WorkGroupID.x - d * pc.batch;
    uint lid = gl_LocalInvocationID.x;
    uint wg = gl_WorkGroupSize.x;
    bool rev = pc.reverse != 0u || d == 1u;
    uint flags = pc.flags;

    uint len = pc.seq;
    if ((flags & HAS_LENS) != 0u) {
        int l = lens[b];
        if (l < 0 || l > int(pc.seq)) {
            if (lid == 0u) vkml_fault(pc.site, l, l < 0 ? -1 : 0);
            l = clamp(l, 0, int(pc.seq));
        }
        len = uint(l);
    }

    for (uint j = lid; j < H; j += wg) {
        uint s = state_index(d, b, j);
        sh_h[j] = (flags & HAS_H0) != 0u ? float(h0[s]) : 0.0;
        sh_c[j] = (flags & HAS_C0) != 0u ? float(c0[s]) : 0.0;
    }
    memoryBarrierShared();
    barrier();

    uint rbase = d * G * H;       // R[d]
    uint bbase = d * 2u * G;      // B[d]: Wb then Rb
    uint pbase = d * 3u * H;      // P[d]: i, o, f
    uint cur = 0u;
    for (uint s = 0u; s < len; s++) {
        uint t = rev ? len - 1u - s : s;
        uint row = d * pc.seq * pc.batch + (pc.layout_ == 0u ? t * pc.batch + b : b * pc.seq + t);
        uint pb = row * G;
        uint hin = cur * HMAX;
        uint hout = (cur ^ 1u) * HMAX;
        for (uint j = lid; j < H; j += wg) {
            float gi = proj[pb + j], go = proj[pb + H + j], gf = proj[pb + 2u * H + j], gc = proj[pb + 3u * H + j];
            if ((flags & HAS_B) != 0u) {
                gi += float(bias[bbase + j]);
                go += float(bias[bbase + H + j]);
                gf += float(bias[bbase + 2u * H + j]);
                gc += float(bias[bbase + 3u * H + j]);
            }
            float ri = 0.0, ro = 0.0, rf = 0.0, rc = 0.0;
            uint ki = rbase + j * H, ko = ki + H * H, kf = ko + H * H, kc = kf + H * H;
            for (uint k = 0u; k < H; k++) {
                float hk = sh_h[hin + k];
                ri += float(r[ki + k]) * hk;
                ro += float(r[ko + k]) * hk;
                rf += float(r[kf + k]) * hk;
                rc += float(r[kc + k]) * hk;
            }
            gi += ri;
            go += ro;
            gf += rf;
            gc += rc;
            if ((flags & HAS_B) != 0u) {
                gi += float(bias[bbase + G + j]);
                go += float(bias[bbase + G + H + j]);
                gf += float(bias[bbase + G + 2u * H + j]);
                gc += float(bias[bbase + G + 3u * H + j]);
            }
            float c = sh_c[j];
            float pi = 0.0, po = 0.0, pf = 0.0;
            if ((flags & HAS_P) != 0u) {
                pi = float(peep[pbase + j]);
                po = float(peep[pbase + H + j]);
                pf = float(peep[pbase + 2u * H + j]);
            }
            float ig = sigmoid(gi + pi * c);
            float fg = sigmoid(gf + pf * c);
            float cn = fg * c + ig * vkml_tanh(gc);
            float og = sigmoid(go + po * cn);
            float h = og * vkml_tanh(cn);
            sh_c[j] = cn;
            sh_h[hout + j] = h;
            if ((flags & WANT_Y) != 0u) y[y_index(t, d, b, j)] = SX(h);
        }
        memoryBarrierShared();
        barrier();
        cur ^= 1u;
    }

    for (uint j = lid; j < H; j += wg) {
        if ((flags & WANT_Y) != 0u)
            for (uint t = len; t < pc.seq; t++) y[y_index(t, d, b, j)] = SX(0.0);
        uint s = state_index(d, b, j);
        if ((flags & WANT_YH) != 0u) yh[s] = SX(sh_h[cur * HMAX + j]);
        if ((flags & WANT_YC) != 0u) yc[s] = SX(sh_c[j]);
    }
}
