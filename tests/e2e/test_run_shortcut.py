"""The session's C shortcut (vkml/runtime/_fastrun.pyx Shortcut): from the second run of a feed
signature on the native path, Session.run checks the feeds, takes a slot, runs and makes the
outputs in C. Anything it does not take (other names, dtypes, shapes or layouts, run options,
Tensors, unknown output names) must go the usual way with the usual answer or error, and its
runs must be right from many threads, time out like the usual path and follow
VKML_GPU_TIMEOUT as it changes."""
import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import vkml
from _models import cnn, mlp
from _threads import cpu_cases, hammer, sigint_latency

HYP = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _outcome(sess, names, feed, **kw):
    """What a run gives: ("ok", outputs) or ("error", type, message)."""
    try:
        return ("ok", sess.run(names, feed, **kw))
    except Exception as e:
        return ("error", type(e), str(e))


def _usual(sess, names, feed, **kw):
    """The run on the usual path (the session's shortcut dropped first)."""
    sess._gpu.shortcut = None
    return _outcome(sess, names, feed, **kw)


def _cut(sess, feed):
    """Two runs of `feed`: the second installs the session's shortcut, which is returned."""
    sess.run(None, feed)
    sess.run(None, feed)
    cut = sess._gpu.shortcut
    assert cut is not None, "the second run of a signature on the native path made no shortcut"
    return cut


def test_repeated_runs_take_the_shortcut_and_match_the_cpu(gpu):
    model = mlp()
    sess = vkml.InferenceSession(model, devices=[gpu])
    ref = vkml.InferenceSession(model, devices=["cpu"])
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 16)).astype(np.float32)
    cut = _cut(sess, {"x": x})
    before = cut.runs
    for _ in range(5):
        x = rng.standard_normal((4, 16)).astype(np.float32)
        (y,) = sess.run(None, {"x": x})
        np.testing.assert_allclose(y, ref.run(None, {"x": x})[0], rtol=1e-4, atol=1e-5)
    assert cut.runs == before + 5
    assert sess._gpu.shortcut is cut  # (the same signature: the same shortcut)


TAKEN = ("same", "names", "names twice", "no names")  # the runs of _mutations() the shortcut takes


def _mutations():
    """(label, make(x) -> feed, output names): feeds and names the shortcut must hand over."""
    name = "y"
    return st.sampled_from([
        ("same", lambda x: {"x": x}, None),
        ("names", lambda x: {"x": x}, [name]),
        ("names twice", lambda x: {"x": x}, (name, name)),
        ("no names", lambda x: {"x": x}, []),
        ("unknown name", lambda x: {"x": x}, ["nope"]),
        ("a string of names", lambda x: {"x": x}, name),
        ("float64", lambda x: {"x": x.astype(np.float64)}, None),
        ("int32", lambda x: {"x": x.astype(np.int32)}, None),
        ("big-endian", lambda x: {"x": x.astype(">f4")}, None),
        ("other batch", lambda x: {"x": np.concatenate([x, x])}, None),
        ("rank 3", lambda x: {"x": x[None]}, None),
        ("strided", lambda x: {"x": np.asfortranarray(x)}, None),
        ("a list", lambda x: {"x": x.tolist()}, None),
        ("extra key", lambda x: {"x": x, "z": x}, None),
        ("other key", lambda x: {"z": x}, None),
        ("empty", lambda x: {}, None),
        ("a Tensor", lambda x: {"x": vkml.Tensor.from_numpy(x, "cpu")}, None),
    ])


@HYP
@given(case=_mutations(), seed=st.integers(0, 2**16))
def test_what_the_shortcut_does_not_take_goes_the_usual_way(gpu, case, seed):
    label, make, names = case
    sess = _session(gpu)
    x = np.random.default_rng(seed).standard_normal((4, 16)).astype(np.float32)
    cut = _cut(sess, {"x": x})
    feed = make(x)
    before = cut.runs
    got = _outcome(sess, names, feed)
    assert (cut.runs > before) == (label in TAKEN), label
    want = _usual(sess, names, feed)
    assert got[0] == want[0], (label, got, want)
    if got[0] == "error":
        assert got[1:] == want[1:], label
    else:
        assert len(got[1]) == len(want[1]), label
        for a, b in zip(got[1], want[1]):
            assert type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape, label
            np.testing.assert_array_equal(a, b)
    sess._gpu.shortcut = cut
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], want_plain(x), rtol=1e-4, atol=1e-5)


_SESSIONS: dict = {}


def _session(gpu):
    """One GPU session of mlp() for the hypothesis examples (making one per example is slow)."""
    if gpu not in _SESSIONS:
        _SESSIONS[gpu] = vkml.InferenceSession(mlp(), devices=[gpu])
    return _SESSIONS[gpu]


def want_plain(x):
    if "cpu" not in _SESSIONS:
        _SESSIONS["cpu"] = vkml.InferenceSession(mlp(), devices=["cpu"])
    return _SESSIONS["cpu"].run(None, {"x": x})[0]


def test_run_options_output_devices_and_the_profile_go_the_usual_way(gpu, tmp_path):
    sess = vkml.InferenceSession(mlp(), devices=[gpu])
    x = np.ones((2, 16), np.float32)
    cut = _cut(sess, {"x": x})
    before = cut.runs
    want = sess.run(None, {"x": x})[0]
    assert cut.runs == before + 1
    ro = vkml.RunOptions()
    ro.logid = "tagged"
    np.testing.assert_array_equal(sess.run(None, {"x": x}, ro)[0], want)
    out = sess.run(None, {"x": x}, output_device=gpu)[0]
    np.testing.assert_array_equal(out.numpy(), want)
    ro.terminate = True
    with pytest.raises(RuntimeError, match="terminate"):
        sess.run(None, {"x": x}, ro)
    assert cut.runs == before + 1  # none of those took it


def test_many_threads_several_shapes_and_names(gpu):
    """8 threads over three batch sizes, each thread two runs of a size before the next (a
    switch moves the session's shortcut to another signature), half of them naming the
    output: every answer the CPU's."""
    model = cnn()
    sess = vkml.InferenceSession(model, devices=[gpu], max_slots=4)
    rng = np.random.default_rng(1)
    sizes = [1 + (k // 4) % 3 for k in range(24)]  # (thread t's run i takes case t + i)
    cases = cpu_cases(model, [rng.standard_normal((n, 3, 12, 12)).astype(np.float32) for n in sizes])
    out_name = sess.get_outputs()[0].name
    counts = {}

    def run(x):
        y = sess.run([out_name] if threading.get_ident() % 2 else None, {"x": x})[0]
        cut = sess._gpu.shortcut
        if cut is not None:
            counts[id(cut)] = cut
        return y

    errors = hammer(sess, cases, 8, 40, run=run)
    assert not errors, errors[:5]
    assert sum(c.runs for c in counts.values()) > 0, "no run took the shortcut"


def test_timeouts_on_the_shortcut_retire_slots_and_follow_the_variable(gpu, gpu_on_cpu, vkml_env):
    """VKML_GPU_TIMEOUT changed between runs is seen by the shortcut's next run (it reads the
    variable's text each run); timed-out runs retire their slot like the usual path's, and
    the session answers right once the limit is lifted."""
    from test_hostile_gpu import matmul_chain

    d = 256 if gpu_on_cpu else 2048
    model = matmul_chain(3, d)
    sess = vkml.InferenceSession(model, devices=[gpu], max_slots=2)
    x = np.ones((d, d), np.float32)
    want = vkml.InferenceSession(model, devices=["cpu"]).run(None, {"x": x})[0]
    cut = _cut(sess, {"x": x})
    pool = sess._gpu.last.pool
    vkml_env(VKML_GPU_TIMEOUT="1e-9")
    before, errors = cut.runs, 0
    for _ in range(10):
        try:
            sess.run(None, {"x": x})
        except TimeoutError as e:
            errors += 1
            assert "VKML_GPU_TIMEOUT" in str(e)
        assert pool.retired <= 2
    assert errors >= 8, errors
    assert cut.runs > before  # (the runs that found a free slot took it)
    vkml_env(VKML_GPU_TIMEOUT="0")  # no limit
    deadline = time.monotonic() + 60
    while pool.retired and time.monotonic() < deadline:
        time.sleep(0.02)
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], want, rtol=1e-5)
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], want, rtol=1e-5)


def test_a_plan_forgotten_drops_the_shortcut(gpu):
    """The runner's plans dropped (a GPU's budget changed): the shortcut goes with them and the
    next runs make a new one."""
    sess = vkml.InferenceSession(mlp(), devices=[gpu])
    x = np.ones((3, 16), np.float32)
    want = sess.run(None, {"x": x})[0]
    cut = _cut(sess, {"x": x})
    with sess._gpu._lock:
        sess._gpu._forget()
    assert sess._gpu.shortcut is None
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], want)
    assert _cut(sess, {"x": x}) is not cut


@pytest.mark.parametrize("slots", [8, 2])
def test_one_shape_from_many_threads_takes_the_shortcut(gpu, slots):
    """8 threads on 8 slots, or on 2: runs that find every slot taken wait at the shortcut's
    slot gate (without the GIL) rather than take the usual path; never more slots made than
    max_slots. A few go the usual way: the runs that make the slots, and an admitted run that
    finds the slots held by runs on the usual path (which the slot gate does not count)."""
    model = cnn()
    sess = vkml.InferenceSession(model, devices=[gpu], max_slots=slots)
    rng = np.random.default_rng(slots)
    cases = cpu_cases(model, [rng.standard_normal((2, 3, 12, 12)).astype(np.float32) for _ in range(4)])
    cut = _cut(sess, {"x": cases[0][0]})
    before = cut.runs
    errors = hammer(sess, cases, 8, 25)
    assert not errors, errors[:5]
    pool = sess._gpu.last.pool
    assert pool.size <= slots and len(pool._free) == pool.size
    assert cut.runs - before >= 8 * 25 * 9 // 10, cut.runs - before


def test_ctrl_c_while_waiting_for_a_slot_is_prompt(gpu):
    """One slot, held by a long run on another thread: the main thread's run waits at the
    slot gate, and SIGINT there raises KeyboardInterrupt within ~100 ms; the slot and the
    session are fine afterwards."""
    from test_hostile_gpu import matmul_chain

    model = matmul_chain(4, 512)
    sess = vkml.InferenceSession(model, devices=[gpu], max_slots=1)
    x = np.ones((512, 512), np.float32)
    t0 = time.monotonic()
    cut = _cut(sess, {"x": x})
    took = (time.monotonic() - t0) / 2
    if took < 0.6:
        pytest.skip(f"{gpu} runs the chain in {took:.2f} s: too short to wait behind")
    want = sess.run(None, {"x": x})[0]
    other = threading.Thread(target=lambda: sess.run(None, {"x": x}))
    before = cut.runs
    other.start()
    time.sleep(0.05)  # (the other run has the slot)
    try:
        late = sigint_latency(lambda: sess.run(None, {"x": x}), 0.2)
    finally:
        other.join(timeout=60)
    assert late < 0.25, f"KeyboardInterrupt {late:.3f} s after SIGINT"
    assert cut.runs == before + 1  # (the other thread's run; the interrupted one ran nothing)
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], want)
