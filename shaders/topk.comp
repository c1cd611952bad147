#version 450
// TopK (vkml/kernels/topk.py): the k smallest or largest elements of each row (the slice of X
// along the axis), sorted, with their int64 indices; ties keep the lower index first, NaN counts
// above +inf (as the CPU operator's stable argsort): first for largest, last for smallest.
//
// Every element becomes an entry (key, index): the key is an order-preserving uint (two words
// for 64-bit integers), complemented for largest, so every order here is ascending by (key,
// index); a missing entry (past the row's end) is (~0, ~0), after every real one.
// A workgroup takes a chunk of M entries (M a power of two, specialization constant 1) into
// shared memory and keeps its P smallest (P = 2^p_log >= k):
//   1. (first pass) bitonic sort of every run of P entries;
//   2. halving merges: runs A, B (sorted) at distance `span` become min(A[j], B[P-1-j]), a
//      bitonic sequence holding the P smallest of both, then sorted by log2(P) half-cleaner
//      steps; span doubles until one run remains at 0.
// Rows longer than M take several passes (the host loops): a pass writes each chunk's P indices
// to `dst`, the next pass reads them from `src` as sorted runs of P (keys looked up in X again)
// and skips step 1; the last pass (one chunk per row) writes the first k values and indices.
// Defines: TX (X and values: f32, f16 or any integer type).
#extension GL_GOOGLE_include_directive : require
#include "include/vkml_types.glsl"
#include "include/vkml_reduce.glsl"

layout(local_size_x = 256, local_size_x_id = 0) in;
layout(constant_id = 1) const uint M = 1024u;  // entries per workgroup, a power of two >= 2 P

#if VKML_IS64_(TX)
#define KEY64 1
#endif

#define FIRST 1u    // this pass reads X (entry g of a row is index g); else `src`
#define LARGEST 2u
#define NONE 0xFFFFFFFFu

layout(push_constant) uniform Push {
    uint rows;    // X's elements / n: outer * inner
    uint n;       // the row length (X's dimension `axis`)
    uint inner;   // X's elements after the axis (a row's stride)
    uint k;
    uint p_log;   // log2 P
    uint count;   // entries per row this pass reads
    uint chunks;  // chunks of M per row this pass: ceil(count / M); 1 in the last pass
    uint flags;
} pc;

layout(std430, binding = 0) readonly buffer BX { SX x[]; };
layout(std430, binding = 1) readonly buffer BS { uint src[]; };   // [rows][count] indices
layout(std430, binding = 2) writeonly buffer BD { uint dst[]; };  // [rows][chunks][P] indices
layout(std430, binding = 3) writeonly buffer BY { SX y[]; };
layout(std430, binding = 4) writeonly buffer BI { uint yi[]; };   // int64 indices, two words each

shared uint s_key[M];
#ifdef KEY64
shared uint s_lo[M];
#endif
shared uint s_idx[M];

// Entry e of shared memory from element `idx` of the row at `base`.
void put(uint e, uint base, uint idx, bool largest) {
    uint hi = NONE, lo = NONE;
    if (idx != NONE) {
        CX v = CX(x[base + idx * pc.inner]);
#if IS_FLOAT(TX)
        hi = vkml_key_max(float(v));  // NaN above everything; -0 and +0 tie
#elif defined(KEY64)
        uint64_t u = uint64_t(v);
#if IS_SINT(TX)
        u ^= 0x8000000000000000ul;
#endif
        hi = uint(u >> 32);
        lo = uint(u);
#elif IS_SINT(TX)
        hi = uint(int(v)) ^ 0x80000000u;
#else
        hi = uint(v);
#endif
        if (largest) {
            hi = ~hi;
            lo = ~lo;
        }
    }
    s_key[e] = hi;
#ifdef KEY64
    s_lo[e] = lo;
#endif
    s_idx[e] = idx;
}

// Whether entry a sorts after entry b.
bool after(uint a, uint b) {
    if (s_key[a] != s_key[b]) return s_key[a] > s_key[b];
#ifdef KEY64
    if (s_lo[a] != s_lo[b]) return s_lo[a] > s_lo[b];
#endif
    return s_idx[a] > s_idx[b];
}

// Entries a < b in ascending order.
void order(uint a, uint b) {
    if (after(a, b)) {
        uint t = s_key[a]; s_key[a] = s_key[b]; s_key[b] = t;
#ifdef KEY64
        t = s_lo[a]; s_lo[a] = s_lo[b]; s_lo[b] = t;
#endif
        t = s_idx[a]; s_idx[a] = s_idx[b]; s_idx[b] = t;
    }
}

// Entry a takes entry b's place if b sorts first.
void keep_min(uint a, uint b) {
    if (after(a, b)) {
        s_key[a] = s_key[b];
#ifdef KEY64
        s_lo[a] = s_lo[b];
#endif
        s_idx[a] = s_idx[b];
    }
}

void main() {
    uint lid = gl_LocalInvocationID.x;
    uint wg = gl_WorkGroupSize.x;
    bool first = (pc.flags & FIRST) != 0u;
    bool largest = (pc.flags & LARGEST) != 0u;
    uint plog = pc.p_log;
    uint P = 1u << plog;
    uint total = pc.rows * pc.chunks;
    for (uint t = gl_WorkGroupID.x; t < total; t += gl_NumWorkGroups.x) {
        uint row = t / pc.chunks;
        uint c = t - row * pc.chunks;
        uint o = row / pc.inner;
        uint i = row - o * pc.inner;
        uint base = o * pc.n * pc.inner + i;
        uint e0 = c * M;
        for (uint e = lid; e < M; e += wg) {
            uint g = e0 + e;
            uint idx = g < pc.count ? (first ? g : src[row * pc.count + g]) : NONE;
            put(e, base, idx, largest);
        }
        barrier();

        if (first) {  // 1. sort each run of P (bitonic: a flip, then half-cleaners, per size)
            for (uint size = 2u; size <= P; size <<= 1) {
                uint h = size >> 1;
                for (uint p = lid; p < M / 2u; p += wg) {
                    uint a = ((p & ~(h - 1u)) << 1) | (p & (h - 1u));
                    order(a, a ^ (size - 1u));
                }
                barrier();
                for (uint s = size >> 2; s > 0u; s >>= 1) {
                    for (uint p = lid; p < M / 2u; p += wg) {
                        uint a = ((p & ~(s - 1u)) << 1) | (p & (s - 1u));
                        order(a, a + s);
                    }
                    barrier();
                }
            }
        }

        // 2. halving merges: the runs at multiples of 2 span keep the P smallest of themselves
        // and the run `span` after them
        for (uint span = P; span < M; span <<= 1) {
            uint runs = M / (2u * span);
            for (uint p = lid; p < runs * P; p += wg) {
                uint q = p >> plog;
                uint j = p & (P - 1u);
                uint a = q * 2u * span + j;
                keep_min(a, a + span + P - 1u - 2u * j);
            }
            barrier();
            for (uint s = P >> 1; s > 0u; s >>= 1) {
                for (uint p = lid; p < runs * (P >> 1); p += wg) {
                    uint q = p >> (plog - 1u);
                    uint r = p & ((P >> 1) - 1u);
                    uint a = q * 2u * span + (((r & ~(s - 1u)) << 1) | (r & (s - 1u)));
                    order(a, a + s);
                }
                barrier();
            }
        }

        if (pc.chunks == 1u) {
            uint ob = o * pc.k * pc.inner + i;
            for (uint j = lid; j < pc.k; j += wg) {
                uint idx = s_idx[j];
                uint at = ob + j * pc.inner;
                y[at] = x[base + idx * pc.inner];
                yi[2u * at] = idx;
                yi[2u * at + 1u] = 0u;
            }
        } else {
            uint db = (row * pc.chunks + c) * P;
            for (uint j = lid; j < P; j += wg) dst[db + j] = s_idx[j];
        }
        barrier();  // the next chunk reuses shared memory
    }
}
