"""The filter transform of Winograd convolutions F(T x T, 3x3), T = 2 or 4, shared by the GPU
kernel (vkml/kernels/winograd.py) and the CPU device's native programs (vkml/runtime/cpuprog.py):
U = G g G^T of each 3x3 filter g, computed once per weight array. B^T and A^T, the input and
output transforms, are written out where they run (shaders/winograd.comp,
vkml/include/cpu_winograd.h). The matrices are Lavin and Gray's (arXiv:1509.09308).
"""
from __future__ import annotations

import numpy as np

G = {2: np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]]),
     4: np.array([[1 / 4, 0.0, 0.0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
                  [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0.0, 0.0, 1.0]])}


def transformed_weights(w: np.ndarray, t: int = 2) -> np.ndarray:
    """U ((t + 2)^2, M, C) float32 for weights W (M, C, 3, 3): U[(t + 2) a + b, m, c] =
    (G W[m, c] G^T)[a, b], computed in float64 and rounded once."""
    m, c = w.shape[:2]
    g = G[t]
    u = np.einsum("ai,mcij,bj->abmc", g, np.asarray(w, np.float64), g)
    return np.ascontiguousarray(u.reshape((t + 2) ** 2, m, c), dtype=np.float32)


def tile_max(a: np.ndarray, t: int) -> np.ndarray:
    """Each element of `a` (N, C, H, W) replaced by the largest of its t x t output tile (tiles
    from the top left): the scale of a Winograd output's rounding error, which comes from all
    the transformed values its tile shares (the tests bound it by 1e-5 of this taken over
    conv(|X|, |W|))."""
    n, m, hh, ww = a.shape
    th, tw = -(-hh // t), -(-ww // t)
    p = np.zeros((n, m, th * t, tw * t), a.dtype)
    p[:, :, :hh, :ww] = a
    mx = p.reshape(n, m, th, t, tw, t).max(axis=(3, 5))
    return np.repeat(np.repeat(mx, t, axis=2), t, axis=3)[:, :, :hh, :ww]
