"""Ray Data batch inference: `map_batches(dataset, model)` adds the model's outputs as columns.

Ray Data runs a callable class on a pool of actors (one per GPU by default), hands it batches
as dicts of NumPy arrays and retries the batches of an actor that died on its replacement
(max_restarts=-1 and max_task_retries=-1 are Ray Data's defaults for actor pools). Order is
kept by Ray Data's `preserve_order`, which map_batches turns on.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from ._pool import actor_resources, actors_for, put_model
from ._worker import InferenceWorker, ModelSource


class BatchPredictor:
    """The callable class Ray Data instantiates on each actor: model inputs read from columns,
    outputs added as columns (rows in, the same rows out, with more columns).

    input_columns: {model input: column}; by default each input reads the column of its name.
    output_columns: {model output: column}, or a list of outputs to keep; by default every
    output, as a column of its name. A column that already exists is not overwritten: that is
    an error, which names the clash.
    The rest is InferenceWorker's. A model whose batch dimension is fixed (say [1, 3, 224, 224])
    runs each Ray Data batch in slices of that size, the last one padded by repeating its last
    row (and the padding's outputs dropped); that assumes rows are independent, as they are in
    inference graphs."""

    def __init__(self, model: ModelSource, devices: Sequence[Any] | None = None, *,
                 input_columns: Mapping[str, str] | None = None,
                 output_columns: Mapping[str, str] | Sequence[str] | None = None,
                 session_kwargs: Mapping[str, Any] | None = None,
                 warmup_shapes: Mapping[str, Sequence[int]] | None = None):
        self.worker = InferenceWorker(model, devices, session_kwargs=session_kwargs, warmup_shapes=warmup_shapes)
        inputs = self.worker.get_inputs()
        names = [a.name for a in inputs]
        unknown = sorted(set(input_columns or {}) - set(names))
        if unknown:
            raise ValueError(f"input_columns names {unknown}, which are not inputs of the model: {names}")
        self.inputs = {n: (input_columns or {}).get(n, n) for n in names}
        outs = [o.name for o in self.worker.get_outputs()]
        if output_columns is None:
            self.outputs = {o: o for o in outs}
        elif isinstance(output_columns, Mapping):
            self.outputs = dict(output_columns)
        else:
            self.outputs = {o: o for o in output_columns}
        unknown = sorted(set(self.outputs) - set(outs))
        if unknown:
            raise ValueError(f"output_columns names {unknown}, which are not outputs of the model: {outs}")
        fixed = {a.shape[0] for a in inputs if a.shape and isinstance(a.shape[0], int)}
        self.fixed_batch = min(fixed) if fixed else None  # rows per run when the model's batch is fixed

    def __call__(self, batch: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        missing = [c for c in self.inputs.values() if c not in batch]
        if missing:
            raise ValueError(f"the batch has no column(s) {missing} (columns: {list(batch)}); map model inputs to "
                             f"columns with input_columns={{input: column}}")
        clash = [c for c in self.outputs.values() if c in batch]
        if clash:
            raise ValueError(f"output column(s) {clash} already exist in the dataset; name the outputs' columns "
                             f"with output_columns={{output: column}}")
        feed = {n: np.ascontiguousarray(batch[c]) for n, c in self.inputs.items()}
        rows = len(next(iter(feed.values()))) if feed else 0
        names = list(self.outputs)
        k = self.fixed_batch
        if k is None or k == rows:
            outs = self.worker.run(names, feed)
        else:
            feeds = []
            for s in range(0, rows, k):
                part = {n: v[s:s + k] for n, v in feed.items()}
                short = k - len(next(iter(part.values())))
                if short:
                    part = {n: np.concatenate([v, np.repeat(v[-1:], short, axis=0)]) for n, v in part.items()}
                feeds.append(part)
            results = self.worker.run_batch(feeds, names)
            outs = [np.concatenate([r[i] for r in results])[:rows] for i in range(len(names))]
        new = {}
        for name, value in zip(names, outs):
            value = np.asarray(value)
            if value.ndim == 0 or value.shape[0] != rows:
                raise ValueError(f"output {name!r} has shape {value.shape}, not one row per input row ({rows}): "
                                 f"only outputs with the batch as their first dimension can become columns "
                                 f"(choose them with output_columns=)")
            new[self.outputs[name]] = value
        return {**batch, **new}


def map_batches(dataset: Any, model: ModelSource, *, input_columns: Mapping[str, str] | None = None,
                output_columns: Mapping[str, str] | Sequence[str] | None = None, batch_size: int | None = 64,
                concurrency: int | tuple[int, int] | None = None, devices: Sequence[Any] | None = None,
                num_gpus: float | None = None, resources: Mapping[str, float] | None = None,
                session_kwargs: Mapping[str, Any] | None = None,
                warmup_shapes: Mapping[str, Sequence[int]] | None = None, preserve_order: bool = True,
                **ray_kwargs: Any) -> Any:
    """`dataset` with the model's outputs added as columns, computed by a pool of actors.

    model: a path (present on every node), bytes or an onnx.ModelProto (put in the object
    store once), or an ObjectRef of bytes. input_columns / output_columns: see BatchPredictor.
    batch_size: rows per model run. concurrency: actors, a number or (min, max) for an
    autoscaling pool (Ray Data's ActorPoolStrategy; or pass compute=); by default one per GPU of
    the cluster (`num_gpus` each, default 1 where the cluster has GPUs), or per unit of the custom
    "vulkan" resource, else 1 on the CPU device. devices: explicit vkml devices for every actor
    (such as ["vulkan:0"] for lavapipe); Ray then reserves no GPU unless num_gpus/resources say
    so, and concurrency defaults to 1.
    preserve_order: output rows in input order (sets the dataset context's
    execution_options.preserve_order, which the datasets derived from one source share).
    ray_kwargs: passed to Dataset.map_batches (num_cpus, memory, runtime_env, max_restarts...).
    The result is lazy, as Ray Data's are: iterate, take or write it to run the model."""
    if devices is not None and not (num_gpus or resources):
        res: dict[str, Any] = {}
        default_concurrency = 1
    else:
        res, kind = actor_resources(num_gpus, resources)
        default_concurrency = actors_for(res, kind)
        if default_concurrency < 1 and concurrency is None:
            raise ValueError(f"the cluster has too few {kind} resources for one actor of {res}")
    if preserve_order:
        dataset.context.execution_options.preserve_order = True
    kwargs = dict(model=put_model(model), devices=devices, input_columns=input_columns,
                  output_columns=output_columns, session_kwargs=session_kwargs, warmup_shapes=warmup_shapes)
    if "compute" not in ray_kwargs:
        from ray.data import ActorPoolStrategy

        size = concurrency if concurrency is not None else default_concurrency
        ray_kwargs["compute"] = (ActorPoolStrategy(min_size=size[0], max_size=size[1]) if isinstance(size, tuple)
                                 else ActorPoolStrategy(size=size))
    elif concurrency is not None:
        raise ValueError("give concurrency= or compute=, not both")
    return dataset.map_batches(BatchPredictor, fn_constructor_kwargs=kwargs, batch_size=batch_size,
                               batch_format="numpy", zero_copy_batch=True, **{**res, **ray_kwargs})
