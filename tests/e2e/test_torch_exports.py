"""Real architectures exported by torch (torchvision resnet18 and mobilenet_v2 with weights=None,
a 2-layer torch.nn.TransformerEncoder), run on the GPU and compared with onnxruntime and torch.

Needs torch and torchvision (the GPU machine has them; CI does not, so these skip there). With two
or more Vulkan devices (two H200s, or VKML_SPLIT_DEVICE=2 on lavapipe) the model is also split
across the first two by a memory cap on the first, and must give the one-GPU outputs.
"""
from __future__ import annotations

import io

import numpy as np
import pytest

import vkml

torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")
ort = pytest.importorskip("onnxruntime")

OPSET = 17


def _export(net, x) -> bytes:
    """Traced with grad enabled: under no_grad the TransformerEncoder takes its fused fast path
    (aten::_transformer_encoder_layer_fwd), which has no ONNX export."""
    buf = io.BytesIO()
    torch.onnx.export(net.eval(), (x,), buf, input_names=["x"], output_names=["y"],
                      opset_version=OPSET, dynamo=False)
    return buf.getvalue()


def _build(name: str, small: bool):
    torch.manual_seed(0)
    if name == "transformer":
        layer = torch.nn.TransformerEncoderLayer(d_model=128, nhead=4, dim_feedforward=256,
                                                 dropout=0.0, batch_first=True)
        net = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        x = torch.randn(2, 16, 128)
    else:
        net = getattr(torchvision.models, name)(weights=None)
        size = 64 if small else 224
        x = torch.randn(1 if small else 2, 3, size, size)
    net.eval()
    with torch.no_grad():
        want_torch = net(x).numpy()
    return _export(net, x), x.numpy(), want_torch


def _close(got: np.ndarray, want: np.ndarray, what: str, rel: float = 2e-4) -> None:
    """Max error against the output's own scale: random-init nets produce large logits."""
    scale = float(np.abs(want).max()) or 1.0
    err = float(np.abs(got.astype(np.float64) - want).max())
    assert err <= rel * scale + 1e-5, f"{what}: max |error| {err:.3g} at output scale {scale:.3g}"


def _computed(sess) -> list[dict]:
    """Placement records of the nodes that run (constants are evaluated once while planning)."""
    return [r for r in sess.placement() if not r["reason"].startswith("constant")]


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2", "transformer"])
def test_torch_export_matches_onnxruntime(gpu, gpus, gpu_on_cpu, name):
    blob, x, want_torch = _build(name, gpu_on_cpu)  # (lavapipe: smaller images keep it in seconds)
    want, = ort.InferenceSession(blob, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    _close(want, want_torch, "onnxruntime vs torch", rel=1e-3)  # the export itself is right

    sess = vkml.InferenceSession(blob, devices=[gpu])
    for _ in range(2):  # the second run reuses the recorded command buffers
        got, = sess.run(None, {"x": x})
        _close(got, want, f"{name} on {gpu}")
    on_cpu = [(r["node"], r["op"], r["reason"]) for r in _computed(sess) if r["device"] == "cpu"]
    assert not on_cpu, f"{name}: nodes left on the CPU: {on_cpu[:5]}"

    if len(gpus) < 2:
        return
    # Two GPUs: the first capped at half the model's bytes (nearly all weights), so placement
    # spills onto the second.
    g0, g1 = gpus[:2]
    split = vkml.InferenceSession(blob, devices=[g0, g1], memory_caps={g0: len(blob) // 2})
    got2, = split.run(None, {"x": x})
    used = {r["device"] for r in _computed(split)}
    assert used == {g0, g1}, f"{name}: split used {used}"
    _close(got2, got, f"{name} split over {g0}+{g1} vs {gpu}", rel=1e-5)
