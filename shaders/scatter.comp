#version 450
// ScatterND and ScatterElements (vkml/kernels/scatter.py). The output already holds a copy of
// the data; the updates come in "units" m < units, each a run of `slice` elements (ScatterND:
// one index tuple and its slice; ScatterElements: one element, slice 1) written to one
// destination row r at element offset base.
//
//   PASS 0 (mark):  reduction none: per unit, check its indices (a bad one sets the fault word
//                   and the unit is skipped), then atomicMax(win[r], m + 1): each row's last
//                   unit, exact and order-free.
//   PASS 1 (none):  per update element, the row's last unit writes it (ESIZE-byte words):
//                   duplicates end with the last update, as NumPy's assignment.
//   PASS 4 (sort):  reductions: a workgroup per chunk of CHUNK units checks their indices (as
//                   mark) and sorts them by (row, unit) in shared memory (bitonic), writing
//                   rows to keys[0, total) and units to keys[total, 2 total).
//   PASS 2 (reduce): reductions, one dispatch per chunk, in order: per element of the first
//                   unit of each row in the chunk, one invocation folds the row's units in
//                   index order into the output, so float results are those of NumPy's
//                   ufunc.at, bit for bit (earlier chunks were folded by earlier dispatches).
//                   TX: the dtype.
//   PASS 3 (check): one workgroup; only when mark/sort faulted, rewrite the fault word with the
//                   value the CPU operator names (the first index column with a bad value: its
//                   minimum if below -dim, else its maximum) and the column (aux).
//
// Every loop of one invocation is bounded (CHUNK fold steps at most, whatever the duplicates):
// lavapipe ends any invocation's loops after 65535 iterations in all.
// Indices are int32 (IDX=32) or int64 (IDX=64, read as (low, high) halves: beyond int32 is out
// of range anyway); negative ones count from the end.
#extension GL_GOOGLE_include_directive : require
#include "include/vkml_index.glsl"
#if PASS == 1
#include "include/vkml_elem.glsl"
#elif PASS == 2
#include "include/vkml_types.glsl"
#include "include/vkml_math.glsl"
#endif
#if PASS == 0 || PASS == 4
#define FAULT_BINDING 2
#include "include/vkml_fault.glsl"
#elif PASS == 3
#define FAULT_BINDING 1
#include "include/vkml_fault.glsl"
#endif

#ifndef CHUNK
#define CHUNK 2048  // units sorted per workgroup: 16 KiB of shared memory, what every device has
#endif

layout(local_size_x = 256, local_size_x_id = 0) in;

layout(push_constant) uniform Push {
    uint n;          // work items of this pass (units, or units * slice)
    uint units;
    uint slice;
    uint total;      // reductions: chunks * CHUNK, the offset of the units in keys
    uint site;       // this node's site in the fault buffer
    uint mode;       // 0: ScatterND, 1: ScatterElements
    uint op;         // 0 none, 1 add, 2 mul, 3 max, 4 min
    uint rank;       // ScatterND: index depth k; ScatterElements: rank
    uint axis;       // ScatterElements
    uint ulen;       // ScatterElements: idx's length along the axis
    uint width;      // index values per unit (k, or 1)
    uint first;      // reduce: the chunk's first position in keys
    uint dims[8];    // ScatterND: data.shape[:k]; ScatterElements: idx's shape with data's axis length
    uint ostride[8]; // ScatterElements: data's element strides
} pc;

#if IDX == 32
layout(std430, binding = 0) readonly buffer BI { int idx[]; };
#else
layout(std430, binding = 0) readonly buffer BI { ivec2 idx[]; };  // (low, high) halves
#endif

// Index value at p as (low, high) halves.
ivec2 index_at(uint p) {
#if IDX == 32
    int j = idx[p];
    return ivec2(j, j >> 31);
#else
    return idx[p];
#endif
}

// The dimension index column j is checked against.
uint column_dim(uint j) { return pc.mode == 1u ? pc.dims[pc.axis] : pc.dims[j]; }

// Row and element offset of unit m; false (and the bad value) when an index is out of range.
bool dest(uint m, out uint r, out uint base, out ivec2 bad) {
    r = 0u;
    base = 0u;
    bad = ivec2(0);
    for (uint j = 0u; j < pc.width; ++j) {
        ivec2 w = index_at(m * pc.width + j);
        int v = w.x;
        uint d = column_dim(j);
        if (v < 0) v += int(d);
        if (w.y != (w.x >> 31) || v < 0 || uint(v) >= d) {
            bad = w;
            return false;
        }
        if (pc.mode == 0u) {
            r = r * d + uint(v);
        } else {  // ScatterElements: the unit's coordinates with the axis one replaced
            uint rem = m, rs = 1u;
            for (int k = int(pc.rank) - 1; k >= 0; --k) {
                uint size = uint(k) == pc.axis ? pc.ulen : pc.dims[k];
                uint q = rem / size, c = rem - q * size;
                rem = q;
                uint cd = uint(k) == pc.axis ? uint(v) : c;
                r += cd * rs;
                rs *= pc.dims[k];
                base += cd * pc.ostride[k];
            }
        }
    }
    if (pc.mode == 0u) base = r * pc.slice;
    return true;
}

#if PASS == 0  // ---------------------------------------------------------------- mark
layout(std430, binding = 1) buffer BW { uint win[]; };

void main() {
    VKML_FOR_EACH(m, pc.n) {
        uint r, base;
        ivec2 bad;
        if (!dest(m, r, base, bad)) {
            vkml_fault(pc.site, bad.x, bad.y);
            continue;
        }
        atomicMax(win[r], m + 1u);
    }
}

#elif PASS == 3  // ---------------------------------------------------------- check
shared ivec2 s_min[256];
shared ivec2 s_max[256];
shared bool s_done;

bool less64(ivec2 a, ivec2 b) { return a.y < b.y || (a.y == b.y && uint(a.x) < uint(b.x)); }

void main() {
    uint w = 4u + 4u * pc.site;
    if (fault[w] == 0u) return;  // (uniform: every invocation reads the same word)
    uint t = gl_LocalInvocationID.x, size = gl_WorkGroupSize.x;
    if (t == 0u) s_done = false;
    barrier();
    for (uint j = 0u; j < pc.width; ++j) {
        ivec2 mn = ivec2(-1, 0x7FFFFFFF), mx = ivec2(0, int(0x80000000u));
        for (uint m = t; m < pc.units; m += size) {
            ivec2 v = index_at(m * pc.width + j);
            if (less64(v, mn)) mn = v;
            if (less64(mx, v)) mx = v;
        }
        s_min[t] = mn;
        s_max[t] = mx;
        barrier();
        for (uint h = size / 2u; h > 0u; h >>= 1u) {
            if (t < h) {
                if (less64(s_min[t + h], s_min[t])) s_min[t] = s_min[t + h];
                if (less64(s_max[t], s_max[t + h])) s_max[t] = s_max[t + h];
            }
            barrier();
        }
        if (t == 0u) {
            int d = int(column_dim(j));
            ivec2 lo = ivec2(-d, (-d) >> 31), hi = ivec2(d, 0);
            bool under = less64(s_min[0], lo), over = !less64(s_max[0], hi);
            if (under || over) {
                ivec2 v = under ? s_min[0] : s_max[0];
                fault[w + 1u] = uint(v.x);
                fault[w + 2u] = uint(v.y);
                fault[w + 3u] = j;
                s_done = true;
            }
        }
        barrier();
        if (s_done) break;
    }
}

#elif PASS == 4  // ----------------------------------------------------------- sort
layout(std430, binding = 1) writeonly buffer BK { uint keys[]; };

shared uint s_row[CHUNK];
shared uint s_unit[CHUNK];

void main() {
    uint t = gl_LocalInvocationID.x, size = gl_WorkGroupSize.x;
    uint chunks = pc.total / CHUNK;
    for (uint c = gl_WorkGroupID.x; c < chunks; c += gl_NumWorkGroups.x) {  // (uniform per workgroup)
        for (uint i = t; i < CHUNK; i += size) {
            uint m = c * CHUNK + i, r = 0xFFFFFFFFu, base;
            ivec2 bad;
            if (m < pc.units && !dest(m, r, base, bad)) {
                vkml_fault(pc.site, bad.x, bad.y);
                r = 0xFFFFFFFFu;  // (sorts last; skipped)
            }
            s_row[i] = r;
            s_unit[i] = m;
        }
        barrier();
        for (uint k = 2u; k <= CHUNK; k <<= 1u) {
            for (uint j = k >> 1u; j > 0u; j >>= 1u) {
                for (uint i = t; i < CHUNK; i += size) {
                    uint l = i ^ j;
                    if (l > i) {
                        uint ri = s_row[i], rl = s_row[l], ui = s_unit[i], ul = s_unit[l];
                        bool greater = ri > rl || (ri == rl && ui > ul);
                        if (greater == ((i & k) == 0u)) {
                            s_row[i] = rl;
                            s_row[l] = ri;
                            s_unit[i] = ul;
                            s_unit[l] = ui;
                        }
                    }
                }
                barrier();
            }
        }
        for (uint i = t; i < CHUNK; i += size) {
            keys[c * CHUNK + i] = s_row[i];
            keys[pc.total + c * CHUNK + i] = s_unit[i];
        }
        barrier();
    }
}

#elif PASS == 1  // -------------------------------------------------- none (last wins)
layout(std430, binding = 1) readonly buffer BU { ELEM u[]; };
layout(std430, binding = 2) readonly buffer BW { uint win[]; };
layout(std430, binding = 3) writeonly buffer BO { ELEM o[]; };

void main() {
    VKML_FOR_EACH(e, pc.n) {
        uint m = e / pc.slice, s = e - m * pc.slice;
        uint r, base;
        ivec2 bad;
        if (dest(m, r, base, bad) && win[r] == m + 1u) o[base + s] = u[e];
    }
}

#else  // PASS == 2 ---------------------------------------------------------- reductions
layout(std430, binding = 1) readonly buffer BU { SX u[]; };
layout(std430, binding = 2) readonly buffer BK { uint keys[]; };
layout(std430, binding = 3) buffer BO { SX o[]; };

#if TX == 2
// x rounded to float16 (to nearest, ties to even), kept in a float: NumPy's float16 ufuncs
// round every step. Done with exact float operations, so no float16 arithmetic is needed and
// the rounding does not depend on how the device converts.
float round_f16(float x) {
    float ax = abs(x);
    if (vkml_isnan(x) || ax == 0.0) return x;
    float r;
    if (ax >= 65520.0) {
        r = VKML_INF;
    } else if (ax < 6.1035156e-5) {  // float16 subnormals: multiples of 2^-24
        r = roundEven(ax * 16777216.0) * 5.9604645e-8;
    } else {  // 11 significant bits
        int e = int(floatBitsToUint(ax) >> 23) - 127;
        float up = uintBitsToFloat(uint(127 - (e - 10)) << 23), down = uintBitsToFloat(uint(127 + (e - 10)) << 23);
        r = roundEven(ax * up) * down;
    }
    return x < 0.0 ? -r : r;
}
#define ROUND(v) round_f16(v)
#else
#define ROUND(v) (v)
#endif

CX combine(CX a, CX b) {
    precise CX v;
    if (pc.op == 1u) {
        v = a + b;
    } else if (pc.op == 2u) {
        v = a * b;
#if TX == 1
    } else if (pc.op == 3u) {  // NumPy's float32 maximum/minimum: NaN from a, then b; ties give b
        v = (vkml_isnan(a) || a > b) ? a : b;
    } else {
        v = (vkml_isnan(a) || a < b) ? a : b;
#elif TX == 2
    } else if (pc.op == 3u) {  // NumPy's float16 maximum/minimum: NaN from a, then b; ties give a
        v = (vkml_isnan(a) || a >= b) ? a : b;
    } else {
        v = (vkml_isnan(a) || a <= b) ? a : b;
#else
    } else if (pc.op == 3u) {
        v = a > b ? a : b;
    } else {
        v = a < b ? a : b;
#endif
    }
    return ROUND(v);
}

void main() {
    uint end = pc.first + pc.n / pc.slice;  // (this chunk's units)
    VKML_FOR_EACH(e, pc.n) {
        uint i = e / pc.slice, s = e - i * pc.slice, p = pc.first + i;
        uint r = keys[p];
        if (r == 0xFFFFFFFFu || (i > 0u && keys[p - 1u] == r)) continue;  // (a bad unit; not the row's first)
        uint r2, base;
        ivec2 bad;
        dest(keys[pc.total + p], r2, base, bad);
        CX acc = CX(o[base + s]);
        for (uint q = p; q < end && keys[q] == r; ++q) acc = combine(acc, CX(u[keys[pc.total + q] * pc.slice + s]));
        o[base + s] = SX(acc);
    }
}
#endif
