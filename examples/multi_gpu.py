"""Several devices in one session: devices= in order of preference, memory_caps to split a
model across them, and sess.placement() to see where each node ran and why.

    python examples/multi_gpu.py                                  # the CPU device alone
    python examples/multi_gpu.py --device vulkan:0                # split: one GPU, then the CPU
    python examples/multi_gpu.py --device vulkan:0,vulkan:1       # split over two GPUs

No second GPU? VKML_SPLIT_DEVICE=2 makes vkml list every Vulkan device twice: one physical
device opens as two independent logical devices ("vulkan:0" and "vulkan:1", each with its own
queue, memory and timeline), which is how vkml's own tests exercise multi-GPU paths on a
machine with a single GPU, or with none but Mesa's lavapipe:

    VKML_SPLIT_DEVICE=2 python examples/multi_gpu.py --device vulkan:0,vulkan:1

Placement is greedy, node by node in order: each node goes to the first device in devices=
that can run it and has room for it in its budget (the memory its constants and live
activations need). memory_caps={"vulkan:0": bytes} lowers a GPU's budget, so the nodes that
do not fit spill to the next device in the list. The CPU is always last and runs whatever no
GPU can. Tensors crossing devices go through host memory.
"""
from __future__ import annotations

import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import vkml

WIDTH, LAYERS = 256, 6  # six 256x256 float32 weights: 256 KiB each, 1.5 MiB in all


def mlp() -> tuple[onnx.ModelProto, int]:
    """LAYERS x (MatMul + Add + Relu); returns the model and its weights' size in bytes."""
    rng = np.random.default_rng(0)
    nodes, inits, x, nbytes = [], [], "x", 0
    for i in range(LAYERS):
        w = (rng.standard_normal((WIDTH, WIDTH)) / np.sqrt(WIDTH)).astype(np.float32)
        b = rng.standard_normal(WIDTH).astype(np.float32) / 10
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        nbytes += w.nbytes + b.nbytes
        nodes += [helper.make_node("MatMul", [x, f"w{i}"], [f"m{i}"], name=f"matmul{i}"),
                  helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"], name=f"add{i}"),
                  helper.make_node("Relu", [f"a{i}"], [f"h{i}"], name=f"relu{i}")]
        x = f"h{i}"
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", WIDTH])],
                          [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["N", WIDTH])], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return model, nbytes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu",
                    help='comma-separated devices in order of preference, e.g. "vulkan:0,vulkan:1" '
                         '(default "cpu")')
    ap.add_argument("--cap", type=int, default=None,
                    help="bytes the first GPU may use (default: about half the weights)")
    args = ap.parse_args()
    wanted = [d.strip() for d in args.device.split(",") if d.strip()]

    # What this machine offers: GPUs first (discrete before integrated), the CPU last.
    print("devices here:", [d.name for d in vkml.devices()])

    model, weight_bytes = mlp()
    gpus = [d for d in wanted if d != "cpu"]
    # memory_caps only names GPUs (the CPU has no budget of its own). Cap the first one so that
    # about half the model fits there and the rest goes to the next device in order.
    caps = {gpus[0]: args.cap if args.cap is not None else weight_bytes // 2} if gpus else None
    sess = vkml.InferenceSession(model, devices=wanted, memory_caps=caps)
    print(f"session devices (in order of preference): {sess.devices}; memory_caps: {caps}")

    x = np.random.default_rng(1).standard_normal((8, WIDTH)).astype(np.float32)
    (y,) = sess.run(None, {"x": x})
    (want,) = vkml.InferenceSession(model, devices=["cpu"]).run(None, {"x": x})  # the reference
    err = float(np.abs(y - want).max())
    assert err < 1e-3, err

    # placement(): one row per node of the latest run's plan (or of placement(input_shapes)
    # before any run): the device, and why it went there ("budget full" when a cap pushed it
    # on). On a GPU, vkml's rewrites may merge nodes (a MatMul and its bias Add become one
    # Gemm: "fused into ..."); the rows still name the graph's own nodes.
    rows = sess.placement()
    for r in rows:
        print(f"  {r['node']:<10} {r['op']:<8} {r['device']:<9} {r.get('reason', '')}")
    print(f"ran on {', '.join(_used(sess, rows))}: {len(rows)} nodes, {_crossings(rows)} device "
          f"crossings, max error vs the CPU reference {err:.1e}")
    if not gpus:
        return

    # Greedy placement is per node: after a MatMul spilled, its Relu (no weights, little
    # memory) fits on the first GPU again, so activations cross devices at every layer.
    # placement={"node": "device"} forces nodes where you want them: here each Relu follows
    # its MatMul, which leaves one crossing where the model is cut.
    device_of = {r["node"]: r["device"] for r in rows}
    forced = {f"relu{i}": device_of[f"matmul{i}"] for i in range(LAYERS)}
    tuned = vkml.InferenceSession(model, devices=wanted, memory_caps=caps, placement=forced)
    (y2,) = tuned.run(None, {"x": x})
    assert float(np.abs(y2 - want).max()) < 1e-3
    rows = tuned.placement()
    for dev in _used(tuned, rows):
        print(f"  {dev}: {' '.join(r['node'] for r in rows if r['device'] == dev)}")
    print(f"with placement=: {_crossings(rows)} device crossing(s), same results")


def _used(sess: vkml.InferenceSession, rows: list[dict]) -> list[str]:
    return sorted({r["device"] for r in rows}, key=sess.devices.index)


def _crossings(rows: list[dict]) -> int:
    """How often consecutive nodes (one chain here) run on different devices."""
    return sum(a["device"] != b["device"] for a, b in zip(rows, rows[1:]))


if __name__ == "__main__":
    main()
