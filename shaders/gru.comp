#version 450
// GRU's recurrence (ONNX GRU, every opset), after vkml/kernels/gru.py has put the input
// projection X·Wᵀ of every time step and direction into the float32 scratch `proj`
// ([dirs][rows][3H], rows in X's own order: t * batch + b for layout 0, b * seq + t for layout 1)
// with one GEMM. As shaders/lstm.comp: one workgroup per (direction, batch row) walks the time
// steps (unit j: gate rows j, H + j, 2H + j; order z, r, h). Per step, as vkml/ops/rnn.py's
// _GRU._cell in float32 (f, g: the activations, Sigmoid and Tanh by default; clip(v) =
// clamp(v, -clip, clip) when clip is given):
//   z = f(clip((xz + Wbz) + (Rz·h + Rbz)));  r = f(clip((xr + Wbr) + (Rr·h + Rbr)))
//   linear_before_reset 0: h~ = g(clip(((xh + Wbh) + Rh·(r ⊙ h)) + Rbh))
//   linear_before_reset 1: h~ = g(clip((xh + Wbh) + r ⊙ (Rh·h + Rbh)))
//   h' = (1 - z) h~ + z h
// R is read transposed, rt[d][gate][k][j] = R[d][gate H + j][k] in R's own type, so that at each k
// the invocations of neighbouring units j read neighbouring words (R's own rows are H words
// apart: a warp's loads would touch 32 cache lines). vkml/kernels/gru.py uploads rt once when R
// is a constant, else writes it with a first dispatch of this file (PREP defined).
// The invocations split the products two ways (SLICES, a specialization constant; as lstm.comp):
//   SLICES > 1 (hidden sizes up to the workgroup size / 2): UNITS = workgroup / SLICES
//     invocations per slice, one hidden unit each; slice s sums k in its share of [0, H) into
//     shared memory; a barrier; the invocations of slice 0 (the units' owners) add the slices up
//     (in slice order) and go on; a barrier. linear_before_reset 1: one such round a step (the
//     three gates' products, then the owners write h'). linear_before_reset 0: two (z's and r's
//     products, the owners write r ⊙ h and keep z; then Rh·(r ⊙ h), the owners write h').
//   SLICES = 1: each invocation owns units j, j + wg, ... and sums over every k itself.
//     linear_before_reset 1: h' at once, one barrier a step; 0: r ⊙ h and z, a barrier, h', a
//     barrier.
// Shared memory sh_v (3 x HMAX floats, then the partial sums): h_{t-1} from 0; linear_before_reset 1: h' at HMAX, the two
// buffers swapped each step, so a step's writes never race the products still reading h;
// linear_before_reset 0: r ⊙ h at HMAX, z at 2 HMAX (SLICES = 1), h written in place once every
// product of the step has read it. Every invocation of a warp reads the same h_k (a broadcast).
// sequence_lens: sample b runs its first len steps (reverse: len - 1 down to 0); Y is 0 at the
// steps beyond, Y_h the state after the last step run (the initial state when len is 0). A
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
layout(constant_id = 3) const uint NPART = 3u;    // partial sums in shared memory: 3 x workgroup (unused with one slice)
layout(constant_id = 4) const uint STEP = 0u;     // the products' loop shape (0, or 1 to 8: see PRODUCTS)

// flags
#define HAS_B 1u
#define HAS_H0 2u
#define HAS_LENS 4u
#define WANT_Y 8u
#define WANT_YH 16u
#define LBR 32u    // linear_before_reset
#define CLIP 64u
#define PLAIN 128u // the default activations (Sigmoid, Tanh), no clip

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
layout(std430, binding = 1) writeonly buffer BT { SX rt_out[]; };

// rt[d][g][k][j] = R[d][g H + j][k]: an invocation per element of rt (neighbours write neighbours).
void main() {
    uint H = pc.hidden;
    uint n = pc.dirs * 3u * H * H;
    for (uint e = gl_GlobalInvocationID.x; e < n; e += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
        uint j = e % H;
        uint dgk = e / H;  // (d * 3 + g) * H + k
        uint k = dgk % H;
        uint dg = dgk / H;
        rt_out[e] = r[(dg * H + j) * H + k];
    }
}
#else
layout(std430, binding = 0) readonly buffer BP { float proj[]; };
layout(std430, binding = 1) readonly buffer BR { SX rt[]; };  // R transposed: [dirs][3][k][j]
layout(std430, binding = 2) readonly buffer BB { SX bias[]; };
layout(std430, binding = 3) readonly buffer BH0 { SX h0[]; };
layout(std430, binding = 4) readonly buffer BL { int lens[]; };
layout(std430, binding = 5) writeonly buffer BY { SX y[]; };
layout(std430, binding = 6) writeonly buffer BYH { SX yh[]; };

// h, then h' or r ⊙ h, then z (see above); SLICES > 1: then the partial sums, [slice][gate][unit].
// One array, no larger than 3 x HMAX floats with one slice: vkml/kernels/gru.py's check() admits
// a hidden size while 3 x HMAX floats fit the device (49152 bytes: HMAX 4096 exactly).
const uint SHARED = SLICES > 1u ? 3u * HMAX + NPART : 3u * HMAX;
shared float sh_v[SHARED];
#define PART(i) sh_v[3u * HMAX + (i)]

#include "include/vkml_rnn.glsl"

// f (the gates z and r) and g (the candidate) of direction d.
float gate_f(uint d, float v) {
    return (pc.flags & PLAIN) != 0u ? sigmoid(v) : activate(2u * d, clipped(v));
}

float cand_g(uint d, float v) {
    return (pc.flags & PLAIN) != 0u ? vkml_tanh(v) : activate(2u * d + 1u, clipped(v));
}

// NAME(ri, v, k0, k1): R·v over k in [k0, k1) of consecutive gates of unit j (ri: the offset of
// rt[d][first gate][0][j]; v: the vector's offset in sh_v), k ascending, as a VEC of one value per
// gate (LOAD: the gates' words of rt at offset o). The loop takes one of lstm.comp's two shapes
// (STEP, chosen by vkml/kernels/rnn_common.py loop_step() from the size of R): STEP 0 a plain
// loop, which the driver's compiler unrolls (best while R stays in the L1 cache); STEP n > 0
// rounds of n k whose loads are issued before their products, a k past k1 reading row k0 and
// counting as 0 (n = 1 keeps the loop rolled: best while R streams from L2 every step).
#define PRODUCTS(NAME, VEC, LOAD)                                          \
VEC NAME(uint ri, uint v, uint k0, uint k1) {                              \
    uint H = pc.hidden;                                                    \
    uint HH = H * H;                                                       \
    VEC acc = VEC(0.0);                                                    \
    if (STEP == 0u) {                                                      \
        for (uint k = k0; k < k1; k++) {                                   \
            uint o = ri + k * H;                                           \
            acc += LOAD * sh_v[v + k];                                     \
        }                                                                  \
        return acc;                                                        \
    }                                                                      \
    for (uint k = k0; k < k1; k += STEP) {                                 \
        float hv[8];                                                       \
        VEC rv[8];                                                         \
        [[unroll]] for (uint u = 0u; u < STEP; u++) {                      \
            bool ok = k + u < k1;                                          \
            uint o = ri + (ok ? k + u : k0) * H;                           \
            VEC w = LOAD;                                                  \
            rv[u] = ok ? w : VEC(0.0);                                     \
            hv[u] = ok ? sh_v[v + k + u] : 0.0;                            \
        }                                                                  \
        [[unroll]] for (uint u = 0u; u < STEP; u++) acc += rv[u] * hv[u];  \
    }                                                                      \
    return acc;                                                            \
}
#define LOAD1 float(rt[o])
#define LOAD2 vec2(float(rt[o]), float(rt[o + HH]))
#define LOAD3 vec3(float(rt[o]), float(rt[o + HH]), float(rt[o + 2u * HH]))
PRODUCTS(products1, float, LOAD1)
PRODUCTS(products2, vec2, LOAD2)
PRODUCTS(products3, vec3, LOAD3)

void main() {
    uint H = pc.hidden;
    uint G = 3u * H;
    uint HH = H * H;
    uint d = gl_WorkGroupID.x / pc.batch;
    uint b = gl_WorkGroupID.x - d * pc.batch;
    uint lid = gl_LocalInvocationID.x;
    uint wg = gl_WorkGroupSize.x;
    bool rev = pc.reverse != 0u || d == 1u;
    uint flags = pc.flags;
    bool lbr = (flags & LBR) != 0u;
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

    uint rbase = d * G * H;       // rt[d]: z's at rbase, r's at + HH, h's at + 2 HH
    uint bbase = d * 2u * G;      // B[d]: Wb then Rb
    uint rowbase = d * pc.seq * pc.batch;
    const uint A = HMAX;          // r ⊙ h (linear_before_reset 0)
    const uint Z = 2u * HMAX;     // z (linear_before_reset 0, SLICES = 1)

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
        vec3 wb = vec3(0.0), rb = vec3(0.0);
        if (owner) {
            sh_v[j] = (flags & HAS_H0) != 0u ? float(h0[state_index(d, b, j)]) : 0.0;
            if (has_b) {
                wb = vec3(float(bias[bbase + j]), float(bias[bbase + H + j]), float(bias[bbase + 2u * H + j]));
                rb = vec3(float(bias[bbase + G + j]), float(bias[bbase + G + H + j]),
                          float(bias[bbase + G + 2u * H + j]));
            }
        }
        memoryBarrierShared();
        barrier();
        uint cur = 0u;  // linear_before_reset 1: h in sh_v[cur * HMAX ...]
        uint q = ks * 3u * UNITS + j;
        for (uint s = 0u; s < len; s++) {
            uint t = rev ? len - 1u - s : s;
            uint pb = (rowbase + (pc.layout_ == 0u ? t * pc.batch + b : b * pc.seq + t)) * G;
            uint hin = cur * HMAX;
            vec3 x = vec3(0.0);
            if (owner) {  // loaded first: the products below hide their latency
                x = vec3(proj[pb + j], proj[pb + H + j], proj[pb + 2u * H + j]) + wb;
            }
            if (lbr) {
                vec3 acc = live ? products3(rbase + j, hin, k0, k1) : vec3(0.0);
                PART(q) = acc.x;
                PART(q + UNITS) = acc.y;
                PART(q + 2u * UNITS) = acc.z;
            } else {
                vec2 acc = live ? products2(rbase + j, 0u, k0, k1) : vec2(0.0);
                PART(q) = acc.x;
                PART(q + UNITS) = acc.y;
            }
            memoryBarrierShared();
            barrier();
            float z = 0.0, h = 0.0, hn = 0.0;
            if (owner) {
                vec3 r = vec3(0.0);
                for (uint sl = 0u; sl < SLICES; sl++) {
                    uint e = sl * 3u * UNITS + j;
                    r += vec3(PART(e), PART(e + UNITS), lbr ? PART(e + 2u * UNITS) : 0.0);
                }
                z = gate_f(d, x.x + (r.x + rb.x));
                float rg = gate_f(d, x.y + (r.y + rb.y));
                h = sh_v[hin + j];
                if (lbr) {
                    hn = (1.0 - z) * cand_g(d, x.z + rg * (r.z + rb.z)) + z * h;
                    sh_v[(cur ^ 1u) * HMAX + j] = hn;
                } else {
                    sh_v[A + j] = rg * h;
                }
            }
            memoryBarrierShared();
            barrier();
            if (lbr) {
                cur ^= 1u;
            } else {  // Rh·(r ⊙ h): the second round
                float acc = live ? products1(rbase + 2u * HH + j, A, k0, k1) : 0.0;
                PART(ks * UNITS + j) = acc;
                memoryBarrierShared();
                barrier();
                if (owner) {
                    float r = 0.0;
                    for (uint sl = 0u; sl < SLICES; sl++) r += PART(sl * UNITS + j);
                    hn = (1.0 - z) * cand_g(d, (x.z + r) + rb.z) + z * h;
                    sh_v[j] = hn;
                }
                memoryBarrierShared();
                barrier();
            }
            if (owner && (flags & WANT_Y) != 0u) y[y_index(t, d, b, j)] = SX(hn);
        }
        if (owner) {
            if ((flags & WANT_Y) != 0u)
                for (uint t = len; t < pc.seq; t++) y[y_index(t, d, b, j)] = SX(0.0);
            if ((flags & WANT_YH) != 0u) yh[state_index(d, b, j)] = SX(sh_v[cur * HMAX + j]);
        }
        return;
    }

    // SLICES = 1: invocation lid owns units lid, lid + wg, ...
    for (uint j = lid; j < H; j += wg) {
        sh_v[j] = (flags & HAS_H0) != 0u ? float(h0[state_index(d, b, j)]) : 0.0;
    }
    memoryBarrierShared();
    barrier();
    uint cur = 0u;
    for (uint s = 0u; s < len; s++) {
        uint t = rev ? len - 1u - s : s;
        uint pb = (rowbase + (pc.layout_ == 0u ? t * pc.batch + b : b * pc.seq + t)) * G;
        uint hin = cur * HMAX;
        // linear_before_reset 1: h'; 0: z, r ⊙ h
        for (uint j = lid; j < H; j += wg) {
            vec3 x = vec3(proj[pb + j], proj[pb + H + j], proj[pb + 2u * H + j]);
            vec3 r = lbr ? products3(rbase + j, hin, 0u, H) : vec3(products2(rbase + j, 0u, 0u, H), 0.0);
            vec3 rb = vec3(0.0);
            if (has_b) {
                x += vec3(float(bias[bbase + j]), float(bias[bbase + H + j]), float(bias[bbase + 2u * H + j]));
                rb = vec3(float(bias[bbase + G + j]), float(bias[bbase + G + H + j]),
                          float(bias[bbase + G + 2u * H + j]));
            }
            float z = gate_f(d, x.x + (r.x + rb.x));
            float rg = gate_f(d, x.y + (r.y + rb.y));
            float h = sh_v[hin + j];
            if (lbr) {
                float hn = (1.0 - z) * cand_g(d, x.z + rg * (r.z + rb.z)) + z * h;
                sh_v[(cur ^ 1u) * HMAX + j] = hn;
                if ((flags & WANT_Y) != 0u) y[y_index(t, d, b, j)] = SX(hn);
            } else {
                sh_v[A + j] = rg * h;
                sh_v[Z + j] = z;
            }
        }
        memoryBarrierShared();
        barrier();
        if (lbr) {
            cur ^= 1u;
            continue;
        }
        // linear_before_reset 0: h' (only unit j's invocation reads or writes sh_v[j] here)
        for (uint j = lid; j < H; j += wg) {
            float acc = products1(rbase + 2u * HH + j, A, 0u, H);
            float xh = proj[pb + 2u * H + j];
            float rbh = 0.0;
            if (has_b) {
                xh += float(bias[bbase + 2u * H + j]);
                rbh = float(bias[bbase + G + 2u * H + j]);
            }
            float z = sh_v[Z + j];
            float hn = (1.0 - z) * cand_g(d, (xh + acc) + rbh) + z * sh_v[j];
            sh_v[j] = hn;
            if ((flags & WANT_Y) != 0u) y[y_index(t, d, b, j)] = SX(hn);
        }
        memoryBarrierShared();
        barrier();
    }

    for (uint j = lid; j < H; j += wg) {
        if ((flags & WANT_Y) != 0u)
            for (uint t = len; t < pc.seq; t++) y[y_index(t, d, b, j)] = SX(0.0);
        if ((flags & WANT_YH) != 0u) yh[state_index(d, b, j)] = SX(sh_v[cur * HMAX + j]);
    }
}
#endif
