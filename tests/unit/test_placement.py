"""Greedy placement over fake devices: support, budgets from lifetimes, forced maps, reasons."""
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from vkml.ops.bind import load_model
from vkml.compile.placement import DeviceSpec, place


def chain(n=6, size=256):
    nodes = [h.make_node("Relu" if k % 2 else "Neg", [f"t{k}"], [f"t{k + 1}"], name=f"n{k}") for k in range(n)]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("t0", T.FLOAT, [size])],
                     [h.make_tensor_value_info(f"t{n}", T.FLOAT, [size])])
    return load_model(h.make_model(g, opset_imports=[h.make_opsetid("", 17)])).graph


def gpu(budget, ops=("Relu", "Neg")):
    return DeviceSpec("gpu", budget, lambda node, ins: None if node.op_type in ops else f"no kernel for {node.op_type}")


CPU = DeviceSpec("cpu", None, lambda node, ins: None)


def test_everything_fits_on_the_gpu():
    g = chain()
    p = place(g, g.values, [gpu(10**6), CPU])
    assert p.devices == ["gpu"] * 6
    # Lifetimes: at most input + output of one step are live (1 KiB each), not all 7 tensors.
    assert p.peak["gpu"] == 2 * 1024


def test_unsupported_op_goes_to_cpu_with_reason():
    g = chain()
    p = place(g, g.values, [gpu(10**6, ops=("Neg",)), CPU])
    assert p.devices == ["gpu", "cpu"] * 3
    assert "no kernel for Relu" in p.reasons[1]


def test_budget_spills_to_cpu():
    g = chain(size=256)  # 1 KiB per tensor; two live at once need 2 KiB
    p = place(g, g.values, [gpu(1500), CPU])
    assert "cpu" in p.devices and "budget full" in p.reasons[p.devices.index("cpu")]


def test_forced_map_and_errors():
    g = chain()
    p = place(g, g.values, [gpu(10**6), CPU], forced={"n2": "cpu"})
    assert p.devices[2] == "cpu" and p.reasons[2] == "user's choice"
    with pytest.raises(ValueError, match="unknown device"):
        place(g, g.values, [gpu(10**6), CPU], forced={"n2": "tpu"})
    with pytest.raises(ValueError, match="unknown node"):
        place(g, g.values, [gpu(10**6), CPU], forced={"zz": "cpu"})
    with pytest.raises(ValueError, match="cannot run it"):
        place(g, g.values, [gpu(10**6, ops=("Neg",)), CPU], forced={"n1": "gpu"})
