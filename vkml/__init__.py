"""vkml: run ONNX models on any GPU through Vulkan, and on the CPU, from one process."""
from .api.batching import DynamicBatcher
from .api.io_binding import IOBinding
from .api.options import ExecutionMode, GraphOptimizationLevel, ModelMetadata, RunOptions, SessionOptions
from .runtime.devices import DeviceInfo, devices, gpu_unavailable_reason
from .errors import ModelError, UnsupportedOpsError
from .api.session import InferenceSession, NodeArg
from .runtime.tensor import Tensor, from_dlpack
from . import ops as _ops  # noqa: F401  (registers the operators)

__version__ = "0.1.0"
__all__ = ["InferenceSession", "NodeArg", "Tensor", "ModelError", "UnsupportedOpsError", "devices", "DeviceInfo",
           "gpu_unavailable_reason", "SessionOptions", "RunOptions", "GraphOptimizationLevel", "ExecutionMode",
           "ModelMetadata", "IOBinding", "DynamicBatcher", "DeviceLost", "get_available_providers", "from_dlpack"]


def get_available_providers() -> list[str]:
    """onnxruntime's question: "VulkanExecutionProvider" where a Vulkan device is usable, then
    "CPUExecutionProvider"."""
    from .api.options import CPU_EP, VULKAN_EP

    return ([VULKAN_EP] if any(d.name != "cpu" for d in devices()) else []) + [CPU_EP]


def __getattr__(name: str):
    # DeviceLost lives with the Vulkan runtime, which `import vkml` does not load (a CPU-only
    # program never pays for it); `except vkml.DeviceLost` loads it on first use.
    if name == "DeviceLost":
        from .vulkan.errors import DeviceLost

        return DeviceLost
    raise AttributeError(f"module 'vkml' has no attribute {name!r}")
