// Workgroup-wide reductions and order-preserving float keys, shared by the reduce, softmax,
// pooling and normalization shaders.
//
// VKML_SUBGROUP=1 (a define) reduces within each subgroup with GL_KHR_shader_subgroup_arithmetic
// and then across the workgroup's subgroups through shared memory; VKML_SUBGROUP=0 is a
// shared-memory tree for devices without subgroup arithmetic in compute shaders (it needs a
// power-of-two workgroup size). Neither assumes a subgroup size: gl_NumSubgroups and
// gl_SubgroupID come from the device.
#ifndef VKML_REDUCE_GLSL
#define VKML_REDUCE_GLSL

#ifndef VKML_SUBGROUP
#define VKML_SUBGROUP 0
#endif
#if VKML_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif

#define VKML_OP_ADD(a, b) ((a) + (b))
#define VKML_OP_MUL(a, b) ((a) * (b))
#define VKML_OP_MAX(a, b) max((a), (b))
#define VKML_OP_MIN(a, b) min((a), (b))

// VKML_WG_REDUCE(NAME, T, OP, SGOP) defines `T NAME(T v)`: OP folded over every invocation's v,
// returned to all of them. Call it in uniform control flow (it has barriers). OP must be
// associative and commutative on T (integers, uint keys, or float sums where the order of
// additions is free); SGOP is the matching subgroup operation (subgroupAdd...).
#if VKML_SUBGROUP
#define VKML_WG_REDUCE(NAME, T, OP, SGOP) \
shared T NAME##_buf[gl_WorkGroupSize.x]; \
T NAME(T v) { \
    v = SGOP(v); \
    if (subgroupElect()) NAME##_buf[gl_SubgroupID] = v; \
    barrier(); \
    T r_ = NAME##_buf[0]; \
    for (uint i_ = 1u; i_ < gl_NumSubgroups; ++i_) r_ = OP(r_, NAME##_buf[i_]); \
    barrier(); \
    return r_; \
}
#else
#define VKML_WG_REDUCE(NAME, T, OP, SGOP) \
shared T NAME##_buf[gl_WorkGroupSize.x]; \
T NAME(T v) { \
    uint l_ = gl_LocalInvocationID.x; \
    NAME##_buf[l_] = v; \
    barrier(); \
    for (uint s_ = gl_WorkGroupSize.x >> 1; s_ > 0u; s_ >>= 1) { \
        if (l_ < s_) NAME##_buf[l_] = OP(NAME##_buf[l_], NAME##_buf[l_ + s_]); \
        barrier(); \
    } \
    T r_ = NAME##_buf[0]; \
    barrier(); \
    return r_; \
}
#endif

// VKML_WG_REDUCE_FIRST(NAME, T, OP, SGOP, W) defines `T NAME(T v)`: the same fold over the first
// W invocations only, as VKML_WG_REDUCE computes it in a workgroup of W (the same subgroups, or
// the same tree), so a wider workgroup can repeat a W-wide reduction bit for bit
// (shaders/conv_dw.comp PLANE_MEAN repeats reduce.comp's). Every invocation calls it (barriers);
// W is a power of two, a multiple of the subgroup size, at most the workgroup size.
#if VKML_SUBGROUP
#define VKML_WG_REDUCE_FIRST(NAME, T, OP, SGOP, W) \
shared T NAME##_buf[gl_WorkGroupSize.x]; \
T NAME(T v) { \
    if (gl_LocalInvocationID.x < (W)) { /* whole subgroups */ \
        v = SGOP(v); \
        if (subgroupElect()) NAME##_buf[gl_SubgroupID] = v; \
    } \
    barrier(); \
    T r_ = NAME##_buf[0]; \
    for (uint i_ = 1u; i_ < (W) / gl_SubgroupSize; ++i_) r_ = OP(r_, NAME##_buf[i_]); \
    barrier(); \
    return r_; \
}
#else
#define VKML_WG_REDUCE_FIRST(NAME, T, OP, SGOP, W) \
shared T NAME##_buf[gl_WorkGroupSize.x]; \
T NAME(T v) { \
    uint l_ = gl_LocalInvocationID.x; \
    if (l_ < (W)) NAME##_buf[l_] = v; \
    barrier(); \
    for (uint s_ = (W) >> 1; s_ > 0u; s_ >>= 1) { \
        if (l_ < s_) NAME##_buf[l_] = OP(NAME##_buf[l_], NAME##_buf[l_ + s_]); \
        barrier(); \
    } \
    T r_ = NAME##_buf[0]; \
    barrier(); \
    return r_; \
}
#endif

// ---- order-preserving keys: a < b (as floats) <=> key(a) < key(b) (as uints), so max/min
// reduce exactly with integer subgroup operations, and NaN can be put where NumPy puts it.
// -0.0 and +0.0 get one key (they compare equal).
bool vkml_bits_nan(uint b) { return (b & 0x7FFFFFFFu) > 0x7F800000u; }

uint vkml_key_order(uint b) {
    if ((b & 0x7FFFFFFFu) == 0u) b = 0u;
    return (b & 0x80000000u) != 0u ? ~b : (b | 0x80000000u);
}

// For maxima: NaN above everything (np.max and np.argmax pick NaN).
uint vkml_key_max(float v) {
    uint b = floatBitsToUint(v);
    return vkml_bits_nan(b) ? 0xFFFFFFFFu : vkml_key_order(b);
}

// For minima: NaN below everything.
uint vkml_key_min(float v) {
    uint b = floatBitsToUint(v);
    return vkml_bits_nan(b) ? 0u : vkml_key_order(b);
}

// The float of a key (NaN keys give NaN).
float vkml_unkey(uint k) {
    if (k == 0xFFFFFFFFu || k == 0u) return uintBitsToFloat(0x7FC00000u);
    return uintBitsToFloat((k & 0x80000000u) != 0u ? (k & 0x7FFFFFFFu) : ~k);
}

// int32 keys (for integer max/min/argmax).
uint vkml_key_int(int v) { return uint(v) ^ 0x80000000u; }
int vkml_unkey_int(uint k) { return int(k ^ 0x80000000u); }

bool vkml_isfinite(float v) { return (floatBitsToUint(v) & 0x7F800000u) != 0x7F800000u; }

#endif
