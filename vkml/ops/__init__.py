"""NumPy implementations of the ONNX operators, one family per module.

Every module in this package is imported here, so adding an op is adding a file (or a class to
one); the ``@register`` decorator puts it in the registry.
"""
import importlib
import pkgutil

from .registry import REQUIRED, Op, lookup, register, registered  # noqa: F401

for _m in pkgutil.iter_modules(__path__):
    if not _m.name.startswith("_") and _m.name != "registry":
        importlib.import_module(f"{__name__}.{_m.name}")
