"""Threads that mix every way of running one session (issue #14 item 6): run, run_async (its
future awaited, awaited after a timed-out wait, or cancelled) and run_batch, from several
threads at once, each call on one of several input shapes (so several concrete plans and slot
pools are in use at once). Hypothesis draws the workloads. Every result must equal, bit for
bit, what the same session gives for that feed alone (a GPU plan computes the same way
whatever runs beside it), a cancelled future that never started must say so and a started one
must still give the right result."""
from __future__ import annotations

import threading
from concurrent.futures import CancelledError, TimeoutError as FutureTimeout

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import vkml
from _models import mlp, node_names

BATCHES = (1, 2, 3, 5)  # one concrete plan each
FEEDS_PER_SHAPE = 3
ACTIONS = ("run", "async", "async_after_timeout", "async_cancel", "batch")
SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))


class _Case:
    """A session and, per feed, what it gives alone."""

    def __init__(self, devices, placement=None):
        model = mlp()
        names = node_names(model)
        self.sess = vkml.InferenceSession(model, devices=devices, max_slots=3,
                                          placement={names[p]: "cpu" for p in (placement or ())})
        rng = np.random.default_rng(7)
        self.feeds = [{"x": rng.standard_normal((b, 16)).astype(np.float32)}
                      for b in BATCHES for _ in range(FEEDS_PER_SHAPE)]
        self.want = [self.sess.run(None, f)[0] for f in self.feeds]
        ref = vkml.InferenceSession(model, devices=["cpu"])
        for f, w in zip(self.feeds, self.want):
            np.testing.assert_allclose(w, ref.run(None, f)[0], rtol=1e-4, atol=1e-5)


_cases: dict = {}


@pytest.fixture(params=["gpu", "gpu+cpu node"])
def case(request, gpu):
    """One session per device layout for the whole module (plans and slots made by one example
    are reused by the next, as in a long-lived server)."""
    key = request.param
    if key not in _cases:
        _cases[key] = _Case([gpu, "cpu"], placement=(2,) if key == "gpu+cpu node" else None)
    return _cases[key]


action = st.tuples(st.sampled_from(ACTIONS), st.lists(st.integers(0, len(BATCHES) * FEEDS_PER_SHAPE - 1),
                                                      min_size=1, max_size=4))
workload = st.lists(st.lists(action, min_size=1, max_size=6), min_size=2, max_size=6)  # per thread


def _do(case: _Case, kind: str, items: list[int], problems: list[str], where: str) -> None:
    s, feeds, want = case.sess, case.feeds, case.want

    def same(got, i, what):
        if got.shape != want[i].shape or not np.array_equal(got.view(np.uint32), want[i].view(np.uint32)):
            problems.append(f"{where} {what} feed {i}: differs from the feed run alone")

    if kind == "run":
        for i in items:
            same(s.run(None, feeds[i])[0], i, "run")
    elif kind == "batch":
        outs = s.run_batch([feeds[i] for i in items])
        if len(outs) != len(items):
            problems.append(f"{where} run_batch: {len(outs)} results for {len(items)} feeds")
        for i, o in zip(items, outs):
            same(o[0], i, "run_batch")
    else:
        futures = [(i, s.run_async(None, feeds[i])) for i in items]
        for i, f in futures:
            if kind == "async_cancel" and f.cancel():
                try:
                    f.result(timeout=0)
                    problems.append(f"{where} feed {i}: a cancelled future gave a result")
                except CancelledError:
                    pass
                continue
            if kind == "async_after_timeout":
                try:
                    f.result(timeout=0)
                except FutureTimeout:
                    pass
            same(f.result(timeout=120)[0], i, kind)


@SETTINGS
@given(plan=workload)
def test_mixed_calls_from_many_threads(case, plan):
    problems: list[str] = []
    start = threading.Barrier(len(plan))

    def worker(t: int) -> None:
        start.wait()
        for k, (kind, items) in enumerate(plan[t]):
            try:
                _do(case, kind, items, problems, f"thread {t} step {k}")
            except Exception as e:  # reported below
                problems.append(f"thread {t} step {k} {kind}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=worker, args=(t,), daemon=True) for t in range(len(plan))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not any(t.is_alive() for t in threads), "a thread still runs after 300 s"
    assert not problems, problems[:5]
    pools = [p.pool for p in case.sess._gpu._plans.values()]
    assert pools and all(1 <= p.size <= 3 for p in pools)  # never more slots than max_slots
