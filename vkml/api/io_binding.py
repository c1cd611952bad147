"""onnxruntime's IOBinding over vkml.Tensor, so that ORT code using io_binding runs unchanged:

    binding = sess.io_binding()
    binding.bind_ortvalue_input("x", vkml.Tensor.from_numpy(x, "vulkan:0"))   # or bind_cpu_input
    binding.bind_output("y", "cuda", 0)            # "cuda" (ORT code's spelling) is vulkan:0
    sess.run_with_iobinding(binding)
    y = binding.get_outputs()[0]                   # a vkml.Tensor on vulkan:0; feeds the next run as is
    y_host = binding.copy_outputs_to_cpu()[0]      # NumPy

What differs from onnxruntime, because vkml has no raw device pointers and allocates its outputs
itself: bind_input takes a vkml.Tensor (or a NumPy array for "cpu") where ORT takes buffer_ptr,
bind_output takes no buffer_ptr, bind_ortvalue_output is refused, and vkml.Tensor stands for
OrtValue (vkml.Tensor.from_numpy(arr, "vulkan:0") for OrtValue.ortvalue_from_numpy(arr, "cuda", 0)).

A run reads the bound inputs as they are then (a NumPy array bound with bind_cpu_input is held,
not copied, as ORT holds it: change it in place and the next run sees the change). As in ORT,
only bound outputs are computed and returned, in the order they were first bound (binding a name
again replaces it in place), and an IOBinding is not for use by several threads at once.
Outputs bound to the CPU and to a GPU in one binding: the one run keeps its outputs on that GPU,
and the CPU-bound ones are then read back (as a run for the host would read them).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..runtime.tensor import Tensor
from .feeds import check_tensor

# ORT's device_type spellings that mean "a GPU": vkml's GPUs are Vulkan devices.
_GPU_TYPES = ("cuda", "gpu", "vulkan")


def device_name(device_type: Any, device_id: Any, what: str) -> str:
    """vkml's device for onnxruntime's (device_type, device_id): "cpu", or "vulkan:<device_id>"
    for "cuda", "gpu" and "vulkan" (case-insensitive); a vkml name such as "vulkan:1" is taken
    as it is. `what` names the binding in errors."""
    if not isinstance(device_type, str):
        raise ValueError(f"{what}: device_type must be a string ('cpu', 'cuda', 'gpu' or 'vulkan'), "
                         f"not {device_type!r}")
    kind = device_type.strip().lower()
    if kind == "cpu":
        return "cpu"
    if kind.startswith("vulkan:") and kind[7:].isdigit():
        return f"vulkan:{int(kind[7:])}"
    if kind not in _GPU_TYPES:
        raise ValueError(f"{what}: vkml has no device type {device_type!r}; it takes 'cpu', or 'cuda', 'gpu' or "
                         f"'vulkan' (all three mean the Vulkan device numbered device_id), or a name like 'vulkan:0'")
    if isinstance(device_id, bool) or not isinstance(device_id, (int, np.integer)) or device_id < 0:
        raise ValueError(f"{what}: device_id must be a device number (0, 1, ...), not {device_id!r}")
    return f"vulkan:{int(device_id)}"


class IOBinding:
    """onnxruntime.IOBinding for a vkml.InferenceSession: make it with session.io_binding(),
    run it with session.run_with_iobinding(binding). See the module docstring."""

    def __init__(self, session: Any):
        self._session = session
        self._inputs: dict[str, Any] = {}   # name -> NumPy array or vkml.Tensor, in binding order
        self._outputs: dict[str, str] = {}  # name -> vkml device, in binding order
        self._results: list[Any] | None = None

    # ------------------------------------------------------------ inputs
    def bind_cpu_input(self, name: str, arr_on_cpu: Any) -> None:
        """Bind a host array to input `name` (held, not copied)."""
        if isinstance(arr_on_cpu, Tensor):
            raise TypeError(f"bind_cpu_input({name!r}): got a vkml.Tensor; bind it with bind_ortvalue_input")
        if not isinstance(arr_on_cpu, np.ndarray):
            try:
                arr_on_cpu = np.asarray(arr_on_cpu)
            except (ValueError, TypeError, OverflowError) as e:
                raise TypeError(f"bind_cpu_input({name!r}): expected a NumPy array, got "
                                f"{type(arr_on_cpu).__name__} ({e})") from None
        self._bind_input(name, arr_on_cpu, "bind_cpu_input")

    def bind_input(self, name: str, device_type: str, device_id: int, element_type: Any, shape: Any,
                   buffer_ptr: Any) -> None:
        """onnxruntime's raw-pointer binding. vkml has no raw device pointers: buffer_ptr must be
        a vkml.Tensor on the device named by device_type/device_id (or a NumPy array, with
        device_type "cpu"), whose dtype and shape are element_type and shape. An address (an
        int) is a TypeError: bind a vkml.Tensor with bind_ortvalue_input, or an array with
        bind_cpu_input."""
        what = f"bind_input({name!r})"
        dev = device_name(device_type, device_id, what)
        if isinstance(buffer_ptr, Tensor):
            if buffer_ptr.device != dev:
                raise ValueError(f"{what}: the tensor is on {buffer_ptr.device}, but device_type={device_type!r} "
                                 f"device_id={device_id!r} names {dev}")
        elif isinstance(buffer_ptr, np.ndarray):
            if dev != "cpu":
                raise ValueError(f"{what}: a NumPy array is host memory, but device_type={device_type!r} names "
                                 f"{dev}; upload it with vkml.Tensor.from_numpy(arr, {dev!r}) and bind that")
        else:
            raise TypeError(f"{what}: vkml has no raw device pointers, so buffer_ptr cannot be "
                            f"{type(buffer_ptr).__name__} {buffer_ptr!r}: bind a vkml.Tensor with "
                            f"bind_ortvalue_input({name!r}, vkml.Tensor.from_numpy(arr, device)), or a host "
                            f"array with bind_cpu_input({name!r}, arr)")
        if element_type is not None:
            try:
                want = np.dtype(element_type)
            except TypeError:
                raise TypeError(f"{what}: element_type must be a NumPy type such as np.float32, "
                                f"not {element_type!r}") from None
            if buffer_ptr.dtype != want:
                raise ValueError(f"{what}: element_type is {want}, but the buffer holds {buffer_ptr.dtype}")
        if shape is not None and tuple(int(s) for s in shape) != tuple(buffer_ptr.shape):
            raise ValueError(f"{what}: shape is {list(shape)}, but the buffer's is {list(buffer_ptr.shape)}")
        self._bind_input(name, buffer_ptr, "bind_input")

    def bind_ortvalue_input(self, name: str, ortvalue: Any) -> None:
        """Bind a vkml.Tensor (vkml's OrtValue: on a GPU it stays there, no host copy) or a
        NumPy array to input `name`."""
        if not isinstance(ortvalue, (Tensor, np.ndarray)):
            raise TypeError(f"bind_ortvalue_input({name!r}): expected a vkml.Tensor (vkml's OrtValue: "
                            f"vkml.Tensor.from_numpy(arr, device)) or a NumPy array, got {type(ortvalue).__name__}")
        self._bind_input(name, ortvalue, "bind_ortvalue_input")

    def _bind_input(self, name: Any, value: Any, method: str) -> None:
        sess = self._session
        g = sess.model.graph
        if not isinstance(name, str) or name not in g.inputs:
            over = sorted(sess.model.overridable)
            raise ValueError(f"{method}: unknown input name {name!r}; the model's inputs are "
                             f"{[a.name for a in sess.get_inputs()]}"
                             + (f" (overridable initializers: {over})" if over else ""))
        desc = g.values.get(name)
        if desc is not None and desc.kind == "tensor":
            check_tensor(name, value, desc, {})  # dtype, rank, fixed dimensions, named
        self._inputs[name] = value

    def synchronize_inputs(self) -> None:
        """Nothing to wait for: a vkml.Tensor is complete when it is handed out (its upload or
        the run that made it has finished), so bound inputs are always ready."""

    def clear_binding_inputs(self) -> None:
        """Forget every bound input."""
        self._inputs.clear()

    # ------------------------------------------------------------ outputs
    def bind_output(self, name: str, device_type: str = "cpu", device_id: int = 0, element_type: Any = None,
                    shape: Any = None, buffer_ptr: Any = None) -> None:
        """Have the next runs compute output `name` onto a device: device_type "cpu" (the default)
        gives a vkml.Tensor on "cpu"; "cuda", "gpu" or "vulkan" give one on "vulkan:<device_id>",
        where it stays (ORT code written for CUDA says "cuda": on vkml that is the Vulkan device
        with that number). vkml allocates outputs itself: buffer_ptr is refused (ValueError), and
        element_type and shape, which onnxruntime only reads with a buffer_ptr, are ignored."""
        what = f"bind_output({name!r})"
        self._check_output(name, what)
        if buffer_ptr is not None:
            raise ValueError(f"{what}: vkml allocates its outputs itself and takes no buffer_ptr; bind the output "
                             f"to a device (bind_output({name!r}, {device_type!r}, {device_id!r})) and read it "
                             f"with get_outputs()")
        self._outputs[name] = device_name(device_type, device_id, what)
        self._results = None

    def bind_ortvalue_output(self, name: str, ortvalue: Any) -> None:
        """Refused (ValueError): vkml allocates its outputs itself and cannot write into a given
        tensor; bind_output(name, device_type, device_id) binds the output to a device instead."""
        what = f"bind_ortvalue_output({name!r})"
        self._check_output(name, what)
        raise ValueError(f"{what}: vkml allocates its outputs itself and cannot write into a given tensor; use "
                         f"bind_output({name!r}, 'cuda' or 'cpu', device_id) and read it with get_outputs()")

    def _check_output(self, name: Any, what: str) -> None:
        known = self._session._out_index
        if not isinstance(name, str) or name not in known:
            raise ValueError(f"{what}: unknown output name {name!r}; the model's outputs are {list(known)}")

    def synchronize_outputs(self) -> None:
        """Nothing to wait for: run_with_iobinding returns once the run's GPU work is done, so
        the outputs are complete (vkml runs are synchronous when run returns)."""

    def clear_binding_outputs(self) -> None:
        """Forget every bound output and the latest run's results."""
        self._outputs.clear()
        self._results = None

    def get_outputs(self) -> list[Any]:
        """The latest run's outputs, in the order they were bound: vkml.Tensors on their bound
        devices (ORT's OrtValues; non-tensor outputs, such as sequences, as run returns them)."""
        if self._results is None:
            raise RuntimeError("no outputs yet: bind them with bind_output and call "
                               "session.run_with_iobinding(binding) first")
        return list(self._results)

    get_outputs_as_ortvaluevector = get_outputs

    def copy_outputs_to_cpu(self) -> list[Any]:
        """The latest run's outputs as NumPy arrays (read back from a GPU), in the bound order."""
        return [o.numpy() if isinstance(o, Tensor) else o for o in self.get_outputs()]

    # ------------------------------------------------------------ running
    def _run(self, run_options: Any) -> None:
        """session.run_with_iobinding's work. One run for every bound output: with
        output_device set to the first GPU named among the bindings (so those outputs stay
        there), then outputs bound elsewhere are moved: read back for "cpu" (what a run for the
        host would do anyway), through the host for another GPU."""
        sess = self._session
        if not self._outputs:
            raise ValueError("no output is bound: bind the ones you want with bind_output(name, device_type) "
                             f"(the model's outputs are {list(sess._out_index)})")
        missing = [n for n in sess._required if n not in self._inputs]
        if missing:
            raise ValueError(f"input(s) {missing} not bound; the model needs {sess._required}: bind them with "
                             f"bind_cpu_input or bind_ortvalue_input")
        names = list(self._outputs)
        devs = [self._outputs[n] for n in names]
        main = next((d for d in devs if d != "cpu"), "cpu")
        self._results = None
        outs = sess.run(names, dict(self._inputs), run_options, output_device=main)
        for i, (o, d) in enumerate(zip(outs, devs)):
            if d != main and isinstance(o, Tensor):
                outs[i] = Tensor(o.numpy(), "cpu") if d == "cpu" else Tensor.from_numpy(o.numpy(), d)
        self._results = outs
