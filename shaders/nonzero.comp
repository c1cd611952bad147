#version 450
// NonZero with its columns padded to their bound (vkml/kernels/nonzero.py, the NonZeroPadded
// node of vkml/compile/ragged.py): for x of rank r and n elements, out (int64 [r, n]) holds the
// coordinates of the nonzero elements in row-major order, zero columns after them, and total
// (int64 [1]) their number. An element is nonzero when its bits, masked by pc.mask (the sign bit
// left out for floats: -0.0 is zero, NaN is not), are not all zero; elements move as ESIZE-byte
// words (include/vkml_elem.glsl), so every dtype works. A workgroup takes a chunk of CHUNK
// consecutive elements (4 per invocation):
//   PASS 1: counts its chunk's nonzero elements into cnt[chunk];
//   PASS 2: one workgroup turns the counts into chunk offsets (off[]) and writes total;
//   PASS 3: each chunk writes its elements' coordinates at off[chunk] + their rank in the chunk
//           (a scan over the invocations in shared memory), and zero columns where its part of
//           [total, n) lies.
// int64 values are (low, high) 32-bit halves: no shaderInt64 needed.
#extension GL_GOOGLE_include_directive : require
#include "include/vkml_elem.glsl"

layout(local_size_x = 256) in;
#define WG 256u
#define PER 4u
#define CHUNK (WG * PER)
#define MAX_RANK 8

layout(push_constant) uniform Push {
    uint n;              // elements
    uint rank;
    uint chunks;
    uint mask;           // bits that count (of the high word for 8-byte elements)
    uint shape[MAX_RANK];
} pc;

layout(std430, binding = 0) readonly buffer BX { ELEM x[]; };
layout(std430, binding = 1) buffer BC { uint cnt[]; };   // per chunk: PASS 1 counts, PASS 2 offsets
layout(std430, binding = 2) writeonly buffer BO { uint o[]; };      // int64 [rank, n]
layout(std430, binding = 3) buffer BT { uint total[]; };  // int64 [1] (PASS 2 writes, PASS 3 reads)

bool nonzero(uint i) {
    ELEM32 v = ELEM32(x[i]);
#if ESIZE == 8
    return (v.x | (v.y & pc.mask)) != 0u;
#else
    return (v & pc.mask) != 0u;
#endif
}

shared uint part[WG];

// Flags of this invocation's PER elements (bit j: element chunk * CHUNK + tid * PER + j).
uint flags(uint chunk, uint tid) {
    uint f = 0u;
    for (uint j = 0u; j < PER; ++j) {
        uint i = chunk * CHUNK + tid * PER + j;
        if (i < pc.n && nonzero(i)) f |= 1u << j;
    }
    return f;
}

void main() {
    uint tid = gl_LocalInvocationID.x;
#if PASS == 1
    uint chunk = gl_WorkGroupID.x;
    part[tid] = bitCount(flags(chunk, tid));
    barrier();
    for (uint h = WG / 2u; h > 0u; h >>= 1u) {
        if (tid < h) part[tid] += part[tid + h];
        barrier();
    }
    if (tid == 0u) cnt[chunk] = part[0];
#elif PASS == 2
    // offsets of the chunks: WG partial sums of runs of chunks, then a scan over those
    uint per = (pc.chunks + WG - 1u) / WG;
    uint lo = tid * per, hi = min(lo + per, pc.chunks);
    uint s = 0u;
    for (uint c = lo; c < hi; ++c) s += cnt[c];
    part[tid] = s;
    barrier();
    if (tid == 0u) {
        uint run = 0u;
        for (uint t = 0u; t < WG; ++t) {
            uint v = part[t];
            part[t] = run;
            run += v;
        }
        total[0] = run;
        total[1] = 0u;
    }
    barrier();
    uint run = part[tid];
    for (uint c = lo; c < hi; ++c) {
        uint v = cnt[c];
        cnt[c] = run;
        run += v;
    }
#else  // PASS 3
    uint chunk = gl_WorkGroupID.x;
    uint f = flags(chunk, tid);
    part[tid] = bitCount(f);
    barrier();
    // inclusive scan over the invocations (Hillis-Steele), then exclusive by subtraction
    for (uint d = 1u; d < WG; d <<= 1u) {
        uint add = tid >= d ? part[tid - d] : 0u;
        barrier();
        part[tid] += add;
        barrier();
    }
    uint pos = cnt[chunk] + part[tid] - bitCount(f);
    for (uint j = 0u; j < PER; ++j) {
        if ((f & (1u << j)) == 0u) continue;
        uint rest = chunk * CHUNK + tid * PER + j;
        for (int d = int(pc.rank) - 1; d >= 0; --d) {
            uint c = rest % pc.shape[d];
            rest /= pc.shape[d];
            uint k = (uint(d) * pc.n + pos) * 2u;
            o[k] = c;
            o[k + 1u] = 0u;
        }
        pos += 1u;
    }
    // zero columns: the part of [total, n) in this chunk's index range
    uint begin = max(total[0], chunk * CHUNK), end = min(pc.n, (chunk + 1u) * CHUNK);
    for (uint col = begin + tid; col < end; col += WG) {
        for (uint d = 0u; d < pc.rank; ++d) {
            uint k = (d * pc.n + col) * 2u;
            o[k] = 0u;
            o[k + 1u] = 0u;
        }
    }
#endif
}
