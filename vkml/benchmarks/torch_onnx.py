"""Runs the suite's ONNX graphs with PyTorch ops, so the torch peers execute the same weights.

Only the operators the suite's models use are covered; anything else raises NotImplementedError
naming the op (the suite reports that as unsupported). Each node becomes one torch call, which is
what an nn.Module's forward does too, so eager overhead stays comparable.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper


def _attrs(node: onnx.NodeProto) -> dict[str, Any]:
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _conv(F, a, x, w, b=None):
    k = a.get("kernel_shape", list(w.shape[2:]))
    pads = a.get("pads", [0] * (2 * len(k)))
    half = len(pads) // 2
    if pads[:half] != pads[half:]:
        raise NotImplementedError("Conv with asymmetric pads")
    return F.conv2d(x, w, b, stride=a.get("strides", [1] * len(k)), padding=pads[:half],
                    dilation=a.get("dilations", [1] * len(k)), groups=a.get("group", 1))


def _maxpool(F, a, x):
    k = a["kernel_shape"]
    pads = a.get("pads", [0] * (2 * len(k)))
    half = len(pads) // 2
    if pads[:half] != pads[half:]:
        raise NotImplementedError("MaxPool with asymmetric pads")
    return F.max_pool2d(x, k, stride=a.get("strides", [1] * len(k)), padding=pads[:half],
                        ceil_mode=bool(a.get("ceil_mode", 0)))


def _gemm(torch, a, x, w, c=None):
    if a.get("transA", 0):
        x = x.t()
    if a.get("transB", 0):
        w = w.t()
    y = x @ w
    if a.get("alpha", 1.0) != 1.0:
        y = y * a["alpha"]
    if c is not None:
        y = y + (c * a.get("beta", 1.0) if a.get("beta", 1.0) != 1.0 else c)
    return y


def _reshape(shape: list[int], have, allowzero: int) -> tuple[int, ...]:
    return tuple(have[i] if (v == 0 and not allowzero) else v for i, v in enumerate(shape))


class TorchGraph:
    """forward(*inputs) → outputs of one ONNX graph, run op by op with torch."""

    def __init__(self, proto: onnx.ModelProto, device: str):
        import torch
        import torch.nn.functional as F

        self.torch, g = torch, proto.graph
        self.consts = {t.name: torch.from_numpy(np.array(numpy_helper.to_array(t))).to(device)
                       for t in g.initializer}
        init_names = set(self.consts)
        self.inputs = [i.name for i in g.input if i.name not in init_names]
        self.outputs = [o.name for o in g.output]
        self.steps = []
        for node in g.node:
            self.steps.append((self._compile(torch, F, node), list(node.input), node.output[0]))

    def _compile(self, torch, F, node):
        a, op = _attrs(node), node.op_type
        if op == "Add":
            return torch.add
        if op == "Mul":
            return torch.mul
        if op == "Relu":
            return torch.relu
        if op == "MatMul":
            return torch.matmul
        if op == "Conv":
            return lambda *xs: _conv(F, a, *xs)
        if op == "MaxPool":
            return lambda x: _maxpool(F, a, x)
        if op == "GlobalAveragePool":
            return lambda x: x.mean(dim=tuple(range(2, x.dim())), keepdim=True)
        if op == "Flatten":
            axis = a.get("axis", 1)
            return lambda x: x.reshape(int(np.prod(x.shape[:axis])), -1)
        if op == "Reshape":  # the shape is a constant: baked in (a device read would sync)
            shape = self._host(node.input[1]).astype(np.int64).tolist()
            return lambda x, _s: x.reshape(_reshape(shape, x.shape, a.get("allowzero", 0)))
        if op == "Gemm":
            return lambda *xs: _gemm(torch, a, *xs)
        if op == "Clip":
            bounds = [float(self._host(n)) if n else None for n in list(node.input[1:3]) + [""] * 2][:2]
            return lambda x, *_: torch.clamp(x, bounds[0], bounds[1])
        raise NotImplementedError(f"torch runner has no {op}")

    def _host(self, name: str) -> np.ndarray:
        if name not in self.consts:
            raise NotImplementedError(f"torch runner needs {name!r} to be an initializer")
        return self.consts[name].cpu().numpy()

    def forward(self, *xs):
        env = dict(self.consts)
        env.update(zip(self.inputs, xs))
        for fn, ins, out in self.steps:
            env[out] = fn(*[env[n] for n in ins if n])
        return [env[o] for o in self.outputs]
