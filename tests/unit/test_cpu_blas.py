"""The CPU device and NumPy's BLAS threads (vkml/runtime/blas.py): runs in flight cap them, the
process's own setting comes back after, and a run in a worker thread is as fast as on the main one."""
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

import vkml
import vkml.api.session
from vkml.runtime import blas

DIGITS = Path(vkml.__file__).parent / "data" / "digits_cnn.onnx"


class FakeBlas:
    def __init__(self, n: int) -> None:
        self.n, self.calls, self.gemm = n, [], None

    def get(self) -> int:
        return self.n

    def set(self, n: int) -> None:
        self.calls.append(n)
        self.n = n


def test_auto_divides_the_process_setting_and_puts_it_back(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(blas.time, "monotonic", lambda: clock[0])
    b = FakeBlas(16)
    lim = blas.Limiter(b, "auto")
    lim.enter(1, True)
    assert b.n == 16
    lim.enter(1, True)  # two in flight: 16 // 2**2
    assert b.n == 4
    lim.enter(2, True)  # a parallel plan of width 2 joins: three runs, 16 // 3**2
    assert b.n == 1
    lim.exit(2, True)
    lim.exit(1, True)
    assert b.n == 1  # not raised while others are still in a GEMM
    lim.enter(1, True)
    assert b.n == 1  # two in flight again, within HOLD_S of four
    lim.exit(1, True)
    clock[0] += 2 * blas.HOLD_S
    lim.enter(1, True)  # two in flight, long after the four: raised
    assert b.n == 4
    lim.exit(1, True)
    lim.exit(1, True)
    assert b.n == 16  # the process's setting back when none is in flight
    assert b.calls == [16, 4, 1, 4, 16]
    alone = FakeBlas(16)
    lim = blas.Limiter(alone, "auto")
    lim.enter(2, True)  # one run of a parallel plan two branches wide: its branches share the 16
    assert alone.n == 8
    lim.exit(2, True)
    assert alone.n == 16


def test_small_gemm_runs_get_one_thread_and_a_user_setting_survives():
    b = FakeBlas(3)
    lim = blas.Limiter(b, "auto")
    lim.enter(1, False)
    assert b.n == 1
    lim.enter(1, True)  # a big run joins: 3 // 2**2, at least 1
    assert b.n == 1
    lim.exit(1, False)
    assert b.n == 1  # (raised at the next run's start, HOLD_S later: never under a GEMM)
    lim.exit(1, True)
    assert b.n == 3
    b.n = 5  # the user changes it between runs: vkml saves the new value
    lim.enter(1, False)
    lim.exit(1, False)
    assert b.n == 5


def test_fixed_and_off_policies():
    b = FakeBlas(8)
    lim = blas.Limiter(b, 2)
    lim.enter(1, True)
    lim.enter(1, True)
    assert b.n == 2
    lim.exit(1, True)
    lim.exit(1, True)
    assert b.n == 8
    off = FakeBlas(8)
    lim = blas.Limiter(off, None)
    lim.enter(1, False)
    lim.exit(1, False)
    assert off.calls == []


def test_config_parses(vkml_env):
    from vkml import config

    for raw, want in (("", "auto"), ("auto", "auto"), ("off", None), ("0", None), ("3", 3)):
        vkml_env(VKML_CPU_BLAS_THREADS=raw)
        assert config.cpu_blas_threads() == want
    vkml_env(VKML_CPU_BLAS_THREADS="-2")
    with pytest.raises(ValueError, match="VKML_CPU_BLAS_THREADS"):
        config.cpu_blas_threads()


def matmul_model(k: int):
    """y = x @ w with x (1, k) and w (k, k): k*k multiply-adds."""
    w = numpy_helper.from_array(np.full((k, k), 0.5, np.float32), "w")
    g = h.make_graph([h.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "mm",
                     [h.make_tensor_value_info("x", T.FLOAT, [1, k])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, k])], [w])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


@pytest.fixture
def real_blas(vkml_env):
    """NumPy's OpenBLAS at 2 threads and a fresh limiter with the default policy."""
    found = blas.find_blas()
    if found is None:
        pytest.skip("NumPy's BLAS is not an OpenBLAS vkml can reach")
    vkml_env(VKML_CPU_BLAS_THREADS=None)
    saved = found.get()
    found.set(2)
    blas.reset()
    yield found
    blas.reset()
    found.set(saved)


def _seen_during_runs(monkeypatch, found, sess, k: int, threads: int) -> list[int]:
    """BLAS's thread count seen inside run() by `threads` runs that are all in flight at once."""
    seen, barrier, real = [], threading.Barrier(threads, timeout=30), vkml.api.session.run_plan

    def recording(plan, feeds, outer=None):
        if threads > 1:
            barrier.wait()
        seen.append(found.get())
        if threads > 1:
            barrier.wait()
        return real(plan, feeds, outer)

    monkeypatch.setattr(vkml.api.session, "run_plan", recording)
    x = np.ones((1, k), np.float32)
    ts = [threading.Thread(target=sess.run, args=(None, {"x": x})) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    monkeypatch.setattr(vkml.api.session, "run_plan", real)
    return seen


def test_runs_in_flight_cap_blas_threads(monkeypatch, vkml_env, real_blas):
    # The Python path's runs (run_plan, watched here; native programs have their own tests)
    vkml_env(VKML_CPU_NATIVE="0")
    k = 4096  # 16M multiply-adds: a GEMM worth two threads
    sess = vkml.InferenceSession(matmul_model(k), devices=["cpu"], executor="sequential")
    assert _seen_during_runs(monkeypatch, real_blas, sess, k, 1) == [2]
    assert _seen_during_runs(monkeypatch, real_blas, sess, k, 2) == [1, 1]  # was [2, 2]: oversubscribed
    assert real_blas.get() == 2
    small = vkml.InferenceSession(matmul_model(64), devices=["cpu"], executor="sequential")
    assert _seen_during_runs(monkeypatch, real_blas, small, 64, 1) == [1]
    assert real_blas.get() == 2
    y = sess.run(None, {"x": np.ones((1, k), np.float32)})[0]
    np.testing.assert_allclose(y, np.full((1, k), 0.5 * k, np.float32))


def test_cpu_runs_config_parses(vkml_env):
    from vkml import config

    for raw, want in (("", "auto"), ("auto", "auto"), ("off", None), ("0", None), ("3", 3)):
        vkml_env(VKML_CPU_RUNS=raw)
        assert config.cpu_runs() == want
    vkml_env(VKML_CPU_RUNS="many")
    with pytest.raises(ValueError, match="VKML_CPU_RUNS"):
        config.cpu_runs()


def _most_in_flight(monkeypatch, sess, k: int, threads: int) -> int:
    """The most runs of `sess` seen inside run_plan at once while `threads` threads run it."""
    lock, now, most, real = threading.Lock(), [0], [0], vkml.api.session.run_plan

    def counting(plan, feeds, outer=None):
        with lock:
            now[0] += 1
            most[0] = max(most[0], now[0])
        try:
            time.sleep(0.002)  # long enough for the other threads to arrive
            return real(plan, feeds, outer)
        finally:
            with lock:
                now[0] -= 1

    monkeypatch.setattr(vkml.api.session, "run_plan", counting)
    x = np.ones((1, k), np.float32)
    with ThreadPoolExecutor(threads) as pool:
        for f in [pool.submit(sess.run, None, {"x": x}) for _ in range(4 * threads)]:
            f.result()
    monkeypatch.setattr(vkml.api.session, "run_plan", real)
    return most[0]


def test_small_gemm_runs_go_one_at_a_time(monkeypatch, vkml_env, real_blas):
    """A session of small GEMMs lets one run in at a time (VKML_CPU_RUNS=auto); big GEMMs overlap,
    and VKML_CPU_RUNS=off lifts the gate. (The Python path's gate: native programs, which need
    none, are off here; tests/unit/test_cpu_native.py has theirs.)"""
    vkml_env(VKML_CPU_RUNS=None, VKML_CPU_NATIVE="0")
    small = vkml.InferenceSession(matmul_model(64), devices=["cpu"], executor="sequential")
    assert _most_in_flight(monkeypatch, small, 64, 4) == 1
    big = vkml.InferenceSession(matmul_model(4096), devices=["cpu"], executor="sequential")
    assert big._gate is None
    vkml_env(VKML_CPU_RUNS="off")
    ungated = vkml.InferenceSession(matmul_model(64), devices=["cpu"], executor="sequential")
    assert ungated._gate is None and _most_in_flight(monkeypatch, ungated, 64, 4) > 1
    vkml_env(VKML_CPU_RUNS="2")
    two = vkml.InferenceSession(matmul_model(64), devices=["cpu"], executor="sequential")
    assert _most_in_flight(monkeypatch, two, 64, 4) <= 2
    assert real_blas.get() == 2


@pytest.mark.parametrize("model", ["digits", "big_matmul"])
def test_many_threads_on_one_cpu_session(real_blas, model):
    """16 threads sharing one CPU session, 8 runs each with inputs of their own: every output is
    the one a lone run gives, and BLAS's thread count is the process's own again afterwards."""
    if model == "digits":
        sess = vkml.InferenceSession(str(DIGITS), devices=["cpu"])
        arg = sess.get_inputs()[0]
        shape = [d if isinstance(d, int) else 1 for d in arg.shape]
    else:
        sess = vkml.InferenceSession(matmul_model(2048), devices=["cpu"])
        arg, shape = sess.get_inputs()[0], [1, 2048]
    rng = np.random.default_rng(14)
    feeds = [{arg.name: rng.standard_normal(shape, dtype=np.float32)} for _ in range(16 * 8)]
    want = [sess.run(None, f) for f in feeds]
    assert real_blas.get() == 2

    def worker(k: int) -> list:
        return [(i, sess.run(None, feeds[i])) for i in range(k, len(feeds), 16)]

    with ThreadPoolExecutor(16) as pool:
        got = [r for f in [pool.submit(worker, k) for k in range(16)] for r in f.result()]
    assert len(got) == len(feeds)
    for i, outs in got:
        for a, b in zip(outs, want[i]):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)  # BLAS may split differently
    assert real_blas.get() == 2
    batch = sess.run_batch(feeds[:32])
    for outs, ref in zip(batch, want[:32]):
        for a, b in zip(outs, ref):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)  # BLAS may split differently
    assert real_blas.get() == 2


def test_split_runs_share_the_cores_and_blas_gets_one_thread():
    """Runs that split their convolutions (VKML_CPU_SPLIT) get cores // width intra-op threads
    and BLAS one thread while they are in flight; the width goes back to 1 after the last."""
    from vkml.ops import _parallel

    real = blas.find_blas()
    if real is None or real.gemm is None:
        pytest.skip("NumPy's BLAS exports no cblas GEMM vkml can reach")
    b = FakeBlas(16)
    b.gemm = real.gemm  # (the limiter hands these to the chunks)
    lim = blas.Limiter(b, "auto", split=True, cores=16)
    lim.enter(1, True, True)
    assert (b.n, _parallel.width()) == (1, 16)
    lim.enter(1, True, True)
    assert (b.n, _parallel.width()) == (1, 8)
    lim.enter(2, True, False)  # a non-splitting run of width 2 joins: it counts against the cores too
    assert (b.n, _parallel.width()) == (1, 4)
    lim.exit(2, True, False)
    lim.exit(1, True, True)
    assert _parallel.width() == 16  # the one left may use them all at once
    lim.exit(1, True, True)
    assert (b.n, _parallel.width()) == (16, 1)
    off = blas.Limiter(b, "auto", split=False, cores=16)
    b.n = 16
    off.enter(1, True, True)  # VKML_CPU_SPLIT=0: the plan asks, the limiter does not split
    assert (b.n, _parallel.width()) == (16, 1)
    off.exit(1, True, True)
    assert not blas.Limiter(FakeBlas(16), "auto", split=True).split  # no cblas GEMM found: no split
    fixed = blas.Limiter(b, 4, cores=16)
    assert not fixed.split  # a fixed BLAS policy leaves the threads to BLAS


def conv_model(c: int, hw: int):
    """A 3x3 convolution of c channels on (1, c, hw, hw), then a Relu."""
    rng = np.random.default_rng(3)
    w = numpy_helper.from_array(rng.standard_normal((c, c, 3, 3)).astype(np.float32) / c, "w")
    g = h.make_graph([h.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
                      h.make_node("Relu", ["c"], ["y"], name="relu")], "conv",
                     [h.make_tensor_value_info("x", T.FLOAT, [1, c, hw, hw])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, c, hw, hw])], [w])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def test_a_cpu_session_splits_its_big_convolutions(monkeypatch, vkml_env, real_blas):
    """A plan with a big Conv runs in order with its convolution in chunks on the intra-op
    threads (BLAS at one thread meanwhile); its outputs from 4 threads equal a lone run's, and
    VKML_CPU_SPLIT=0 gives the same within float32 rounding. (The Python path's split: native
    programs split their own, tests/unit/test_cpu_native.py.)"""
    from vkml.ops import _parallel

    vkml_env(VKML_CPU_SPLIT=None, VKML_CPU_NATIVE="0")
    monkeypatch.setattr(blas, "usable_cores", lambda: 2)  # as on CI's VM, whatever runs this
    sess = vkml.InferenceSession(conv_model(64, 32), devices=["cpu"])
    assert sess._blas_split and sess._parallel is None
    calls, real = [], _parallel.run_chunks
    monkeypatch.setattr(_parallel, "run_chunks", lambda fn, n, ways: (calls.append((n, real_blas.get())),
                                                                       real(fn, n, ways)))
    rng = np.random.default_rng(5)
    feeds = [{"x": rng.standard_normal((1, 64, 32, 32)).astype(np.float32)} for _ in range(8)]
    want = [sess.run(None, f)[0] for f in feeds]
    assert calls and all(n == 2 and threads == 1 for n, threads in calls)  # (2 cores)
    assert real_blas.get() == 2 and _parallel.width() == 1
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda f: sess.run(None, f)[0], feeds))
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    vkml_env(VKML_CPU_SPLIT="0")
    blas.reset()
    whole = vkml.InferenceSession(conv_model(64, 32), devices=["cpu"])
    assert not whole._blas_split
    np.testing.assert_allclose(whole.run(None, feeds[0])[0], want[0], rtol=1e-5, atol=1e-5)


def test_only_plans_of_splittable_gemms_split(real_blas):
    """A plan splits when its convolutions and MatMuls by 2-D weights are most of its GEMM work:
    a conv and a small Gemm yes, a conv ahead of a far bigger MatMul by a weight yes (both split),
    a conv ahead of a far bigger Gemm (which does not split) no."""
    rng = np.random.default_rng(4)

    def model(k: int, op: str):
        w = numpy_helper.from_array(rng.standard_normal((64, 64, 3, 3)).astype(np.float32), "w")
        m = numpy_helper.from_array(rng.standard_normal((k, k)).astype(np.float32), "m")
        g = h.make_graph([h.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
                          h.make_node("Reshape", ["c", "s"], ["r"], name="flat"),
                          h.make_node(op, ["r", "m"], ["y"], name="mm")], "g",
                         [h.make_tensor_value_info("x", T.FLOAT, [1, 64, 32, 32])],
                         [h.make_tensor_value_info("y", T.FLOAT, None)],
                         [w, m, numpy_helper.from_array(np.array([-1, k], np.int64), "s")])
        return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])

    assert vkml.InferenceSession(model(64, "Gemm"), devices=["cpu"])._blas_split  # conv 37.7M, Gemm 4.2M
    mm = vkml.InferenceSession(model(2048, "MatMul"), devices=["cpu"])  # MatMul 32 x 2048 x 2048: 134M
    assert mm._blas_split
    assert not vkml.InferenceSession(model(2048, "Gemm"), devices=["cpu"])._blas_split


def test_split_runs_of_many_shapes_from_many_threads(monkeypatch, vkml_env, real_blas):
    """8 threads share a CPU session with a symbolic spatial size, each run its own size: the
    convolutions split by however many runs are in flight at that moment, and every output
    equals the whole convolution's."""
    from vkml.ops import _parallel
    from vkml.ops import conv as conv_op
    from vkml.ops._window import resolve

    vkml_env(VKML_CPU_SPLIT=None, VKML_CPU_NATIVE="0")  # (the Python path's split)
    monkeypatch.setattr(blas, "usable_cores", lambda: 8)  # several chunks per run, whatever runs this
    monkeypatch.setattr(_parallel, "SPLIT_MACS", 1 << 16)  # and chunks of these small shapes,
    monkeypatch.setattr(conv_op, "SPLIT_MIN_POSITIONS", 16)  # by rows
    rng = np.random.default_rng(6)
    wt = (rng.standard_normal((16, 16, 3, 3)) / 12).astype(np.float32)
    g = h.make_graph([h.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
                      h.make_node("Relu", ["c"], ["y"], name="relu")], "conv",
                     [h.make_tensor_value_info("x", T.FLOAT, [1, 16, "h", "w"])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)], [numpy_helper.from_array(wt, "w")])
    sess = vkml.InferenceSession(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), devices=["cpu"])
    assert sess._blas_split
    feeds = [rng.standard_normal((1, 16, int(rng.integers(8, 40)), int(rng.integers(8, 40)))).astype(np.float32)
             for _ in range(48)]
    want = []
    for x in feeds:
        win = resolve(list(x.shape[2:]), [3, 3], [1, 1], [1, 1], [1, 1, 1, 1], "NOTSET", False)
        want.append(np.maximum(conv_op.conv_core(x, wt, 1, win, np.dtype(np.float32)), 0))
    widths, real = [], _parallel.run_chunks
    monkeypatch.setattr(_parallel, "run_chunks", lambda fn, n, ways: (widths.append(n), real(fn, n, ways)))
    np.testing.assert_allclose(sess.run(None, {"x": feeds[0]})[0], want[0], rtol=1e-5, atol=1e-5)
    assert widths and widths[0] >= 2  # a run alone splits over the cores
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda x: sess.run(None, {"x": x})[0], feeds))
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    assert real_blas.get() == 2 and _parallel.width() == 1
