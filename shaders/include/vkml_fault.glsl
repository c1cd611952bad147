// The fault word: how a shader reports what its CPU operator would raise (vkml/runtime/faults.py).
//
// A shader cannot raise. A kernel that validates data (Gather's indices) binds the run slot's
// fault buffer at FAULT_BINDING and gets its node's site number in push constants; a bad value
// calls vkml_fault(site, lo, hi), which keeps the first one per site (its 64-bit value as
// two 32-bit halves) and sets word 0, the one word the host reads after every run.
// Layout, in uints: [0] any fault, [1..3] unused, then 4 words per site: flag, lo, hi, unused.
#ifndef VKML_FAULT_GLSL
#define VKML_FAULT_GLSL

#ifndef FAULT_BINDING
#error "define FAULT_BINDING (the binding of the fault buffer) before including vkml_fault.glsl"
#endif

layout(std430, binding = FAULT_BINDING) buffer BFault { uint fault[]; };

void vkml_fault(uint site, int lo, int hi) {
    uint w = 4u + 4u * site;
    if (fault[w] == 0u && atomicCompSwap(fault[w], 0u, 1u) == 0u) {
        fault[w + 1u] = uint(lo);
        fault[w + 2u] = uint(hi);
    }
    fault[0] = 1u;
}

#endif
