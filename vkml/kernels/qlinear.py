"""GPU kernels for the quantized-inference ops MatMulInteger, QLinearMatMul, ConvInteger,
QLinearConv and DynamicQuantizeLinear (shaders/qlinear.comp), bit-exact with the CPU operators
(vkml/ops/matmul.py, vkml/ops/conv.py, vkml/ops/quantize.py).

MatMul* and Conv* are simple direct kernels: one invocation per output element sums its K
products (x - x_zero_point) * (w - w_zero_point) in int32, with no tiling or shared memory.
The CPU sums in float64 (exact) and casts to int32; a sum beyond int32 is undefined there
(NumPy's float64 -> int32 cast of an out-of-range value; x86 gives -2^31) and would wrap here,
so K is refused (the node runs on the CPU) where K * max|x - zx| * max|w - zw| could pass
2^31 - 1 (with zero points: 255 * 255, so K <= 33025; int8 without: 128 * 128).

QLinear*: y = saturate(round_half_even((acc [+ bias]) * s) + y_zero_point) with
s = a_scale * b_scale / y_scale rounded to float32 at each step (the quotient correctly
rounded), the product and rounding in float64 as the CPU does; NaN gives 0 as the CPU's
clip-and-cast on x86. Needs shaderFloat64 (else the node runs on the CPU). Scales float32, or
float16/bfloat16 (QLinearMatMul-21; all three of one dtype), widened exactly.

Covered layouts: MatMul: NumPy batch broadcasting (rank <= 4 batch after collapsing), A and B of
rank >= 1; zero points and scales per tensor, A's per row (M values) and B's per column (N
values) where the operand has rank >= 2 (a per-row a_scale also needs B of rank >= 2); y_scale, y_zero_point per tensor. Conv: 1-3 spatial
dims, groups, strides, dilations, pads / auto_pad (vkml.kernels.conv.geometry); x_zero_point,
x_scale, y_scale, y_zero_point per tensor; w_zero_point, w_scale per tensor or per output
channel; bias int32 (M,).
Refused: other dtypes than int8/uint8 for the operands and the output zero point (the CPU
takes int16/int32/4-bit y_zero_points too), zero points of another dtype than their operand,
other parameter shapes, float64 scales, K beyond the bound above, no shaderFloat64 (QLinear*).

DynamicQuantizeLinear (float32 x): a one-workgroup pass computes min/max (NaN handling as the
CPU's Python min/max), scale, zero point, then one invocation per element quantizes; quotients
correctly rounded float32 (also through float64: needs shaderFloat64). Where the CPU raises
(infinite scale) the shader sets the fault word and the run raises the CPU's error.
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from vkml.errors import ModelError

from .common import (F64, FAULT_ATTR, PushBlock, broadcast_shape, broadcast_strides, collapse, fault_binding,
                     require_dtypes)
from .conv import geometry
from .elem import require_bindable, require_elements, specs_of
from .reduce import threads_wg
from .registry import Kernel, TensorSpec, Unsupported, register

MATMUL_PUSH = PushBlock("18I", "qlinear_matmul")  # total, flags, m, n, k, brank, bshape[4], sab[4], sbb[4]
CONV_PUSH = PushBlock("24I", "qlinear_conv")      # total, flags, n, c, m, group, idim/odim/kdim/str/pad/dil[3]
DQ_PUSH = PushBlock("3I", "qlinear_dq")           # total, flags, fault site

I8, U8, I32 = np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int32)
BYTES = (I8, U8)
SCALES = {np.dtype(np.float32): (4, 0), np.dtype(np.float16): (2, 1), np.dtype(ml_dtypes.bfloat16): (2, 2)}
INT32_MAX = 2**31 - 1
MAX_BATCH_RANK = 4

# flags (shaders/qlinear.comp)
A_SIGNED, B_SIGNED, A_ZP, A_ZP_ROW, B_ZP, B_ZP_COL, SA_ROW, SB_COL, Y_SIGNED, BIAS = (
    1, 2, 4, 8, 16, 32, 64, 128, 256, 2048)


def _get(inputs, i):
    return inputs[i] if len(inputs) > i else None


def _size(s) -> int:
    return math.prod(s.shape)


def _scalar(s, what) -> None:
    if _size(s) != 1 or len(s.shape) > 1:
        raise Unsupported(f"{what} of shape {tuple(s.shape)} (the GPU takes a scalar)")


def _vector(s, n: int, allowed: bool, what: str) -> bool:
    """True for a per-row/column/channel vector of n values, False for one value."""
    if _size(s) == 1 and len(s.shape) <= 1:
        return False
    if allowed and len(s.shape) == 1 and s.shape[0] == n:
        return True
    raise Unsupported(f"{what} of shape {tuple(s.shape)} (the GPU takes a scalar or {n} values)")


def _byte_operand(s, what) -> int:
    if s is None or np.dtype(s.dtype) not in BYTES:
        raise Unsupported(f"{what} must be int8 or uint8 (the CPU operator reports other dtypes)")
    return 1 if np.dtype(s.dtype) == I8 else 0


def _zero_point(zp, x, what):
    if zp is None:
        return None
    if np.dtype(zp.dtype) != np.dtype(x.dtype):
        raise Unsupported(f"{what} of {zp.dtype} for an input of {x.dtype}")
    return zp


def _magnitude(x, zp) -> int:
    if zp is not None:
        return 255
    return 128 if np.dtype(x.dtype) == I8 else 255


def _check_k(k: int, a, za, b, zb) -> None:
    if k * _magnitude(a, za) * _magnitude(b, zb) > INT32_MAX:
        raise Unsupported(f"K = {k}: the int32 sum could overflow (the CPU sums in float64)")


class Plan:
    """A node's problem and push constants; Unsupported where the GPU does not go."""

    def __init__(self, op_type, attrs, inputs):
        self.qlinear = op_type.startswith("QLinear")
        if self.qlinear:
            if len(inputs) < 8 or any(inputs[i] is None for i in range(8)):
                raise Unsupported(f"{op_type} takes 8 inputs")
            a, sa, za, b, sb, zb, sy, zy = inputs[:8]
            bias = _get(inputs, 8)
        else:
            a, b = inputs[0], inputs[1]
            za, zb, sa, sb, sy, zy, bias = _get(inputs, 2), _get(inputs, 3), None, None, None, None, None
        flags = _byte_operand(a, "A") * A_SIGNED | _byte_operand(b, "B") * B_SIGNED
        za, zb = _zero_point(za, a, "A's zero point"), _zero_point(zb, b, "B's zero point")
        self.conv = "Conv" in op_type
        if self.conv:
            try:
                geo = geometry("Conv", attrs, a.shape, b.shape)
            except ValueError as e:
                raise Unsupported(f"{op_type}: {e} (the CPU operator reports it)") from None
            rows, cols = 1, geo.m
            k = geo.cg * geo.taps
            self.shape = geo.out_shape
            row_ok, col_ok = False, True
            self.geo = geo
        else:
            if len(a.shape) == 0 or len(b.shape) == 0:
                raise Unsupported(f"{op_type} of a scalar (the CPU operator reports it)")
            a2 = (1,) + tuple(a.shape) if len(a.shape) == 1 else tuple(a.shape)
            b2 = tuple(b.shape) + (1,) if len(b.shape) == 1 else tuple(b.shape)
            m, k = a2[-2:]
            k2, n = b2[-2:]
            if k != k2:
                raise Unsupported(f"{op_type}: inner dimensions differ (the CPU operator reports it)")
            try:
                bshape = broadcast_shape(a2[:-2], b2[:-2])
            except ValueError:
                raise Unsupported(f"{op_type}: batch dims do not broadcast (the CPU operator reports it)") from None
            self.shape = tuple(bshape) + ((m,) if len(a.shape) > 1 else ()) + ((n,) if len(b.shape) > 1 else ())
            sab = [s * m * k for s in broadcast_strides(a2[:-2], bshape)]
            sbb = [s * k * n for s in broadcast_strides(b2[:-2], bshape)]
            bshape, (sab, sbb) = collapse(bshape, [sab, sbb])
            if len(bshape) > MAX_BATCH_RANK:
                raise Unsupported(f"{op_type}: {len(bshape)} batch dims after collapsing (the GPU takes 4)")
            rows, cols = m, n
            row_ok, col_ok = len(a.shape) >= 2, len(b.shape) >= 2
        _check_k(k, a, za, b, zb)
        if za is not None:
            flags |= A_ZP | A_ZP_ROW * _vector(za, rows, row_ok, "A's zero point")
        if zb is not None:
            flags |= B_ZP | B_ZP_COL * _vector(zb, cols, col_ok, "B's zero point")
        self.out = I32
        self.sb = 4
        if self.qlinear:
            got = {SCALES.get(np.dtype(s.dtype)) for s in (sa, sb, sy)}
            if len(got) != 1 or None in got:
                raise Unsupported(f"{op_type}: scales of {sa.dtype}, {sb.dtype}, {sy.dtype} (the GPU takes "
                                  f"float32, float16 or bfloat16, all of one dtype)")
            ((self.sb, kind),) = got
            flags |= kind << 9
            # per-row a_scale against a rank-1 B: the CPU broadcasts (M, 1) against the (M,) result
            # into (M, M) (or fails with batch dims); that stays with the CPU
            sa_ok = row_ok and (self.conv or len(b.shape) >= 2)
            flags |= SA_ROW * _vector(sa, rows, sa_ok, "A's scale") | SB_COL * _vector(sb, cols, col_ok, "B's scale")
            _scalar(sy, "y_scale")
            _scalar(zy, "y_zero_point")
            if np.dtype(zy.dtype) not in BYTES:
                raise Unsupported(f"{op_type} to {zy.dtype} (the GPU takes int8 and uint8)")
            flags |= Y_SIGNED * (np.dtype(zy.dtype) == I8)
            self.out = np.dtype(zy.dtype)
            if bias is not None:
                if np.dtype(bias.dtype) != I32 or tuple(bias.shape) != (cols,):
                    raise Unsupported(f"bias {bias.dtype} {tuple(bias.shape)} (the GPU takes int32 ({cols},))")
                flags |= BIAS
        self.total = math.prod(self.shape)
        if self.conv:
            g = self.geo
            self.push = CONV_PUSH.pack(self.total, flags, g.n, g.c, g.m, g.group, *g.in_sp, *g.out_sp, *g.kernel,
                                       *g.strides, *g.pads, *g.dil)
        else:
            pad = [0] * (MAX_BATCH_RANK - len(bshape))
            self.push = MATMUL_PUSH.pack(self.total, flags, rows, cols, k, len(bshape), *bshape, *pad, *sab, *pad,
                                         *sbb, *pad)
        self.variant = f"qlinear_{'conv' if self.conv else 'matmul'}_" + (f"req_s{self.sb}" if self.qlinear else "i32")
        self.dtypes = [s.dtype for s in inputs if s is not None] + [self.out]


@register
class QLinearKernel(Kernel):
    op_types = ("MatMulInteger", "QLinearMatMul", "ConvInteger", "QLinearConv")

    def check(self, device, op_type, attrs, inputs):
        plan = Plan(op_type, attrs, inputs)
        if plan.qlinear:  # whatever the tensors' dtypes, the shader requantizes in float64
            require_dtypes(device, F64, allowed=(F64,), what=f"{op_type} requantizes in float64")
        require_elements(device, *plan.dtypes)
        require_bindable(device, *inputs, TensorSpec(plan.shape, plan.out))

    def infer(self, op_type, attrs, inputs):
        plan = Plan(op_type, attrs, inputs)
        return [TensorSpec(plan.shape, plan.out)]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        plan = Plan(op_type, attrs, specs_of(inputs, consts))
        if plan.total == 0:
            return
        dev = rec.device
        if plan.qlinear:
            a, sa, za, b, sb, zb, sy, zy = inputs[:8]
            bias = _get(inputs, 8)
            bias = b if bias is None else bias  # unread when absent
            views = [a, b, za, zb, sa, sb, sy, zy, bias]
        else:
            a, b = inputs[0], inputs[1]
            za, zb = _get(inputs, 2), _get(inputs, 3)
            views = [a, b, a if za is None else za, b if zb is None else zb]  # absent zero points are not read
        p = dev.pipeline(plan.variant, "r" * len(views) + "w", (CONV_PUSH if plan.conv else MATMUL_PUSH).size, (threads_wg(dev),))
        rec.dispatch(p, [t.view for t in views] + [outputs[0].view], plan.push, p.groups_for(plan.total))


WHAT = "DynamicQuantizeLinear input"


def _dq_error(node, bad: int, aux: int) -> Exception:
    """What vkml/ops/quantize.py DynamicQuantizeLinear.run raises (Op.fail) for a non-finite scale."""
    return ModelError(f"node {node.name!r} ({node.op_type}): input holds infinities or NaNs: no finite scale exists")


@register
class DynamicQuantizeKernel(Kernel):
    op_types = ("DynamicQuantizeLinear",)
    faults = True

    def _shape(self, inputs):
        if not inputs or inputs[0] is None or np.dtype(inputs[0].dtype) != np.float32:
            raise Unsupported("DynamicQuantizeLinear takes float32 x (the CPU operator reports others)")
        return tuple(inputs[0].shape)

    def check(self, device, op_type, attrs, inputs):
        shape = self._shape(inputs)
        require_dtypes(device, F64, allowed=(F64,), what="DynamicQuantizeLinear divides through float64")
        require_elements(device, np.float32, U8)
        require_bindable(device, inputs[0], TensorSpec(shape, U8))

    def infer(self, op_type, attrs, inputs):
        shape = self._shape(inputs)
        return [TensorSpec(shape, U8), TensorSpec((), np.dtype(np.float32)), TensorSpec((), U8)]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        x = inputs[0]
        n = math.prod(self._shape(specs_of(inputs, consts)))
        fault = attrs.get(FAULT_ATTR)
        if fault is None:
            fview, site = fault_binding(rec, attrs, WHAT, 0)
        else:
            fview, site = fault.view, fault.site(WHAT, 0, _dq_error)
        dev = rec.device
        par = dev.alloc(16)
        xv = x.view if n else par
        p1 = dev.pipeline("qlinear_dq_minmax", "rwwwx", DQ_PUSH.size)
        rec.dispatch(p1, [xv, outputs[1].view, outputs[2].view, par, fview], DQ_PUSH.pack(n, 0, site), 1)
        if n == 0:
            return
        p2 = dev.pipeline("qlinear_dq", "rrw", DQ_PUSH.size, (threads_wg(dev),))
        rec.dispatch(p2, [x.view, par, outputs[0].view], DQ_PUSH.pack(n, 0, 0), p2.groups_for(n))
