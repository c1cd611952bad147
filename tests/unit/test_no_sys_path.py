"""The package finds its modules through its own imports (#16): no module of vkml touches
sys.path. The benchmark suite once put the checkout on it to import bench/; it is part of the
package now (vkml.benchmarks), so `vkml bench` runs from an installed wheel."""
from __future__ import annotations

import ast
import glob
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_no_sys_path_in_the_package():
    found = []
    for path in sorted(glob.glob(os.path.join(ROOT, "vkml", "**", "*.py"), recursive=True)):
        with open(path) as f:
            tree = ast.parse(f.read(), path)
        found += [f"{os.path.relpath(path, ROOT)}:{node.lineno}" for node in ast.walk(tree)
                  if isinstance(node, ast.Attribute) and node.attr == "path"
                  and isinstance(node.value, ast.Name) and node.value.id == "sys"]
    assert not found, f"sys.path used in the package: {found}"
