"""A vectorised error function (NumPy has none and SciPy is not a dependency).

Computed in float64:
- |x| < split: erf(x) = 2/sqrt(pi) * exp(-x^2) * sum_n (2x^2)^n * x / (2n+1)!!, a series of
  positive terms (no cancellation).
- |x| >= split: erf(x) = 1 - erfc(x), erfc by its continued fraction
  erfc(x) = exp(-x^2)/sqrt(pi) / (x + (1/2)/(x + 1/(x + (3/2)/(x + ...)))), evaluated backwards
  at a fixed depth.
Term counts are chosen per output precision: ~1e-15 relative error for float64 results,
~1e-9 (far below float32's 6e-8 spacing) for narrower ones at about half the cost.
"""
from __future__ import annotations

import numpy as np

# (split, series terms, continued-fraction depth)
_DOUBLE = (2.0, 30, 40)
_SINGLE = (2.3, 24, 18)
_TWO_OVER_SQRT_PI = 2.0 / np.sqrt(np.pi)


def erf(x: np.ndarray) -> np.ndarray:
    """erf of a float array; float64 inputs get full double precision. Returns float64."""
    split, terms, depth = _DOUBLE if np.asarray(x).dtype == np.float64 else _SINGLE
    x = np.asarray(x, dtype=np.float64)
    shape = x.shape
    x = x.reshape(-1)  # 1-D: NumPy returns scalars, not arrays, for 0-d operands
    a = np.abs(x)
    with np.errstate(all="ignore"):
        lo = np.minimum(a, split)
        z = 2.0 * lo * lo
        term = lo.copy()
        total = lo.copy()
        for n in range(1, terms):
            term *= z
            term *= 1.0 / (2 * n + 1)
            total += term
        near = np.exp(-lo * lo)
        near *= total
        near *= _TWO_OVER_SQRT_PI
        hi = np.maximum(a, split)
        frac = hi.copy()
        for n in range(depth, 0, -1):
            np.divide(0.5 * n, frac, out=frac)
            frac += hi
        far = np.exp(-hi * hi)
        far /= np.sqrt(np.pi) * frac
        np.subtract(1.0, far, out=far)
        out = np.where(a < split, near, far)
    return np.copysign(out, x).reshape(shape)
