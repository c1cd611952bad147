#version 450
// The simple RNN's recurrence (ONNX RNN, every opset), after vkml/kernels/rnn.py has put the
// input projection X·Wᵀ of every time step and direction into the float32 scratch `proj`
// ([dirs][rows][H], rows in X's own order: t * batch + b for layout 0, b * seq + t for layout 1)
// with one GEMM. As shaders/lstm.comp and gru.comp (one gate instead of four or three): one
// workgroup per (direction, batch row) walks the time steps. Per step, as vkml/ops/rnn.py's
// _RNN._cell in float32 (f: the activation, Tanh by default; clip(v) = clamp(v, -clip, clip)
// when clip is given):
//   h' = f(clip(((proj + Wb) + R·h) + Rb))
// R is read transposed, rt[d][k][j] = R[d][j][k] in R's own type (neighbouring units read
// neighbouring words); vkml/kernels/rnn.py uploads rt once when R is a constant, else writes it
// with a first dispatch of this file (PREP defined).
// The invocations split the H x H product R·h two ways (SLICES, a specialization constant):
//   SLICES > 1: UNITS = workgroup / SLICES invocations per slice, one hidden unit each; slice s
//     sums k in its share of [0, H) into shared memory; a barrier; the invocations of slice 0 add
//     the slices up (in slice order) and write h'; a barrier.
//   SLICES = 1: each invocation owns units j, j + wg, ... and sums over every k itself; one
//     barrier a step.
// h_{t-1} sits in shared memory, two buffers swapped each step, so a step's writes never race
// the products still reading the previous h.
// sequence_lens: sample b runs its first len steps (reverse: from len - 1 down to 0); Y is 0 at
// the steps beyond, Y_h the state after the last step run (the initial state when len is 0). A
// length outside [0, seq] faults (the CPU operator's error) and is clamped.
// Defines: TX (X, W, R, B, initial_h, outputs: f32 or f16, computed in f32); PREP: the transpose.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#define FAULT_BINDING 7
#include "include/vkml_types.glsl"
#ifndef PREP
#include "include/vkml_math.glsl"
#include "include/vkml_fault.glsl"
#endif

layout(local_size_x = 64, local_size_x_id = 0) in;
layout(constant_id = 1) const uint HMAX = 32u;    // shared memory per state buffer, >= hidden
layout(constant_id = 2) const uint SLICES = 1u;   // slices of k (a power of two; see above)
layout(constant_id = 3) const uint NPART = 1u;    // partial sums in shared memory: workgroup, or 1
layout(constant_id = 4) const uint STEP = 0u;     // the products' loop shape (0, or 1 to 8: see products())

// flags
#define HAS_B 1u
#define HAS_H0 2u
#define HAS_LENS 4u
#define WANT_Y 8u
#define WANT_YH 16u
#define CLIP 32u
#define PLAIN 64u  // the default activation (Tanh), no clip

layout(push_constant) uniform Push {
    uint seq, batch, hidden, dirs;
    uint reverse;  // 1: a single reverse direction (direction 1 of bidirectional is always reversed)
    uint layout_;  // 0: [seq, batch, ...] / [dirs, batch, H]; 1: [batch, seq, ...] / [batch, dirs, H]
    uint flags;
    uint site;     // fault site of sequence_lens
    float clip;
    uint act[2];   // f of direction 0, then of direction 1
    float alpha[2];
    float beta[2];
} pc;

#ifdef PREP
layout(std430, binding = 0) readonly buffer BR { SX r[]; };
layout(std430, binding = 1) writeonly buffer BT { SX rt_out[]; };

// rt[d][k][j] = R[d][j][k]: an invocation per element of rt (neighbours write neighbours).
void main() {
    uint H = pc.hidden;
    uint n = pc.dirs * H * H;
    for (uint e = gl_GlobalInvocationID.x; e < n; e += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
        uint j = e % H;
        uint dk = e / H;  // d * H + k
        uint k = dk % H;
        uint d = dk / H;
        rt_out[e] = r[(d * H + j) * H + k];
    }
}
#else
layout(std430, binding = 0) readonly buffer BP { float proj[]; };
layout(std430, binding = 1) readonly buffer BR { SX rt[]; };  // R transposed: [dirs][k][j]
layout(std430, binding = 2) readonly buffer BB { SX bias[]; };
layout(std430, binding = 3) readonly buffer BH0 { SX h0[]; };
layout(std430, binding = 4) readonly buffer BL { int lens[]; };
layout(std430, binding = 5) writeonly buffer BY { SX y[]; };
layout(std430, binding = 6) writeonly buffer BYH { SX yh[]; };

shared float sh_h[2u * HMAX];
shared float sh_part[NPART];     // SLICES > 1: [slice][unit]

#include "include/vkml_rnn.glsl"

// h' of unit j in direction d from v = ((proj + Wb) + R·h) + Rb.
float cell(uint d, float v) {
    return (pc.flags & PLAIN) != 0u ? vkml_tanh(v) : activate(d, clipped(v));
}

// R·h over k in [k0, k1) of unit j (ri: the offset of rt[d][0][j]; hin: h's buffer), k
// ascending, in lstm.comp's two loop shapes (STEP 0: a plain loop; STEP n > 0: rounds of n k
// whose loads are issued before their products, a k past k1 reading row k0 and counting as 0).
float products(uint ri, uint hin, uint k0, uint k1) {
    uint H = pc.hidden;
    float acc = 0.0;
    if (STEP == 0u) {
        for (uint k = k0; k < k1; k++) acc += float(rt[ri + k * H]) * sh_h[hin + k];
        return acc;
    }
    for (uint k = k0; k < k1; k += STEP) {
        float hv[8];
        float rv[8];
        [[unroll]] for (uint u = 0u; u < STEP; u++) {
            bool ok = k + u < k1;
            float w = float(rt[ri + (ok ? k + u : k0) * H]);
            rv[u] = ok ? w : 0.0;
            hv[u] = ok ? sh_h[hin + k + u] : 0.0;
        }
        [[unroll]] for (uint u = 0u; u < STEP; u++) acc += rv[u] * hv[u];
    }
    return acc;
}

void main() {
    uint H = pc.hidden;
    uint d = gl_WorkGroupID.x / pc.batch;
    uint b = gl_WorkGroupID.x - d * pc.batch;
    uint lid = gl_LocalInvocationID.x;
    uint wg = gl_WorkGroupSize.x;
    bool rev = pc.reverse != 0u || d == 1u;
    uint flags = pc.flags;
    bool has_b = (flags & HAS_B) != 0u;

    uint len = pc.seq;
    if ((flags & HAS_LENS) != 0u) {
        int l = lens[b];
        if (l < 0 || l > int(pc.seq)) {
            if (lid == 0u) vkml_fault(pc.site, l, l < 0 ? -1 : 0);
            l = clamp(l, 0, int(pc.seq));
        }
        len = uint(l);
    }

    uint rbase = d * H * H;       // rt[d]
    uint bbase = d * 2u * H;      // B[d]: Wb then Rb
    uint rowbase = d * pc.seq * pc.batch;

    if (SLICES > 1u) {
        // one unit per invocation: unit j of slice ks; slice ks sums k in [k0, k1)
        const uint UNITS = gl_WorkGroupSize.x / SLICES;
        uint ks = lid / UNITS;
        uint j = lid - ks * UNITS;
        bool live = j < H;
        bool owner = live && ks == 0u;  // writes unit j's h'
        uint kc = (H + SLICES - 1u) / SLICES;
        uint k0 = min(H, ks * kc);
        uint k1 = min(H, k0 + kc);
        float wb = 0.0, rb = 0.0;
        if (owner) {
            sh_h[j] = (flags & HAS_H0) != 0u ? float(h0[state_index(d, b, j)]) : 0.0;
            if (has_b) {
                wb = float(bias[bbase + j]);
                rb = float(bias[bbase + H + j]);
            }
        }
        memoryBarrierShared();
        barrier();
        uint cur = 0u;
        for (uint s = 0u; s < len; s++) {
            uint t = rev ? len - 1u - s : s;
            uint pb = (rowbase + (pc.layout_ == 0u ? t * pc.batch + b : b * pc.seq + t)) * H;
            uint hin = cur * HMAX;
            float x = 0.0;
            if (owner) x = proj[pb + j];  // loaded first: the products below hide its latency
            sh_part[ks * UNITS + j] = live ? products(rbase + j, hin, k0, k1) : 0.0;
            memoryBarrierShared();
            barrier();
            if (owner) {
                float r = 0.0;
                for (uint sl = 0u; sl < SLICES; sl++) r += sh_part[sl * UNITS + j];
                float h = cell(d, ((x + wb) + r) + rb);
                sh_h[(cur ^ 1u) * HMAX + j] = h;
                if ((flags & WANT_Y) != 0u) y[y_index(t, d, b, j)] = SX(h);
            }
            memoryBarrierShared();
            barrier();
            cur ^= 1u;
        }
        if (owner) {
            if ((flags & WANT_Y) != 0u)
                for (uint t = len; t < pc.seq; t++) y[y_index(t, d, b, j)] = SX(0.0);
            if ((flags & WANT_YH) != 0u) yh[state_index(d, b, j)] = SX(sh_h[cur * HMAX + j]);
        }
        return;
    }

    // SLICES = 1: invocation lid owns units lid, lid + wg, ...
    for (uint j = lid; j < H; j += wg) {
        sh_h[j] = (flags & HAS_H0) != 0u ? float(h0[state_index(d, b, j)]) : 0.0;
    }
    memoryBarrierShared();
    barrier();
    uint cur = 0u;
    for (uint s = 0u; s < len; s++) {
        uint t = rev ? len - 1u - s : s;
        uint pb = (rowbase + (pc.layout_ == 0u ? t * pc.batch + b : b * pc.seq + t)) * H;
        uint hin = cur * HMAX;
        uint hout = (cur ^ 1u) * HMAX;
        for (uint j = lid; j < H; j += wg) {
            float x = proj[pb + j];
            float r = products(rbase + j, hin, 0u, H);
            float wb = 0.0, rb = 0.0;
            if (has_b) {
                wb = float(bias[bbase + j]);
                rb = float(bias[bbase + H + j]);
            }
            float h = cell(d, ((x + wb) + r) + rb);
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
        if ((flags & WANT_YH) != 0u) yh[state_index(d, b, j)] = SX(sh_h[cur * HMAX + j]);
    }
}
#endif
