"""The native run path (vkml/runtime/_fastrun.pyx): plans of uploads, GPU chunks and readbacks
on one GPU run without the GIL, on the lanes of their slots. Checked against the CPU device:
many threads, several input shapes, slots on different lanes, resident and non-contiguous
feeds (which leave the native path or are made contiguous), interrupts, the switch off."""
import threading

import numpy as np
import pytest

import vkml
from _models import cnn, mlp
from _threads import cpu_cases, hammer

THREADS, RUNS = 8, 40


def _programs(sess):
    plans = list(sess._gpu._plans.values())
    return [s.program for p in plans for s in p.pool._free]


def test_native_runs_match_the_cpu_from_many_threads(gpu):
    model = cnn()
    sess = vkml.InferenceSession(model, devices=[gpu], max_slots=4)
    rng = np.random.default_rng(0)
    cases = cpu_cases(model, [rng.standard_normal((1 + k % 3, 3, 12, 12)).astype(np.float32) for k in range(6)])
    errors = hammer(sess, cases, THREADS, RUNS)
    assert not errors, errors[:5]
    progs = _programs(sess)
    assert progs and all(p is not None for p in progs), "the plans did not take the native path"
    assert sum(p.runs for p in progs) == THREADS * RUNS
    dev = vkml.vulkan.device(int(gpu.split(":")[1]))
    lanes = [p.lane for p in progs]  # the slots spread over the device's lanes
    assert len(set(lanes)) >= min(len(lanes), dev.nlanes, 2), lanes
    assert all(p.gil_ns > 0 for p in progs if p.runs)


def test_non_contiguous_and_resident_feeds(gpu):
    model = mlp()
    sess = vkml.InferenceSession(model, devices=[gpu])
    ref = vkml.InferenceSession(model, devices=["cpu"])
    x = np.random.default_rng(1).standard_normal((16, 8)).astype(np.float32).T  # (8, 16), strided
    want = ref.run(None, {"x": np.ascontiguousarray(x)})[0]
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], want, rtol=1e-4, atol=1e-5)
    t = vkml.Tensor.from_numpy(np.ascontiguousarray(x), gpu)  # a resident feed: the generic path
    np.testing.assert_allclose(sess.run(None, {"x": t})[0], want, rtol=1e-4, atol=1e-5)
    out = sess.run(None, {"x": x}, output_device=gpu)[0]  # kept on the GPU: the generic path
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-5)
    assert sum(p.runs for p in _programs(sess) if p is not None) >= 1


def test_switched_off_gives_the_same_answers(gpu, vkml_env):
    model = cnn()
    x = np.random.default_rng(2).standard_normal((2, 3, 12, 12)).astype(np.float32)
    on = vkml.InferenceSession(model, devices=[gpu]).run(None, {"x": x})[0]
    vkml_env(VKML_FAST_RUN="0")  # read when a plan is made
    sess = vkml.InferenceSession(model, devices=[gpu])
    off = sess.run(None, {"x": x})[0]
    assert all(p is None for p in _programs(sess))
    np.testing.assert_array_equal(on, off)


def test_program_rejects_wrong_buffers(gpu):
    model = mlp()
    sess = vkml.InferenceSession(model, devices=[gpu])
    x = np.ones((2, 16), np.float32)
    sess.run(None, {"x": x})
    (p,) = [q for q in _programs(sess) if q is not None]
    with pytest.raises(ValueError, match="bytes"):
        p.run([np.ones((3, 16), np.float32)], [np.empty(16, np.float32)], 1.0)
    with pytest.raises(ValueError, match="expected 1 feeds"):
        p.run([], [], 1.0)
    sess.run(None, {"x": x})  # and the session goes on


def test_profile_reports_time_without_the_gil(gpu, tmp_path):
    import json

    so = vkml.SessionOptions()
    so.enable_profiling = True
    so.profile_file_prefix = str(tmp_path / "p")
    sess = vkml.InferenceSession(mlp(), sess_options=so, devices=[gpu])
    for _ in range(3):
        sess.run(None, {"x": np.ones((2, 16), np.float32)})
    with open(sess.end_profiling()) as f:
        runs = [e for e in json.load(f) if e.get("name") == "model_run"]
    assert len(runs) == 3
    for e in runs:
        assert e["args"]["nogil_us"] > 0 and e["args"]["gil_us"] > 0
        assert e["args"]["nogil_us"] + e["args"]["gil_us"] == pytest.approx(e["dur"], abs=0.2)


def test_mixed_calls_from_threads_match_the_cpu(gpu):
    """Hypothesis draws what 4 threads do to one GPU session (native runs of three shapes,
    run_async, run_batch, resident feeds and wrong feeds): every answer equals the CPU device's,
    every wrong feed gets its error, and every slot comes back."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    model = mlp()
    sess = vkml.InferenceSession(model, devices=[gpu], max_slots=3)
    ref = vkml.InferenceSession(model, devices=["cpu"])
    rng = np.random.default_rng(5)
    xs = [rng.standard_normal((n, 16)).astype(np.float32) for n in (1, 2, 5)]
    wants = [ref.run(None, {"x": x})[0] for x in xs]
    op = st.tuples(st.sampled_from(["run", "async", "batch", "resident", "bad"]), st.integers(0, 2))

    @settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(st.lists(op, min_size=1, max_size=6), min_size=4, max_size=4))
    def check(plans):
        errors: list[str] = []

        def worker(ops):
            for kind, k in ops:
                try:
                    if kind == "run":
                        got = [sess.run(None, {"x": xs[k]})[0]]
                    elif kind == "async":
                        got = [sess.run_async(None, {"x": xs[k]}).result(timeout=60)[0]]
                    elif kind == "batch":
                        got = [o[0] for o in sess.run_batch([{"x": xs[k]}, {"x": xs[(k + 1) % 3]}])]
                    elif kind == "resident":
                        got = [sess.run(None, {"x": vkml.Tensor.from_numpy(xs[k], gpu)})[0]]
                    else:
                        with pytest.raises((ValueError, TypeError)):
                            sess.run(None, {"x": xs[k].astype(np.float64)})
                        continue
                    want = [wants[k]] if kind != "batch" else [wants[k], wants[(k + 1) % 3]]
                    for g, w in zip(got, want):
                        if g.shape != w.shape or not np.allclose(g, w, rtol=1e-4, atol=1e-5):
                            errors.append(f"{kind} {k}: wrong output")
                except Exception as e:  # pragma: no cover - reported below
                    errors.append(f"{kind} {k}: {type(e).__name__}: {e}")

        threads = [threading.Thread(target=worker, args=(p,)) for p in plans]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert not errors, errors[:5]
        for plan in sess._gpu._plans.values():
            assert plan.pool.size == len(plan.pool._free) and plan.pool.retired == 0

    check()


def test_outputs_that_are_constants_or_feeds(gpu):
    """Graph outputs that are a constant or a graph input come back on the native path too
    (a fresh copy of the constant each run, the fed array itself)."""
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    c = np.arange(3, dtype=np.float32)
    g = h.make_graph([h.make_node("Relu", ["x"], ["y"])], "g", [h.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                     [h.make_tensor_value_info("y", T.FLOAT, [2, 3]), h.make_tensor_value_info("c", T.FLOAT, [3]),
                      h.make_tensor_value_info("x", T.FLOAT, [2, 3])], [nh.from_array(c, "c")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8).SerializeToString()
    sess = vkml.InferenceSession(m, devices=[gpu])
    x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    for _ in range(2):
        y, cc, xx = sess.run(None, {"x": x})
        np.testing.assert_array_equal(y, np.maximum(x, 0))
        np.testing.assert_array_equal(cc, c)
        assert xx is x
        cc[0] = 99  # a copy: the next run's constant is untouched
    assert sum(p.runs for p in _programs(sess) if p is not None) == 2
