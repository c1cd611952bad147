"""GPU kernel for NonZeroPadded: NonZero with its columns padded to their bound (the input's
element count; vkml/compile/ragged.py makes the node, vkml/ops/gather.py is its CPU operator).

shaders/nonzero.comp, three dispatches over chunks of 1024 elements: count each chunk's nonzero
elements, turn the counts into offsets (one workgroup; it also writes the total), then write each
chunk's coordinates in row-major order at its offset and zero the columns past the total. An
element is nonzero when its bits are, the sign bit left out for floats (-0.0 is zero, NaN is
not), so every dtype of 1, 2, 4 or 8 bytes works.
Refused (the node runs on the CPU): rank above 8, more than MAX_ELEMENTS elements, dtypes
other than bool, the integers and float16/32/64.
"""
from __future__ import annotations

import numpy as np

from .common import PushBlock
from .elem import require_bindable, require_elements
from .registry import Kernel, TensorSpec, Unsupported, register

NONZERO_PUSH = PushBlock("4I8I", "nonzero")  # n, rank, chunks, mask, shape[8]
CHUNK = 1024          # shaders/nonzero.comp CHUNK: elements per workgroup
MAX_RANK = 8
MAX_ELEMENTS = 65535 * CHUNK  # one dispatch row of chunks
# bits that make an element nonzero, by dtype (the high word's for 8-byte elements)
_SIGN_FREE = {2: 0x7FFF, 4: 0x7FFFFFFF, 8: 0x7FFFFFFF}
_ALL = {1: 0xFF, 2: 0xFFFF, 4: 0xFFFFFFFF, 8: 0xFFFFFFFF}


def _mask(dtype: np.dtype) -> int:
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return _SIGN_FREE[dtype.itemsize]
    if dtype.kind in "biu":
        return _ALL[dtype.itemsize]
    raise Unsupported(f"NonZero of {dtype} (the GPU kernel takes bool, integers and float16/32/64)")


@register
class NonZeroKernel(Kernel):
    op_types = ("NonZeroPadded",)

    def _check_input(self, x: TensorSpec) -> int:
        rank, n = len(x.shape), int(np.prod(x.shape, dtype=np.int64))
        if not 1 <= rank <= MAX_RANK:
            raise Unsupported(f"NonZero of rank {rank} (the GPU kernel takes 1 to {MAX_RANK})")
        if not 1 <= n <= MAX_ELEMENTS:
            raise Unsupported(f"NonZero over {n} elements (the GPU kernel takes 1 to {MAX_ELEMENTS})")
        _mask(x.dtype)
        return n

    def check(self, device, op_type, attrs, inputs):
        x = inputs[0]
        n = self._check_input(x)
        if int(attrs.get("capacity", 0)) != n:
            raise Unsupported(f"NonZeroPadded: capacity {attrs.get('capacity')} is not the element count {n}")
        require_elements(device, x.dtype)
        require_bindable(device, x, *self.infer(op_type, attrs, inputs))

    def infer(self, op_type, attrs, inputs):
        x = inputs[0]
        return [TensorSpec((len(x.shape), self._check_input(x)), np.dtype(np.int64)),
                TensorSpec((1,), np.dtype(np.int64))]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        x = inputs[0]
        n = int(np.prod(x.shape))
        chunks = -(-n // CHUNK)
        shape = list(x.shape) + [1] * (MAX_RANK - len(x.shape))
        push = NONZERO_PUSH.pack(n, len(x.shape), chunks, _mask(x.dtype), *shape)
        dev = rec.device
        cnt = dev.alloc(max(16, 4 * chunks))
        es = np.dtype(x.dtype).itemsize
        views = [x.view, cnt, outputs[0].view, outputs[1].view]
        rec.dispatch(dev.pipeline(f"nonzero_count_b{es}", "rwrr", NONZERO_PUSH.size), views, push, chunks)
        rec.dispatch(dev.pipeline("nonzero_scan", "rxrw", NONZERO_PUSH.size), views, push, 1)
        rec.dispatch(dev.pipeline(f"nonzero_write_b{es}", "rrwr", NONZERO_PUSH.size), views, push, chunks)
