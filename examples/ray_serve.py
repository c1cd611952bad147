"""Online serving with Ray Serve: requests of one image each, batched dynamically into one vkml
run per batch (`@serve.batch`).

    python examples/ray_serve.py                       # a local Ray; replicas on the CPU device
    python examples/ray_serve.py --device vulkan:0     # every replica on that device (lavapipe too)
    python examples/ray_serve.py --num-gpus 1 --replicas 2   # one GPU per replica, found from Ray's assignment

Needs `pip install 'vkml[ray]' 'ray[serve]'`. The model is the digits CNN that ships inside
vkml ("images" [N, 1, 8, 8] -> "probabilities" [N, 10]); its batch dimension is symbolic, so
the images of a batch are stacked and run at once. (For a model whose batch size is fixed,
call `self.worker.run_batch([{...}, ...])` instead: one run per image, in flight together.)

The requests go through a DeploymentHandle, and one through HTTP (POST /digits with a JSON
body {"image": 64 numbers}), then Serve is shut down.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import urllib.request
from importlib import resources

import numpy as np
import ray
from ray import serve

import vkml.ray


@serve.deployment
class Digits:
    """One vkml InferenceWorker per replica: Serve's dynamic batching gathers the concurrent
    requests, the worker runs each batch as one model run."""

    def __init__(self, model: bytes, devices: list[str] | None):
        self.worker = vkml.ray.InferenceWorker(model, devices)
        self.batch_sizes: list[int] = []

    @serve.batch(max_batch_size=32, batch_wait_timeout_s=0.005)
    async def classify(self, images: list[np.ndarray]) -> list[int]:
        x = np.stack(images).astype(np.float32, copy=False)  # [batch, 1, 8, 8]
        # run() blocks while the device works: off the event loop, so that the next batch
        # can gather meanwhile.
        (probs,) = await asyncio.to_thread(self.worker.run, ["probabilities"], {"images": x})
        self.batch_sizes.append(len(images))
        return [int(d) for d in probs.argmax(axis=1)]

    async def __call__(self, request) -> dict:
        image = np.asarray((await request.json())["image"], np.float32).reshape(1, 8, 8)
        return {"digit": await self.classify(image)}

    def stats(self) -> dict:
        """The batch sizes this replica ran, and where it runs."""
        return {"batch_sizes": self.batch_sizes, "devices": self.worker.placement()["sessions"][0]["devices"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None, help='replicas on this vkml device ("vulkan:0", "cpu")')
    ap.add_argument("--num-gpus", type=float, default=0, help="GPUs per replica, mapped to Vulkan devices")
    ap.add_argument("--replicas", type=int, default=1)
    ap.add_argument("--requests", type=int, default=360, help="requests sent through the handle (default 360)")
    ap.add_argument("--port", type=int, default=8000, help="Serve's HTTP port")
    ap.add_argument("--address", default=None, help='a Ray cluster to join ("auto"); default: start a local one')
    args = ap.parse_args()

    ray.init(address=args.address, num_cpus=None if args.address else 2, include_dashboard=False,
             log_to_driver=False)
    serve.start(http_options={"host": "127.0.0.1", "port": args.port})
    data = resources.files("vkml") / "data"
    with np.load(str(data / "digits_test.npz")) as d:
        images, labels = d["images"], d["labels"]
    devices = [args.device] if args.device else None
    app = Digits.options(num_replicas=args.replicas, ray_actor_options={"num_gpus": args.num_gpus, "num_cpus": 0.5}
                         ).bind((data / "digits_cnn.onnx").read_bytes(), devices)
    handle = serve.run(app, name="digits", route_prefix="/digits")

    # Concurrent requests of one image each; Serve batches them.
    ids = [i % len(images) for i in range(args.requests)]
    responses = [handle.classify.remote(images[i]) for i in ids]
    digits = np.array([r.result() for r in responses])
    print(f"served {len(digits)} requests: {int((digits == labels[ids]).sum())} right")
    stats = handle.stats.remote().result()
    sizes = stats["batch_sizes"]
    print(f"a replica on {stats['devices']} ran {len(sizes)} batches, the largest of {max(sizes)} images")

    body = json.dumps({"image": images[0].ravel().tolist()}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{args.port}/digits", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        answer = json.loads(r.read())
    print(f"HTTP: {answer} (label {int(labels[0])})")
    serve.shutdown()
    ray.shutdown()


if __name__ == "__main__":
    main()
