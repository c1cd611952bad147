"""No `except Exception` in the package swallows an error silently (#16): each handler raises
(with context), logs through the "vkml" logger, or keeps the error it caught (binds it and uses
it: a report row, a Future, a returned error). Python files are read with ast; Cython files
(.pyx) by their indented blocks."""
from __future__ import annotations

import ast
import glob
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOGGERS = {"log", "_log", "logging"}


def _files(ext: str) -> list[str]:
    return sorted(glob.glob(os.path.join(ROOT, "vkml", "**", f"*.{ext}"), recursive=True))


def _catches_exception(handler: ast.ExceptHandler) -> bool:
    t = handler.type
    names = t.elts if isinstance(t, ast.Tuple) else [t]
    return any(isinstance(n, ast.Name) and n.id in ("Exception", "BaseException") for n in names)


def _handled(handler: ast.ExceptHandler) -> bool:
    for node in ast.walk(ast.Module(body=handler.body, type_ignores=[])):
        if isinstance(node, ast.Raise):
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and isinstance(node.func.value, ast.Name) and node.func.value.id in LOGGERS:
            return True
        if handler.name and isinstance(node, ast.Name) and node.id == handler.name:
            return True
    return False


def test_python_handlers_raise_log_or_keep_the_error():
    silent = []
    for path in _files("py"):
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        for node in ast.walk(tree):
            if isinstance(node, ast.ExceptHandler) and node.type is not None and _catches_exception(node) \
                    and not _handled(node):
                silent.append(f"{os.path.relpath(path, ROOT)}:{node.lineno}")
    assert not silent, f"broad excepts that swallow the error (raise with context or log it): {silent}"


def test_cython_handlers_raise_log_or_keep_the_error():
    silent = []
    head = re.compile(r"^(\s*)except\s+(?:Base)?Exception(?:\s+as\s+(\w+))?\s*:\s*(#.*)?$")
    for path in _files("pyx"):
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
        for k, line in enumerate(lines):
            m = head.match(line)
            if not m:
                continue
            indent, name = len(m.group(1)), m.group(2)
            body = []
            for nxt in lines[k + 1:]:
                if nxt.strip() and len(nxt) - len(nxt.lstrip()) <= indent:
                    break
                body.append(nxt.split("#")[0])
            text = "\n".join(body)
            if not (re.search(r"\braise\b", text) or re.search(r"\b_?log(ging)?\.\w+\(", text)
                    or (name and re.search(rf"\b{name}\b", text))):
                silent.append(f"{os.path.relpath(path, ROOT)}:{k + 1}")
    assert not silent, f"broad excepts that swallow the error (raise with context or log it): {silent}"
