"""Shader build outputs, pipeline creation and caching, the persistent pipeline cache."""
import importlib.util
import os
import struct
import sys

import numpy as np
import pytest

import vkml.vulkan as vk
from vkml.vulkan import reflect, shaders

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _build_tool():
    spec = importlib.util.spec_from_file_location("vkml_build_shaders_t", os.path.join(ROOT, "tools", "build_shaders.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_committed_spirv_is_up_to_date():
    """Editing GLSL without rebuilding (python tools/build_shaders.py) fails here."""
    tool = _build_tool()
    manifest = tool._load_manifest()["variants"]
    stale = [v.name for v in tool.VARIANTS if manifest.get(v.name) != tool.variant_hash(v)]
    assert not stale, f"stale SPIR-V: {stale[:5]}"
    names = {v.name for v in tool.VARIANTS}
    assert names == set(shaders.available()), names ^ set(shaders.available())


@pytest.mark.parametrize("name,nbind", [("relu_f32", 2), ("add_f16", 3), ("where_i64", 5), ("cast_f32_bool", 2)])
def test_reflection(name, nbind):
    info = reflect.reflect(shaders.load(name))
    assert info.bindings == tuple(range(nbind))
    assert info.local_size == (256, 1, 1)
    assert info.local_size_spec_ids[0] == 0
    assert info.local_size_with((64,)) == (64, 1, 1)


def test_pipeline_cached_and_specialized(dev):
    p1 = dev.pipeline("relu_f32", "rw", 16)
    assert dev.pipeline("relu_f32", "rw", 16) is p1
    p2 = dev.pipeline("relu_f32", "rw", 16, (64,))
    assert p2 is not p1 and p2.local_size == (64, 1, 1) and p1.local_size == (256, 1, 1)
    assert p2.groups_for(1000) == 16 and p1.groups_for(0) == 1


def test_pipelines_described_then_compiled(dev):
    """Device.pipeline() only describes (layout, local size); compiling is separate, once per
    pipeline, and compile_pipelines() does many on threads."""
    from vkml.vulkan._pipeline import compile_pipelines

    ps = [dev.pipeline(f"{op}_f32", "rw", 16, (32 + i,)) for i, op in enumerate(("exp", "log", "sin", "cos"))]
    fresh = [p for p in ps if not p.compiled]
    assert fresh and all(p.create_seconds == 0 for p in fresh)
    seconds = compile_pipelines(ps + ps, threads=4)
    assert seconds >= 0 and all(p.compiled and p.create_seconds > 0 for p in fresh)
    assert compile_pipelines(ps) == 0.0  # nothing left to do
    ps[0].compile()  # a no-op


def test_pipeline_errors(dev):
    with pytest.raises(ValueError, match="r/w/x"):
        dev.pipeline("relu_f32", "rq", 16)
    with pytest.raises(ValueError, match="uses bindings"):
        dev.pipeline("relu_f32", "rrw", 16)
    with pytest.raises(ValueError, match="multiple of 4"):
        dev.pipeline("relu_f32", "rw", 132)
    with pytest.raises(FileNotFoundError, match="no SPIR-V for shader 'nope_f32'"):
        dev.pipeline("nope_f32", "rw", 16)
    with pytest.raises(ValueError, match="bad shader name"):
        dev.pipeline("../relu_f32", "rw", 16)
    with pytest.raises(ValueError, match="workgroup"):
        dev.pipeline("relu_f32", "rw", 16, (1 << 20,))


def test_pipeline_cache_file(dev, tmp_path, vkml_env):
    from vkml.vulkan import _instance
    from vkml.vulkan._device import Device

    vkml_env(VKML_CACHE_DIR=tmp_path)
    first = Device(_instance.instance(), dev.index)
    try:
        assert first.loaded_cache_bytes == 0
        first.pipeline("exp_f32", "rw", 16).compile()
        first.pipeline("add_f32", "rrw", 104).compile()
        path = first.save_pipeline_cache()
    finally:
        first.close()
    assert path and os.path.dirname(path) == str(tmp_path)
    data = open(path, "rb").read()
    assert len(data) >= 32 and int.from_bytes(data[4:8], "little") == 1
    assert int.from_bytes(data[8:12], "little") == dev.info.vendor_id
    second = Device(_instance.instance(), dev.index)
    try:
        assert second.loaded_cache_bytes == len(data)
        second.pipeline("exp_f32", "rw", 16)
    finally:
        second.close()
    # A foreign or truncated file is ignored, not fed to the driver.
    with open(path, "wb") as f:
        f.write(b"garbage" * 10)
    third = Device(_instance.instance(), dev.index)
    try:
        assert third.loaded_cache_bytes == 0
    finally:
        third.close()


def test_pipeline_cache_off(dev, vkml_env):
    from vkml.vulkan import _instance
    from vkml.vulkan._device import Device

    vkml_env(VKML_PIPELINE_CACHE="0")
    d = Device(_instance.instance(), dev.index)
    try:
        assert d.pipeline_cache_path is None and d.save_pipeline_cache() is None
    finally:
        d.close()


def test_pipeline_cache_saves_merge_between_processes(dev, tmp_path, vkml_env):
    """Two devices (as two processes would) on one cache file: the second save merges what the
    first wrote (vkMergePipelineCaches under the lock file) instead of overwriting it."""
    from vkml.vulkan import _instance
    from vkml.vulkan._device import Device

    vkml_env(VKML_CACHE_DIR=tmp_path)
    a = Device(_instance.instance(), dev.index)
    b = Device(_instance.instance(), dev.index)  # opened before a saved: knows nothing of a's save
    try:
        a.pipeline("exp_f32", "rw", 16, (64,)).compile()
        path = a.save_pipeline_cache()
        size_a = os.path.getsize(path)
        b.pipeline("log_f32", "rw", 16, (64,)).compile()
        alone = len(b.pipeline_cache_data())
        assert b.save_pipeline_cache() == path
        merged = os.path.getsize(path)
        assert merged >= max(size_a, alone) and os.path.exists(path + ".lock")
    finally:
        a.close()
        b.close()


def test_pipeline_statistics(dev, vkml_env):
    """VKML_PIPELINE_STATS=1: a device opens and runs pipelines as before (compiled one by one
    or on threads), and statistics() lists what the driver reports: nothing where the device
    lacks VK_KHR_pipeline_executable_properties (lavapipe), else one dict per executable."""
    from vkml.vulkan import _instance
    from vkml.vulkan._commands import CommandRecorder
    from vkml.vulkan._device import Device
    from vkml.vulkan._pipeline import compile_pipelines
    from vkml.vulkan.tensor import DeviceTensor

    vkml_env(VKML_PIPELINE_STATS="1")
    raw = _instance.instance().describe(dev.index)
    offered = "VK_KHR_pipeline_executable_properties" in raw["extensions"] and raw["pipeline_executable_info"]
    d = Device(_instance.instance(), dev.index)
    try:
        assert d.pipeline_stats == offered
        p = d.pipeline("relu_f32", "rw", 16, (64,))
        assert p.statistics() == []  # not compiled yet
        x = np.random.default_rng(0).standard_normal(1000).astype(np.float32)
        a, o = DeviceTensor.from_numpy(d, x), DeviceTensor.empty(d, x.shape, x.dtype)
        rec = CommandRecorder(d)
        rec.dispatch(p, [a.view, o.view], struct.pack("<IIff", x.size, 0, 0.0, 0.0), p.groups_for(x.size))
        cb = rec.finish()
        cb.run()
        assert np.array_equal(o.numpy(), np.maximum(x, 0)) and cb.pipelines() == [p]
        more = [d.pipeline(f"{op}_f32", "rw", 16, (64,)) for op in ("exp", "neg")]
        compile_pipelines(more, threads=2)
        for q in [p] + more:
            execs = q.statistics()
            assert isinstance(execs, list) and bool(execs) == offered
            for ex in execs:
                assert set(ex) == {"name", "description", "subgroup_size", "stats"}
                assert isinstance(ex["name"], str) and isinstance(ex["subgroup_size"], int)
                assert all(isinstance(k, str) and isinstance(v, (int, float, bool)) for k, v in ex["stats"].items())
    finally:
        d.close()
    assert p.statistics() == []  # released with its device
