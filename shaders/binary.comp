#version 450
// Elementwise binary ops with NumPy broadcasting up to rank 8: o[i] = f(a[ia], b[ib]).
// Types: TX (a), TY (b), TO (output). Shape and strides (in elements, 0 = broadcast) are
// push constants: 4 + 4 + 3 * 32 = 104 bytes.
#extension GL_GOOGLE_include_directive : require
#include "include/vkml_types.glsl"
#include "include/vkml_index.glsl"
#include "include/vkml_math.glsl"

layout(local_size_x = 256, local_size_x_id = 0) in;

layout(push_constant) uniform Push {
    uint n;
    uint rank;
    uint shape[VKML_MAX_RANK];
    uint sa[VKML_MAX_RANK];
    uint sb[VKML_MAX_RANK];
} pc;

layout(std430, binding = 0) readonly buffer BA { SX a[]; };
layout(std430, binding = 1) readonly buffer BB { SY b[]; };
layout(std430, binding = 2) writeonly buffer BO { SO o[]; };

#if IS_INT(TX) && IS_INT(TY)
// Integer power by squaring (wraps like NumPy); negative exponents truncate toward zero.
CX ipow(CX base, CY e) {
    if (e < CY(0)) {
        if (base == CX(1)) return CX(1);
        if (base == CX(-1)) return (e % CY(2)) == CY(0) ? CX(1) : CX(-1);
        return CX(0);
    }
    CX r = CX(1);
    while (e > CY(0)) {
        if ((e & CY(1)) != CY(0)) r *= base;
        base *= base;
        e >>= 1;
    }
    return r;
}
#endif

CO apply(CX u, CY v) {
#if defined(OP_ADD)
    return u + v;
#elif defined(OP_SUB)
    return u - v;
#elif defined(OP_MUL)
    return u * v;
#elif defined(OP_DIV)
#if IS_SINT(TX)
    // C semantics (truncation); x/0 gives 0 and MIN/-1 wraps, instead of undefined behaviour.
    if (v == CY(0)) return CX(0);
    if (v == CY(-1)) return -u;
    return u / v;
#elif IS_UINT(TX)
    return v == CY(0) ? CX(0) : u / v;
#else
    return CO(vkml_div(float(u), float(v)));
#endif
#elif defined(OP_FMOD) || defined(OP_MOD)
    // Integers (the host keeps float Mod on the CPU): C's remainder (sign of the dividend);
    // OP_MOD then moves it to the divisor's sign (floor division). x % 0 gives 0, as NumPy.
#if IS_UINT(TX)
    return v == CY(0) ? CX(0) : u % v;
#else
    if (v == CY(0) || v == CY(-1)) return CX(0);
    CX r = u - (u / v) * v;
#if defined(OP_MOD)
    if (r != CX(0) && ((r < CX(0)) != (v < CY(0)))) r += v;
#endif
    return r;
#endif
#elif defined(OP_POW)
#if IS_INT(TX)
    return ipow(u, v);
#else
    return vkml_pow(u, float(v));
#endif
#elif defined(OP_MAX)
#if IS_FLOAT(TX)
    return (vkml_isnan(u) || vkml_isnan(v)) ? u + v : max(u, v);
#else
    return max(u, v);
#endif
#elif defined(OP_MIN)
#if IS_FLOAT(TX)
    return (vkml_isnan(u) || vkml_isnan(v)) ? u + v : min(u, v);
#else
    return min(u, v);
#endif
#elif defined(OP_PRELU)
    return u < CX(0) ? u * v : u;
#elif defined(OP_EQUAL)
    return u == v ? 1u : 0u;
#elif defined(OP_LESS)
    return u < v ? 1u : 0u;
#elif defined(OP_LESS_OR_EQUAL)
    return u <= v ? 1u : 0u;
#elif defined(OP_GREATER)
    return u > v ? 1u : 0u;
#elif defined(OP_GREATER_OR_EQUAL)
    return u >= v ? 1u : 0u;
#elif defined(OP_BITAND)
    return u & v;
#elif defined(OP_BITOR)
    return u | v;
#elif defined(OP_BITXOR)
    return u ^ v;
#elif defined(OP_SHL) || defined(OP_SHR)
    // BitShift (TX = TY): a shift amount that is negative or at least the width gives what
    // the sign fill alone gives (0 to the left; 0 or -1 to the right, arithmetic if signed).
#if IS_SINT(TY)
    bool out_of_range = v < CY(0) || v >= CY(BITS_X);
#else
    bool out_of_range = v >= CY(BITS_X);
#endif
#if defined(OP_SHL)
    return out_of_range ? CX(0) : (u << v);
#elif IS_SINT(TX)
    return out_of_range ? (u < CX(0) ? CX(-1) : CX(0)) : (u >> v);
#else
    return out_of_range ? CX(0) : (u >> v);
#endif
#elif defined(OP_AND)
    return (u != 0u && v != 0u) ? 1u : 0u;
#elif defined(OP_OR)
    return (u != 0u || v != 0u) ? 1u : 0u;
#elif defined(OP_XOR)
    return ((u != 0u) != (v != 0u)) ? 1u : 0u;
#else
#error "binary.comp: no OP_<NAME> defined"
#endif
}

void main() {
    VKML_FOR_EACH(i, pc.n) {
        uint ia, ib;
        VKML_BCAST2(i, pc.rank, pc.shape, pc.sa, pc.sb, ia, ib);
        o[i] = SO(apply(CX(a[ia]), CY(b[ib])));
    }
}
