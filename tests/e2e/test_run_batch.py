"""InferenceSession.run_async and run_batch (vkml/runtime/batch.py): concurrent runs on the
session's own threads, results in order and equal to one-by-one runs, failures that say which
feed, and a forked child that can still use them."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from concurrent.futures import Future

import numpy as np
import pytest

import vkml
from _models import mlp


def _feeds(n: int, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [{"x": rng.standard_normal((1 + i % 3, 16)).astype(np.float32)} for i in range(n)]


@pytest.fixture(params=["cpu", "gpu"])
def devices(request):
    return ["cpu"] if request.param == "cpu" else [request.getfixturevalue("gpu"), "cpu"]


def test_run_batch_equals_runs_one_by_one(devices):
    s = vkml.InferenceSession(mlp(), devices=devices)
    feeds = _feeds(24)  # three input shapes, interleaved
    got = s.run_batch(feeds)
    assert len(got) == len(feeds)
    for f, outs in zip(feeds, got):
        np.testing.assert_array_equal(outs[0], s.run(None, f)[0])
    assert s.run_batch([]) == []
    named = s.run_batch(feeds[:3], ["y"])
    assert [o[0].shape for o in named] == [(1, 8), (2, 8), (3, 8)]


def test_run_async_futures_from_many_threads(devices):
    s = vkml.InferenceSession(mlp(), devices=devices)
    feeds = _feeds(40, seed=1)
    want = [s.run(None, f)[0] for f in feeds]
    futures: list[Future] = [None] * len(feeds)

    def submit(lo: int) -> None:
        for i in range(lo, len(feeds), 4):
            futures[i] = s.run_async(None, feeds[i])
    threads = [threading.Thread(target=submit, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for f, w in zip(futures, want):
        assert isinstance(f, Future)
        np.testing.assert_array_equal(f.result(timeout=120)[0], w)


def test_a_bad_feed_fails_the_batch_and_says_which(devices):
    s = vkml.InferenceSession(mlp(), devices=devices)
    feeds = _feeds(6, seed=2)
    feeds[3] = {"x": np.zeros((2, 5), np.float32)}
    with pytest.raises(ValueError, match="dimension 1 must be 16") as e:
        s.run_batch(feeds)
    assert "run_batch: item 3 of 6" in " ".join(getattr(e.value, "__notes__", []))
    f = s.run_async(None, {"y": np.zeros((1, 16), np.float32)})
    with pytest.raises(ValueError, match="unknown input"):
        f.result(timeout=60)
    with pytest.raises(TypeError, match="list of feeds"):
        s.run_batch(feeds[0])
    # the session is unharmed
    np.testing.assert_array_equal(s.run_batch(feeds[:1])[0][0], s.run(None, feeds[0])[0])


def test_run_batch_in_a_forked_child():
    """The parent's pool threads do not exist in a fork: the child starts its own."""
    code = textwrap.dedent("""
        import os, sys
        sys.path.insert(0, %r)
        import numpy as np, vkml
        from _models import mlp
        s = vkml.InferenceSession(mlp(), devices=["cpu"])
        feeds = [{"x": np.ones((2, 16), np.float32) * i} for i in range(8)]
        want = s.run_batch(feeds)
        pid = os.fork()
        if pid == 0:
            got = s.run_batch(feeds)
            ok = all(np.array_equal(a[0], b[0]) for a, b in zip(got, want))
            os._exit(0 if ok else 3)
        _, status = os.waitpid(pid, 0)
        print("CHILD", os.waitstatus_to_exitcode(status))
    """ % (__import__("os").path.dirname(__file__),))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "CHILD 0" in r.stdout, r.stdout + r.stderr


def test_a_one_thread_pool_runs_the_batch_on_the_calling_thread():
    """A pool of one thread would run the feeds one after another anyway: they run on the caller,
    in order, the first failure stopping the rest with the same note (mnist on the CPU device of
    a 2-core VM: run_batch 4.2-4.9k runs/s through the pool, 5.9-6.2k inline, a plain loop
    5.9-6.2k)."""
    from vkml.runtime.batch import RunPool

    pool = RunPool(1)
    seen = []

    def fn(x):
        seen.append((x, threading.get_ident()))
        if x == 3:
            raise ValueError("three")
        return x * 2

    assert pool.map_ordered(fn, [0, 1, 2], "t") == [0, 2, 4]
    assert {t for _, t in seen} == {threading.get_ident()} and pool._executor is None
    seen.clear()
    with pytest.raises(ValueError, match="three") as e:
        pool.map_ordered(fn, [1, 3, 5], "t")
    assert [x for x, _ in seen] == [1, 3] and "t: item 1 of 3" in e.value.__notes__
    two = RunPool(2)  # more threads: on the pool, still in order
    assert two.map_ordered(lambda x: (x, threading.get_ident()), [1, 2, 3], "t")[0][1] != threading.get_ident()
    two.shutdown(wait=True)
