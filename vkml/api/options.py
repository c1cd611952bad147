"""onnxruntime's session vocabulary, so that code written for it runs on vkml unchanged:
providers, SessionOptions, RunOptions, ModelMetadata.

Providers map onto vkml devices: "VulkanExecutionProvider" (provider option device_id, default
the first GPU) is a Vulkan device, "CPUExecutionProvider" is vkml's CPU device; any other name
is a ValueError that lists these two (vkml has no CUDA, TensorRT, ... and does not pretend to).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

VULKAN_EP = "VulkanExecutionProvider"
CPU_EP = "CPUExecutionProvider"
PROVIDERS = (VULKAN_EP, CPU_EP)


class GraphOptimizationLevel(enum.IntEnum):
    """As onnxruntime's. vkml's graph rewrites (BatchNorm and bias folding, elementwise and
    epilogue fusion) are on from ORT_ENABLE_BASIC up and off at ORT_DISABLE_ALL."""

    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_ALL = 99


class ExecutionMode(enum.IntEnum):
    """As onnxruntime's: ORT_PARALLEL runs independent branches at once (executor="parallel"),
    ORT_SEQUENTIAL one node after another (executor="sequential")."""

    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


class SessionOptions:
    """The onnxruntime.SessionOptions fields vkml honours (others are accepted and unused):

    intra_op_num_threads: BLAS threads while this session's CPU runs are in flight (0: vkml's
        default, VKML_CPU_BLAS_THREADS);
    execution_mode: ExecutionMode (unset: vkml picks, executor="auto");
    graph_optimization_level: GraphOptimizationLevel (ORT_DISABLE_ALL turns vkml's rewrites off);
    enable_profiling, profile_file_prefix: InferenceSession.end_profiling() writes a
        Chrome-trace JSON of the runs."""

    def __init__(self) -> None:
        self.intra_op_num_threads = 0
        self.inter_op_num_threads = 0
        self.execution_mode: ExecutionMode | None = None
        self.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_ALL
        self.enable_profiling = False
        self.profile_file_prefix = "vkml_profile"
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self.enable_mem_pattern = True
        self.enable_cpu_mem_arena = True
        self._configs: dict[str, str] = {}

    def add_session_config_entry(self, key: str, value: str) -> None:
        """Store an onnxruntime session config entry; vkml keeps it (for get_session_config_entry) and acts on none."""
        self._configs[str(key)] = str(value)

    def get_session_config_entry(self, key: str) -> str:
        """The value add_session_config_entry stored under `key` (KeyError if none)."""
        return self._configs[key]


class RunOptions:
    """onnxruntime.RunOptions: logid names the run in profiles; terminate=True makes run()
    raise at once (onnxruntime's way of cancelling the runs that use these options)."""

    def __init__(self) -> None:
        self.logid = ""
        self.terminate = False
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.only_execute_path_to_fetches = False


@dataclass(frozen=True)
class ModelMetadata:
    """onnxruntime's ModelMetadata, from the model's own fields."""

    producer_name: str
    graph_name: str
    domain: str
    description: str
    graph_description: str
    version: int
    custom_metadata_map: dict[str, str] = field(default_factory=dict)


def devices_from_providers(providers: Sequence[Any], provider_options: Sequence[Mapping[str, Any]] | None,
                           gpu_names: Sequence[str]) -> list[str]:
    """vkml device names for onnxruntime `providers` (names, or (name, options) pairs), in
    order; `gpu_names` are the Vulkan devices there are ("vulkan:0", ...)."""
    if isinstance(providers, str):
        raise TypeError("providers must be a list of provider names, not a string")
    if provider_options is not None and len(provider_options) != len(providers):
        raise ValueError(f"provider_options has {len(provider_options)} entries for {len(providers)} providers")
    out: list[str] = []
    for i, p in enumerate(providers):
        opts: Mapping[str, Any] = {}
        if isinstance(p, (tuple, list)) and len(p) == 2:
            p, opts = p
        if provider_options is not None:
            opts = {**opts, **provider_options[i]}
        if not isinstance(p, str):
            raise TypeError(f"a provider is a name or a (name, options) pair, not {p!r}")
        if p == CPU_EP:
            dev = "cpu"
        elif p == VULKAN_EP:
            raw = opts.get("device_id", 0)
            try:
                idx = int(raw)
            except (TypeError, ValueError):
                raise ValueError(f"{VULKAN_EP}: device_id must be an integer, not {raw!r}") from None
            dev = f"vulkan:{idx}"
            if gpu_names and dev not in gpu_names:
                raise ValueError(f"{VULKAN_EP}: no Vulkan device {idx}; there are {list(gpu_names)}")
        else:
            raise ValueError(f"vkml has no execution provider {p!r}; it offers {list(PROVIDERS)} "
                             f"(Vulkan devices: {list(gpu_names) or 'none'})")
        if dev not in out:
            out.append(dev)
    if not out:
        raise ValueError(f"providers is empty; vkml offers {list(PROVIDERS)}")
    return out


def provider_name(device: str) -> str:
    """The onnxruntime spelling of a vkml device."""
    return CPU_EP if device == "cpu" else VULKAN_EP
