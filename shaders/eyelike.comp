#version 450
// EyeLike: o[i, j] = one where j - i == k, else zero (all-zero bits in every dtype), o of shape
// (rows, cols), as np.eye(rows, cols, k, float32).astype(dtype): the host passes the bits of
// that one in the output dtype. One invocation per element, ESIZE-byte words (every dtype).
#extension GL_GOOGLE_include_directive : require
#include "include/vkml_elem.glsl"
#include "include/vkml_index.glsl"

layout(local_size_x = 256, local_size_x_id = 0) in;

layout(push_constant) uniform Push {
    uint n;      // rows * cols
    uint cols;
    int k;
    uint one_lo; // the bits of one (ESIZE 8: with one_hi)
    uint one_hi;
} pc;

layout(std430, binding = 0) writeonly buffer BO { ELEM o[]; };

void main() {
#if ESIZE == 8
    ELEM32 one = uvec2(pc.one_lo, pc.one_hi);
    ELEM32 zero = uvec2(0u);
#else
    ELEM32 one = pc.one_lo;  // (8/16-bit words are stored from 32-bit values: no narrow locals)
    ELEM32 zero = 0u;
#endif
    VKML_FOR_EACH(e, pc.n) {
        uint r = e / pc.cols;
        uint c = e - r * pc.cols;
        o[e] = ELEM(int(c) - int(r) == pc.k ? one : zero);
    }
}
