#version 450
// Conv (1-3 spatial dims, groups, strides, dilations, pads; not ConvTranspose) on tensor
// cores: conv.comp's implicit GEMM in float16 with float32 accumulation, on the cooperative-
// matrix core of include/vkml_coop.glsl (the tiles, K loop and staged stores of
// matmul_coop.comp).
//
// Per group g (workgroups along z):  O[m, col] = sum_k W[m, k] * X_im2col[k, col]
//   rows m: the group's Mg output channels; columns col = n * P + p over every image n and
//   output position p; k = (c, tap) over the group's Cg input channels and the kernel taps.
// A = the weights: Mg rows of K contiguous values (a row's k-th value is at k), read as VEC-wide
// vectors when A_VEC (K % VEC == 0 and an aligned binding), else value by value.
// B = the input columns, gathered value by value into shared memory stored column by column
// (TRANS_B: each column's BK values contiguous, read by the cooperative loads as column-major).
// Each invocation gathers one column (the host makes the workgroup size a multiple of BN), the
// k values of its load slots, so that a subgroup's loads at one k read neighbouring output
// positions, and the k table's entries (binding 4, conv.comp's: entry 2k holds
// x: c * S + the tap's flat spatial offset, y/z/w: the tap's offsets dz, dy, dx) are the same
// across the subgroup. Conv: input coordinate = o * stride - pad_begin + d, zero outside the
// input, as are rows m >= Mg, columns >= N * P and k past the split's range.
// Split K (S > 1): workgroup z covers (group, split); split s sums k in
// [s * KS, min(K, (s + 1) * KS)) and writes its partial sums, bias left out, to
// part[(s * Mtot + g * M + m) * NP + col]; splitk_reduce adds the S partials, the bias and the
// epilogue (as conv.comp's split K). Otherwise every result goes out through the staging
// tiles: bias, the epilogue (a fused residual Add and an activation), the rounding to
// float16 and the NCHW scatter in plain code.
//
// VEC (a define: 8) is the width of every shared access in halves (16-byte vectors).
#extension GL_GOOGLE_include_directive : require

layout(local_size_x = 128, local_size_x_id = 0) in;
const bool TRANS_A = false;  // weights: rows of K
const bool TRANS_B = true;   // input columns: BN stored rows of BK
layout(constant_id = 6) const bool A_VEC = false;     // weight rows read as vectors
layout(constant_id = 7) const bool HAS_BIAS = false;  // (id 8 is unused: matmul_coop's HAS_C)
// Load slot q of B: this invocation's column q % BN, the q / BN-th vector of k; chunk
// column * (BK / VEC) + vector in the stored layout (slots past the tile stay past it).
#define COOP_B_SLOT(q) ((q) < B_CHUNKS ? ((q) % BN) * (BK / VEC) + (q) / BN : (q))
#include "include/vkml_coop.glsl"

layout(std430, binding = 0) readonly buffer BX { float16_t x[]; };
layout(std430, binding = 1) readonly buffer BW { float16_t w[]; };
layout(std430, binding = 1) readonly buffer BWV { VT wv[]; };
layout(std430, binding = 2) readonly buffer BBias { float16_t bias[]; };
layout(std430, binding = 3) writeonly buffer BO { float16_t o[]; };
layout(std430, binding = 4) readonly buffer BT { ivec4 ktab[]; };
layout(std430, binding = 5) writeonly buffer BP { float part[]; };
layout(std430, binding = 6) readonly buffer BR { float16_t res[]; };

// conv.comp's block (one host-side mirror serves both).
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
    uint EPI;               // epilogue (vkml_epilogue.glsl): 1 adds res[] (same layout), 2 Relu, 4 Clip, 8 SiLU
    float ELO, EHI;         // Clip's bounds (EPI & 4), an activation's alpha, beta
} pc;

#define SO float16_t
#include "include/vkml_epilogue.glsl"

uint KEND;                  // the end of this split's k range

// This invocation's B column, fixed for the whole dispatch.
bool col_ok;                // inside N * P
int col_off;                // image base + the window corner's flat offset
ivec3 col_base;             // the window corner (o * stride - pad)

void setup_column(uint col) {
    col_ok = col < pc.NP;
    uint img = col / pc.P, p = col - img * pc.P;
    uint ox = p % pc.OW, t = p / pc.OW;
    uint oy = t % pc.OH, oz = t / pc.OH;
    ivec3 b = ivec3(int(oz), int(oy), int(ox)) * ivec3(pc.sz, pc.sy, pc.sx) - ivec3(pc.pz, pc.py, pc.px);
    col_base = b;
    col_off = int(img * pc.CS) + (b.x * pc.H + b.y) * pc.W + b.z;
}

float16_t weight(uint row, uint k) {
    if (k >= KEND) return float16_t(0.0);  // (a branch: no load past the weights)
    return w[row + k];
}

// Chunk q of the A tile at (m0, k0): VEC weights of one row.
VT fetch_a(uint base, uint m0, uint k0, uint q) {
    uint r = q / (BK / VEC), col = (q % (BK / VEC)) * VEC;
    uint gm = m0 + r, gk = k0 + col;
    if (q >= A_CHUNKS || gm >= pc.M || gk >= KEND) return VT(0u);
    uint row = base + gm * pc.wm;
    if (A_VEC) return wv[(row + gk) / VEC];
    VT v;
    [[unroll]] for (uint i = 0u; i < VEC / 2u; ++i)
        v[i] = packFloat2x16(f16vec2(weight(row, gk + 2u * i), weight(row, gk + 2u * i + 1u)));
    return v;
}

// Input value k of this invocation's column in group offset xg (zero in the padding).
float16_t gather(uint xg, uint k) {
    if (k >= KEND) return float16_t(0.0);
    ivec4 e = ktab[2u * k];
    uvec3 i3 = uvec3(col_base + e.yzw);  // (negative: huge)
    if (any(greaterThanEqual(i3, uvec3(pc.D, pc.H, pc.W)))) return float16_t(0.0);
    return x[uint(col_off + e.x) + xg];
}

// Load slot q of the B tile from k0: VEC values along k of this invocation's column.
VT fetch_b(uint xg, uint n0, uint k0, uint q) {
    if (q >= B_CHUNKS || !col_ok) return VT(0u);
    uint gk = k0 + (q / BN) * VEC;
    VT v;
    [[unroll]] for (uint i = 0u; i < VEC / 2u; ++i)
        v[i] = packFloat2x16(f16vec2(gather(xg, gk + 2u * i), gather(xg, gk + 2u * i + 1u)));
    return v;
}

// The staged stores (COOP_STORE_STAGED): m within the group, col = image * P + position.
uint GROW;                  // the group's first output channel
uint SPLIT;                 // this pass's split

void coop_store(uint m, uint col, float v) {
    if (m >= pc.M || col >= pc.NP) return;
    uint row = GROW + m;
    if (pc.S > 1u) {
        part[(SPLIT * pc.Mtot + row) * pc.NP + col] = v;
        return;
    }
    if (HAS_BIAS) v += float(bias[row]);
    uint img = col / pc.P, p = col - img * pc.P;
    uint oi = (img * pc.Mtot + row) * pc.P + p;
    o[oi] = float16_t(epilogue(v, oi, pc.EPI));
}

void main() {
    uint tid = gl_LocalInvocationID.x;
    uint warp = gl_SubgroupID;
    uint wm0 = (warp / WARPS_N) * WM, wn0 = (warp % WARPS_N) * WN;
    uint n0 = gl_WorkGroupID.x * BN, m0 = gl_WorkGroupID.y * BM;
    setup_column(n0 + tid % BN);
    for (uint gs = gl_WorkGroupID.z; gs < pc.G * pc.S; gs += gl_NumWorkGroups.z) {
        uint g = gs / pc.S;
        SPLIT = gs - g * pc.S;
        GROW = g * pc.M;
        uint kbeg = SPLIT * pc.KS;
        KEND = min(pc.K, kbeg + pc.KS);
        uint ntiles = KEND > kbeg ? (KEND - kbeg + BK - 1u) / BK : 0u;

        COOP_ACC_DECL;
        COOP_K_LOOP(g * pc.wg, g * pc.CgS, m0, n0, kbeg, ntiles, tid, wm0, wn0);
        COOP_STORE_STAGED(m0 + wm0, n0 + wn0);
        barrier();  // the next pass's first tile overwrites As
    }
}
