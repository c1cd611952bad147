"""GPU kernel for RoiAlign (opsets 10, 16 and 22): avg and max modes, both coordinate
transformation modes (opset 10 is output_half_pixel; 16 and later default to half_pixel),
any sampling_ratio (0: adaptive, ceil(roi size / output size) samples per bin), float32 and
float16 (rois of the same dtype, batch_indices int64).

shaders/roialign.comp runs one invocation per output element and samples as onnxruntime
and onnx.reference do, in float32 without fma contraction and with correctly rounded
divisions: float32 results match theirs bit for bit where they compute in float32 (float16
data is computed in float32 and rounded once). vkml's CPU operator (vkml/ops/pool.py) agrees
up to rounding (it places samples in float64) except for one case, where the GPU follows
the specification's references: a roi of zero or negative size in half_pixel mode with
adaptive sampling has a grid of ceil(size / bins) <= 0 samples there and gives 0, where the
CPU operator takes one sample per bin.

A batch index outside [0, N) gives zeros and sets the run slot's fault word
(common.fault_binding, vkml/runtime/faults.py): the run raises the CPU operator's error for
the first such roi (the shader scans the indices in order), naming the same roi and index.
Indices known on the host (initializers) are checked here instead: a bad one keeps the node
on the CPU, which reports it.

Refused (the node runs on the CPU): other dtypes (float64, bfloat16), batch_indices that are
not int64, rois of another dtype than X, inputs of the wrong rank or shape, an empty H or W,
output_height/width < 1 or a negative sampling_ratio (the CPU operator reports those),
sampling_ratio above 2^24, and tensors beyond one binding or 2^31 elements (uint32 offsets).
"""
from __future__ import annotations

import functools
import math

import numpy as np

from vkml.errors import ModelError

from .common import FAULT_ATTR, PushBlock, fault_binding, require_dtypes
from .elem import HostInputs, attr_str, require_bindable, specs_of
from .reduce import threads_wg
from .registry import Kernel, TensorSpec, Unsupported, register

# n, C, H, W, PH, PW, R, N, sampling_ratio, flags (1: max, 2: half_pixel), fault site, spatial_scale
ROIALIGN_PUSH = PushBlock("11If", "roialign")
MAX_SAMPLING = 1 << 24  # the shader's grid sizes stay exact in float32
WHAT = "RoiAlign batch_indices"
DTYPES = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16"}


def _batch_error(n: int, node, bad: int, roi: int) -> Exception:
    """What vkml/ops/pool.py RoiAlign.run raises (Op.fail) for roi `roi`'s batch index `bad`."""
    return ModelError(f"node {node.name!r} ({node.op_type}): roi {roi} has batch index {bad} outside [0, {n})")


class Plan:
    """A RoiAlign node's attributes, resolved; Unsupported where the GPU does not go."""

    def __init__(self, attrs, inputs):
        if len(inputs) != 3 or any(s is None for s in inputs):
            raise Unsupported("RoiAlign takes X, rois and batch_indices")
        x, rois, bidx = inputs
        if len(x.shape) != 4 or len(rois.shape) != 2 or rois.shape[1] != 4 or tuple(bidx.shape) != (rois.shape[0],):
            raise Unsupported(f"RoiAlign needs X (N, C, H, W), rois (R, 4), batch_indices (R,); got {x.shape}, "
                              f"{rois.shape}, {bidx.shape} (the CPU operator reports it)")
        self.mode = attr_str(attrs, "mode", "avg")
        if self.mode not in ("avg", "max"):
            raise Unsupported(f"RoiAlign mode {self.mode!r} (the CPU operator reports it)")
        self.out_h = int(attrs.get("output_height", 1))
        self.out_w = int(attrs.get("output_width", 1))
        self.sampling = int(attrs.get("sampling_ratio", 0))
        if self.out_h < 1 or self.out_w < 1 or self.sampling < 0:
            raise Unsupported("RoiAlign: output_height/width < 1 or sampling_ratio < 0 (the CPU operator reports it)")
        if self.sampling > MAX_SAMPLING:
            raise Unsupported(f"RoiAlign sampling_ratio {self.sampling} (the GPU kernel takes up to {MAX_SAMPLING})")
        self.scale = float(attrs.get("spatial_scale", 1.0))
        if int(attrs.get("_opset", 16)) >= 16:
            coord = attr_str(attrs, "coordinate_transformation_mode", "half_pixel")
            if coord not in ("half_pixel", "output_half_pixel"):
                raise Unsupported(f"RoiAlign coordinate_transformation_mode {coord!r} (the CPU operator reports it)")
            self.half_pixel = coord == "half_pixel"
        else:  # RoiAlign-10 has no such attribute and behaves as output_half_pixel
            self.half_pixel = False
        n, c, h, w = x.shape
        self.shape = (rois.shape[0], c, self.out_h, self.out_w)


@register
class RoiAlignKernel(Kernel):
    op_types = ("RoiAlign",)
    faults = True  # batch indices outside [0, N)

    def check(self, device, op_type, attrs, inputs):
        plan = Plan(attrs, inputs)
        x, rois, bidx = inputs
        if x.dtype not in DTYPES:
            raise Unsupported(f"RoiAlign on the GPU takes float32 and float16, not {x.dtype}")
        if rois.dtype != x.dtype:
            raise Unsupported(f"RoiAlign with rois of {rois.dtype} for X of {x.dtype}")
        if bidx.dtype != np.int64:
            raise Unsupported(f"RoiAlign batch_indices of {bidx.dtype} (int64 runs on the GPU)")
        require_dtypes(device, x.dtype)
        if x.shape[2] == 0 or x.shape[3] == 0:
            raise Unsupported("RoiAlign over an empty H or W")
        require_bindable(device, x, rois, bidx, TensorSpec(plan.shape, x.dtype))
        if getattr(bidx, "value", None) is not None:
            v = HostInputs(inputs).array(2, "RoiAlign's batch_indices")
            if v.size and (v.min() < 0 or v.max() >= x.shape[0]):
                raise Unsupported(f"RoiAlign: batch indices outside [0, {x.shape[0]}) (the CPU operator reports it)")

    def infer(self, op_type, attrs, inputs):
        return [TensorSpec(Plan(attrs, inputs).shape, inputs[0].dtype)]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        x, rois, bidx = inputs
        out = outputs[0]
        plan = Plan(attrs, specs_of(inputs, consts))
        r = rois.shape[0]
        if r == 0:  # no rois: nothing to compute and no index to check
            return
        n, c, h, w = x.shape
        count = math.prod(plan.shape)
        fault = attrs.get(FAULT_ATTR)
        if fault is None:  # a recording nobody reads faults from (benchmarks, by hand)
            fview, site = fault_binding(rec, attrs, WHAT, n)
        else:
            fview, site = fault.view, fault.site(WHAT, n, functools.partial(_batch_error, n))
        dev = rec.device
        p = dev.pipeline(f"roialign_{DTYPES[x.dtype]}", "rrrwx", ROIALIGN_PUSH.size, (threads_wg(dev),))
        flags = int(plan.mode == "max") | 2 * int(plan.half_pixel)
        push = ROIALIGN_PUSH.pack(count, c, h, w, plan.out_h, plan.out_w, r, n, plan.sampling, flags, site,
                                  plan.scale)
        # Empty X (N = 0: every index is bad) or Y (C = 0): the shader still checks the
        # indices; it reads nothing from X and writes nothing to Y.
        xv = x.view if x.nbytes else rec.constants(bytes(4))
        ov = out.view if out.nbytes else rec.constants(bytes(4))
        rec.dispatch(p, [xv, rois.view, bidx.view, ov, fview], push, p.groups_for(max(count, 1)))
