"""The ONNX node suite through GPU sessions (the first usable Vulkan device: lavapipe in CI):
every case that passes on the CPU must pass with the GPU taking what it can, and the number of
cases that run entirely on the GPU (some node recorded GPU work, no computed node took the
CPU) must not fall (tests/conformance/node_suite.py --device gives the same run with a
report, and says what "mixed" and "nogpu" mean)."""
from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import vkml.vulkan as vk
from vkml import backend

from .node_suite import load_cases, run_case
from .skips import HOST_SKIPS, SKIPS

# Cases entirely on the GPU. Counted from 2026-11-24 only where a node dispatched a pipeline
# (lavapipe: 714 of 1884; the count before, 786, took Shape-only, view-only and copy-only
# cases for GPU ones); 881 once elementwise ops took int8 ... uint64, BitShift, the bitwise
# ops, IsNaN/IsInf and the trigonometric and hyperbolic functions; 897 with Mean, Hardmax and
# LpNormalization; 923 once nodes done as buffer copies or fills (Concat, Split, Slice, Dropout,
# an identity Transpose) count as GPU work (placement rows' `gpu_commands`; views still do not);
# 964 with empty tensors and CastLike's target on the GPU; 1050 with NegativeLogLikelihoodLoss
# and SoftmaxCrossEntropyLoss; 1054 with CumSum and CumProd (the suite's float cases are float64);
# 1142 with Attention (88 of its 93 cases; the 5 bfloat16 ones stay on the CPU); 1304 with casts
# to and from float64, bfloat16, float8, float4e2m1, int4/uint4 and int2/uint2 (only float8e8m0's stay);
# 1338 with LSTM on the GPU and scalar Gathers of shapes folded while planning (2026-11-25);
# 1354 with RoiAlign (its 3 cases); 1356 with LRN (its 2 cases); 1359 with Split into equal parts
# before opset 18 (the same count on the H100); 1631 at the end of 2026-11-25's sessions; 1641 with
# NonMaxSuppression padded to its bound (vkml/compile/ragged.py, its 10 cases); 1647 with NonZero
# and Compress through the same padding (1 + 5 cases); 1653 with integer inputs that shape
# arithmetic turns into a kernel's host values made plan values (CenterCropPad's expansions);
# 1657 with the inputs If branches read and a Loop's trip count counted for plan values (AffineGrid's
# four expansions; Range's float expansions now fold entirely while planning), mixed 7 -> 1;
# 1662 with GPU kernels for ReverseSequence (3 cases) and MaxUnpool (2); 1667 with bfloat16
# Attention (its 5 cases); 1669 with STFT as Gather, Mul and DFT (compile/decompose.py, 2 cases);
# 1673 with Shrink, MeanVarianceNormalization and Binarizer written the same way (4 cases);
# 1676 with ReduceMax/ReduceMin of bools in int32 and MaxPool of uint8 in float32 (3); 1680 with
# float8e8m0 casts (4); 1679 since a Transpose that moves no element is a view
# (compile/layout.py): test_transpose_all_permutations_0, perm (0, 1, 2), dispatches nothing.
GPU_BAR = 1679
TALLY: dict[str, int] = {}  # printed by tests/conftest.py


def test_node_suite_on_the_gpu():
    usable = [d.name for d in vk.list_devices() if d.usable]
    if not usable:
        pytest.skip(f"no usable Vulkan device ({vk.unavailable_reason()})")
    skip = [re.compile(p) for p in SKIPS]
    host_only = [re.compile(p) for p in HOST_SKIPS]
    results = {}
    host_skipped = 0  # cases of HOST_SKIPS: on the GPU where they are not skipped
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        for case in load_cases("node"):
            if any(p.search(case.name + "_cpu") for p in skip):
                host_skipped += any(p.search(case.name + "_cpu") for p in host_only)
                continue
            results[case.name] = run_case(case, backend, usable[0])
    TALLY.update(device=usable[0], total=len(results),
                 gpu=sum(s == "gpu" for s, _ in results.values()),
                 mixed=sum(s == "mixed" for s, _ in results.values()),
                 nogpu=sum(s == "nogpu" for s, _ in results.values()))
    bad = {n: r for n, r in results.items() if r[0] not in ("gpu", "mixed", "nogpu")}
    assert not bad, f"{len(bad)} cases fail through a GPU session: {dict(list(bad.items())[:10])}"
    bar = GPU_BAR - host_skipped
    assert TALLY["gpu"] >= bar, f"only {TALLY['gpu']} cases ran entirely on the GPU (bar {bar}: {GPU_BAR} " \
                                f"less {host_skipped} skipped on this host only)"
