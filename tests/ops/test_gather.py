"""Indexing ops (gather, scatter, TopK, Unique, Pad...) against onnx.reference."""
import os
import sys

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
from _oracle import check_node, make_model  # noqa: E402
from _ort_check import check_ort  # noqa: E402

import vkml  # noqa: E402
from vkml.ops.gather import top_k  # noqa: E402

DTYPES = [np.float32, np.float16, np.float64, np.int64, np.int32, np.int8, np.uint8, ml_dtypes.bfloat16]
FAST = settings(deadline=None, max_examples=30)
shapes = st.lists(st.integers(1, 4), min_size=1, max_size=4).map(tuple)


def _rng(draw):
    return np.random.default_rng(draw(st.integers(0, 2**31 - 1)))


def _data(draw, shape, dtype=None, lo=-20, hi=20):
    dtype = dtype or draw(st.sampled_from(DTYPES))
    x = _rng(draw).integers(lo, hi, shape)
    return x.astype(dtype)


def _indices(draw, shape, dim, negative=True):
    rng = _rng(draw)
    idx = rng.integers(-dim if negative else 0, dim, shape)
    return idx.astype(draw(st.sampled_from([np.int64, np.int32])))


@FAST
@given(st.data())
def test_gather(data):
    shape = data.draw(shapes)
    x = _data(data.draw, shape)
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    ishape = tuple(data.draw(st.lists(st.integers(0, 3), max_size=2)))
    idx = _indices(data.draw, ishape, shape[axis])
    check_node("Gather", {"x": x, "i": idx}, {"axis": axis}, opset=13)
    # GatherElements: indices of data's shape except along the axis.
    # (the reference mishandles a negative axis: give it the positive one, check vkml's agrees)
    eshape = tuple(d if k != axis % len(shape) else data.draw(st.integers(1, 4)) for k, d in enumerate(shape))
    ins = {"x": x, "i": _indices(data.draw, eshape, shape[axis])}
    want = check_node("GatherElements", ins, {"axis": axis % len(shape)}, opset=13)
    got = vkml.InferenceSession(make_model("GatherElements", ins, {"axis": axis}, opset=13),
                                devices=["cpu"]).run(None, ins)
    np.testing.assert_array_equal(got[0], want[0])


@FAST
@given(st.data())
def test_gather_nd(data):
    shape = data.draw(st.lists(st.integers(1, 3), min_size=1, max_size=4).map(tuple))
    b = data.draw(st.integers(0, len(shape) - 1))
    k = data.draw(st.integers(1, len(shape) - b))
    x = _data(data.draw, shape)
    mid = tuple(data.draw(st.lists(st.integers(1, 3), max_size=2)))
    cols = [_indices(data.draw, shape[:b] + mid + (1,), shape[b + j]).astype(np.int64) for j in range(k)]
    idx = np.concatenate(cols, axis=-1)
    check_node("GatherND", {"x": x, "i": idx}, {"batch_dims": b}, opset=13)


@FAST
@given(st.data())
def test_scatter_elements(data):
    shape = data.draw(shapes)
    dtype = data.draw(st.sampled_from(DTYPES))
    x = _data(data.draw, shape, dtype)
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    reduction = data.draw(st.sampled_from(["none", "add", "mul", "max", "min"]))
    ishape = tuple(data.draw(st.integers(1, d)) for d in shape)
    if reduction == "none":
        # Unique targets along the axis: duplicates have no defined result without a reduction.
        ishape = list(ishape)
        ishape[axis] = data.draw(st.integers(1, shape[axis]))
        perm = np.stack([_rng(data.draw).permutation(shape[axis])[:ishape[axis]] for _ in range(
            int(np.prod(ishape)) // ishape[axis])])
        idx = np.moveaxis(perm.reshape(tuple(d for k, d in enumerate(ishape) if k != axis % len(shape))
                                       + (ishape[axis],)), -1, axis % len(shape)).astype(np.int64)
        ishape = tuple(ishape)
    else:
        idx = _indices(data.draw, ishape, shape[axis])
    upd = _data(data.draw, ishape, dtype, -3, 4)
    want = check_node("ScatterElements", {"x": x, "i": idx, "u": upd}, {"axis": axis, "reduction": reduction},
                      opset=18, rtol=1e-2)
    if reduction == "none":  # the reference lacks the deprecated Scatter: it is ScatterElements
        feed = {"x": x, "i": idx, "u": upd}
        got = vkml.InferenceSession(make_model("Scatter", feed, {"axis": axis}, opset=10),
                                    devices=["cpu"]).run(None, feed)
        np.testing.assert_array_equal(got[0], want[0])


@FAST
@given(st.data())
def test_scatter_nd(data):
    shape = data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple))
    dtype = data.draw(st.sampled_from(DTYPES))
    x = _data(data.draw, shape, dtype)
    k = data.draw(st.integers(1, len(shape)))
    reduction = data.draw(st.sampled_from(["none", "add", "mul", "max", "min"]))
    n_slots = int(np.prod(shape[:k]))
    m = data.draw(st.integers(1, n_slots if reduction == "none" else 5))
    if reduction == "none":
        flat = _rng(data.draw).permutation(n_slots)[:m]
    else:
        flat = _rng(data.draw).integers(0, n_slots, m)
    idx = np.stack(np.unravel_index(flat, shape[:k]), axis=-1).astype(np.int64)
    upd = _data(data.draw, (m,) + shape[k:], dtype, -3, 4)
    check_node("ScatterND", {"x": x, "i": idx, "u": upd}, {"reduction": reduction}, opset=18, rtol=1e-2)


@FAST
@given(st.data())
def test_tensor_scatter(data):
    b, s_max, d = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 5)), data.draw(st.integers(1, 3))
    heads = data.draw(st.integers(1, 2))
    seq = data.draw(st.integers(1, s_max))
    mode = data.draw(st.sampled_from(["linear", "circular"]))
    cache = _data(data.draw, (b, heads, s_max, d), np.float32)
    upd = _data(data.draw, (b, heads, seq, d), np.float32)
    hi = s_max - seq + 1 if mode == "linear" else s_max
    wi = _rng(data.draw).integers(0, hi, b).astype(np.int64)
    ins = {"c": cache, "u": upd, "w": wi if data.draw(st.booleans()) else None}
    check_node("TensorScatter", ins, {"mode": mode, "axis": -2}, opset=24)


@FAST
@given(st.data())
def test_compress_nonzero(data):
    shape = data.draw(shapes)
    x = _data(data.draw, shape)
    axis = data.draw(st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1)))
    n = int(np.prod(shape)) if axis is None else shape[axis]
    cond = _rng(data.draw).random(data.draw(st.integers(0, n))) > 0.5
    check_node("Compress", {"x": x, "c": cond}, {} if axis is None else {"axis": axis}, opset=11)
    check_node("NonZero", {"x": x}, {}, opset=13)


@FAST
@given(st.data())
def test_topk(data):
    shape = data.draw(shapes)
    dtype = data.draw(st.sampled_from([np.float32, np.float64, np.int64, np.int32, np.uint8, np.float16]))
    x = _data(data.draw, shape, dtype, -3, 3)  # many ties
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    k = data.draw(st.integers(0, shape[axis]))
    largest = data.draw(st.integers(0, 1))
    check_node("TopK", {"x": x, "k": np.array([k], np.int64)}, {"axis": axis, "largest": largest}, opset=11,
               outputs=2)
    check_node("TopK", {"x": x}, {"axis": axis, "k": k}, opset=1, outputs=2)


def test_topk_ties_lower_index_first():
    x = np.array([[3, 1, 3, 2, 3, 1]], np.float32)
    v, i = top_k(x, 4, 1, True)
    assert i.tolist() == [[0, 2, 4, 3]]
    v, i = top_k(x, 3, 1, False)
    assert i.tolist() == [[1, 5, 3]]


@FAST
@given(st.data())
def test_unique(data):
    shape = data.draw(shapes)
    dtype = data.draw(st.sampled_from([np.float32, np.int64, np.int8, np.float64]))
    x = _data(data.draw, shape, dtype, -2, 2)
    attrs = {"sorted": data.draw(st.integers(0, 1))}
    if data.draw(st.booleans()):
        attrs["axis"] = data.draw(st.integers(-len(shape), len(shape) - 1))
    if attrs["sorted"] or x.ndim == 1:
        check_node("Unique", {"x": x}, attrs, opset=11, outputs=4)
    else:
        # onnx.reference reorders unsorted results along axis 0 of the unflattened input.
        check_ort("Unique", {"x": x}, attrs, opset=11, outputs=4)


def test_unique_strings():
    x = np.array(["b", "a", "b", "c", "a"], dtype=object)
    sess = vkml.InferenceSession(make_model("Unique", {"x": x}, {"sorted": 0}, opset=11, outputs=4), devices=["cpu"])
    y, first, inv, counts = sess.run(None, {"x": x})
    assert y.tolist() == ["b", "a", "c"] and first.tolist() == [0, 1, 3]
    assert inv.tolist() == [0, 1, 0, 2, 1] and counts.tolist() == [2, 2, 1]


@FAST
@given(st.data())
def test_trilu_eyelike(data):
    shape = data.draw(st.lists(st.integers(1, 4), min_size=2, max_size=4).map(tuple))
    x = _data(data.draw, shape)
    k = data.draw(st.integers(-5, 5))
    upper = data.draw(st.integers(0, 1))
    kin = np.array(k, np.int64) if data.draw(st.booleans()) else None
    check_node("Trilu", {"x": x, "k": kin}, {"upper": upper}, opset=14)
    attrs = {"k": k}
    if data.draw(st.booleans()):
        attrs["dtype"] = data.draw(st.sampled_from([1, 7, 9, 11]))
    check_node("EyeLike", {"x": _data(data.draw, shape[-2:])}, attrs, opset=9)


@FAST
@given(st.data())
def test_onehot(data):
    shape = tuple(data.draw(st.lists(st.integers(1, 3), max_size=3)))
    depth = data.draw(st.integers(1, 5))
    idx = _rng(data.draw).integers(-depth - 1, depth + 2, shape).astype(
        data.draw(st.sampled_from([np.int64, np.int32, np.float32])))
    axis = data.draw(st.integers(-len(shape) - 1, len(shape)))
    values = np.array([data.draw(st.integers(-3, 3)), data.draw(st.integers(4, 9))]).astype(
        data.draw(st.sampled_from([np.float32, np.int64, np.int32])))
    dtype_d = data.draw(st.sampled_from([np.int64, np.float32]))
    check_node("OneHot", {"i": idx, "d": np.array(depth, dtype_d), "v": values}, {"axis": axis}, opset=11)


@FAST
@given(st.data())
def test_reverse_sequence(data):
    t, b = data.draw(st.integers(1, 5)), data.draw(st.integers(1, 4))
    rest = tuple(data.draw(st.lists(st.integers(1, 3), max_size=2)))
    time_axis = data.draw(st.integers(0, 1))
    shape = ((t, b) if time_axis == 0 else (b, t)) + rest
    x = _data(data.draw, shape)
    lens = _rng(data.draw).integers(0, t + 1, b).astype(np.int64)
    check_node("ReverseSequence", {"x": x, "l": lens}, {"time_axis": time_axis, "batch_axis": 1 - time_axis},
               opset=10)


@FAST
@given(st.data())
def test_pad(data):
    shape = data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple))
    x = _data(data.draw, shape)
    mode = data.draw(st.sampled_from(["constant", "reflect", "edge", "wrap"]))
    rank = len(shape)
    use_axes = data.draw(st.booleans())
    axes = data.draw(st.lists(st.integers(0, rank - 1), min_size=1, unique=True)) if use_axes else list(range(rank))
    pads = []
    for a in axes:
        hi = shape[a] - 1 if mode == "reflect" else shape[a]
        pads.append([data.draw(st.integers(0 if mode != "constant" else -(shape[a] // 2), hi)) for _ in range(2)])
    pads = np.array([p[0] for p in pads] + [p[1] for p in pads], np.int64)
    ins = {"x": x, "p": pads, "v": np.array(data.draw(st.integers(-5, 5))).astype(x.dtype)
           if mode == "constant" and data.draw(st.booleans()) else None,
           "a": np.array([a - rank if data.draw(st.booleans()) else a for a in axes], np.int64) if use_axes else None}
    const = data.draw(st.booleans())
    if pads.min() < 0:  # onnx.reference cannot crop
        check_ort("Pad", ins, {"mode": mode}, opset=19, consts=("p", "a") if const else ())
    else:
        check_node("Pad", ins, {"mode": mode}, opset=19, consts=("p", "a") if const else ())
    if not use_axes and mode != "wrap" and pads.min() >= 0:
        check_node("Pad", {"x": x}, {"mode": mode, "pads": pads.tolist()}, opset=2)


def test_pad_negative_crops():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert check_ort("Pad", {"x": x, "p": np.array([-1, 1, 1, -2], np.int64)}, {}, opset=13) is not None
    for mode in ("edge", "reflect", "wrap"):
        assert check_ort("Pad", {"x": x, "p": np.array([-1, 1, 1, -1], np.int64)}, {"mode": mode}, opset=19)


@FAST
@given(st.data())
def test_center_crop_pad(data):
    shape = data.draw(st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple))
    x = _data(data.draw, shape)
    rank = len(shape)
    attrs = {}
    axes = list(range(rank))
    if data.draw(st.booleans()):
        axes = data.draw(st.lists(st.integers(0, rank - 1), min_size=1, unique=True))
        attrs["axes"] = [a - rank if data.draw(st.booleans()) else a for a in axes]
    target = np.array([data.draw(st.integers(1, 7)) for _ in axes], np.int64)
    check_node("CenterCropPad", {"x": x, "s": target}, attrs, opset=18,
               consts=("s",) if data.draw(st.booleans()) else ())


def test_bad_indices_raise():
    x = np.zeros((3, 2), np.float32)
    sess = vkml.InferenceSession(make_model("Gather", {"x": x, "i": np.array([3])}, {}, opset=13), devices=["cpu"])
    with pytest.raises(Exception, match="out of range"):
        sess.run(None, {"x": x, "i": np.array([3])})
    sess = vkml.InferenceSession(make_model("ScatterND", {"x": x, "i": np.array([[0, 5]]), "u": np.zeros(1, np.float32)},
                                            {}, opset=13), devices=["cpu"])
    with pytest.raises(Exception, match="out of range"):
        sess.run(None, {"x": x, "i": np.array([[0, 5]]), "u": np.zeros(1, np.float32)})
