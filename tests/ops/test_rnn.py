"""RNN, GRU and LSTM against onnxruntime (which implements every attribute) and onnx.reference."""
import os
import sys

import numpy as np
import onnxruntime as ort
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
from _oracle import check_node, make_model  # noqa: E402

import vkml  # noqa: E402

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
# Activations onnxruntime implements, with whether they take alpha / beta.
ACTS = {"Sigmoid": (0, 0), "Tanh": (0, 0), "Relu": (0, 0), "Affine": (1, 1), "LeakyRelu": (1, 0),
        "ThresholdedRelu": (1, 0), "ScaledTanh": (1, 1), "HardSigmoid": (1, 1), "Elu": (1, 0),
        "Softsign": (0, 0), "Softplus": (0, 0)}
N_ACTS = {"RNN": 1, "GRU": 2, "LSTM": 3}


@st.composite
def rnn_case(draw, op):
    rng = np.random.default_rng(draw(st.integers(0, 10**6)))
    seq, batch, n_in, hidden = (draw(st.integers(1, 4)) for _ in range(4))
    direction = draw(st.sampled_from(["forward", "reverse", "bidirectional"]))
    d = 2 if direction == "bidirectional" else 1
    g = GATES[op]
    dtype = np.float32  # onnxruntime implements the recurrent ops for float only

    def rnd(*shape):
        return (rng.standard_normal(shape) * 0.7).astype(dtype)

    inputs = {"X": rnd(seq, batch, n_in), "W": rnd(d, g * hidden, n_in), "R": rnd(d, g * hidden, hidden),
              "B": rnd(d, 2 * g * hidden) if draw(st.booleans()) else None,
              "seq_lens": rng.integers(1, seq + 1, batch).astype(np.int32) if draw(st.booleans()) else None,
              "initial_h": rnd(d, batch, hidden) if draw(st.booleans()) else None}
    if op == "LSTM":
        inputs["initial_c"] = rnd(d, batch, hidden) if draw(st.booleans()) else None
        inputs["P"] = rnd(d, 3 * hidden) if draw(st.booleans()) else None
    attrs = {"direction": direction, "hidden_size": hidden}
    if draw(st.booleans()):
        acts = draw(st.lists(st.sampled_from(sorted(ACTS)), min_size=N_ACTS[op] * d, max_size=N_ACTS[op] * d))
        attrs["activations"] = acts
        alphas = [draw(st.floats(0.1, 2.0)) for a in acts if ACTS[a][0]]
        betas = [draw(st.floats(0.1, 2.0)) for a in acts if ACTS[a][1]]
        # onnxruntime's defaults differ from the spec's for these: always pass the values.
        must = any(a in ("Affine", "ScaledTanh", "ThresholdedRelu") for a in acts)
        if alphas and (must or draw(st.booleans())):
            attrs["activation_alpha"] = alphas
            if betas:
                attrs["activation_beta"] = betas
    if draw(st.booleans()):
        attrs["clip"] = draw(st.floats(0.5, 3.0))
    if op == "GRU":
        attrs["linear_before_reset"] = draw(st.integers(0, 1))
    if op == "LSTM" and draw(st.booleans()):
        attrs["input_forget"] = 1
    n_out = draw(st.integers(1, 3 if op == "LSTM" else 2))
    return inputs, attrs, n_out


def _check_ort(op, inputs, attrs, n_out, opset=14, tol=1e-4):
    # Trim trailing omitted inputs: onnxruntime wants them absent, not "".
    names = list(inputs)
    while names and inputs[names[-1]] is None:
        names.pop()
    inputs = {k: inputs[k] for k in names}
    model = make_model(op, inputs, attrs, opset, outputs=n_out)
    feed = {k: v for k, v in inputs.items() if v is not None}
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed)
    assume(all(np.abs(w).max(initial=0) < 1e4 for w in want))  # unbounded activations can blow up
    sess = vkml.InferenceSession(model.SerializeToString(), devices=["cpu"])
    got = sess.run(None, feed)
    for name, g, w, arg in zip(["Y", "Y_h", "Y_c"], got, want, sess.get_outputs()):
        assert g.dtype == w.dtype and g.shape == w.shape, (name, g.dtype, g.shape, w.dtype, w.shape)
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=name)
        assert arg.shape is None or all(not isinstance(a, int) or a == b for a, b in zip(arg.shape, g.shape))


@settings(deadline=None, max_examples=40)
@given(rnn_case("RNN"))
def test_rnn(case):
    _check_ort("RNN", *case)


@settings(deadline=None, max_examples=40)
@given(rnn_case("GRU"))
def test_gru(case):
    _check_ort("GRU", *case)


@settings(deadline=None, max_examples=40)
@given(rnn_case("LSTM"))
def test_lstm(case):
    _check_ort("LSTM", *case)


@settings(deadline=None, max_examples=15)
@given(st.sampled_from(["RNN", "GRU", "LSTM"]), st.integers(1, 3), st.integers(1, 3), st.integers(0, 10**6))
def test_layout1_matches_layout0(op, seq, batch, seed):
    """layout=1 is layout 0 with batch-major X, states and outputs."""
    rng = np.random.default_rng(seed)
    g, hidden, n_in, d = GATES[op], 3, 2, 2
    x = rng.standard_normal((seq, batch, n_in)).astype(np.float32)
    w = rng.standard_normal((d, g * hidden, n_in)).astype(np.float32)
    r = rng.standard_normal((d, g * hidden, hidden)).astype(np.float32)
    h0 = rng.standard_normal((d, batch, hidden)).astype(np.float32)
    lens = rng.integers(1, seq + 1, batch).astype(np.int32)
    n_out = 3 if op == "LSTM" else 2
    base = {"X": x, "W": w, "R": r, "B": None, "L": lens, "H": h0}
    flip = {"X": x.transpose(1, 0, 2), "W": w, "R": r, "B": None, "L": lens, "H": h0.transpose(1, 0, 2)}
    if op == "LSTM":
        c0 = rng.standard_normal((d, batch, hidden)).astype(np.float32)
        base["C"], flip["C"] = c0, c0.transpose(1, 0, 2)
    outs = []
    for inputs, layout in ((base, 0), (flip, 1)):
        m = make_model(op, inputs, {"direction": "bidirectional", "layout": layout}, 22, outputs=n_out)
        outs.append(vkml.InferenceSession(m.SerializeToString(), devices=["cpu"]).run(
            None, {k: v for k, v in inputs.items() if v is not None}))
    np.testing.assert_allclose(outs[1][0], outs[0][0].transpose(2, 0, 1, 3), rtol=1e-6)
    for a, b in zip(outs[1][1:], outs[0][1:]):
        np.testing.assert_allclose(a, b.transpose(1, 0, 2), rtol=1e-6)


def test_reference_lstm_with_peepholes():
    rng = np.random.default_rng(3)
    inputs = {"X": rng.standard_normal((3, 2, 4)).astype(np.float32),
              "W": rng.standard_normal((1, 12, 4)).astype(np.float32),
              "R": rng.standard_normal((1, 12, 3)).astype(np.float32),
              "B": rng.standard_normal((1, 24)).astype(np.float32), "L": None, "H": None, "C": None,
              "P": rng.standard_normal((1, 9)).astype(np.float32)}
    check_node("LSTM", inputs, {"hidden_size": 3}, opset=22, outputs=3, rtol=1e-5, atol=1e-6)


def test_opset1_gru_default_direction_typo():
    rng = np.random.default_rng(0)
    inputs = {"X": rng.standard_normal((2, 1, 2)).astype(np.float32),
              "W": rng.standard_normal((1, 6, 2)).astype(np.float32),
              "R": rng.standard_normal((1, 6, 2)).astype(np.float32)}
    m = make_model("GRU", inputs, {"hidden_size": 2}, 1, outputs=2)
    out = vkml.InferenceSession(m.SerializeToString(), devices=["cpu"]).run(None, inputs)
    assert out[0].shape == (2, 1, 1, 2)


def test_bad_shapes_and_attributes():
    x = np.zeros((2, 1, 2), np.float32)
    w = np.zeros((1, 3, 2), np.float32)
    r = np.zeros((1, 3, 2), np.float32)
    m = make_model("RNN", {"X": x, "W": w, "R": r}, {"hidden_size": 3}, 14, outputs=1)
    with pytest.raises(Exception, match="R must have shape"):
        vkml.InferenceSession(m.SerializeToString(), devices=["cpu"]).run(None, {"X": x, "W": w, "R": r})
    m = make_model("RNN", {"X": x, "W": w, "R": r}, {"activations": ["Swish"]}, 14, outputs=1)
    with pytest.raises(vkml.ModelError, match="unknown activation"):
        vkml.InferenceSession(m.SerializeToString(), devices=["cpu"])
