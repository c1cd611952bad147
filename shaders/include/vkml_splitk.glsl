// Split K: the sum of an output's partial products, and the fix-up with which the SIMT GEMM
// kernels (matmul.comp, conv.comp) finish a split tile themselves instead of a second pass.
//
// The including shader declares `float part[]` (S partial sums per output element, split s at
// s * total + e), `pc.S` (the splits), and, when it defines VKML_SPLITK_FIXUP first, `uint
// cnt[]`: one arrival counter per output tile, zero before the dispatch (the host zeroes them
// once; the last arrival zeroes its counter again for the next run of the command buffer).
// Both buffers are then `coherent`: a workgroup reads partials that others wrote.
//
// The fix-up (as CUDA's threadfence reduction and stream-K's): each workgroup stores its
// split's partials, makes them visible on the device, and counts itself in; the workgroup that
// arrives last adds the S partials of its tile in split order, exactly as splitk_reduce.comp
// does, and stores the result. No workgroup waits for another, so there is no deadlock however
// the GPU schedules them.
#ifndef VKML_SPLITK_GLSL
#define VKML_SPLITK_GLSL

float splitk_sum(uint e, uint total) {
    float v = 0.0;
    for (uint s = 0u; s < pc.S; ++s) v += part[s * total + e];
    return v;
}

#ifdef VKML_SPLITK_FIXUP
shared uint vkml_splitk_last;

// Called by every invocation of the workgroup (uniform control flow) once its partials of
// `tile` are stored; true in the workgroup that completed the tile's S splits.
bool splitk_last(uint tile) {
    memoryBarrierBuffer();  // this invocation's partials, visible on the device before ...
    barrier();              // ... any invocation of the workgroup counts the split in
    if (gl_LocalInvocationIndex == 0u) {
        uint before = atomicAdd(cnt[tile], 1u);
        bool last = before == pc.S - 1u;
        if (last) cnt[tile] = 0u;  // (every split has arrived: nothing counts here again this run)
        vkml_splitk_last = last ? 1u : 0u;
    }
    barrier();
    bool last = vkml_splitk_last != 0u;
    memoryBarrierBuffer();  // (acquire: the other splits' partials, before they are read)
    barrier();              // (vkml_splitk_last read by all before a later call writes it)
    return last;
}
#endif

#endif
