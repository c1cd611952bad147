"""The environment of the suite's child processes (first_run.py, memory.py): they run
`sys.executable` and must import the vkml this process measures, wherever it came from (a
wheel, an editable install, a checkout on the path)."""
from __future__ import annotations

import os
import site

import vkml


def vkml_root() -> str:
    """The folder that holds the vkml package this process imported."""
    return os.path.dirname(os.path.dirname(os.path.abspath(vkml.__file__)))


def same_vkml_env(**extra: str) -> dict[str, str]:
    """os.environ with `extra` set and, unless it is a site-packages folder (which a child finds
    anyway, and which must not go ahead of the standard library), vkml_root() first on
    PYTHONPATH."""
    env = dict(os.environ, **extra)
    root = os.path.realpath(vkml_root())
    sites = [*site.getsitepackages(), site.getusersitepackages()]
    if root not in {os.path.realpath(p) for p in sites}:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    return env
