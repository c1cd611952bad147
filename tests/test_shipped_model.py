"""The digits CNN that ships inside vkml (trained by tools/train_digits.py): it must stay a valid,
accurate model, and vkml must run it exactly as onnxruntime does."""
from __future__ import annotations

import re
from importlib import resources

import numpy as np
import onnx
import pytest

ort = pytest.importorskip("onnxruntime")

DATA = resources.files("vkml") / "data"
MODEL_PATH = str(DATA / "digits_cnn.onnx")
MIN_ACCURACY = 0.93


@pytest.fixture(scope="module")
def test_set() -> tuple[np.ndarray, np.ndarray]:
    with np.load(str(DATA / "digits_test.npz")) as d:
        return d["images"], d["labels"]


@pytest.fixture(scope="module")
def ort_outputs(test_set) -> list[np.ndarray]:
    sess = ort.InferenceSession(MODEL_PATH, providers=["CPUExecutionProvider"])
    return sess.run(["logits", "probabilities"], {"images": test_set[0]})


def test_test_set_layout(test_set):
    images, labels = test_set
    assert images.dtype == np.float32 and images.shape == (360, 1, 8, 8)
    assert labels.dtype == np.int64 and labels.shape == (360,)
    assert 0.0 <= images.min() and images.max() <= 1.0  # pixels scaled /16, as the model expects
    assert set(np.unique(labels).tolist()) == set(range(10))
    assert np.bincount(labels).min() >= 30  # stratified: every digit well represented


def test_model_is_well_formed():
    m = onnx.load(MODEL_PATH)
    onnx.checker.check_model(m, full_check=True)
    assert m.ir_version == 8
    assert [(o.domain, o.version) for o in m.opset_import] == [("", 17)]
    assert all(n.name for n in m.graph.node) and len({n.name for n in m.graph.node}) == len(m.graph.node)
    assert all(t.HasField("raw_data") for t in m.graph.initializer)
    dims = m.graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_param == "N" and [d.dim_value for d in dims[1:]] == [1, 8, 8]
    assert [o.name for o in m.graph.output] == ["logits", "probabilities"]


def test_onnxruntime_accuracy_matches_doc_string(test_set, ort_outputs):
    logits, probs = ort_outputs
    acc = float((logits.argmax(axis=1) == test_set[1]).mean())
    assert acc >= MIN_ACCURACY
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-5)
    assert np.array_equal(probs.argmax(axis=1), logits.argmax(axis=1))
    stated = re.search(r"test accuracy ([0-9.]+)", onnx.load(MODEL_PATH).doc_string)
    assert stated is not None, "doc_string should state the test accuracy"
    assert abs(float(stated.group(1)) - acc) < 1e-4


def _vkml_session():
    import vkml
    from vkml.ops import lookup

    missing = sorted({n.op_type for n in onnx.load(MODEL_PATH).graph.node
                      if lookup(n.domain, n.op_type, 17) is None})
    if missing:
        pytest.skip(f"vkml has no NumPy operator yet for {missing}")
    return vkml.InferenceSession(MODEL_PATH, devices=["cpu"])


def test_vkml_matches_onnxruntime(test_set, ort_outputs):
    sess = _vkml_session()
    images, labels = test_set
    logits, probs = sess.run(["logits", "probabilities"], {"images": images})
    assert logits.shape == (360, 10) and logits.dtype == np.float32
    np.testing.assert_allclose(logits, ort_outputs[0], rtol=0, atol=1e-4)
    np.testing.assert_allclose(probs, ort_outputs[1], rtol=0, atol=1e-5)
    assert float((logits.argmax(axis=1) == labels).mean()) >= MIN_ACCURACY


@pytest.mark.parametrize("batch", [1, 7])
def test_vkml_symbolic_batch(test_set, ort_outputs, batch):
    sess = _vkml_session()
    (logits,) = sess.run(["logits"], {"images": test_set[0][:batch]})
    np.testing.assert_allclose(logits, ort_outputs[0][:batch], rtol=0, atol=1e-4)


def test_cli_checks_its_arguments_first(tmp_path, capsys):
    """--version; --repeat 0, a bad .npy file and an unknown --input name are clear errors
    (exit 1) before anything runs (issue #17)."""
    import numpy as np
    import pytest

    from vkml import __version__
    from vkml.api.cli import main

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and __version__ in capsys.readouterr().out
    assert main(["run", "--repeat", "0"]) == 1
    assert "--repeat" in capsys.readouterr().err
    bad = tmp_path / "bad.npy"
    bad.write_text("not an array")
    from importlib import resources

    model = str(resources.files("vkml") / "data" / "digits_cnn.onnx")
    assert main(["run", model, "--input", f"images={bad}", "--device", "cpu"]) == 1
    assert "cannot read it" in capsys.readouterr().err
    ok = tmp_path / "ok.npy"
    np.save(ok, np.zeros((1, 1, 8, 8), np.float32))
    assert main(["run", model, "--input", f"nope={ok}", "--device", "cpu"]) == 1
    assert "the model's inputs are ['images']" in capsys.readouterr().err
    assert main(["run", model, "--input", f"images={ok}", "--device", "cpu", "--repeat", "3"]) == 0
