"""The runtimes a run compares: vkml on each of its devices, and whichever peers are present.

A runtime either loads a model into a Runner or says why it cannot (missing, unsupported); the
suite records that reason instead of a number. Nothing here imports a peer at module import.

A Runner has `host()`: NumPy in, NumPy out (what a user sees), and optionally `device()`: inputs
already resident on the device, outputs left there, synchronized (I/O binding and the like).
"""
from __future__ import annotations

import threading
from typing import Any, Callable

import numpy as np


class Unavailable(Exception):
    """The runtime cannot run this (missing library, unsupported device, op or dtype)."""

    def __init__(self, status: str, reason: str):
        super().__init__(f"{status}: {reason}")
        self.status, self.reason = status, reason


class Runner:
    def __init__(self, host: Callable[[], Any], device: Callable[[], Any] | None = None,
                 device_note: str = "", thread_safe: bool = True, batch: Callable[[int], Any] | None = None):
        self.host = host
        self.batch = batch  # batch(n): n host runs in one call (vkml's run_batch), where there is one
        self.device = device
        self.device_note = device_note  # why device() is None
        self.thread_safe = thread_safe


class Runtime:
    name = "?"
    device = "?"

    @property
    def label(self) -> str:
        return f"{self.name}/{self.device}"

    def version(self) -> str:
        return ""

    def load(self, bm) -> Runner:
        raise NotImplementedError


# ---------------------------------------------------------------------------------------- vkml
class Vkml(Runtime):
    name = "vkml"

    def __init__(self, device: str, precision: str = "fp32"):
        self.device = device
        self.precision = precision  # "fp16": InferenceSession(precision="fp16"), labelled vkml-fp16
        if precision != "fp32":
            self.name = f"vkml-{precision}"

    def version(self) -> str:
        import vkml
        return vkml.__version__

    def load(self, bm) -> Runner:
        import vkml

        try:
            extra = {} if self.precision == "fp32" else {"precision": self.precision}
            sess = vkml.InferenceSession(bm.bytes(), devices=[self.device], **extra)
        except vkml.UnsupportedOpsError as e:
            raise Unavailable("unsupported", str(e)) from None
        except ValueError as e:  # devices it cannot run sessions on yet, and the like
            raise Unavailable("unsupported", str(e)) from None
        feed = bm.feed
        host = lambda: sess.run(None, feed)  # noqa: E731
        dev, note = _vkml_device_runner(vkml, sess, feed, self.device)
        batch = (lambda n: sess.run_batch([feed] * n)) if hasattr(sess, "run_batch") else None
        return Runner(host, dev, note, batch=batch)


def _vkml_device_runner(vkml, sess, feed, device: str):
    """Device-resident runs: vkml.Tensor inputs on the device and outputs kept there
    (output_device), when this vkml has them (detected, not assumed)."""
    import inspect

    if device == "cpu":
        return None, "host device: same as host path"
    Tensor = getattr(vkml, "Tensor", None)
    if Tensor is None:
        return None, "vkml.Tensor not in this build"
    if "output_device" not in inspect.signature(sess.run).parameters:
        return None, "InferenceSession.run has no output_device in this build"
    try:
        resident = {k: Tensor.from_numpy(v, device=device) for k, v in feed.items()}
        outs = sess.run(None, resident, output_device=device)
        where = {getattr(o, "device", "host") for o in outs}
        if where != {device}:
            return None, f"outputs came back on {sorted(where)}, not {device}"
    except Exception as e:
        return None, f"device-resident run failed: {type(e).__name__}: {e}"
    # the run returns once the GPU is done (kept outputs are copied out of the run's slot)
    return (lambda: sess.run(None, resident, output_device=device)), ""


# --------------------------------------------------------------------------------- onnxruntime
class OnnxRuntime(Runtime):
    name = "onnxruntime"

    def __init__(self, provider: str = "CPUExecutionProvider", cpu_threads: int | None = None,
                 optimize: bool = True):
        self.provider = provider
        self.device = "cuda" if provider == "CUDAExecutionProvider" else "cpu"
        self.cpu_threads = cpu_threads
        self.optimize = optimize  # False: no graph rewrites (its NoopElimination drops x + 0)
        if not optimize:
            self.name = "onnxruntime-noopt"

    def version(self) -> str:
        import onnxruntime
        return onnxruntime.__version__

    def load(self, bm) -> Runner:
        import onnxruntime as ort

        so = ort.SessionOptions()
        if self.cpu_threads:
            so.intra_op_num_threads = self.cpu_threads
        so.log_severity_level = 3
        if not self.optimize:
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        try:
            sess = ort.InferenceSession(bm.bytes(), so, providers=[self.provider])
        except Exception as e:  # e.g. no kernel for an op/dtype on this provider
            raise Unavailable("unsupported", f"{type(e).__name__}: {str(e)[:300]}") from None
        if self.provider not in sess.get_providers():
            raise Unavailable("unsupported", f"{self.provider} not active (got {sess.get_providers()})")
        feed = bm.feed
        try:
            sess.run(None, feed)
        except Exception as e:
            raise Unavailable("unsupported", f"{type(e).__name__}: {str(e)[:300]}") from None
        host = lambda: sess.run(None, feed)  # noqa: E731
        return Runner(host, _ort_binding(ort, sess, feed, self.device))


def _ort_binding(ort, sess, feed, device: str):
    where, idx = ("cuda", 0) if device == "cuda" else ("cpu", 0)
    bind = sess.io_binding()
    keep = []
    for k, v in feed.items():
        ov = ort.OrtValue.ortvalue_from_numpy(v, where, idx)
        keep.append(ov)
        bind.bind_ortvalue_input(k, ov)
    for o in sess.get_outputs():
        bind.bind_output(o.name, where, idx)

    def run():
        sess.run_with_iobinding(bind)
        if device == "cuda":
            bind.synchronize_outputs()
        return keep

    return run


# --------------------------------------------------------------------------------------- torch
class Torch(Runtime):
    """PyTorch on CUDA: eager (`graph=False`) or the forward captured in a CUDA graph. float32
    means float32 (TF32 off) unless `tf32`: then the graph is captured with torch's own default
    for convolutions (cuDNN may use TF32) and TF32 matmuls, the fastest torch honestly is on
    float32 models (10 mantissa bits in the products, so not the same arithmetic as vkml's)."""

    def __init__(self, graph: bool = False, tf32: bool = False):
        if tf32 and not graph:
            raise ValueError("the TF32 peer is the CUDA-graph one")
        self.graph = graph
        self.tf32 = tf32
        self.name = ("torch-cudagraph-tf32" if tf32 else "torch-cudagraph") if graph else "torch-eager"
        self.device = "cuda"

    def version(self) -> str:
        import torch
        return torch.__version__

    def load(self, bm) -> Runner:
        import torch

        module = bm.meta.get("torch_module")
        if module is not None:
            module = module.to("cuda")
            fwd = lambda *xs: [module(*xs)]  # noqa: E731
        else:
            from .torch_onnx import TorchGraph

            try:
                fwd = TorchGraph(bm.proto, "cuda").forward
            except NotImplementedError as e:
                raise Unavailable("unsupported", str(e)) from None
        names = list(bm.feed)
        host_in = [bm.feed[k] for k in names]
        dev_in = [torch.from_numpy(np.ascontiguousarray(x)).to("cuda") for x in host_in]
        # float32 means float32 for every runtime (set again before each capture: the flags are
        # global, and a CUDA graph keeps the kernels chosen when it was captured)
        torch.backends.cuda.matmul.allow_tf32 = self.tf32
        torch.backends.cudnn.allow_tf32 = self.tf32
        with torch.inference_mode():
            fwd(*dev_in)
        torch.cuda.synchronize()
        if not self.graph:
            def host():
                with torch.inference_mode():
                    ins = [torch.from_numpy(x).to("cuda", non_blocking=False) for x in host_in]
                    return [o.cpu().numpy() for o in fwd(*ins)]

            def device():
                with torch.inference_mode():
                    outs = fwd(*dev_in)
                torch.cuda.synchronize()
                return outs

            return Runner(host, device)
        static_in = [x.clone() for x in dev_in]
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.inference_mode(), torch.cuda.stream(stream):
            for _ in range(3):
                fwd(*static_in)
        torch.cuda.current_stream().wait_stream(stream)
        g = torch.cuda.CUDAGraph()
        with torch.inference_mode():
            with torch.cuda.graph(g):
                static_out = fwd(*static_in)
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
        lock = threading.Lock()

        def host():
            with lock:  # one set of static buffers: replays must not overlap
                for s, x in zip(static_in, host_in):
                    s.copy_(torch.from_numpy(x))
                g.replay()
                return [o.cpu().numpy() for o in static_out]

        def device():
            g.replay()
            torch.cuda.synchronize()
            return static_out

        return Runner(host, device, thread_safe=False)


# ---------------------------------------------------------------------------------------- ncnn
class Ncnn(Runtime):
    name = "ncnn"
    device = "vulkan"

    def load(self, bm) -> Runner:
        raise Unavailable("unsupported", "ncnn imports, but this suite has no ONNX→ncnn conversion "
                                         "(pnnx/onnx2ncnn are not dependencies)")


# ---------------------------------------------------------------------------------- discovery
def discover(cpu_threads: int | None = None, only_devices: list[str] | None = None, fp16: bool = False
             ) -> tuple[list[Runtime], list[dict]]:
    """(runtimes that can run, [{runtime, status, reason}] for those that cannot at all); `fp16`
    adds vkml with precision="fp16" on each GPU (vkml-fp16/vulkan:N)."""
    runtimes: list[Runtime] = []
    missing: list[dict] = []

    def want(dev: str) -> bool:
        return not only_devices or any(dev == d or dev.startswith(d + ":") or d == dev.split(":")[0]
                                       for d in only_devices)

    import vkml

    for d in vkml.devices():
        if want(d.name):
            runtimes.append(Vkml(d.name))
            if fp16 and d.name != "cpu":
                runtimes.append(Vkml(d.name, "fp16"))
    try:
        import onnxruntime as ort
        provs = ort.get_available_providers()
        if want("cpu"):
            runtimes.append(OnnxRuntime("CPUExecutionProvider", cpu_threads))
        if "CUDAExecutionProvider" in provs and want("cuda"):
            runtimes.append(OnnxRuntime("CUDAExecutionProvider"))
        elif want("cuda"):
            missing.append({"runtime": "onnxruntime/cuda", "status": "missing",
                            "reason": f"CUDAExecutionProvider not installed (providers: {provs})"})
    except Exception as e:
        missing.append({"runtime": "onnxruntime", "status": "missing", "reason": f"{type(e).__name__}: {e}"})
    try:
        import torch
        if not torch.cuda.is_available():
            raise RuntimeError(f"torch {torch.__version__} has no usable CUDA device")
        if want("cuda"):
            runtimes += [Torch(graph=False), Torch(graph=True), Torch(graph=True, tf32=True)]
    except Exception as e:
        for n in ("torch-eager/cuda", "torch-cudagraph/cuda", "torch-cudagraph-tf32/cuda"):
            missing.append({"runtime": n, "status": "missing", "reason": f"{type(e).__name__}: {e}"})
    try:
        import ncnn  # noqa: F401
        runtimes.append(Ncnn())
    except Exception as e:
        missing.append({"runtime": "ncnn/vulkan", "status": "missing", "reason": f"{type(e).__name__}: {e}"})
    return runtimes, missing
