"""GPU kernel for CenterCropPad: per axis, a centred crop (the window starts half the excess
in, rounded down) or a centred zero pad (the odd element goes to the end), as the CPU operator
(vkml/ops/gather.py CenterCropPad) works them out. Both are one Pad with negative and positive
pads, so this records kernels/pad.py's record_pad (shaders/pad.comp, constant mode, the value
0): a copy by element size, so every dtype moves and results are bitwise equal to the CPU's.

The target shape (input 1) must be known on the host. Refused (the node runs on the CPU, which
reports any error): an unknown shape, a negative target size, a shape whose length differs from
the number of axes, axes out of range or repeated, more than 8 dimensions that cannot be merged.
"""
from __future__ import annotations

from ..ops.gather import center_crop_pad_amounts
from .elem import HostInputs, require_bindable, require_elements, specs_of
from .pad import MODES, PadDims, pad_dims, record_pad
from .registry import Kernel, TensorSpec, Unsupported, register


def crop_pad_dims(attrs, inputs, hi: HostInputs) -> PadDims:
    if len(inputs) != 2 or inputs[0] is None or inputs[1] is None:
        raise Unsupported("CenterCropPad takes input_data and shape")
    x = inputs[0]
    rank = len(x.shape)
    target = hi.ints(1, "CenterCropPad's shape")
    axes = attrs.get("axes")
    if axes is None:
        axes = list(range(rank))
    else:
        norm = []
        for a in axes:
            a = int(a)
            if not -rank <= a < rank:
                raise Unsupported(f"CenterCropPad: axis {a} out of range for rank {rank}")
            norm.append(a % rank)
        if len(set(norm)) != len(norm):
            raise Unsupported(f"CenterCropPad: axes {list(axes)} repeat an axis")
        axes = norm
    try:
        begins, ends = center_crop_pad_amounts(x.shape, target, axes)
    except ValueError as e:
        raise Unsupported(f"{e} (the CPU operator reports it)") from None
    return pad_dims(x.shape, begins, ends, "constant")


@register
class CenterCropPadKernel(Kernel):
    op_types = ("CenterCropPad",)
    host_inputs = {"CenterCropPad": (1,)}

    def check(self, device, op_type, attrs, inputs):
        dims = crop_pad_dims(attrs, inputs, HostInputs(inputs))
        require_elements(device, inputs[0].dtype)
        require_bindable(device, inputs[0], TensorSpec(dims.out_shape, inputs[0].dtype))
        dims.check()

    def infer(self, op_type, attrs, inputs):
        return [TensorSpec(crop_pad_dims(attrs, inputs, HostInputs(inputs)).out_shape, inputs[0].dtype)]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        specs = specs_of(inputs, consts)
        dims = crop_pad_dims(attrs, specs, HostInputs(specs, consts))
        record_pad(rec, inputs[0], outputs[0], dims, MODES["constant"])  # value b"": zero bits
