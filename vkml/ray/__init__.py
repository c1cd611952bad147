"""vkml on Ray: one vkml session per GPU in Ray actors, batch inference over Ray Data
datasets, and the pieces a Ray Serve deployment needs (docs/ray.md).

    import ray, vkml.ray
    pool = vkml.ray.InferencePool("model.onnx")          # one actor per GPU of the cluster
    outputs = pool.run_batch([{"x": x} for x in xs])     # in order; dead actors are replaced
    ds = vkml.ray.map_batches(ray.data.from_numpy(xs), "model.onnx", input_columns={"x": "data"})

- InferenceWorker: vkml sessions on the devices Ray assigned this process (its GPUs mapped to
  Vulkan devices, the custom "vulkan" resource, or the CPU device); run / run_batch / health /
  placement. A plain class: use it inside your own actors and Serve deployments.
- InferenceActor: InferenceWorker as a Ray actor class, restarted when its process dies and
  its in-flight calls retried (max_restarts=-1, max_task_retries=3).
- InferencePool: several InferenceActors, feeds spread over them, outputs in order.
- map_batches(dataset, model): Ray Data batch inference on an actor pool, outputs as columns.
- assigned_devices(): the device mapping, for code of your own running in a Ray worker.

Needs Ray (`pip install 'vkml[ray]'`); `import vkml` alone never imports it.
"""
try:
    import ray
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("vkml.ray needs Ray, which is not installed: pip install 'vkml[ray]' "
                      "(Ray Core and Ray Data; the Serve example also needs 'ray[serve]')") from e
del ray  # (imported here only to fail early, saying what to install)

from ._data import BatchPredictor, map_batches
from ._devices import VULKAN_RESOURCE, assigned_devices, match_gpus
from ._pool import ACTOR_DEFAULTS, InferenceActor, InferencePool
from ._worker import InferenceWorker

__all__ = ["InferenceWorker", "InferenceActor", "InferencePool", "BatchPredictor", "map_batches",
           "assigned_devices", "match_gpus", "VULKAN_RESOURCE", "ACTOR_DEFAULTS"]
