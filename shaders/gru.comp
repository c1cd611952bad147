#version 450
// GRU's recurrence (ONNX GRU, every opset), after vkml/kernels/gru.py has put the input
// projection X·Wᵀ of every time step and direction into the float32 scratch `proj`
// ([dirs][rows][3H], rows in X's own order: t * batch + b for layout 0, b * seq + t for layout 1)
// with one GEMM. As shaders/lstm.comp: one workgroup per (direction, batch row) walks the time
// steps, its invocations owning hidden units (unit j: gate rows j, H + j, 2H + j; order z, r, h).
// Per step, as vkml/ops/rnn.py's _GRU._cell in float32 (f, g: the activations, Sigmoid and Tanh
// by default; clip(v) = clamp(v, -clip, clip) when clip is given):
//   z = f(clip((xz + Wbz) + (Rz·h + Rbz)));  r = f(clip((xr + Wbr) + (Rr·h + Rbr)))
//   linear_before_reset 0: h~ = g(clip(((xh + Wbh) + Rh·(r ⊙ h)) + Rbh))
//   linear_before_reset 1: h~ = g(clip((xh + Wbh) + r ⊙ (Rh·h + Rbh)))
//   h' = (1 - z) h~ + z h
// Two phases per step, a barrier after each: (1) z, r, and r ⊙ h (or, linear_before_reset 1,
// the whole of h') into shared memory, every invocation still reading h; (2) the new h.
// R is read transposed: a first dispatch (this file with PREP defined) writes it to the float32
// scratch `rt` as [dirs][gate][k][j], so that at each k the invocations of neighbouring units j
// read neighbouring words (R's own rows are H words apart: a warp's loads would touch 32 lines).
// sequence_lens: sample b runs its first len steps (reverse: len - 1 down to 0); Y is 0 at the
// steps beyond, Y_h the state after the last step run (the initial state when len is 0). A
// length outside [0, seq] faults (the CPU operator's error) and is clamped.
// Defines: TX (X, W, R, B, initial_h, outputs: f32 or f16, computed in f32); PREP: the transpose.
#extension GL_GOOGLE_include_directive : require
#define FAULT_BINDING 7
#include "include/vkml_types.glsl"
#ifndef PREP
#include "include/vkml_math.glsl"
#include "include/vkml_fault.glsl"
#endif

layout(local_size_x = 64, local_size_x_id = 0) in;
layout(constant_id = 1) const uint HMAX = 32u;  // shared memory per state buffer, >= hidden

// flags
#define HAS_B 1u
#define HAS_H0 2u
#define HAS_LENS 4u
#define WANT_Y 8u
#define WANT_YH 16u
#define LBR 32u    // linear_before_reset
#define CLIP 64u

// activation codes (vkml/kernels/gru.py ACTIVATIONS)
#define A_RELU 0u
#define A_TANH 1u
#define A_SIGMOID 2u
#define A_AFFINE 3u
#define A_LEAKYRELU 4u
#define A_THRESHOLDEDRELU 5u
#define A_SCALEDTANH 6u
#define A_HARDSIGMOID 7u
#define A_ELU 8u
#define A_SOFTSIGN 9u
#define A_SOFTPLUS 10u

layout(push_constant) uniform Push {
    uint seq, batch, hidden, dirs;
    uint reverse;  // 1: a single reverse direction (direction 1 of bidirectional is always reversed)
    uint layout_;  // 0: [seq, batch, ...] / [dirs, batch, H]; 1: [batch, seq, ...] / [batch, dirs, H]
    uint flags;
    uint site;     // fault site of sequence_lens
    float clip;
    uint act[4];   // f and g of direction 0, then of direction 1
    float alpha[4];
    float beta[4];
} pc;

#ifdef PREP
layout(std430, binding = 0) readonly buffer BR { SX r[]; };
layout(std430, binding = 1) writeonly buffer BT { float rt_out[]; };

// rt[d][g][k][j] = R[d][g H + j][k]: an invocation per element of rt (neighbours write neighbours).
void main() {
    uint H = pc.hidden;
    uint n = pc.dirs * 3u * H * H;
    for (uint e = gl_GlobalInvocationID.x; e < n; e += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
        uint j = e % H;
        uint dgk = e / H;  // (d * 3 + g) * H + k
        uint k = dgk % H;
        uint dg = dgk / H;
        rt_out[e] = float(r[(dg * H + j) * H + k]);
    }
}
#else
layout(std430, binding = 0) readonly buffer BP { float proj[]; };
layout(std430, binding = 1) readonly buffer BR { float rt[]; };  // R transposed: [dirs][3][k][j]
layout(std430, binding = 2) readonly buffer BB { SX bias[]; };
layout(std430, binding = 3) readonly buffer BH0 { SX h0[]; };
layout(std430, binding = 4) readonly buffer BL { int lens[]; };
layout(std430, binding = 5) writeonly buffer BY { SX y[]; };
layout(std430, binding = 6) writeonly buffer BYH { SX yh[]; };

shared float sh_h[HMAX];  // h_{t-1}
shared float sh_a[HMAX];  // r ⊙ h (linear_before_reset 0) or h' (1)
shared float sh_z[HMAX];  // z

// As the NumPy operator: split by sign so exp never overflows.
float sigmoid(float x) {
    float e = exp(-abs(x));
    return x >= 0.0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
}

// vkml/ops/rnn.py's _ACTIVATIONS.
float activate(uint k, float x) {
    uint code = pc.act[k];
    float a = pc.alpha[k], b = pc.beta[k];
    if (code == A_TANH) return vkml_tanh(x);
    if (code == A_SIGMOID) return sigmoid(x);
    if (code == A_RELU) return max(x, 0.0);
    if (code == A_AFFINE) return a * x + b;
    if (code == A_LEAKYRELU) return x >= 0.0 ? x : a * x;
    if (code == A_THRESHOLDEDRELU) return x > a ? x : 0.0;
    if (code == A_SCALEDTANH) return a * vkml_tanh(b * x);
    if (code == A_HARDSIGMOID) return clamp(a * x + b, 0.0, 1.0);
    if (code == A_ELU) return x >= 0.0 ? x : a * vkml_expm1(min(x, 0.0));
    if (code == A_SOFTSIGN) return x / (1.0 + abs(x));
    return max(x, 0.0) + vkml_log1p(exp(-abs(x)));  // A_SOFTPLUS: logaddexp(0, x)
}

float clipped(float v) {
    return (pc.flags & CLIP) != 0u ? clamp(v, -pc.clip, pc.clip) : v;
}

// Index of (direction d, batch b, unit j) in initial_h / Y_h.
uint state_index(uint d, uint b, uint j) {
    return (pc.layout_ == 0u ? d * pc.batch + b : b * pc.dirs + d) * pc.hidden + j;
}

// Index of (step t, direction d, batch b, unit j) in Y.
uint y_index(uint t, uint d, uint b, uint j) {
    return (pc.layout_ == 0u ? (t * pc.dirs + d) * pc.batch + b : (b * pc.seq + t) * pc.dirs + d) * pc.hidden + j;
}

void main() {
    uint H = pc.hidden;
    uint G = 3u * H;
    uint d = gl_WorkGroupID.x / pc.batch;
    uint b = gl_WorkGroupID.x - d * pc.batch;
    uint lid = gl_LocalInvocationID.x;
    uint wg = gl_WorkGroupSize.x;
    bool rev = pc.reverse != 0u || d == 1u;
    uint flags = pc.flags;
    bool lbr = (flags & LBR) != 0u;
    bool has_b = (flags & HAS_B) != 0u;
    uint fk = 2u * d, gk = 2u * d + 1u;

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
        sh_h[j] = (flags & HAS_H0) != 0u ? float(h0[state_index(d, b, j)]) : 0.0;
    }
    memoryBarrierShared();
    barrier();

    uint rbase = d * G * H;       // rt[d]
    uint HH = H * H;
    uint bbase = d * 2u * G;      // B[d]: Wb then Rb
    for (uint s = 0u; s < len; s++) {
        uint t = rev ? len - 1u - s : s;
        uint row = d * pc.seq * pc.batch + (pc.layout_ == 0u ? t * pc.batch + b : b * pc.seq + t);
        uint pb = row * G;
        // phase 1: z, r; r ⊙ h or the whole new h
        for (uint j = lid; j < H; j += wg) {
            float xz = proj[pb + j], xr = proj[pb + H + j];
            float rz = 0.0, rr = 0.0, rh = 0.0;
            uint kz = rbase + j, kr = kz + HH, kh = kr + HH;
            if (lbr) {
                for (uint k = 0u; k < H; k++) {
                    float hk = sh_h[k];
                    rz += rt[kz + k * H] * hk;
                    rr += rt[kr + k * H] * hk;
                    rh += rt[kh + k * H] * hk;
                }
            } else {
                for (uint k = 0u; k < H; k++) {
                    float hk = sh_h[k];
                    rz += rt[kz + k * H] * hk;
                    rr += rt[kr + k * H] * hk;
                }
            }
            if (has_b) {
                xz += float(bias[bbase + j]);
                xr += float(bias[bbase + H + j]);
                rz += float(bias[bbase + G + j]);
                rr += float(bias[bbase + G + H + j]);
            }
            float z = activate(fk, clipped(xz + rz));
            float rt = activate(fk, clipped(xr + rr));
            float h = sh_h[j];
            if (lbr) {
                float xh = proj[pb + 2u * H + j];
                if (has_b) {
                    xh += float(bias[bbase + 2u * H + j]);
                    rh += float(bias[bbase + G + 2u * H + j]);
                }
                float cand = activate(gk, clipped(xh + rt * rh));
                sh_a[j] = (1.0 - z) * cand + z * h;
            } else {
                sh_a[j] = rt * h;
                sh_z[j] = z;
            }
        }
        memoryBarrierShared();
        barrier();
        // phase 2: the new h (only unit j's invocation reads or writes sh_h[j] here)
        for (uint j = lid; j < H; j += wg) {
            float hn;
            if (lbr) {
                hn = sh_a[j];
            } else {
                float acc = 0.0;
                uint kh = rbase + 2u * HH + j;
                for (uint k = 0u; k < H; k++) acc += rt[kh + k * H] * sh_a[k];
                float xh = proj[pb + 2u * H + j];
                if (has_b) xh += float(bias[bbase + 2u * H + j]);
                float v = xh + acc;
                if (has_b) v += float(bias[bbase + G + 2u * H + j]);
                float cand = activate(gk, clipped(v));
                float z = sh_z[j];
                hn = (1.0 - z) * cand + z * sh_h[j];
            }
            sh_h[j] = hn;
            if ((flags & WANT_Y) != 0u) y[y_index(t, d, b, j)] = SX(hn);
        }
        memoryBarrierShared();
        barrier();
    }

    for (uint j = lid; j < H; j += wg) {
        if ((flags & WANT_Y) != 0u)
            for (uint t = len; t < pc.seq; t++) y[y_index(t, d, b, j)] = SX(0.0);
        if ((flags & WANT_YH) != 0u) yh[state_index(d, b, j)] = SX(sh_h[j]);
    }
}
#endif
