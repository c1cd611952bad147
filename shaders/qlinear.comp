#version 450
// Quantized-inference ops (vkml/kernels/qlinear.py says what runs here), bit-exact with the CPU
// operators (vkml/ops/matmul.py, conv.py, quantize.py):
//   MATMUL   MatMulInteger / QLinearMatMul: batched (..., M, K) x (..., K, N), batch strides;
//   CONV     ConvInteger / QLinearConv: direct convolution, 1-3 spatial dims, groups;
//   DQ_MINMAX / DQ  DynamicQuantizeLinear's two passes (one workgroup: range, scale and zero
//            point; then the quantize, one invocation per element).
// MATMUL and CONV are simple direct kernels: one invocation per output element sums its K
// products (x - x_zero_point) * (w - w_zero_point) in int32 (exact: the host refuses K where the
// sum could exceed 2^31 - 1). REQ (QLinear*): the int32 sum (+ int32 bias, in float64) times
// the float32 scale a_scale * b_scale / y_scale (product and correctly rounded quotient in
// float32, as the CPU's) in float64, round half to even, + zero point, saturated; NaN gives 0
// (NumPy's clip-and-cast on x86). Needs shaderFloat64 (the CPU requantizes in float64).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_8bit_storage : require
#if SB == 2
#extension GL_EXT_shader_16bit_storage : require
#endif
#include "include/vkml_index.glsl"
#include "include/vkml_math.glsl"

#if defined(DQ_MINMAX)
layout(local_size_x = 256) in;
#else
layout(local_size_x = 256, local_size_x_id = 0) in;
#endif

// flags: bit 0 A signed, 1 B signed, 2 A zero point, 3 A zero point per row, 4 B zero point,
// 5 B zero point per column (conv: per output channel), 6 a_scale per row, 7 b_scale per column
// (conv: per channel), 8 y signed, 9-10 scale kind (0 float32, 1 float16, 2 bfloat16), 11 bias
layout(push_constant) uniform Push {
    uint total;
    uint flags;
#if defined(CONV)
    uint n, c, m, group;
    uint idim[3];
    uint odim[3];
    uint kdim[3];
    uint str[3];
    uint pad[3];
    uint dil[3];
#elif defined(MATMUL)
    uint m, n, k, brank;
    uint bshape[4];
    uint sab[4];
    uint sbb[4];
#else
    uint site;  // DQ_MINMAX: the fault site
#endif
} pc;

// a / b in float32, correctly rounded (ties cannot happen in a quotient): the float64 quotient
// rounded, then the neighbour whose exact residual a - q*b (exact in float64) is smallest.
float div_rn(float a, float b) {
    float q = float(double(a) / double(b));
    if (vkml_isnan(q) || abs(q) == VKML_INF || abs(q) < 1.17549435e-38) return q;
    uint bq = floatBitsToUint(q);
    float qd = uintBitsToFloat(bq - 1u), qu = uintBitsToFloat(bq + 1u);
    double da = double(a), db = double(b);
    precise double e0 = abs(da - double(q) * db);
    precise double ed = abs(da - double(qd) * db);
    precise double eu = abs(da - double(qu) * db);
    if (ed < e0 && ed <= eu) return qd;
    if (eu < e0) return qu;
    return q;
}

#if defined(MATMUL) || defined(CONV)
layout(std430, binding = 0) readonly buffer BA { uint8_t a_[]; };
layout(std430, binding = 1) readonly buffer BB { uint8_t b_[]; };
layout(std430, binding = 2) readonly buffer BAZ { uint8_t az_[]; };
layout(std430, binding = 3) readonly buffer BBZ { uint8_t bz_[]; };
#ifdef REQ
#if SB == 2
#define SS uint16_t
#else
#define SS float
#endif
layout(std430, binding = 4) readonly buffer BSA { SS sa_[]; };
layout(std430, binding = 5) readonly buffer BSB { SS sb_[]; };
layout(std430, binding = 6) readonly buffer BSY { SS sy_[]; };
layout(std430, binding = 7) readonly buffer BYZ { uint8_t yz_[]; };
layout(std430, binding = 8) readonly buffer BBias { int bias_[]; };
layout(std430, binding = 9) writeonly buffer BO { uint8_t o_[]; };
#else
layout(std430, binding = 4) writeonly buffer BO { int o_[]; };
#endif

bool flag(uint bit) { return ((pc.flags >> bit) & 1u) != 0u; }

int byte_val(uint r, bool signed_) {
    return signed_ ? bitfieldExtract(int(r), 0, 8) : int(r & 0xFFu);
}

#ifdef REQ
#include "include/vkml_round64.glsl"
float load_scale(uint v) {
#if SB == 2
    uint kind = (pc.flags >> 9) & 3u;
    return kind == 2u ? uintBitsToFloat(v << 16) : unpackHalf2x16(v).x;
#else
    return uintBitsToFloat(v);
#endif
}
#if SB == 2
#define SCALE(arr, at) load_scale(uint(arr[at]))
#else
#define SCALE(arr, at) arr[at]
#endif

// row: a_scale's index, col: b_scale's and the bias' index
void store(uint i, int acc, uint row, uint col) {
    precise double v = double(acc);
    if (flag(11u)) v += double(bias_[col]);
    precise float p = SCALE(sa_, flag(6u) ? row : 0u) * SCALE(sb_, flag(7u) ? col : 0u);
    float s = div_rn(p, SCALE(sy_, 0u));
    precise double y = v * double(s);
    bool ys = flag(8u);
    uint outv = 0u;
    uvec2 yb = unpackDouble2x32(y);
    uint yh = yb.y & 0x7FFFFFFFu;
    if (!(yh > 0x7FF00000u || (yh == 0x7FF00000u && yb.x != 0u))) {  // NaN (a bit test): 0
        double r = vkml_round_even64(y) + double(byte_val(uint(yz_[0]), ys));
        r = clamp(r, ys ? -128.0LF : 0.0LF, ys ? 127.0LF : 255.0LF);
        outv = uint(int(r)) & 0xFFu;
    }
    o_[i] = uint8_t(outv);
}
#else
void store(uint i, int acc, uint row, uint col) { o_[i] = acc; }
#endif

void main() {
    bool as = flag(0u), bs = flag(1u);
    VKML_FOR_EACH(i, pc.total) {
#if defined(MATMUL)
        uint col = i % pc.n;
        uint t = i / pc.n;
        uint row = t % pc.m;
        uint bi = t / pc.m;
        uint oa = 0u, ob = 0u;
        for (int d = int(pc.brank) - 1; d >= 0; --d) {
            uint s = pc.bshape[d];
            uint q = bi / s;
            uint c_ = bi - q * s;
            bi = q;
            oa += c_ * pc.sab[d];
            ob += c_ * pc.sbb[d];
        }
        int za = flag(2u) ? byte_val(uint(az_[flag(3u) ? row : 0u]), as) : 0;
        int zb = flag(4u) ? byte_val(uint(bz_[flag(5u) ? col : 0u]), bs) : 0;
        uint pa = oa + row * pc.k, pb = ob + col;
        int acc = 0;
        for (uint kk = 0u; kk < pc.k; ++kk) {
            acc += (byte_val(uint(a_[pa + kk]), as) - za) * (byte_val(uint(b_[pb + kk * pc.n]), bs) - zb);
        }
        store(i, acc, row, col);
#else
        // i = (((nb * M + mo) * OD + z) * OH + y) * OW + x
        uint ow = pc.odim[2], oh = pc.odim[1], od = pc.odim[0];
        uint t = i;
        uint ox = t % ow; t /= ow;
        uint oy = t % oh; t /= oh;
        uint oz = t % od; t /= od;
        uint mo = t % pc.m;
        uint nb = t / pc.m;
        uint cg = pc.c / pc.group, mg = pc.m / pc.group;
        uint g = mo / mg;
        int za = flag(2u) ? byte_val(uint(az_[0]), as) : 0;
        int zb = flag(4u) ? byte_val(uint(bz_[flag(5u) ? mo : 0u]), bs) : 0;
        uint plane = pc.idim[0] * pc.idim[1] * pc.idim[2];
        uint taps = pc.kdim[0] * pc.kdim[1] * pc.kdim[2];
        int acc = 0;
        for (uint ci = 0u; ci < cg; ++ci) {
            uint xbase = (nb * pc.c + g * cg + ci) * plane;
            uint wbase = (mo * cg + ci) * taps;
            for (uint kz = 0u; kz < pc.kdim[0]; ++kz) {
                int iz = int(oz * pc.str[0] + kz * pc.dil[0]) - int(pc.pad[0]);
                if (iz < 0 || iz >= int(pc.idim[0])) continue;
                for (uint ky = 0u; ky < pc.kdim[1]; ++ky) {
                    int iy = int(oy * pc.str[1] + ky * pc.dil[1]) - int(pc.pad[1]);
                    if (iy < 0 || iy >= int(pc.idim[1])) continue;
                    for (uint kx = 0u; kx < pc.kdim[2]; ++kx) {
                        int ix = int(ox * pc.str[2] + kx * pc.dil[2]) - int(pc.pad[2]);
                        if (ix < 0 || ix >= int(pc.idim[2])) continue;
                        uint xa = xbase + (uint(iz) * pc.idim[1] + uint(iy)) * pc.idim[2] + uint(ix);
                        uint wa = wbase + (kz * pc.kdim[1] + ky) * pc.kdim[2] + kx;
                        acc += (byte_val(uint(a_[xa]), as) - za) * (byte_val(uint(b_[wa]), bs) - zb);
                    }
                }
            }
        }
        store(i, acc, 0u, mo);
#endif
    }
}

#else
// ------------------------------------------------------------------ DynamicQuantizeLinear
// As vkml/ops/quantize.py: lo = min(0, min x), hi = max(0, max x) as Python's min/max see
// NumPy's (a NaN anywhere makes x.min() NaN and Python's min(0.0, NaN) 0.0: lo = hi = 0);
// scale = (hi - lo) / 255 in float32; scale 0: zeros, scale 1, zero point 0; a non-finite
// scale: the CPU's error (the fault word); else zp = clip(rint(-lo / scale), 0, 255) and
// y = clip(rint(x / scale) + zp, 0, 255), the quotients correctly rounded float32.
layout(std430, binding = 0) readonly buffer BX { float x_[]; };
#ifdef DQ_MINMAX
layout(std430, binding = 1) writeonly buffer BS { float s_[]; };
layout(std430, binding = 2) writeonly buffer BZ { uint8_t z_[]; };
layout(std430, binding = 3) writeonly buffer BP { float par_[]; };  // scale, zero point for pass 2
#define FAULT_BINDING 4
#include "include/vkml_fault.glsl"

shared float s_lo[256];
shared float s_hi[256];
shared uint s_nan[256];

void main() {
    uint l = gl_LocalInvocationID.x;
    float lo = 0.0, hi = 0.0;
    uint nan_ = 0u;
    for (uint i = l; i < pc.total; i += 256u) {
        float v = x_[i];
        if (vkml_isnan(v)) nan_ = 1u;
        else { lo = min(lo, v); hi = max(hi, v); }
    }
    s_lo[l] = lo; s_hi[l] = hi; s_nan[l] = nan_;
    barrier();
    for (uint w = 128u; w > 0u; w >>= 1) {
        if (l < w) {
            s_lo[l] = min(s_lo[l], s_lo[l + w]);
            s_hi[l] = max(s_hi[l], s_hi[l + w]);
            s_nan[l] |= s_nan[l + w];
        }
        barrier();
    }
    if (l == 0u) {
        lo = s_lo[0]; hi = s_hi[0];
        if (s_nan[0] != 0u) { lo = 0.0; hi = 0.0; }
        precise float d = hi - lo;
        float scale = div_rn(d, 255.0);
        float zp = 0.0, ps = scale;
        if (scale == 0.0) {
            scale = 1.0; ps = 0.0;  // pass 2 writes zeros
        } else if (abs(scale) == VKML_INF) {
            vkml_fault(pc.site, 0, 0);
            ps = 0.0;
        } else {
            zp = clamp(roundEven(div_rn(-lo, scale)), 0.0, 255.0);
        }
        s_[0] = scale;
        z_[0] = uint8_t(uint(zp));
        par_[0] = ps;
        par_[1] = zp;
    }
}
#else
layout(std430, binding = 1) readonly buffer BP { float par_[]; };
layout(std430, binding = 2) writeonly buffer BY { uint8_t y_[]; };

void main() {
    float scale = par_[0], zp = par_[1];
    VKML_FOR_EACH(i, pc.total) {
        uint v = 0u;
        if (scale != 0.0) {
            float q = div_rn(x_[i], scale);
            if (!vkml_isnan(q)) v = uint(clamp(roundEven(q) + zp, 0.0, 255.0));
        }
        y_[i] = uint8_t(v);
    }
}
#endif
#endif
