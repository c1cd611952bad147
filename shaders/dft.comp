#version 450
// DFT (ONNX DFT-17 and -20) along one axis of x viewed as [outer][nin][inner][cin] (cin 1: real,
// 2: complex). The signal of row (o, i) is x[o][t][i] for t < nin, zero-padded or truncated to
// the transform length n; y is [outer][m][inner][2], or [outer][n][inner][1] for an IRFFT
// (onesided inverse: the Hermitian extension Z of z = x[0 .. n/2] transformed, the real part
// kept: Z[n - k] = conj(z[k]), the imaginary parts of z[0] and, n even, z[n/2] ignored, as
// np.fft.irfft). vkml/kernels/dft.py puts the twiddles tw[j] = (cos, sin)(2 pi j / n), j < n, into
// a constant buffer, computed as pocketfft computes them (numpy's FFT: glibc cos/sin in double,
// combined from two tables, rounded once to the compute type), followed by the radices' constants
// (cos, sin)(2 pi q / p) of p = 3, 5, 7, 11 and sqrt(1/2), as pocketfft rounds them. Compute type
// R: float, or double with DOUBLE_ (shaderFloat64: the forward transform, which NumPy computes in
// float64 whatever the input); x and y are stored as TX (f32 or f16).
// Two shapes:
//   PASS: one radix pass of pocketfft's complex FFTPACK (cfftp: radix 2, 3, 4, 5, 7, 8, 11 in
//     its factor order) over every row at once, an invocation per (row, k, i) butterfly: the
//     same operations in the same order, each rounded (`precise`: no fused multiply-adds), so the
//     result is NumPy's bit for bit. The first pass reads x (FIRST), the last writes y (LAST,
//     times fct with SCALE: 1/n of an inverse, as pocketfft scales), the others ping-pong two
//     scratch buffers of R pairs [rows][n].
//   RPASS: one radix pass of pocketfft's real FFTPACK backward transform (rfftp: radb2, 3, 4, 5),
//     NumPy's IRFFT in float32, bit for bit in the same way: x's half spectrum read in FFTPACK's
//     order (R0, R1, I1, ..., R(n-1)/2, I(n-1)/2[, Rn/2]: numpy's irfft packing) by the first pass,
//     an invocation per (row, k, block of i), the real outputs times fct by the last.
//   direct (no PASS): one invocation per output element sums its n terms in order, the twiddle
//     index (k t mod n) kept exactly by integer increments (IRFFT pairs k with n - k:
//     Re z0 + 2 sum_{0 < k < n/2} Re(z_k w^kt) + (n even) (-1)^t Re z_{n/2}); any n.
#extension GL_GOOGLE_include_directive : require
#include "include/vkml_types.glsl"
#include "include/vkml_index.glsl"

layout(local_size_x = 64, local_size_x_id = 0) in;

#ifdef DOUBLE_
#define R double
#define R2 dvec2
#else
#define R float
#define R2 vec2
#endif

#define INVERSE 1u
#define FIRST 2u
#define LAST 4u
#define HERMITIAN 8u  // load the Hermitian extension of the half spectrum (IRFFT)
#define REAL_OUT 16u  // write the real parts only (IRFFT)
#define SCALE 32u     // multiply the results by fct

layout(push_constant) uniform Push {
    uint rows;   // outer * inner
    uint inner;
    uint nin;    // x's length along the axis
    uint cin;    // 1 (real) or 2 (complex)
    uint n;      // transform length
    uint m;      // y's length along the axis
    uint flags;
    uint total;  // PASS: rows * n / ip butterflies; direct: outer * m * inner outputs
    uint ip;     // PASS: the radix, l1 (product of the earlier radices), ido = n / (l1 ip)
    uint l1;
    uint ido;
    float fct;
} pc;

layout(std430, binding = 0) readonly buffer BX { SX x[]; };
layout(std430, binding = 1) readonly buffer BT { R2 tw[]; };
#if defined(PASS)
layout(std430, binding = 2) readonly buffer BA { R2 src[]; };
layout(std430, binding = 3) writeonly buffer BB { R2 dst[]; };
layout(std430, binding = 4) writeonly buffer BY { SX y[]; };
#elif defined(RPASS)
layout(std430, binding = 2) readonly buffer BA { float src[]; };
layout(std430, binding = 3) writeonly buffer BB { float dst[]; };
layout(std430, binding = 4) writeonly buffer BY { SX y[]; };
#else
layout(std430, binding = 2) writeonly buffer BY { SX y[]; };
#endif

#if defined(PASS)
// element t < n of row `row`'s (zero-padded, truncated or Hermitian-extended) signal
R2 load(uint row, uint t) {
    uint o = row / pc.inner;
    uint xbase = o * pc.nin * pc.inner + (row - o * pc.inner);
    if ((pc.flags & HERMITIAN) != 0u) {
        bool upper = 2u * t > pc.n;
        uint src_ = upper ? pc.n - t : t;
        if (src_ >= pc.nin) return R2(0.0);
        uint at = (xbase + src_ * pc.inner) * 2u;
        R a = R(float(x[at]));
        R b = (t == 0u || 2u * t == pc.n) ? R(0.0) : R(float(x[at + 1u]));
        return R2(a, upper ? -b : b);
    }
    if (t >= pc.nin) return R2(0.0);
    uint at = (xbase + t * pc.inner) * pc.cin;
    return R2(R(float(x[at])), pc.cin == 2u ? R(float(x[at + 1u])) : R(0.0));
}

void store(uint row, uint p, R2 v) {
    if (p >= pc.m) return;
    if ((pc.flags & SCALE) != 0u) {
        precise R2 s = v * R(pc.fct);
        v = s;
    }
    uint o = row / pc.inner;
    uint e = (o * pc.m + p) * pc.inner + (row - o * pc.inner);
    if ((pc.flags & REAL_OUT) != 0u) {
        y[e] = SX(float(v.x));
    } else {
        y[2u * e] = SX(float(v.x));
        y[2u * e + 1u] = SX(float(v.y));
    }
}

// pocketfft's complex helpers (every result rounded: precise)
R2 rotx90(R2 a, bool fwd) { return fwd ? R2(a.y, -a.x) : R2(-a.y, a.x); }
R2 rotx45(R2 a, bool fwd, R h) {
    precise R2 r = fwd ? R2(h * (a.x + a.y), h * (a.y - a.x)) : R2(h * (a.x - a.y), h * (a.y + a.x));
    return r;
}
R2 rotx135(R2 a, bool fwd, R h) {
    precise R2 r = fwd ? R2(h * (a.y - a.x), h * (-a.x - a.y)) : R2(h * (-a.x - a.y), h * (a.x - a.y));
    return r;
}
R2 special_mul(R2 a, R2 w, bool fwd) {
    precise R re = fwd ? a.x * w.x + a.y * w.y : a.x * w.x - a.y * w.y;
    precise R im = fwd ? a.y * w.x - a.x * w.y : a.x * w.y + a.y * w.x;
    return R2(re, im);
}

void main() {
    uint ip = pc.ip, l1 = pc.l1, ido = pc.ido, n = pc.n;
    bool fwd = (pc.flags & INVERSE) == 0u;
    bool first = (pc.flags & FIRST) != 0u, last = (pc.flags & LAST) != 0u;
    R h = tw[n + 11u].x;
    VKML_FOR_EACH(e, pc.total) {
        uint i = e % ido;
        uint kr = e / ido;
        uint k = kr % l1;
        uint row = kr / l1;
        uint base = row * n;
        R2 v[11];
        for (uint j = 0u; j < ip; j++) {
            uint t = i + ido * (j + ip * k);
            v[j] = first ? load(row, t) : src[base + t];
        }
        precise R2 o_[11];
        if (ip == 1u) {
            o_[0] = v[0];
        } else if (ip == 2u) {
            o_[0] = v[0] + v[1];
            o_[1] = v[0] - v[1];
        } else if (ip == 4u) {
            precise R2 t2 = v[0] + v[2], t1 = v[0] - v[2];
            precise R2 t3 = v[1] + v[3], t4 = v[1] - v[3];
            t4 = rotx90(t4, fwd);
            o_[0] = t2 + t3;
            o_[2] = t2 - t3;
            o_[1] = t1 + t4;
            o_[3] = t1 - t4;
        } else if (ip == 8u) {
            precise R2 a1 = v[1] + v[5], a5 = v[1] - v[5];
            precise R2 a3 = v[3] + v[7], a7 = v[3] - v[7];
            a7 = rotx90(a7, fwd);
            precise R2 s13 = a1 + a3, d13 = a1 - a3;
            a1 = s13;
            a3 = rotx90(d13, fwd);
            precise R2 s57 = a5 + a7, d57 = a5 - a7;
            a5 = rotx45(s57, fwd, h);
            a7 = rotx135(d57, fwd, h);
            precise R2 a0 = v[0] + v[4], a4 = v[0] - v[4];
            precise R2 a2 = v[2] + v[6], a6 = v[2] - v[6];
            precise R2 s02 = a0 + a2, d02 = a0 - a2;
            o_[0] = s02 + a1;
            o_[4] = s02 - a1;
            o_[2] = d02 + a3;
            o_[6] = d02 - a3;
            a6 = rotx90(a6, fwd);
            precise R2 s46 = a4 + a6, d46 = a4 - a6;
            o_[1] = s46 + a5;
            o_[5] = s46 - a5;
            o_[3] = d46 + a7;
            o_[7] = d46 - a7;
        } else {  // 3, 5, 7, 11: the pairs' sums p and differences q, pocketfft's PARTSTEPs
            uint hh = ip / 2u;
            uint cbase = n + (ip == 3u ? 0u : ip == 5u ? 1u : ip == 7u ? 3u : 6u);
            R sgn = fwd ? R(-1.0) : R(1.0);
            precise R2 p[5], q[5];
            for (uint j = 1u; j <= hh; j++) {
                p[j - 1u] = v[j] + v[ip - j];
                q[j - 1u] = v[j] - v[ip - j];
            }
            precise R2 acc = v[0];
            for (uint j = 0u; j < hh; j++) acc = acc + p[j];
            o_[0] = acc;
            for (uint u = 1u; u <= hh; u++) {
                precise R car = v[0].x, cai = v[0].y, cbr = R(0.0), cbi = R(0.0);
                for (uint j = 1u; j <= hh; j++) {
                    uint qq = (u * j) % ip;
                    R s = sgn;
                    if (qq > hh) {
                        qq = ip - qq;
                        s = -s;
                    }
                    R2 c = tw[cbase + qq - 1u];
                    R xi = s * c.y;
                    car = car + c.x * p[j - 1u].x;
                    cai = cai + c.x * p[j - 1u].y;
                    if (j == 1u) {
                        cbi = xi * q[0].x;
                        cbr = xi * q[0].y;
                    } else {
                        cbi = cbi + xi * q[j - 1u].x;
                        cbr = cbr + xi * q[j - 1u].y;
                    }
                }
                R2 ca = R2(car, cai), cb = R2(-cbr, cbi);
                o_[u] = ca + cb;
                o_[ip - u] = ca - cb;
            }
        }
        for (uint j = 0u; j < ip; j++) {
            R2 r = o_[j];
            if (i > 0u && j > 0u) r = special_mul(r, tw[j * l1 * i], fwd);
            uint qo = i + ido * (k + l1 * j);
            if (last) {
                store(row, qo, r);
            } else {
                dst[base + qo] = r;
            }
        }
    }
}
#elif defined(RPASS)
uint g_row, g_ido, g_l1, g_ip;
bool g_first, g_last;

// element h of row g_row's half spectrum in FFTPACK order: R0, R1, I1, R2, I2, ... (zero beyond nin)
float hc(uint h) {
    uint i = (h + 1u) / 2u;
    if (i >= pc.nin) return 0.0;
    uint o = g_row / pc.inner;
    uint at = ((o * pc.nin + i) * pc.inner + (g_row - o * pc.inner)) * 2u;
    return (h == 0u || (h & 1u) == 1u) ? float(x[at]) : float(x[at + 1u]);
}

float CC(uint a, uint b, uint k) {
    uint h = a + g_ido * (b + g_ip * k);
    return g_first ? hc(h) : src[g_row * pc.n + h];
}

void CH(uint a, uint k, uint j, float v) {
    uint p = a + g_ido * (k + g_l1 * j);
    if (!g_last) {
        dst[g_row * pc.n + p] = v;
        return;
    }
    precise float s = pc.fct * v;  // pocketfft's copy_and_norm: fct * p1[i]
    uint o = g_row / pc.inner;
    y[(o * pc.m + p) * pc.inner + (g_row - o * pc.inner)] = SX(s);
}

// the twiddle pair (WA(x, i - 2), WA(x, i - 1)) of an even i
vec2 WA(uint xx, uint i) { return tw[(xx + 1u) * g_l1 * (i / 2u)]; }

// pocketfft's MULPM(CH(i, k, j), CH(i - 1, k, j), w.x, w.y, c, d): a = w.x c + w.y d, b = w.x d - w.y c
void mulpm_out(uint i, uint k, uint j, float c, float d, vec2 w) {
    precise float a = w.x * c + w.y * d;
    precise float b = w.x * d - w.y * c;
    CH(i, k, j, a);
    CH(i - 1u, k, j, b);
}

void main() {
    uint n = pc.n;
    g_ip = pc.ip;
    g_l1 = pc.l1;
    g_ido = pc.ido;
    g_first = (pc.flags & FIRST) != 0u;
    g_last = (pc.flags & LAST) != 0u;
    uint ido = g_ido, ip = g_ip;
    uint nb = ido / 2u + 1u;  // blocks of a k: i = 0; i = 2, 4, ... < ido; i = ido - 1 (ido even)
    const float TAUR = -0.5;
    float TAUI = tw[n].y, TR11 = tw[n + 1u].x, TI11 = tw[n + 1u].y, TR12 = tw[n + 2u].x, TI12 = tw[n + 2u].y;
    float SQRT2 = tw[n + 12u].x;
    VKML_FOR_EACH(e, pc.total) {
        uint b = e % nb;
        uint kr = e / nb;
        uint k = kr % g_l1;
        g_row = kr / g_l1;
        bool head = b == 0u;
        bool tail = (ido & 1u) == 0u && b == ido / 2u;  // the i = ido - 1 block
        uint i = 2u * b, ic = ido - i;
        if (ip == 1u) {  // n = 1: c[0] *= fct
            if (head) CH(0u, k, 0u, CC(0u, 0u, k));
        } else if (ip == 2u) {
            if (head) {
                precise float s0 = CC(0u, 0u, k) + CC(ido - 1u, 1u, k), s1 = CC(0u, 0u, k) - CC(ido - 1u, 1u, k);
                CH(0u, k, 0u, s0);
                CH(0u, k, 1u, s1);
            } else if (tail) {
                precise float s0 = 2.0 * CC(ido - 1u, 0u, k), s1 = -2.0 * CC(0u, 1u, k);
                CH(ido - 1u, k, 0u, s0);
                CH(ido - 1u, k, 1u, s1);
            } else {
                precise float c0 = CC(i - 1u, 0u, k) + CC(ic - 1u, 1u, k), tr2 = CC(i - 1u, 0u, k) - CC(ic - 1u, 1u, k);
                precise float ti2 = CC(i, 0u, k) + CC(ic, 1u, k), c1 = CC(i, 0u, k) - CC(ic, 1u, k);
                CH(i - 1u, k, 0u, c0);
                CH(i, k, 0u, c1);
                mulpm_out(i, k, 1u, ti2, tr2, WA(0u, i));
            }
        } else if (ip == 3u) {
            if (head) {
                precise float tr2 = 2.0 * CC(ido - 1u, 1u, k);
                precise float cr2 = CC(0u, 0u, k) + TAUR * tr2;
                precise float c0 = CC(0u, 0u, k) + tr2;
                precise float ci3 = (2.0 * TAUI) * CC(0u, 2u, k);
                precise float c2 = cr2 + ci3, c1 = cr2 - ci3;
                CH(0u, k, 0u, c0);
                CH(0u, k, 2u, c2);
                CH(0u, k, 1u, c1);
            } else {
                precise float tr2 = CC(i - 1u, 2u, k) + CC(ic - 1u, 1u, k), ti2 = CC(i, 2u, k) - CC(ic, 1u, k);
                precise float cr2 = CC(i - 1u, 0u, k) + TAUR * tr2, ci2 = CC(i, 0u, k) + TAUR * ti2;
                precise float c0r = CC(i - 1u, 0u, k) + tr2, c0i = CC(i, 0u, k) + ti2;
                precise float cr3 = TAUI * (CC(i - 1u, 2u, k) - CC(ic - 1u, 1u, k));
                precise float ci3 = TAUI * (CC(i, 2u, k) + CC(ic, 1u, k));
                precise float dr3 = cr2 + ci3, dr2 = cr2 - ci3, di2 = ci2 + cr3, di3 = ci2 - cr3;
                CH(i - 1u, k, 0u, c0r);
                CH(i, k, 0u, c0i);
                mulpm_out(i, k, 1u, di2, dr2, WA(0u, i));
                mulpm_out(i, k, 2u, di3, dr3, WA(1u, i));
            }
        } else if (ip == 4u) {
            if (head) {
                precise float tr2 = CC(0u, 0u, k) + CC(ido - 1u, 3u, k), tr1 = CC(0u, 0u, k) - CC(ido - 1u, 3u, k);
                precise float tr3 = 2.0 * CC(ido - 1u, 1u, k), tr4 = 2.0 * CC(0u, 2u, k);
                precise float c0 = tr2 + tr3, c2 = tr2 - tr3, c3 = tr1 + tr4, c1 = tr1 - tr4;
                CH(0u, k, 0u, c0);
                CH(0u, k, 2u, c2);
                CH(0u, k, 3u, c3);
                CH(0u, k, 1u, c1);
            } else if (tail) {
                precise float ti1 = CC(0u, 3u, k) + CC(0u, 1u, k), ti2 = CC(0u, 3u, k) - CC(0u, 1u, k);
                precise float tr2 = CC(ido - 1u, 0u, k) + CC(ido - 1u, 2u, k), tr1 = CC(ido - 1u, 0u, k) - CC(ido - 1u, 2u, k);
                precise float c0 = tr2 + tr2, c1 = SQRT2 * (tr1 - ti1), c2 = ti2 + ti2, c3 = -SQRT2 * (tr1 + ti1);
                CH(ido - 1u, k, 0u, c0);
                CH(ido - 1u, k, 1u, c1);
                CH(ido - 1u, k, 2u, c2);
                CH(ido - 1u, k, 3u, c3);
            } else {
                precise float tr2 = CC(i - 1u, 0u, k) + CC(ic - 1u, 3u, k), tr1 = CC(i - 1u, 0u, k) - CC(ic - 1u, 3u, k);
                precise float ti1 = CC(i, 0u, k) + CC(ic, 3u, k), ti2 = CC(i, 0u, k) - CC(ic, 3u, k);
                precise float tr4 = CC(i, 2u, k) + CC(ic, 1u, k), ti3 = CC(i, 2u, k) - CC(ic, 1u, k);
                precise float tr3 = CC(i - 1u, 2u, k) + CC(ic - 1u, 1u, k), ti4 = CC(i - 1u, 2u, k) - CC(ic - 1u, 1u, k);
                precise float c0r = tr2 + tr3, cr3 = tr2 - tr3, c0i = ti2 + ti3, ci3 = ti2 - ti3;
                precise float cr4 = tr1 + tr4, cr2 = tr1 - tr4, ci2 = ti1 + ti4, ci4 = ti1 - ti4;
                CH(i - 1u, k, 0u, c0r);
                CH(i, k, 0u, c0i);
                mulpm_out(i, k, 1u, ci2, cr2, WA(0u, i));
                mulpm_out(i, k, 2u, ci3, cr3, WA(1u, i));
                mulpm_out(i, k, 3u, ci4, cr4, WA(2u, i));
            }
        } else {  // 5
            if (head) {
                precise float ti5 = CC(0u, 2u, k) + CC(0u, 2u, k), ti4 = CC(0u, 4u, k) + CC(0u, 4u, k);
                precise float tr2 = CC(ido - 1u, 1u, k) + CC(ido - 1u, 1u, k), tr3 = CC(ido - 1u, 3u, k) + CC(ido - 1u, 3u, k);
                precise float c0 = CC(0u, 0u, k) + tr2 + tr3;
                precise float cr2 = CC(0u, 0u, k) + TR11 * tr2 + TR12 * tr3;
                precise float cr3 = CC(0u, 0u, k) + TR12 * tr2 + TR11 * tr3;
                precise float ci5 = ti5 * TI11 + ti4 * TI12, ci4 = ti5 * TI12 - ti4 * TI11;
                precise float c4 = cr2 + ci5, c1 = cr2 - ci5, c3 = cr3 + ci4, c2 = cr3 - ci4;
                CH(0u, k, 0u, c0);
                CH(0u, k, 4u, c4);
                CH(0u, k, 1u, c1);
                CH(0u, k, 3u, c3);
                CH(0u, k, 2u, c2);
            } else {
                precise float tr2 = CC(i - 1u, 2u, k) + CC(ic - 1u, 1u, k), tr5 = CC(i - 1u, 2u, k) - CC(ic - 1u, 1u, k);
                precise float ti5 = CC(i, 2u, k) + CC(ic, 1u, k), ti2 = CC(i, 2u, k) - CC(ic, 1u, k);
                precise float tr3 = CC(i - 1u, 4u, k) + CC(ic - 1u, 3u, k), tr4 = CC(i - 1u, 4u, k) - CC(ic - 1u, 3u, k);
                precise float ti4 = CC(i, 4u, k) + CC(ic, 3u, k), ti3 = CC(i, 4u, k) - CC(ic, 3u, k);
                precise float c0r = CC(i - 1u, 0u, k) + tr2 + tr3, c0i = CC(i, 0u, k) + ti2 + ti3;
                precise float cr2 = CC(i - 1u, 0u, k) + TR11 * tr2 + TR12 * tr3;
                precise float ci2 = CC(i, 0u, k) + TR11 * ti2 + TR12 * ti3;
                precise float cr3 = CC(i - 1u, 0u, k) + TR12 * tr2 + TR11 * tr3;
                precise float ci3 = CC(i, 0u, k) + TR12 * ti2 + TR11 * ti3;
                precise float cr5 = tr5 * TI11 + tr4 * TI12, cr4 = tr5 * TI12 - tr4 * TI11;
                precise float ci5 = ti5 * TI11 + ti4 * TI12, ci4 = ti5 * TI12 - ti4 * TI11;
                precise float dr4 = cr3 + ci4, dr3 = cr3 - ci4, di3 = ci3 + cr4, di4 = ci3 - cr4;
                precise float dr5 = cr2 + ci5, dr2 = cr2 - ci5, di2 = ci2 + cr5, di5 = ci2 - cr5;
                CH(i - 1u, k, 0u, c0r);
                CH(i, k, 0u, c0i);
                mulpm_out(i, k, 1u, di2, dr2, WA(0u, i));
                mulpm_out(i, k, 2u, di3, dr3, WA(1u, i));
                mulpm_out(i, k, 3u, di4, dr4, WA(2u, i));
                mulpm_out(i, k, 4u, di5, dr5, WA(3u, i));
            }
        }
    }
}
#else
void main() {
    uint n = pc.n;
    R sgn = (pc.flags & INVERSE) != 0u ? R(1.0) : R(-1.0);
    VKML_FOR_EACH(e, pc.total) {
        uint ok = e / pc.inner;
        uint i = e - ok * pc.inner;
        uint o = ok / pc.m;
        uint k = ok - o * pc.m;
        uint xbase = o * pc.nin * pc.inner + i;
        if ((pc.flags & HERMITIAN) != 0u) {  // IRFFT: y[t], t = k
            uint t = k;
            R acc = pc.nin > 0u ? R(float(x[xbase * 2u])) : R(0.0);
            uint last = min((n - 1u) / 2u, pc.nin == 0u ? 0u : pc.nin - 1u);  // pairs k, n - k
            uint idx = 0u;
            for (uint q = 1u; q <= last; q++) {
                idx += t;
                if (idx >= n) idx -= n;
                R2 w = tw[idx];
                uint at = (xbase + q * pc.inner) * 2u;
                acc += R(2.0) * (R(float(x[at])) * w.x - R(float(x[at + 1u])) * w.y);
            }
            if ((n & 1u) == 0u && n / 2u < pc.nin) {
                R v = R(float(x[(xbase + (n / 2u) * pc.inner) * 2u]));
                acc += (t & 1u) != 0u ? -v : v;
            }
            y[e] = SX(float(acc * R(pc.fct)));
        } else {
            uint len = min(pc.nin, n);
            R re = R(0.0), im = R(0.0);
            uint idx = 0u;
            for (uint t = 0u; t < len; t++) {
                R2 w = tw[idx];
                R c = w.x, d = sgn * w.y;
                uint at = (xbase + t * pc.inner) * pc.cin;
                R a = R(float(x[at]));
                R b = pc.cin == 2u ? R(float(x[at + 1u])) : R(0.0);
                re += a * c - b * d;
                im += a * d + b * c;
                idx += k;
                if (idx >= n) idx -= n;
            }
            if ((pc.flags & SCALE) != 0u) {
                re *= R(pc.fct);
                im *= R(pc.fct);
            }
            y[2u * e] = SX(float(re));
            y[2u * e + 1u] = SX(float(im));
        }
    }
}
#endif
