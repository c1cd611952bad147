// Index math shared by the elementwise shaders.
//
// Tensors are row-major. A broadcast operand is described by a stride per output dimension
// (0 where it is broadcast). The host collapses adjacent dimensions that broadcast alike,
// so `rank` is usually 1-3 even for rank-8 inputs; shape and strides come from push
// constants or a small storage buffer.
#ifndef VKML_INDEX_GLSL
#define VKML_INDEX_GLSL

#define VKML_MAX_RANK 8

// Grid-stride loop over [0, N): any element count works with any dispatch size.
// The host keeps N below 2^31 so that I + stride cannot wrap.
#define VKML_FOR_EACH(I, N) \
    for (uint I = gl_GlobalInvocationID.x; I < (N); I += gl_NumWorkGroups.x * gl_WorkGroupSize.x)

// Offsets of output element I in two operands. SHAPE, SA, SB are arrays indexable by dim.
// The outermost dimension needs no division: what is left of the index is its coordinate.
#define VKML_BCAST2(I, RANK, SHAPE, SA, SB, IA, IB) { \
    uint r_ = (I); IA = 0u; IB = 0u; \
    for (int d_ = int(RANK) - 1; d_ > 0; --d_) { \
        uint s_ = SHAPE[d_]; uint q_ = r_ / s_; uint c_ = r_ - q_ * s_; r_ = q_; \
        IA += c_ * SA[d_]; IB += c_ * SB[d_]; \
    } \
    IA += r_ * SA[0]; IB += r_ * SB[0]; \
}

// The same for three operands.
#define VKML_BCAST3(I, RANK, SHAPE, SA, SB, SC, IA, IB, IC) { \
    uint r_ = (I); IA = 0u; IB = 0u; IC = 0u; \
    for (int d_ = int(RANK) - 1; d_ > 0; --d_) { \
        uint s_ = SHAPE[d_]; uint q_ = r_ / s_; uint c_ = r_ - q_ * s_; r_ = q_; \
        IA += c_ * SA[d_]; IB += c_ * SB[d_]; IC += c_ * SC[d_]; \
    } \
    IA += r_ * SA[0]; IB += r_ * SB[0]; IC += r_ * SC[0]; \
}

#endif
