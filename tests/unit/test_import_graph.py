"""The package's import cycles and its imports from a layer above (tools/import_graph.py) are
exactly the allowed ones: a new one fails here, and so does a removed one until it leaves its list.
Print them with `.venv/bin/python tools/import_graph.py`."""
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

# Imports from a layer above (the layers: tools/import_graph.py, docs/architecture.md), each
# with why it is there and what would cut it. Empty since #16 (runtime.gpurun -> compile.* was
# cut: the session hands the runner compile/pipeline.compile_signature, and the runtime only runs
# its result; ir.onnx_loader -> ops.registry was cut: the loader returns the unbound model and
# vkml/ops/bind.py binds the operators and infers the types): keep it so.
ALLOWED_UPWARD: set[tuple[str, str]] = set()


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


def test_no_imports_from_a_layer_above_but_the_allowed_ones():
    tool = _tool()
    have = {(e.source, e.target) for e in tool.layer_violations(tool.edges())}

    def show(pairs):
        return "\n".join(f"  {s} -> {t}" for s, t in sorted(pairs)) or "  (none)"

    assert have == ALLOWED_UPWARD, (
        f"new imports from a layer above (import from below, or move the code down to the layer it "
        f"belongs to; `python tools/import_graph.py` shows them):\n{show(have - ALLOWED_UPWARD)}\n"
        f"allowed ones that are gone (take them off ALLOWED_UPWARD):\n{show(ALLOWED_UPWARD - have)}")


def test_every_module_is_in_a_layer():
    tool = _tool()
    for module in tool.module_names():
        assert tool.layer_of(module) in tool.LAYERS
    for layer, below in tool.LAYERS.items():  # an order: each layer's list is inside the one above's
        assert layer not in below
        for other in below:
            assert set(tool.LAYERS[other]) <= set(below), (layer, other)


def test_layer_violations_of_made_up_edges():
    tool = _tool()
    Edge = tool.Edge
    found = [Edge("vkml.api.session", "vkml.runtime.gpurun", 1, "top"),    # down: fine
             Edge("vkml.kernels.conv", "vkml.ops._window", 1, "top"),       # down: fine
             Edge("vkml.runtime.slots", "vkml.runtime.faults", 1, "lazy"),  # its own layer
             Edge("vkml.vulkan.shaders", "vkml.config", 1, "top"),         # base: anyone's
             Edge("vkml.kernels.fused", "vkml.compile.fusion", 1, "top"),   # up
             Edge("vkml.vulkan.info", "vkml.kernels", 1, "typing"),         # up, even if only typing
             Edge("vkml.ops.gather", "vkml.vulkan", 1, "lazy"),             # beside: ops know no device
             Edge("vkml.config", "vkml.ir.graph", 1, "lazy"),               # base imports nothing
             Edge("vkml.__main__", "vkml.api.cli", 1, "top")]
    assert [(e.source, e.target) for e in tool.layer_violations(found)] == [
        ("vkml.kernels.fused", "vkml.compile.fusion"), ("vkml.vulkan.info", "vkml.kernels"),
        ("vkml.ops.gather", "vkml.vulkan"), ("vkml.config", "vkml.ir.graph")]
    try:
        tool.layer_of("vkml.somewhere_new")
    except KeyError:
        pass
    else:
        raise AssertionError("a module outside the layers must be named")


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
