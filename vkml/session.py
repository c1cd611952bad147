"""InferenceSession: load → graph → (placement) → plan → run, shaped like onnxruntime's."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from . import dtypes
from .devices import resolve_devices
from .executor import ParallelPlan, parallel_width, run_plan
from .graph import Dim, TensorDesc
from .onnx_loader import Model, load_model
from .plan import Plan, Runtime


@dataclass(frozen=True)
class NodeArg:
    """An input or output as onnxruntime describes it."""

    name: str
    shape: list[Dim] | None
    type: str

    @classmethod
    def of(cls, name: str, desc: TensorDesc) -> "NodeArg":
        if desc.kind == "tensor":
            return cls(name, None if desc.shape is None else list(desc.shape), dtypes.type_name(desc.dtype))
        inner = NodeArg.of(name, desc.elem) if desc.elem is not None else None
        return cls(name, None, f"{desc.kind}({inner.type if inner else '?'})")


class InferenceSession:
    """Runs one ONNX model. ``run`` may be called from many threads at once."""

    def __init__(self, model: str | bytes | os.PathLike | Any, devices: Sequence[str] | None = None,
                 *, executor: str = "auto"):
        """executor: "parallel" runs independent branches at once on the scheduler's pool,
        "sequential" runs steps in order on the calling thread, "auto" picks parallel when the
        graph has independent branches with enough work in them to pay for the hand-offs."""
        if executor not in ("auto", "parallel", "sequential"):
            raise ValueError(f"executor must be 'auto', 'parallel' or 'sequential', not {executor!r}")
        self.devices = resolve_devices(devices)
        if self.devices != ["cpu"]:
            # GPU kernels exist (vkml.kernels) but placement and GPU chunks do not yet: refuse
            # rather than silently run on the CPU.
            raise ValueError(f"devices={self.devices}: sessions run on ['cpu'] only until GPU "
                             "placement lands; vkml.devices() lists what is present")
        self.model: Model = load_model(model)
        g = self.model.graph
        self._runtime = Runtime(self.model.weights)
        self._plan = self._runtime.plan(g)
        self._required = [n for n in g.inputs if n not in self.model.overridable]
        self._inputs = [NodeArg.of(n, g.values[n]) for n in self._required]
        self._overridable = [NodeArg.of(n, g.values[n]) for n in g.inputs if n in self.model.overridable]
        self._outputs = [NodeArg.of(n, g.values.get(n, TensorDesc(None, None))) for n in g.outputs]
        self._out_index = {n: i for i, n in enumerate(g.outputs)}
        self._parallel = _choose_executor(self._plan, executor)

    # ------------------------------------------------------------ description
    def get_inputs(self) -> list[NodeArg]:
        return list(self._inputs)

    def get_outputs(self) -> list[NodeArg]:
        return list(self._outputs)

    def get_overridable_initializers(self) -> list[NodeArg]:
        return list(self._overridable)

    def get_providers(self) -> list[str]:
        return list(self.devices)

    # ------------------------------------------------------------ running
    def run(self, output_names: Sequence[str] | None, input_feed: Mapping[str, Any],
            run_options: Any = None) -> list[Any]:
        """Outputs named (all when None), in that order, as NumPy arrays."""
        if output_names is None:
            picks = list(range(len(self._out_index)))
        else:
            if isinstance(output_names, str):
                raise TypeError("output_names must be a list of names, not a string")
            unknown = [n for n in output_names if n not in self._out_index]
            if unknown:
                raise ValueError(f"unknown output name(s) {unknown}; the model's outputs are {list(self._out_index)}")
            picks = [self._out_index[n] for n in output_names]
        feeds = self._check_feed(input_feed)
        outs = self._parallel.run(feeds) if self._parallel else run_plan(self._plan, feeds)
        return [outs[i] for i in picks]

    def _check_feed(self, feed: Mapping[str, Any]) -> dict[str, Any]:
        if not isinstance(feed, Mapping):
            raise TypeError(f"input_feed must be a dict of name → array, not {type(feed).__name__}")
        g = self.model.graph
        allowed = set(g.inputs)
        extra = [n for n in feed if n not in allowed]
        if extra:
            raise ValueError(f"unknown input name(s) {extra}; the model's inputs are {self._required}"
                             + (f" (overridable initializers: {sorted(self.model.overridable)})"
                                if self.model.overridable else ""))
        missing = [n for n in self._required if n not in feed]
        if missing:
            raise ValueError(f"missing input(s) {missing}; the model needs {self._required}")
        symbols: dict[str, tuple[int, str]] = {}
        out: dict[str, Any] = {}
        for name, value in feed.items():
            out[name] = _check_value(name, value, g.values.get(name), symbols)
        return out


_PARALLEL_MIN_ELEMENTS = 1 << 15  # mean output size per step that pays for a pool hand-off


def _choose_executor(plan: Plan, executor: str) -> ParallelPlan | None:
    if executor == "sequential" or not plan.steps:
        return None
    try:
        from . import _sched
    except ImportError:
        if executor == "parallel":
            raise RuntimeError("the scheduler extension (vkml._sched) is not built") from None
        return None
    if executor == "auto":
        if _sched.pool_size() < 2 or parallel_width(plan) < 2:
            return None
        sizes = [plan.graph.values.get(o) for st in plan.steps for o in st.node.outputs if o]
        elements = sum((int(np.prod(d.shape)) if d is not None and d.static else _PARALLEL_MIN_ELEMENTS)
                       for d in sizes)
        if elements / len(plan.steps) < _PARALLEL_MIN_ELEMENTS:
            return None
    return ParallelPlan(plan)


def _check_value(name: str, value: Any, desc: TensorDesc | None, symbols: dict[str, tuple[int, str]]) -> Any:
    if desc is None or desc.kind != "tensor":
        if desc is not None and desc.kind == "sequence" and not isinstance(value, list):
            raise ValueError(f"input {name!r}: expected a sequence (list of arrays), got {type(value).__name__}")
        return value
    if isinstance(value, list):
        value = np.asarray(value)
    if not isinstance(value, np.ndarray):
        if isinstance(value, (bool, int, float, complex, np.generic)):
            value = np.asarray(value)
        else:
            raise ValueError(f"input {name!r}: expected a NumPy array, got {type(value).__name__}")
    want = desc.dtype
    if want is not None and value.dtype != want:
        if not (want.kind == "O" and value.dtype.kind in "OUS"):
            raise ValueError(f"input {name!r}: expected {dtypes.type_name(want)}, got "
                             f"{dtypes.type_name(value.dtype) if value.dtype in dtypes._NP_TO_ONNX else value.dtype}")
    if desc.shape is not None:
        if value.ndim != len(desc.shape):
            raise ValueError(f"input {name!r}: expected rank {len(desc.shape)} {_fmt(desc.shape)}, "
                             f"got rank {value.ndim} {list(value.shape)}")
        for axis, (d, n) in enumerate(zip(desc.shape, value.shape)):
            if isinstance(d, int) and d != n:
                raise ValueError(f"input {name!r}: dimension {axis} must be {d} {_fmt(desc.shape)}, "
                                 f"got shape {list(value.shape)}")
            if isinstance(d, str):
                seen = symbols.setdefault(d, (n, name))
                if seen[0] != n:
                    raise ValueError(f"input {name!r}: dimension {axis} ({d!r}) is {n}, but {d!r} is "
                                     f"{seen[0]} in input {seen[1]!r}")
    return value


def _fmt(shape) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"
