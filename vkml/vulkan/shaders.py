"""Where the compiled SPIR-V lives, and loading it.

Shaders ship inside the package (vkml/spv/<variant>.spv, built by tools/build_shaders.py);
VKML_SPIRV_DIR points at another folder first (to try shaders without reinstalling).
"""
from __future__ import annotations

import functools
import os

from vkml import config

PACKAGE_SPV = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "spv")
SPIRV_MAGIC = 0x07230203


def search_path() -> list[str]:
    extra = config.spirv_dir()
    return [extra, PACKAGE_SPV] if extra else [PACKAGE_SPV]


@functools.lru_cache(maxsize=None)
def _load(name: str, path: tuple[str, ...]) -> bytes:
    for directory in path:
        file = os.path.join(directory, name + ".spv")
        if os.path.exists(file):
            with open(file, "rb") as f:
                data = f.read()
            if len(data) < 20 or len(data) % 4 or int.from_bytes(data[:4], "little") != SPIRV_MAGIC:
                raise ValueError(f"{file} is not a SPIR-V module")
            return data
    raise FileNotFoundError(
        f"no SPIR-V for shader {name!r} in {', '.join(path)}; rebuild the shaders "
        "(python tools/build_shaders.py, needs glslangValidator) or check the variant name")


def load(name: str) -> bytes:
    """The SPIR-V words of shader variant `name` (e.g. "relu_f32")."""
    if not name or os.sep in name or name.startswith("."):
        raise ValueError(f"bad shader name {name!r}")
    return _load(name, tuple(search_path()))


def available() -> list[str]:
    """Every shader variant name that can be loaded."""
    names = set()
    for directory in search_path():
        if os.path.isdir(directory):
            names.update(f[:-4] for f in os.listdir(directory) if f.endswith(".spv"))
    return sorted(names)
