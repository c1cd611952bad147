"""Offsets for a GPU's activations within a run slot: values whose lifetimes do not overlap
share memory, so a slot holds about the peak, not the sum.

Every run slot allocates the same arenas and binds the same offsets, so the layout (and the
command buffers recorded over it) is computed once per concrete plan. An arena never exceeds
`cap` (the device's maxStorageBufferRange): a value lives in one arena, whole.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

INF = 1 << 62  # lifetime end of values that live for the whole run


@dataclass(eq=False)
class Storage:
    """Bytes that one value (and the views aliasing it) occupies on one device."""

    nbytes: int
    start: int  # first time it is written (plan time units: one per GPU node)
    end: int  # last time it is read
    first: Any  # the unit that writes it first
    units: set = field(default_factory=set)  # every unit that touches it
    arena: int = -1
    offset: int = -1

    def touch(self, time: int, unit: Any) -> None:
        self.end = max(self.end, time)
        if unit is not None:
            self.units.add(unit)


def _round(n: int, a: int) -> int:
    return (max(n, 1) + a - 1) // a * a


def layout(storages: Sequence[Storage], align: int, cap: int) -> tuple[list[int], list[tuple[Storage, Storage]]]:
    """First fit, in order of first write. Sets each storage's arena and offset; returns the
    arena sizes and the (earlier, later) pairs that share bytes, which the caller orders."""
    if cap < align:
        raise ValueError(f"arena cap {cap} is below the alignment {align}")
    cap = cap // align * align
    placed: list[list[Storage]] = []
    sizes: list[int] = []
    shared: list[tuple[Storage, Storage]] = []
    for s in sorted(storages, key=lambda s: (s.start, -s.nbytes)):
        size = _round(s.nbytes, align)
        if size > cap:
            raise ValueError(f"a {s.nbytes}-byte value exceeds the largest bindable buffer ({cap} bytes)")
        for a, members in enumerate(placed + [[]]):
            busy = sorted((m.offset, m.offset + _round(m.nbytes, align)) for m in members
                          if not (m.end < s.start or s.end < m.start))
            off = 0
            for lo, hi in busy:
                if off + size <= lo:
                    break
                off = max(off, hi)
            if off + size <= cap:
                break
        if a == len(placed):
            placed.append([])
            sizes.append(0)
        s.arena, s.offset = a, off
        for m in placed[a]:
            mo, me = m.offset, m.offset + _round(m.nbytes, align)
            if mo < off + size and off < me:
                shared.append((m, s))
        placed[a].append(s)
        sizes[a] = max(sizes[a], off + size)
    return sizes, shared
