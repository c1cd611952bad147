"""GPU Col2Im (vkml/kernels/col2im.py, shaders/col2im.comp) against vkml's CPU operator over
hypothesis geometries: 1 to 3 spatial dimensions, block sizes, strides, dilations, pads
(asymmetric, some negative), batch and channels (empty ones included); float32, float16,
bfloat16, float64 and every integer type, image_shape and block_shape as initializers or as
graph inputs. Bitwise: each output pixel adds its covering column entries in tap order from
zero, the additions the CPU's strided `+=` per tap makes (float16/bfloat16 rounded after each)."""
from __future__ import annotations

import math
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
BF16 = np.dtype(ml_dtypes.bfloat16)
FLOATS = [np.dtype(np.float32), np.dtype(np.float16), BF16, np.dtype(np.float64)]
INTS = [np.dtype(t) for t in (np.int32, np.int64, np.int8, np.int16, np.uint8, np.uint16, np.uint32, np.uint64)]


def _values(rng, shape, dtype):
    if dtype.kind == "f" or dtype == BF16:
        return rng.uniform(-3, 3, shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


def _blocks(image, kernel, strides, dilations, pads):
    n = len(image)
    out = []
    for i in range(n):
        avail = image[i] + pads[i] + pads[i + n] - ((kernel[i] - 1) * dilations[i] + 1)
        out.append(avail // strides[i] + 1 if avail >= 0 else 0)
    return out


def _run(gpu, x, image, kernel, attrs, as_inputs=False):
    inputs = {"x": x, "image_shape": np.array(image, np.int64), "block_shape": np.array(kernel, np.int64)}
    consts = () if as_inputs else ("image_shape", "block_shape")
    model = make_model("Col2Im", inputs, attrs, 18, consts=consts)
    feed = {k: v for k, v in inputs.items() if k not in consts}
    (got,), (want,), sess = gpu_and_cpu(gpu, model, feed, quiet=True)
    (row,) = sess.placement()
    assert row["device"] == gpu and (row.get("pipelines") or want.size == 0), row
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"))


@st.composite
def geometries(draw):
    nd = draw(st.integers(1, 3))
    image = [draw(st.integers(1, 9 if nd < 3 else 5)) for _ in range(nd)]
    kernel = [draw(st.integers(1, 4)) for _ in range(nd)]
    strides = [draw(st.integers(1, 3)) for _ in range(nd)]
    dilations = [draw(st.integers(1, 3)) for _ in range(nd)]
    pads = [draw(st.integers(-1, 3)) for _ in range(2 * nd)]
    return image, kernel, strides, dilations, pads


@HYP
@given(geo=geometries(), n=st.integers(0, 2), c=st.integers(0, 3), dtype=st.sampled_from(FLOATS + INTS),
       which=st.sets(st.sampled_from(["strides", "dilations", "pads"])), as_inputs=st.booleans(), seed=seeds)
def test_col2im(gpu, geo, n, c, dtype, which, as_inputs, seed):
    image, kernel, strides, dilations, pads = geo
    attrs = {}
    if "strides" in which:
        attrs["strides"] = strides
    else:
        strides = [1] * len(image)
    if "dilations" in which:
        attrs["dilations"] = dilations
    else:
        dilations = [1] * len(image)
    if "pads" in which:
        attrs["pads"] = pads
    else:
        pads = [0] * 2 * len(image)
    blocks = _blocks(image, kernel, strides, dilations, pads)
    rng = np.random.default_rng(seed)
    x = _values(rng, (n, c * math.prod(kernel), math.prod(blocks)), dtype)
    _run(gpu, x, image, kernel, attrs, as_inputs)


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float16)], ids=str)
def test_col2im_many_overlaps(gpu, dtype):
    """Stride 1 with a 7x7 block: 49 additions per pixel, rounding in float16 after each."""
    rng = np.random.default_rng(1)
    image, kernel = [20, 17], [7, 7]
    blocks = _blocks(image, kernel, [1, 1], [1, 1], [3, 3, 3, 3])
    x = _values(rng, (2, 3 * 49, math.prod(blocks)), dtype) * dtype.type(100)
    _run(gpu, x, image, kernel, {"pads": [3, 3, 3, 3]})


def test_refusals(gpu):
    dev = device_of(gpu)
    k = get_kernel("Col2Im")
    f = np.dtype(np.float32)

    def spec(v):
        return TensorSpec((len(v),), np.dtype(np.int64), np.array(v, np.int64))

    k.check(dev, "Col2Im", {}, [TensorSpec((1, 4, 9), f), spec([4, 4]), spec([2, 2])])
    with pytest.raises(Unsupported, match="blocks"):  # 9 blocks needed, 8 given: the CPU raises
        k.check(dev, "Col2Im", {}, [TensorSpec((1, 4, 8), f), spec([4, 4]), spec([2, 2])])
    with pytest.raises(Unsupported, match="multiple"):
        k.check(dev, "Col2Im", {}, [TensorSpec((1, 5, 9), f), spec([4, 4]), spec([2, 2])])
    with pytest.raises(Unsupported, match="length"):
        k.check(dev, "Col2Im", {}, [TensorSpec((1, 4, 9), f), spec([4, 4]), spec([4])])
    with pytest.raises(Unsupported, match="not known"):
        k.check(dev, "Col2Im", {}, [TensorSpec((1, 4, 9), f), TensorSpec((2,), np.dtype(np.int64)), spec([2, 2])])
    with pytest.raises(Unsupported, match="bool"):
        k.check(dev, "Col2Im", {}, [TensorSpec((1, 4, 9), np.dtype(np.bool_)), spec([4, 4]), spec([2, 2])])
