"""Derive the polynomial coefficients in shaders/include/vkml_math.glsl.

GLSL has no erf, and drivers' tanh may be a low-precision approximation (NVIDIA's
tanh.approx has ~2^-11 relative error), so vkml evaluates both from polynomials fitted here:
weighted (relative-error) least squares on Chebyshev nodes, in float64, then checked by
evaluating Horner's rule in float32 as the shader does. Run it to reproduce the numbers:

    python tools/fit_math_coeffs.py
"""
from __future__ import annotations

import math

import numpy as np

F32 = np.float32
ULP1 = float(np.finfo(np.float32).eps)


def _nodes(a: float, b: float, n: int = 2000) -> np.ndarray:
    k = np.arange(n)
    return (a + b) / 2 + (b - a) / 2 * np.cos((2 * k + 1) * np.pi / (2 * n))


def _fit(fun, var, a: float, b: float, degree: int) -> np.ndarray:
    x = _nodes(a, b)
    y = fun(x)
    v = np.vander(var(x), degree + 1, increasing=True)
    w = 1.0 / np.abs(y)
    coeffs, *_ = np.linalg.lstsq(v * w[:, None], y * w, rcond=None)
    return coeffs


def _horner32(coeffs: np.ndarray, u: np.ndarray) -> np.ndarray:
    r = np.full(u.shape, F32(coeffs[-1]), F32)
    for c in coeffs[-2::-1]:
        r = (r * u + F32(c)).astype(F32)
    return r


def main() -> None:
    erf = np.vectorize(math.erf)
    erfc = np.vectorize(math.erfc)

    # tanh(x) = x + x^3 P(x^2) for |x| < 0.625
    p = _fit(lambda x: (np.tanh(x) - x) / x**3, lambda x: x * x, 1e-4, 0.625, 5)
    x = np.linspace(0, 0.625, 100001).astype(F32)
    u = (x * x).astype(F32)
    got = (x + x * u * _horner32(p, u)).astype(F32)
    ref = np.tanh(x.astype(np.float64))
    print("TANH_P", [f"{c:.10e}" for c in p],
          "max rel err (ulp):", np.max(np.abs(got - ref) / np.maximum(ref, 1e-30)) / ULP1)

    # erf(x) = x Q(x^2) for |x| < 1
    q = _fit(lambda x: erf(x) / x, lambda x: x * x, 1e-4, 1.0, 7)
    x = np.linspace(0, 1, 100001).astype(F32)
    u = (x * x).astype(F32)
    got = (x * _horner32(q, u)).astype(F32)
    ref = erf(x.astype(np.float64))
    print("ERF_Q", [f"{c:.10e}" for c in q],
          "max rel err (ulp):", np.max(np.abs(got - ref) / np.maximum(ref, 1e-30)) / ULP1)

    # erfc(x) = exp(-x^2) G(1/x) for 1 <= x <= 10
    g = _fit(lambda x: erfc(x) * np.exp(x * x), lambda x: 1 / x, 1.0, 10.0, 10)
    x = np.linspace(1, 10, 100001).astype(F32)
    t = (F32(1) / x).astype(F32)
    x2 = x.astype(np.float64) ** 2  # the shader splits x*x into hi + lo with fma
    got = (np.exp(-x2) * _horner32(g, t)).astype(F32)
    ref = erfc(x.astype(np.float64))
    normal = ref > np.finfo(np.float32).tiny  # below that float32 itself loses digits
    print("ERFC_G", [f"{c:.10e}" for c in g],
          "max rel err (ulp, normal range):", np.max(np.abs(got - ref)[normal] / ref[normal]) / ULP1,
          "erf abs err:", np.max(np.abs((F32(1) - got) - (1 - ref))))


if __name__ == "__main__":
    main()
