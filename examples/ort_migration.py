"""An onnxruntime script moved to vkml by changing one line: `import vkml as ort`.

    python examples/ort_migration.py                      # CPUExecutionProvider
    python examples/ort_migration.py --device vulkan:0    # VulkanExecutionProvider, device_id 0

Everything below `import vkml as ort` is written as for onnxruntime: SessionOptions,
providers with provider options, RunOptions, get_modelmeta, end_profiling. vkml has two
providers: "VulkanExecutionProvider" (a Vulkan device; provider option device_id) and
"CPUExecutionProvider" (NumPy). Any other provider (CUDA, TensorRT, ...) is a ValueError that
lists these two, rather than a silent fallback.
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import vkml as ort  # was: import onnxruntime as ort


def save_model(path: str) -> None:
    """A small classifier (Gemm + Relu + Gemm + Softmax) with the metadata get_modelmeta reads."""
    rng = np.random.default_rng(0)
    w1, w2 = rng.standard_normal((16, 32)).astype(np.float32), rng.standard_normal((32, 4)).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w1"], ["h"], name="fc1"),
         helper.make_node("Relu", ["h"], ["r"], name="relu"),
         helper.make_node("Gemm", ["r", "w2"], ["logits"], name="fc2"),
         helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=1)],
        "classifier",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 4])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8,
                          producer_name="examples/ort_migration.py", model_version=3)
    helper.set_model_props(m, {"labels": "cat,dog,bird,fish"})
    onnx.save(m, path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", help='"cpu" (default) or a Vulkan device such as "vulkan:0"')
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "classifier.onnx")
        save_model(path)

        # What onnxruntime scripts usually ask first. A CPU-type Vulkan device (Mesa's lavapipe)
        # counts here, so on a machine with lavapipe this lists the Vulkan provider too.
        print("available providers:", ort.get_available_providers())

        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL  # ORT_DISABLE_ALL: no rewrites
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.intra_op_num_threads = 2  # on the CPU provider: BLAS threads while runs are in flight
        so.enable_profiling = True
        so.profile_file_prefix = os.path.join(tmp, "profile")

        if args.device == "cpu":
            providers = ["CPUExecutionProvider"]
        else:  # "vulkan:N" -> the Vulkan provider with device_id N, the CPU for what it cannot run
            providers = [("VulkanExecutionProvider", {"device_id": int(args.device.split(":")[1])}),
                         "CPUExecutionProvider"]
        sess = ort.InferenceSession(path, so, providers=providers)
        print("providers:", sess.get_providers(), sess.get_provider_options())

        meta = sess.get_modelmeta()
        print(f"model: {meta.graph_name} v{meta.version} by {meta.producer_name}; "
              f"labels {meta.custom_metadata_map['labels']}")
        inp, out = sess.get_inputs()[0], sess.get_outputs()[0]
        print(f"input {inp.name} {inp.shape} {inp.type}; output {out.name} {out.shape} {out.type}")

        x = np.random.default_rng(1).standard_normal((5, 16)).astype(np.float32)
        (probs,) = sess.run([out.name], {inp.name: x})

        ro = ort.RunOptions()
        ro.logid = "second-run"  # names the run in the profile
        (again,) = sess.run(None, {inp.name: x}, ro)
        assert np.allclose(probs, again) and np.allclose(probs.sum(1), 1, atol=1e-5)

        ro.terminate = True  # onnxruntime's way to cancel the runs that use these options
        try:
            sess.run(None, {inp.name: x}, ro)
        except RuntimeError as e:
            print("terminated run:", e)

        try:
            ort.InferenceSession(path, providers=["CUDAExecutionProvider"])
        except ValueError as e:
            print("CUDA provider:", e)

        trace = sess.end_profiling()  # a Chrome-trace JSON (chrome://tracing, Perfetto)
        with open(trace) as f:
            events = json.load(f)
        print(f"profile: {len(events)} events, logids {[e['args']['logid'] for e in events]}")
        labels = meta.custom_metadata_map["labels"].split(",")
        print("predictions:", [labels[i] for i in probs.argmax(1)])


if __name__ == "__main__":
    main()
