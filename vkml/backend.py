"""onnx's backend API for vkml, under the public name users import, as onnxruntime.backend is
onnxruntime's: ``import vkml.backend as backend; backend.prepare(model, "GPU").run(inputs)``.
The implementation lives in the api layer (vkml/api/backend.py)."""
from .api.backend import VkmlBackend, VkmlRep, prepare, run_model, supports_device

__all__ = ["VkmlBackend", "VkmlRep", "prepare", "run_model", "supports_device"]
