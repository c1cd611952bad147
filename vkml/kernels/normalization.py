"""GPU kernels for BatchNormalization (inference), LayerNormalization (with its optional Mean
and InvStdDev outputs), RMSNormalization, InstanceNormalization and GroupNormalization (18:
scale and bias per group; 21: per channel, the normalized value rounded to the input type
first).

Statistics are float32 (stash_type 1, the default; other stash types are Unsupported), two
passes per row as the NumPy operators (mean, then the mean squared deviation). Shaders:
shaders/norm.comp (rows), shaders/norm_batch.comp (elementwise).

The caller passes what the kernel cannot see as attrs: "_num_outputs" (LayerNormalization's
optional outputs; BatchNormalization with more than one output is training and Unsupported)
and "_opset" (GroupNormalization, where the scale's shape does not tell 18 from 21).
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from .common import PushBlock, dtype_name, require_dtypes
from .reduce import check_size, float_or, group_count, normalize_axis, threads_wg, wg_mode_name, wg_size
from .registry import Kernel, TensorSpec, Unsupported, register

NORM_PUSH = PushBlock("8IfI", "norm")        # 40 bytes
BATCH_PUSH = PushBlock("4If", "batchnorm")   # 20 bytes
F_DIV, F_NARROW, F_BIAS, F_MEAN, F_INV, F_RMS = 1, 2, 4, 8, 16, 32


def _num_outputs(attrs: Mapping[str, Any]) -> int:
    return int(attrs.get("_num_outputs", 1) or 1)


def _eps(attrs: Mapping[str, Any]) -> float:
    v = attrs.get("epsilon", 1e-5)
    return 1e-5 if v is None else float(v)


def _param_types(op_type: str, x: TensorSpec, params: Sequence[TensorSpec | None]) -> str:
    """Shader suffix of (x, params): the params share one dtype, X's or float32."""
    tx = float_or(x.dtype, ("f32", "f16"), op_type)
    dts = {np.dtype(p.dtype) for p in params if p is not None}
    if len(dts) > 1:
        raise Unsupported(f"{op_type}: parameters of mixed dtypes {sorted(str(d) for d in dts)}")
    ty = dtype_name(dts.pop()) if dts else tx
    if ty not in (tx, "f32"):
        raise Unsupported(f"{op_type}: {ty} parameters with a {tx} input")
    return tx if ty == tx else f"{tx}_{ty}"


def _stash(op_type: str, attrs: Mapping[str, Any]) -> None:
    st = attrs.get("stash_type", 1)
    if st is not None and int(st) != 1:
        raise Unsupported(f"{op_type} with stash_type={st} (the GPU keeps float32 statistics)")


class _Rows:
    """What one norm.comp dispatch needs, derived from a node."""

    def __init__(self, rows: int, k: int, pmode: int, ps: int, pb: int, flags: int,
                 groups: int = 1, cpg: int = 1, spatial: int = 1):
        self.rows, self.k, self.pmode, self.ps, self.pb = rows, k, pmode, ps, pb
        self.flags, self.groups, self.cpg, self.spatial = flags, groups, cpg, spatial


def _layer_rows(attrs, inputs) -> _Rows:
    x, scale = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    rank = len(x.shape)
    if rank == 0:
        raise Unsupported("LayerNormalization of a scalar")
    a = normalize_axis(attrs.get("axis", -1) if attrs.get("axis") is not None else -1, rank, "LayerNormalization")
    tail = tuple(x.shape[a:])
    sizes = []
    for p, what in ((scale, "Scale"), (bias, "B")):
        if p is None:
            sizes.append(1)
            continue
        dims = list(p.shape)
        if len(dims) > rank:
            raise Unsupported(f"LayerNormalization: {what} of rank {len(dims)} for an input of rank {rank}")
        while dims and dims[0] == 1:
            dims.pop(0)
        if len(dims) > len(tail) or tuple(dims) != tail[len(tail) - len(dims):]:
            raise Unsupported(f"LayerNormalization: {what} of shape {tuple(p.shape)} does not broadcast over "
                              f"the normalized dims {tail} alone")
        sizes.append(math.prod(dims))
    flags = (F_NARROW if np.dtype(x.dtype) == np.float16 else 0) | (F_BIAS if bias is not None else 0)
    n = _num_outputs(attrs)
    flags |= (F_MEAN if n > 1 else 0) | (F_INV if n > 2 else 0)
    return _Rows(math.prod(x.shape[:a]), math.prod(tail), 0, sizes[0], sizes[1], flags)


def _rms_rows(attrs, inputs) -> _Rows:
    """RMSNormalization: LayerNorm's geometry without the mean; x / sqrt(mean(x^2) + eps)."""
    r = _layer_rows(attrs, list(inputs[:2]))
    r.flags = (r.flags & F_NARROW) | F_RMS | F_DIV
    return r


def _instance_rows(attrs, inputs) -> _Rows:
    x, scale, bias = inputs
    if len(x.shape) < 3:
        raise Unsupported(f"InstanceNormalization needs rank >= 3, not {len(x.shape)}")
    c = x.shape[1]
    if tuple(scale.shape) != (c,) or tuple(bias.shape) != (c,):
        raise Unsupported(f"InstanceNormalization: scale {tuple(scale.shape)} and B {tuple(bias.shape)} must be ({c},)")
    return _Rows(x.shape[0] * c, math.prod(x.shape[2:]), 1, c, c, F_DIV | F_BIAS)


def _group_rows(attrs, inputs) -> _Rows:
    x, scale, bias = inputs
    if len(x.shape) < 2:
        raise Unsupported(f"GroupNormalization needs rank >= 2, not {len(x.shape)}")
    g = attrs.get("num_groups")
    if g is None or int(g) < 1:
        raise Unsupported("GroupNormalization needs a positive num_groups")
    g = int(g)
    n, c = x.shape[0], x.shape[1]
    if c % g:
        raise Unsupported(f"GroupNormalization: {c} channels do not divide into {g} groups")
    opset = attrs.get("_opset")
    if opset is not None:
        per_channel = int(opset) >= 21
    elif "stash_type" in attrs:
        per_channel = True
    elif g != c:
        per_channel = tuple(scale.shape) == (c,)
    else:  # (C,) either way: 18 and 21 differ only in 21's rounding of float16 values
        if np.dtype(x.dtype) != np.float32:
            raise Unsupported("GroupNormalization with num_groups == channels on float16: pass attrs['_opset']")
        per_channel = True
    want = (c,) if per_channel else (g,)
    if tuple(scale.shape) != want or tuple(bias.shape) != want:
        raise Unsupported(f"GroupNormalization: scale {tuple(scale.shape)} and bias {tuple(bias.shape)} "
                          f"must be {want}")
    spatial = math.prod(x.shape[2:])
    rows, k = n * g, (c // g) * spatial
    if per_channel:
        narrow = F_NARROW if np.dtype(x.dtype) == np.float16 else 0
        return _Rows(rows, k, 2, c, c, F_DIV | F_BIAS | narrow, groups=g, cpg=c // g, spatial=max(spatial, 1))
    return _Rows(rows, k, 1, g, g, F_DIV | F_BIAS)


ROWS = {"LayerNormalization": _layer_rows, "RMSNormalization": _rms_rows,
        "InstanceNormalization": _instance_rows, "GroupNormalization": _group_rows}


def _view(rec, t, nbytes: int = 4):
    """A tensor's view, or a small stand-in where it is absent or empty (never touched)."""
    if t is None or t.nbytes == 0:
        return rec.device.alloc(max(nbytes, 4))
    return t.view


@register
class RowNormKernel(Kernel):
    op_types = tuple(ROWS)

    def check(self, device, op_type, attrs, inputs):
        want = {"LayerNormalization": (2, 3), "RMSNormalization": (2,)}.get(op_type, (3,))
        needed = inputs[:2] if op_type == "LayerNormalization" else inputs
        if len(inputs) not in want or any(t is None for t in needed):
            raise Unsupported(f"{op_type} takes {' or '.join(map(str, want))} inputs")
        _param_types(op_type, inputs[0], inputs[1:])
        require_dtypes(device, *[t.dtype for t in inputs if t is not None])
        if op_type != "InstanceNormalization":
            _stash(op_type, attrs)
        if _num_outputs(attrs) > (3 if op_type == "LayerNormalization" else 1):
            raise Unsupported(f"{op_type} with {_num_outputs(attrs)} outputs")
        ROWS[op_type](attrs, inputs)
        check_size(device, *[t for t in inputs if t is not None])

    def infer(self, op_type, attrs, inputs):
        x = inputs[0]
        outs = [TensorSpec(tuple(x.shape), x.dtype)]
        if op_type == "LayerNormalization" and _num_outputs(attrs) > 1:
            rank = len(x.shape)
            a = normalize_axis(attrs.get("axis", -1) if attrs.get("axis") is not None else -1, rank, op_type)
            stat = TensorSpec(tuple(x.shape[:a]) + (1,) * (rank - a), np.dtype(np.float32))
            outs += [stat] * (_num_outputs(attrs) - 1)
        return outs

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        x = inputs[0]
        r = ROWS[op_type](attrs, [None if t is None else TensorSpec.of(t) for t in inputs])
        if r.rows == 0:
            return
        device = rec.device
        suffix = _param_types(op_type, TensorSpec.of(x), [TensorSpec.of(t) for t in inputs[1:] if t is not None])
        bias = inputs[2] if len(inputs) > 2 else None
        mean = outputs[1] if len(outputs) > 1 else None
        inv = outputs[2] if len(outputs) > 2 else None
        flags = r.flags & ~((F_MEAN if mean is None else 0) | (F_INV if inv is None else 0))
        push = NORM_PUSH.pack(r.rows, r.k, r.pmode, max(r.ps, 1), max(r.pb, 1), r.groups, r.cpg, r.spatial,
                              _eps(attrs), flags)
        if r.k >= 64:
            wg = wg_size(device, r.k, cap=256 if r.rows >= 1024 else 1024)
            name, groups = f"norm_{wg_mode_name(device)}_{suffix}", group_count(device, r.rows)
        else:
            wg = threads_wg(device)
            name, groups = f"norm_th_{suffix}", group_count(device, -(-r.rows // wg))
        p = device.pipeline(name, "rrrwww", NORM_PUSH.size, (wg,))
        rec.dispatch(p, [_view(rec, x), _view(rec, inputs[1]), _view(rec, bias), _view(rec, outputs[0]),
                         _view(rec, mean), _view(rec, inv)], push, groups)


@register
class BatchNormKernel(Kernel):
    """Inference mode only: training (training_mode=1, or extra outputs) stays on the CPU."""

    op_types = ("BatchNormalization",)

    def check(self, device, op_type, attrs, inputs):
        if len(inputs) != 5 or any(t is None for t in inputs):
            raise Unsupported("BatchNormalization takes five inputs")
        if int(attrs.get("training_mode", 0) or 0) or _num_outputs(attrs) > 1:
            raise Unsupported("BatchNormalization in training mode")
        x = inputs[0]
        _param_types(op_type, x, inputs[1:])
        require_dtypes(device, *[t.dtype for t in inputs])
        if len(x.shape) < 2:
            raise Unsupported(f"BatchNormalization needs rank >= 2, not {len(x.shape)}")
        for p in inputs[1:]:
            if tuple(p.shape) != (x.shape[1],) and tuple(p.shape) != tuple(x.shape[1:]):
                raise Unsupported(f"BatchNormalization: a parameter of shape {tuple(p.shape)} does not fit "
                                  f"an input of shape {tuple(x.shape)}")
        if len({tuple(p.shape) for p in inputs[1:]}) != 1:
            raise Unsupported("BatchNormalization: parameters of different shapes")
        check_size(device, *inputs)

    def infer(self, op_type, attrs, inputs):
        return [TensorSpec(tuple(inputs[0].shape), inputs[0].dtype)]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        x, scale, bias, mean, var = inputs
        n = math.prod(x.shape)
        if n == 0:
            return
        device = rec.device
        c = x.shape[1]
        inner = math.prod(x.shape[2:])
        per_element = int(len(scale.shape) > 1)
        suffix = _param_types(op_type, TensorSpec.of(x), [TensorSpec.of(t) for t in inputs[1:]])
        wg = threads_wg(device)
        p = device.pipeline(f"batchnorm_{suffix}", "rrrrrw", BATCH_PUSH.size, (wg,))
        rec.dispatch(p, [x.view, scale.view, bias.view, mean.view, var.view, outputs[0].view],
                     BATCH_PUSH.pack(n, c, inner, per_element, _eps(attrs)), p.groups_for(n))
