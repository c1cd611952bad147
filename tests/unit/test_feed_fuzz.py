"""Structural fuzzing of run() feeds (issue #19): real-ish models fed mutated dicts (names missing,
extra or misspelt; wrong dtypes, ranks and shapes; zero-size dims; strided and negative-stride
views; shapes far beyond memory; NaN/inf; lists, scalars, strings; vkml.Tensors on another device).

Every case has an expected outcome, worked out here independently of vkml's checks: a valid feed
must give the CPU reference's answer (a fresh CPU session fed contiguous copies); an invalid one
must raise ValueError or TypeError (vkml's ModelError is a ValueError) naming an input at fault.
Anything else (another exception type, a missing name, a wrong or silent answer, a crash, a hang)
is a failure. The cases run in a child process, with a fixed seed and a time box, so a crash
fails the test instead of killing pytest. Reproduce or search longer by hand:

    python tests/unit/test_feed_fuzz.py --device cpu --seed 23 --seconds 60 [--verbose]
    python tests/unit/test_feed_fuzz.py --device vulkan:0 ...   (tests/e2e/test_feed_fuzz_gpu.py)
"""
from __future__ import annotations

import argparse
import faulthandler
import json
import os
import subprocess
import sys
import time
import traceback
from collections import OrderedDict
from typing import Any, Callable, Mapping

import numpy as np
from numpy.lib.stride_tricks import as_strided

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEED = 23
PER_CASE = 30  # seconds: a case taking longer is a hang; the child prints where and exits
SECONDS = 4.0  # the fuzzing itself on the CPU; the child's start-up comes on top
HUGE = 1 << 40  # a dim that makes any feed far larger than memory (made with zero strides)


# ---------------------------------------------------------------- models
def models() -> dict[str, bytes]:
    """The shipped model, the e2e models (symbolic and fixed dims) and a two-input model with a
    bool input and a shared symbolic dim."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
    import _models as M
    from onnx import TensorProto as T
    from onnx import helper as h

    g = h.make_graph([h.make_node("Where", ["c", "a", "b"], ["w"], name="where"),
                      h.make_node("Mul", ["w", "a"], ["y"], name="mul")], "two",
                     [h.make_tensor_value_info("c", T.BOOL, ["N", 4]),
                      h.make_tensor_value_info("a", T.FLOAT, ["N", 4]),
                      h.make_tensor_value_info("b", T.FLOAT, [4])],
                     [h.make_tensor_value_info("y", T.FLOAT, ["N", 4])])
    two = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8).SerializeToString()
    with open(os.path.join(ROOT, "vkml", "data", "digits_cnn.onnx"), "rb") as f:
        digits = f.read()
    return {"digits_cnn": digits, "mlp": M.mlp(), "cnn": M.cnn(), "block": M.transformer_block(),
            "resnet_like": M.resnet_like(), "two": two}


class Spec:
    """A model's inputs: name → (dtype, shape with str symbols)."""

    def __init__(self, sess):
        g = sess.model.graph
        self.inputs = {a.name: (g.values[a.name].dtype, list(a.shape)) for a in sess.get_inputs()}

    def good(self, rng, symbols: Mapping[str, int] | None = None) -> dict[str, np.ndarray]:
        sym = dict(symbols or {})
        feed = {}
        for name, (dtype, shape) in self.inputs.items():
            dims = [d if isinstance(d, int) else sym.setdefault(d, int(rng.integers(1, 4))) for d in shape]
            if dtype == np.bool_:
                feed[name] = rng.random(dims) < 0.5
            else:
                feed[name] = rng.standard_normal(dims).astype(dtype)
        return feed


# ---------------------------------------------------------------- mutations
# Each takes (rng, spec, feed, ctx) and returns the mutated feed (maybe not a dict) and a label.
def _key(rng, feed) -> str:
    keys = list(feed)
    return keys[int(rng.integers(len(keys)))]


def m_missing(rng, spec, feed, ctx):
    k = _key(rng, feed)
    return {n: v for n, v in feed.items() if n != k}, f"drop {k!r}"


def m_extra(rng, spec, feed, ctx):
    extra = [("bogus", feed[_key(rng, feed)]), ("", np.zeros(1, np.float32)), (0, np.zeros(1)), (None, 1.0)]
    k, v = extra[int(rng.integers(len(extra)))]
    return {**feed, k: v}, f"extra {k!r}"


def m_rename(rng, spec, feed, ctx):
    k = _key(rng, feed)
    new = [k.upper() if k.upper() != k else k + "_", " " + k, k.encode()][int(rng.integers(3))]
    return {(new if n == k else n): v for n, v in feed.items()}, f"rename {k!r} -> {new!r}"


_DTYPES = [np.int32, np.int64, np.float16, np.float64, np.bool_, object, np.str_, np.complex64, np.uint8,
           np.float32]


def m_dtype(rng, spec, feed, ctx):
    k = _key(rng, feed)
    t = _DTYPES[int(rng.integers(len(_DTYPES)))]
    v = feed[k].astype(t) if t is not np.str_ else feed[k].astype("U8")
    return {**feed, k: v}, f"{k!r} as {np.dtype(t)}"


def m_rank(rng, spec, feed, ctx):
    k = _key(rng, feed)
    v = feed[k]
    if v.ndim and rng.random() < 0.5:
        v = v.reshape(v.shape[:-2] + (-1,)) if v.ndim > 1 else v[0]
    else:
        v = v[None] if rng.random() < 0.5 else v[..., None]
    return {**feed, k: v}, f"{k!r} rank {feed[k].ndim} -> {v.ndim}"


def m_shape(rng, spec, feed, ctx):
    k = _key(rng, feed)
    v = feed[k]
    if v.ndim == 0:
        return feed, "no-op"
    axis = int(rng.integers(v.ndim))
    n = max(1, v.shape[axis] + int(rng.choice([-1, 1, 2, 7])))
    shape = list(v.shape)
    shape[axis] = n
    return {**feed, k: np.resize(v, shape)}, f"{k!r} dim {axis} -> {n}"


def _set_symbol(rng, spec, feed, value: int | None) -> tuple[dict, str]:
    """The feed with one symbolic dim set to `value` (None: one input's dims only, a mismatch)."""
    syms = sorted({d for _, shape in spec.inputs.values() for d in shape if isinstance(d, str)})
    if not syms:
        return feed, "no-op"
    s = syms[int(rng.integers(len(syms)))]
    sizes = {d: feed[n].shape[i] for n, (_, shape) in spec.inputs.items() if n in feed
             for i, d in enumerate(shape) if isinstance(d, str) and feed[n].ndim == len(shape)}
    if value is None:
        users = [n for n, (_, shape) in spec.inputs.items() if s in shape]
        k = users[int(rng.integers(len(users)))]
        sizes[s] = sizes.get(s, 1) + 1
        return {**feed, k: spec.good(rng, sizes)[k]}, f"{s}={sizes[s]} in {k!r} only"
    sizes[s] = value
    good = spec.good(rng, sizes)
    return {n: good.get(n, v) for n, v in feed.items()}, f"{s}={value}"


def m_symbol(rng, spec, feed, ctx):
    return _set_symbol(rng, spec, feed, [0, 0, None, 5][int(rng.integers(4))])


def m_zero_fixed(rng, spec, feed, ctx):
    k = _key(rng, feed)
    v = feed[k]
    fixed = [i for i, d in enumerate(spec.inputs.get(k, (None, []))[1]) if isinstance(d, int)]
    if not fixed or v.ndim != len(spec.inputs[k][1]):
        return feed, "no-op"
    shape = list(v.shape)
    shape[fixed[int(rng.integers(len(fixed)))]] = 0
    return {**feed, k: np.zeros(shape, v.dtype)}, f"{k!r} shape {shape}"


def m_view(rng, spec, feed, ctx):
    """Same shape and dtype, other memory layouts: the values must be read through the strides."""
    k = _key(rng, feed)
    v = feed[k]
    kind = int(rng.integers(5))
    if kind == 0 and v.ndim:
        w = v[..., ::-1]  # negative stride: other values, same shape
    elif kind == 1:
        big = np.repeat(v[..., None], 3, axis=-1)  # every third element
        w = big[..., 1]
    elif kind == 2:
        w = np.asfortranarray(v)
    elif kind == 3 and v.ndim:
        w = np.flip(v, axis=0)
    else:
        w = v.copy()
        w.flags.writeable = False
    return {**feed, k: w}, f"{k!r} view {kind} strides {w.strides}"


def m_huge(rng, spec, feed, ctx):
    """A zero-stride view whose logical size is terabytes: it costs nothing to make, but any
    attempt to allocate for it must be refused up front."""
    k = _key(rng, feed)
    v = feed[k]
    if v.ndim == 0:
        return feed, "no-op"
    axis = int(rng.integers(v.ndim))
    shape = list(v.shape)
    shape[axis] = HUGE
    strides = list(v.strides)
    strides[axis] = 0
    return {**feed, k: as_strided(v, shape, strides, writeable=False)}, f"{k!r} shape {shape} (zero stride)"


def m_nonfinite(rng, spec, feed, ctx):
    k = _key(rng, feed)
    v = feed[k].copy()
    if v.dtype.kind != "f" or not v.size:
        return feed, "no-op"
    flat = v.reshape(-1)
    picks = rng.integers(0, flat.size, size=max(1, flat.size // 8))
    flat[picks] = rng.choice([np.nan, np.inf, -np.inf, 3e38, -0.0], size=picks.size)
    return {**feed, k: v}, f"{k!r} with NaN/inf"


def m_python(rng, spec, feed, ctx):
    k = _key(rng, feed)
    choices = [lambda v: v.tolist(), lambda v: [x.tolist() for x in v] if v.ndim else v.tolist(),
               lambda v: list(v.astype(np.float32)), lambda v: 1.0, lambda v: 1, lambda v: True,
               lambda v: np.float32(1), lambda v: None, lambda v: "x", lambda v: b"x", lambda v: {"a": 1},
               lambda v: [[1.0], [1.0, 2.0]], lambda v: (1, 2), lambda v: range(3), lambda v: object()]
    i = int(rng.integers(len(choices)))
    return {**feed, k: choices[i](feed[k])}, f"{k!r} python value #{i}"


def m_tensor(rng, spec, feed, ctx):
    import vkml

    k = _key(rng, feed)
    devices = ctx["tensor_devices"]
    dev = devices[int(rng.integers(len(devices)))]
    v = feed[k]
    if rng.random() < 0.3:  # and of the wrong dtype or shape
        v = v.astype(np.int32) if rng.random() < 0.5 else v[None]
    try:
        t = vkml.Tensor.from_numpy(v, dev)
    except (TypeError, ValueError):
        return feed, "no-op"
    return {**feed, k: t}, f"{k!r} as Tensor on {dev} {v.dtype} {list(v.shape)}"


def m_container(rng, spec, feed, ctx):
    choices = [lambda f: list(f.values()), lambda f: None, lambda f: list(f.items()), lambda f: OrderedDict(f),
               lambda f: tuple(f.values()), lambda f: "x"]
    i = int(rng.integers(len(choices)))
    return choices[i](feed), f"feed container #{i}"


MUTATIONS: list[Callable] = [m_missing, m_extra, m_rename, m_dtype, m_rank, m_shape, m_symbol, m_zero_fixed,
                             m_view, m_view, m_huge, m_nonfinite, m_nonfinite, m_python, m_python, m_tensor,
                             m_container]


# ---------------------------------------------------------------- the oracle
def _memory() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def expect(spec: Spec, feed: Any) -> tuple[dict | None, list[Any]]:
    """(the feed as contiguous arrays, []) when it is valid, else (None, names at fault), by the
    rules the README states: exactly the model's input names; arrays (or vkml.Tensors, nested
    lists and scalars as np.asarray reads them) of the declared dtype, rank and fixed dims; one
    size per symbol; no feed larger than memory."""
    import vkml

    if not isinstance(feed, Mapping):
        return None, ["input_feed"]
    names = set(spec.inputs)
    wrong = [k for k in feed if k not in names] + [n for n in names if n not in feed]
    if wrong:
        return None, wrong
    out, bad, symbols = {}, [], {}
    for name, value in feed.items():
        dtype, shape = spec.inputs[name]
        if isinstance(value, vkml.Tensor):
            arr = value.numpy()
        elif isinstance(value, np.ndarray):
            arr = value
        elif isinstance(value, (list, bool, int, float, np.generic)):
            try:
                arr = np.asarray(value)
            except ValueError:
                bad.append(name)
                continue
        else:
            bad.append(name)
            continue
        ok = arr.dtype == dtype and arr.ndim == len(shape) and arr.nbytes <= _memory()
        for d, n in zip(shape, arr.shape):
            ok = ok and (n == d if isinstance(d, int) else symbols.setdefault(d, n) == n)
        if ok:
            out[name] = np.ascontiguousarray(arr)
        else:
            bad.append(name)
    return (None, bad) if bad else (out, [])


def _same(a: np.ndarray, b: np.ndarray, exact: bool) -> bool:
    if not isinstance(a, np.ndarray) or a.shape != b.shape or a.dtype != b.dtype:
        return False
    if exact:
        return np.array_equal(a, b, equal_nan=True)
    return bool(np.allclose(a, b, rtol=1e-3, atol=1e-4, equal_nan=True))


# ---------------------------------------------------------------- the loop (run in a child)
def fuzz(seed: int, seconds: float, device: str, verbose: bool = False) -> dict:
    import vkml

    devices = ["cpu"] if device == "cpu" else [device, "cpu"]
    blobs = models()
    sessions = {n: vkml.InferenceSession(b, devices=devices) for n, b in blobs.items()}
    refs = {n: vkml.InferenceSession(b, devices=["cpu"]) for n, b in blobs.items()}
    specs = {n: Spec(s) for n, s in refs.items()}
    ctx = {"tensor_devices": ["cpu"] + ([device] if device != "cpu" else [])}
    names = sorted(blobs)
    tally: dict[str, int] = {}
    failures: list[str] = []
    start = time.perf_counter()
    case = 0
    while time.perf_counter() - start < seconds:
        rng = np.random.default_rng([seed, case])
        name = names[case % len(names)]
        spec = specs[name]
        feed: Any = spec.good(rng)
        done = []
        for _ in range(1 + int(rng.random() < 0.25)):
            if done and (type(feed) is not dict or expect(spec, feed)[0] is None
                         or not all(type(v) is np.ndarray and v.nbytes < 1 << 30 for v in feed.values())):
                break  # a second mutation starts from a valid feed of arrays of real size
            mutation = MUTATIONS[int(rng.integers(len(MUTATIONS)))]
            feed, what = mutation(rng, spec, feed, ctx)
            done.append(what)
        where = f"case {case} ({name} on {device}: {'; '.join(done)})"
        if verbose:
            print(where, file=sys.stderr, flush=True)
        faulthandler.dump_traceback_later(PER_CASE, exit=True)
        want, faults = expect(spec, feed)
        outcome, got, err = "ran", None, None
        try:
            got = sessions[name].run(None, feed)
        except (ValueError, TypeError) as e:
            outcome, err = "raised", e
        except Exception as e:
            outcome = type(e).__name__
            failures.append(f"{where}: {outcome}: {e}\n{traceback.format_exc(limit=-4)}")
        if want is not None and outcome == "raised":
            failures.append(f"{where}: a valid feed raised {type(err).__name__}: {err}")
        elif want is None and outcome == "ran":
            failures.append(f"{where}: accepted an invalid feed (at fault: {faults})")
        elif want is None and outcome == "raised" and not any((n if n == "input_feed" else repr(n)) in str(err)
                                                              for n in faults):
            failures.append(f"{where}: {type(err).__name__} does not name {faults}: {err}")
        elif want is not None and outcome == "ran":
            ref = refs[name].run(None, want)
            if len(got) != len(ref) or not all(_same(a, b, device == "cpu") for a, b in zip(got, ref)):
                failures.append(f"{where}: wrong answer: max |diff| "
                                f"{[float(np.nanmax(np.abs(a - b))) if a.size else 0 for a, b in zip(got, ref)]}")
        key = f"{'valid' if want is not None else 'invalid'}:{outcome}"
        tally[key] = tally.get(key, 0) + 1
        case += 1
    faulthandler.cancel_dump_traceback_later()
    return {"cases": case, "tally": tally, "failures": failures[:20], "failed": len(failures),
            "seconds": time.perf_counter() - start}


def run_child(device: str, seconds: float) -> dict:
    """Fuzz in a child process; fails (with the last case named) if it crashes or hangs."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    cmd = [sys.executable, os.path.abspath(__file__), "--device", device, "--seed", str(SEED),
           "--seconds", str(seconds), "--verbose"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + PER_CASE + 60, env=env)
    # Each case is named on stderr before it runs: the last one named is the one that crashed or hung.
    assert r.returncode == 0, f"the fuzzing child died (rc {r.returncode}):\n{r.stderr[-3000:]}"
    report = json.loads(r.stdout.strip().splitlines()[-1])
    print(f"feed fuzz on {device}: {report['cases']} cases in {report['seconds']:.1f} s: {report['tally']}")
    return report


def check(report: dict) -> None:
    assert report["cases"] >= 100, report
    assert report["tally"].get("valid:ran", 0) > 0 and report["tally"].get("invalid:raised", 0) > 0, report
    assert not report["failures"], f"{report['failed']} failure(s):\n\n" + "\n\n".join(report["failures"])


def test_mutated_feeds_run_right_or_raise_naming_the_input():
    check(run_child("cpu", SECONDS))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu", help='"cpu" or a GPU such as "vulkan:0" (with the CPU after it)')
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--seconds", type=float, default=SECONDS)
    ap.add_argument("--verbose", action="store_true", help="print each case before it runs (to find a crash)")
    args = ap.parse_args()
    print(json.dumps(fuzz(args.seed, args.seconds, args.device, args.verbose)))
