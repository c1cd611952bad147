"""Write docs/api.md, the API reference, from the code itself: vkml's public names (vkml.__all__)
and the onnx.backend module (vkml.backend), with their signatures and docstrings (inspect).
Nothing beyond the standard library: the docstrings are the documentation, so keeping them
right keeps the reference right.

    python tools/api_reference.py           # (re)write docs/api.md
    python tools/api_reference.py --check   # exit 1 if docs/api.md is not what this writes

tests/test_api_reference.py fails when docs/api.md is stale or a public name has no docstring.
"""
from __future__ import annotations

import argparse
import dataclasses
import enum
import importlib
import inspect
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Iterator

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "docs", "api.md")

# Protocol methods users reach through NumPy, DLPack, len() or pickle: documented with the
# public methods of the class that defines them.
PROTOCOLS = ("__array__", "__dlpack__", "__dlpack_device__", "__len__", "__getitem__", "__reduce__")
# Option classes whose fields are instance attributes (set in __init__, onnxruntime-style):
# listed with their defaults from a fresh instance.
OPTION_CLASSES = ("SessionOptions", "RunOptions")


@dataclass
class Item:
    """One documented object: `name` as users write it, its `kind`, signature and docstring."""

    name: str
    kind: str  # "function", "class", "method", "classmethod", "staticmethod", "property", "module"
    signature: str
    doc: str
    members: list["Item"] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # fields, enum members, option defaults


class _Annotation:
    """An annotation kept as the source wrote it (the modules use postponed annotations)."""

    def __init__(self, text: Any):
        text = text if isinstance(text, str) else inspect.formatannotation(text)
        self.text = text[1:-1] if len(text) > 1 and text[0] == text[-1] and text[0] in "'\"" else text

    def __repr__(self) -> str:
        return self.text


def _signature(obj: Any, drop_first: bool = False, returns: bool = True) -> str:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return ""
    params = list(sig.parameters.values())
    if drop_first and params:
        params = params[1:]
    params = [p if p.annotation is p.empty else p.replace(annotation=_Annotation(p.annotation)) for p in params]
    ret = sig.return_annotation
    sig = sig.replace(parameters=params,
                      return_annotation=sig.empty if ret is sig.empty or not returns else _Annotation(ret))
    return str(sig)


def _own_doc(obj: Any) -> str:
    """The object's own docstring (never one inherited from a base class), cleaned."""
    doc = obj.__doc__ if isinstance(obj, (type, property)) or inspect.isroutine(obj) or inspect.ismodule(obj) \
        else None
    if isinstance(obj, type):
        doc = obj.__dict__.get("__doc__")
        if dataclasses.is_dataclass(obj) and doc and doc.startswith(obj.__name__ + "("):
            doc = None  # the signature dataclasses writes when the class has no docstring
    return inspect.cleandoc(doc) if doc else ""


def _is_vkml(obj: Any) -> bool:
    return (getattr(obj, "__module__", None) or "").split(".")[0] == "vkml"


def _members(cls: type, prefix: str) -> Iterator[Item]:
    """Public methods and properties that vkml's own classes define (not those of object,
    int, ValueError...), in definition order, base classes first."""
    seen: set[str] = set()
    for klass in reversed(cls.__mro__):
        if not _is_vkml(klass):
            continue
        for name, raw in klass.__dict__.items():
            if name in seen or (name.startswith("_") and name not in PROTOCOLS):
                continue
            if isinstance(raw, property):
                kind, func = "property", raw.fget
                sig = _signature(func, drop_first=True).split(" -> ")
                text = f" -> {sig[1]}" if len(sig) > 1 else ""
                item = Item(f"{prefix}.{name}", kind, text, _own_doc(raw) or _own_doc(func))
            elif isinstance(raw, classmethod):
                item = Item(f"{prefix}.{name}", "classmethod", _signature(getattr(cls, name)), _own_doc(raw.__func__))
            elif isinstance(raw, staticmethod):
                item = Item(f"{prefix}.{name}", "staticmethod", _signature(raw.__func__), _own_doc(raw.__func__))
            elif inspect.isfunction(raw):
                item = Item(f"{prefix}.{name}", "method", _signature(raw, drop_first=True), _own_doc(raw))
            else:
                continue  # enum members, constants, slots: described by the class
            seen.add(name)
            yield item


def _class(cls: type, name: str) -> Item:
    init = cls.__dict__.get("__init__")
    sig = _signature(cls, returns=False) if not issubclass(cls, enum.Enum) else ""
    doc = _own_doc(cls)
    if init is not None and _is_vkml(init) and _own_doc(init) and not dataclasses.is_dataclass(cls):
        doc = f"{doc}\n\n{_own_doc(init)}" if doc else _own_doc(init)
    item = Item(name, "class", sig, doc, list(_members(cls, name)))
    if issubclass(cls, enum.Enum):
        item.notes = [f"`{m.name}` = {m.value!r}" for m in cls]
    elif dataclasses.is_dataclass(cls):
        item.notes = [f"`{f.name}`: {_Annotation(f.type)!r}" for f in dataclasses.fields(cls)]
    elif cls.__name__ in OPTION_CLASSES:
        item.notes = [f"`{k}` = {v!r}" for k, v in vars(cls()).items() if not k.startswith("_")]
    return item


def _item(obj: Any, name: str) -> Item:
    if isinstance(obj, type):
        return _class(obj, name)
    return Item(name, "function", _signature(obj), _own_doc(obj))


def collect() -> tuple[str, list[Item]]:
    """(vkml's version, the documented items): vkml.__all__ in its order, then vkml.backend."""
    vkml = importlib.import_module("vkml")
    items = [_item(getattr(vkml, n), f"vkml.{n}") for n in vkml.__all__]
    backend = importlib.import_module("vkml.backend")
    mod = Item("vkml.backend", "module", "", _own_doc(backend))
    for n in backend.__all__:  # (its code is in vkml/api/backend.py)
        obj = getattr(backend, n)
        if inspect.ismethod(obj):  # prepare = VkmlBackend.prepare: the module-level shortcuts
            mod.members.append(Item(f"vkml.backend.{n}", "function", _signature(obj), _own_doc(obj.__func__)))
        else:
            mod.members.append(_item(obj, f"vkml.backend.{n}"))
    return vkml.__version__, items + [mod]


def walk(items: list[Item]) -> Iterator[Item]:
    """Every item and member, depth first."""
    for it in items:
        yield it
        yield from walk(it.members)


def _anchor(name: str) -> str:
    return name.lower().replace(".", "-").replace("_", "-")


def _entry(it: Item, level: int) -> list[str]:
    prefix = {"classmethod": "classmethod ", "staticmethod": "staticmethod ", "property": "property "}.get(it.kind, "")
    # An explicit anchor: headings with whole signatures make unwieldy generated ones.
    lines = [f'<a id="{_anchor(it.name)}"></a>', "", f"{'#' * level} {prefix}`{it.name}{it.signature}`", ""]
    if it.doc:
        lines += [it.doc, ""]
    if it.notes:
        lines += [f"- {n}" for n in it.notes] + [""]
    for m in it.members:
        lines += _entry(m, level + 1)
    return lines


def render() -> str:
    """docs/api.md's text."""
    version, items = collect()
    lines = [
        "# API reference",
        "",
        f"vkml {version}. Generated from the code by `tools/api_reference.py` (signatures and docstrings "
        "through `inspect`); do not edit by hand: change the docstrings and run "
        "`.venv/bin/python tools/api_reference.py`. The README shows the API in use; `examples/` has runnable scripts.",
        "",
        "Contents:",
        "",
    ]
    lines += [f"- [`{it.name}`](#{_anchor(it.name)})" for it in items]
    lines.append("")
    for it in items:
        lines += _entry(it, 2)
    return "\n".join(lines).rstrip() + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description="write docs/api.md from vkml's public names")
    ap.add_argument("--check", action="store_true", help="only check that docs/api.md is current")
    args = ap.parse_args()
    text = render()
    try:
        with open(OUT, encoding="utf-8") as f:
            current = f.read()
    except FileNotFoundError:
        current = None
    if args.check:
        if current != text:
            print(f"{os.path.relpath(OUT, ROOT)} is stale: run python tools/api_reference.py", file=sys.stderr)
            return 1
        return 0
    if current != text:
        os.makedirs(os.path.dirname(OUT), exist_ok=True)
        with open(OUT, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"wrote {os.path.relpath(OUT, ROOT)}")
    missing = [it.name for it in walk(collect()[1]) if not it.doc]
    if missing:
        print("no docstring: " + ", ".join(missing), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
