"""GPU kernel for FusedElementwise (vkml/ops/fused.py, the node vkml/compile/fusion.py makes): one
dispatch of shaders/fused.comp runs the whole chain, its program (opcode, constant) uploaded with
the command buffer."""
from __future__ import annotations

import numpy as np

from ..ops.fused import DIVIDING_OPCODES, OP_TYPE, program_of
from .common import PushBlock, element_count
from .elementwise import _const_tensor
from .registry import Kernel, Unsupported, register

FUSED_PUSH = PushBlock("II", "fused")  # n, program length


@register
class FusedKernel(Kernel):
    op_types = (OP_TYPE,)

    def check(self, device, op_type, attrs, inputs):
        if len(inputs) != 1 or inputs[0] is None or np.dtype(inputs[0].dtype) != np.float32:
            raise Unsupported("fused chains run on float32")
        element_count(inputs[0].shape)

    def infer(self, op_type, attrs, inputs):
        return [inputs[0]]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        x, out = inputs[0], outputs[0]
        n = element_count(out.shape)
        if n == 0:
            return
        program = program_of(attrs)
        prog = _const_tensor(rec, program)
        # programs that divide take the variant with correctly rounded division (slower per step)
        divides = any(int(code) in DIVIDING_OPCODES for code, _ in program)
        p = rec.device.pipeline("fused_div_f32" if divides else "fused_f32", "rrw", FUSED_PUSH.size)
        rec.dispatch(p, [x.view, prog.view, out.view], FUSED_PUSH.pack(n, len(program)), p.groups_for(n))
