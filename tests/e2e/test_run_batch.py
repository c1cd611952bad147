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
