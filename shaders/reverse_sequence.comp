#version 450
// ReverseSequence (opset 10), as vkml/ops/gather.py's: x viewed as (d0, d1, inner), the time
// axis and the batch axis being dims 0 and 1 in some order (TIME1: time is dim 1). For batch b
// of length L = sequence_lens[b], output step t < L reads input step L - 1 - t; the others are
// copied. Elements move as ESIZE-byte words (every dtype, bit for bit). sequence_lens is int64,
// read as two 32-bit halves (no shaderInt64). A length outside [0, time_len] is reported
// through the fault word (include/vkml_fault.glsl; the run raises the CPU operator's error):
// invocations e < batch check lens[e], so every length is checked, even with no elements to
// move; a batch with a bad length is copied as it is (nothing is read out of bounds).
#extension GL_GOOGLE_include_directive : require
#include "include/vkml_elem.glsl"
#include "include/vkml_index.glsl"
#define FAULT_BINDING 3
#include "include/vkml_fault.glsl"

layout(local_size_x = 256, local_size_x_id = 0) in;

layout(push_constant) uniform Push {
    uint n;         // elements
    uint count;     // max(n, batch): invocations' range
    uint d1;        // size of dim 1
    uint inner;     // prod(shape[2:])
    uint time_len;  // size of the time axis
    uint batch;     // size of the batch axis
    uint time1;     // 1: the time axis is dim 1 (batch_axis 0), 0: it is dim 0
    uint site;      // this node's site in the fault buffer
} pc;

layout(std430, binding = 0) readonly buffer BX { ELEM x[]; };
layout(std430, binding = 1) readonly buffer BL { ivec2 lens[]; };  // (low, high) halves
layout(std430, binding = 2) writeonly buffer BO { ELEM o[]; };

// Whether lens[b] lies in [0, time_len]; its value in `len`.
bool length_of(uint b, out uint len) {
    ivec2 w = lens[b];
    len = uint(w.x);
    return w.y == 0 && w.x >= 0 && uint(w.x) <= pc.time_len;
}

void main() {
    VKML_FOR_EACH(e, pc.count) {
        uint len;
        if (e < pc.batch && !length_of(e, len)) {
            ivec2 w = lens[e];
            vkml_fault(pc.site, w.x, w.y);
        }
        if (e < pc.n) {
            uint in_ = e % pc.inner;
            uint q = e / pc.inner;
            uint c1 = q % pc.d1;
            uint c0 = q / pc.d1;
            uint t = pc.time1 != 0u ? c1 : c0;
            uint b = pc.time1 != 0u ? c0 : c1;
            uint src = e;
            if (length_of(b, len) && t < len) {
                uint s = len - 1u - t;
                src = (pc.time1 != 0u ? c0 * pc.d1 + s : s * pc.d1 + c1) * pc.inner + in_;
            }
            o[e] = x[src];
        }
    }
}
