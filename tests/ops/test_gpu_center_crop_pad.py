"""GPU CenterCropPad (vkml/kernels/center_crop_pad.py: a constant Pad of zeros with negative pads
for the crops, on shaders/pad.comp) against vkml's CPU operator over hypothesis shapes (ranks 0
to 5), target sizes (crops, pads, odd and even differences, 0), axes (none, subsets, negative)
and every dtype a device tensor holds; the shape as an initializer or a graph input. Bitwise:
it moves bits."""
from __future__ import annotations

import os
import sys

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
from _gen import seeds  # noqa: E402
from _oracle import device_of, gpu_and_cpu, make_model  # noqa: E402

from vkml.kernels import TensorSpec, Unsupported, get_kernel  # noqa: E402

EXAMPLES = int(os.environ.get("VKML_TEST_EXAMPLES", "10"))
HYP = settings(max_examples=4 * EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
DTYPES = [np.dtype(t) for t in (np.float32, np.float16, np.float64, np.int32, np.int64, np.int8, np.int16,
                                np.uint8, np.uint16, np.uint32, np.uint64, np.bool_)] + [np.dtype(ml_dtypes.bfloat16)]


def _values(rng, shape, dtype):
    bits = rng.integers(0, 256, int(np.prod(shape)) * dtype.itemsize, dtype=np.uint8)
    if dtype == np.bool_:
        return (bits > 127).reshape(shape)
    return bits.view(dtype).reshape(shape)  # any bit pattern (NaNs too): it is moved, not computed


def _run(gpu, x, target, axes, as_input=False):
    inputs = {"x": x, "shape": np.array(target, np.int64)}
    attrs = {} if axes is None else {"axes": list(axes)}
    consts = () if as_input else ("shape",)
    model = make_model("CenterCropPad", inputs, attrs, 18, consts=consts)
    feed = {k: v for k, v in inputs.items() if k not in consts}
    (got,), (want,), sess = gpu_and_cpu(gpu, model, feed, quiet=True)
    (row,) = sess.placement()
    assert row["device"] == gpu and (row.get("pipelines") or row.get("gpu_commands") or want.size == 0), row
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"))


@HYP
@given(shape=st.lists(st.integers(0, 6), min_size=0, max_size=5).map(tuple), data=st.data(),
       dtype=st.sampled_from(DTYPES), as_input=st.booleans(), seed=seeds)
def test_center_crop_pad(gpu, shape, data, dtype, as_input, seed):
    rank = len(shape)
    if rank and data.draw(st.booleans()):
        axes = data.draw(st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank, unique=True))
        axes = [a - rank if data.draw(st.booleans()) else a for a in axes]
    else:
        axes = None
    chosen = range(rank) if axes is None else [a % rank for a in axes]
    target = [data.draw(st.integers(0, 2 * shape[a] + 3)) for a in chosen]
    x = _values(np.random.default_rng(seed), shape, dtype)
    _run(gpu, x, target, axes, as_input)


def test_crop_and_pad_hwc(gpu):
    """The node suite's cases: crop H, pad W, channels kept (axes given or not)."""
    x = np.arange(20 * 8 * 3, dtype=np.float32).reshape(20, 8, 3)
    _run(gpu, x, [10, 10, 3], None)
    _run(gpu, x, [10, 9], [0, 1])
    _run(gpu, x, [11, 11], [-3, -2], as_input=True)


def test_refusals(gpu):
    dev = device_of(gpu)
    k = get_kernel("CenterCropPad")
    x = TensorSpec((4, 5), np.dtype(np.float32))

    def shape(v):
        return TensorSpec((len(v),), np.dtype(np.int64), np.array(v, np.int64))

    k.check(dev, "CenterCropPad", {}, [x, shape([2, 7])])
    with pytest.raises(Unsupported, match="negative"):
        k.check(dev, "CenterCropPad", {}, [x, shape([-1, 7])])
    with pytest.raises(Unsupported, match="entries"):
        k.check(dev, "CenterCropPad", {"axes": [0]}, [x, shape([2, 7])])
    with pytest.raises(Unsupported, match="repeat"):
        k.check(dev, "CenterCropPad", {"axes": [0, -2]}, [x, shape([2, 7])])
    with pytest.raises(Unsupported, match="out of range"):
        k.check(dev, "CenterCropPad", {"axes": [2]}, [x, shape([2])])
    with pytest.raises(Unsupported, match="not known"):
        k.check(dev, "CenterCropPad", {}, [x, TensorSpec((2,), np.dtype(np.int64))])
