"""GPU kernels for NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (shaders/loss.comp).

NLL reads the input as log-probabilities (N, C, D...) and the targets (N, D...): one
invocation per element for reduction "none", one workgroup summing the losses (and, for
"mean", the weights of the counted elements) for "sum" and "mean". SoftmaxCrossEntropyLoss
is LogSoftmax over axis 1 (the softmax kernel; into its log_prob output, or a scratch buffer
when the node has none) and then NLL. Targets outside [0, C) that are not ignore_index count
0 and set the run slot's fault word, which the run raises as an error. float32 and float16
(computed in float32, as the CPU operator widens them); SoftmaxCrossEntropyLoss float32 only
(the CPU takes the loss from float32 log-probabilities, not from rounded float16 ones).
"""
from __future__ import annotations

import math

import numpy as np

from .common import PushBlock, dtype_name, fault_binding, require_dtypes
from .gather import INDEX_BITS
from .reduce import check_size, float_or
from .registry import Kernel, TensorSpec, Unsupported, get_kernel, register

LOSS_PUSH = PushBlock("3I2i2I", "loss")  # n, c, d, ignore (low, high), has_ignore, site
REDUCTIONS = ("none", "sum", "mean")


@register
class LossKernel(Kernel):
    op_types = ("NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss")
    faults = True

    def check(self, device, op_type, attrs, inputs):
        if len(inputs) not in (2, 3) or inputs[0] is None or inputs[1] is None:
            raise Unsupported(f"{op_type} takes two or three inputs")
        x, t = inputs[0], inputs[1]
        w = inputs[2] if len(inputs) > 2 else None
        allowed = ("f32",) if op_type == "SoftmaxCrossEntropyLoss" else ("f32", "f16")
        float_or(x.dtype, allowed, op_type)
        require_dtypes(device, x.dtype)
        if np.dtype(t.dtype) not in INDEX_BITS:
            raise Unsupported(f"{op_type}: targets of dtype {t.dtype} (int32 or int64 run on the GPU)")
        if len(x.shape) < 2 or tuple(t.shape) != (x.shape[0],) + tuple(x.shape[2:]):
            raise Unsupported(f"{op_type}: input {list(x.shape)} and target {list(t.shape)} do not match")
        if w is not None and (tuple(w.shape) != (x.shape[1],) or np.dtype(w.dtype) != np.dtype(x.dtype)):
            raise Unsupported(f"{op_type}: weights {w.dtype}{list(w.shape)}")
        if (attrs.get("reduction") or "mean") not in REDUCTIONS:
            raise Unsupported(f"{op_type}: reduction {attrs.get('reduction')!r}")
        if math.prod(x.shape) >= 1 << 31:
            raise Unsupported(f"{op_type}: more than 2**31 elements")
        check_size(device, x)

    def infer(self, op_type, attrs, inputs):
        x = inputs[0]
        red = attrs.get("reduction") or "mean"
        loss = TensorSpec((x.shape[0],) + tuple(x.shape[2:]) if red == "none" else (), x.dtype)
        if op_type == "SoftmaxCrossEntropyLoss":
            return [loss, TensorSpec(tuple(x.shape), x.dtype)]  # log_prob (scratch without output 1)
        return [loss]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        x, t = inputs[0], inputs[1]
        w = inputs[2] if len(inputs) > 2 else None
        out = outputs[0]
        n, c = math.prod(t.shape), x.shape[1]
        d = math.prod(x.shape[2:])
        red = attrs.get("reduction") or "mean"
        if n == 0 and red == "none":
            return
        if op_type == "SoftmaxCrossEntropyLoss":
            logp = outputs[1]
            if logp is None:
                raise Unsupported("SoftmaxCrossEntropyLoss needs its log_prob buffer")
            get_kernel("LogSoftmax").record(rec, "LogSoftmax", {"axis": 1, "_opset": 13}, [x], [logp])
            x = logp
        ign = attrs.get("ignore_index")
        lo, hi = np.array([0 if ign is None else int(ign)], np.int64).view(np.int32)
        fault, site = fault_binding(rec, attrs, f"{op_type} target", c)
        dt = dtype_name(x.dtype)
        name = f"nll_{red}{'_w' if w is not None else ''}_{dt}_i{INDEX_BITS[np.dtype(t.dtype)]}"
        p = rec.device.pipeline(name, "rrrwx", LOSS_PUSH.size)
        # (without targets nothing is read: any non-empty buffer binds)
        tv = t.view if n else rec.constants(bytes(8))
        xv = x.view if x.nbytes else rec.constants(bytes(8))
        push = LOSS_PUSH.pack(n, c, max(d, 1), int(lo), int(hi), int(ign is not None), site)
        groups = p.groups_for(n) if red == "none" else 1
        rec.dispatch(p, [xv, tv, w.view if w is not None else xv, out.view, fault], push, groups)
