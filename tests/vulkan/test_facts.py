"""Planning before the device is open (vkml/vulkan/facts.py): a GPU's DeviceFacts must say what
its opened Device says, and a plan made on them must be the plan made on the device, for
every model of the zoo; a session plans while its device opens and still reports a device
that fails to open."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import vkml
import vkml.vulkan as vk
from vkml.compile import pipeline
from vkml.ops.bind import load_model
from vkml.runtime.devices import GpuFacts, gpu_facts, largest_binding
from vkml.vulkan import facts

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "zoo"))
from _zoo import ZOO, plan_signature  # noqa: E402


def _facts(gpu: str) -> facts.DeviceFacts:
    index = int(gpu.split(":")[1])
    return facts.facts_of(vk._instance.instance().describe(index))


def test_facts_match_the_opened_device(gpu):
    dev = vk.device(int(gpu.split(":")[1]))
    f = _facts(gpu)
    assert f.name == dev.name and f.index == dev.index
    assert f.features == dev.features
    assert f.limits == dev.limits
    assert (f.max_storage_buffer_range, f.max_push_constants_size, f.storage_alignment) == (
        dev.max_storage_buffer_range, dev.max_push_constants_size, dev.storage_alignment)
    alloc = dev.allocator
    assert f.alignment == alloc.alignment
    assert f.heap == alloc.pools["device"].heap
    assert f.budget() == alloc.budget(f.heap)
    # An open device is what planning gets from then on.
    assert vk.device_facts(dev.index) is dev


def test_features_follow_vkml_disable(vkml_env):
    raw = {"features": {"fp16_arithmetic": True, "storage_16bit": False, "push_constant_16bit": True,
                        "fp64": True, "memory_budget": False}}
    assert facts.enabled_features(raw) == {"fp16_arithmetic", "fp64", "timeline_semaphore"}
    vkml_env(VKML_DISABLE="fp64")
    assert facts.enabled_features(raw) == {"fp16_arithmetic", "timeline_semaphore"}


def test_budget_rules():
    assert facts.budget_bytes(1000, None, ("absolute", 123)) == 123
    assert facts.budget_bytes(1000, 400, ("fraction", 0.5)) == 200
    assert facts.budget_bytes(1000, None, ("fraction", 0.5)) == 500


@pytest.mark.parametrize("name", list(ZOO))
def test_a_plan_on_the_facts_is_the_plan_on_the_device(gpu, name):
    blob, feeds, _ = ZOO[name].build()
    model = load_model(blob)
    descs, known = plan_signature(model, feeds)
    f = _facts(gpu)
    on_facts = GpuFacts(gpu, f, f.budget(), f.alignment, largest_binding(f))
    plans = [pipeline.compile_signature(model.graph, model.weights, descs, known=known, devices=(gpu, "cpu"),
                                        gpus={gpu: g}) for g in (on_facts, gpu_facts(gpu))]
    a, b = ([(r["node"], r["device"], r.get("reason")) for r in p.report] for p in plans)
    assert a == b
    assert [u.kind for u in plans[0].units.units] == [u.kind for u in plans[1].units.units]
    assert not any("check failed" in str(r.get("reason")) for r in plans[0].report)


def test_a_session_whose_device_fails_to_open_says_so(gpu, monkeypatch):
    """The session plans on the facts while the opener thread fails: the error still reaches
    the caller, from the constructor."""
    from vkml.api import session as session_mod

    def broken(name):
        raise vk.VulkanError(f"{name}: vkCreateDevice failed (test)")

    monkeypatch.setattr(session_mod, "vulkan_device", broken)
    monkeypatch.setattr("vkml.runtime.gpurun.vulkan_device", broken)
    idx = int(gpu.split(":")[1])
    opened = vk._devices.pop(idx, None)  # (so that nothing finds it open)
    try:
        blob, feeds, _ = ZOO["paddle_cls"].build()
        with pytest.raises(vk.VulkanError, match="vkCreateDevice failed"):
            vkml.InferenceSession(blob, devices=[gpu])
    finally:
        if opened is not None:
            vk._devices[idx] = opened
