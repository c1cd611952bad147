"""vkml as an onnx.backend: lets onnx's backend test suites (and their users) drive vkml."""
from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep

from .session import InferenceSession


class VkmlRep(BackendRep):
    def __init__(self, session: InferenceSession):
        self.session = session

    def run(self, inputs: Any, **kwargs: Any) -> tuple[Any, ...]:
        if isinstance(inputs, dict):
            feed = inputs
        else:
            if isinstance(inputs, np.ndarray):
                inputs = [inputs]
            names = [a.name for a in self.session.get_inputs()]
            if len(inputs) > len(names):
                # Some suites also feed the initializers that are graph inputs, in graph order.
                names = list(self.session.model.graph.inputs)
            feed = dict(zip(names, inputs))
        return tuple(self.session.run(None, feed))


class VkmlBackend(Backend):
    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> VkmlRep:
        return VkmlRep(InferenceSession(model, devices=_devices(device)))

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU", **kwargs: Any):
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device in ("CPU",)


def _devices(device: str) -> list[str] | None:
    return ["cpu"] if device == "CPU" else None


prepare = VkmlBackend.prepare
run_model = VkmlBackend.run_model
supports_device = VkmlBackend.supports_device
