"""vkml as an onnx.backend: lets onnx's backend test suites (and their users) drive vkml."""
from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep

from .session import InferenceSession


class VkmlRep(BackendRep):
    """A prepared model (onnx.backend's BackendRep): a vkml.InferenceSession, run with the backend's inputs."""

    def __init__(self, session: InferenceSession):
        self.session = session

    def run(self, inputs: Any, **kwargs: Any) -> tuple[Any, ...]:
        """The outputs for `inputs`: a dict by name, or arrays in the order of the graph's inputs."""
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
    """onnx.backend.base.Backend for vkml; devices are "CPU", "GPU"/"VULKAN" or "GPU:N"/"VULKAN:N"."""

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> VkmlRep:
        """An InferenceSession of `model` on `device` (see _devices), wrapped as a VkmlRep."""
        return VkmlRep(InferenceSession(model, devices=_devices(device)))

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU", **kwargs: Any):
        """prepare(model, device) and run it once on `inputs`: the outputs as a tuple."""
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        """CPU always; GPU (or VULKAN, GPU:N) when such a Vulkan device exists; not CUDA."""
        try:
            _devices(device)
        except ValueError:
            return False
        return True


def _devices(device: str) -> list[str]:
    """The session's devices for an onnx.backend device string: "CPU"; "GPU"/"VULKAN" (the first
    Vulkan device vkml lists, then the CPU for what it cannot run); "GPU:N"/"VULKAN:N" for
    vulkan:N. Anything else is a ValueError, never a silent CPU run."""
    text = str(device).strip()
    kind, _, index = text.upper().partition(":")
    if kind == "CPU" and not index:
        return ["cpu"]
    if kind in ("GPU", "VULKAN"):
        from ..runtime.devices import devices

        gpus = [d.name for d in devices() if d.vulkan is not None]
        if index:
            want = f"vulkan:{index}"
            if not index.isdigit() or want not in gpus:
                raise ValueError(f"device {text!r}: no {want}; Vulkan devices here: {gpus or 'none'}")
            return [want, "cpu"]
        if not gpus:
            raise ValueError(f"device {text!r}: no Vulkan device here (vkml.devices() says why)")
        return [gpus[0], "cpu"]
    raise ValueError(f"device {text!r}: vkml runs on 'CPU', 'GPU' or 'GPU:N' (Vulkan), not CUDA")


prepare = VkmlBackend.prepare
run_model = VkmlBackend.run_model
supports_device = VkmlBackend.supports_device
