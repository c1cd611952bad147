#version 450
// TensorScatter (ONNX opset 24; vkml/kernels/tensor_scatter.py): the KV-cache write. The
// cache (B, P..., L, I...) seen as (B, P, L, I) around the sequence axis, the update as
// (B, P, seq, I); batch b writes its seq positions from write_indices[b] (0 when absent):
// linear mode at start + s, circular mode at (start + s) mod L.
//
// A gather, one invocation per output element: position l of batch b takes update element s
// where start + s lands on l (circular: of those s, the last, as NumPy's assignment with
// repeated indices ends), else the cache's element. Bits move by element size (ESIZE), so
// every dtype runs; results equal the CPU operator's (vkml/ops/gather.py) exactly.
// Linear mode: a batch whose writes leave [0, L) sets the fault word (invocation b < B checks
// batch b) and the run raises the CPU operator's error. IDX: 32 or 64-bit indices; the
// arithmetic is int64 (shaderInt64).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#include "include/vkml_elem.glsl"
#define FAULT_BINDING 4
#include "include/vkml_fault.glsl"

layout(local_size_x = 256, local_size_x_id = 0) in;

layout(push_constant) uniform Push {
    uint n;      // output elements
    uint inner;  // I: elements after the sequence axis
    uint len;    // L: the cache's sequence length (max_sequence_length)
    uint seq;    // the update's sequence length
    uint rows;   // P: elements between the batch and sequence axes, per batch
    uint batch;  // B
    uint flags;  // bit 0: circular; bit 1: write_indices given
    uint site;   // this node's site in the fault buffer
} pc;

layout(std430, binding = 0) readonly buffer BC { ELEM cache[]; };
layout(std430, binding = 1) readonly buffer BU { ELEM upd[]; };
#if IDX == 32
layout(std430, binding = 2) readonly buffer BI { int idx[]; };
#else
layout(std430, binding = 2) readonly buffer BI { int64_t idx[]; };
#endif
layout(std430, binding = 3) writeonly buffer BO { ELEM o[]; };

int64_t start_of(uint b) {
    return (pc.flags & 2u) != 0u ? int64_t(idx[b]) : int64_t(0);
}

void main() {
    bool circular = (pc.flags & 1u) != 0u;
    uint g = gl_GlobalInvocationID.x;
    if (!circular && g < pc.batch && pc.seq > 0u) {
        int64_t st = start_of(g);
        if (st < 0 || st > int64_t(pc.len) - int64_t(pc.seq)) {
            vkml_fault(pc.site, int(uint(uint64_t(st) & 0xFFFFFFFFul)), int(uint(uint64_t(st) >> 32)));
        }
    }
    int64_t L = int64_t(pc.len);
    for (uint e = g; e < pc.n; e += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
        uint i = e % pc.inner;
        uint q = e / pc.inner;
        uint l = q % pc.len;
        uint pb = q / pc.len;
        uint b = pb / pc.rows;
        int64_t st = start_of(b);
        bool hit = false;
        uint s = 0u;
        if (circular) {
            int64_t sm = st >= 0 ? st % L : L - 1 - ((-(st + 1)) % L);  // st mod L, in [0, L)
            int64_t d = int64_t(l) - sm;
            if (d < 0) d += L;
            uint s0 = uint(d);
            if (s0 < pc.seq) {
                hit = true;
                s = s0 + ((pc.seq - 1u - s0) / pc.len) * pc.len;  // the last s landing on l
            }
        } else {
            int64_t d = int64_t(l) - st;
            if (d >= 0 && d < int64_t(pc.seq)) {
                hit = true;
                s = uint(d);
            }
        }
        o[e] = hit ? upd[(pb * pc.seq + s) * pc.inner + i] : cache[e];
    }
}
