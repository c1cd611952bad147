"""A mixed end-to-end workload over every Vulkan device and the CPU, run in a subprocess by
test_multi_gpu.py (VKML_SPLIT_DEVICE=2: two logical GPUs on one lavapipe) and by
test_validation_e2e.py (VKML_VALIDATION=1: any layer message raises). Prints E2E-OK."""
from __future__ import annotations

import os
import sys
import threading

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import vkml  # noqa: E402
import vkml.vulkan as vk  # noqa: E402
from _graphs import build, feeds, random_recipe  # noqa: E402
from _models import mlp, node_names, transformer_block  # noqa: E402

RTOL, ATOL = 1e-4, 1e-5


def close(got, want, atol=ATOL):
    for g, w in zip(got, want):
        g = g.numpy() if isinstance(g, vkml.Tensor) else g
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=atol)


def main() -> None:
    gpus = [d.name for d in vk.list_devices() if d.usable]
    want_gpus = int(os.environ.get("E2E_EXPECT_GPUS", "1"))
    assert len(gpus) >= want_gpus, f"expected {want_gpus} Vulkan devices, found {gpus}"
    if os.environ.get("VKML_VALIDATION") == "1":
        from vkml.vulkan import _instance

        assert _instance.instance().validation, "validation layer not enabled"
    if "mapped_memory" in os.environ.get("VKML_DISABLE", ""):
        assert not vk.device(0).allocator.pools["device"].mappable  # uploads go through staging
    rng = np.random.default_rng(0)
    g0, g1 = gpus[0], gpus[-1]

    # An MLP over both GPUs and the CPU: GPU->GPU through the host, both directions.
    model = mlp()
    n = node_names(model)
    forced = {n[0]: g0, n[1]: g1, n[2]: "cpu", n[3]: g1, n[4]: g0, n[5]: g0}
    x = rng.standard_normal((5, 16)).astype(np.float32)
    ref = vkml.InferenceSession(model, devices=["cpu"]).run(None, {"x": x})
    sess = vkml.InferenceSession(model, devices=gpus, placement=forced, executor="parallel")
    for _ in range(3):
        close(sess.run(None, {"x": x}), ref)
    kinds = [(u.kind, u.device) for u in sess._gpu.last.up.units]
    if g0 != g1:
        assert ("readback", g0) in kinds and ("upload", g1) in kinds, kinds
    # Results kept on one GPU, inputs from the other.
    t = vkml.Tensor.from_numpy(x, g1)
    y, = sess.run(None, {"x": t}, output_device=g1)
    assert y.device == g1
    close([y], ref)
    y, = sess.run(None, {"x": t}, output_device=g0)
    assert y.device == g0
    close([y], ref)

    # Memory caps: the first GPU full, the rest goes to the next device.
    big = mlp(hidden=256)
    xb = rng.standard_normal((64, 16)).astype(np.float32)
    refb = vkml.InferenceSession(big, devices=["cpu"]).run(None, {"x": xb})
    capped = vkml.InferenceSession(big, devices=gpus, memory_caps={g0: 100 << 10})
    close(capped.run(None, {"x": xb}), refb, atol=1e-4)
    used = {r["device"] for r in capped.placement()}
    # Spilled onto the next device in order: the second GPU, or the CPU when there is one GPU.
    assert g0 in used and (gpus[1] if len(gpus) > 1 else "cpu") in used, capped.placement()

    # A transformer block: reshapes/transposes (views), chains of GPU chunks.
    block = transformer_block()
    xt = rng.standard_normal((2, 3, 16)).astype(np.float32)
    reft = vkml.InferenceSession(block, devices=["cpu"]).run(None, {"x": xt})
    for devs in ([g0], gpus):
        s = vkml.InferenceSession(block, devices=devs)
        close(s.run(None, {"x": xt}), reft, atol=1e-4)

    # Random graphs with random placements over every device.
    devices = gpus + ["cpu"]
    for seed in range(int(os.environ.get("E2E_GRAPHS", "12"))):
        r = np.random.default_rng(100 + seed)
        recipe = random_recipe(r, int(r.integers(2, 10)))
        c = int(r.choice([1, 3, 8, 13]))
        m, forced = build(recipe, c, devices, seed=seed)
        f = feeds(r, int(r.integers(1, 5)), c)
        want = vkml.InferenceSession(m, devices=["cpu"]).run(None, f)
        got = vkml.InferenceSession(m, devices=gpus, placement=forced,
                                    executor=["parallel", "sequential"][seed % 2]).run(None, f)
        close(got, want)

    # Threads on one split session.
    errors: list[str] = []

    def worker(k: int) -> None:
        for i in range(int(os.environ.get("E2E_RUNS", "20"))):
            try:
                close(sess.run(None, {"x": x}), ref)
            except Exception as e:
                errors.append(f"{k}/{i}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=300)
    assert not errors and not any(th.is_alive() for th in threads), errors[:3]
    vk.close_all()
    print("E2E-OK")


if __name__ == "__main__":
    main()
