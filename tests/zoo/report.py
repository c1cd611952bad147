"""Coverage of the zoo suite on a GPU: per model, its opset and quirk, how many nodes it has,
how many ran on the GPU, and which stayed on the CPU and why (from each entry in _zoo.py,
checked against the placement). Prints a Markdown table; --write puts it in README.md.

    .venv/bin/python tests/zoo/report.py [--device vulkan:0] [--write]
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import vkml  # noqa: E402
from _zoo import FOLD, ZOO  # noqa: E402

BEGIN, END = "<!-- report.py: begin -->", "<!-- report.py: end -->"


def table(device: str) -> str:
    lines = ["| model | opset | domain | quirk | nodes | on GPU | folded | on CPU (computed) and why |",
             "|---|---|---|---|---|---|---|---|"]
    for name, e in ZOO.items():
        blob, feeds, _ = e.build()
        sess = vkml.InferenceSession(blob, devices=[device])
        sess.run(None, feeds)
        rows = sess.placement()
        cpu = {r["node"] for r in rows if r["device"] == "cpu"}
        if cpu != set(e.on_cpu):
            raise SystemExit(f"{name}: on the CPU {sorted(cpu)}, the entry says {sorted(e.on_cpu)}")
        folded = [n for n, why in e.on_cpu.items() if why.startswith(FOLD)]
        computed = {n: why for n, why in e.on_cpu.items() if not why.startswith(FOLD)}
        why = "; ".join(f"`{n}`: {w}" for n, w in computed.items()) or "-"
        lines.append(f"| {name} | {e.opset} | {e.domain} | {e.quirk} | {len(rows)} | {len(rows) - len(cpu)} | "
                     f"{len(folded)} | {why} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="vulkan:0")
    ap.add_argument("--write", action="store_true", help="replace the table in tests/zoo/README.md")
    args = ap.parse_args()
    text = table(args.device)
    print(text)
    if args.write:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "README.md")
        doc = open(path).read()
        a, b = doc.index(BEGIN) + len(BEGIN), doc.index(END)
        with open(path, "w") as f:
            f.write(doc[:a] + "\n" + text + "\n" + doc[b:])


if __name__ == "__main__":
    main()
