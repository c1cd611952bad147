"""Basic numbers of vkml's Vulkan runtime on one device: memory pools, transfer throughput
(mapped and staged), submit+wait latency, elementwise bandwidth, pipeline creation.

    python tools/vulkan_probe.py [device index]     (default: the first discrete GPU, else 0)
"""
from __future__ import annotations

import os
import statistics
import struct
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import vkml.vulkan as vk  # noqa: E402
from vkml.vulkan import _instance  # noqa: E402
from vkml.vulkan._commands import CommandRecorder  # noqa: E402
from vkml.vulkan._device import Device  # noqa: E402
from vkml.vulkan.tensor import DeviceTensor  # noqa: E402

MIB = 1 << 20


def transfer(dev, nbytes: int, reps: int = 5) -> tuple[float, float]:
    x = np.random.default_rng(0).integers(0, 255, nbytes, dtype=np.uint8)
    t = DeviceTensor.from_numpy(dev, x)
    up, down = [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        t.write(x)
        up.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        y = t.numpy()
        down.append(time.perf_counter() - t0)
    assert np.array_equal(x, y)
    return nbytes / min(up) / 1e9, nbytes / min(down) / 1e9


def main() -> None:
    index = int(sys.argv[1]) if len(sys.argv) > 1 else vk.preferred_index()
    dev = vk.device(index)
    print(f"device {dev.name}: {dev.info.device_name}; features: {', '.join(sorted(dev.features))}")
    for kind, p in dev.memory_stats()["pools"].items():
        print(f"  pool {kind:8s}: memory type {p['memory_type']} (flags 0x{p['flags']:x}), heap {p['heap']}, "
              f"mapped={p['mapped']}, block cap {p['block_cap'] // MIB} MiB")
    for label, env in (("default", {}), ("staged", {"VKML_DISABLE": "mapped_memory", "VKML_READBACK": "staging"}),
                       ("mapped readback", {"VKML_READBACK": "map"})):
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        d = Device(_instance.instance(), index) if env else dev
        try:
            for size in (1 * MIB, 64 * MIB):
                up, down = transfer(d, size)
                print(f"  transfer {label:15s} {size // MIB:3d} MiB: upload {up:6.2f} GB/s, readback {down:6.2f} GB/s")
        finally:
            if env:
                d.close()
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    p = dev.pipeline("relu_f32", "rw", 16)
    a = DeviceTensor.from_numpy(dev, np.ones(256, np.float32))
    rec = CommandRecorder(dev)
    rec.dispatch(p, [a.view, a.view], struct.pack("<IIff", 256, 0, 0, 0), 1)
    cb = rec.finish()
    lat = []
    for _ in range(200):
        t0 = time.perf_counter()
        cb.run()
        lat.append(time.perf_counter() - t0)
    print(f"  submit+wait of one small dispatch: median {statistics.median(lat) * 1e6:.0f} us, "
          f"min {min(lat) * 1e6:.0f} us")

    n = min(16 << 20, dev.max_storage_buffer_range // 4)
    xs = [DeviceTensor.from_numpy(dev, np.full(n, i + 1, np.float32)) for i in range(3)]
    add = dev.pipeline("add_f32", "rrw", 104)
    push = struct.pack("<II8I8I8I", n, 1, n, *[0] * 7, 1, *[0] * 7, 1, *[0] * 7)
    rec = CommandRecorder(dev)
    rec.timestamp("start")
    for _ in range(10):
        rec.dispatch(add, [xs[0].view, xs[1].view, xs[2].view], push, add.groups_for(n))
        rec.barrier()
    rec.timestamp("end")
    cb = rec.finish()
    cb.run()
    cb.run()
    secs = cb.timestamps()[-1][1]
    if secs > 0:
        print(f"  Add f32, {n * 4 // MIB} MiB per operand: {10 * 3 * n * 4 / secs / 1e9:.1f} GB/s "
              f"({secs / 10 * 1e6:.0f} us per dispatch, GPU timestamps)")
    assert np.all(xs[2].numpy() == 3)

    t0 = time.perf_counter()
    names = ["exp_f32", "tanh_f32", "gelu_f32", "sigmoid_f16", "mul_f16", "where_f32", "cast_f32_f16"]
    for name in names:
        dev.pipeline(name, "rrrwr" if name.startswith("where") else ("rrw" if name.startswith("mul") else "rw"),
                     4 if name.startswith("where") else (104 if name.startswith("mul") else 16))
    print(f"  {len(names)} pipelines created in {(time.perf_counter() - t0) * 1e3:.1f} ms "
          f"(pipeline cache: {dev.pipeline_cache_path}, {dev.loaded_cache_bytes} bytes loaded)")
    vk.close_all()


if __name__ == "__main__":
    main()
