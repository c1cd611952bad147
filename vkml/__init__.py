"""vkml: run ONNX models on any GPU through Vulkan, and on the CPU, from one process."""
from .devices import DeviceInfo, devices, gpu_unavailable_reason
from .errors import ModelError, UnsupportedOpsError
from .session import InferenceSession, NodeArg
from .tensor import Tensor
from . import ops as _ops  # noqa: F401  (registers the operators)

__version__ = "0.1.0"
__all__ = ["InferenceSession", "NodeArg", "Tensor", "ModelError", "UnsupportedOpsError", "devices", "DeviceInfo",
           "gpu_unavailable_reason"]
