"""GPU kernels for elementwise ops: unary (incl. Clip, Cast, IsNaN, IsInf, BitwiseNot), binary
with broadcasting (incl. variadic Max/Min/Sum, comparisons, logic, bitwise ops, BitShift, Pow,
PRelu) and Where.

Integers: int8, int16, uint8, uint16 are stored narrow and computed in 32 bits, so they need
the device's 8/16-bit storage features (require_dtypes says which one a device lacks, and the
node stays on the CPU); uint64 needs shaderInt64, as int64 does.

Mod: every integer dtype (x % 0 and MIN % -1 give 0, as the CPU operator's NumPy does, with
fmod 0 or 1) and float32, float16, float64 (fmod=1: C's fmod; fmod=0: NumPy's remainder, the
divisor's sign). Float Mod works on the operands' bits with integer operations only (exact
long division, then one correctly rounded subtraction for fmod=0), so it is bit-equal to the
CPU on every device; float64 thus needs shaderInt64, not shaderFloat64. Zero divisors give the
CPU's NaN, NaN operands come back quieted.

Shaders: shaders/unary.comp, binary.comp, where.comp; variants are named
<op>_<dtype> (pow_<x>_<y>, cast_<from>_<to>), see tools/build_shaders.py.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from .common import (
    BF16,
    F64,
    PushBlock,
    broadcast_shape,
    broadcast_strides,
    collapse,
    dtype_name,
    element_count,
    pad8,
    require_dtypes,
)
from . import cast_ext
from .registry import Kernel, TensorSpec, Unsupported, register

F = ("f32", "f16")
I = ("i32", "i64")           # also Pow's integer bases and PRelu's integers
SIGNED = I + ("i8", "i16")
INTS = SIGNED + ("u8", "u16", "u32", "u64")
FI = F + INTS

# Push blocks (mirrors of the shaders' `Push` blocks).
UNARY_PUSH_F = PushBlock("IIff", "unary float")     # n, pad, alpha, beta
UNARY_PUSH_I32 = PushBlock("IIii", "unary i32")     # also i8, i16 (computed as int)
UNARY_PUSH_U32 = PushBlock("IIII", "unary u32")     # also u8, u16 (computed as uint)
UNARY_PUSH_I64 = PushBlock("IIqq", "unary i64")     # int64 members are 8-byte aligned
UNARY_PUSH_U64 = PushBlock("IIQQ", "unary u64")
_INT_PUSH = {"i64": UNARY_PUSH_I64, "u64": UNARY_PUSH_U64, "u8": UNARY_PUSH_U32, "u16": UNARY_PUSH_U32,
             "u32": UNARY_PUSH_U32}
BINARY_PUSH = PushBlock("II8I8I8I", "binary")       # n, rank, shape[8], sa[8], sb[8]: 104 B
WHERE_PUSH = PushBlock("I", "where")                # n; shape/strides in a storage buffer
WHERE_META = "<I8I8I8I8I"                            # rank, shape, s_cond, s_x, s_y


# float64 and bfloat16 (shaders' local type codes 12 and 13): float64 computes in double;
# bfloat16 is stored as its 16 bits, computed in float32 and rounded to nearest even (as
# ml_dtypes). The unary and binary kernels take them (require_dtypes' `allowed`: what each
# needs is common.DTYPE_FEATURES') for these ops only.
EXTRA = {F64: "f64", BF16: "bf16"}
UNARY_F64 = {"Abs", "Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Floor", "Ceil", "Round"}
BINARY_EXTRA = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Sum", "Mean", "Equal", "Less", "LessOrEqual",
                "Greater", "GreaterOrEqual"}


def _extra_name(dtype) -> str | None:
    """"f64" / "bf16" for those dtypes, else None."""
    try:
        return EXTRA.get(np.dtype(dtype))
    except TypeError:
        return None


def _groups(pipeline, n: int) -> int:
    return pipeline.groups_for(n)


def _spec_of(attrs: Mapping[str, Any], name: str, default):
    v = attrs.get(name, default)
    return default if v is None else v


# ---------------------------------------------------------------------------- unary
# op type -> (shader op, dtypes, params(attrs) -> (alpha, beta))
UNARY: dict[str, tuple[str, tuple[str, ...], Any]] = {
    "Abs": ("abs", FI, None),
    "Neg": ("neg", F + SIGNED, None),
    "Sign": ("sign", FI, None),
    "Relu": ("relu", F + SIGNED, None),
    "Exp": ("exp", F, None),
    "Log": ("log", F, None),
    "Sqrt": ("sqrt", F, None),
    "Reciprocal": ("reciprocal", F, None),
    "Sin": ("sin", F, None),
    "Cos": ("cos", F, None),
    "Tanh": ("tanh", F, None),
    "Sigmoid": ("sigmoid", F, None),
    "Floor": ("floor", F, None),
    "Ceil": ("ceil", F, None),
    "Round": ("round", F, None),
    "Erf": ("erf", F, None),
    "Softplus": ("softplus", F, None),
    "Softsign": ("softsign", F, None),
    "Mish": ("mish", F, None),
    "LeakyRelu": ("leaky_relu", F, lambda a: (_spec_of(a, "alpha", 0.01), 0.0)),
    "Elu": ("elu", F, lambda a: (_spec_of(a, "alpha", 1.0), 0.0)),
    "Selu": ("selu", F, lambda a: (_spec_of(a, "alpha", 1.67326319217681884765625),
                                   _spec_of(a, "gamma", 1.05070102214813232421875))),
    "HardSigmoid": ("hard_sigmoid", F, lambda a: (_spec_of(a, "alpha", 0.2), _spec_of(a, "beta", 0.5))),
    "HardSwish": ("hard_swish", F, lambda a: (1.0 / 6.0, 0.5)),
    "Gelu": ("gelu", F, None),
    "Not": ("not", ("bool",), None),
    "ThresholdedRelu": ("thresholded_relu", F, lambda a: (_spec_of(a, "alpha", 1.0), 0.0)),
    "Celu": ("celu", F, lambda a: (_spec_of(a, "alpha", 1.0), 0.0)),
    "Swish": ("swish", F, lambda a: (_spec_of(a, "alpha", 1.0), 0.0)),
    "Tan": ("tan", F, None),
    "Asin": ("asin", F, None),
    "Acos": ("acos", F, None),
    "Atan": ("atan", F, None),
    "Sinh": ("sinh", F, None),
    "Cosh": ("cosh", F, None),
    "Asinh": ("asinh", F, None),
    "Acosh": ("acosh", F, None),
    "Atanh": ("atanh", F, None),
    "BitwiseNot": ("bitnot", INTS, None),
    "IsNaN": ("isnan", F, None),
    "IsInf": ("isinf", F, lambda a: (_spec_of(a, "detect_negative", 1), _spec_of(a, "detect_positive", 1))),
}
BOOL_OUT = {"IsNaN", "IsInf"}  # unary ops whose output is bool


def _record_unary(rec, shader_op: str, dt: str, x, out, alpha=0, beta=0) -> None:
    n = element_count(out.shape)
    if n == 0:
        return
    # The shader's parameters are float except for integer ops (not casts).
    if shader_op.startswith("cast") or dt not in INTS:
        block = UNARY_PUSH_F
    else:
        block = _INT_PUSH.get(dt, UNARY_PUSH_I32)
    name = shader_op if shader_op.startswith("cast") else f"{shader_op}_{dt}"
    p = rec.device.pipeline(name, "rw", block.size)
    rec.dispatch(p, [x.view, out.view], block.pack(n, 0, alpha, beta), _groups(p, n))


@register
class UnaryKernel(Kernel):
    op_types = tuple(UNARY)

    def check(self, device, op_type, attrs, inputs):
        shader_op, dtypes, _ = UNARY[op_type]
        if len(inputs) != 1 or inputs[0] is None:
            raise Unsupported(f"{op_type} takes one input")
        ext = _extra_name(inputs[0].dtype)
        if ext is not None:
            ok = op_type in UNARY_F64 if ext == "f64" else "f32" in dtypes
            if not ok:
                raise Unsupported(f"{op_type} on the GPU does not take {inputs[0].dtype}")
            if op_type == "Gelu" and attrs.get("approximate", "none") not in ("none", "tanh", b"none", b"tanh"):
                raise Unsupported(f"Gelu approximate={attrs.get('approximate')!r}")
            if op_type == "Celu" and _spec_of(attrs, "alpha", 1.0) == 0:
                raise Unsupported("Celu with alpha 0 (the CPU operator reports the error)")
            require_dtypes(device, inputs[0].dtype, allowed=EXTRA)
            if op_type in BOOL_OUT:
                require_dtypes(device, np.bool_)
            element_count(inputs[0].shape)
            return
        dt = dtype_name(inputs[0].dtype)
        if dt not in dtypes:
            raise Unsupported(f"{op_type} on the GPU supports {', '.join(dtypes)}, not {inputs[0].dtype}")
        if op_type == "Gelu" and attrs.get("approximate", "none") not in ("none", "tanh", b"none", b"tanh"):
            raise Unsupported(f"Gelu approximate={attrs.get('approximate')!r}")
        if op_type == "Celu" and _spec_of(attrs, "alpha", 1.0) == 0:
            raise Unsupported("Celu with alpha 0 (the CPU operator reports the error)")
        require_dtypes(device, inputs[0].dtype)
        if op_type in BOOL_OUT:
            require_dtypes(device, np.bool_)
        element_count(inputs[0].shape)

    def infer(self, op_type, attrs, inputs):
        if op_type in BOOL_OUT:
            return [TensorSpec(inputs[0].shape, np.dtype(np.bool_))]
        return [inputs[0]]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        shader_op, _, params = UNARY[op_type]
        x, out = inputs[0], outputs[0]
        dt = _extra_name(x.dtype) or dtype_name(x.dtype)
        if op_type == "Gelu":
            approx = attrs.get("approximate", "none")
            approx = approx.decode() if isinstance(approx, bytes) else approx
            shader_op = "gelu_tanh" if approx == "tanh" else "gelu"
        alpha, beta = params(attrs) if params else (0, 0)
        if dt in INTS:
            _record_unary(rec, shader_op, dt, x, out, 0, 0)
        else:
            _record_unary(rec, shader_op, dt, x, out, float(alpha), float(beta))


# ---------------------------------------------------------------------------- Clip
def _clip_bounds(dtype: np.dtype) -> tuple:
    if dtype.kind == "f":
        return (-np.inf, np.inf)
    info = np.iinfo(dtype)
    return (int(info.min), int(info.max))


@register
class ClipKernel(Kernel):
    """Clip(x, min, max): one unary dispatch when the bounds are known at record time
    (attributes, initializers), else Max then Min against the bound tensors."""

    op_types = ("Clip",)

    def check(self, device, op_type, attrs, inputs):
        if not inputs or inputs[0] is None or len(inputs) > 3:
            raise Unsupported("Clip takes 1 to 3 inputs")
        dt = dtype_name(inputs[0].dtype)
        if dt not in FI:
            raise Unsupported(f"Clip on the GPU supports {', '.join(FI)}, not {inputs[0].dtype}")
        for b in inputs[1:]:
            if b is not None and (b.dtype != inputs[0].dtype or int(np.prod(b.shape)) != 1):
                raise Unsupported("Clip bounds must be scalars of the input's dtype")
        require_dtypes(device, inputs[0].dtype)
        element_count(inputs[0].shape)

    def infer(self, op_type, attrs, inputs):
        return [inputs[0]]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        x, out = inputs[0], outputs[0]
        dt = dtype_name(x.dtype)
        consts = consts or {}
        lo, hi = _clip_bounds(x.dtype)
        if "min" in attrs:
            lo = attrs["min"]
        if "max" in attrs:
            hi = attrs["max"]
        dynamic = []
        for pos in (1, 2):
            t = inputs[pos] if len(inputs) > pos else None
            if t is None:
                continue
            if pos in consts:
                v = np.asarray(consts[pos]).reshape(-1)[0].item()
                if pos == 1:
                    lo = v
                else:
                    hi = v
            else:
                dynamic.append((pos, t))
        if not dynamic:
            if dt in F:
                _record_unary(rec, "clip", dt, x, out, float(lo), float(hi))
            else:
                _record_unary(rec, "clip", dt, x, out, int(lo), int(hi))
            return
        # Bounds only on the device: out = min(max(x, lo), hi) by binary dispatches; a
        # bound known on the host becomes a one-element constant buffer.
        src = x
        for pos, op in ((1, "max"), (2, "min")):
            t = inputs[pos] if len(inputs) > pos else None
            if t is None:
                continue
            if pos in consts:
                t = _const_tensor(rec, np.asarray(consts[pos], x.dtype).reshape(()))
            _record_binary(rec, op, dt, dt, src, t, out)
            src = out
        if src is x:  # nothing applied
            rec.copy(x.view, out.view, x.nbytes)


class _ConstTensor:
    """A tiny device tensor backed by a recorder constant buffer."""
    __slots__ = ("view", "shape", "dtype")

    def __init__(self, view, shape, dtype):
        self.view = view
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)

    @property
    def nbytes(self):
        return int(np.prod(self.shape)) * self.dtype.itemsize


def _const_tensor(rec, value: np.ndarray) -> _ConstTensor:
    value = np.asarray(value, order="C")
    return _ConstTensor(rec.constants(value.reshape(-1).view(np.uint8)), value.shape, value.dtype)


# ---------------------------------------------------------------------------- Cast
# (Identity is a view: vkml/kernels/views.py)
def _onnx_to_dtype(to) -> np.dtype:
    from vkml.ir.dtypes import np_dtype
    return np_dtype(int(to))


@register
class CastKernel(Kernel):
    """Cast, and CastLike (the target type is its second input's dtype; that input's values
    are not read)."""

    op_types = ("Cast", "CastLike")
    shape_inputs = {"CastLike": (1,)}

    @staticmethod
    def _to(op_type, attrs, inputs) -> np.dtype:
        if op_type == "CastLike":
            return np.dtype(inputs[1].dtype)
        return _onnx_to_dtype(attrs["to"])

    def check(self, device, op_type, attrs, inputs):
        want = 2 if op_type == "CastLike" else 1
        if len(inputs) != want or any(i is None for i in inputs):
            raise Unsupported(f"{op_type} takes {want} input(s)")
        try:
            to = self._to(op_type, attrs, inputs)
        except KeyError:
            raise Unsupported(f"Cast to ONNX type {attrs.get('to')!r}") from None
        if cast_ext.handles(inputs[0].dtype, to):
            cast_ext.check(device, inputs[0].dtype, to)
            element_count(inputs[0].shape)
            return
        try:
            dtype_name(inputs[0].dtype)
            dtype_name(to)
        except Unsupported as e:
            raise Unsupported(f"{op_type} from {inputs[0].dtype} to {to}: {e}") from None
        require_dtypes(device, inputs[0].dtype, to)
        element_count(inputs[0].shape)

    def infer(self, op_type, attrs, inputs):
        return [TensorSpec(inputs[0].shape, self._to(op_type, attrs, inputs))]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        x, out = inputs[0], outputs[0]
        if x.dtype != out.dtype and cast_ext.handles(x.dtype, out.dtype):
            mode = attrs.get("round_mode") or "up"
            cast_ext.record(rec, x, out, bool(_spec_of(attrs, "saturate", 1)),
                            mode.decode() if isinstance(mode, bytes) else str(mode))
            return
        if x.dtype == out.dtype:
            if x.nbytes:
                rec.copy(x.view, out.view, x.nbytes)
            return
        src, dst = dtype_name(x.dtype), dtype_name(out.dtype)
        if src == dst:
            if x.nbytes:
                rec.copy(x.view, out.view, x.nbytes)
            return
        _record_unary(rec, f"cast_{src}_{dst}", src, x, out)


# ---------------------------------------------------------------------------- binary
ARITH = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div"}
VARIADIC = {"Max": "max", "Min": "min", "Sum": "add", "Mean": "add"}  # Mean: the sum, then / n
COMPARE = {"Equal": "equal", "Less": "less", "LessOrEqual": "less_or_equal", "Greater": "greater",
           "GreaterOrEqual": "greater_or_equal"}
LOGIC = {"And": "and", "Or": "or", "Xor": "xor"}
BITWISE = {"BitwiseAnd": "bitand", "BitwiseOr": "bitor", "BitwiseXor": "bitxor"}


def _record_binary(rec, shader_op: str, dx: str, dy: str, a, b, out) -> None:
    """out = op(a, b) with a and b broadcast to out.shape."""
    n = element_count(out.shape)
    if n == 0:
        return
    shape, (sa, sb) = collapse(out.shape, [broadcast_strides(a.shape, out.shape),
                                           broadcast_strides(b.shape, out.shape)])
    if len(shape) > 8:
        raise Unsupported(f"broadcast of rank {len(shape)} (after collapsing) exceeds 8")
    name = f"pow_{dx}_{dy}" if shader_op == "pow" else f"{shader_op}_{dx}"
    p = rec.device.pipeline(name, "rrw", BINARY_PUSH.size)
    push = BINARY_PUSH.pack(n, len(shape), *pad8(shape), *pad8(sa), *pad8(sb))
    rec.dispatch(p, [a.view, b.view, out.view], push, _groups(p, n))


@register
class BinaryKernel(Kernel):
    op_types = (tuple(ARITH) + tuple(VARIADIC) + tuple(COMPARE) + tuple(LOGIC) + tuple(BITWISE)
                + ("Pow", "PRelu", "Mod", "BitShift"))

    def _types(self, op_type, inputs):
        if op_type == "Mod" and len(inputs) == 2 and all(t is not None and np.dtype(t.dtype) == F64
                                                          for t in inputs):
            return ["f64", "f64"]  # Mod's alone: shaders/binary.comp works on its bits
        if op_type in VARIADIC:
            if not inputs or any(t is None for t in inputs):
                raise Unsupported(f"{op_type} needs at least one input")
        elif len(inputs) != 2 or inputs[0] is None or inputs[1] is None:
            raise Unsupported(f"{op_type} takes two inputs")
        if op_type in BINARY_EXTRA:
            ext = [_extra_name(t.dtype) for t in inputs]
            if ext[0] is not None:
                if any(e != ext[0] for e in ext):
                    raise Unsupported(f"{op_type} with mixed dtypes")
                return ext
        return [dtype_name(t.dtype) for t in inputs]

    def check(self, device, op_type, attrs, inputs):
        dts = self._types(op_type, inputs)
        if op_type in BINARY_EXTRA and dts[0] in ("f64", "bf16"):
            require_dtypes(device, *[t.dtype for t in inputs], allowed=EXTRA)
            if op_type in COMPARE:
                require_dtypes(device, np.bool_)
            try:
                element_count(broadcast_shape(*[t.shape for t in inputs]))
            except ValueError as e:
                raise Unsupported(str(e)) from None
            return
        if op_type == "Mean" and dts[0] not in F:
            raise Unsupported(f"Mean on the GPU takes floats, not {inputs[0].dtype}")
        if op_type == "Pow":
            ok = (dts[0] in F and dts[1] in FI) or (dts[0] in I and dts[1] in INTS)
            if not ok:
                raise Unsupported(f"Pow({inputs[0].dtype}, {inputs[1].dtype}) on the GPU")
        elif op_type in LOGIC:
            if dts != ["bool", "bool"]:
                raise Unsupported(f"{op_type} takes bool inputs")
        elif op_type == "Mod":
            if attrs.get("fmod", 0) not in (0, 1):
                raise Unsupported(f"Mod fmod={attrs.get('fmod')!r} (the CPU operator reports the error)")
            if dts[0] != dts[1] or dts[0] not in FI + ("f64",):
                raise Unsupported(f"Mod on the GPU takes two inputs of one dtype among float32, float16, "
                                  f"float64 and the integers, not {inputs[0].dtype}, {inputs[1].dtype}")
        elif op_type == "BitShift":
            if attrs.get("direction") not in ("LEFT", "RIGHT", b"LEFT", b"RIGHT"):
                raise Unsupported(f"BitShift direction {attrs.get('direction')!r}")
        if op_type not in ("Pow", "Mod") and op_type not in LOGIC:
            if len(set(dts)) != 1:
                raise Unsupported(f"{op_type} with mixed dtypes {dts}")
            allowed = (FI + ("bool",) if op_type == "Equal" else INTS if op_type in BITWISE or op_type == "BitShift"
                       else F + I if op_type == "PRelu" else FI)
            if dts[0] not in allowed:
                raise Unsupported(f"{op_type} on the GPU supports {', '.join(allowed)}, not {inputs[0].dtype}")
        if dts[0] == "f64":  # Mod's: held as uint64 bits, so 64-bit integers, not float64's shaderFloat64
            require_dtypes(device, np.int64, what="Mod of float64 (computed on its bits as 64-bit integers)")
        else:
            require_dtypes(device, *[t.dtype for t in inputs])
        if op_type in COMPARE or op_type in LOGIC:
            require_dtypes(device, np.bool_)
        try:
            shape = broadcast_shape(*[t.shape for t in inputs])
        except ValueError as e:
            raise Unsupported(str(e)) from None
        if op_type == "PRelu" and shape != tuple(inputs[0].shape):
            raise Unsupported("PRelu's slope must broadcast to X's shape")
        element_count(shape)

    def infer(self, op_type, attrs, inputs):
        shape = broadcast_shape(*[t.shape for t in inputs])
        if op_type in COMPARE or op_type in LOGIC:
            return [TensorSpec(shape, np.dtype(np.bool_))]
        return [TensorSpec(shape, inputs[0].dtype)]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        out = outputs[0]
        dts = self._types(op_type, inputs)
        if op_type in VARIADIC:
            op = VARIADIC[op_type]
            if op_type == "Mean":  # as the CPU: the sum in the dtype, then one division by n
                n = _const_tensor(rec, np.array(len(inputs), inputs[0].dtype))
                src = inputs[0]
                for t in inputs[1:]:
                    _record_binary(rec, "add", dts[0], dts[0], src, t, out)
                    src = out
                _record_binary(rec, "div", dts[0], dts[0], src, n, out)
                return
            if len(inputs) == 1:
                if inputs[0].nbytes:
                    if tuple(inputs[0].shape) == tuple(out.shape):
                        rec.copy(inputs[0].view, out.view, inputs[0].nbytes)
                    else:  # cannot happen for a single input, but stay correct
                        _record_binary(rec, op, dts[0], dts[0], inputs[0], inputs[0], out)
                return
            _record_binary(rec, op, dts[0], dts[0], inputs[0], inputs[1], out)
            for t in inputs[2:]:  # accumulate in place: out has the final shape
                _record_binary(rec, op, dts[0], dts[0], out, t, out)
            return
        if op_type == "BitShift":
            d = attrs.get("direction")
            op = "shl" if (d.decode() if isinstance(d, bytes) else d) == "LEFT" else "shr"
        else:
            op = (ARITH.get(op_type) or COMPARE.get(op_type) or LOGIC.get(op_type) or BITWISE.get(op_type)
                  or {"Pow": "pow", "PRelu": "prelu", "Mod": "fmod" if attrs.get("fmod", 0) else "mod"}[op_type])
        _record_binary(rec, op, dts[0], dts[1], inputs[0], inputs[1], out)


# ---------------------------------------------------------------------------- Where
# Where only selects, so float64 and bfloat16 use the variants of their unsigned integer twins
# (and need what those need: float64 shaderInt64, not common.DTYPE_FEATURES' shaderFloat64).
_WHERE_BITS = {F64: np.dtype(np.uint64), BF16: np.dtype(np.uint16)}

@register
class WhereKernel(Kernel):
    op_types = ("Where",)

    def check(self, device, op_type, attrs, inputs):
        if len(inputs) != 3 or any(t is None for t in inputs):
            raise Unsupported("Where takes three inputs")
        if np.dtype(inputs[0].dtype) != np.bool_:
            raise Unsupported("Where's condition must be bool")
        if inputs[1].dtype != inputs[2].dtype:
            raise Unsupported("Where's X and Y must have one dtype")
        wt = _WHERE_BITS.get(np.dtype(inputs[1].dtype), inputs[1].dtype)  # f64/bf16: moved as bits
        dtype_name(wt)
        require_dtypes(device, np.bool_, wt)
        try:
            element_count(broadcast_shape(*[t.shape for t in inputs]))
        except ValueError as e:
            raise Unsupported(str(e)) from None

    def infer(self, op_type, attrs, inputs):
        return [TensorSpec(broadcast_shape(*[t.shape for t in inputs]), inputs[1].dtype)]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        c, x, y = inputs
        out = outputs[0]
        n = element_count(out.shape)
        if n == 0:
            return
        shape, (sc, sx, sy) = collapse(out.shape, [broadcast_strides(t.shape, out.shape) for t in (c, x, y)])
        if len(shape) > 8:
            raise Unsupported(f"broadcast of rank {len(shape)} (after collapsing) exceeds 8")
        import struct

        meta = rec.constants(struct.pack(WHERE_META, len(shape), *pad8(shape), *pad8(sc), *pad8(sx), *pad8(sy)))
        wt = _WHERE_BITS.get(np.dtype(x.dtype), x.dtype)
        p = rec.device.pipeline(f"where_{dtype_name(wt)}", "rrrwr", WHERE_PUSH.size)
        rec.dispatch(p, [c.view, x.view, y.view, out.view, meta], WHERE_PUSH.pack(n), _groups(p, n))
