#version 450
// Conv and ConvTranspose (1-3 spatial dims, groups, strides, dilations, pads) as implicit
// GEMMs on the register-blocked core of include/vkml_gemm.glsl; fp32 accumulation.
//
// Per group g (workgroups along z):  O[m, col] = sum_k A[m, k] * B[k, col]
//   rows m: the group's Mg output channels; columns col = n * P + p over every image n and
//   output position p; k = (c, tap) over the group's Cg input channels and the kernel taps.
//   A = the weights, B = the input columns, gathered on the fly (im2col in the load stage).
// A per-k table (binding 4, two ivec4 per k, built by the host) gives, for entry 2k:
//   x: c * S (+ the tap's flat spatial offset for Conv), y/z/w: the tap's offsets dz, dy, dx
//   (tap index * dilation); and for entry 2k + 1: x: the weight offset of k within a row.
// Split K (S > 1, for small outputs with a long K that would leave most of the GPU idle):
// workgroup z covers (group, split); split s sums k in [s * KS, min(K, (s + 1) * KS)) and
// writes its partial sums, bias left out, to part[(s * Mtot + g * M + m) * NP + col]; the
// splitk_reduce shader then adds the S partials and the bias into the output.
// Conv:           input coordinate = o * stride - pad_begin + d, valid inside the input.
// ConvTranspose:  q = o + pad_begin - d must be a multiple of the stride; input = q / stride.
#extension GL_GOOGLE_include_directive : require
#include "include/vkml_types.glsl"

layout(local_size_x = 256, local_size_x_id = 0) in;
#include "include/vkml_gemm.glsl"

layout(constant_id = 6) const uint VEC_A = 1;       // 4: weight rows are contiguous and aligned
layout(constant_id = 7) const bool HAS_BIAS = false;
layout(constant_id = 8) const bool TRANSPOSED = false;

#if TX == 2
#define SX4 f16vec4
#else
#define SX4 vec4
#endif

layout(std430, binding = 0) readonly buffer BX { SX x[]; };
layout(std430, binding = 1) readonly buffer BW { SX w[]; };
layout(std430, binding = 1) readonly buffer BW4 { SX4 w4[]; };
layout(std430, binding = 2) readonly buffer BBias { SO bias[]; };
layout(std430, binding = 3) writeonly buffer BO { SO o[]; };
layout(std430, binding = 4) readonly buffer BT { ivec4 ktab[]; };
layout(std430, binding = 5) writeonly buffer BP { float part[]; };
layout(std430, binding = 6) readonly buffer BR { SO res[]; };

layout(push_constant) uniform Push {
    uint M, NP, K, G;       // Mg, N * P, Cg * taps, groups
    uint P, CS, CgS;        // positions per image, C * S, Cg * S (input strides)
    uint wg, wm;            // weight strides: per group, per output channel (row)
    uint Mtot;              // M, all groups (output channel stride)
    uint OD, OH, OW;        // output spatial (1 for missing dims)
    int D, H, W;            // input spatial
    int sz, sy, sx;         // strides
    int pz, py, px;         // pads at the beginning
    uint KS, S;             // k per split, splits (1: no split, part[] unused)
    uint EPI;               // epilogue (vkml_epilogue.glsl): 1 adds res[] (same layout), 2 Relu, 4 Clip
    float ELO, EHI;         // Clip's bounds (EPI & 4), an activation's alpha, beta
} pc;

#include "include/vkml_epilogue.glsl"

uint KEND;                  // the end of this split's k range

// Output channel `row` (over all groups), column col = image * P + position: v plus the
// bias, then the epilogue; a split's partial (S > 1), bias left out, for splitk_reduce.
void store1(uint split, uint row, uint col, float v) {
    if (col >= pc.NP) return;
    if (pc.S > 1u) {
        part[(split * pc.Mtot + row) * pc.NP + col] = v;
        return;
    }
    if (HAS_BIAS) v += float(bias[row]);
    uint img = col / pc.P, p = col - img * pc.P;
    uint oi = (img * pc.Mtot + row) * pc.P + p;
    o[oi] = SO(epilogue(v, oi, pc.EPI));
}

vec4 load_a(uint base, uint gm, uint gk) {
    vec4 v = vec4(0.0);
    if (gm >= pc.M || gk >= KEND) return v;
    uint row = base + gm * pc.wm;
    if (VEC_A == 4u) return vec4(w4[(row + gk) >> 2u]);
    for (uint c_ = 0u; c_ < 4u; ++c_)
        if (gk + c_ < KEND) v[c_] = float(w[row + uint(ktab[2u * (gk + c_) + 1u].x)]);
    return v;
}

// This invocation's four B columns (fixed for the whole workgroup: the host makes the
// workgroup size a multiple of BN/4): where each column's window starts.
int col_off[4];      // Conv: image base + window corner offset; ConvTranspose: image base
ivec3 col_base[4];   // Conv: window corner (o * s - pad); ConvTranspose: o + pad
bool col_ok[4];

void setup_columns(uint c0) {
    int hw = pc.H * pc.W;
    for (uint j = 0u; j < 4u; ++j) {
        uint col = c0 + j;
        col_ok[j] = col < pc.NP;
        uint img = col / pc.P, p = col - img * pc.P;
        uint ox = p % pc.OW, t = p / pc.OW;
        uint oy = t % pc.OH, oz = t / pc.OH;
        ivec3 o3 = ivec3(int(oz), int(oy), int(ox));
        if (TRANSPOSED) {
            col_base[j] = o3 + ivec3(pc.pz, pc.py, pc.px);
            col_off[j] = int(img * pc.CS);
        } else {
            ivec3 b = o3 * ivec3(pc.sz, pc.sy, pc.sx) - ivec3(pc.pz, pc.py, pc.px);
            col_base[j] = b;
            col_off[j] = int(img * pc.CS) + b.x * hw + b.y * pc.W + b.z;
        }
    }
}

vec4 load_b(uint xg, uint gk) {
    vec4 v = vec4(0.0);
    if (gk >= KEND) return v;
    ivec4 e = ktab[2u * gk];
    ivec3 lim = ivec3(pc.D, pc.H, pc.W);
    for (uint j = 0u; j < 4u; ++j) {
        if (!col_ok[j]) continue;
        if (TRANSPOSED) {
            ivec3 q = col_base[j] - e.yzw;
            ivec3 s = ivec3(pc.sz, pc.sy, pc.sx);
            if (any(lessThan(q, ivec3(0)))) continue;
            ivec3 i3 = q / s;
            if (any(notEqual(i3 * s, q)) || any(greaterThanEqual(i3, lim))) continue;
            v[j] = float(x[uint(col_off[j] + e.x + (i3.x * pc.H + i3.y) * pc.W + i3.z) + xg]);
        } else {
            ivec3 i3 = col_base[j] + e.yzw;
            if (any(lessThan(i3, ivec3(0))) || any(greaterThanEqual(i3, lim))) continue;
            v[j] = float(x[uint(col_off[j] + e.x) + xg]);
        }
    }
    return v;
}

void main() {
    uint tid = gl_LocalInvocationID.x;
    uint tx = tid % WGX, ty = tid / WGX;
    uint n0 = gl_WorkGroupID.x * BN, m0 = gl_WorkGroupID.y * BM;
    uint bcol = (tid % BN4) * 4u;  // B slots run along the columns: s % BN4 is fixed
    setup_columns(n0 + bcol);

    for (uint gs = gl_WorkGroupID.z; gs < pc.G * pc.S; gs += gl_NumWorkGroups.z) {
        uint g = gs / pc.S, split = gs - g * pc.S;
        uint kbeg = split * pc.KS;
        KEND = min(pc.K, kbeg + pc.KS);
        uint ntiles = KEND > kbeg ? (KEND - kbeg + BK - 1u) / BK : 0u;
        uint xg = g * pc.CgS, wbase = g * pc.wg;
        GEMM_ACC_DECL;
        GEMM_ACC_ZERO;
#define GEMM_A_ALONG_M false
#define GEMM_B_ALONG_N true
#define GEMM_FETCH_A(m_, k_) load_a(wbase, m0 + (m_), (k_))
#define GEMM_FETCH_B(k_, n_) load_b(xg, (k_))  /* the columns are this invocation's (setup_columns) */
        GEMM_K_LOOP(kbeg, ntiles, tid, tx, ty)

        if (GEMM_STORE_UNROLLED) {
            [[unroll]] for (uint i = 0u; i < TM; ++i) {
                uint m = m0 + gemm_row(i, ty);
                if (m >= pc.M) continue;
                [[unroll]] for (uint j = 0u; j < TN; ++j)
                    store1(split, g * pc.M + m, n0 + gemm_col(j, tx), acc4[i * TN4 + (j >> 2u)][j & 3u]);
            }
        } else {  // one copy of the store (include/vkml_gemm.glsl, GEMM_ACC_TAKE)
            [[dont_unroll]] for (uint q = 0u; q < TM * TN4; ++q) {
                vec4 v4;
                GEMM_ACC_TAKE(v4);
                uint i = q / TN4;
                uint m = m0 + gemm_row(i, ty), cb = n0 + gemm_col((q - i * TN4) * 4u, tx);
                if (m >= pc.M) continue;
                [[dont_unroll]] for (uint e = 0u; e < 4u; ++e) store1(split, g * pc.M + m, cb + e, v4[e]);
            }
        }
    }
}
