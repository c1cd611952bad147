"""What the Ray tests share: the skip rule, the device they run on, and a small model.

Ray is a test extra (pyproject.toml): under CI=true a missing Ray is a failure, elsewhere the
Ray tests skip. The device is the first Vulkan device (lavapipe on CI, where CI=true promises
one), else the CPU device.
"""
from __future__ import annotations

import os

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

CI = os.environ.get("CI", "").lower() == "true"
WIDTH, HIDDEN, CLASSES = 16, 32, 8


def need_ray():
    """The ray module, or skip the calling test module (a failure under CI=true)."""
    try:
        import ray
        import ray.data  # noqa: F401  (map_batches needs Ray Data: pyarrow, pandas)
    except ImportError as e:
        if CI:
            pytest.fail(f"CI=true but Ray is not importable ({e}); the test extra installs ray[data]",
                        pytrace=False)
        pytest.skip(f"Ray is not installed ({e}): pip install 'vkml[ray]'", allow_module_level=True)
    return ray


def pick_device() -> str:
    """The first usable Vulkan device, else "cpu" (under CI=true a Vulkan device is required)."""
    import vkml

    gpus = [d.name for d in vkml.devices() if d.name != "cpu"]
    if not gpus and CI:
        pytest.fail(f"CI=true but no Vulkan device: {vkml.gpu_unavailable_reason()}", pytrace=False)
    return gpus[0] if gpus else "cpu"


def mlp_bytes(seed: int = 0) -> bytes:
    """x [N, 16] -> MatMul, Add, Relu -> MatMul -> logits [N, 8], and their Softmax."""
    rng = np.random.default_rng(seed)
    w1 = rng.standard_normal((WIDTH, HIDDEN)).astype(np.float32) / 4
    b1 = rng.standard_normal(HIDDEN).astype(np.float32) / 10
    w2 = rng.standard_normal((HIDDEN, CLASSES)).astype(np.float32) / 6
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["m1"], name="mm1"),
             helper.make_node("Add", ["m1", "b1"], ["a1"], name="add1"),
             helper.make_node("Relu", ["a1"], ["h"], name="relu1"),
             helper.make_node("MatMul", ["h", "w2"], ["logits"], name="mm2"),
             helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=-1)]
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", WIDTH])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", CLASSES]),
         helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", CLASSES])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"), numpy_helper.from_array(w2, "w2")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return model.SerializeToString()
