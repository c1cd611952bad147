"""vkml/benchmarks/models.py's dbnet_like and bert_like at small sizes: valid opset-17 graphs that
onnxruntime, vkml's CPU device and its Vulkan device (lavapipe on CI) all agree on.

The benchmark runs them at their defaults (640x640; BERT-base, seq 128); here they are shrunk
so that the whole file takes seconds on two cores.
"""
from __future__ import annotations

import collections
import os
import tempfile

import numpy as np
import onnx
import pytest

# Pipeline caches of test runs go to a scratch directory, not ~/.cache/vkml (as tests/e2e does).
os.environ.setdefault("VKML_CACHE_DIR", tempfile.mkdtemp(prefix="vkml-test-cache-"))

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

import vkml  # noqa: E402
from vkml.benchmarks import models as M  # noqa: E402

ort = pytest.importorskip("onnxruntime")

SMALL = {
    "dbnet_like": lambda: M.dbnet_like(1, 64),
    "bert_like": lambda: M.bert_like(1, seq=16, hidden=64, layers=2, heads=4, vocab=100),
}


@pytest.fixture(scope="module", params=sorted(SMALL))
def case(request):
    """(BenchModel, onnxruntime's output) for each builder at its small size."""
    bm = SMALL[request.param]()
    want = ort.InferenceSession(bm.bytes(), providers=["CPUExecutionProvider"]).run(None, bm.feed)
    return bm, want


def test_builders_registered_and_sized():
    assert M.BUILDERS["dbnet_like"] is M.dbnet_like and M.BUILDERS["bert_like"] is M.bert_like
    with pytest.raises(ValueError, match="multiple of 32"):
        M.dbnet_like(1, 48)
    with pytest.raises(ValueError, match="multiple of heads"):
        M.bert_like(1, seq=8, hidden=30, layers=1, heads=4, vocab=10)
    with open(os.path.join(REPO, "bench", "bench_first_run.py")) as f:  # its default --models
        assert "dbnet_like,bert_like" in f.read()


def test_graph_is_valid_and_shaped(case):
    bm, want = case
    onnx.checker.check_model(bm.proto, full_check=True)
    assert bm.proto.opset_import[0].version == M.OPSET
    (y,) = want
    assert y.dtype == np.float32 and np.isfinite(y).all()
    if bm.name == "dbnet_like":
        ops = collections.Counter(n.op_type for n in bm.proto.graph.node)
        assert ops["BatchNormalization"] > 0 and ops["Resize"] > 0 and ops["ConvTranspose"] == 2
        assert list(bm.feed) == ["x"] and y.shape == (1, 1, 64, 64)
        assert 0.0 <= y.min() and y.max() <= 1.0  # HardSigmoid's probability map
    else:
        ops = collections.Counter(n.op_type for n in bm.proto.graph.node)
        assert ops["LayerNormalization"] == 5 and ops["Erf"] == 2 and ops["Softmax"] == 2
        assert bm.feed["input_ids"].dtype == np.int64 and bm.feed["input_ids"].max() < 100
        assert y.shape == (1, 16, 64)
    assert bm.flops and bm.flops > 0


def test_vkml_cpu_matches_onnxruntime(case):
    bm, want = case
    s = vkml.InferenceSession(bm.bytes(), devices=["cpu"])
    got = s.run(None, bm.feed)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-4)


def test_vkml_gpu_matches_onnxruntime(case, gpu):
    bm, want = case
    s = vkml.InferenceSession(bm.bytes(), devices=[gpu, "cpu"])
    got = s.run(None, bm.feed)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-3, atol=1e-3)
    placement = s.placement()
    assert len(placement) == len(bm.proto.graph.node)
    counts = collections.Counter(p["device"] for p in placement)
    on_cpu = [(p["op"], p.get("reason")) for p in placement if p["device"] == "cpu"]
    print(f"{bm.name} on {gpu}: {counts[gpu]} of {len(placement)} nodes on the GPU; on the CPU: {on_cpu}")
    # Every op of both graphs has a Vulkan kernel today; a fallback would be a regression.
    assert counts[gpu] == len(placement), on_cpu


def test_transformers_family_without_torch(tmp_path):
    """Without torch, torch_transformer says why instead of raising, and `vkml bench --only
    transformers` records every case as skipped with that reason (at full sizes: the builder is
    asked) and with the quick-sizes reason under --smoke (it is not)."""
    import importlib.util

    from vkml.benchmarks import suite

    assert suite.FAMILIES[-1] == "transformers" and suite.WEIGHTS["transformers"] > 0
    if importlib.util.find_spec("torch") is not None:
        pytest.skip("torch is importable: the family would export and time 100M-parameter models")
    bm, why = M.torch_transformer("bert_base")
    assert bm is None and "torch not importable" in why
    with pytest.raises(ValueError, match="unknown"):
        M.torch_transformer("bert_large")
    for extra, reason in (([], "torch not importable"), (["--smoke"], "quick sizes")):
        args = suite.build_parser().parse_args(
            extra + ["--out", str(tmp_path), "--machine", "tf", "--device", "cpu", "-q", "--no-charts",
                     "--only", "transformers"])
        recs = [r for r in suite.run(args)["records"] if r["benchmark"] != "runtimes"]
        got = {(r["benchmark"], r["config"]) for r in recs}
        assert got == {("bert_base", "b1 seq128"), ("gpt2_small", "b1 seq128"), ("gpt2_small", "b1 seq512"),
                       ("vit_b_16", "b1 224x224")}, got
        assert all(r["status"] == "skipped" and reason in r["reason"] for r in recs), recs


def test_fp16_runtime_runs_sessions_in_float16(gpu):
    """`vkml bench --fp16` adds vkml-fp16/<gpu>: sessions with precision="fp16", whose outputs
    stay float32 and near the float32 runtime's."""
    from vkml.benchmarks.runtimes import Vkml, discover

    runtimes, _ = discover(None, [gpu], fp16=True)
    labels = [rt.label for rt in runtimes]
    assert f"vkml/{gpu}" in labels and f"vkml-fp16/{gpu}" in labels
    assert f"vkml-fp16/{gpu}" not in [rt.label for rt in discover(None, [gpu])[0]]
    bm = M.BUILDERS["mnist"]()
    full, half = Vkml(gpu).load(bm).host()[0], Vkml(gpu, "fp16").load(bm).host()[0]
    assert half.dtype == full.dtype == np.float32
    np.testing.assert_allclose(half, full, rtol=2e-2, atol=2e-2 * float(np.abs(full).max()))
