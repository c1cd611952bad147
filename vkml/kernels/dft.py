"""GPU kernel for DFT (opsets 17 and 20; shaders/dft.comp), float32 and float16 inputs.

Every form of the CPU operator (vkml/ops/signal.py dft(), which calls NumPy's FFT): forward and
inverse, onesided (the first n/2 + 1 outputs of a forward transform; IRFFT when inverse), real or
complex input (last dim 1 or 2), any axis but the last, dft_length truncating or zero-padding the
signal. dft_length and axis (DFT-20's input) must be known on the host (Kernel.host_inputs:
initializers, or fed values the session plans for).

How, and how close to the CPU operator (NumPy 2.x's pocketfft):
  * transform lengths n whose factors are pocketfft's hard-coded radices (2, 3, 4, 5, 7, 8, 11;
    pocketfft runs them as complex FFTPACK, cfftp) take pocketfft's own algorithm: one dispatch
    per radix pass over every row, the same operations in the same order, each rounded (no fused
    multiply-adds), with pocketfft's twiddles (pocketfft_twiddles(): glibc cos/sin in double,
    combined as pocketfft combines them). NumPy runs a forward transform in float64 (its fft
    ufunc's normalisation factor is a Python int) and an inverse in float32 (the factor 1/n is a
    float32), so the forward passes run in double where the device has shaderFloat64 and the
    inverse ones in float: both then equal the CPU operator bit for bit.
  * IRFFT (NumPy: pocketfft's real FFTPACK backward transform, rfftp, in float32) of lengths whose
    factors are 2, 3, 4, 5 takes rfftp's own passes (radb2..5 on the half spectrum in FFTPACK
    order, as numpy's irfft packs it): bit for bit. Other lengths with cfftp's radices run the
    inverse complex passes on the Hermitian extension of the half spectrum and keep the real
    parts: not bit-exact; within O(log2 n) u S.
  * other lengths (a prime factor over 11: pocketfft's generic pass or Bluestein), up to
    DIRECT_MAX_N: the direct O(n^2) sum, one invocation per output element (in double for a
    forward transform on a device with shaderFloat64): within (n + 2) u S.
  * a forward transform on a device without shaderFloat64 runs the passes (or the direct sum) in
    float32: within O(log2 n) u S (passes) or (n + 2) u S (direct) of the exact DFT, where NumPy's
    float64 result is the correctly rounded one.
Here u = 2^-24 and S = the sum over the row's n terms of |re| + |im| (IRFFT: 2 x the sum over the
half spectrum), bounds against the exact DFT of the input (the direct sum: recursive summation of
products of relative error <= 2u, twiddles rounded once; times 1/n for an inverse);
tests/ops/test_gpu_dft.py checks each path against the CPU operator, bit-exact where stated and
within these bounds otherwise. float16: the same float32 (or float64) values rounded once more, as
the CPU rounds them. "Bit for bit" assumes the GPU's float add and multiply are IEEE (Vulkan
requires them correctly rounded; the shaders mark every result `precise`, so nothing is fused),
and NumPy 2.x (pocketfft C++ with its two-table twiddles; NumPy 1.x computed every complex64 FFT
in float64: the GPU's results then stay within the bounds above) on the same C library as this
process (the host evaluates pocketfft's glibc cos/sin with Python's math module).

On the CPU instead (check() says why): other dtypes, dft_length or axis not known on the host,
lengths that take the direct sum beyond DIRECT_MAX_N or DIRECT_MAX_WORK multiply-adds (the CPU's
FFT is O(n log n)), and what the CPU operator rejects (it reports the error: the last axis, a
length below 1, a onesided inverse of real input).
"""
from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np

from .common import PushBlock, require_dtypes
from .reduce import check_size, float_or, group_count, threads_wg
from .registry import Kernel, TensorSpec, Unsupported, register

# rows, inner, nin, cin, n, m, flags, total, ip, l1, ido, fct
DFT_PUSH = PushBlock("11If", "dft")
INVERSE, FIRST, LAST, HERMITIAN, REAL_OUT, SCALE = (1 << i for i in range(6))
RADICES = (2, 3, 4, 5, 7, 8, 11)  # pocketfft cfftp's hard-coded passes (shaders/dft.comp PASS)
REAL_RADICES = (2, 3, 4, 5)  # pocketfft rfftp's hard-coded backward passes (radb*: shaders/dft.comp RPASS)
DIRECT_MAX_N = 8192
DIRECT_MAX_WORK = 1 << 34  # multiply-adds of a direct sum (outputs x terms)
USE_PASSES = True  # tests turn it off to run the direct sum on pocketfft's lengths
USE_DOUBLE = True  # tests turn it off to run forward transforms in float32

# pocketfft's radix constants (cos, sin)(2 pi q / p), q = 1 .. p // 2 of p = 3, 5, 7, 11, then
# sqrt(1/2): long double literals, rounded by the compiler to the compute type (_round_literal)
_CONSTANTS = [
    ("-0.5", "0.8660254037844386467637231707529362"),
    ("0.3090169943749474241022934171828191", "0.9510565162951535721164393333793821"),
    ("-0.8090169943749474241022934171828191", "0.5877852522924731291687059546390728"),
    ("0.6234898018587335305250048840042398", "0.7818314824680298087084445266740578"),
    ("-0.2225209339563144042889025644967948", "0.9749279121818236070181316829939312"),
    ("-0.9009688679024191262361023195074451", "0.433883739117558120475768332848359"),
    ("0.8412535328311811688618116489193677", "0.5406408174555975821076359543186917"),
    ("0.4154150130018864255292741492296232", "0.9096319953545183714117153830790285"),
    ("-0.1423148382732851404437926686163697", "0.9898214418809327323760920377767188"),
    ("-0.6548607339452850640569250724662936", "0.7557495743542582837740358439723444"),
    ("-0.9594929736144973898903680570663277", "0.2817325568414296977114179153466169"),
    ("0.707106781186547524400844362104849", "0"),
    ("1.414213562373095048801688724209698", "0"),  # rfftp's radb4
]
_PI = "3.141592653589793238462643383279502884197"


def _round_bits(value: Fraction, bits: int) -> Fraction:
    """value rounded to a `bits`-bit significand, ties to even."""
    if value == 0:
        return value
    sign = -1 if value < 0 else 1
    a = abs(value)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    if Fraction(2) ** (e + 1) <= a:
        e += 1
    scale = Fraction(2) ** (bits - 1 - e)
    q = a * scale
    whole = q.numerator // q.denominator
    rest = q - whole
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and whole % 2):
        whole += 1
    return sign * Fraction(whole) / scale


def _round_literal(text: str, dtype) -> float:
    """A C++ long double literal (x86-64: 64-bit significand) converted to `dtype`."""
    return float(_round_bits(_round_bits(Fraction(text), 64), 24 if dtype == np.float32 else 53))


def _pocketfft_split(n: int, powers: tuple[int, ...]) -> list[int]:
    """pocketfft's factorisation of n: the `powers` of two first (8s then 4s, or 4s), a lone 2
    moved to the front, then the odd primes in increasing order."""
    f: list[int] = []
    rest = n
    for p in powers:
        while rest % p == 0:
            f.append(p)
            rest //= p
    if rest % 2 == 0:
        rest //= 2
        f.append(2)
        f[0], f[-1] = f[-1], f[0]
    d = 3
    while d * d <= rest:
        while rest % d == 0:
            f.append(d)
            rest //= d
        d += 2
    if rest > 1:
        f.append(rest)
    return f


def pocketfft_factors(n: int) -> list[int]:
    """pocketfft cfftp's factorisation of n (8s, 4s, a 2 moved to the front, odd primes)."""
    return _pocketfft_split(n, (8, 4))


def _cost_guess(n: int) -> float:
    ni, result = n, 0.0
    while n & 1 == 0:
        result += 2
        n >>= 1
    x = 3
    while x * x <= n:
        while n % x == 0:
            result += x if x <= 5 else 1.1 * x
            n //= x
        x += 2
    if n > 1:
        result += n if n <= 5 else 1.1 * n
    return result * ni


def _good_size_cmplx(n: int) -> int:
    if n <= 12:
        return n
    best = 2 * n
    f11 = 1
    while f11 < best:
        f117 = f11
        while f117 < best:
            f1175 = f117
            while f1175 < best:
                x = f1175
                while x < n:
                    x *= 2
                while True:
                    if x < n:
                        x *= 3
                    elif x > n:
                        best = min(best, x)
                        if x & 1:
                            break
                        x >>= 1
                    else:
                        return n
                f1175 *= 5
            f117 *= 7
        f11 *= 11
    return best


def pocketfft_passes(n: int) -> list[int] | None:
    """The radices pocketfft runs a complex transform of length n with, when they are all
    hard-coded ones and it does not choose Bluestein; else None (the direct sum)."""
    if n == 1:
        return [1]
    f = pocketfft_factors(n)
    if any(p not in RADICES for p in f):
        return None
    lpf = 0 if n < 50 else max(p if p in (3, 5, 7, 11) else 2 for p in f)
    if lpf * lpf > n and 2 * _cost_guess(_good_size_cmplx(2 * n - 1)) * 1.5 < _cost_guess(n):
        return None  # Bluestein
    return f


def pocketfft_real_passes(n: int) -> list[int] | None:
    """The radices of pocketfft's real backward transform (rfftp: 4s, a 2 moved to the front, odd
    primes; NumPy's irfft) of length n when they are all hard-coded (radb2, 3, 4, 5), else None.
    (pocketfft_r takes Bluestein only for lengths with a prime factor p, p^2 > n: never these.)"""
    if n == 1:
        return [1]
    f = _pocketfft_split(n, (4,))
    return f if all(p in REAL_RADICES for p in f) else None


@functools.lru_cache(maxsize=16)
def pocketfft_twiddles(n: int, double: bool) -> bytes:
    """(cos, sin)(2 pi j / n), j < n, as pocketfft's sincos_2pibyn computes them (angles from
    0.25L pi / n, glibc cos/sin in double from two tables combined in double, rounded once to the
    compute type), then the radix constants: the shader's twiddle buffer."""
    dt = np.float64 if double else np.float32
    ang = float(_round_bits(_round_bits(Fraction(1, 4) * _round_bits(Fraction(_PI), 64) / n, 64), 53))

    def calc(x: int) -> tuple[float, float]:
        x <<= 3
        cos, sin = math.cos, math.sin
        if x < 4 * n:
            if x < 2 * n:
                if x < n:
                    return cos(float(x) * ang), sin(float(x) * ang)
                return sin(float(2 * n - x) * ang), cos(float(2 * n - x) * ang)
            x -= 2 * n
            if x < n:
                return -sin(float(x) * ang), cos(float(x) * ang)
            return -cos(float(2 * n - x) * ang), sin(float(2 * n - x) * ang)
        x = 8 * n - x
        if x < 2 * n:
            if x < n:
                return cos(float(x) * ang), -sin(float(x) * ang)
            return sin(float(2 * n - x) * ang), -cos(float(2 * n - x) * ang)
        x -= 2 * n
        if x < n:
            return -sin(float(x) * ang), -cos(float(x) * ang)
        return -cos(float(2 * n - x) * ang), -sin(float(2 * n - x) * ang)

    nval = (n + 2) // 2
    shift = 1
    while (1 << shift) * (1 << shift) < nval:
        shift += 1
    mask = (1 << shift) - 1
    v1 = np.array([(1.0, 0.0)] + [calc(i) for i in range(1, mask + 1)])
    v2 = np.array([(1.0, 0.0)] + [calc(i * (mask + 1)) for i in range(1, (nval + mask) // (mask + 1))])
    idx = np.arange(n)
    upper = 2 * idx > n
    j = np.where(upper, n - idx, idx)
    x1, x2 = v1[j & mask], v2[j >> shift]
    re = (x1[:, 0] * x2[:, 0] - x1[:, 1] * x2[:, 1]).astype(dt)
    im = (x1[:, 0] * x2[:, 1] + x1[:, 1] * x2[:, 0]).astype(dt)
    im = np.where(upper, -im, im)
    consts = [(_round_literal(c, dt), _round_literal(s, dt)) for c, s in _CONSTANTS]
    table = np.concatenate([np.stack([re, im], axis=-1), np.array(consts, dt)])
    return np.ascontiguousarray(table).tobytes()


def _scalar(op_type: str, inputs, consts, pos: int, what: str) -> int | None:
    """The host value of scalar input `pos` (None when absent); Unsupported when unknown or
    not what the CPU operator takes."""
    t = inputs[pos] if len(inputs) > pos else None
    if t is None:
        return None
    value = (consts or {}).get(pos)
    if value is None:
        value = getattr(t, "value", None)
    if value is None:
        raise Unsupported(f"{op_type}: {what} is not known on the host")
    value = np.asarray(value)
    if value.size != 1 or value.dtype.kind not in "iu":
        raise Unsupported(f"{op_type}: {what} of shape {value.shape} and dtype {value.dtype} "
                          "(the CPU operator reports the error)")
    return int(value.reshape(-1)[0])


def geometry(attrs, inputs, consts=None) -> dict:
    """The node's transform: axis, signal length nin, transform length n, output length m,
    inverse, irfft, outer, inner, cin and the output shape; Unsupported where the CPU raises."""
    shape = tuple(inputs[0].shape)
    r = len(shape)
    if r < 2 or shape[-1] not in (1, 2):
        raise Unsupported(f"DFT of shape {shape}: the last dim must be 1 or 2 (the CPU operator reports the error)")
    length = _scalar("DFT", inputs, consts, 1, "dft_length")
    if int(attrs.get("_opset", 20)) >= 20:
        axis = _scalar("DFT", inputs, consts, 2, "axis")
        axis = -2 if axis is None else axis
    else:
        axis = int(attrs.get("axis", 1))
    if not (-r <= axis <= -2 or 0 <= axis <= r - 2):
        raise Unsupported(f"DFT axis {axis} for rank {r} (the CPU operator reports the error)")
    axis %= r
    inverse = bool(int(attrs.get("inverse", 0) or 0))
    onesided = bool(int(attrs.get("onesided", 0) or 0))
    if length is not None and length < 1:
        raise Unsupported(f"DFT dft_length {length} (the CPU operator reports the error)")
    nin = shape[axis]
    irfft = onesided and inverse
    if irfft:
        if shape[-1] != 2:
            raise Unsupported("DFT: a onesided inverse of real input (the CPU operator reports the error)")
        n = length if length is not None else 2 * (nin - 1)
        if n < 1:
            raise Unsupported(f"DFT: IRFFT length {n} (the CPU operator reports the error)")
        m = n
    else:
        n = length if length is not None else nin
        m = n // 2 + 1 if onesided else n
    out = list(shape)
    out[axis], out[-1] = m, 1 if irfft else 2
    return dict(axis=axis, nin=nin, n=n, m=m, inverse=inverse, irfft=irfft, cin=shape[-1],
                outer=math.prod(shape[:axis]), inner=math.prod(shape[axis + 1:-1]), out=tuple(out))


def plan(device, g: dict) -> tuple[str, list[int] | None, bool]:
    """(shape: "rpass", "pass" or "direct"; the passes' radices; compute in double)."""
    double = not g["inverse"] and USE_DOUBLE and "fp64" in device.features
    if not USE_PASSES:
        return "direct", None, double
    if g["irfft"]:
        passes = pocketfft_real_passes(g["n"])
        if passes is not None:
            return "rpass", passes, False
    passes = pocketfft_passes(g["n"])
    return ("direct" if passes is None else "pass"), passes, double


@register
class DFTKernel(Kernel):
    op_types = ("DFT",)
    host_inputs = {"DFT": (1, 2)}

    def check(self, device, op_type, attrs, inputs):
        if not inputs or inputs[0] is None:
            raise Unsupported("DFT needs its input")
        float_or(inputs[0].dtype, ("f32", "f16"), op_type)
        require_dtypes(device, inputs[0].dtype)
        g = geometry(attrs, inputs)
        shape, passes, double = plan(device, g)
        rows, n = g["outer"] * g["inner"], g["n"]
        if shape == "direct":
            work = rows * g["m"] * n
            if n > DIRECT_MAX_N or work > DIRECT_MAX_WORK:
                raise Unsupported(f"DFT of length {n} ({work} multiply-adds): lengths with a prime factor over 11 "
                                  f"take the GPU's direct O(n^2) sum, which takes n <= {DIRECT_MAX_N} and "
                                  f"<= {DIRECT_MAX_WORK} multiply-adds")
        scratch = TensorSpec((rows, n, 2), np.dtype(np.float64 if double else np.float32))
        check_size(device, inputs[0], TensorSpec(g["out"], inputs[0].dtype), scratch)

    def infer(self, op_type, attrs, inputs):
        return [TensorSpec(geometry(attrs, inputs)["out"], np.dtype(inputs[0].dtype))]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        x, y = inputs[0], outputs[0]
        specs = [None if t is None else TensorSpec.of(t) for t in inputs]
        g = geometry(attrs, specs, consts)
        rows, n, m = g["outer"] * g["inner"], g["n"], g["m"]
        if rows == 0 or m == 0 or y.nbytes == 0:
            return
        device = rec.device
        dt = float_or(x.dtype, ("f32", "f16"), op_type)
        shape, passes, double = plan(device, g)
        suffix = f"{dt}_d" if double else dt
        tw = rec.constants(pocketfft_twiddles(n, double))
        xv = x.view if x.nbytes else rec.constants(bytes(16))
        flags = (INVERSE if g["inverse"] else 0) | (HERMITIAN | REAL_OUT if g["irfft"] else 0)
        fct = float(np.reciprocal(np.float32(n))) if g["inverse"] else 1.0
        if g["inverse"]:
            flags |= SCALE
        wg = threads_wg(device)
        if shape == "direct":
            total = rows * m
            push = DFT_PUSH.pack(rows, g["inner"], g["nin"], g["cin"], n, m, flags, total, 0, 0, 0, fct)
            p = device.pipeline(f"dft_direct_{suffix}", "rrw", DFT_PUSH.size, (wg,))
            rec.dispatch(p, [xv, tw, y.view], push, group_count(device, -(-total // wg)))
            return
        real = shape == "rpass"  # real words (rfftp's half-complex order), else complex pairs
        word = 4 if real else 16 if double else 8
        # scratch: the passes ping-pong between two buffers (the first reads x, the last writes y;
        # their unused bindings take a stand-in)
        bufs = [device.alloc(max(16, rows * n * word)) for _ in range(min(2, len(passes) - 1))]
        stand_in = device.alloc(16)
        p = device.pipeline(f"dft_rpass_{dt}" if real else f"dft_pass_{suffix}", "rrrww", DFT_PUSH.size, (wg,))
        l1 = 1
        for step, ip in enumerate(passes):
            ido = n // (l1 * ip)
            first, last = step == 0, step == len(passes) - 1
            f = flags | (FIRST if first else 0) | (LAST if last else 0)
            src = tw if first else bufs[(step - 1) % 2]
            dst = stand_in if last else bufs[step % 2]
            total = rows * l1 * (ido // 2 + 1 if real else ido)  # rfftp: blocks of i per (row, k)
            push = DFT_PUSH.pack(rows, g["inner"], g["nin"], g["cin"], n, m, f, total, ip, l1, ido, fct)
            rec.dispatch(p, [xv, tw, src, dst, y.view], push, group_count(device, -(-total // wg)))
            l1 *= ip
