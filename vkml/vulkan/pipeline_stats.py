"""Pipeline statistics (Pipeline.statistics(), VKML_PIPELINE_STATS) as one short line or JSON rows.

Drivers name their statistics in words ("Register Count", "Local Memory Size"), and a pipeline
may have several executables; a developer comparing tilings wants one line per pipeline, so
names become snake_case keys and values print compactly. Pure Python: no device needed.

Values are the driver's, as it reports them. NVIDIA 580 (H200) reports Register Count, Binary
Size, Stack Size, Local Memory Size and Shared Memory Size, all UINT64; its Local Memory Size
carries 0x10 in the upper 32 bits (68719476736 for a shader with none), the bytes per thread
being the low 32 bits.
"""
from __future__ import annotations

import re
from typing import Any, Iterable


def stat_key(name: str) -> str:
    """"Register Count" -> "register_count": a driver's statistic name as a short key."""
    return "_".join(re.findall(r"[a-z0-9]+", name.lower())) or "?"


def format_value(value: int | float | bool) -> str:
    """A statistic's value in few characters: yes/no, an integer, or 4 significant digits."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def compact(executables: list[dict]) -> str:
    """One line for a pipeline's statistics() : "key=value ..." per executable, each named when
    there are several; "-" when nothing was captured."""
    parts = []
    for ex in executables:
        text = " ".join(f"{stat_key(k)}={format_value(v)}" for k, v in ex["stats"].items()) or "-"
        parts.append(f"{ex['name']}: {text}" if len(executables) > 1 else text)
    return " | ".join(parts) or "-"


def rows(pipelines: Iterable[Any], prefix: str = "") -> list[dict]:
    """JSON-ready {"shader", "spec", "executables"} of the pipelines whose shader starts with
    `prefix`, for results files (executables as Pipeline.statistics() returns them)."""
    return [{"shader": p.shader, "spec": list(p.spec), "executables": p.statistics()}
            for p in pipelines if p.shader.startswith(prefix)]
