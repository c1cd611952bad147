"""The package's import cycles (tools/import_graph.py) are exactly the allowed ones: a new cycle
fails here, and so does a removed one until it leaves the list. Print them with
`.venv/bin/python tools/import_graph.py`."""
from __future__ import annotations

import importlib.util
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, "tools", "import_graph.py")

# Cycles that remain, each with a comment saying what it would take to cut it. Empty since #16
# (plan <-> executor, graph <-> ops.registry, cli <-> benchmarks, session <-> api.io_binding,
# kernels.matmul <-> kernels.matmul_coop were cut): keep it so.
ALLOWED: set[frozenset[str]] = set()


def _tool():
    spec = importlib.util.spec_from_file_location("import_graph", TOOL)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["import_graph"] = mod  # (dataclasses look their module up while the class is made)
    try:
        spec.loader.exec_module(mod)
    finally:
        del sys.modules["import_graph"]
    return mod


def test_cycles_are_the_allowed_ones():
    tool = _tool()
    found = tool.edges()
    have = set(tool.cycles(found))

    def show(cycles):
        return "\n".join("  " + ", ".join(sorted(c)) for c in sorted(cycles, key=sorted)) or "  (none)"

    assert have == ALLOWED, (
        f"new import cycles (cut them; `python tools/import_graph.py` shows the edges):\n"
        f"{show(have - ALLOWED)}\n"
        f"allowed cycles that are gone (take them off ALLOWED):\n{show(ALLOWED - have)}")


def test_tool_resolves_relative_lazy_and_typing_imports(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .a import f\n")
    (pkg / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .sub import b\n"
                              "def f():\n    from pkg.sub.b import g\n    return g\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text("from .. import a\nfrom . import c\nimport numpy\n")
    (pkg / "sub" / "c.py").write_text("from ..sub import b\nfrom .. import missing_name\n")
    (pkg / "ext.pyx").write_text("")
    (pkg / "d.py").write_text("from . import ext\n")
    tool = _tool()
    found = {(e.source, e.target, e.kind) for e in tool.edges(tmp_path, "pkg")}
    assert found == {
        ("pkg", "pkg.a", "top"),
        ("pkg.a", "pkg.sub.b", "typing"),
        ("pkg.a", "pkg.sub.b", "lazy"),
        ("pkg.sub.b", "pkg.a", "top"),
        ("pkg.sub.b", "pkg.sub.c", "top"),
        ("pkg.sub.c", "pkg.sub.b", "top"),
        ("pkg.sub.c", "pkg", "top"),  # a name from the package's __init__
        ("pkg.d", "pkg.ext", "top"),  # a Cython module: known, not read
    }
    cycles = tool.cycles(tool.edges(tmp_path, "pkg"))
    assert cycles == [frozenset({"pkg", "pkg.a", "pkg.sub.b", "pkg.sub.c"})]  # c -> pkg -> a closes it
