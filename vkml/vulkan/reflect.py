"""Just enough SPIR-V reflection to check a pipeline against its caller.

From the module's words: the workgroup size (OpExecutionMode LocalSize, overridden by
specialization constants decorated as the WorkgroupSize builtin) and the descriptor
bindings of set 0. Pipeline creation uses it to reject a `bindings` string that does not
match the shader and to tell kernels the real local size.
"""
from __future__ import annotations

from array import array
from dataclasses import dataclass

OP_EXECUTION_MODE = 16
OP_CONSTANT = 43
OP_SPEC_CONSTANT = 50
OP_SPEC_CONSTANT_COMPOSITE = 51
OP_DECORATE = 71
MODE_LOCAL_SIZE = 17
DEC_SPEC_ID = 1
DEC_BUILTIN = 11
DEC_BINDING = 33
DEC_DESCRIPTOR_SET = 34
BUILTIN_WORKGROUP_SIZE = 25


@dataclass(frozen=True)
class ShaderInfo:
    local_size: tuple[int, int, int]          # with no specialization
    local_size_spec_ids: tuple[int | None, int | None, int | None]  # constant_id per axis
    bindings: tuple[int, ...]                 # binding numbers used in descriptor set 0

    def local_size_with(self, spec: tuple) -> tuple[int, int, int]:
        out = list(self.local_size)
        for axis, sid in enumerate(self.local_size_spec_ids):
            if sid is not None and sid < len(spec):
                out[axis] = int(spec[sid])
        return tuple(out)


def reflect(code: bytes) -> ShaderInfo:
    words = array("I")
    words.frombytes(code)
    if words[0] != 0x07230203:
        raise ValueError("not a SPIR-V module")
    local = [1, 1, 1]
    spec_id: dict[int, int] = {}
    builtin_wg: int | None = None
    binding: dict[int, int] = {}
    dset: dict[int, int] = {}
    spec_default: dict[int, int] = {}
    composite: dict[int, list[int]] = {}
    constant: dict[int, int] = {}
    i = 5
    n = len(words)
    while i < n:
        count = words[i] >> 16
        op = words[i] & 0xFFFF
        if count == 0:
            raise ValueError("malformed SPIR-V (zero-length instruction)")
        w = words[i + 1:i + count]
        if op == OP_EXECUTION_MODE and w[1] == MODE_LOCAL_SIZE:
            local = [w[2], w[3], w[4]]
        elif op == OP_DECORATE:
            target, dec = w[0], w[1]
            if dec == DEC_SPEC_ID:
                spec_id[target] = w[2]
            elif dec == DEC_BUILTIN and w[2] == BUILTIN_WORKGROUP_SIZE:
                builtin_wg = target
            elif dec == DEC_BINDING:
                binding[target] = w[2]
            elif dec == DEC_DESCRIPTOR_SET:
                dset[target] = w[2]
        elif op == OP_SPEC_CONSTANT:
            spec_default[w[1]] = w[2]
        elif op == OP_CONSTANT and len(w) >= 3:
            constant[w[1]] = w[2]
        elif op == OP_SPEC_CONSTANT_COMPOSITE:
            composite[w[1]] = list(w[2:])
        i += count
    ids: list[int | None] = [None, None, None]
    if builtin_wg is not None and builtin_wg in composite:
        for axis, cid in enumerate(composite[builtin_wg][:3]):
            if cid in spec_id:
                ids[axis] = spec_id[cid]
                local[axis] = spec_default.get(cid, local[axis])
            elif cid in constant:
                local[axis] = constant[cid]
    used = sorted({b for target, b in binding.items() if dset.get(target, 0) == 0})  # aliases share one
    return ShaderInfo(tuple(local), tuple(ids), tuple(used))
