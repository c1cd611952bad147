"""Write docs/config.md, the table of vkml's environment variables, from vkml/config.py.

    python tools/config_table.py           # (re)write docs/config.md
    python tools/config_table.py --check   # exit 1 if docs/config.md is not what this writes

vkml/config.py is a leaf (standard library only), so it is loaded from its file: no build, no
import of the package. tests/unit/test_config.py fails when docs/config.md is stale.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(ROOT, "vkml", "config.py")
OUT = os.path.join(ROOT, "docs", "config.md")


def render() -> str:
    spec = importlib.util.spec_from_file_location("_vkml_config_table", CONFIG)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    try:
        spec.loader.exec_module(mod)
    finally:
        del sys.modules[spec.name]
    return mod.markdown_table()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if docs/config.md is stale")
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        try:
            with open(OUT, encoding="utf-8") as f:
                current = f.read()
        except FileNotFoundError:
            current = None
        if current != text:
            print("docs/config.md is stale: run `python tools/config_table.py`", file=sys.stderr)
            return 1
        return 0
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
