"""Run a few ops on a GPU synchronously: for tests and quick experiments, not for speed.

    out = run_ops(0, [("Add", {}, ["a", "b"], ["c"]), ("Relu", {}, ["c"], ["d"])],
                  {"a": a, "b": b})
    out["d"]  # numpy array

Everything is recorded into one command buffer (barriers where ops depend on each other),
submitted once, waited for, and read back. A kernel that reports bad data (Kernel.faults:
Gather's indices out of range) raises the CPU operator's error, as a session run does.
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Mapping, Sequence

import numpy as np

from ..kernels import TensorSpec, Unsupported, get_kernel
from ..kernels.common import FAULT_ATTR
from ..vulkan import device as _device
from ..vulkan._commands import CommandRecorder
from ..vulkan.tensor import DeviceTensor
from .faults import FaultBuffer

Op = tuple[str, Mapping[str, Any], Sequence[str], Sequence[str]]


def run_ops(device, ops: Sequence[Op], feeds: Mapping[str, np.ndarray],
            outputs: Sequence[str] | None = None, consts: bool = True,
            timeout: float | None = 300) -> dict[str, np.ndarray]:
    """Run `ops` ((op_type, attrs, input names, output names) each, "" for an absent input)
    on `device` (an index or a Device); returns the named outputs (default: every op
    output). With consts=True, kernels see the feeds' host values (as for initializers:
    TensorSpec.value and record's consts); alias kernels' outputs share their input's buffer."""
    dev = _device(device) if isinstance(device, int) else device
    tensors: dict[str, DeviceTensor] = {}
    for name, arr in feeds.items():
        tensors[name] = DeviceTensor.from_numpy(dev, np.asarray(arr))
    host = {k: np.asarray(v) for k, v in feeds.items()} if consts else {}
    produced: list[str] = []
    rec = CommandRecorder(dev)
    faults = FaultBuffer(dev, sum(1 for op in ops if getattr(get_kernel(op[0]), "faults", False)))
    for k, (op_type, attrs, ins, outs) in enumerate(ops):
        kernel = get_kernel(op_type)
        if kernel is None:
            raise Unsupported(f"no GPU kernel for {op_type}")
        in_t = []
        for n in ins:
            if not n:
                in_t.append(None)
            elif n not in tensors:
                raise KeyError(f"{op_type}: input {n!r} is neither a feed nor an earlier output")
            else:
                in_t.append(tensors[n])
        specs = [None if t is None else TensorSpec.of(t, host.get(n)) for t, n in zip(in_t, ins)]
        kernel.check(dev, op_type, attrs, specs)
        out_specs = kernel.infer(op_type, attrs, specs)
        if kernel.alias:  # output 0 shares input 0's buffer, under its own shape and dtype (BitCast)
            out_t = [DeviceTensor(in_t[0].view, out_specs[0].shape, out_specs[0].dtype)]
        else:
            out_t = [DeviceTensor.empty(dev, s.shape, s.dtype) for s in out_specs]
        const_vals = {i: host[n] for i, n in enumerate(ins) if n and n in host}
        if kernel.faults:
            attrs = {**attrs, FAULT_ATTR: faults.for_node(SimpleNamespace(name=f"{op_type}#{k}", op_type=op_type))}
        kernel.record(rec, op_type, attrs, in_t, out_t, const_vals)
        for name, t in zip(outs, out_t):
            tensors[name] = t
            produced.append(name)
    rec.finish().run(timeout=timeout)
    err = faults.take()
    if err is not None:
        raise err
    names = list(outputs) if outputs is not None else produced
    return {n: tensors[n].numpy() for n in names}
