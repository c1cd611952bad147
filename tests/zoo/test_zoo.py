"""The model zoo (issue #15): each model against onnxruntime's CPU outputs, on vkml's CPU
device and on the GPU (lavapipe on CI), and the nodes that stay on the CPU in a GPU session
are exactly the ones its registry entry lists, each with why (tests/zoo/_zoo.py): a kernel
that goes missing or a fold that stops happening shows as a failure, and so does a new
kernel (update the entry and tests/zoo/README.md with `python tests/zoo/report.py`)."""
import numpy as np
import onnxruntime as ort
import pytest

import vkml
from _zoo import FOLD, ZOO
from vkml.compile.specialize import FOLDED_REASON

_built: dict = {}


def _case(name):
    if name not in _built:
        blob, feeds, tol = ZOO[name].build()
        want = ort.InferenceSession(blob, providers=["CPUExecutionProvider"]).run(None, feeds)
        _built[name] = blob, feeds, tol, want
    return _built[name]


def _params():
    for name, e in ZOO.items():
        marks = [pytest.mark.xfail(strict=True, reason=e.xfail)] if e.xfail else []
        yield pytest.param(name, marks=marks, id=name)


def _check(sess, feeds, want, tol):
    rtol, atol = tol
    for _ in range(2):  # the second run reuses the plan (and on the GPU the recorded slot)
        got = sess.run(None, feeds)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


@pytest.mark.parametrize("name", _params())
def test_zoo_cpu(name):
    blob, feeds, tol, want = _case(name)
    sess = vkml.InferenceSession(blob, devices=["cpu"])
    _check(sess, feeds, want, tol)
    assert {r["device"] for r in sess.placement()} == {"cpu"}


@pytest.mark.parametrize("name", _params())
def test_zoo_gpu(gpu, name):
    blob, feeds, tol, want = _case(name)
    sess = vkml.InferenceSession(blob, devices=[gpu])
    _check(sess, feeds, want, tol)
    rows = sess.placement()
    on_cpu = {r["node"]: r["reason"] for r in rows if r["device"] == "cpu"}
    expected = ZOO[name].on_cpu
    assert set(on_cpu) == set(expected), {"unexpected on the CPU": {k: v for k, v in on_cpu.items() if k not in expected},
                                          "expected on the CPU, now on the GPU": sorted(set(expected) - set(on_cpu))}
    for node, why in expected.items():  # folded nodes are folded; the others really are CPU work
        assert (on_cpu[node] == FOLDED_REASON) == why.startswith(FOLD), (node, on_cpu[node], why)
    assert any(r["device"] == gpu for r in rows)


def test_gpt2_dynamic_axes(gpu):
    """One GPU session, several (batch, sequence) shapes: each gets its own plan, the mask and
    positions fold for each, and the answers match onnxruntime."""
    blob, _, tol, _ = _case("gpt2_like")
    ref = ort.InferenceSession(blob, providers=["CPUExecutionProvider"])
    sess = vkml.InferenceSession(blob, devices=[gpu])
    rng = np.random.default_rng(3)
    for b, s in [(1, 3), (3, 11), (1, 3), (2, 16)]:
        feeds = {"input_ids": rng.integers(0, 50, (b, s)).astype(np.int64)}
        _check(sess, feeds, ref.run(None, feeds), tol)
        assert {r["node"] for r in sess.placement() if r["device"] == "cpu"} == set(ZOO["gpt2_like"].on_cpu)


def test_gpt2_kv_past_lengths(gpu):
    """One GPU session of the KV-cache step, several (batch, new tokens, past length) shapes,
    an empty past among them: the past length folds into positions and mask for each plan."""
    blob, _, tol, _ = _case("gpt2_kv_step")
    ref = ort.InferenceSession(blob, providers=["CPUExecutionProvider"])
    sess = vkml.InferenceSession(blob, devices=[gpu])
    rng = np.random.default_rng(4)
    for b, s, p in [(1, 1, 7), (2, 4, 0), (2, 1, 12), (1, 1, 7)]:
        feeds = {"input_ids": rng.integers(0, 50, (b, s)).astype(np.int64),
                 "attention_mask": np.ones((b, p + s), np.int64)}
        for i in range(2):
            for kv in ("key", "value"):
                feeds[f"past_key_values.{i}.{kv}"] = rng.standard_normal((b, 4, p, 8)).astype(np.float32)
        _check(sess, feeds, ref.run(None, feeds), tol)
        assert {r["node"] for r in sess.placement() if r["device"] == "cpu"} == set(ZOO["gpt2_kv_step"].on_cpu)
