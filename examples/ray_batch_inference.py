"""Batch inference on Ray: a pool of vkml actors, then Ray Data's map_batches over a dataset.

    python examples/ray_batch_inference.py                       # a local Ray; actors on the CPU device
    python examples/ray_batch_inference.py --device vulkan:0     # every actor on that device (lavapipe too)
    python examples/ray_batch_inference.py --address auto        # a running cluster: one actor per GPU

Needs `pip install 'vkml[ray]'`. The model is the 8x8 digits CNN that ships inside vkml (input
"images" [N, 1, 8, 8]) with its 360 test images. It travels as bytes through Ray's object
store, so the nodes of a cluster need no copy of the file.

Without --device, the actors ask Ray for a GPU each (`num_gpus=1`) where the cluster has GPUs,
and each finds its own Vulkan device from the GPU Ray gave it; on a cluster without GPUs they
run on the CPU device.
"""
from __future__ import annotations

import argparse
import time
from importlib import resources

import numpy as np
import ray

import vkml.ray


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None, help='every actor on this vkml device, e.g. "vulkan:0" or "cpu"')
    ap.add_argument("--actors", type=int, default=2, help="actors with --device (default 2)")
    ap.add_argument("--address", default=None, help='a Ray cluster to join ("auto"); default: start a local one')
    args = ap.parse_args()

    ray.init(address=args.address, num_cpus=None if args.address else 2, include_dashboard=False,
             log_to_driver=False)
    data = resources.files("vkml") / "data"
    model = (data / "digits_cnn.onnx").read_bytes()
    with np.load(str(data / "digits_test.npz")) as d:
        images, labels = d["images"], d["labels"]

    # 1. A pool: one actor per GPU of the cluster, or --actors actors on --device.
    devices = [args.device] * args.actors if args.device else None
    with vkml.ray.InferencePool(model, devices=devices) as pool:
        for p in pool.placement():
            print(f"actor pid {p['pid']} on {p['sessions'][0]['devices']} ({p['matched_by']})")
        feeds = [{"images": images[i:i + 8]} for i in range(0, len(images), 8)]
        t0 = time.perf_counter()
        outs = pool.run_batch(feeds, ["probabilities"])  # in the feeds' order
        dt = time.perf_counter() - t0
        pool_pred = np.concatenate([probs.argmax(1) for (probs,) in outs])
        runs = [h["runs"] for h in pool.health()]
    print(f"pool: {len(feeds)} batches on {len(runs)} actors (runs per actor {runs}) in {dt:.2f} s, "
          f"{int((pool_pred == labels).sum())} of {len(labels)} right")

    # 2. Ray Data: the "images" column feeds the model input of that name; the outputs come
    # back as new columns, the rows in their original order.
    ds = ray.data.from_items([{"images": img, "label": int(lab)} for img, lab in zip(images, labels)])
    scored = vkml.ray.map_batches(ds, model, output_columns={"probabilities": "probs"}, batch_size=32,
                                  devices=[args.device] if args.device else None,
                                  concurrency=args.actors if args.device else None)
    rows = scored.take_all()
    data_pred = np.array([r["probs"].argmax() for r in rows])
    in_order = [r["label"] for r in rows] == labels.tolist()
    print(f"map_batches: {len(rows)} rows, in order: {in_order}, columns {sorted(rows[0])}, "
          f"{int((data_pred == labels).sum())} of {len(labels)} right")
    assert in_order and (data_pred == pool_pred).all()
    print("the pool and map_batches agree on every image")
    ray.shutdown()


if __name__ == "__main__":
    main()
