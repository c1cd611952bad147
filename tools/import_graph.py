"""Print the import graph's cycles, and the imports that go up a layer, inside the vkml package.

Reads every ``vkml/**/*.py`` with ``ast`` (nothing is imported), resolves relative imports, and
counts every import statement wherever it stands: at module level (``top``), inside a function
(``lazy``: runs on first call, which is how a cycle usually hides), or under
``if TYPE_CHECKING:`` (``typing``: never runs, but the two modules still know each other).
A cycle is a strongly connected component of more than one module; each is printed with the
edges that keep it closed and their kinds.

The package is in layers (docs/architecture.md), each a folder of vkml/; from the top:

    api        vkml/__init__.py, __main__, api/, benchmarks/ (`vkml bench`), ray/: what users touch
    compile    compile/: graph rewrites, placement, unit plans, arenas
    runtime    runtime/: devices, plans and their runs, slots, the scheduler, vkml.Tensor
    kernels    kernels/: the GPU glue of each op
    vulkan     vulkan/: the Vulkan layer
    ops        ops/: the CPU reference operators
    ir         ir/: ONNX to graph, types and their inference
    base       errors.py, config.py: leaves any layer may use

A module imports from its own layer or from one LAYERS lists below it: ops and ir know no
devices, and the Vulkan layer knows no model. An import the other way is a layer violation.

    python tools/import_graph.py            # the cycles and the layer violations
    python tools/import_graph.py --edges    # every edge inside the package

A module is a node by its dotted name (``vkml.ops.registry``; a package is its ``__init__``).
``from vkml.ops import registry`` is an edge to ``vkml.ops.registry`` when that is a module,
otherwise to ``vkml.ops``. The parent packages that Python runs on the way in are not edges: they
would put every module in one cycle with ``vkml/__init__.py``. Cython sources (``.pyx``) are not
read, only known as modules (``from . import _sched`` in vkml/runtime/ is an edge to
``vkml.runtime._sched``). tests/unit/test_import_graph.py holds the allow-lists of cycles and of
layer violations.
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "vkml"

# layer -> the layers below it, which its modules may import from (as well as from their own).
LAYERS: dict[str, tuple[str, ...]] = {
    "api": ("compile", "runtime", "kernels", "vulkan", "ops", "ir", "base"),
    "compile": ("runtime", "kernels", "vulkan", "ops", "ir", "base"),
    "runtime": ("kernels", "vulkan", "ops", "ir", "base"),
    "kernels": ("vulkan", "ops", "ir", "base"),
    "vulkan": ("base",),
    "ops": ("ir", "base"),
    "ir": ("base",),
    "base": (),
}
# The first name under vkml -> its layer, where that is not the name of a layer's folder.
PLACES = {"": "api", "__main__": "api", "backend": "api", "benchmarks": "api", "ray": "api", "errors": "base", "config": "base"}


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int
    kind: str  # "top", "lazy" or "typing"


def module_names(root: Path = ROOT, package: str = PACKAGE) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file of the package."""
    names = {}
    for path in sorted((root / package).rglob("*.py")) + sorted((root / package).rglob("*.pyx")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names.setdefault(".".join(parts), path)
    return names


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.Module):
    """(node, kind) for every import statement, the kind from what encloses it."""

    def walk(nodes, kind):
        for child in nodes:
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, kind
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                yield from walk(child.body, "typing")
                yield from walk(child.orelse, kind)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                yield from walk(ast.iter_child_nodes(child), "typing" if kind == "typing" else "lazy")
            else:
                yield from walk(ast.iter_child_nodes(child), kind)

    yield from walk(tree.body, "top")


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute name an ImportFrom reads from."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _owner(name: str, modules: dict[str, Path]) -> str | None:
    """The package module that ``name`` lives in: itself, or its nearest parent that is a module."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def edges(root: Path = ROOT, package: str = PACKAGE) -> list[Edge]:
    """Every import from one package module to another (self-imports left out)."""
    modules = module_names(root, package)
    found = []
    for module, path in modules.items():
        if path.suffix != ".py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        for node, kind in _imports(tree):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = _resolve(module, is_package, node)
                for alias in node.names:
                    sub = f"{base}.{alias.name}" if base else alias.name
                    targets.append(sub if sub in modules else base)
            for target in targets:
                owner = _owner(target, modules)
                if owner is not None and owner != module:
                    found.append(Edge(module, owner, node.lineno, kind))
    return sorted(set(found), key=lambda e: (e.source, e.target, e.line))


def cycles(found: list[Edge]) -> list[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    graph: dict[str, set[str]] = {}
    for edge in found:
        graph.setdefault(edge.source, set()).add(edge.target)
        graph.setdefault(edge.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(frozenset(component))
    return sorted(components, key=lambda c: sorted(c))


def layer_of(module: str) -> str:
    """The layer of a module of the package, by its first name under the package (KeyError for
    a name that is in no layer: give it one in PLACES or make it a folder named after its layer)."""
    first = (module.split(".") + [""])[1]
    layer = PLACES.get(first, first)
    if layer not in LAYERS:
        raise KeyError(f"{module} is in no layer (tools/import_graph.py: LAYERS, PLACES)")
    return layer


def layer_violations(found: list[Edge]) -> list[Edge]:
    """The edges from a module to one in a layer above its own (or beside it)."""
    return [e for e in found
            if layer_of(e.source) != layer_of(e.target) and layer_of(e.target) not in LAYERS[layer_of(e.source)]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--edges", action="store_true", help="print every edge inside the package, with layers")
    args = parser.parse_args(argv)
    found = edges()
    if args.edges:
        for edge in sorted(found, key=lambda e: (e.source, e.target, e.line)):
            print(f"{edge.source} -> {edge.target}  (line {edge.line}, {edge.kind}; "
                  f"{layer_of(edge.source)} -> {layer_of(edge.target)})")
        return 0
    components = cycles(found)
    for component in components:
        print("cycle: " + ", ".join(sorted(component)))
        for edge in sorted(found, key=lambda e: (e.source, e.target, e.line)):
            if edge.source in component and edge.target in component:
                print(f"  {edge.source} -> {edge.target}  (line {edge.line}, {edge.kind})")
    if not components:
        print("no import cycles")
    upward = layer_violations(found)
    for edge in upward:
        print(f"layer violation: {edge.source} ({layer_of(edge.source)}) -> {edge.target} "
              f"({layer_of(edge.target)})  (line {edge.line}, {edge.kind})")
    if not upward:
        print("no imports from a layer above")
    return 0


if __name__ == "__main__":
    sys.exit(main())
