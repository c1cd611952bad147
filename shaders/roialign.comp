#version 450
// RoiAlign (ONNX opsets 10, 16, 22): one invocation per output element y[r, c, ph, pw] of
// y (R, C, PH, PW), read from x (N, C, H, W) at the rois (R, 4: x1, y1, x2, y2) of the
// batch item batch_indices[r] (int64, read as two 32-bit halves: no shaderInt64 needed).
//
// The arithmetic is onnxruntime's and onnx.reference's (vkml/kernels/roialign.py says where
// they differ from vkml's CPU operator), step by step in float32 without fma contraction
// (`precise`) and with correctly rounded divisions (vkml_div), so a float32 result matches
// theirs bit for bit on devices whose float32 add and multiply are correctly rounded:
//   roi start = roi * spatial_scale - (half_pixel ? 0.5 : 0); size = end - start, at least 1
//   in output_half_pixel mode; bin = size / PH; grid = sampling_ratio, or ceil(bin) when 0
//   (a grid <= 0, possible in half_pixel mode, samples nothing and gives 0);
//   sample (iy, ix) at y = (start + ph * bin) + ((iy + 0.5) * bin) / grid, likewise x;
//   a sample with y < -1 or y > H (or x likewise) weighs nothing (its four taps read x[0]
//   with weight 0, as onnxruntime's); else y = max(y, 0), y_low = int(y), and y_low >= H - 1
//   clamps both taps to H - 1; weights (1 - ly)(1 - lx), (1 - ly) lx, ly (1 - lx), ly lx.
//   avg: the sum over samples of (((w1 v1 + w2 v2) + w3 v3) + w4 v4), over max(grid_h *
//   grid_w, 1); max: the largest weighted tap over all samples (onnxruntime's max mode).
// A batch index outside [0, N) gives zeros and is reported through the fault word
// (include/vkml_fault.glsl): workgroup 0 first scans batch_indices in order, so the roi
// named is the first bad one, as the CPU operator names it; its site's fourth word holds
// the roi's number. Offsets are uint32: the host keeps x and y below 2^31 elements.
#extension GL_GOOGLE_include_directive : require
#include "include/vkml_types.glsl"
#include "include/vkml_math.glsl"
#define FAULT_BINDING 4
#include "include/vkml_fault.glsl"

layout(local_size_x = 256, local_size_x_id = 0) in;

layout(push_constant) uniform Push {
    uint n;         // output elements, R * C * PH * PW
    uint channels;  // C
    uint height;    // H
    uint width;     // W
    uint out_h;     // PH
    uint out_w;     // PW
    uint rois;      // R
    uint batch;     // N
    uint sampling;  // sampling_ratio (0: adaptive)
    uint flags;     // bit 0: max mode, bit 1: half_pixel
    uint site;      // this node's site in the fault buffer
    float scale;    // spatial_scale
} pc;

layout(std430, binding = 0) readonly buffer BX { SX x[]; };
layout(std430, binding = 1) readonly buffer BR { SX roi[]; };
layout(std430, binding = 2) readonly buffer BB { ivec2 bidx[]; };  // int64 (low, high) halves
layout(std430, binding = 3) writeonly buffer BO { SO o[]; };

#define MAX_GRID 16777216.0  // 2^24: grid sizes stay exact in float32

// Batch index of roi r, or -1 when it lies outside [0, N).
int batch_of(uint r) {
    ivec2 w = bidx[r];
    bool fits = w.y == (w.x >> 31);  // an int64 that fits in an int32
    return (fits && w.x >= 0 && uint(w.x) < pc.batch) ? w.x : -1;
}

// The first roi with a bad batch index, by workgroup 0 (uniform control flow around barriers).
shared uint first_bad;

void scan_batch_indices() {
    uint lid = gl_LocalInvocationID.x;
    if (lid == 0u) first_bad = 0xFFFFFFFFu;
    barrier();
    for (uint base = 0u; base < pc.rois; base += gl_WorkGroupSize.x) {
        uint r = base + lid;
        if (r < pc.rois && batch_of(r) < 0) atomicMin(first_bad, r);
        memoryBarrierShared();
        barrier();
        uint f = first_bad;
        barrier();  // every invocation has read it before any writes again
        if (f != 0xFFFFFFFFu) {
            if (r == f) {
                ivec2 w = bidx[r];
                uint at = 4u + 4u * pc.site;
                if (atomicCompSwap(fault[at], 0u, 1u) == 0u) {
                    fault[at + 1u] = uint(w.x);
                    fault[at + 2u] = uint(w.y);
                    fault[at + 3u] = r;  // the roi, for the CPU operator's message
                }
                fault[0] = 1u;
            }
            break;
        }
    }
}

// Samples along one axis: ceil(bin) when sampling_ratio is 0, clamped to [0, 2^24] (NaN: 0).
int grid_of(float bin) {
    if (pc.sampling != 0u) return int(pc.sampling);
    float g = ceil(bin);
    if (vkml_isnan(g) || g < 1.0) return 0;
    return int(min(g, MAX_GRID));
}

// Sample coordinate: (start + p * bin) + ((i + 0.5) * bin) / grid, as onnxruntime rounds it.
float sample_at(float start, uint p, float bin, int i, float grid) {
    precise float a = float(p) * bin;
    precise float s = start + a;
    precise float b = (float(i) + 0.5) * bin;
    precise float c = vkml_div(b, grid);
    precise float v = s + c;
    return v;
}

// One axis of a sample: taps lo/hi, weights (1 - l)/l; false when it lies outside [-1, size].
bool axis_taps(float v, uint size, out uint lo, out uint hi, out float l) {
    if (vkml_isnan(v) || v < -1.0 || v > float(size)) {
        lo = 0u; hi = 0u; l = 0.0;
        return false;
    }
    v = max(v, 0.0);
    uint low = uint(v);
    if (low >= size - 1u) {
        lo = size - 1u; hi = size - 1u;
        v = float(lo);
    } else {
        lo = low; hi = low + 1u;
    }
    precise float frac = v - float(lo);
    l = frac;
    return true;
}

void main() {
    if (gl_WorkGroupID.x == 0u) scan_batch_indices();

    bool max_mode = (pc.flags & 1u) != 0u;
    bool half_pixel = (pc.flags & 2u) != 0u;
    for (uint e = gl_GlobalInvocationID.x; e < pc.n; e += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
        uint t = e / pc.out_w;
        uint pw = e - t * pc.out_w;
        uint q = t / pc.out_h;
        uint ph = t - q * pc.out_h;
        uint r = q / pc.channels;
        uint c = q - r * pc.channels;
        int b = batch_of(r);
        if (b < 0) {
            o[e] = SO(0.0);
            continue;
        }
        float off = half_pixel ? 0.5 : 0.0;
        precise float x1 = float(roi[4u * r]) * pc.scale - off;
        precise float y1 = float(roi[4u * r + 1u]) * pc.scale - off;
        precise float x2 = float(roi[4u * r + 2u]) * pc.scale - off;
        precise float y2 = float(roi[4u * r + 3u]) * pc.scale - off;
        precise float rw = x2 - x1;
        precise float rh = y2 - y1;
        if (!half_pixel) {  // malformed rois become 1 x 1
            rw = max(rw, 1.0);
            rh = max(rh, 1.0);
        }
        float bin_h = vkml_div(rh, float(pc.out_h));
        float bin_w = vkml_div(rw, float(pc.out_w));
        int gh = grid_of(bin_h);
        int gw = grid_of(bin_w);
        float fgh = float(gh), fgw = float(gw);
        uint hw = pc.height * pc.width;
        uint base = (uint(b) * pc.channels + c) * hw;

        float acc = 0.0;
        bool any = false;
        for (int iy = 0; iy < gh; ++iy) {
            float yy = sample_at(y1, ph, bin_h, iy, fgh);
            uint ylo, yhi;
            float ly;
            bool yok = axis_taps(yy, pc.height, ylo, yhi, ly);
            precise float hy = 1.0 - ly;
            for (int ix = 0; ix < gw; ++ix) {
                float xx = sample_at(x1, pw, bin_w, ix, fgw);
                uint xlo, xhi;
                float lx;
                bool ok = axis_taps(xx, pc.width, xlo, xhi, lx) && yok;
                precise float hx = 1.0 - lx;
                precise float w1 = hy * hx;
                precise float w2 = hy * lx;
                precise float w3 = ly * hx;
                precise float w4 = ly * lx;
                uint p1 = 0u, p2 = 0u, p3 = 0u, p4 = 0u;
                if (ok) {
                    p1 = ylo * pc.width + xlo;
                    p2 = ylo * pc.width + xhi;
                    p3 = yhi * pc.width + xlo;
                    p4 = yhi * pc.width + xhi;
                } else {  // onnxruntime's zero weights (on x[0] of the plane)
                    w1 = 0.0; w2 = 0.0; w3 = 0.0; w4 = 0.0;
                }
                precise float t1 = w1 * float(x[base + p1]);
                precise float t2 = w2 * float(x[base + p2]);
                precise float t3 = w3 * float(x[base + p3]);
                precise float t4 = w4 * float(x[base + p4]);
                if (max_mode) {
                    float m = t1;
                    if (t2 > m) m = t2;
                    if (t3 > m) m = t3;
                    if (t4 > m) m = t4;
                    if (!any || m > acc) acc = m;
                    any = true;
                } else {
                    precise float s = ((t1 + t2) + t3) + t4;
                    precise float sum = acc + s;
                    acc = sum;
                }
            }
        }
        if (!max_mode) {
            precise float count = max(fgh * fgw, 1.0);
            acc = vkml_div(acc, count);
        }
        o[e] = SO(acc);
    }
}
