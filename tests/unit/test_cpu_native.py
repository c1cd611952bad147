"""Native CPU programs (vkml/runtime/cpuprog.py, _cpuprog.pyx): a small float32 plan's runs in C.

Every case checks that the program was made (a run that quietly stayed in Python would pass
anything) and compares with onnxruntime, the oracle (onnx.reference's pools fail on some pads). Tolerance: rtol 1e-4, atol 1e-5 times
the output's largest magnitude (at least 1) (float32; the columns and cblas_sgemm sum in another order than the
reference's NumPy).
"""
from __future__ import annotations

import contextlib
import os
import select
import signal
import threading
from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import vkml
from vkml.api.feeds import signature
from vkml.ops._winograd import tile_max
from vkml.runtime import _cpuprog, blas, cpuprog

RTOL, ATOL = 1e-4, 1e-5
DIGITS = Path(vkml.__file__).parent / "data" / "digits_cnn.onnx"

pytestmark = pytest.mark.skipif(blas.find_blas() is None or blas.find_blas().gemm is None,
                                reason="needs NumPy's OpenBLAS (its cblas_sgemm)")


def test_the_extension_is_built():
    assert cpuprog._cpuprog is not None, "vkml.runtime._cpuprog did not import: build the extensions"


def _native(sess, feed) -> object:
    native = sess._native
    return None if native is None else native.get(signature(feed))


def _profile_of(sess, feed) -> list:
    """The per-instruction counters (Program.profile) of one profiled run of the session's
    program for this feed."""
    prog = _native(sess, feed)
    assert prog is not None
    prog.set_profile(True)
    sess.run(None, feed)
    return prog.profile()


def _check(model: onnx.ModelProto, feed: dict, native: bool = True) -> list[np.ndarray]:
    """Two runs of a CPU session (the trace, then the program) against onnxruntime."""
    ort = pytest.importorskip("onnxruntime")
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed)
    sess = vkml.InferenceSession(model.SerializeToString(), devices=["cpu"])
    first = sess.run(None, feed)
    assert (_native(sess, feed) is not None) == native
    got = sess.run(None, feed)
    for g, f, w in zip(got, first, want):
        assert g.dtype == np.float32 and g.shape == w.shape
        # (atol scaled by the output's range: a small output of large cancelling sums carries
        # their float32 rounding, e.g. -0.0046 off by 1.5e-5 beside outputs of 184)
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL * max(1.0, float(np.abs(w).max(initial=0.0))))
        if native:  # the first run gives the program's bits too
            np.testing.assert_array_equal(f, g)
    return got


def _in_threads(worker, n: int) -> None:
    """worker(0) .. worker(n - 1), each on a thread of its own, all joined."""
    ts = [threading.Thread(target=worker, args=(k,)) for k in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def _agree_from_threads(sess, feeds, want, runs: int, atol: float) -> None:
    """Feed j's runs from thread j of 8 (runs each) all give want[j] within float32 rounding
    (rtol 1e-5, atol): a run beside others may take other chunks than a lone run."""
    bad = []

    def worker(j: int) -> None:
        for _ in range(runs):
            if not np.allclose(sess.run(None, feeds[j])[0], want[j], rtol=1e-5, atol=atol):
                bad.append(j)

    _in_threads(worker, 8)
    assert not bad


def _model(nodes, inputs, outputs, inits, opset=17):
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info(n, T.FLOAT, s) for n, s in inputs],
                     [h.make_tensor_value_info(n, T.FLOAT, None) for n in outputs],
                     [nh.from_array(v, k) for k, v in inits.items()])
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)], ir_version=8)  # (older onnxruntimes)


def test_the_shipped_digits_model_runs_natively():
    sess = vkml.InferenceSession(str(DIGITS), devices=["cpu"])
    arg = sess.get_inputs()[0]
    shape = [d if isinstance(d, int) else 2 for d in arg.shape]
    x = {arg.name: np.random.default_rng(0).random(shape, dtype=np.float32)}
    _check(onnx.load(str(DIGITS)), x)


def _out(size, k, s, d, p0, p1, ceil=False):
    span = (k - 1) * d + 1
    n = size + p0 + p1 - span
    return (-(-n // s) if ceil else n // s) + 1


@st.composite
def cnns(draw, wide=False):
    """A small CNN and its feed; wide: 5-26 output channels a group (the own GEMM's panels)."""
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 16)))
    n, c = draw(st.integers(1, 3)), draw(st.integers(1, 4))
    hh, ww = draw(st.integers(3, 11)), draw(st.integers(1, 11))
    group = draw(st.sampled_from([g for g in (1, 2, 3, 4) if c % g == 0]))
    m = group * draw(st.integers(5, 26) if wide else st.integers(1, 3))
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 2))
    dh, dw = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    pads = [draw(st.integers(0, 2)) for _ in range(4)]
    oh, ow = _out(hh, kh, sh, dh, pads[0], pads[2]), _out(ww, kw, sw, dw, pads[1], pads[3])
    assume(oh > 0 and ow > 0)
    inits = {"w": (rng.standard_normal((m, c // group, kh, kw)) * 0.3).astype(np.float32)}
    conv_in = ["x", "w"]
    if draw(st.booleans()):
        inits["cb"] = rng.standard_normal(m).astype(np.float32)
        conv_in.append("cb")
    nodes = [h.make_node("Conv", conv_in, ["c"], kernel_shape=[kh, kw], strides=[sh, sw], dilations=[dh, dw],
                         pads=pads, group=group)]
    v, shape = "c", (n, m, oh, ow)
    # an elementwise op with a broadcast constant
    op = draw(st.sampled_from(["Add", "Sub", "Mul", "Div", "Max", "Min"]))
    kshape = draw(st.sampled_from([(m, 1, 1), (1, m, 1, 1), (), (1, 1, 1, ow), shape, (oh, 1)]))
    k = rng.standard_normal(kshape).astype(np.float32)
    if op == "Div":
        k = np.sign(k) * (np.abs(k) + 0.5)
    inits["k"] = k
    ins = [v, "k"] if draw(st.booleans()) else ["k", v]
    if op == "Div":
        ins = [v, "k"]
    nodes.append(h.make_node(op, ins, ["e"]))
    v = "e"
    act = draw(st.sampled_from(["Relu", "LeakyRelu", "Sigmoid", "Tanh", "Clip", "HardSigmoid", "Abs", "Neg", "Exp", None]))
    if act == "Clip":
        inits["lo"], inits["hi"] = np.float32(-0.5), np.float32(draw(st.sampled_from([0.7, -1.0])))
        nodes.append(h.make_node("Clip", [v, "lo", "hi"], ["a"]))
        v = "a"
    elif act:
        attrs = {"alpha": 0.3} if act in ("LeakyRelu", "HardSigmoid") else {}
        nodes.append(h.make_node(act, [v], ["a"], **attrs))
        v = "a"
    if draw(st.booleans()):
        for name in ("s", "b", "mu"):
            inits[name] = rng.standard_normal(m).astype(np.float32)
        inits["var"] = (rng.random(m) + 0.1).astype(np.float32)
        nodes.append(h.make_node("BatchNormalization", [v, "s", "b", "mu", "var"], ["bn"], epsilon=1e-3))
        v = "bn"
    pool = draw(st.sampled_from(["MaxPool", "AveragePool", "GlobalAveragePool", None]))
    if pool == "GlobalAveragePool":
        nodes.append(h.make_node(pool, [v], ["p"]))
        v, shape = "p", (n, m, 1, 1)
    elif pool:
        pk = [draw(st.integers(1, min(3, oh))), draw(st.integers(1, min(3, ow)))]
        ceil = draw(st.booleans())
        # (no pads in ceil mode, and no window that starts past the input: the oracles differ there)
        pp = [0] * 4 if ceil else [draw(st.integers(0, pk[0] - 1)), draw(st.integers(0, pk[1] - 1))] * 2
        ps = [draw(st.integers(1, 2)), draw(st.integers(1, 2))]
        po = (_out(oh, pk[0], ps[0], 1, pp[0], pp[2], ceil), _out(ow, pk[1], ps[1], 1, pp[1], pp[3], ceil))
        assume((po[0] - 1) * ps[0] < oh and (po[1] - 1) * ps[1] < ow)  # (and none that starts past the input)
        attrs = dict(kernel_shape=pk, pads=pp, strides=ps, ceil_mode=int(ceil))
        if pool == "AveragePool":
            attrs["count_include_pad"] = int(draw(st.booleans()))
        nodes.append(h.make_node(pool, [v], ["p"], **attrs))
        shape = (n, m) + po
        v = "p"
    feat = int(np.prod(shape[1:]))
    nodes.append(h.make_node("Flatten", [v], ["f"]))
    classes = draw(st.integers(1, 5))
    if draw(st.booleans()):
        trans = draw(st.booleans())
        wm = rng.standard_normal((classes, feat) if trans else (feat, classes)).astype(np.float32)
        inits["g"], inits["gb"] = wm, rng.standard_normal(draw(st.sampled_from([(classes,), (1, classes)]))).astype(np.float32)
        nodes.append(h.make_node("Gemm", ["f", "g", "gb"], ["y0"], transB=int(trans),
                                 alpha=draw(st.sampled_from([1.0, 0.5])), beta=draw(st.sampled_from([1.0, 2.0]))))
    else:
        inits["g"] = rng.standard_normal((feat, classes)).astype(np.float32)
        nodes.append(h.make_node("MatMul", ["f", "g"], ["y0"]))
    out = "y0"
    if draw(st.booleans()):
        nodes.append(h.make_node("Softmax", ["y0"], ["y"], axis=-1))
        out = "y"
    model = _model(nodes, [("x", [n, c, hh, ww])], [out], inits)
    feed = {"x": rng.standard_normal((n, c, hh, ww)).astype(np.float32)}
    return model, feed


@settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", 40)), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(case=cnns())
def test_random_small_cnns_match_the_reference(case):
    model, feed = case
    _check(model, feed)


@contextlib.contextmanager
def _small_chunks():
    """Convolutions and elementwise ops of any size split (several chunks on the VM's 2 cores),
    so generated shapes meet every chunk boundary (split K too, on the own GEMM)."""
    names = ("CHUNK_MACS", "ROW_CHUNK_POSITIONS", "MIN_CHUNK_CHANNELS", "KSPLIT_POSITIONS", "KSPLIT_MIN_K")
    saved = {n: getattr(cpuprog, n) for n in names}
    for n, v in zip(names, (64, 4, 1, 64, 1)):
        setattr(cpuprog, n, v)
    elementwise = cpuprog._cpuprog.set_min_split(2)
    try:
        yield
    finally:
        for n, v in saved.items():
            setattr(cpuprog, n, v)
        cpuprog._cpuprog.set_min_split(elementwise)


@settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", 40)), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(case=cnns())
def test_random_small_cnns_in_chunks_match_the_reference(case):
    model, feed = case
    with _small_chunks():
        _check(model, feed)


@pytest.mark.parametrize("kernel", ["auto", "avx2", "blas"])
@settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", 40)), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                 HealthCheck.function_scoped_fixture])
@given(case=cnns(wide=True), chunks=st.booleans())
def test_wide_cnns_on_each_gemm_kernel(vkml_env, kernel, case, chunks):
    """Convolutions of enough channels for the own GEMM (include/cpu_gemm.h; VKML_CPU_GEMM picks
    the kernel set, blas is NumPy's), whole and in chunks of every mode."""
    vkml_env(VKML_CPU_GEMM=kernel)
    model, feed = case
    with _small_chunks() if chunks else contextlib.nullcontext():
        _check(model, feed)


@pytest.mark.parametrize("kernel", ["auto", "avx2"])
def test_split_k_convolutions_from_many_threads(vkml_env, monkeypatch, kernel):
    """A late-layer convolution (7x7 positions, K = 2304) splits by K on the own GEMM: partial
    sums, then a reduce with the bias, residual and Relu; from 8 threads, each output is a lone
    run's within float32 rounding (the chunk count, so the sum's order, follows the runs in flight),
    and the lone run is onnxruntime's."""
    vkml_env(VKML_CPU_GEMM=kernel)
    if cpuprog._conv_kernel(128)[0] == 0:
        pytest.skip("no kernel set of the own GEMM on this CPU")
    monkeypatch.setattr(cpuprog, "KSPLIT_POSITIONS", 256)  # (off by default)
    rng = np.random.default_rng(7)
    inits = {"w": (rng.standard_normal((128, 256, 3, 3)) / 48).astype(np.float32),
             "b": rng.standard_normal(128).astype(np.float32)}
    nodes = [h.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1] * 4),
             h.make_node("Add", ["c", "r"], ["s"]), h.make_node("Relu", ["s"], ["y"])]
    model = _model(nodes, [("x", [1, 256, 7, 7]), ("r", [1, 128, 7, 7])], ["y"], inits)
    feeds = [{"x": rng.standard_normal((1, 256, 7, 7)).astype(np.float32),
              "r": rng.standard_normal((1, 128, 7, 7)).astype(np.float32)} for _ in range(8)]
    _check(model, feeds[0])
    sess = vkml.InferenceSession(model.SerializeToString(), devices=["cpu"])
    want = [sess.run(None, f)[0] for f in feeds]
    modes = [p[12] for op, p, *_ in _profile_of(sess, feeds[0]) if op == "conv"]
    if cpuprog.CORES > 1:
        assert modes == [cpuprog.CONV_KSPLIT], modes
    _agree_from_threads(sess, feeds, want, runs=5, atol=1e-5)


@pytest.mark.parametrize("op, a_shape, b_shape", [
    ("MatMul", (32, 512), (512, 1000)),      # by columns (resnet18's classifier at batch 32)
    ("MatMul", (600, 700), (700, 20)),       # by rows
    ("MatMul", (3, 130, 256), (3, 256, 300)),  # batches, each by columns
    ("Gemm", (64, 1024), (1000, 1024)),      # transB, alpha, a bias row
    ("Gemm", (1, 512), (1000, 512)),         # one row (a classifier at batch 1): timed as GEMM_MIN_ROWS
])
def test_big_gemms_split_natively_from_many_threads(op, a_shape, b_shape):
    """Gemm/MatMul of millions of multiply-adds run in the native program, in chunks of output
    columns or rows on the pool (they kept the Python path before); from 8 threads each output is
    a lone run's within float32 rounding, and the lone run is onnxruntime's."""
    rng = np.random.default_rng(len(a_shape) * 7 + a_shape[-1])
    inits = {"w": (rng.standard_normal(b_shape) / np.sqrt(a_shape[-1])).astype(np.float32)}
    if op == "Gemm":
        inits["c"] = rng.standard_normal((1, b_shape[0])).astype(np.float32)
        nodes = [h.make_node("Gemm", ["x", "w", "c"], ["y"], transB=1, alpha=0.5)]
    else:
        nodes = [h.make_node("MatMul", ["x", "w"], ["y"])]
    model = _model(nodes, [("x", list(a_shape))], ["y"], inits)
    feeds = [{"x": rng.standard_normal(a_shape).astype(np.float32)} for _ in range(8)]
    _check(model, feeds[0])
    sess = vkml.InferenceSession(model.SerializeToString(), devices=["cpu"])
    want = [sess.run(None, f)[0] for f in feeds]
    chunks = [c for o, p, calls, wall, busy, c in _profile_of(sess, feeds[0]) if o == "gemm"]
    if cpuprog.CORES > 1:
        assert chunks and chunks[0] > 1, chunks
    _agree_from_threads(sess, feeds, want, runs=3, atol=1e-5)


@pytest.mark.parametrize("hw, c, m, k", [(40, 8, 16, 3), (7, 64, 128, 3), (32, 32, 64, 1), (64, 3, 16, 5)])
def test_split_convolutions_from_many_threads(hw, c, m, k):
    """Convolutions big enough to split for real (rows, channels, positions), with a bias, a
    residual and a Relu folded in, run from 8 threads at once: each output is a lone run's within
    float32 rounding (a run beside others takes fewer, bigger chunks), and the lone run is
    onnxruntime's."""
    rng = np.random.default_rng(hw)
    inits = {"w": (rng.standard_normal((m, c, k, k)) / (c * k)).astype(np.float32),
             "b": rng.standard_normal(m).astype(np.float32)}
    nodes = [h.make_node("Conv", ["x", "w", "b"], ["c"], pads=[k // 2] * 4),
             h.make_node("Add", ["c", "r"], ["s"]), h.make_node("Relu", ["s"], ["y"])]
    model = _model(nodes, [("x", [2, c, hw, hw]), ("r", [2, m, hw, hw])], ["y"], inits)
    mode, parts = cpuprog._conv_split(2 * m * hw * hw * c * k * k, k == 1, hw, hw * hw, m)
    feeds = [{"x": rng.standard_normal((2, c, hw, hw)).astype(np.float32),
              "r": rng.standard_normal((2, m, hw, hw)).astype(np.float32)} for _ in range(8)]
    sess = vkml.InferenceSession(model.SerializeToString(), devices=["cpu"])
    _check(model, feeds[0])
    want = [sess.run(None, f)[0] for f in feeds]
    assert _native(sess, feeds[0]) is not None
    _agree_from_threads(sess, feeds, want, runs=5, atol=1e-6)
    if cpuprog.CORES > 1:
        assert parts > 1 and mode != cpuprog.CONV_WHOLE, (mode, parts)


def test_batched_matmul_and_outputs_that_share_storage():
    """A batched MatMul by a batched input; outputs that are a view of another output, of an
    input, and a value later steps read: each output is its own array with the right values."""
    rng = np.random.default_rng(3)
    nodes = [h.make_node("MatMul", ["a", "b"], ["m"]),
             h.make_node("Relu", ["m"], ["r"]),
             h.make_node("Reshape", ["r", "shape"], ["r2"]),
             h.make_node("Identity", ["a"], ["ia"]),
             h.make_node("Mul", ["r", "r"], ["sq"])]
    model = _model(nodes, [("a", [2, 3, 4]), ("b", [2, 4, 5])], ["r", "r2", "ia", "sq", "m"],
                   {"shape": np.array([2, 15], np.int64)})
    feed = {"a": rng.standard_normal((2, 3, 4)).astype(np.float32),
            "b": rng.standard_normal((2, 4, 5)).astype(np.float32)}
    outs = _check(model, feed)
    assert len({id(o) for o in outs}) == len(outs)
    assert not np.shares_memory(outs[0], outs[1])
    assert not np.shares_memory(outs[2], feed["a"])


def test_plans_it_does_not_know_stay_in_python():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    transpose = _model([h.make_node("Transpose", ["x"], ["t"]), h.make_node("Relu", ["t"], ["y"])],
                       [("x", [2, 3])], ["y"], {})
    _check(transpose, {"x": x}, native=False)
    # a Reshape whose shape is fed: the same signature could take another shape
    fed_shape = h.make_model(h.make_graph(
        [h.make_node("Reshape", ["x", "s"], ["r"]), h.make_node("Relu", ["r"], ["y"])], "g",
        [h.make_tensor_value_info("x", T.FLOAT, [2, 3]), h.make_tensor_value_info("s", T.INT64, [2])],
        [h.make_tensor_value_info("y", T.FLOAT, None)]), opset_imports=[h.make_opsetid("", 17)])
    sess = vkml.InferenceSession(fed_shape.SerializeToString(), devices=["cpu"])
    for s in ([3, 2], [3, 2], [6, 1], [1, 6]):
        feed = {"x": x, "s": np.array(s, np.int64)}
        assert sess.run(None, feed)[0].shape == tuple(s)
        assert _native(sess, feed) is None


def test_bad_feeds_after_the_program_still_get_their_errors():
    sess = vkml.InferenceSession(str(DIGITS), devices=["cpu"])
    arg = sess.get_inputs()[0]
    shape = [d if isinstance(d, int) else 1 for d in arg.shape]
    x = np.random.default_rng(5).random(shape, dtype=np.float32)
    sess.run(None, {arg.name: x})
    assert _native(sess, {arg.name: x}) is not None
    want = sess.run(None, {arg.name: x})
    with pytest.raises(ValueError, match=arg.name):
        sess.run(None, {arg.name: x[..., :-1]})
    with pytest.raises((TypeError, ValueError), match=arg.name):
        sess.run(None, {arg.name: x.astype(np.float64)})
    with pytest.raises(ValueError):
        sess.run(None, {"nope": x})
    np.testing.assert_array_equal(sess.run(None, {arg.name: x})[0], want[0])
    wide = np.repeat(x, 2, axis=-1)[..., ::2]  # a strided view of the same values: copied, same bits
    np.testing.assert_array_equal(sess.run(None, {arg.name: wide})[0], want[0])
    tensor = vkml.Tensor.from_numpy(x, "cpu")
    np.testing.assert_array_equal(sess.run(None, {arg.name: tensor})[0], want[0])


def test_many_threads_share_one_native_session():
    """16 threads, 25 runs each with inputs of their own, against one session: each output is
    the one a lone run gives (the arenas are per run in flight)."""
    sess = vkml.InferenceSession(str(DIGITS), devices=["cpu"])
    arg = sess.get_inputs()[0]
    shape = [d if isinstance(d, int) else 1 for d in arg.shape]
    rng = np.random.default_rng(6)
    xs = [rng.random(shape, dtype=np.float32) for _ in range(16)]
    sess.run(None, {arg.name: xs[0]})
    assert _native(sess, {arg.name: xs[0]}) is not None
    want = [sess.run(None, {arg.name: x}) for x in xs]
    bad, barrier = [], threading.Barrier(16, timeout=60)

    def worker(k: int) -> None:
        barrier.wait()
        for _ in range(25):
            got = sess.run(None, {arg.name: xs[k]})
            if any(not np.array_equal(g, w) for g, w in zip(got, want[k])):
                bad.append(k)

    _in_threads(worker, 16)
    assert not bad


def test_the_switch_turns_it_off(vkml_env):
    vkml_env(VKML_CPU_NATIVE="0")
    sess = vkml.InferenceSession(str(DIGITS), devices=["cpu"])
    assert sess._native is None


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_a_forked_child_runs_split_programs():
    """A child forked after the parent's runs started pool helpers has none of them: its runs
    start their own and finish with the parent's answer (a hang fails after 60 s)."""
    hw, c, m = 7, 64, 128
    rng = np.random.default_rng(9)
    model = _model([h.make_node("Conv", ["x", "w"], ["y"], pads=[1] * 4)], [("x", [2, c, hw, hw])], ["y"],
                   {"w": (rng.standard_normal((m, c, 3, 3)) / 24).astype(np.float32)})
    sess = vkml.InferenceSession(model.SerializeToString(), devices=["cpu"])
    feed = {"x": rng.standard_normal((2, c, hw, hw)).astype(np.float32)}
    sess.run(None, feed)
    want = sess.run(None, feed)[0]
    assert _native(sess, feed) is not None
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        code = 1
        try:
            got = [sess.run(None, feed)[0] for _ in range(3)]
            code = 0 if all(np.array_equal(g, want) for g in got) else 2
        finally:
            os.write(w, bytes([code]))
            os._exit(0)
    os.close(w)
    ready, _, _ = select.select([r], [], [], 60)
    if not ready:
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    assert ready, "the forked child hung"
    assert os.read(r, 1) == b"\x00"
    os.close(r)


def test_output_names_on_the_direct_path():
    """Once a signature has its program, Session.run goes straight to it: output names pick and
    order the outputs there too, and bad names get the usual errors."""
    sess = vkml.InferenceSession(str(DIGITS), devices=["cpu"])
    arg = sess.get_inputs()[0]
    names = [o.name for o in sess.get_outputs()]
    shape = [d if isinstance(d, int) else 2 for d in arg.shape]
    feed = {arg.name: np.random.default_rng(8).random(shape, dtype=np.float32)}
    both = sess.run(None, feed)
    assert _native(sess, feed) is not None
    got = sess.run(names[::-1], feed)
    for g, w in zip(got, both[::-1]):
        np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(sess.run([names[1]], feed)[0], both[1])
    with pytest.raises(ValueError, match="unknown output name"):
        sess.run(["nope"], feed)
    with pytest.raises(TypeError, match="list of names"):
        sess.run(names[0], feed)


def _conv64(x: np.ndarray, w: np.ndarray, pads) -> np.ndarray:
    """Conv(x, w) in float64, by vkml's NumPy operator."""
    from vkml.ir.graph import Node
    from vkml.ops.registry import lookup
    node = Node("n", "Conv", "", ["x", "w"], ["y"], {"pads": list(pads)}, 17)
    return lookup("", "Conv", 17)(node).run(x.astype(np.float64), w.astype(np.float64))[0]


def _conv_bound(x: np.ndarray, w: np.ndarray, pads) -> np.ndarray:
    """conv(|x|, |w|): the sum of |products| each output adds."""
    return _conv64(np.abs(x), np.abs(w), pads)


@st.composite
def wino_cases(draw):
    n = draw(st.integers(1, 2))
    c, m = draw(st.sampled_from([1, 3, 32, 40])), draw(st.sampled_from([1, 8, 32, 33]))
    hh, ww = draw(st.integers(1, 21)), draw(st.integers(1, 21))
    pads = [draw(st.integers(0, 2)) for _ in range(4)]
    assume(hh + pads[0] + pads[2] >= 3 and ww + pads[1] + pads[3] >= 3)
    return n, c, m, hh, ww, pads, draw(st.booleans()), draw(st.booleans()), draw(st.booleans())


@pytest.mark.parametrize("kernel", ["auto", "avx2"])
@pytest.mark.parametrize("case", [
    (1, 32, 33, 6, 270, [1, 1, 1, 1], True, True, True),    # 68 tiles a row: chunks of part of a row
    (2, 40, 32, 65, 7, [0, 2, 1, 0], False, True, False),   # 17 tile rows of 2: many rows a chunk
    (1, 32, 32, 3, 3, [0, 0, 0, 0], True, False, True),     # one output
])
def test_winograd_row_chunks(vkml_env, kernel, case):
    """The transforms' chunks of a plane (include/cpu_winograd.h VKML_WINO_CHUNKS): rows longer
    than a chunk, many short rows, a single tile."""
    for tile in (4, 2):
        test_winograd_convolutions.hypothesis.inner_test(vkml_env, kernel, tile, case, 5)


@pytest.mark.parametrize("kernel", ["auto", "avx2"])
@pytest.mark.parametrize("tile", [4, 2])
@settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", 25)), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(case=wino_cases(), seed=st.integers(0, 2**31))
def test_winograd_convolutions(vkml_env, kernel, tile, case, seed):
    """3x3 convolutions of stride 1 on Winograd F(4x4, 3x3) and F(2x2, 3x3) (CONV_WINO,
    include/cpu_winograd.h; VKML_WINOGRAD=all takes every one with rows enough for the own kernel): odd sizes, pads on any side, images, bias, residual and
    Relu, against NumPy's float64 Conv within 1e-5 of the sum of |products| of each output's
    tile (an output carries its tile's transformed values' rounding), plus float32 rounding of
    the bias and residual."""
    vkml_env(VKML_CPU_GEMM=kernel, VKML_WINOGRAD="all")
    if cpuprog._conv_kernel(32)[0] == 0:
        pytest.skip("no kernel set of the own GEMM on this CPU")
    saved, cpuprog.WINO_ALL_TILE = cpuprog.WINO_ALL_TILE, tile
    try:
        _winograd_case(case, seed, tile)
    finally:
        cpuprog.WINO_ALL_TILE = saved


def _winograd_case(case, seed, tile):
    n, c, m, hh, ww, pads, bias, res, relu = case
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (n, c, hh, ww)).astype(np.float32)
    w = rng.uniform(-1, 1, (m, c, 3, 3)).astype(np.float32)
    oh, ow = hh + pads[0] + pads[2] - 2, ww + pads[1] + pads[3] - 2
    inits, ins, feed = {"w": w}, ["x", "w"], {"x": x}
    if bias:
        inits["b"] = rng.uniform(-1, 1, m).astype(np.float32)
        ins.append("b")
    nodes, last, inputs = [h.make_node("Conv", ins, ["c"], pads=pads)], "c", [("x", [n, c, hh, ww])]
    if res:
        feed["r"] = rng.uniform(-1, 1, (n, m, oh, ow)).astype(np.float32)
        nodes.append(h.make_node("Add", ["c", "r"], ["s"]))
        last = "s"
        inputs.append(("r", [n, m, oh, ow]))
    nodes.append(h.make_node("Relu" if relu else "Identity", [last], ["y"]))
    model = _model(nodes, inputs, ["y"], inits)
    sess = vkml.InferenceSession(model.SerializeToString(), devices=["cpu"])
    first = sess.run(None, feed)[0]
    got = sess.run(None, feed)[0]
    np.testing.assert_array_equal(first, got)
    # (rows too few for the own kernel's panels keep the direct route: cpuprog._conv_kernel)
    wino = cpuprog._conv_kernel(m)[0] != 0
    convs = [p for op, p, *_ in _profile_of(sess, feed) if op == "conv"]
    assert [p[12] == cpuprog.CONV_WINO for p in convs] == [wino]
    assert not wino or convs[0][18] == tile
    want = _conv64(x, w, pads)
    if bias:
        want = want + inits["b"].astype(np.float64).reshape(-1, 1, 1)
    if res:
        want = want + feed["r"]
    if relu:
        want = np.maximum(want, 0)
    tol = 1e-5 * tile_max(_conv_bound(x, w, pads), tile) + 1e-6 * (1 + np.abs(want))
    err = np.abs(got.astype(np.float64) - want)
    assert (err <= tol).all(), f"worst {err.max()}, {(err > tol).sum()} of {err.size} off"


def test_winograd_auto_rule_and_threads(vkml_env):
    """auto: resnet18's 56x56 and 28x28 layers at batch 1 (enough tiles) take CONV_WINO, its 7x7
    ones (4 tiles) the direct kernel; VKML_WINOGRAD=off none. From 8 threads every run gives a
    lone run's bits (the GEMMs' chunks do not depend on the runs in flight)."""
    if cpuprog._conv_kernel(64)[0] == 0:
        pytest.skip("no kernel set of the own GEMM on this CPU")
    rng = np.random.default_rng(4)
    inits = {"w1": (rng.standard_normal((64, 64, 3, 3)) / 24).astype(np.float32),
             "w2": (rng.standard_normal((64, 64, 3, 3)) / 24).astype(np.float32)}
    nodes = [h.make_node("Conv", ["x", "w1"], ["a"], pads=[1] * 4), h.make_node("Relu", ["a"], ["b"]),
             h.make_node("Conv", ["b", "w2"], ["c"], pads=[1] * 4), h.make_node("Add", ["c", "x"], ["y"]),
             h.make_node("MaxPool", ["y"], ["p"], kernel_shape=[8, 8], strides=[8, 8]),
             h.make_node("Conv", ["p", "w2"], ["z"], pads=[1] * 4)]
    model = _model(nodes, [("x", [1, 64, 56, 56])], ["z"], inits)
    feeds = [{"x": rng.standard_normal((1, 64, 56, 56)).astype(np.float32)} for _ in range(8)]
    for mode, want_modes in (("auto", [cpuprog.CONV_WINO, cpuprog.CONV_WINO, None]), ("off", [None] * 3)):
        vkml_env(VKML_WINOGRAD=mode)
        outs = _check(model, feeds[0])
        sess = vkml.InferenceSession(model.SerializeToString(), devices=["cpu"])
        want = [sess.run(None, f)[0] for f in feeds]
        modes = [p[12] for op, p, *_ in _profile_of(sess, feeds[0]) if op == "conv"]
        assert [md if md == cpuprog.CONV_WINO else None for md in modes] == want_modes, modes
        np.testing.assert_allclose(want[0], outs[0], rtol=RTOL, atol=ATOL)
        bad = []

        def worker(j: int) -> None:
            for _ in range(3):
                if not np.array_equal(sess.run(None, feeds[j])[0], want[j]):
                    bad.append(j)

        _in_threads(worker, 8)
        assert not bad


@pytest.mark.parametrize("kernel", ["auto", "avx2"])
def test_channel_splits_by_columns_give_the_same_bits(vkml_env, kernel):
    """A convolution split by channels on the own GEMM splits its packed columns too where the
    weight panels run short (_cpuprog.set_split_panels): channels only, columns only and both give
    the same bits (each output sums its K in one order), and onnxruntime's values."""
    vkml_env(VKML_CPU_GEMM=kernel, VKML_WINOGRAD="off")
    if cpuprog._conv_kernel(128)[0] == 0:
        pytest.skip("no kernel set of the own GEMM on this CPU")
    rng = np.random.default_rng(9)
    inits = {"w": (rng.standard_normal((128, 96, 3, 3)) / 30).astype(np.float32),
             "b": rng.standard_normal(128).astype(np.float32)}
    nodes = [h.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1] * 4), h.make_node("Relu", ["c"], ["y"])]
    model = _model(nodes, [("x", [1, 96, 14, 14])], ["y"], inits)
    feed = {"x": rng.standard_normal((1, 96, 14, 14)).astype(np.float32)}
    got = {}
    old = cpuprog._cpuprog.set_split_panels(4)
    try:
        for panels in (0, 8, 1000):  # (2 cores: 4 chunks of 16 panels; 8: 2 x 2 chunks)
            cpuprog._cpuprog.set_split_panels(panels)
            got[panels] = _check(model, feed)[0]
            sess = vkml.InferenceSession(model.SerializeToString(), devices=["cpu"])
            sess.run(None, feed)
            modes = [p[12] for op, p, *_ in _profile_of(sess, feed) if op == "conv"]
            if cpuprog.CORES > 1:
                assert modes == [cpuprog.CONV_CHANNELS], modes
    finally:
        cpuprog._cpuprog.set_split_panels(old)
    np.testing.assert_array_equal(got[0], got[8])
    np.testing.assert_array_equal(got[0], got[1000])


class _Offset:
    """A program standing in for a lowered one: the real program's outputs, plus `delta` at the
    first element of each."""

    def __init__(self, prog, delta: float):
        self.prog, self.delta = prog, delta

    def run(self, inputs):
        outs = self.prog.run(inputs)
        for o in outs:
            o.reshape(-1)[0] += self.delta
        return outs


@pytest.mark.parametrize("delta, kept", [(0.5, False), (2e-4, True)])
def test_a_program_that_disagrees_with_its_plan_is_not_used(monkeypatch, delta, kept):
    """A signature's program is checked against its traced run: a program off by more than
    rtol 1e-3 / atol 1e-4 of the output's range is dropped (the runs stay in Python, logged), one
    within float32 rounding of the range (a Winograd convolution's small outputs) is kept."""
    real = cpuprog.lower
    monkeypatch.setattr(cpuprog, "lower", lambda *a, **k: _Offset(real(*a, **k), delta))
    rng = np.random.default_rng(1)
    inits = {"w": (rng.standard_normal((8, 4, 3, 3)) * 4).astype(np.float32)}
    model = _model([h.make_node("Conv", ["x", "w"], ["y"], pads=[1] * 4)], [("x", [1, 4, 9, 9])], ["y"], inits)
    feed = {"x": rng.standard_normal((1, 4, 9, 9)).astype(np.float32)}
    sess = vkml.InferenceSession(model.SerializeToString(), devices=["cpu"])
    first = sess.run(None, feed)[0]
    assert (_native(sess, feed) is not None) == kept
    assert np.abs(first).max() > 2  # (the range the check scales its atol by)


def test_winograd_tile_rule(vkml_env):
    """auto: F(4x4, 3x3) where 4x4 output tiles reach WINO_MIN_TILES (resnet18's 56x56 and 28x28
    layers at batch 1), F(2x2, 3x3) where only 2x2 ones do (its 14x14 layers), neither below (7x7)
    or with too few channels, stride 2, or groups; all: WINO_ALL_TILE wherever it applies."""
    from vkml.ops._window import resolve

    def tile(n, c, hw, stride=1, group=1, isa=2):
        win = resolve((hw, hw), (3, 3), (stride, stride), None, (1, 1, 1, 1), "NOTSET")
        return cpuprog._winograd(n, c // group, c // group, group, win, win.out, isa)

    vkml_env(VKML_WINOGRAD=None)
    assert [tile(1, 64, 56), tile(1, 128, 28), tile(1, 256, 14), tile(1, 512, 7)] == [4, 4, 2, 0]
    assert [tile(4, 512, 7), tile(1, 16, 56), tile(1, 64, 56, stride=2), tile(1, 64, 56, group=2)] == [2, 0, 0, 0]
    assert tile(1, 64, 56, isa=0) == 0  # (no own kernel)
    vkml_env(VKML_WINOGRAD="all")
    assert tile(1, 512, 7) == cpuprog.WINO_ALL_TILE and tile(1, 8, 3) == cpuprog.WINO_ALL_TILE
    vkml_env(VKML_WINOGRAD="off")
    assert tile(1, 64, 56) == 0


@pytest.mark.parametrize("share, spin_us", [(0, 0), (1, 0), (1, 50)])
def test_the_pool_runs_every_chunk_once_when_runs_share_it(share, spin_us):
    """Runs in flight from 4 threads on a pool of 8 cores (more than this machine may have: a
    width of 2 each), then from 12 (a width of 1: jobs not opened to helpers), each opening jobs
    one after another: with idle helpers joining any job or at most a run's width, every chunk of
    every job runs exactly once and every join returns; so too with helpers and callers that
    watch for work a while before sleeping."""
    old_share = _cpuprog.set_pool_share(share, spin_us * 1000)
    _cpuprog.set_cores(8)
    try:
        bad = []

        def worker(k: int) -> None:
            bad.append(_cpuprog.pool_check(100, 3 + k % 17, 5000 * (1 + k % 3)))

        _in_threads(worker, 4)
        _in_threads(worker, 12)
        assert bad == [0] * 16
        assert _cpuprog.pool_check(50, 64) == 0  # (and a lone run after them)
    finally:
        _cpuprog.set_cores(cpuprog.CORES)
        _cpuprog.set_pool_share(*old_share)
