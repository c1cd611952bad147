"""Fault buffers: a GPU kernel's way to raise what its CPU operator raises.

A shader cannot raise, so a kernel that validates data (Gather's indices: Kernel.faults)
binds its run slot's fault buffer and records one site per node: the CPU operator's
message prefix and the dimension it checks against. A bad value sets word 0 and keeps the
first bad value per site (shaders/include/vkml_fault.glsl). The run reads word 0 after the
wait that ends it (mapped memory: no submit, no extra round trip) and, when it is set,
raises the CPU operator's own error for the first failing site, then clears the buffer for
the slot's next run. Where several values of one node are bad, the one named is the first a
GPU thread found, not necessarily the one the CPU would name (RoiAlign's shader scans its
batch indices in order, so it names the CPU's).

The error is ops.gather.norm_index's for the value and the site's dimension, unless the site
carries its own `error` (an operator whose message is not an index's: RoiAlign names the roi,
which its shader writes into the site's fourth word, `aux`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

HEADER_WORDS = 4  # word 0: any fault (the rest unused)
SITE_WORDS = 4    # per site: flag, low and high 32 bits of the bad value, aux (0 unless the shader sets it)


@dataclass(frozen=True)
class Site:
    node: object  # the graph Node (name, op_type) the error names
    what: str     # the CPU operator's prefix, e.g. "Gather indices"
    dim: int      # the dimension the value was checked against
    # The CPU operator's exception for (node, bad value, aux word) where it is not an index
    # error (RoiAlign's batch indices); None: norm_index's.
    error: Callable[[object, int, int], Exception] | None = None


class NodeFault:
    """What one node's kernel sees as attrs[kernels.common.FAULT_ATTR]."""

    __slots__ = ("buffer", "node")

    def __init__(self, buffer: "FaultBuffer", node):
        self.buffer = buffer
        self.node = node

    @property
    def view(self):
        return self.buffer.view

    def site(self, what: str, dim: int, error: Callable[[object, int, int], Exception] | None = None) -> int:
        """A new site for this node; its number goes into the shader's push constants.
        `error`: see Site."""
        return self.buffer.add(Site(self.node, what, int(dim), error))


class FaultBuffer:
    """One run slot's fault buffer on one device, for up to `capacity` sites."""

    def __init__(self, device, capacity: int):
        self.capacity = int(capacity)
        self.view = device.alloc(4 * (HEADER_WORDS + SITE_WORDS * self.capacity), "readback")
        self.view.write(bytes(self.view.size))
        self.sites: list[Site] = []
        self._word = np.zeros(1, np.uint32)

    def for_node(self, node) -> NodeFault:
        return NodeFault(self, node)

    def add(self, site: Site) -> int:
        if len(self.sites) >= self.capacity:
            raise ValueError(f"fault buffer full: {self.capacity} sites (a kernel records more than one site per "
                             f"node; the slot sizes the buffer by Kernel.faults nodes)")
        self.sites.append(site)
        return len(self.sites) - 1

    def take(self) -> Exception | None:
        """The CPU operator's error for the first site that faulted in the run that just
        ended (None when none did), clearing the buffer for the next run. Call only when the
        device is done with the slot."""
        self.view.read_mapped(self._word)
        if not self._word[0]:
            return None
        words = np.zeros(self.view.size // 4, np.uint32)
        self.view.read_mapped(words)
        self.view.write(bytes(self.view.size))
        for k, site in enumerate(self.sites):
            flag, lo, hi, aux = words[HEADER_WORDS + SITE_WORDS * k:HEADER_WORDS + SITE_WORDS * (k + 1)]
            if flag:
                bad = int(np.array([lo, hi], np.uint32).view(np.int64)[0])
                return _cpu_error(site, bad, int(aux))
        return RuntimeError("a GPU kernel reported a fault without naming its node (a vkml bug)")


def _cpu_error(site: Site, bad: int, aux: int = 0) -> Exception:
    """The exception the CPU run raises for this node and value: the operator's own check
    (ops.gather.norm_index, or the site's `error`) fails, wrapped as executor failures are."""
    from .executor import _failure
    from ..ops.gather import norm_index

    if site.error is not None:
        e = site.error(site.node, bad, aux)
        err = _failure(site.node, e)
        err.__cause__ = e
        err.add_note("(reported by the node's GPU kernel)")
        return err
    try:
        norm_index(np.array([bad], np.int64), site.dim, site.what)
    except ValueError as e:
        err = _failure(site.node, e)
        err.__cause__ = e
        err.add_note("(reported by the node's GPU kernel)")
        return err
    return RuntimeError(f"node {site.node.name!r} ({site.node.op_type}): the GPU kernel reported "
                        f"{site.what} value {bad}, which is in range for a dimension of size {site.dim} (a vkml bug)")
