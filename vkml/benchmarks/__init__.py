"""`python -m vkml bench`: the benchmark suite and the profiler.

    python -m vkml bench [--quick] [--only NAME] [--device DEV] [--out DIR] ...   suite: see --help
    python -m vkml bench --profile MODEL [--runs N] [--gpu vulkan:N|none] [--input NAME=FILE.npy]

MODEL is an .onnx path, "digits" (the shipped model), or one of the suite's models (mnist,
resnet18, mobilenet_v2, conv_cnn, mlp, chain_add:N, ...; models.py builds them with onnx.helper).
The suite (suite.py) needs only vkml's own dependencies; the peers it compares with and its
charts are optional: `pip install 'vkml[bench]'` brings onnxruntime and matplotlib, and PyTorch
with torchvision (CUDA peers, torchvision's model structures) are installed apart. A peer that
does not import is recorded as missing, with the reason. The checkout's bench/ folder keeps the
standalone micro-benchmarks and the project's recorded results (bench/results/).
"""
from __future__ import annotations

import argparse
import os
from importlib import resources

import numpy as np


def _load_model(spec: str, inputs: list[str]):
    """(model path or bytes, feed, label)."""
    if spec == "digits":
        path = str(resources.files("vkml") / "data" / "digits_cnn.onnx")
        import vkml

        images = np.load(str(resources.files("vkml") / "data" / "digits_test.npz"))["images"]
        return path, {vkml.InferenceSession(path).get_inputs()[0].name: images}, "digits (shipped 8x8 CNN)"
    if os.path.exists(spec):
        import vkml
        from vkml.api.feeds import random_feed

        sess = vkml.InferenceSession(spec)
        feed = random_feed(sess, np.random.default_rng(0))
        for item in inputs:
            if "=" not in item:
                raise ValueError(f"--input must be NAME=FILE.npy, got {item!r}")
            k, f = item.split("=", 1)
            feed[k] = np.load(f, allow_pickle=False)
        return spec, feed, spec
    name, _, arg = spec.partition(":")
    from . import models
    if name == "tv" and arg:  # a torchvision architecture, exported at batch 1 (needs torch)
        bm, why = models.torchvision_model(arg, 1)
        if bm is None:
            raise ValueError(f"MODEL {spec!r}: {why}")
    elif name not in models.BUILDERS:
        raise ValueError(f"MODEL {spec!r} is neither a file nor one of: digits, tv:NAME (torchvision), "
                         + ", ".join(k + (":N" if k == "chain_add" else "") for k in models.BUILDERS))
    else:
        bm = models.BUILDERS[name](int(arg)) if arg else (models.chain_add(100) if name == "chain_add"
                                                          else models.BUILDERS[name]())
    shown = ", ".join(f"{k}={v}" for k, v in bm.meta.items() if not k.startswith("_") and k != "torch_module")
    return bm.bytes(), bm.feed, f"{bm.name} ({shown})"


def profile_main(argv: list[str]) -> int:
    from .profile import format_profile, profile

    ap = argparse.ArgumentParser(prog="vkml bench --profile", description="where a model's time goes")
    ap.add_argument("--profile", required=True, metavar="MODEL")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--gpu", default="auto", help="vulkan:N, 'auto' (first listed) or 'none'")
    ap.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy")
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args(argv)
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    model, feed, label = _load_model(args.profile, args.input)
    p = profile(model, feed, args.runs, None if args.gpu == "none" else args.gpu, label)
    print(format_profile(p, args.top))
    return 0


def main(argv: list[str]) -> int:
    if any(a == "--profile" or a.startswith("--profile=") for a in argv):
        return profile_main(argv)
    from . import suite

    ap = argparse.ArgumentParser(prog="vkml bench", description=__doc__.splitlines()[0])
    ap.add_argument("--profile", metavar="MODEL", help="profile MODEL instead (vkml bench --profile X --help)")
    args = suite.build_parser(ap).parse_args(argv)
    suite.run(args)
    return 0
