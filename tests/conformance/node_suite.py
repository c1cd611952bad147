"""Runs onnx's backend test cases (node suite by default) through vkml and reports per case.

    python tests/conformance/node_suite.py [--kind node] [-k SUBSTRING] [--failures] [--json OUT]
                                           [--device vulkan:0]

--device runs each case on that GPU (the CPU takes what the GPU cannot) and sorts the passing
cases by what the GPU did: "gpu" when at least one node did GPU work and no computed node ran
on the CPU, "mixed" when some node did GPU work and some computed node ran on the CPU, "nogpu"
when no node did any (cases of Shape/Size/Constant only, of views and Identity, of empty
tensors, or whose every computed node took the CPU). Nodes evaluated while planning (constants
for the input shapes) do not count. A node did GPU work when its row of session.placement()
lists `pipelines` or a count of `gpu_commands` (the dispatches, buffer copies and fills it
recorded: a Concat or Slice done as copies counts, a view that records nothing does not).

The pytest module beside this file runs the same cases through onnx.backend.test.BackendTest;
this script exists to triage quickly (one process, a summary by cause, no pytest overhead).
"""
from __future__ import annotations

import argparse
import collections
import json
import signal
import sys
import time
import warnings

import numpy as np


def load_cases(kind: str):
    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            return load_model_tests(kind=kind)


def run_case(case, backend, device: str | None = None) -> tuple[str, str]:
    """('pass'|'fail'|'error'|'unsupported'|'model', detail); with a GPU `device`, a pass is
    'gpu', 'mixed' or 'nogpu' (see the module's docstring; detail: the ops that ran on the CPU)."""
    import onnx
    from onnx.backend.test.runner import Runner, _normalize_tensor

    import vkml

    try:
        model = case.model
        if model is None:
            import os

            model = onnx.load(os.path.join(case.model_dir, "model.onnx"))
            from onnx.backend.test.runner import Runner as R  # noqa: F401
            data_sets = _read_data(case.model_dir)
        else:
            data_sets = case.data_sets
        rep = backend.prepare(model, "CPU") if device is None else \
            backend.VkmlRep(vkml.InferenceSession(model, devices=[device]))
        for inputs, refs in data_sets:
            ins = [_normalize_tensor(x) for x in inputs]
            refs = [_normalize_tensor(x) for x in refs]
            with np.errstate(all="ignore"):
                outs = rep.run(ins)
            Runner.assert_similar_outputs(refs, outs, rtol=case.rtol, atol=case.atol)
        if device is None:
            return "pass", ""
        return gpu_status(rep.session.placement())
    except vkml.UnsupportedOpsError as e:
        return "unsupported", str(e).splitlines()[1].strip()
    except vkml.ModelError as e:
        return "model", str(e)[:300]
    except AssertionError as e:
        return "fail", str(e).strip().splitlines()[0][:300] if str(e).strip() else "assertion"
    except _Timeout:
        return "error", "timeout"
    except Exception as e:  # noqa: BLE001
        return "error", f"{type(e).__name__}: {e}"[:300]


def gpu_status(rows: list[dict]) -> tuple[str, str]:
    """('gpu'|'mixed'|'nogpu', the ops computed on the CPU) of a passing case's placement rows."""
    on_cpu = sorted({r["op"] for r in rows if r["device"] == "cpu" and not r["reason"].startswith("constant")})
    dispatched = any(r["device"] != "cpu" and (r.get("pipelines") or r.get("gpu_commands")) for r in rows)
    if not dispatched:
        return "nogpu", ", ".join(on_cpu)
    return ("mixed", ", ".join(on_cpu)) if on_cpu else ("gpu", "")


def _read_data(model_dir: str):
    import glob
    import os

    import onnx
    from onnx import numpy_helper

    sets = []
    for d in sorted(glob.glob(os.path.join(model_dir, "test_data_set_*"))):
        def read(prefix):
            out = []
            for f in sorted(glob.glob(os.path.join(d, f"{prefix}_*.pb")), key=lambda p: int(p.rsplit("_", 1)[1][:-3])):
                t = onnx.TensorProto()
                with open(f, "rb") as fh:
                    t.ParseFromString(fh.read())
                out.append(numpy_helper.to_array(t))
            return out
        sets.append((read("input"), read("output")))
    return sets


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kind", default="node")
    ap.add_argument("-k", default="", help="only cases whose name contains this")
    ap.add_argument("--failures", action="store_true", help="print every non-passing case")
    ap.add_argument("--json", help="write {case: [status, detail]} here")
    ap.add_argument("--timeout", type=int, default=60)
    ap.add_argument("--device", default=None, help="a GPU (vulkan:N) to run the cases on")
    args = ap.parse_args(argv)
    from vkml import backend

    cases = [c for c in load_cases(args.kind) if args.k in c.name]
    signal.signal(signal.SIGALRM, _alarm)
    results = {}
    t0 = time.time()
    for c in cases:
        signal.alarm(args.timeout)
        try:
            results[c.name] = run_case(c, backend, args.device)
        finally:
            signal.alarm(0)
    counts = collections.Counter(s for s, _ in results.values())
    if args.failures:
        for name, (s, d) in sorted(results.items()):
            if s != "pass":
                print(f"{s:12s} {name}: {d}")
    unsupported = collections.Counter(d.split(" (")[0] for s, d in results.values() if s == "unsupported")
    if unsupported:
        print("unsupported ops by cases:", ", ".join(f"{k} {v}" for k, v in unsupported.most_common()))
    if args.device:
        mixed = collections.Counter(op for s, d in results.values() if s in ("mixed", "nogpu") and d
                                    for op in d.split(", "))
        print("ops on the CPU in passing cases:", ", ".join(f"{k} {v}" for k, v in mixed.most_common(40)))
        passed = counts["gpu"] + counts["mixed"] + counts["nogpu"]
        print(f"{args.kind} on {args.device}: {passed} of {len(cases)} pass, {counts['gpu']} of them entirely "
              f"on the GPU, {counts['mixed']} mixed, {counts['nogpu']} with no GPU dispatch "
              f"({dict(counts)}) in {time.time() - t0:.1f}s")
    else:
        print(f"{args.kind}: {counts['pass']} of {len(cases)} pass ({dict(counts)}) in {time.time() - t0:.1f}s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=0, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
