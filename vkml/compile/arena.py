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
    arena sizes and the (earlier, later) pairs that share bytes, which the caller orders.

    A storage is paired only with the latest earlier occupant of each of its bytes: ordering is
    transitive, so that orders it after every earlier occupant, and a chain of n values reusing
    the same bytes gives n pairs, not n²/2."""
    if cap < align:
        raise ValueError(f"arena cap {cap} is below the alignment {align}")
    cap = cap // align * align
    live: list[list[Storage]] = []  # per arena: storages a later one might still overlap in time
    latest: list[list[tuple[int, int, Storage]]] = []  # per arena: (lo, hi, last occupant), disjoint
    sizes: list[int] = []
    shared: list[tuple[Storage, Storage]] = []
    for s in sorted(storages, key=lambda s: (s.start, -s.nbytes)):
        size = _round(s.nbytes, align)
        if size > cap:
            raise ValueError(f"a {s.nbytes}-byte value exceeds the largest bindable buffer ({cap} bytes)")
        for a in range(len(live) + 1):
            if a < len(live):
                # Starts only grow, so a storage dead before this start is dead for all later ones.
                live[a] = [m for m in live[a] if m.end >= s.start]
            busy = sorted((m.offset, m.offset + _round(m.nbytes, align)) for m in live[a]) if a < len(live) else []
            off = 0
            for lo, hi in busy:
                if off + size <= lo:
                    break
                off = max(off, hi)
            if off + size <= cap:
                break
        if a == len(live):
            live.append([])
            latest.append([])
            sizes.append(0)
        s.arena, s.offset = a, off
        lo, hi = off, off + size
        kept: list[tuple[int, int, Storage]] = []
        paired: set[int] = set()
        for seg_lo, seg_hi, m in latest[a]:
            if seg_hi <= lo or hi <= seg_lo:
                kept.append((seg_lo, seg_hi, m))
                continue
            if id(m) not in paired:
                paired.add(id(m))
                shared.append((m, s))
            if seg_lo < lo:
                kept.append((seg_lo, lo, m))
            if hi < seg_hi:
                kept.append((hi, seg_hi, m))
        kept.append((lo, hi, s))
        kept.sort(key=lambda t: t[0])
        latest[a] = kept
        live[a].append(s)
        sizes[a] = max(sizes[a], hi)
    return sizes, shared
