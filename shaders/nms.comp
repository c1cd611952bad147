#version 450
// NonMaxSuppression with its rows padded to a bound (vkml/kernels/nms.py, the
// NonMaxSuppressionPadded node of vkml/compile/ragged.py), float32 boxes and scores.
//
// PASS 1: a workgroup per (batch b, class c). Candidates are the boxes whose score is above
// the threshold (when one is given; NaN never is). The workgroup repeats, at most `limit`
// times: pick the best candidate left (highest score; NaN below every number; ties: the lower
// index, as the CPU operator's stable argsort), keep it, and drop every candidate whose IoU
// with it is above iou_threshold, and itself. Candidates left are bits in shared memory.
// Writes the kept indices to sel[(b * C + c) * limit + t] and their number to cnt[b * C + c].
// PASS 2: one workgroup lays the rows out as the CPU operator returns them: (b, c, index) for
// every (b, c) in order, each in the order kept; then zero rows up to the bound; and the count.
// int64 values are written as (low, high) 32-bit halves: no shaderInt64 needed.
//
// IoU is vkml/ops/detection.py iou_matrix step by step in float32, without fma contraction
// (`precise`) and with a correctly rounded division (vkml_div): the same rounding as NumPy's.
#extension GL_GOOGLE_include_directive : require
#include "include/vkml_types.glsl"
#include "include/vkml_math.glsl"

layout(local_size_x = 256) in;

#define WG 256u
#define NONE 0xFFFFFFFFu
#define MAX_WORDS 2048u   // candidate bits: at most 65536 boxes (kernels/nms.py MAX_BOXES)
#define MAX_PAIRS 2048u   // batches x classes (kernels/nms.py MAX_PAIRS)
#define CENTER 1u         // flags: center_point_box = 1
#define THRESHOLD 2u      // flags: a score threshold is given

layout(push_constant) uniform Push {
    uint B, C, N;     // batches, classes, boxes
    uint limit;       // min(max_output_boxes_per_class, N)
    uint cap;         // the bound: B * C * limit rows
    uint flags;
    float iou_thr;
    float score_thr;
} pc;

#if PASS == 1
layout(std430, binding = 0) readonly buffer BBox { float boxes[]; };
layout(std430, binding = 1) readonly buffer BScore { float scores[]; };
layout(std430, binding = 2) writeonly buffer BSel { uint sel[]; };
layout(std430, binding = 3) writeonly buffer BCnt { uint cnt[]; };

shared uint dead[MAX_WORDS];
shared float red_s[WG];
shared uint red_i[WG];

bool better(float s, uint i, float bs, uint bi) {
    if (i == NONE) return false;
    if (bi == NONE) return true;
    bool sn = isnan(s), bn = isnan(bs);
    if (sn != bn) return bn;
    if (!sn && s != bs) return s > bs;
    return i < bi;
}

// (y0, x0, y1, x1) of box i of batch b, as vkml/ops/detection.py _corners
vec4 corners(uint b, uint i) {
    uint o = (b * pc.N + i) * 4u;
    float p0 = boxes[o], p1 = boxes[o + 1u], p2 = boxes[o + 2u], p3 = boxes[o + 3u];
    if ((pc.flags & CENTER) != 0u) {  // x_center, y_center, width, height
        precise float hh = p3 / 2.0;
        precise float hw = p2 / 2.0;
        precise float y0 = p1 - hh;
        precise float x0 = p0 - hw;
        precise float y1 = p1 + hh;
        precise float x1 = p0 + hw;
        return vec4(y0, x0, y1, x1);
    }
    return vec4(min(p0, p2), min(p1, p3), max(p0, p2), max(p1, p3));
}

float iou(vec4 a, vec4 b) {
    precise float iy = min(a.z, b.z) - max(a.x, b.x);
    precise float ix = min(a.w, b.w) - max(a.y, b.y);
    precise float inter = (iy > 0.0 && ix > 0.0) ? iy * ix : 0.0;
    precise float area_a = (a.z - a.x) * (a.w - a.y);
    precise float area_b = (b.z - b.x) * (b.w - b.y);
    precise float uni = (area_a + area_b) - inter;
    bool ok = inter > 0.0 && area_a > 0.0 && area_b > 0.0 && uni > 0.0;
    return ok ? vkml_div(inter, uni) : 0.0;
}

void main() {
    uint pair = gl_WorkGroupID.x;
    uint b = pair / pc.C, c = pair % pc.C;
    uint tid = gl_LocalInvocationID.x;
    uint words = (pc.N + 31u) / 32u;
    uint srow = (b * pc.C + c) * pc.N;
    for (uint w = tid; w < words; w += WG) {
        uint bits = 0u;
        for (uint j = 0u; j < 32u; j++) {
            uint i = w * 32u + j;
            if (i >= pc.N || ((pc.flags & THRESHOLD) != 0u && !(scores[srow + i] > pc.score_thr)))
                bits |= 1u << j;
        }
        dead[w] = bits;
    }
    barrier();
    uint kept = 0u;
    for (uint t = 0u; t < pc.limit; t++) {
        float bs = 0.0;
        uint bi = NONE;
        for (uint i = tid; i < pc.N; i += WG) {
            if (((dead[i >> 5u] >> (i & 31u)) & 1u) != 0u) continue;
            float s = scores[srow + i];
            if (better(s, i, bs, bi)) { bs = s; bi = i; }
        }
        red_s[tid] = bs;
        red_i[tid] = bi;
        barrier();
        for (uint h = WG / 2u; h > 0u; h >>= 1u) {
            if (tid < h && better(red_s[tid + h], red_i[tid + h], red_s[tid], red_i[tid])) {
                red_s[tid] = red_s[tid + h];
                red_i[tid] = red_i[tid + h];
            }
            barrier();
        }
        uint best = red_i[0];
        if (best == NONE) break;  // (every invocation reads the same word)
        if (tid == 0u) sel[pair * pc.limit + t] = best;
        kept = t + 1u;
        vec4 kb = corners(b, best);
        for (uint i = tid; i < pc.N; i += WG) {
            if (((dead[i >> 5u] >> (i & 31u)) & 1u) != 0u) continue;
            if (i == best || iou(kb, corners(b, i)) > pc.iou_thr) atomicOr(dead[i >> 5u], 1u << (i & 31u));
        }
        barrier();  // (also: red_i[0] read by all before the next round writes it)
    }
    if (tid == 0u) cnt[pair] = kept;
}

#else  // PASS 2
layout(std430, binding = 0) readonly buffer BSel { uint sel[]; };
layout(std430, binding = 1) readonly buffer BCnt { uint cnt[]; };
layout(std430, binding = 2) writeonly buffer BOut { uint o[]; };      // int64 [cap, 3]
layout(std430, binding = 3) writeonly buffer BTotal { uint total[]; };  // int64 [1]

shared uint offs[MAX_PAIRS + 1u];

void put(uint row, uint b, uint c, uint i) {
    uint k = row * 6u;
    o[k] = b; o[k + 1u] = 0u;
    o[k + 2u] = c; o[k + 3u] = 0u;
    o[k + 4u] = i; o[k + 5u] = 0u;
}

void main() {
    uint tid = gl_LocalInvocationID.x;
    uint pairs = pc.B * pc.C;
    if (tid == 0u) {
        uint run = 0u;
        for (uint p = 0u; p < pairs; p++) {
            offs[p] = run;
            run += cnt[p];
        }
        offs[pairs] = run;
    }
    barrier();
    uint n = offs[pairs];
    for (uint p = tid; p < pairs; p += WG) {
        uint k = cnt[p];
        for (uint t = 0u; t < k; t++) put(offs[p] + t, p / pc.C, p % pc.C, sel[p * pc.limit + t]);
    }
    for (uint row = n + tid; row < pc.cap; row += WG) put(row, 0u, 0u, 0u);
    if (tid == 0u) { total[0] = n; total[1] = 0u; }
}
#endif
