"""One InferenceSession shared by a thread pool that serves requests, then the same requests
through run_batch.

    python examples/threaded_server.py                      # the CPU device
    python examples/threaded_server.py --device vulkan:0    # a GPU (or Mesa's lavapipe)

The model is the 8x8 digits CNN that ships inside vkml (vkml/data/digits_cnn.onnx, input
"images" [N, 1, 8, 8]) with its 360 test images, so nothing is downloaded.

Why one session and not one per thread: a session holds the loaded weights, the compiled plan
and, on a GPU, the pipelines and run slots. InferenceSession.run may be called from many
threads at once; on a GPU each concurrent run takes its own run slot (max_slots, 8 by
default), so runs overlap on the device instead of queueing behind one another.
"""
from __future__ import annotations

import argparse
import time
from concurrent.futures import ThreadPoolExecutor
from importlib import resources

import numpy as np

import vkml


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", help='"cpu" (default) or a Vulkan device such as "vulkan:0"')
    ap.add_argument("--threads", type=int, default=4, help="server threads (default 4)")
    ap.add_argument("--requests", type=int, default=120, help="requests to serve (default 120)")
    args = ap.parse_args()

    data = resources.files("vkml") / "data"
    with np.load(str(data / "digits_test.npz")) as d:
        images, labels = d["images"], d["labels"]

    # devices= in order of preference; the CPU is always added last and runs what the GPU
    # cannot. Naming the device explicitly is what makes a CPU-type Vulkan device (lavapipe)
    # take part: plain sessions use only real GPUs.
    sess = vkml.InferenceSession(str(data / "digits_cnn.onnx"), devices=[args.device])
    print(f"session on {sess.devices}; inputs {sess.get_inputs()}")

    # A request is one image (batch 1); its answer is the predicted digit. The handler only
    # calls sess.run: no lock is needed around it.
    def handle(i: int) -> int:
        k = i % len(images)
        (probs,) = sess.run(["probabilities"], {"images": images[k:k + 1]})
        return int(probs.argmax())

    ids = list(range(args.requests))
    with ThreadPoolExecutor(args.threads) as pool:
        t0 = time.perf_counter()
        answers = list(pool.map(handle, ids))
        dt = time.perf_counter() - t0
    right = sum(a == labels[i % len(labels)] for i, a in zip(ids, answers))
    print(f"served {len(ids)} requests on {args.threads} threads: {right} right, "
          f"{len(ids) / dt:.0f} requests/s")

    # run_batch does the same without a pool of your own: the session runs the feeds on its
    # own threads (4 on a GPU, fewer on the CPU) and returns the outputs in the feeds' order.
    # A failing feed raises, with a note naming its position in the list.
    feeds = [{"images": images[i % len(images):i % len(images) + 1]} for i in ids]
    outs = sess.run_batch(feeds, ["probabilities"])
    batched = [int(o[0].argmax()) for o in outs]
    assert batched == answers, "run_batch must give the answers the threads gave"
    print(f"run_batch: {len(outs)} results in order, identical to the threaded answers")

    # run_async: one Future per run, for callers that are already asynchronous.
    future = sess.run_async(["probabilities"], {"images": images[:16]})
    print(f"run_async: batch of 16, accuracy {np.mean(future.result()[0].argmax(1) == labels[:16]):.2f}")


if __name__ == "__main__":
    main()
