"""Shared oracle for op tests: one node, run by vkml and by onnx's reference evaluator."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import onnx
from onnx import helper
from onnx.reference import ReferenceEvaluator

import vkml
from vkml.ir import dtypes


def make_model(op_type: str, inputs: Mapping[str, np.ndarray | None], attrs: Mapping[str, Any],
               opset: int, outputs: int | Sequence[str] = 1, domain: str = "",
               consts: Sequence[str] = ()) -> onnx.ModelProto:
    """A single-node model; inputs whose value is None are omitted optional inputs ("")."""
    out_names = [f"y{i}" for i in range(outputs)] if isinstance(outputs, int) else list(outputs)
    in_names = [name if value is not None else "" for name, value in inputs.items()]
    node = helper.make_node(op_type, in_names, out_names, domain=domain, **dict(attrs))
    graph_inputs, inits = [], []
    for name, value in inputs.items():
        if value is None:
            continue
        value = np.asarray(value)
        if name in consts:
            inits.append(onnx.numpy_helper.from_array(value, name))
        else:
            graph_inputs.append(helper.make_tensor_value_info(name, dtypes.onnx_type(value.dtype), value.shape))
    graph_outputs = [helper.make_value_info(n, onnx.TypeProto()) for n in out_names if n]
    graph = helper.make_graph([node], "g", graph_inputs, graph_outputs, initializer=inits)
    opsets = [helper.make_opsetid("", opset if not domain else 21)]
    if domain:
        opsets.append(helper.make_opsetid(domain, opset))
    return helper.make_model(graph, opset_imports=opsets, ir_version=10)


def gpu_and_cpu(gpu: str, model: onnx.ModelProto, feed: Mapping[str, Any],
                quiet: bool = False) -> tuple[list, list, "vkml.InferenceSession"]:
    """(outputs on `gpu`, outputs on the CPU device, the GPU session) of a model: the reference
    is a session on the CPU device named "cpu", never the default devices. quiet: no NumPy
    floating-point warnings from the reference."""
    with np.errstate(all="ignore") if quiet else np.errstate():
        want = vkml.InferenceSession(model, devices=["cpu"]).run(None, feed)
    sess = vkml.InferenceSession(model, devices=[gpu])
    return sess.run(None, feed), want, sess


def device_of(gpu: str):
    """The opened vkml.vulkan Device of a `gpu` fixture's name ("vulkan:N")."""
    import vkml.vulkan as vk

    return vk.device(int(gpu.split(":")[1]))


def device_has(feature: str) -> bool:
    """Whether the first usable Vulkan device reports `feature` (its DeviceInfo.features, e.g.
    "fp64"): for skipping what a device cannot run, decided by the device and not by whether a
    kernel happens to work. False without Vulkan (the `gpu` fixture then skips or fails)."""
    import vkml.vulkan as vk

    if vk.unavailable_reason() is not None:
        return False
    usable = [d for d in vk.list_devices() if d.usable]
    return bool(usable) and bool(usable[0].features.get(feature))


def outcome(sess: "vkml.InferenceSession", feed: Mapping[str, Any]) -> tuple[Any, Exception | None]:
    """(first output, None), or (None, the exception) when the run raises: for tests that
    compare errors."""
    try:
        return sess.run(None, feed)[0], None
    except Exception as e:  # noqa: BLE001 - the error itself is what is compared
        return None, e


def same_failure(gpu_sess: "vkml.InferenceSession", cpu_sess: "vkml.InferenceSession",
                 bad: Mapping[str, Any], good: Mapping[str, Any]) -> Exception:
    """The GPU session raises for `bad` exactly what the CPU session raises (type and message),
    ran its node on the GPU, and then runs `good` as the CPU does: a kernel's fault reported
    through the fault buffer leaves the session working. Returns the error."""
    _, want = outcome(cpu_sess, bad)
    _, got = outcome(gpu_sess, bad)
    assert want is not None and got is not None, (want, got)
    assert type(got) is type(want) and str(got) == str(want), (got, want)
    (row,) = gpu_sess.placement()
    assert row["device"] != "cpu" and row.get("pipelines"), row
    y, err = outcome(gpu_sess, good)
    assert err is None, err
    np.testing.assert_array_equal(y, cpu_sess.run(None, good)[0])
    return got


def check_node(op_type: str, inputs: Mapping[str, np.ndarray | None], attrs: Mapping[str, Any] | None = None,
               opset: int = 21, outputs: int | Sequence[str] = 1, rtol: float = 1e-5, atol: float = 1e-6,
               domain: str = "", consts: Sequence[str] = (), check_infer: bool = True) -> list[np.ndarray]:
    """Run the node through vkml and onnx.reference; assert equal dtypes, shapes and values.

    Also checks vkml's inferred output types against the real outputs. Returns vkml's outputs.
    """
    model = make_model(op_type, inputs, attrs or {}, opset, outputs, domain, consts)
    feed = {k: np.asarray(v) for k, v in inputs.items() if v is not None and k not in consts}
    names = [o.name for o in model.graph.output]
    ref = ReferenceEvaluator(model).run(None, feed)
    sess = vkml.InferenceSession(model.SerializeToString(), devices=["cpu"])
    got = sess.run(None, feed)
    assert len(got) == len(ref)
    for name, g, r in zip(names, got, ref):
        r = np.asarray(r)
        assert isinstance(g, np.ndarray), f"{name}: vkml gave {type(g).__name__}"
        assert g.dtype == r.dtype, f"{name}: dtype {g.dtype} != reference {r.dtype}"
        assert g.shape == r.shape, f"{name}: shape {g.shape} != reference {r.shape}"
        if r.dtype.kind in "fc" or r.dtype.kind == "V":
            np.testing.assert_allclose(g.astype(np.float64) if r.dtype.kind == "V" else g,
                                       r.astype(np.float64) if r.dtype.kind == "V" else r,
                                       rtol=rtol, atol=atol, err_msg=name)
        else:
            np.testing.assert_array_equal(g, r, err_msg=name)
    if check_infer:
        for arg, g in zip(sess.get_outputs(), got):
            assert arg.type == dtypes.type_name(g.dtype), f"{arg.name}: inferred {arg.type}, real {g.dtype}"
            if arg.shape is not None:
                assert len(arg.shape) == g.ndim, f"{arg.name}: inferred rank {arg.shape}, real {g.shape}"
                for d, n in zip(arg.shape, g.shape):
                    assert not isinstance(d, int) or d == n, f"{arg.name}: inferred {arg.shape}, real {g.shape}"
    return got
