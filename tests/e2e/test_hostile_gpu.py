"""Issue #19, the GPU half: what a hostile input or a fault does to a GPU session.

Indices out of range give the CPU's error on the GPU too (the run slot's fault word,
vkml/runtime/faults.py) and the session goes on working; values too big for one GPU binding
run on the CPU."""
import gc
import os
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import vkml
from vkml.ir import dtypes
from vkml.runtime.executor import NodeFailure
from _threads import sigint_latency

_N = int(os.environ.get("VKML_TEST_EXAMPLES", "15"))
HYP = settings(max_examples=_N, deadline=None, suppress_health_check=list(HealthCheck))
PROBES = [50, -51, 10**9, 2**62, -(2**63), 2**31, -(2**31)]  # for a 50-row table


def gather_model(x_shape, i_shape, op="Gather", axis=0, i_type=T.INT64, chained=False) -> bytes:
    """x, i -> op(x, i) -> Relu (a GPU node after it); chained: a second op of the same
    indices on the result (two faulting nodes in one run)."""
    nodes = [h.make_node(op, ["x", "i"], ["y"], axis=axis, name="g0"),
             h.make_node("Relu", ["y"], ["z"], name="r0")]
    if chained:
        nodes.append(h.make_node(op, ["z", "i"], ["w"], axis=axis, name="g1"))
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, x_shape),
                                  h.make_tensor_value_info("i", i_type, i_shape)],
                     [h.make_tensor_value_info("w" if chained else "z", T.FLOAT, None)])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()


def _error(sess, feeds, **kw) -> str:
    with pytest.raises(NodeFailure) as e:
        sess.run(None, feeds, **kw)
    return str(e.value)


@pytest.mark.parametrize("executor", ["parallel", "sequential"])
def test_gather_probes_raise_what_the_cpu_raises(gpu, executor):
    model = gather_model([50, 4], [3])
    cpu = vkml.InferenceSession(model, devices=["cpu"])
    sess = vkml.InferenceSession(model, devices=[gpu, "cpu"], executor=executor)
    x = np.random.default_rng(0).standard_normal((50, 4)).astype(np.float32)
    good = np.array([0, 49, -50], np.int64)
    want = np.maximum(x[[0, 49, 0]], 0)
    for bad in PROBES:
        feeds = {"x": x, "i": np.array([1, bad, 2], np.int64)}
        msg = _error(sess, feeds)
        assert msg == _error(cpu, feeds)
        assert "'g0'" in msg and f"index {bad} is out of range for a dimension of size 50" in msg
        np.testing.assert_array_equal(sess.run(None, {"x": x, "i": good})[0], want)  # flag cleared
    assert {r["node"]: r["device"] for r in sess.placement()}["g0"] == gpu


def test_gather_int32_indices_and_outputs_kept_on_the_gpu(gpu):
    model = gather_model([50, 4], [2], i_type=T.INT32)
    sess = vkml.InferenceSession(model, devices=[gpu, "cpu"])
    x = np.ones((50, 4), np.float32)
    for bad in (50, -51, 2**31 - 1, -(2**31)):
        feeds = {"x": x, "i": np.array([bad, 0], np.int32)}
        assert f"index {bad} is out of range" in _error(sess, feeds)
        assert f"index {bad} is out of range" in _error(sess, feeds, output_device=gpu)
    out = sess.run(None, {"x": x, "i": np.array([3, -1], np.int32)}, output_device=gpu)[0]
    np.testing.assert_array_equal(out.numpy(), np.ones((2, 4), np.float32))


def test_the_first_faulting_node_is_named(gpu):
    model = gather_model([50, 50], [2], chained=True)
    sess = vkml.InferenceSession(model, devices=[gpu, "cpu"])
    x = np.ones((50, 50), np.float32)
    for _ in range(3):
        assert "'g0'" in _error(sess, {"x": x, "i": np.array([0, 77], np.int64)})
    assert "'g1'" in _error(sess, {"x": x, "i": np.array([1, 2], np.int64)})  # g0 fine, g1 not
    np.testing.assert_array_equal(sess.run(None, {"x": x, "i": np.array([1, 0], np.int64)})[0], 1)


def test_gather_elements_probe(gpu):
    model = gather_model([5, 3], [5, 2], op="GatherElements", axis=1)
    cpu = vkml.InferenceSession(model, devices=["cpu"])
    sess = vkml.InferenceSession(model, devices=[gpu, "cpu"])
    x = np.arange(15, dtype=np.float32).reshape(5, 3)
    for bad in (3, -4, 2**40):
        idx = np.zeros((5, 2), np.int64)
        idx[4, 1] = bad
        assert _error(sess, {"x": x, "i": idx}) == _error(cpu, {"x": x, "i": idx})
    idx = np.array([[0, 2], [1, -1], [2, -3], [0, 0], [-2, 1]], np.int64)
    want = np.take_along_axis(x, idx % 3, axis=1)
    np.testing.assert_array_equal(sess.run(None, {"x": x, "i": idx})[0], want)


def test_every_slot_reports_and_recovers(gpu):
    """Threads on several slots: bad runs raise, good runs interleaved with them are right."""
    import threading

    model = gather_model([50, 4], [3])
    sess = vkml.InferenceSession(model, devices=[gpu, "cpu"], max_slots=3)
    x = np.arange(200, dtype=np.float32).reshape(50, 4)
    errors = []

    def worker(t):
        for k in range(20):
            bad = (t + k) % 2 == 0
            i = np.array([1, 50 + k if bad else k, 2], np.int64)
            try:
                out = sess.run(None, {"x": x, "i": i})[0]
                if bad or not np.array_equal(out, x[i]):
                    errors.append((t, k, "wrong result"))
            except NodeFailure as e:
                if not bad or f"index {50 + k} is out" not in str(e):
                    errors.append((t, k, str(e)))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert not errors, errors[:4]


@HYP
@given(data=st.data())
def test_gather_in_range_matches_numpy(gpu, data):
    rank = data.draw(st.integers(1, 4))
    shape = data.draw(st.lists(st.integers(1, 6), min_size=rank, max_size=rank))
    axis = data.draw(st.integers(-rank, rank - 1))
    d = shape[axis]
    ishape = data.draw(st.lists(st.integers(0, 4), min_size=0, max_size=2))
    itype = data.draw(st.sampled_from([np.int32, np.int64]))
    idx = np.array(data.draw(st.lists(st.integers(-d, d - 1), min_size=int(np.prod(ishape)),
                                      max_size=int(np.prod(ishape)))), itype).reshape(ishape)
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) - 7
    model = gather_model(shape, ishape, axis=axis, i_type=dtypes.onnx_type(np.dtype(itype)))
    sess = vkml.InferenceSession(model, devices=[gpu, "cpu"])
    got = sess.run(None, {"x": x, "i": idx})[0]
    np.testing.assert_array_equal(got, np.maximum(np.take(x, idx, axis=axis), 0))
    if idx.size:  # and one index out of range, then in range again
        assert {r["node"]: r["device"] for r in sess.placement()}["g0"] == gpu
        bad = idx.copy()
        bad.reshape(-1)[-1] = d if data.draw(st.booleans()) else -d - 1
        assert f"for a dimension of size {d}" in _error(sess, {"x": x, "i": bad})
        np.testing.assert_array_equal(sess.run(None, {"x": x, "i": idx})[0], got)


# ---------------------------------------------------------------- values too big to bind
def expand_model(rows: int, cols: int) -> bytes:
    """x [1, cols] -> Expand to [rows, cols] -> Relu -> ReduceSum over rows: one big value
    in the middle, small at both ends."""
    g = h.make_graph([h.make_node("Expand", ["x", "s"], ["big"], name="expand"),
                      h.make_node("Relu", ["big"], ["r"], name="relu"),
                      h.make_node("ReduceSum", ["r", "ax"], ["y"], keepdims=0, name="sum"),
                      h.make_node("Neg", ["y"], ["z"], name="neg")], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [1, cols])],
                     [h.make_tensor_value_info("z", T.FLOAT, None)],
                     [nh.from_array(np.array([rows, cols], np.int64), "s"),
                      nh.from_array(np.array([0], np.int64), "ax")])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()


def _big_value_goes_to_the_cpu(gpu, limit: int) -> None:
    cols = 1024
    rows = limit // (4 * cols) + 1  # one row more than fits in one binding
    model = expand_model(rows, cols)
    x = np.linspace(-1, 1, cols, dtype=np.float32).reshape(1, cols)
    sess = vkml.InferenceSession(model, devices=[gpu, "cpu"])
    got = sess.run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, vkml.InferenceSession(model, devices=["cpu"]).run(None, {"x": x})[0])
    where = {r["node"]: r for r in sess.placement()}
    for name in ("expand", "relu", "sum"):
        assert where[name]["device"] == "cpu" and "binds as one buffer" in where[name]["reason"], where[name]
    assert where["neg"]["device"] == gpu  # small again: back on the GPU


def test_a_value_larger_than_one_binding_runs_on_the_cpu(gpu):
    from vkml.runtime.devices import largest_binding, vulkan_device

    limit = largest_binding(vulkan_device(gpu))
    if limit > 256 << 20:
        pytest.skip(f"{gpu} binds {limit} bytes: too big a value for this test (see the next one)")
    _big_value_goes_to_the_cpu(gpu, limit)


def test_the_binding_limit_is_placement(gpu, monkeypatch):
    """The same with a small pretend limit, for devices that bind gigabytes."""
    import vkml.runtime.devices as devices

    monkeypatch.setattr(devices, "largest_binding", lambda dev: 1 << 16)  # (read as each plan is made)
    _big_value_goes_to_the_cpu(gpu, 1 << 16)


# ---------------------------------------------------------------- negative pads
@pytest.mark.parametrize("op", ["Conv", "ConvTranspose", "MaxPool", "AveragePool"])
@pytest.mark.parametrize("pads", [[-1, -1, -1, -1], [1, -1, 0, 2], [-3, -3, -3, -3]])
def test_negative_pads_are_a_model_error_on_every_device(gpu, op, pads):
    """onnxruntime rejects them ("pads must not contain negative values"); vkml too, at load,
    naming the node, whatever the devices (the GPU cropped or returned an empty tensor)."""
    from vkml.errors import ModelError

    inits, ins = [], ["x"]
    attrs = {"pads": pads}
    if op.startswith("Conv"):
        inits = [nh.from_array(np.ones((2, 2, 3, 3), np.float32), "w")]
        ins = ["x", "w"]
    else:
        attrs["kernel_shape"] = [3, 3]
    g = h.make_graph([h.make_node(op, ins, ["y"], name="n0", **attrs)], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [1, 2, 6, 6])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)], inits)
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()
    for devices in (["cpu"], [gpu, "cpu"], [gpu]):
        with pytest.raises(ModelError, match=rf"node 'n0' \({op}\): pads must not be negative"):
            vkml.InferenceSession(model, devices=devices)


# ---------------------------------------------------------------- timeouts, interrupts, memory
def matmul_chain(n: int, d: int) -> bytes:
    """x [d, d] through n MatMuls by one weight: GPU work that takes a while on lavapipe."""
    w = nh.from_array((np.eye(d) * 0.5 + 0.5 / d).astype(np.float32), "w")
    nodes, prev = [], "x"
    for k in range(n):
        nodes.append(h.make_node("MatMul", [prev, "w"], [f"m{k}"], name=f"mm{k}"))
        prev = f"m{k}"
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [d, d])],
                     [h.make_tensor_value_info(prev, T.FLOAT, None)], [w])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()


def _device_used(gpu) -> int:
    from vkml.runtime.devices import vulkan_device

    return vulkan_device(gpu).memory_stats()["pools"]["device"]["used"]


@pytest.mark.parametrize("text", ["nan", "-1", "inf", "-inf", "abc", "1e400"])
def test_invalid_gpu_timeouts_are_errors(vkml_env, text):
    from vkml.config import gpu_timeout

    vkml_env(VKML_GPU_TIMEOUT=text)
    with pytest.raises(ValueError, match="VKML_GPU_TIMEOUT must be a finite number of seconds"):
        gpu_timeout()


def test_valid_gpu_timeouts(vkml_env):
    from vkml.config import DEFAULT_GPU_TIMEOUT, gpu_timeout

    for text, want in (("0", None), ("2.5", 2.5), (" 1e-3 ", 1e-3), ("", DEFAULT_GPU_TIMEOUT)):
        vkml_env(VKML_GPU_TIMEOUT=text)
        assert gpu_timeout() == want


@pytest.mark.parametrize("executor", ["parallel", "sequential"])
def test_timed_out_runs_do_not_pile_up_and_their_memory_comes_back(gpu, gpu_on_cpu, vkml_env, executor):
    """50 runs that time out: at most max_slots retired slots at once (later runs wait for
    them, then time out too, instead of queueing more GPU work); once the GPU is done their
    memory is freed with no further run (runtime.reaper), and the session works."""
    d = 256 if gpu_on_cpu else 2048  # runs that outlast a wait's first spin (an H100 does 256^3 in µs)
    model = matmul_chain(3, d)
    sess = vkml.InferenceSession(model, devices=[gpu], executor=executor, max_slots=2)
    x = np.ones((d, d), np.float32)
    want = vkml.InferenceSession(model, devices=["cpu"]).run(None, {"x": x})[0]
    sess.run(None, {"x": x})
    pool = sess._gpu.last.pool
    before = _device_used(gpu)
    vkml_env(VKML_GPU_TIMEOUT="1e-9")
    errors = []
    for _ in range(50):
        try:
            sess.run(None, {"x": x})
        except TimeoutError as e:
            errors.append(e)  # (kept on purpose: an exception must not keep a slot's memory)
        assert pool.retired <= 2
    assert len(errors) >= 45, len(errors)  # (lavapipe may finish one before the first look)
    deadline = time.monotonic() + 60
    while pool.retired and time.monotonic() < deadline:
        time.sleep(0.02)
    assert pool.retired == 0 and _device_used(gpu) <= before
    vkml_env(VKML_GPU_TIMEOUT="0")  # no limit
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], want, rtol=1e-5)


@pytest.mark.parametrize("executor", ["parallel", "sequential"])
def test_ctrl_c_during_a_long_gpu_run_is_prompt(gpu, executor):
    """SIGINT from a timer thread while the GPU runs: KeyboardInterrupt within ~100 ms (not
    when the GPU work ends), the slot retired, and the session fine afterwards."""
    model = matmul_chain(4, 512)
    sess = vkml.InferenceSession(model, devices=[gpu], executor=executor)
    x = np.ones((512, 512), np.float32)
    t0 = time.monotonic()
    want = sess.run(None, {"x": x})[0]
    took = time.monotonic() - t0
    if took < 0.6:
        pytest.skip(f"{gpu} runs the chain in {took:.2f} s: too fast to interrupt")
    late = sigint_latency(lambda: sess.run(None, {"x": x}), 0.25)
    assert late < 0.25, f"KeyboardInterrupt {late:.3f} s after SIGINT"
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], want)


def test_a_plan_squeezed_off_the_gpu_comes_back_when_memory_frees(gpu):
    """Memory taken by something else: the first plan's slot does not fit, its caps shrink and
    its nodes go to the CPU. Once the memory is back, a run after the first look
    (gpurun.REPLAN_S later) places them on the GPU again (not: on the CPU forever)."""
    from vkml.runtime.devices import vulkan_device
    from vkml.runtime.gpurun import REPLAN_S

    dev = vulkan_device(gpu)
    g = h.make_graph([h.make_node("Add", ["x", "w"], ["a"], name="add"),
                      h.make_node("Relu", ["a"], ["r"], name="relu"),
                      h.make_node("MatMul", ["r", "w"], ["y"], name="mm")], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [512, 512])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)],
                     [nh.from_array(np.full((512, 512), 0.01, np.float32), "w")])
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()
    x = np.linspace(-1, 1, 512 * 512, dtype=np.float32).reshape(512, 512)
    want = vkml.InferenceSession(model, devices=["cpu"]).run(None, {"x": x})[0]
    # Earlier tests' sessions must give their memory back now, not in the middle of the test
    # (a collected session's slots freed while the hog holds the rest let the plan fit).
    gc.collect()
    dev.allocator.trim()
    heap = dev.allocator.pools["device"].heap
    in_use = dev.memory_stats()["heaps"].get(heap, {}).get("reserved", 0)
    dev.set_memory_budget(in_use + (64 << 20))  # (room for a new block of each memory pool)
    try:
        # Take every byte there is (earlier tests' blocks too), in pieces that shrink when a
        # driver's block size no longer fits, then give back less than the plan's 4 MiB.
        hog, size = [], 16 << 20
        while size >= 64 << 10 and len(hog) < 4096:
            try:
                hog.append(dev.alloc(size))
            except MemoryError:
                size //= 2
        freed = 0
        while hog and freed + hog[-1].size <= (2 << 20):
            freed += hog.pop().size
        sess = vkml.InferenceSession(model, devices=[gpu, "cpu"], warmup=False)
        np.testing.assert_allclose(sess.run(None, {"x": x})[0], want, rtol=1e-5)
        assert sess._gpu.squeezed and "cpu" in {r["device"] for r in sess.placement()}
        del hog
        dev.allocator.trim()
        time.sleep(REPLAN_S)  # (the first look at the memory: a second after the squeeze)
        np.testing.assert_allclose(sess.run(None, {"x": x})[0], want, rtol=1e-5)
        assert {r["device"] for r in sess.placement()} == {gpu} and not sess._gpu.squeezed
    finally:
        dev.set_memory_budget(None)
