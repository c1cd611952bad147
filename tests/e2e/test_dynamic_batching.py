"""DynamicBatcher (vkml/api/batching.py): requests merged along the batch axis give each caller
what a lone run gives, never more rows than asked per run, keep bad or cancelled requests to
themselves, and refuse models that cannot be batched."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto as T
from onnx import helper as h

import vkml
from _models import cnn, mlp


@pytest.fixture(params=["cpu", "gpu"])
def devices(request):
    return ["cpu"] if request.param == "cpu" else [request.getfixturevalue("gpu"), "cpu"]


class Recorder:
    """A session that records the rows of each run (and may fail merged runs)."""

    def __init__(self, session, fail_above: int | None = None):
        self.s, self.rows, self.fail_above = session, [], fail_above
        self.lock = threading.Lock()

    def __getattr__(self, name):
        return getattr(self.s, name)

    def run(self, names, feed, *a, **k):
        n = next(iter(feed.values())).shape[0]
        with self.lock:
            self.rows.append(n)
        if self.fail_above is not None and n > self.fail_above:
            raise RuntimeError("merged run refused by the test")
        return self.s.run(names, feed, *a, **k)


def _feeds(n: int, width: int = 16, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [{"x": rng.standard_normal((1 + i % 3, width)).astype(np.float32)} for i in range(n)]


def _close(a, b):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_merged_runs_equal_lone_runs_from_many_threads(devices):
    s = vkml.InferenceSession(mlp(), devices=devices)
    feeds = _feeds(96)
    want = [s.run(None, f)[0] for f in feeds]
    rec = Recorder(s)
    got: list = [None] * len(feeds)
    with vkml.DynamicBatcher(rec, max_batch_size=12, max_delay_ms=20) as b:
        def caller(k: int) -> None:
            for i in range(k, len(feeds), 8):
                got[i] = b.run(None, feeds[i], timeout=120)
        threads = [threading.Thread(target=caller, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        stats = b.stats()
    for g, w, f in zip(got, want, feeds):
        assert g[0].shape == (f["x"].shape[0], 8)
        _close(g[0], w)
    total = sum(f["x"].shape[0] for f in feeds)
    assert max(rec.rows) <= 12 and sum(rec.rows) == total + stats["padded_rows"]
    assert stats["requests"] == 96 and stats["rows"] == total
    assert set(rec.rows) <= {1, 2, 3, 4, 8, 12}  # powers of two, max_batch_size, or a lone request
    assert stats["merged_runs"] >= 1 and len(rec.rows) < len(feeds)  # it did merge


def test_a_cnn_on_the_gpu_batched(gpu):
    s = vkml.InferenceSession(cnn(), devices=[gpu, "cpu"])
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal((1, 3, 12, 12)).astype(np.float32) for _ in range(20)]
    with vkml.DynamicBatcher(s, max_batch_size=8, max_delay_ms=50) as b:
        futures = [b.submit({"x": x}) for x in xs]
        for x, f in zip(xs, futures):
            _close(f.result(timeout=120)[0], s.run(None, {"x": x})[0])


def test_only_compatible_requests_merge():
    """Requests with other trailing dimensions (or other outputs asked for) run apart."""
    x = h.make_tensor_value_info("x", T.FLOAT, ["N", "L"])
    y = h.make_tensor_value_info("y", T.FLOAT, ["N", 1])
    z = h.make_tensor_value_info("z", T.FLOAT, ["N", "L"])
    g = h.make_graph([h.make_node("ReduceMean", ["x"], ["y"], axes=[1]), h.make_node("Neg", ["x"], ["z"])],
                     "g", [x], [y, z])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    s = vkml.InferenceSession(m.SerializeToString(), devices=["cpu"])
    rec = Recorder(s)
    rng = np.random.default_rng(0)
    reqs = [({"x": rng.standard_normal((2, 3 + i % 2)).astype(np.float32)}, None if i % 3 else ["z"])
            for i in range(30)]
    with vkml.DynamicBatcher(rec, max_batch_size=64, max_delay_ms=100) as b:
        futures = [b.submit(f, names) for f, names in reqs]
        for (f, names), fut in zip(reqs, futures):
            got = fut.result(timeout=60)
            want = s.run(names, f)
            assert len(got) == len(want)
            for a, w in zip(got, want):
                _close(a, w)
    assert len(rec.rows) >= 4  # {L=3, L=4} x {all outputs, ["z"]}


def test_bad_requests_fail_alone(devices):
    s = vkml.InferenceSession(mlp(), devices=devices)
    good = _feeds(10)
    with vkml.DynamicBatcher(s, max_batch_size=64, max_delay_ms=30) as b:
        fs = [b.submit(f) for f in good[:5]]
        wrong_dim = b.submit({"x": np.zeros((2, 15), np.float32)})
        wrong_name = b.submit({"nope": np.zeros((2, 16), np.float32)})
        wrong_type = b.submit({"x": np.zeros((2, 16), np.int32)})
        device = b.submit({"x": vkml.Tensor.from_numpy(np.zeros((2, 16), np.float32))})
        fs += [b.submit(f) for f in good[5:]]
        for f, feed in zip(fs, good):
            _close(f.result(timeout=60)[0], s.run(None, feed)[0])
    assert "dimension 1 must be 16" in str(wrong_dim.exception())
    assert isinstance(wrong_name.exception(), ValueError) and "nope" in str(wrong_name.exception())
    assert isinstance(wrong_type.exception(), (TypeError, ValueError))
    assert isinstance(device.exception(), TypeError) and "host arrays" in str(device.exception())


def test_a_failed_merged_run_falls_back_to_lone_runs():
    s = vkml.InferenceSession(mlp(), devices=["cpu"])
    rec = Recorder(s, fail_above=3)
    feeds = [{"x": np.full((1, 16), i, np.float32)} for i in range(8)]
    with vkml.DynamicBatcher(rec, max_batch_size=8, max_delay_ms=200) as b:
        futures = [b.submit(f) for f in feeds]
        for f, feed in zip(futures, feeds):
            _close(f.result(timeout=60)[0], s.run(None, feed)[0])
        stats = b.stats()
    assert stats["fallbacks"] >= 1 and max(rec.rows[1:]) <= 3


def test_oversized_requests_run_alone_and_cancelled_ones_never_run():
    s = vkml.InferenceSession(mlp(), devices=["cpu"])
    rec = Recorder(s)
    with vkml.DynamicBatcher(rec, max_batch_size=4, max_delay_ms=300) as b:
        big = b.submit({"x": np.ones((9, 16), np.float32)})
        small = [b.submit({"x": np.ones((1, 16), np.float32)}) for _ in range(3)]
        assert small[1].cancel()
        assert big.result(timeout=60)[0].shape == (9, 8)
        assert [f.result(timeout=60)[0].shape for f in (small[0], small[2])] == [(1, 8), (1, 8)]
    assert sorted(rec.rows) == [2, 9]


def test_close_runs_what_is_queued_then_refuses():
    s = vkml.InferenceSession(mlp(), devices=["cpu"])
    b = vkml.DynamicBatcher(s, max_batch_size=1000, max_delay_ms=60_000)
    futures = [b.submit(f) for f in _feeds(20)]
    b.close()  # does not wait the minute: closing flushes the queue
    assert all(f.done() and f.exception() is None for f in futures)
    with pytest.raises(RuntimeError, match="closed"):
        b.submit(_feeds(1)[0])


@pytest.mark.parametrize("shape", [[4, 16], ["N", 16, "M"]])
def test_models_that_cannot_be_batched_are_refused(shape):
    x = h.make_tensor_value_info("x", T.FLOAT, shape)
    y = h.make_tensor_value_info("y", T.FLOAT, None)
    g = h.make_graph([h.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    s = vkml.InferenceSession(m.SerializeToString(), devices=["cpu"])
    if isinstance(shape[0], int):
        with pytest.raises(ValueError, match="symbolic leading"):
            vkml.DynamicBatcher(s)
    else:  # two symbols on the input are fine: the leading one is the batch axis
        with vkml.DynamicBatcher(s, max_delay_ms=0) as b:
            assert b.axis_name == "N"
            assert b.run(None, {"x": -np.ones((2, 16, 3), np.float32)})[0].max() == 0


def test_warmup_plans_every_bucket_and_runs_pad_to_them():
    s = vkml.InferenceSession(mlp(), devices=["cpu"])
    rec = Recorder(s)
    with vkml.DynamicBatcher(rec, max_batch_size=12) as b:
        b.warmup({"x": np.ones((1, 16), np.float32)})
        assert rec.rows == [1, 2, 4, 8, 12]
        assert [b._state.bucket(n) for n in (1, 3, 5, 9, 12, 40)] == [1, 4, 8, 12, 12, 40]


def test_arguments_are_checked():
    s = vkml.InferenceSession(mlp(), devices=["cpu"])
    for kw in ({"max_batch_size": 0}, {"max_delay_ms": -1}, {"max_in_flight": 0}):
        with pytest.raises(ValueError):
            vkml.DynamicBatcher(s, **kw)


@settings(max_examples=15, deadline=None)
@given(rows=st.lists(st.integers(1, 5), min_size=1, max_size=25), cap=st.integers(1, 12), pad=st.booleans())
def test_any_mix_of_requests(rows, cap, pad):
    s = _CPU_MLP[0]
    rng = np.random.default_rng(len(rows) * 31 + cap)
    feeds = [{"x": rng.standard_normal((r, 16)).astype(np.float32)} for r in rows]
    rec = Recorder(s)
    with vkml.DynamicBatcher(rec, max_batch_size=cap, max_delay_ms=5, pad_to_buckets=pad) as b:
        futures = [b.submit(f) for f in feeds]
        for f, feed in zip(futures, feeds):
            _close(f.result(timeout=60)[0], s.run(None, feed)[0])
        padded = b.stats()["padded_rows"]
    assert all(n <= cap or n in rows for n in rec.rows) and sum(rec.rows) == sum(rows) + padded
    assert pad or padded == 0


_CPU_MLP = [vkml.InferenceSession(mlp(), devices=["cpu"])]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_gets_a_clear_error():
    code = textwrap.dedent("""
        import os, sys
        sys.path.insert(0, %r)
        import numpy as np, vkml
        from _models import mlp
        b = vkml.DynamicBatcher(vkml.InferenceSession(mlp(), devices=["cpu"]), max_delay_ms=0)
        b.run(None, {"x": np.ones((1, 16), np.float32)})
        pid = os.fork()
        if pid == 0:
            try:
                b.submit({"x": np.ones((1, 16), np.float32)})
                os._exit(3)
            except RuntimeError as e:
                os._exit(0 if "another process" in str(e) else 4)
        _, status = os.waitpid(pid, 0)
        print("CHILD", os.waitstatus_to_exitcode(status))
        b.close()
    """ % (os.path.dirname(__file__),))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "CHILD 0" in out.stdout, out.stdout + out.stderr


def test_the_session_makes_one():
    s = vkml.InferenceSession(mlp(), devices=["cpu"])
    with s.dynamic_batcher(max_batch_size=4) as b:
        assert isinstance(b, vkml.DynamicBatcher)
        assert b.run(["y"], {"x": np.ones((3, 16), np.float32)})[0].shape == (3, 8)


@pytest.mark.parametrize("slots", [1, 3])
def test_run_and_submit_from_many_threads_never_hang(slots):
    """Callers hand run slots to each other; every slot comes back, whatever the mix."""
    s = _CPU_MLP[0]
    feeds = _feeds(90, seed=5)
    want = [s.run(None, f)[0] for f in feeds]
    b = vkml.DynamicBatcher(s, max_batch_size=5, max_in_flight=slots)
    got: dict = {}

    def caller(k: int) -> None:
        for i in range(k, len(feeds), 6):
            if i % 3:
                got[i] = b.run(None, feeds[i], timeout=60)[0]
            else:
                got[i] = b.submit(feeds[i]).result(timeout=60)[0]
    threads = [threading.Thread(target=caller, args=(k,), daemon=True) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads)
    closer = threading.Thread(target=b.close, daemon=True)
    closer.start()
    closer.join(60)
    assert not closer.is_alive() and b._state.busy == 0 and not b._state.queue
    for i, w in enumerate(want):
        _close(got[i], w)


def test_a_request_that_times_out_in_the_queue_never_runs():
    import time

    class Slow(Recorder):
        def run(self, names, feed, *a, **k):
            time.sleep(0.3)
            return super().run(names, feed, *a, **k)
    rec = Slow(_CPU_MLP[0])
    with vkml.DynamicBatcher(rec, max_batch_size=1, max_in_flight=1) as b:
        first = b.submit({"x": np.ones((1, 16), np.float32)})
        time.sleep(0.05)  # (the pool thread has taken the only slot)
        with pytest.raises(TimeoutError):
            b.run(None, {"x": np.ones((2, 16), np.float32)}, timeout=0.05)
        assert first.result(timeout=60)[0].shape == (1, 8)
    assert rec.rows == [1]
