"""GPU kernel for NonMaxSuppressionPadded: NonMaxSuppression with its rows padded to their bound
(vkml/compile/ragged.py makes the node; vkml/ops/detection.py is its CPU operator).

shaders/nms.comp, two dispatches: a workgroup per (batch, class) keeps its boxes greedily, best
score first, dropping those whose IoU with a kept one is above the threshold (IoU in float32 as
the CPU operator's NumPy computes it: the same boxes survive); then one workgroup writes the
rows in the CPU operator's order, zero rows up to the bound, and the count.
Refused (the node runs on the CPU): boxes or scores that are not float32, a threshold or
max_output_boxes_per_class computed at run time (the shader takes them as push constants),
more than MAX_BOXES boxes or MAX_PAIRS batches x classes (shared memory sizes).
"""
from __future__ import annotations

import numpy as np

from .common import PushBlock, require_dtypes
from .elem import HostInputs, require_bindable, specs_of
from .registry import Kernel, TensorSpec, Unsupported, register

NMS_PUSH = PushBlock("6I2f", "nms")  # B, C, N, limit, cap, flags, iou_threshold, score_threshold
MAX_BOXES = 2048 * 32  # shaders/nms.comp MAX_WORDS candidate bits
MAX_PAIRS = 2048       # shaders/nms.comp MAX_PAIRS
CENTER, THRESHOLD = 1, 2
WG = 256


def _scalar(h: HostInputs, pos: int, what: str):
    v = h.array(pos, what)
    return None if v is None or v.size == 0 else v.reshape(-1)[0]


class _Plan:
    def __init__(self, attrs, inputs):
        if len(inputs) < 2 or inputs[0] is None or inputs[1] is None:
            raise Unsupported("NonMaxSuppression takes boxes and scores")
        boxes, scores = inputs[0], inputs[1]
        if len(boxes.shape) != 3 or boxes.shape[2] != 4 or len(scores.shape) != 3 \
                or scores.shape[0] != boxes.shape[0] or scores.shape[2] != boxes.shape[1]:
            raise Unsupported(f"NonMaxSuppression: boxes {boxes.shape} and scores {scores.shape} do not match "
                              "(the CPU operator reports it)")
        self.b, self.c, self.n = (int(d) for d in scores.shape)
        h = HostInputs(inputs)
        max_out = _scalar(h, 2, "max_output_boxes_per_class")
        self.limit = min(max(int(0 if max_out is None else max_out), 0), self.n)
        iou = _scalar(h, 3, "iou_threshold")
        self.iou = float(np.float32(0.0 if iou is None else iou))
        thr = _scalar(h, 4, "score_threshold")
        self.score = float(np.float32(0.0 if thr is None else thr))
        self.flags = (CENTER if int(attrs.get("center_point_box", 0)) else 0) | (THRESHOLD if thr is not None else 0)
        self.cap = int(attrs.get("capacity", 0))
        if self.cap != self.b * self.c * self.limit:
            raise Unsupported(f"NonMaxSuppressionPadded: capacity {self.cap} is not batches x classes x "
                              f"min(max_output_boxes_per_class, boxes) = {self.b * self.c * self.limit}")


@register
class NmsKernel(Kernel):
    # NonMaxSuppression itself only so that its fed thresholds are values the plans are made
    # for (vkml/runtime/gpurun._value_inputs): the GPU runs it as NonMaxSuppressionPadded.
    op_types = ("NonMaxSuppressionPadded", "NonMaxSuppression")
    host_inputs = {"NonMaxSuppressionPadded": (2, 3, 4), "NonMaxSuppression": (2, 3, 4)}

    def check(self, device, op_type, attrs, inputs):
        if op_type == "NonMaxSuppression":
            raise Unsupported("NonMaxSuppression runs on a GPU padded to a bound on its rows (vkml/compile/"
                              "ragged.py); here the bound is unknown before run time, or zero")
        p = _Plan(attrs, inputs)
        require_dtypes(device, inputs[0].dtype, allowed=(np.dtype(np.float32),), what="NonMaxSuppression boxes")
        require_dtypes(device, inputs[1].dtype, allowed=(np.dtype(np.float32),), what="NonMaxSuppression scores")
        if p.n > MAX_BOXES:
            raise Unsupported(f"NonMaxSuppression over {p.n} boxes (the GPU kernel takes up to {MAX_BOXES})")
        if p.b * p.c > MAX_PAIRS:
            raise Unsupported(f"NonMaxSuppression over {p.b} x {p.c} batches x classes "
                              f"(the GPU kernel takes up to {MAX_PAIRS})")
        out = self.infer(op_type, attrs, inputs)
        require_bindable(device, inputs[0], inputs[1], *out)

    def infer(self, op_type, attrs, inputs):
        cap = _Plan(attrs, inputs).cap
        return [TensorSpec((cap, 3), np.dtype(np.int64)), TensorSpec((1,), np.dtype(np.int64))]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        p = _Plan(attrs, specs_of(inputs, consts))
        pairs = p.b * p.c
        push = NMS_PUSH.pack(p.b, p.c, p.n, p.limit, p.cap, p.flags, p.iou, p.score)
        dev = rec.device
        sel = dev.alloc(max(16, pairs * p.limit * 4))
        cnt = dev.alloc(max(16, pairs * 4))
        p1 = dev.pipeline("nms_select", "rrww", NMS_PUSH.size)
        rec.dispatch(p1, [inputs[0].view, inputs[1].view, sel, cnt], push, pairs)
        p2 = dev.pipeline("nms_rows", "rrww", NMS_PUSH.size)
        rec.dispatch(p2, [sel, cnt, outputs[0].view, outputs[1].view], push, 1)
