"""Compiling one input signature: from the typed graph to the plan the runtime runs.

A GPU session compiles once per input signature (shapes, dtypes, the output device, the values
of small shape-like inputs); vkml/runtime/gpurun.GpuRunner keeps the results and runs them. The
session hands the runner `compile_signature` with the model and its own choices bound, so the
runtime never imports this layer. Four named stages, each a plain function, with a small data
type between them:

    Signature, Target
        |  specialize   every value's type for these inputs, what became constant folded,
        |               Ifs with a known condition replaced by their branch, Ifs on data
        v               found (compile/specialize.concretize, compile/inline_if, compile/guards)
    Concrete
        |  rewrite      NonMaxSuppression's rows padded to their bound (compile/ragged), STFT
        |               as Gather, Mul and DFT (compile/decompose),
        |               BatchNormalization and constant bias Adds folded into the Conv/MatMul
        v               before them, elementwise chains fused, Conv epilogues fused
    Concrete            (compile/fold_bn, fold_bias, fusion, epilogue)
        |  place        a device per live node and the report of why; each GPU node's kernel
        v               looked up, checked and inferred once (a kernels.registry.NodeKernel)
    Placed              (compile/specialize.device_specs, place_concrete; compile/placement)
        |  partition    units (cpu, gpu chunks, uploads, readbacks), waits, arena layout
        v               (compile/gpuplan.build, compile/arena)
    Compiled            what the runtime's ConcretePlan runs

Device facts come in with the Target (vkml.runtime.devices.GpuFacts: budget, alignment,
largest binding, and the device its kernels check on), read by the runtime when it asks for
a compile: a GPU's budget changes with what else holds memory.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from ..ir.graph import Graph, TensorDesc
from ..kernels.registry import NodeKernel
from . import fusion, guards
from .decompose import decompose
from .epilogue import fuse_epilogues
from .layout import collapse_layouts
from .fold_bias import fold_bias_adds
from .fold_bn import fold_batchnorm
from .half import to_half
from .ragged import pad_ragged
from .gpuplan import UnitPlan, build
from .placement import Placement
from .specialize import Concrete, concretize, device_specs, place_concrete


@dataclass(frozen=True)
class Signature:
    """What one compile is for: the inputs' types, the overridable initializers fed this time
    (inputs, not constants, in this signature), where outputs go, and the values of small
    shape-like inputs the plan is made for (a Reshape's shape, a Resize's scales)."""

    inputs: Mapping[str, TensorDesc]
    fed: frozenset[str] = frozenset()
    output_device: str | None = None
    known: Mapping[str, np.ndarray] = field(default_factory=dict)


@dataclass(frozen=True)
class Target:
    """What it is compiled for: the session's devices in order of preference (the CPU last),
    the facts of each GPU (vkml.runtime.devices.GpuFacts, the output device's too), nodes the
    user forced onto a device, nodes whose GPU kernel failed to record before (node -> why:
    they stay off the GPUs), and whether the rewrites run."""

    devices: tuple[str, ...]
    gpus: Mapping[str, Any]
    forced: Mapping[str, str] = field(default_factory=dict)
    broken: Mapping[str, str] = field(default_factory=dict)
    fuse: bool = True
    precision: str = "fp32"  # "fp16": a float32 model's heavy ops in float16 (compile/half.py)


@dataclass
class Placed:
    """A device per live node (Placement, in concrete.live's order), the report row of every
    node of the graph, and the kernel of each node placed on a GPU (id(node) -> NodeKernel)."""

    placement: Placement
    report: list[dict]
    kernels: dict[int, NodeKernel]


@dataclass
class Compiled:
    """One input signature compiled: what vkml.runtime.gpurun.ConcretePlan runs."""

    signature: Signature
    concrete: Concrete  # values, constants, live nodes, fused chains
    placement: Placement
    report: list[dict]  # InferenceSession.placement()
    units: UnitPlan  # units, waits, arenas; .kernels: id(node) -> NodeKernel of each GPU node
    outputs: tuple[str, ...] = ()  # what it computes: the graph's outputs, or those asked for
    # Conditions of Ifs on data that plans may be made per value of (compile/guards.py)
    guards: tuple[str, ...] = ()

    @property
    def kernels(self) -> dict[int, NodeKernel]:
        return self.units.kernels


# ---------------------------------------------------------------------- the stages
def specialize(graph: Graph, weights: Mapping[str, np.ndarray], sig: Signature,
               keep: frozenset[str] = frozenset()) -> Concrete:
    """Every value's type for the signature's inputs; what became constant, folded; Ifs whose
    condition became known, replaced by the branch they take (compile/inline_if; not those in
    `keep`, placed by the user)."""
    return concretize(graph, weights, sig.inputs, sig.fed, sig.known, keep)


def rewrite(graph: Graph, c: Concrete, keep: frozenset[str], precision: str = "fp32", fuse: bool = True,
            pad: bool = True) -> Concrete:
    """The compile rewrites on `c` (made fresh by specialize, and changed in place): with `pad`
    (a GPU is in the plan), NonMaxSuppression's rows are computed padded to their bound with
    what reads them row by row (compile/ragged.py) and ops without a GPU kernel are written as
    ops with one (compile/decompose.py: STFT, Shrink, MVN, Binarizer, bool reductions, 8-bit
    MaxPool); Conv +
    BatchNormalization and constant bias Adds fold into the Conv (or MatMul) before them, chains
    of views and Transposes before a MatMul become one Reshape and Transpose (compile/layout.py), under
    precision "fp16" the heavy ops go to float16 (compile/half.py), chains of elementwise ops
    become one dispatch, and so do Convs with what follows them; with `fuse` off only the
    precision step runs. `keep`: nodes left alone (those the user placed). c.fused says which
    graph nodes each new node runs (the nodes of an inlined If's branch run that If)."""
    steps = [lambda live: pad_ragged(live, c.values, c.consts, graph.outputs, keep),
             lambda live: decompose(live, c.values, c.consts, graph.outputs, keep)] if pad else []
    if fuse:
        steps += [lambda live: fold_batchnorm(live, c.values, c.consts, graph.outputs, keep),
                  lambda live: fold_bias_adds(live, c.values, c.consts, graph.outputs, keep),
                  lambda live: collapse_layouts(live, c.values, c.consts, graph.outputs, keep)]
    if precision == "fp16":
        steps.append(lambda live: to_half(live, c.values, c.consts, graph.inputs, graph.outputs, keep))
    if fuse:
        steps += [lambda live: fusion.fuse(live, c.values, c.consts, graph.outputs, keep),
                  lambda live: fuse_epilogues(live, c.values, graph.outputs, keep, c.consts)]
    for step in steps:
        c.live, more = step(c.live)
        for name, chain in more.items():  # (in terms of the graph's own nodes, each once)
            c.fused[name] = list(dict.fromkeys(o for n in chain for o in c.fused.pop(n.name, [n])))
    return c


def place(graph: Graph, c: Concrete, target: Target) -> Placed:
    """Each live node on the first device that runs it and has room; a GPU runs a node when
    its kernel accepts it there (Kernel.check), and that kernel, checked and inferred, is kept
    for the later stages and the runtime's recording."""
    resolved: dict[tuple[int, str], NodeKernel] = {}
    specs = device_specs(target.devices, target.gpus, c, target.broken, resolved)
    placement, report = place_concrete(graph, c, specs, target.forced)
    kernels = {id(n): resolved[(id(n), d)] for n, d in zip(c.live, placement.devices) if d != "cpu"}
    return Placed(placement, report, kernels)


def partition(graph: Graph, c: Concrete, placed: Placed, output_device: str | None,
              gpus: Mapping[str, Any]) -> UnitPlan:
    """The placed nodes cut into units with their waits, and each GPU's arenas."""
    return build(graph, c, placed.placement.devices, output_device, gpus, placed.kernels)


def compile_signature(graph: Graph, weights: Mapping[str, np.ndarray], inputs: Mapping[str, TensorDesc], *,
                      fed: frozenset[str] = frozenset(), output_device: str | None = None,
                      known: Mapping[str, np.ndarray] | None = None, devices: Sequence[str],
                      gpus: Mapping[str, Any], forced: Mapping[str, str] | None = None,
                      broken: Mapping[str, str] | None = None, fuse: bool = True,
                      precision: str = "fp32", outputs: Sequence[str] | None = None) -> Compiled:
    """Compile `graph` for one input signature (the arguments: Signature and Target). The
    session binds graph, weights, devices, forced, fuse and precision; the runtime gives the rest.
    `outputs`: compile only what these values need, with them as the outputs (the plan of an If
    condition's guard, compile/guards.py). `known` may hold guard values as well as inputs: their
    Ifs take their branches, and the nodes that only made them are left out."""
    if outputs is not None:
        graph = guards.only(graph, outputs)
    sig = Signature(dict(inputs), frozenset(fed), output_device, dict(known or {}))
    target = Target(tuple(devices), dict(gpus), dict(forced or {}), dict(broken or {}), bool(fuse), precision)
    keep = frozenset(target.forced)
    c = specialize(graph, weights, sig, keep)
    gpu = any(d != "cpu" for d in target.devices)
    given = set(sig.known) - set(graph.inputs)
    if given:
        guards.drop_guard_producers(c, graph.outputs, given)
    if outputs is not None:
        guards.drop_unneeded(c, graph.outputs)
    found = guards.guard_conditions(c, graph.outputs, keep) if gpu else ()
    c = rewrite(graph, c, keep, target.precision, target.fuse, pad=gpu)
    placed = place(graph, c, target)
    units = partition(graph, c, placed, sig.output_device, target.gpus)
    return Compiled(sig, c, placed.placement, placed.report, units, tuple(graph.outputs), found)
