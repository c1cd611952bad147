"""What a new input shape costs a GPU session (issues #11 and #13: a transformer fed a new
sequence length plans anew): the first run of each of `--lengths` sequence lengths, then a second
pass over the same lengths (more than the session keeps plans for, so its first ones were
evicted), against a run of an already planned shape. Per pass: median ms of a first run, of a
repeated run, and the compile's share (GpuRunner._compile). One JSON line per model.

    python bench/probe_planning.py [--models gpt2_like] [--lengths 2-16] [--device vulkan:0]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def _model(name: str):
    """(model bytes, feeds) of a zoo model with a symbolic sequence axis (tests/zoo/_zoo.py)."""
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "zoo"))
    import _zoo

    model, feeds, _ = getattr(_zoo, name)()
    return model, feeds


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="gpt2_like")
    ap.add_argument("--lengths", default="2-16", help="first-last sequence lengths")
    ap.add_argument("--device", default="vulkan:0")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    import vkml
    from vkml.runtime import gpurun

    lo, hi = (int(x) for x in a.lengths.split("-"))
    lengths = list(range(lo, hi + 1))
    out = open(a.out, "a") if a.out else None
    for name in a.models.split(","):
        model, feeds = _model(name)
        sess = vkml.InferenceSession(model, devices=[a.device])
        runner = sess._gpu
        spent = []
        real = runner._compile

        def timed(*args, **kw):
            t0 = time.perf_counter()
            try:
                return real(*args, **kw)
            finally:
                spent.append(time.perf_counter() - t0)
        runner._compile = timed
        feed_of = {n: _feed(feeds, n) for n in lengths}
        row = {"probe": "planning", "model": name, "device": a.device, "lengths": a.lengths,
               "plan_cache": gpurun.PLAN_CACHE}
        for tag in ("new", "again"):
            first, repeat, comp = [], [], []
            for n in lengths:
                spent.clear()
                t0 = time.perf_counter()
                sess.run(None, feed_of[n])
                t1 = time.perf_counter()
                sess.run(None, feed_of[n])
                t2 = time.perf_counter()
                first.append(t1 - t0)
                repeat.append(t2 - t1)
                comp.append(sum(spent))
            row[tag] = {"first_ms": round(statistics.median(first) * 1e3, 2),
                        "repeat_ms": round(statistics.median(repeat) * 1e3, 2),
                        "compile_ms": round(statistics.median(comp) * 1e3, 2), "runs": len(lengths)}
        line = json.dumps(row)
        print(line, flush=True)
        if out:
            out.write(line + "\n")
    return 0


def _feed(feeds, n: int) -> dict:
    """The feeds with their second axis (the sequence) repeated or cut to n."""
    out = {}
    for k, v in feeds.items():
        if v.ndim >= 2:
            reps = -(-n // v.shape[1])
            out[k] = np.ascontiguousarray(np.concatenate([v] * reps, axis=1)[:, :n])
        else:
            out[k] = v
    return out


if __name__ == "__main__":
    sys.exit(main())
