"""STFT in GPU sessions (vkml/compile/decompose.py): a Gather of the frames, the window's Mul and
the GPU DFT, against vkml's CPU operator (NumPy's rfft / fft). Not bit for bit (the CPU's onesided
transform is rfft, the DFT kernel's fft cut to n // 2 + 1 bins): within (n + 8) u S of it per
frame, u = 2^-24, S = the frame's sum of |windowed samples| (the DFT kernel's bound, doubled for
the two transforms), and every node of the plan on the GPU."""
from __future__ import annotations

import os
import sys

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
from _gen import seeds  # noqa: E402
from _oracle import gpu_and_cpu, make_model  # noqa: E402

import vkml  # noqa: E402

HYP = settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", "40")), deadline=None,
               suppress_health_check=list(HealthCheck))
U = 2.0 ** -24


@st.composite
def cases(draw):
    rng = np.random.default_rng(draw(seeds))
    b, n = draw(st.integers(1, 3)), draw(st.integers(1, 130))
    complex_ = draw(st.booleans())
    onesided = 0 if complex_ else draw(st.sampled_from([0, 1]))
    length = draw(st.integers(1, min(n, 64)))
    step = draw(st.integers(1, 20))
    signal = rng.standard_normal((b, n, 2 if complex_ else 1)).astype(np.float32)
    window = rng.uniform(0, 1, length).astype(np.float32) if draw(st.booleans()) else None
    give_length = window is None or draw(st.booleans())
    inputs = {"signal": signal, "frame_step": np.array(step, np.int64), "window": window,
              "frame_length": np.array(length, np.int64) if give_length else None}
    if window is None and not give_length:
        inputs["frame_length"] = None  # (the whole signal: one frame)
    return inputs, onesided, draw(st.booleans())


@HYP
@given(case=cases())
def test_stft(gpu, case):
    inputs, onesided, fed = case
    consts = () if fed else ("frame_step", "frame_length")  # fed: values the plans are made for
    model = make_model("STFT", inputs, {"onesided": onesided}, 17, consts=consts)
    feed = {k: v for k, v in inputs.items() if v is not None and k not in consts}
    got, want, sess = gpu_and_cpu(gpu, model, feed)
    (row,) = sess.placement()
    assert row["device"] == gpu and row.get("pipelines"), row
    assert set(sess._gpu.last.placement.devices) == {gpu}  # the Gather and the Mul too
    (g,), (w,) = got, want
    assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape)
    x, win = inputs["signal"], inputs["window"]
    length = win.shape[0] if win is not None else (int(inputs["frame_length"]) if inputs["frame_length"] is not None
                                                    else x.shape[1])
    step = int(inputs["frame_step"])
    frames = np.lib.stride_tricks.sliding_window_view(np.abs(x).sum(-1), length, axis=1)[:, ::step]
    s = (frames * (np.abs(win) if win is not None else 1.0)).sum(-1)  # (b, frames)
    bound = 2 * (length + 8) * U * s[..., None, None] + 1e-30
    assert np.all(np.abs(g.astype(np.float64) - w) <= bound), float(np.max(np.abs(g.astype(np.float64) - w) / bound))


def test_unknown_frame_step_stays_on_the_cpu(gpu):
    """A frame_step computed at run time (here from data) is no plan value: the node stays on
    the CPU, its result the CPU's."""
    from onnx import TensorProto as T
    from onnx import helper

    vi = helper.make_tensor_value_info
    nodes = [helper.make_node("ReduceMax", ["steps"], ["step"], keepdims=0),
             helper.make_node("STFT", ["signal", "step", "", "len"], ["y"], name="stft")]
    g = helper.make_graph(nodes, "g", [vi("signal", T.FLOAT, [1, 64, 1]), vi("steps", T.INT64, [100])],
                          [vi("y", T.FLOAT, None)], [helper.make_tensor("len", T.INT64, [], [16])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    feed = {"signal": np.random.default_rng(0).standard_normal((1, 64, 1)).astype(np.float32),
            "steps": np.arange(100, dtype=np.int64) % 7 + 1}
    got, want, sess = gpu_and_cpu(gpu, model, feed)
    np.testing.assert_array_equal(got[0], want[0])
    assert {r["node"]: r["device"] for r in sess.placement()}["stft"] == "cpu"
