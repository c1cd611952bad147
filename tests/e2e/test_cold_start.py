"""Cold start (issue #11): a new model's GPU plan compiles its pipelines ahead of the first
run, in one batch on threads, and needs only a few of them."""
import numpy as np

import vkml
import vkml.vulkan._pipeline as pipeline_mod

from _models import ort_run, resnet_like

MAX_PIPELINES = 16  # a whole ResNet-50 must fit in this many (issue #11)


def test_resnet_like_pipelines_compiled_ahead_and_bounded(gpu, monkeypatch):
    batches = []
    real = pipeline_mod.compile_pipelines

    def spy(pipelines, threads=None):
        batch = list(pipelines)
        if batch:
            batches.append(batch)
        assert all(not p.compiled for p in batch)
        return real(batch, threads)

    monkeypatch.setattr(pipeline_mod, "compile_pipelines", spy)
    model = resnet_like()
    sess = vkml.InferenceSession(model, devices=[gpu, "cpu"])  # fixed shapes: prepared here
    used = sess.pipelines()
    assert used and len(used) <= MAX_PIPELINES, [(p["shader"], p["spec"]) for p in used]
    # Everything the plan dispatches is compiled before anything was issued: one batch at most
    # (none when an earlier test compiled them all), and nothing compiled during the run.
    assert len(batches) <= 1
    report = sess.placement()
    assert all(r["device"] == gpu for r in report), [r for r in report if r["device"] != gpu]
    assert all(r.get("pipelines") for r in report if r["op"] in ("Conv", "Gemm", "MaxPool"))
    x = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)
    (y,) = sess.run(None, {"x": x})
    assert len(batches) <= 1
    (ref,) = ort_run(model, {"x": x})
    np.testing.assert_allclose(y, ref, rtol=1e-3, atol=1e-3 * float(np.abs(ref).max()))


def test_warmup_for_symbolic_shapes(gpu):
    from _models import cnn

    sess = vkml.InferenceSession(cnn(), devices=[gpu, "cpu"])  # N is symbolic: nothing yet
    assert sess.pipelines() == []
    try:
        sess.warmup()
    except ValueError as e:
        assert "input_shapes" in str(e)
    else:
        raise AssertionError("warmup() without shapes must ask for them")
    info = sess.warmup({"x": (2, 3, 12, 12)})
    assert info and all(set(p) == {"shader", "spec", "compile_s"} for p in info)
    x = np.ones((2, 3, 12, 12), np.float32)
    (y,) = sess.run(None, {"x": x})
    assert y.shape == (2, 5)
    assert vkml.InferenceSession(cnn(), devices=["cpu"]).warmup() == []


def test_cli_warmup_fills_the_pipeline_cache(gpu, tmp_path, capsys):
    """`python -m vkml warmup MODEL --shape x=...` compiles the plan's pipelines and leaves the
    pipeline cache saved (the device's cache file is rewritten after each batch)."""
    import glob
    import os

    from vkml.api import cli
    from _models import cnn

    path = tmp_path / "cnn.onnx"
    path.write_bytes(cnn(seed=11))
    assert cli.main(["warmup", str(path), "--device", gpu, "--device", "cpu"]) == 1  # N is symbolic
    assert "input_shapes" in capsys.readouterr().err
    assert cli.main(["warmup", str(path), "--device", gpu, "--device", "cpu", "--shape", "x=3,3,12,12"]) == 0
    out = capsys.readouterr().out
    assert "GPU pipelines ready" in out
    cache = os.environ.get("VKML_CACHE_DIR")
    if cache:
        assert glob.glob(os.path.join(cache, "pipelines-*.bin"))
    assert cli.main(["warmup", str(path), "--shape", "x=bad"]) == 1
    assert cli.main(["warmup", str(path), "--device", "cpu"]) == 1


def test_a_kernel_that_cannot_record_sends_its_node_to_the_cpu(gpu, monkeypatch):
    """A GPU kernel that accepted a node but fails to record it: the plan is made again with
    that node on the CPU (the report says why), during warmup as during a run. (The pooling:
    the model's Sigmoid now runs inside its convolution's dispatch.)"""
    from _models import cnn
    from vkml.kernels import get_kernel

    kernel = get_kernel("GlobalAveragePool")
    real = kernel.record

    def broken(rec, op_type, *a, **k):
        if op_type == "GlobalAveragePool":
            raise RuntimeError("simulated recording failure")
        return real(rec, op_type, *a, **k)

    monkeypatch.setattr(kernel, "record", broken)
    model = cnn(seed=21)
    sess = vkml.InferenceSession(model, devices=[gpu, "cpu"])
    sess.warmup({"x": (2, 3, 12, 12)})
    rows = {r["node"]: r for r in sess.placement()}
    assert rows["gap"]["device"] == "cpu" and "simulated recording failure" in rows["gap"]["reason"]
    x = np.random.default_rng(1).standard_normal((2, 3, 12, 12)).astype(np.float32)
    (ref,) = ort_run(model, {"x": x})
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], ref, rtol=1e-4, atol=1e-5)
