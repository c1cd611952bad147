"""Detection and spatial-transformer ops: NonMaxSuppression, GridSample, AffineGrid."""
from __future__ import annotations

import itertools

import numpy as np

from ..ir.graph import TensorDesc
from ._precision import is_floating as is_float, work_dtype
from .registry import Op, register

# ----------------------------------------------------------------------------- NonMaxSuppression


def _corners(boxes: np.ndarray, center_point_box: int) -> tuple[np.ndarray, ...]:
    """(y_min, x_min, y_max, x_max) of [..., 4] boxes in either ONNX layout."""
    if center_point_box:
        xc, yc, w, h = np.moveaxis(boxes, -1, 0)
        return yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2
    y1, x1, y2, x2 = np.moveaxis(boxes, -1, 0)
    return np.minimum(y1, y2), np.minimum(x1, x2), np.maximum(y1, y2), np.maximum(x1, x2)


def iou_matrix(boxes: np.ndarray, center_point_box: int) -> np.ndarray:
    """Pairwise IoU of [B, 4] boxes; 0 where boxes don't overlap or have no area."""
    y0, x0, y1, x1 = _corners(boxes, center_point_box)
    iy = np.minimum(y1[:, None], y1[None]) - np.maximum(y0[:, None], y0[None])
    ix = np.minimum(x1[:, None], x1[None]) - np.maximum(x0[:, None], x0[None])
    inter = np.where((iy > 0) & (ix > 0), iy * ix, 0)
    area = (y1 - y0) * (x1 - x0)
    union = area[:, None] + area[None] - inter
    ok = (inter > 0) & (area[:, None] > 0) & (area[None] > 0) & (union > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(ok, inter / np.where(ok, union, 1), 0).astype(boxes.dtype)


def _greedy(order: np.ndarray, suppress: np.ndarray, limit: int) -> list[int]:
    """Walk candidates best first, keeping each one not suppressed by an earlier keep."""
    keep: list[int] = []
    dead = np.zeros(suppress.shape[0], bool)
    for i in order:
        if len(keep) >= limit:
            break
        if dead[i]:
            continue
        keep.append(int(i))
        dead |= suppress[i]
    return keep


def _opt_scalar(x: np.ndarray | None, default):
    if x is None or np.asarray(x).size == 0:
        return default
    return np.asarray(x).reshape(-1)[0]


class _NMS(Op):
    op_type = "NonMaxSuppression"
    attrs = {"center_point_box": 0}

    def check(self):
        if self.center_point_box not in (0, 1):
            raise self.fail(f"center_point_box must be 0 or 1, got {self.center_point_box}")

    def infer(self, inputs, consts):
        return [TensorDesc(np.dtype(np.int64), (None, 3))]

    def run(self, boxes, scores, max_output_boxes_per_class=None, iou_threshold=None, score_threshold=None):
        if boxes.ndim != 3 or boxes.shape[2] != 4:
            raise ValueError(f"boxes must have shape [batches, boxes, 4], got {boxes.shape}")
        if scores.ndim != 3 or scores.shape[0] != boxes.shape[0] or scores.shape[2] != boxes.shape[1]:
            raise ValueError(f"scores shape {scores.shape} does not match boxes shape {boxes.shape}")
        limit = max(int(_opt_scalar(max_output_boxes_per_class, 0)), 0)
        iou_thr = np.asarray(_opt_scalar(iou_threshold, 0.0), boxes.dtype)
        score_thr = _opt_scalar(score_threshold, None)
        rows: list[tuple[int, int, int]] = []
        if limit == 0:
            return (np.zeros((0, 3), np.int64),)
        for b in range(boxes.shape[0]):
            suppress = iou_matrix(boxes[b], self.center_point_box) > iou_thr
            for c in range(scores.shape[1]):
                s = scores[b, c]
                order = np.argsort(-s.astype(np.float64), kind="stable")  # ties: lower index first
                if score_thr is not None:
                    order = order[s[order] > score_thr]
                rows.extend((b, c, i) for i in _greedy(order, suppress, limit))
        return (np.array(rows, np.int64).reshape(-1, 3),)


class NonMaxSuppressionPadded(_NMS):
    """What compile/ragged.py makes of a NonMaxSuppression whose row count it can bound: the
    same rows in the same order, then zero rows up to `capacity` (batches x classes x
    min(max_output_boxes_per_class, boxes)), and how many rows are real (int64 [1]). A static
    shape lets a GPU run it and what reads it (vkml/kernels/nms.py); a Trim (ops/ragged.py)
    cuts the rows where an exact shape is needed. Not registered: only the rewrite makes it."""

    op_type, domain, since = "NonMaxSuppressionPadded", "ai.vkml", 1
    attrs = {"center_point_box": 0, "capacity": 0}

    def infer(self, inputs, consts):
        return [TensorDesc(np.dtype(np.int64), (int(self.capacity), 3)), TensorDesc(np.dtype(np.int64), (1,))]

    def run(self, *inputs):
        rows = super().run(*inputs)[0]
        if len(rows) > self.capacity:
            raise ValueError(f"NonMaxSuppression kept {len(rows)} boxes, more than its bound {self.capacity}")
        out = np.zeros((int(self.capacity), 3), np.int64)
        out[:len(rows)] = rows
        return out, np.array([len(rows)], np.int64)


def nms_capacity(boxes: TensorDesc, scores: TensorDesc, max_out: np.ndarray | None) -> int | None:
    """How many rows NonMaxSuppression can return for these input types and this
    max_output_boxes_per_class (None: not known before the run)."""
    if max_out is None or not boxes.static or not scores.static or len(scores.shape) != 3 or len(boxes.shape) != 3:
        return None
    b, c, n = scores.shape
    return b * c * min(max(int(_opt_scalar(max_out, 0)), 0), n)


@register
class NonMaxSuppression10(_NMS):
    since = 10


@register
class NonMaxSuppression11(_NMS):
    since = 11


# ----------------------------------------------------------------------------- GridSample


def _reflect(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Fold coordinates back into [lo, hi] by repeated mirroring at the borders."""
    span = hi - lo
    if span <= 0:
        return np.full_like(x, lo)
    below, above = x < lo, x > hi
    d = np.where(below, lo - x, np.where(above, x - hi, 0))
    n = np.trunc(d / span)
    r = d - n * span
    even = n % 2 == 0
    from_lo = np.where(even, lo + r, hi - r)
    from_hi = np.where(even, hi - r, lo + r)
    return np.where(below, from_lo, np.where(above, from_hi, x))


def _cubic_weights(t: np.ndarray) -> list[np.ndarray]:
    """Keys cubic convolution (a = -0.75) weights of taps at offsets -1, 0, 1, 2 from floor."""
    a = -0.75

    def near(s):  # |s| <= 1
        return ((a + 2) * s - (a + 3)) * s * s + 1

    def far(s):  # 1 < |s| < 2
        return ((a * s - 5 * a) * s + 8 * a) * s - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


class _GridSample(Op):
    op_type = "GridSample"
    attrs = {"align_corners": 0, "mode": "linear", "padding_mode": "zeros"}
    modes = ("linear", "nearest", "cubic")
    aliases: dict[str, str] = {}
    max_spatial: int | None = None

    def check(self):
        if self.mode not in self.modes:
            raise self.fail(f"mode must be one of {self.modes}, got {self.mode!r}")
        if self.padding_mode not in ("zeros", "border", "reflection"):
            raise self.fail(f"padding_mode must be zeros, border or reflection, got {self.padding_mode!r}")
        self.kind = self.aliases.get(self.mode, self.mode)

    def infer(self, inputs, consts):
        x, g = inputs[0], inputs[1]
        if x.shape is None or g.shape is None:
            return [TensorDesc(x.dtype, None)]
        return [TensorDesc(x.dtype, (x.shape[0], x.shape[1]) + tuple(g.shape[1:-1]))]

    def run(self, x, grid):
        r = x.ndim - 2
        if r < 1 or grid.ndim != r + 2 or grid.shape[-1] != r or grid.shape[0] != x.shape[0]:
            raise ValueError(f"grid shape {grid.shape} does not fit input shape {x.shape} "
                             f"(want [N, out..., {max(r, 1)}])")
        if self.max_spatial is not None and r != self.max_spatial:
            raise ValueError(f"GridSample-{self.since} supports only 4-D input, got rank {x.ndim}")
        n, c = x.shape[:2]
        dims = x.shape[2:]
        out_shape = grid.shape[1:-1]
        ctype = work_dtype(grid.dtype)
        # grid lists coordinates innermost dimension first: reverse to tensor order.
        coords = [grid[..., r - 1 - k].astype(ctype).reshape(n, -1) for k in range(r)]
        coords = [self._denormalize(p, d, ctype) for p, d in zip(coords, dims)]
        if self.kind == "nearest":
            coords = [np.rint(p) for p in coords]
        coords = [self._pad_coord(p, d) for p, d in zip(coords, dims)]
        data = x.reshape(n, c, -1)
        wtype = np.float64 if not is_float(x.dtype) else work_dtype(x.dtype)
        if self.kind == "nearest":
            taps_per_dim = [[(p.astype(np.int64), None)] for p in coords]
        elif self.kind == "linear":
            taps_per_dim = []
            for p in coords:
                f = np.floor(p)
                t = (p - f).astype(wtype)
                i = f.astype(np.int64)
                taps_per_dim.append([(i, 1 - t), (i + 1, t)])
        else:
            taps_per_dim = []
            for p in coords:
                f = np.floor(p)
                t = (p - f).astype(wtype)
                i = f.astype(np.int64)
                taps_per_dim.append([(i + k - 1, w) for k, w in enumerate(_cubic_weights(t))])
        if not is_float(x.dtype) and x.dtype.kind not in "cO" and self.kind != "nearest":
            data = data.astype(wtype)
        out = None
        for combo in itertools.product(*taps_per_dim):
            flat = np.zeros(coords[0].shape, np.int64)
            valid = np.ones(coords[0].shape, bool)
            weight = None
            for (i, w), d in zip(combo, dims):
                i, ok = self._pad_index(i, d)
                valid &= ok
                flat = flat * d + i
                if w is not None:
                    weight = w if weight is None else weight * w
            vals = np.take_along_axis(data, flat[:, None, :], axis=2)
            if self.padding_mode == "zeros":
                vals = np.where(valid[:, None, :], vals, np.zeros((), vals.dtype))
            term = vals if weight is None else vals * weight[:, None, :]
            out = term if out is None else out + term
        return (out.reshape((n, c) + out_shape).astype(x.dtype),)

    def _denormalize(self, p, d, ctype):
        if self.align_corners:
            return ((p + 1) / 2 * (d - 1)).astype(ctype)
        return (((p + 1) * d - 1) / 2).astype(ctype)

    def _bounds(self, d):
        return (0.0, d - 1.0) if self.align_corners else (-0.5, d - 0.5)

    def _pad_coord(self, p, d):
        """Coordinates outside the image move in (border, reflection) before interpolating."""
        lo, hi = self._bounds(d)
        if self.padding_mode == "border":
            return np.where((p < lo) | (p > hi), np.clip(p, 0, d - 1), p)
        if self.padding_mode == "reflection":
            return _reflect(p, lo, hi)
        return p

    def _pad_index(self, i, d):
        """(index safe to gather, whether it lies inside the image)."""
        ok = (i >= 0) & (i < d)
        if self.padding_mode == "reflection":
            lo, hi = self._bounds(d)
            i = np.trunc(_reflect(i.astype(np.float64), lo, hi)).astype(np.int64)
        return np.clip(i, 0, d - 1), ok


@register
class GridSample16(_GridSample):
    since = 16
    attrs = {"align_corners": 0, "mode": "bilinear", "padding_mode": "zeros"}
    modes = ("bilinear", "nearest", "bicubic")
    aliases = {"bilinear": "linear", "bicubic": "cubic"}
    max_spatial = 2


@register
class GridSample20(_GridSample):
    since = 20


@register
class GridSample22(_GridSample):
    since = 22


# ----------------------------------------------------------------------------- AffineGrid


def _base_coords(d: int, align_corners: bool, dtype) -> np.ndarray:
    if align_corners:  # a single position sits at -1 (linspace's convention)
        return np.linspace(-1, 1, d, dtype=np.float64).astype(dtype)
    return ((2 * np.arange(d, dtype=np.float64) + 1) / d - 1).astype(dtype)


@register
class AffineGrid(Op):
    op_type, since = "AffineGrid", 20
    attrs = {"align_corners": 0}

    def infer(self, inputs, consts):
        theta = inputs[0]
        size = consts[1]
        if size is None:
            r = inputs[1].shape[0] - 2 if inputs[1].shape and isinstance(inputs[1].shape[0], int) else None
            shape = None if r is None else (None,) * (r + 1) + (r,)
            return [TensorDesc(theta.dtype, shape)]
        size = [int(v) for v in np.asarray(size).reshape(-1)]
        return [TensorDesc(theta.dtype, (size[0],) + tuple(size[2:]) + (len(size) - 2,))]

    def run(self, theta, size):
        size = [int(v) for v in np.asarray(size).reshape(-1)]
        r = len(size) - 2
        if r not in (2, 3):
            raise ValueError(f"size must be (N, C, H, W) or (N, C, D, H, W), got {size}")
        if theta.shape != (size[0], r, r + 1):
            raise ValueError(f"theta must have shape ({size[0]}, {r}, {r + 1}) for size {size}, got {theta.shape}")
        wt = work_dtype(theta.dtype)
        spatial = size[2:]
        # Homogeneous base positions, coordinates listed innermost dimension first (x, y[, z], 1).
        axes = [_base_coords(d, bool(self.align_corners), wt) for d in spatial]
        mesh = np.meshgrid(*axes, indexing="ij")
        base = np.stack([m for m in reversed(mesh)] + [np.ones(spatial, wt)], axis=-1)
        grid = np.einsum("...k,njk->n...j", base, theta.astype(wt))
        return (grid.astype(theta.dtype),)
