"""InferenceSession: load → graph → (placement) → plan → run, shaped like onnxruntime's."""
from __future__ import annotations

import functools
import importlib
import os
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from .. import config
from ..compile import fusion
from ..ir import dtypes
from ..ir.graph import Dim, TensorDesc
from ..ir.onnx_loader import Model, read_model
from ..ops.bind import bind
from ..runtime import blas
from ..runtime.batch import RunPool
from ..runtime.devices import cpu_only, resolve_devices, vulkan_device
from ..runtime.devices import devices as all_devices
from ..runtime.executor import ParallelPlan, parallel_width, run_plan
from ..runtime.gate import RunGate
from ..runtime.plan import Plan, Runtime
from ..runtime.tensor import Tensor
from .feeds import check_output_device, check_value, signature
from .options import (CPU_EP, ExecutionMode, GraphOptimizationLevel, ModelMetadata, SessionOptions,
                      devices_from_providers, provider_name)


@dataclass(frozen=True)
class NodeArg:
    """An input or output as onnxruntime describes it."""

    name: str
    shape: list[Dim] | None
    type: str

    @classmethod
    def of(cls, name: str, desc: TensorDesc) -> "NodeArg":
        """The NodeArg of graph value `name` from its TensorDesc (a sequence's type as "sequence(tensor(float))")."""
        if desc.kind == "tensor":
            return cls(name, None if desc.shape is None else list(desc.shape), dtypes.type_name(desc.dtype))
        inner = NodeArg.of(name, desc.elem) if desc.elem is not None else None
        return cls(name, None, f"{desc.kind}({inner.type if inner else '?'})")


class _DeviceOpener:
    """resolve_devices(names), then every GPU among them opened, on a thread of its own. The
    names are known before the devices are open (names()), so that the session plans while the
    driver creates them (vkml/vulkan/facts.py); result() waits for the opening itself."""

    def __init__(self, names):
        self._names = names
        self._devices = self._error = None
        self._resolved = threading.Event()
        if cpu_only(names):
            self._thread = None
            self._open()  # nothing slow: no Vulkan for a CPU session
        else:
            self._thread = threading.Thread(target=self._open, name="vkml-open-devices", daemon=True)
            self._thread.start()

    def _open(self) -> None:
        try:
            self._devices = resolve_devices(self._names)
            self._resolved.set()
            for d in self._devices:
                if d != "cpu":
                    vulkan_device(d)
        except BaseException as e:  # handed to the caller by names() or result()
            self._error = e
        finally:
            self._resolved.set()

    @property
    def opening(self) -> bool:
        """Whether GPUs are being opened (on the opener's thread)."""
        return self._thread is not None

    def names(self) -> list[str]:
        """The devices, once resolved (the GPUs may still be opening)."""
        self._resolved.wait()
        if self._devices is None:
            return self.result()  # (resolving failed: its error)
        return self._devices

    def join(self) -> None:
        """Wait for the opening to end, however it ends."""
        if self._thread is not None:
            self._thread.join()

    def result(self) -> list[str]:
        self.join()
        if self._error is not None:
            raise self._error
        return self._devices


class InferenceSession:
    """Runs one ONNX model. ``run`` may be called from many threads at once."""

    def __init__(self, model: str | bytes | os.PathLike | Any, devices: Sequence[str] | SessionOptions | None = None,
                 providers: Sequence[Any] | None = None, provider_options: Sequence[Mapping[str, Any]] | None = None,
                 *, sess_options: SessionOptions | None = None, executor: str = "auto",
                 memory_caps: Mapping[str, int] | None = None, placement: Mapping[str, str] | None = None,
                 max_slots: int | None = None, warmup: bool | None = None, precision: str = "fp32"):
        """devices: in order of preference; None means every real GPU, then the CPU (a CPU-type
        Vulkan device such as lavapipe is used only when named). The CPU is always last and
        runs what no GPU can.
        onnxruntime's arguments work too (vkml/api/options.py): `providers` (with
        `provider_options`) instead of devices, and `sess_options` (also as the second
        positional argument, as onnxruntime takes it).
        executor: "parallel" runs independent branches at once on the scheduler's pool,
        "sequential" runs steps in order on the calling thread, "auto" picks parallel when the
        graph has independent branches with enough work in them to pay for the hand-offs.
        memory_caps: {"vulkan:0": bytes} lowers a GPU's budget for placement (one run's
        activations and constants); nodes that do not fit go to the next device.
        placement: {"node name": "cpu"} forces nodes onto devices (for tests and tuning).
        max_slots: runs in flight at once per input signature on the GPUs (each with its own
        activation memory, made when concurrent runs need it; default the host's cores, at least
        8, fewer when GPU memory runs out); more concurrent runs wait for a slot.
        warmup: prepare the GPU plan now (placement, recording, every pipeline compiled, in
        parallel) rather than at the first run. None (the default) does it when a GPU takes part
        and every input's shape is fixed; True insists (ValueError for symbolic shapes: call
        warmup(input_shapes) instead); False leaves it to the first run.
        precision: "fp32" (the default) computes as the model says; "fp16" runs a float32 model's
        convolutions, GEMMs, elementwise ops, pools and LayerNormalization in float16 on the GPUs
        (inputs and outputs stay float32, Softmax and mask arithmetic too; vkml/compile/half.py
        says which ops and how far results move)."""
        if isinstance(devices, SessionOptions):
            if sess_options is not None:
                raise TypeError("sess_options given twice (positionally and by name)")
            devices, sess_options = None, devices
        # What pickling hands to the receiving process (__reduce__): the model as given (a
        # path stays a path; bytes and ModelProtos travel as bytes) and the options. (The
        # object itself is kept, not a copy: the loader uses bytes in place anyway.)
        self._args = (os.path.abspath(os.fspath(model)) if isinstance(model, (str, os.PathLike)) else model,
                      dict(devices=None if devices is None else list(devices),
                           providers=None if providers is None else list(providers),
                           provider_options=None if provider_options is None else list(provider_options),
                           sess_options=sess_options, executor=executor,
                           memory_caps=None if memory_caps is None else dict(memory_caps),
                           placement=None if placement is None else dict(placement),
                           max_slots=max_slots, warmup=warmup, precision=precision))
        if precision not in ("fp32", "fp16"):
            raise ValueError(f"precision must be 'fp32' or 'fp16', not {precision!r}")
        self.precision = precision
        so = sess_options if sess_options is not None else SessionOptions()
        if providers is not None:
            if devices is not None:
                raise ValueError("give devices= or providers=, not both")
            devices = devices_from_providers(providers, provider_options,
                                             [d.name for d in all_devices() if d.name != "cpu"])
        elif provider_options is not None:
            raise ValueError("provider_options without providers")
        if executor == "auto" and so.execution_mode is not None:
            executor = "parallel" if so.execution_mode == ExecutionMode.ORT_PARALLEL else "sequential"
        if executor not in ("auto", "parallel", "sequential"):
            raise ValueError(f"executor must be 'auto', 'parallel' or 'sequential', not {executor!r}")
        fuse = config.fuse() and so.graph_optimization_level != GraphOptimizationLevel.ORT_DISABLE_ALL
        self._profile: list[dict] | None = [] if so.enable_profiling else None
        self._profile_prefix = so.profile_file_prefix
        self._profile_t0 = time.perf_counter()
        # Opening the GPUs (the Vulkan instance, each device, its pipeline cache) overlaps with
        # reading the model: the driver calls run without the GIL. A bad device name is still
        # reported before a bad model.
        opener = _DeviceOpener(devices)
        try:
            # Read (ir: parse, validate; no operator known), then bind each node's operator and
            # infer the types through them (ops).
            self.model: Model = bind(read_model(model))
            if opener.opening:
                # Imported now (below, a GPU session uses them) so that their imports also
                # overlap with the opening.
                for module in ("..compile.pipeline", "..runtime.gpurun"):
                    importlib.import_module(module, __package__)
        except BaseException:
            opener.result()
            raise
        try:
            self.devices = opener.names()
            self._prepare(memory_caps, placement, max_slots, warmup, executor, so, fuse)
        except BaseException:
            opener.join()
            raise
        opener.result()  # (an opening's error that planning did not meet)

    def _prepare(self, memory_caps, placement, max_slots, warmup, executor, so, fuse) -> None:
        """The session's runner: the GPU runner (warmed up where the shapes are fixed: planned
        while the devices open, recorded once they are), or the CPU plan."""
        g = self.model.graph
        self._runtime = Runtime(self.model.weights)
        self._required = [n for n in g.inputs if n not in self.model.overridable]
        self._inputs = [NodeArg.of(n, g.values[n]) for n in self._required]
        self._overridable = [NodeArg.of(n, g.values[n]) for n in g.inputs if n in self.model.overridable]
        self._outputs = [NodeArg.of(n, g.values.get(n, TensorDesc(None, None))) for n in g.outputs]
        self._out_index = {n: i for i, n in enumerate(g.outputs)}
        caps, forced = _check_options(self.devices, g, memory_caps, placement)
        self._gpu = None
        self._pool: RunPool | None = None  # run_async / run_batch threads, started on first use
        self._accepted: set = set()  # feed signatures (api.feeds.signature) already checked once
        if self.devices != ["cpu"]:
            from ..compile.pipeline import compile_signature
            from ..runtime.gpurun import GpuRunner

            slots = _DEFAULT_SLOTS if max_slots is None else int(max_slots)
            if slots < 1:
                raise ValueError(f"max_slots must be at least 1, not {max_slots!r}")
            # The runtime compiles each new input signature through this (vkml/compile/pipeline.py),
            # the model and the session's choices bound: it imports nothing of the compile layer.
            # compile_graph(graph) binds another graph the same way: subgraphs that control flow
            # calls at run time get plans of their own (vkml/runtime/subgraphs.py); forced
            # placements name the model's nodes, so only the model's compile takes them.
            compile_graph = functools.partial(_compile_for, compile_signature, self.model.weights,
                                              devices=tuple(self.devices), fuse=fuse, precision=self.precision)
            compile = compile_graph(g, forced=dict(forced))
            self._gpu = GpuRunner(self.model, self._runtime, self.devices, caps, executor, slots, compile,
                                  compile_graph)
            from .. import vulkan

            self._vk = vulkan  # (its FORK_GENERATION tells a forked child, see _run)
            self._fork_gen = vulkan.FORK_GENERATION
            self._pid = os.getpid()
            self._parallel = None
            self._native = None  # (native programs are the CPU plan's)
            if warmup or (warmup is None and self._static_shapes() is not None):
                self.warmup()
        else:
            # GPU plans fuse per input signature (vkml/compile/pipeline.py); the CPU plan fuses once here.
            fused = fusion.fuse_graph(g, self.model.weights, frozenset(forced)) if fuse else g
            self._plan = self._runtime.plan(fused)
            n = int(so.intra_op_num_threads or 0)
            # intra_op_num_threads: BLAS's threads while this session's runs are in flight
            self._blas = blas.Limiter(blas.find_blas(), n) if n > 0 else blas.limiter()
            # Big convolutions and weight MatMuls split over vkml's intra-op threads
            # (ops/_parallel.py); such a plan runs its steps in order, each using the cores its run
            # may have.
            self._blas_split = self._blas.split and blas.plan_splits(self._plan)
            self._parallel = (None if self._blas_split and executor == "auto"
                              else _choose_executor(self._plan, executor))
            # How many threads of one run call BLAS at once: its share of BLAS's threads
            # (vkml/runtime/blas.py) shrinks with it.
            self._blas_width = _blas_width(self._parallel)
            self._blas_big = blas.plan_is_big(self._plan)
            # Runs of this session that execute at once (VKML_CPU_RUNS); the rest wait without the GIL.
            self._cpu_runs = _cpu_runs(self._blas_big)
            self._gate = RunGate(self._cpu_runs) if self._cpu_runs else None
            # Each input signature whose steps lower runs in C from its first run
            # (runtime/cpuprog.py): one GIL release per run, so its runs need no gate.
            self._native = _native_programs(self._plan)
            self._native_inputs = [n for n, _ in self._plan.input_slots]

    # ------------------------------------------------------------ description
    def get_inputs(self) -> list[NodeArg]:
        """The inputs a run must feed (initializers that may be overridden are not among them)."""
        return list(self._inputs)

    def get_outputs(self) -> list[NodeArg]:
        """The model's outputs, in the order run(None, ...) returns them."""
        return list(self._outputs)

    def get_overridable_initializers(self) -> list[NodeArg]:
        """Initializers that are also graph inputs: a feed may replace their values."""
        return list(self._overridable)

    def get_providers(self) -> list[str]:
        """onnxruntime's spelling of the devices (self.devices has vkml's names)."""
        return list(dict.fromkeys(provider_name(d) for d in self.devices))

    def get_provider_options(self) -> dict[str, dict[str, str]]:
        """onnxruntime's per-provider options of this session: device_id for the Vulkan devices."""
        opts: dict[str, dict[str, str]] = {}
        for d in self.devices:
            if d == "cpu":
                opts.setdefault(CPU_EP, {})
            else:
                opts.setdefault(provider_name(d), {"device_id": d.split(":")[1]})
        return opts

    def get_modelmeta(self) -> ModelMetadata:
        """The model's producer, graph name, domain, descriptions, version and metadata_props."""
        m = self.model.meta
        return ModelMetadata(self.model.producer, m.get("graph_name", ""), m.get("domain", ""),
                             m.get("description", ""), m.get("graph_description", ""), m.get("version", 0),
                             dict(m.get("custom_metadata_map", {})))

    def end_profiling(self) -> str:
        """With SessionOptions.enable_profiling: write the runs since the session began (or the
        last end_profiling) as a Chrome-trace JSON (chrome://tracing, Perfetto), as onnxruntime's
        end_profiling does, and return its path; "" when profiling is off."""
        if self._profile is None:
            return ""
        import json

        events, self._profile = self._profile, []
        path = f"{self._profile_prefix}_{time.strftime('%Y-%m-%d_%H-%M-%S')}.json"
        with open(path, "w") as f:
            json.dump(events, f)
        return path

    # ------------------------------------------------------------ preparing
    def _static_shapes(self) -> dict[str, tuple[int, ...]] | None:
        """Every required input's shape when all are fixed (and no input's value steers the
        plan), else None."""
        g = self.model.graph
        if self._gpu is None or self._gpu.value_inputs:
            return None
        shapes = {}
        for name in self._required:
            d = g.values.get(name)
            if d is None or d.kind != "tensor" or d.dtype is None or d.shape is None \
                    or not all(isinstance(x, int) for x in d.shape):
                return None
            shapes[name] = tuple(d.shape)
        return shapes

    def warmup(self, input_shapes: Mapping[str, Sequence[int]] | None = None) -> list[dict]:
        """Plan the GPU work for these input shapes (default: the model's fixed shapes) and
        compile every pipeline it needs, on threads, so that the first run() for them is as
        fast as any. Returns the pipelines: [{"shader", "spec", "compile_s"}]. A session on the
        CPU alone has nothing to prepare and returns []."""
        if self._gpu is None:
            return []
        if input_shapes is None:
            shapes = self._static_shapes()
            if shapes is None:
                raise ValueError("the model's inputs have symbolic shapes (or shape-like inputs fed at run "
                                 "time): give warmup(input_shapes={name: shape})")
        else:
            shapes = dict(input_shapes)
        descs = self._descs(shapes)
        from ..runtime.gpurun import pipeline_info

        return [pipeline_info(p) for p in self._gpu.warmup(descs)]

    def pipelines(self) -> list[dict]:
        """The GPU pipelines of the most recent plan (run or warmup): [{"shader", "spec",
        "compile_s"}]; compile_s is what the driver took to compile it in this process."""
        if self._gpu is None or self._gpu.last is None:
            return []
        from ..runtime.gpurun import pipeline_info

        return [pipeline_info(p) for p in self._gpu.last.pipelines]

    def _descs(self, input_shapes: Mapping[str, Sequence[int]]) -> dict[str, TensorDesc]:
        g = self.model.graph
        descs = {}
        for name, shape in input_shapes.items():
            d = g.values.get(name)
            if name not in g.inputs or d is None or d.dtype is None:
                raise ValueError(f"input_shapes: {name!r} is not a tensor input of the model")
            descs[name] = TensorDesc(d.dtype, tuple(int(x) for x in shape))
        missing = [n for n in self._required if n not in descs]
        if missing:
            raise ValueError(f"input_shapes: missing {missing}")
        return descs

    # ------------------------------------------------------------ running
    def run(self, output_names: Sequence[str] | None, input_feed: Mapping[str, Any],
            run_options: Any = None, *, output_device: str | None = None) -> list[Any]:
        """Outputs named (all when None), in that order. The rule: NumPy arrays when
        `output_device` is None; vkml.Tensors on that device whenever it is given, "cpu"
        included (on a GPU they stay there, ready to feed another run).
        Inputs may be arrays or vkml.Tensors. run_options may be {"output_device": ...}, or a
        RunOptions (vkml's or onnxruntime's): terminate=True refuses the run, logid names it in
        the profile."""
        if run_options is None and output_device is None and self._profile is None:
            gpu = self._gpu
            cut = gpu.shortcut if gpu is not None else None
            if cut is not None and type(input_feed) is dict:
                # The feeds of the latest run again: all of it in C (runtime/_fastrun.pyx
                # Shortcut), which gives None for anything else and the run goes on below.
                outs = cut.run(output_names, input_feed)
                if outs is not None:
                    return outs
            native = self._native
            if native is not None and (output_names is None or type(output_names) is list):
                # A CPU signature with a program: it was checked when the program was made
                # (runtime/cpuprog.py), so straight to it; anything else goes on below.
                prog = native.get(signature(input_feed))
                index = self._out_index
                if prog is not None and (output_names is None or all(n in index for n in output_names)):
                    outs = self._run_native(prog, input_feed)
                    return outs if output_names is None else [outs[index[n]] for n in output_names]
        if output_names is None:
            picks = range(len(self._out_index))
        else:
            if isinstance(output_names, str):
                raise TypeError("output_names must be a list of names, not a string")
            unknown = [n for n in output_names if n not in self._out_index]
            if unknown:
                raise ValueError(f"unknown output name(s) {unknown}; the model's outputs are {list(self._out_index)}")
            picks = [self._out_index[n] for n in output_names]
        tag = ""
        if run_options is None:  # (the common case first: isinstance against Mapping costs ~1.5 us)
            pass
        elif output_device is None and isinstance(run_options, Mapping):
            output_device = run_options.get("output_device")
        elif not isinstance(run_options, Mapping):
            if getattr(run_options, "terminate", False):  # onnxruntime.RunOptions or vkml's
                raise RuntimeError("run terminated: its RunOptions.terminate is set")
            tag = str(getattr(run_options, "logid", "") or "")
        if self._profile is not None:
            from ..runtime.gpurun import RUN_INFO

            RUN_INFO.free_ns = None
            t0 = time.perf_counter()
            try:
                return self._run(picks, input_feed, output_device)
            finally:
                t1 = time.perf_counter()
                args = {"logid": tag}
                free = RUN_INFO.free_ns
                if free is not None:  # the native GPU path: the time without the GIL, and the rest
                    args["nogil_us"] = round(free / 1e3, 1)  # (holding it or waiting for it)
                    args["gil_us"] = round((t1 - t0) * 1e6 - free / 1e3, 1)
                self._profile.append({"cat": "Session", "name": "model_run", "ph": "X", "pid": os.getpid(),
                                      "tid": threading.get_ident(), "ts": (t0 - self._profile_t0) * 1e6,
                                      "dur": (t1 - t0) * 1e6, "args": args})
        return self._run(picks, input_feed, output_device)

    def io_binding(self) -> Any:
        """onnxruntime's I/O binding: a vkml.IOBinding of this session (vkml/api/io_binding.py),
        to bind inputs (vkml.Tensors stay on their device) and outputs to devices, then run
        with run_with_iobinding()."""
        from .io_binding import IOBinding

        return IOBinding(self)

    def run_with_iobinding(self, iobinding: Any, run_options: Any = None) -> None:
        """Run with the inputs and outputs bound in `iobinding` (made by this session's
        io_binding()); read the outputs with iobinding.get_outputs() (vkml.Tensors on the bound
        devices) or copy_outputs_to_cpu()."""
        from .io_binding import IOBinding

        if not isinstance(iobinding, IOBinding) or iobinding._session is not self:
            raise ValueError("run_with_iobinding takes an IOBinding made by this session's io_binding()")
        iobinding._run(run_options)

    def _run(self, picks: Sequence[int], input_feed: Mapping[str, Any], output_device: str | None) -> list[Any]:
        if output_device == "cpu":  # Tensors on the CPU: the host results, wrapped
            outs = self._run(picks, input_feed, None)
            return [Tensor(o, "cpu") if isinstance(o, np.ndarray) else o for o in outs]
        if output_device is not None:
            check_output_device(output_device)
        sig = signature(input_feed)
        if sig is not None and sig in self._accepted:
            feeds = input_feed  # the same names, dtypes and shapes passed the checks before
        else:
            feeds = self._check_feed(input_feed)
            if sig is not None:
                if len(self._accepted) >= 64:
                    self._accepted.clear()
                self._accepted.add(sig)
        if self._gpu is not None:
            if self._fork_gen != self._vk.FORK_GENERATION:
                raise RuntimeError(
                    f"this session's GPU devices were opened in process {self._pid} before this "
                    f"process was forked from it: GPU state does not survive fork(). Make the session in "
                    f"this process, or start workers with multiprocessing's 'spawn' or 'forkserver' "
                    f"method (a CPU-only session works in a forked child)")
            outs = self._gpu.run(feeds, output_device, sig)
        else:
            key = sig
            if any(isinstance(v, Tensor) for v in feeds.values()):
                feeds = {k: v._host() if isinstance(v, Tensor) else v for k, v in feeds.items()}
                key = None
            lim, width, big, split, gate = self._blas, self._blas_width, self._blas_big, self._blas_split, self._gate
            native = self._native
            if native is not None and key is None:  # (the checked feeds: C-contiguous host arrays)
                key = signature(feeds)
            prog = native.get(key) if native is not None and key is not None else None
            if prog is not None:
                outs = self._run_native(prog, feeds)
            else:
                first = native is not None and key is not None and not native.known(key)
                if gate is not None:
                    gate.acquire()
                try:
                    lim.enter(width, big, split)
                    try:
                        if first:
                            outs, seen = native.trace(feeds)  # run_plan, noting shapes for the program
                        else:
                            outs = self._parallel.run(feeds) if self._parallel else run_plan(self._plan, feeds)
                    finally:
                        lim.exit(width, big, split)
                finally:
                    if gate is not None:
                        gate.release()
                if first:
                    outs = native.make(key, feeds, outs, seen, self._run_native)
            if output_device is not None:
                outs = [Tensor.from_numpy(o, output_device) if isinstance(o, np.ndarray) else o for o in outs]
        return [outs[i] for i in picks]

    def _run_native(self, prog: Any, feeds: Mapping[str, Any]) -> list[Any]:
        """A native CPU program's run (runtime/cpuprog.py); BLAS at one thread meanwhile (the
        program splits its own work)."""
        lim = self._blas
        lim.enter(1, False, False)
        try:
            return prog.run([feeds[n] for n in self._native_inputs])
        finally:
            lim.exit(1, False, False)

    def __reduce__(self):
        """A session pickles as its model and options; the receiving process builds a new
        session from them (opening its own devices, planning again). A model given as a path
        pickles as that path, which must exist where it is unpickled."""
        model, kwargs = self._args
        return (_rebuild, (_portable_model(model), kwargs))

    def _run_pool(self) -> RunPool:
        if self._pool is None:
            # a CPU session's runs beyond its gate would only wait for it
            if self._gpu is not None:
                n = _GPU_RUN_THREADS
            elif self._blas_split:  # runs that split their convolutions share the cores well
                n = max(_RUN_THREADS, min(_SPLIT_RUN_THREADS, self._blas.cores // 2))
            else:
                n = _RUN_THREADS if not self._cpu_runs else min(_RUN_THREADS, self._cpu_runs)
            self._pool = RunPool(n)
        return self._pool

    def run_async(self, output_names: Sequence[str] | None, input_feed: Mapping[str, Any],
                  run_options: Any = None, *, output_device: str | None = None) -> Future:
        """run() on the session's own threads: a concurrent.futures.Future of its outputs.
        Futures of one session run four at a time on a GPU, two on the CPU, up to eight where
        the CPU plan splits its convolutions over the cores (what pays today, see _RUN_THREADS);
        a bad feed is the Future's exception, as run() would raise it."""
        return self._run_pool().submit(self.run, output_names, input_feed, run_options, output_device=output_device)

    def run_batch(self, input_feeds: Sequence[Mapping[str, Any]], output_names: Sequence[str] | None = None,
                  run_options: Any = None, *, output_device: str | None = None) -> list[list[Any]]:
        """run() for each feed of `input_feeds`, concurrently on the session's threads; the
        outputs in the feeds' order. If a run fails, the runs not started yet are dropped and
        the first failure is raised, its note naming the feed's position."""
        if isinstance(input_feeds, Mapping) or not isinstance(input_feeds, Sequence):
            raise TypeError("input_feeds must be a list of feeds (dicts of name -> array), "
                            f"not {type(input_feeds).__name__}")
        if not input_feeds:
            return []
        return self._run_pool().map_ordered(
            lambda feed: self.run(output_names, feed, run_options, output_device=output_device),
            list(input_feeds), "InferenceSession.run_batch")

    def dynamic_batcher(self, max_batch_size: int = 32, max_delay_ms: float = 0.0,
                        max_in_flight: int = 2) -> Any:
        """A vkml.DynamicBatcher over this session: concurrent requests merged along the batch
        axis into runs of up to `max_batch_size` rows, the oldest waiting at most
        `max_delay_ms` (vkml/api/batching.py)."""
        from .batching import DynamicBatcher

        return DynamicBatcher(self, max_batch_size, max_delay_ms, max_in_flight)

    def placement(self, input_shapes: Mapping[str, Sequence[int]] | None = None) -> list[dict]:
        """Per node: {"node", "op", "device", "reason"}, for the most recent run's input shapes
        or for `input_shapes` ({input name: shape}; dtypes from the model)."""
        g = self.model.graph
        if self._gpu is None:
            return [{"node": n.name, "op": n.op_type, "device": "cpu", "reason": "the session runs on the CPU only"}
                    for n in g.nodes]
        if input_shapes is None:
            if self._gpu.last is None:
                raise ValueError("no run yet: give input_shapes={name: shape} to see the placement")
            return [dict(r) for r in self._gpu.last.report]
        return [dict(r) for r in self._gpu.plan_for(self._descs(input_shapes), None).report]

    def _check_feed(self, feed: Mapping[str, Any]) -> dict[str, Any]:
        if not isinstance(feed, Mapping):
            raise TypeError(f"input_feed must be a dict of name → array, not {type(feed).__name__}")
        g = self.model.graph
        allowed = set(g.inputs)
        extra = [n for n in feed if n not in allowed]
        if extra:
            raise ValueError(f"unknown input name(s) {extra}; the model's inputs are {self._required}"
                             + (f" (overridable initializers: {sorted(self.model.overridable)})"
                                if self.model.overridable else ""))
        missing = [n for n in self._required if n not in feed]
        if missing:
            raise ValueError(f"missing input(s) {missing}; the model needs {self._required}")
        symbols: dict[str, tuple[int, str]] = {}
        out: dict[str, Any] = {}
        for name, value in feed.items():
            out[name] = check_value(name, value, g.values.get(name), symbols)
        return out


def _compile_for(compile_signature, weights, graph, **bound):
    """compile_signature bound to `graph` (the model's, or a subgraph made a graph of its own),
    the weights and the session's choices."""
    return functools.partial(compile_signature, graph, weights, **bound)


# GPU run slots per input signature, made as concurrent runs need them (a slot that does not
# fit in GPU memory caps the pool at the ones there are): two per device lane by default.
def _portable_model(model: Any) -> Any:
    """The model as __reduce__ carries it: a path as an absolute path, anything else as bytes."""
    if isinstance(model, (str, os.PathLike)):
        return os.path.abspath(os.fspath(model))
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model)
    serialize = getattr(model, "SerializeToString", None)
    return serialize() if serialize is not None else model


def _rebuild(model: Any, kwargs: dict) -> "InferenceSession":
    return InferenceSession(model, **kwargs)


# A slot per core, at least 8: runs beyond the slots wait for one, and on the H200 (16 cores, mnist,
# bench/results/checks/h200-2026-12-01-threads-{shortcut-slots,slotgate,final}.jsonl) 16 threads
# made 46-52k runs/s with 16 slots against 25-29k with 8. Slots are made only as runs need them.
_DEFAULT_SLOTS = max(8, os.cpu_count() or 1)
# run_async/run_batch threads per session. Measured on the H100 (2026-11-23, issue #14,
# bench/results/h100-2026-11-23-threaded-busy.md), one session shared by N threads, runs/s at
# 1/2/4/8 threads: mnist on the GPU 14.0k, 22.2k, 25.8k (GPU busy 95%), 19.4k; resnet18 1466,
# 2333, 3225, 3168. A CPU session gains nothing past 2 (and its gate may allow fewer).
_RUN_THREADS = 2
_GPU_RUN_THREADS = 4
# CPU plans whose convolutions split over the intra-op threads (VKML_CPU_SPLIT): on the H200
# host's 16 cores resnet18 made 35 / 67 / 101 / 141 / 184 runs/s from 1 / 2 / 4 / 8 / 16 threads
# (bench/results/h200-2026-12-02-cpu-split-threaded.md): half the cores, at most 8.
_SPLIT_RUN_THREADS = 8

_PARALLEL_MIN_ELEMENTS = 1 << 15  # mean output size per step that pays for a pool hand-off


def _choose_executor(plan: Plan, executor: str) -> ParallelPlan | None:
    if executor == "sequential" or not plan.steps:
        return None
    try:
        from ..runtime import _sched
    except ImportError:
        if executor == "parallel":
            raise RuntimeError("the scheduler extension (vkml.runtime._sched) is not built") from None
        return None
    if executor == "auto":
        if _sched.pool_size() < 2 or parallel_width(plan) < 2:
            return None
        sizes = [plan.graph.values.get(o) for st in plan.steps for o in st.node.outputs if o]
        elements = sum((int(np.prod(d.shape)) if d is not None and d.static else _PARALLEL_MIN_ELEMENTS)
                       for d in sizes)
        if elements / len(plan.steps) < _PARALLEL_MIN_ELEMENTS:
            return None
    return ParallelPlan(plan)


def _cpu_runs(big: bool) -> int | None:
    """How many runs of a CPU session may execute at once (None: any number), by VKML_CPU_RUNS.
    "auto": one for a plan of small GEMMs only. Such a run is Python under the GIL between short
    NumPy calls; when two interleave, every NumPy call that drops the GIL hands it to the other
    thread and the first waits to get it back (the mnist model without the gate: on the 2-core VM
    2722 runs/s on one thread, 1460 on two in one measurement, p99 96 ms at sixteen; on the H100's
    16 cores 3177 on one, 1262 on eight). Waiting at the gate costs one futex wake per run instead
    of a GIL hand-off per NumPy call (bench/cpu_scaling.py)."""
    policy = config.cpu_runs()
    if policy == "auto":
        return None if big else 1
    return policy


def _native_programs(plan: Plan):
    """The session's native programs (runtime/cpuprog.Programs, one per input signature), or
    None: under VKML_CPU_NATIVE, where NumPy's BLAS gives vkml its cblas_sgemm."""
    if not config.cpu_native() or not plan.steps:
        return None
    from ..runtime import cpuprog

    found = blas.find_blas()
    if cpuprog._cpuprog is None or found is None or found.gemm is None:
        return None
    return cpuprog.Programs(plan, (found.gemm[0], found.gemm[2]))


def _blas_width(parallel: ParallelPlan | None) -> int:
    """1 for a run on the caller's thread; for the scheduler's pool, the steps it can run at once."""
    if parallel is None:
        return 1
    from ..runtime import _sched

    return max(1, min(_sched.pool_size(), parallel_width(parallel.plan)))


def _check_options(devices: list[str], graph, caps, forced) -> tuple[dict, dict]:
    caps = dict(caps or {})
    for dev, n in caps.items():
        if dev not in devices or dev == "cpu":
            raise ValueError(f"memory_caps names {dev!r}, which is not a GPU of this session ({devices})")
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"memory_caps[{dev!r}] must be a number of bytes, not {n!r}")
    forced = dict(forced or {})
    names = {n.name for n in graph.nodes}
    stray = [n for n in forced if n not in names]
    if stray:
        raise ValueError(f"placement names unknown node(s): {stray}")
    bad = {n: d for n, d in forced.items() if d not in devices}
    if bad:
        raise ValueError(f"placement names device(s) this session does not use: {bad}; devices: {devices}")
    return caps, forced
