#version 450
// LSTM's recurrence (ONNX LSTM, every opset), after vkml/kernels/lstm.py has put the input
// projection X·Wᵀ of every time step and direction into the float32 scratch `proj` ([dirs][rows]
// [4H], rows in X's own order: t * batch + b for layout 0, b * seq + t for layout 1) with one GEMM.
// One workgroup per (direction, batch row) walks the time steps in order. Per step, as
// vkml/ops/rnn.py's _LSTM._cell in float32 (f, g, h: the activations, Sigmoid, Tanh and Tanh by
// default; clip(v) = clamp(v, -clip, clip) when clip is given; gate order i, o, f, c):
//   gates = ((proj + Wb) + R·h) + Rb
//   i = f(clip(gi + Pi c));  f = input_forget ? 1 - i : f(clip(gf + Pf c));  c' = f c + i g(clip(gc))
//   o = f(clip(go + Po c'));  h' = o h(c')
// R is read transposed, rt[d][gate][k][j] = R[d][gate H + j][k] in R's own type, so that at each k
// the invocations of neighbouring units j read neighbouring words (R's own rows are H words
// apart: a warp's loads would touch 32 cache lines). vkml/kernels/lstm.py uploads rt once when R
// is a constant, else writes it with a first dispatch of this file (PREP defined).
// The invocations split the 4H x H product R·h two ways (SLICES, a specialization constant):
//   SLICES > 1 (hidden sizes up to the workgroup size / 2): UNITS = workgroup / SLICES
//     invocations per slice, one hidden unit each; slice s sums k in its share of [0, H) for the
//     four gates of its unit into shared memory; a barrier; the invocations of slice 0 add the
//     slices up (in slice order), run the cell (c stays in a register) and write h'; a barrier.
//   SLICES = 1: each invocation owns units j, j + wg, ... and sums over every k itself, then runs
//     the cell at once (c in shared memory); one barrier a step.
// h_{t-1} sits in shared memory, two buffers swapped each step, so a step's writes never race
// the products still reading the previous h; every invocation of a warp reads the same h_k (a
// broadcast).
// sequence_lens: sample b runs its first len steps (reverse: from len - 1 down to 0); Y is 0 at the
// steps beyond, Y_h / Y_c the state after the last step run (the initial state when len is 0). A
// length outside [0, seq] faults (the CPU operator's error) and is clamped.
// Defines: TX (X, W, R, B, states, P, outputs: f32 or f16, computed in f32); PREP: the transpose.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#define FAULT_BINDING 10
#include "include/vkml_types.glsl"
#ifndef PREP
#include "include/vkml_math.glsl"
#include "include/vkml_fault.glsl"
#endif

layout(local_size_x = 64, local_size_x_id = 0) in;
layout(constant_id = 1) const uint HMAX = 32u;    // shared memory per state buffer, >= hidden
layout(constant_id = 2) const uint SLICES = 1u;   // slices of k (a power of two; see above)
layout(constant_id = 3) const uint NPART = 4u;    // partial sums in shared memory: 4 x workgroup, or 4
layout(constant_id = 4) const uint STEP = 0u;     // the products' loop shape (0, or 1 to 8: see products())

// flags
#define HAS_B 1u
#define HAS_H0 2u
#define HAS_C0 4u
#define HAS_P 8u
#define HAS_LENS 16u
#define WANT_Y 32u
#define WANT_YH 64u
#define WANT_YC 128u
#define CLIP 256u
#define INPUT_FORGET 512u
#define PLAIN 1024u  // the default activations (Sigmoid, Tanh, Tanh), no clip, no input_forget

layout(push_constant) uniform Push {
    uint seq, batch, hidden, dirs;
    uint reverse;  // 1: a single reverse direction (direction 1 of bidirectional is always reversed)
    uint layout_;  // 0: [seq, batch, ...] / [dirs, batch, H]; 1: [batch, seq, ...] / [batch, dirs, H]
    uint flags;
    uint site;     // fault site of sequence_lens
    float clip;
    uint act[6];   // f, g, h of direction 0, then of direction 1
    float alpha[6];
    float beta[6];
} pc;

#ifdef PREP
layout(std430, binding = 0) readonly buffer BR { SX r[]; };
layout(std430, binding = 1) writeonly buffer BT { SX rt_out[]; };

// rt[d][g][k][j] = R[d][g H + j][k]: an invocation per element of rt (neighbours write neighbours).
void main() {
    uint H = pc.hidden;
    uint n = pc.dirs * 4u * H * H;
    for (uint e = gl_GlobalInvocationID.x; e < n; e += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
        uint j = e % H;
        uint dgk = e / H;  // (d * 4 + g) * H + k
        uint k = dgk % H;
        uint dg = dgk / H;
        rt_out[e] = r[(dg * H + j) * H + k];
    }
}
#else
layout(std430, binding = 0) readonly buffer BP { float proj[]; };
layout(std430, binding = 1) readonly buffer BR { SX rt[]; };  // R transposed: [dirs][4][k][j]
layout(std430, binding = 2) readonly buffer BB { SX bias[]; };
layout(std430, binding = 3) readonly buffer BH0 { SX h0[]; };
layout(std430, binding = 4) readonly buffer BC0 { SX c0[]; };
layout(std430, binding = 5) readonly buffer BPP { SX peep[]; };
layout(std430, binding = 6) readonly buffer BL { int lens[]; };
layout(std430, binding = 7) writeonly buffer BY { SX y[]; };
layout(std430, binding = 8) writeonly buffer BYH { SX yh[]; };
layout(std430, binding = 9) writeonly buffer BYC { SX yc[]; };

shared float sh_h[2u * HMAX];
shared float sh_c[HMAX];         // SLICES = 1 only
shared float sh_part[NPART];     // SLICES > 1: [slice][gate][unit]

#include "include/vkml_rnn.glsl"

// The cell of unit j: r = R·h of the gates (i, o, f, c), x = proj + Wb, rb = Rb, p = P (i, o, f);
// c in, c' out; returns h'.
float cell(vec4 x, vec4 r, vec4 rb, vec3 p, inout float c, uint d) {
    vec4 g = (x + r) + rb;
    if ((pc.flags & PLAIN) != 0u) {  // the default activations, no clip, no input_forget
        float ig = sigmoid(g.x + p.x * c);
        float fg = sigmoid(g.z + p.z * c);
        float cn = fg * c + ig * vkml_tanh(g.w);
        c = cn;
        return sigmoid(g.y + p.y * cn) * vkml_tanh(cn);
    }
    uint fk = 3u * d;
    float ig = activate(fk, clipped(g.x + p.x * c));
    float fg = (pc.flags & INPUT_FORGET) != 0u ? 1.0 - ig : activate(fk, clipped(g.z + p.z * c));
    float cn = fg * c + ig * activate(fk + 1u, clipped(g.w));
    float og = activate(fk, clipped(g.y + p.y * cn));
    c = cn;
    return og * activate(fk + 2u, cn);
}

// R·h over k in [k0, k1) of unit j's four gates (ri: the offset of rt[d][0][0][j]; hin: h's
// buffer), k ascending, in one of two loop shapes (STEP, chosen by vkml/kernels/lstm.py from the
// size of R; measured on an H100, each was up to 2x slower on the other's sizes):
//   STEP 0: a plain loop, which the driver's compiler unrolls; best while R stays in the L1
//     cache (4 x H x H x its size up to ~128 KiB: 1.40 against 1.67 us a step at H 64 float32).
//   STEP n > 0: rounds of n k whose loads are issued before their products, a k past k1 reading
//     row k0 and counting as 0; with n = 1 the compiler keeps the loop rolled, which is best when
//     R streams from L2 every step (4.7 against 6.7 us a step at H 128 float32, 15.7 against
//     24.2 at H 256, 57 against 111 at H 512).
vec4 products(uint ri, uint hin, uint k0, uint k1) {
    uint H = pc.hidden;
    uint HH = H * H;
    vec4 acc = vec4(0.0);
    if (STEP == 0u) {
        for (uint k = k0; k < k1; k++) {
            uint o = ri + k * H;
            acc += vec4(float(rt[o]), float(rt[o + HH]), float(rt[o + 2u * HH]), float(rt[o + 3u * HH])) * sh_h[hin + k];
        }
        return acc;
    }
    for (uint k = k0; k < k1; k += STEP) {
        float hv[8];
        vec4 rv[8];
        [[unroll]] for (uint u = 0u; u < STEP; u++) {
            bool ok = k + u < k1;
            uint o = ri + (ok ? k + u : k0) * H;
            vec4 v = vec4(float(rt[o]), float(rt[o + HH]), float(rt[o + 2u * HH]), float(rt[o + 3u * HH]));
            rv[u] = ok ? v : vec4(0.0);
            hv[u] = ok ? sh_h[hin + k + u] : 0.0;
        }
        [[unroll]] for (uint u = 0u; u < STEP; u++) acc += rv[u] * hv[u];
    }
    return acc;
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
    bool has_b = (flags & HAS_B) != 0u;
    bool has_p = (flags & HAS_P) != 0u;

    uint len = pc.seq;
    if ((flags & HAS_LENS) != 0u) {
        int l = lens[b];
        if (l < 0 || l > int(pc.seq)) {
            if (lid == 0u) vkml_fault(pc.site, l, l < 0 ? -1 : 0);
            l = clamp(l, 0, int(pc.seq));
        }
        len = uint(l);
    }

    uint rbase = d * G * H;       // rt[d]
    uint bbase = d * 2u * G;      // B[d]: Wb then Rb
    uint pbase = d * 3u * H;      // P[d]: i, o, f
    uint rowbase = d * pc.seq * pc.batch;

    if (SLICES > 1u) {
        // one unit per invocation: unit j of slice ks; slice ks sums k in [k0, k1)
        const uint UNITS = gl_WorkGroupSize.x / SLICES;
        uint ks = lid / UNITS;
        uint j = lid - ks * UNITS;
        bool live = j < H;
        bool owner = live && ks == 0u;  // runs unit j's cell
        uint kc = (H + SLICES - 1u) / SLICES;
        uint k0 = min(H, ks * kc);
        uint k1 = min(H, k0 + kc);
        vec4 wb = vec4(0.0), rb = vec4(0.0);
        vec3 p = vec3(0.0);
        float c = 0.0;
        if (owner) {
            uint s = state_index(d, b, j);
            sh_h[j] = (flags & HAS_H0) != 0u ? float(h0[s]) : 0.0;
            c = (flags & HAS_C0) != 0u ? float(c0[s]) : 0.0;
            if (has_b) {
                wb = vec4(float(bias[bbase + j]), float(bias[bbase + H + j]), float(bias[bbase + 2u * H + j]),
                          float(bias[bbase + 3u * H + j]));
                rb = vec4(float(bias[bbase + G + j]), float(bias[bbase + G + H + j]),
                          float(bias[bbase + G + 2u * H + j]), float(bias[bbase + G + 3u * H + j]));
            }
            if (has_p) p = vec3(float(peep[pbase + j]), float(peep[pbase + H + j]), float(peep[pbase + 2u * H + j]));
        }
        memoryBarrierShared();
        barrier();
        uint cur = 0u;
        for (uint s = 0u; s < len; s++) {
            uint t = rev ? len - 1u - s : s;
            uint pb = (rowbase + (pc.layout_ == 0u ? t * pc.batch + b : b * pc.seq + t)) * G;
            uint hin = cur * HMAX;
            vec4 x = vec4(0.0);
            if (owner) {  // loaded first: the product below hides their latency
                x = vec4(proj[pb + j], proj[pb + H + j], proj[pb + 2u * H + j], proj[pb + 3u * H + j]);
            }
            vec4 acc = live ? products(rbase + j, hin, k0, k1) : vec4(0.0);
            uint q = ks * 4u * UNITS + j;
            sh_part[q] = acc.x;
            sh_part[q + UNITS] = acc.y;
            sh_part[q + 2u * UNITS] = acc.z;
            sh_part[q + 3u * UNITS] = acc.w;
            memoryBarrierShared();
            barrier();
            if (owner) {
                vec4 r = vec4(0.0);
                for (uint sl = 0u; sl < SLICES; sl++) {
                    uint e = sl * 4u * UNITS + j;
                    r += vec4(sh_part[e], sh_part[e + UNITS], sh_part[e + 2u * UNITS], sh_part[e + 3u * UNITS]);
                }
                float h = cell(x + wb, r, rb, p, c, d);
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
            uint s = state_index(d, b, j);
            if ((flags & WANT_YH) != 0u) yh[s] = SX(sh_h[cur * HMAX + j]);
            if ((flags & WANT_YC) != 0u) yc[s] = SX(c);
        }
        return;
    }

    // SLICES = 1: invocation lid owns units lid, lid + wg, ...
    for (uint j = lid; j < H; j += wg) {
        uint s = state_index(d, b, j);
        sh_h[j] = (flags & HAS_H0) != 0u ? float(h0[s]) : 0.0;
        sh_c[j] = (flags & HAS_C0) != 0u ? float(c0[s]) : 0.0;
    }
    memoryBarrierShared();
    barrier();
    uint cur = 0u;
    for (uint s = 0u; s < len; s++) {
        uint t = rev ? len - 1u - s : s;
        uint pb = (rowbase + (pc.layout_ == 0u ? t * pc.batch + b : b * pc.seq + t)) * G;
        uint hin = cur * HMAX;
        uint hout = (cur ^ 1u) * HMAX;
        for (uint j = lid; j < H; j += wg) {
            vec4 x = vec4(proj[pb + j], proj[pb + H + j], proj[pb + 2u * H + j], proj[pb + 3u * H + j]);
            vec4 acc = products(rbase + j, hin, 0u, H);
            vec4 wb = vec4(0.0), rb = vec4(0.0);
            if (has_b) {
                wb = vec4(float(bias[bbase + j]), float(bias[bbase + H + j]), float(bias[bbase + 2u * H + j]),
                          float(bias[bbase + 3u * H + j]));
                rb = vec4(float(bias[bbase + G + j]), float(bias[bbase + G + H + j]),
                          float(bias[bbase + G + 2u * H + j]), float(bias[bbase + G + 3u * H + j]));
            }
            vec3 p = vec3(0.0);
            if (has_p) p = vec3(float(peep[pbase + j]), float(peep[pbase + H + j]), float(peep[pbase + 2u * H + j]));
            float c = sh_c[j];
            float h = cell(x + wb, acc, rb, p, c, d);
            sh_c[j] = c;
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
#endif
