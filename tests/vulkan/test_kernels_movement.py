"""Data-movement GPU kernels (vkml/kernels/movement.py, views.py, pad.py, gather.py,
resize.py) against vkml's NumPy operators, run as one-node models on the CPU, over
hypothesis-generated shapes, dtypes and attributes.

Tolerances: every op here is exact (bitwise equal), linear Resize included: the host uses
the CPU operator's own coordinate and weight code, and the shader combines taps in the
CPU's order with float32 arithmetic that is not contracted into fma, which Vulkan requires
to be correctly rounded. (Only a device that broke that rule would need a tolerance, so
none is given.)
"""
import math
import os
import textwrap

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from onnx import helper

import vkml
from vkml.ir import dtypes
from vkml.runtime.executor import NodeFailure
from vkml.kernels import TensorSpec, Unsupported, get_kernel, movement
from vkml.runtime.testing import run_ops
from _cpu_op import cpu_op  # noqa: E402
from _validated import run_validated  # noqa: E402

_N = int(os.environ.get("VKML_TEST_EXAMPLES", "15"))
HYP = settings(max_examples=_N, deadline=None, suppress_health_check=list(HealthCheck))

# One dtype per element size and then some: movement is by element size.
DTYPES = [np.float32, np.float16, np.int64, np.uint8, np.bool_, np.int32, np.float64, np.int8]


def cpu(op: str, inputs: dict, attrs: dict, opset: int, n_out: int = 1) -> list[np.ndarray]:
    """The CPU operator's outputs for a one-node model (None inputs are omitted optionals)."""
    names = [n if v is not None else "" for n, v in inputs.items()]
    node = helper.make_node(op, names, [f"y{i}" for i in range(n_out)], **attrs)
    gin = [helper.make_tensor_value_info(n, dtypes.onnx_type(np.asarray(v).dtype), np.asarray(v).shape)
           for n, v in inputs.items() if v is not None]
    gout = [helper.make_value_info(f"y{i}", onnx.TypeProto()) for i in range(n_out)]
    model = helper.make_model(helper.make_graph([node], "g", gin, gout),
                              opset_imports=[helper.make_opsetid("", opset)], ir_version=10)
    sess = vkml.InferenceSession(model.SerializeToString(), devices=["cpu"])
    return sess.run(None, {n: v for n, v in inputs.items() if v is not None})


def gpu(dev, op: str, inputs: dict, attrs: dict, n_out: int = 1, consts: bool = True) -> list[np.ndarray]:
    names = [n if v is not None else "" for n, v in inputs.items()]
    outs = [f"y{i}" for i in range(n_out)]
    r = run_ops(dev, [(op, attrs, names, outs)], {n: v for n, v in inputs.items() if v is not None},
                consts=consts)
    return [r[o] for o in outs]


def same(dev, op, inputs, attrs, opset, n_out=1):
    want = cpu(op, inputs, attrs, opset, n_out)
    got = gpu(dev, op, inputs, attrs, n_out)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        np.testing.assert_array_equal(g, w, err_msg=f"{op} {attrs}")


def array(data, shape, dtype=None):
    dtype = np.dtype(dtype or data.draw(st.sampled_from(DTYPES)))
    if dtype == np.bool_:
        return data.draw(hnp.arrays(dtype, shape))
    n = math.prod(shape)
    return (np.arange(n) * 7 % 251 - 100).astype(dtype).reshape(shape)  # distinct-ish, every dtype


def shape(data, min_dims=1, max_dims=5, max_side=7, min_side=1):
    return data.draw(hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side,
                                      max_side=max_side))


# ---------------------------------------------------------------- Transpose
@HYP
@given(data=st.data())
def test_transpose(dev, data):
    x = array(data, shape(data, 0, 6))
    perm = data.draw(st.permutations(range(x.ndim)))
    attrs = {} if not perm or data.draw(st.booleans()) else {"perm": list(perm)}
    same(dev, "Transpose", {"x": x}, attrs, 21)


@pytest.mark.parametrize("dtype", [np.uint8, np.float16, np.float32, np.int64])
@settings(max_examples=max(4, _N // 3), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_transpose_tiled(dev, dtype, data):
    """Shapes that take the shared-memory path (inner dims swapped, both >= TILED_MIN)."""
    b = data.draw(st.integers(1, 3))
    r = data.draw(st.integers(movement.TILED_MIN, 70))
    c = data.draw(st.integers(movement.TILED_MIN, 70))
    x = array(data, (b, r, c), dtype)
    for xx, perm in ((x, [0, 2, 1]), (x[0], [1, 0]), (x.reshape(b, r, c, 1), [0, 2, 3, 1])):
        lay = movement.permuted(xx.shape, perm)
        assert movement._tiled_transpose(*lay.collapsed()) is not None
        same(dev, "Transpose", {"x": xx}, {"perm": perm}, 21)


def test_transpose_rank_limit(dev):
    x = np.zeros((2,) * 9, np.float32)
    with pytest.raises(Unsupported, match="non-mergeable"):
        get_kernel("Transpose").check(dev, "Transpose", {}, [TensorSpec.of(x)])
    # rank 9 that merges to rank <= 8 is fine
    y = np.arange(2 ** 9, dtype=np.float32).reshape((2,) * 9)
    same(dev, "Transpose", {"x": y}, {"perm": [1, 0, 2, 3, 4, 5, 6, 7, 8]}, 21)


@pytest.mark.parametrize("dtype", [np.uint8, np.float16, np.float32, np.int64])
@pytest.mark.parametrize("inner", [1, 2, 3, 4, 6, 8, 16, 24])
def test_widened_words(dev, dtype, inner):
    """Runs contiguous on both sides move as 4/8/16-byte words when sizes allow; every
    factor (and none) must give the same bytes."""
    x = np.arange(3 * 4 * 5 * inner).astype(dtype).reshape(3, 4, 5, inner)
    es = np.dtype(dtype).itemsize
    lay = movement.permuted(x.shape, [0, 2, 1, 3])
    shape, ist, ost = lay.collapsed()
    f = movement.widen_factor(dev, es, shape[-1], (ist[-1], ost[-1]), ist[:-1] + ost[:-1], (0, 0))
    expect = next((w // es for w in movement.WIDE_WORDS
                   if w // es > 1 and inner % (w // es) == 0 and dev.storage_alignment % w == 0), 1)
    assert f == expect
    same(dev, "Transpose", {"x": x}, {"perm": [0, 2, 1, 3]}, 21)
    same(dev, "Concat", {"x": x, "y": x[:, :, :2]}, {"axis": 2}, 13)
    same(dev, "Slice", {"x": x, "s": np.array([1]), "e": np.array([4])}, {}, 13)
    same(dev, "Gather", {"x": x, "i": np.array([[2, 0], [-1, 1]], np.int32)}, {"axis": 2}, 13)


# ---------------------------------------------------------------- Slice
BIG = 2**63 - 1


@HYP
@given(data=st.data())
def test_slice(dev, data):
    x = array(data, shape(data, 1, 5, 9))
    k = data.draw(st.integers(1, x.ndim))
    axes = data.draw(st.permutations(range(x.ndim)))[:k]
    axes = [a - x.ndim if data.draw(st.booleans()) else a for a in axes]
    starts, ends, steps = [], [], []
    for a in axes:
        d = x.shape[a]
        bound = st.one_of(st.integers(-2 * d - 2, 2 * d + 2), st.sampled_from([BIG, -BIG - 1]))
        starts.append(data.draw(bound))
        ends.append(data.draw(bound))
        steps.append(data.draw(st.sampled_from([1, 2, 3, -1, -2, -3])))
    ints = lambda v: np.array(v, np.int64)  # noqa: E731
    same(dev, "Slice", {"x": x, "s": ints(starts), "e": ints(ends), "a": ints(axes), "p": ints(steps)}, {}, 13)


def test_slice_forms(dev):
    x = np.arange(4 * 5 * 6, dtype=np.float32).reshape(4, 5, 6)
    same(dev, "Slice", {"x": x}, {"starts": [1, -4], "ends": [100, -1], "axes": [2, 0]}, 1)  # Slice-1
    same(dev, "Slice", {"x": x, "s": np.array([3], np.int32), "e": np.array([0], np.int32)}, {}, 13)
    # starts known only on the device: the node must stay on the CPU
    with pytest.raises(Unsupported, match="not known on the host"):
        gpu(dev, "Slice", {"x": x, "s": np.array([0]), "e": np.array([2])}, {}, consts=False)
    with pytest.raises(Unsupported, match="step is 0"):
        gpu(dev, "Slice", {"x": x, "s": np.array([0]), "e": np.array([2]), "a": np.array([0]),
                           "p": np.array([0])}, {})


# ---------------------------------------------------------------- Concat, Split
@HYP
@given(data=st.data())
def test_concat(dev, data):
    base = shape(data, 1, 4, 6)
    axis = data.draw(st.integers(-len(base), len(base) - 1))
    dt = data.draw(st.sampled_from(DTYPES))
    k = data.draw(st.integers(1, 4))
    xs = {}
    for i in range(k):
        s = list(base)
        s[axis] = data.draw(st.integers(0, 5))
        xs[f"x{i}"] = array(data, tuple(s), dt) + np.asarray(i).astype(dt)
    same(dev, "Concat", xs, {"axis": axis}, 13)


@HYP
@given(data=st.data())
def test_split(dev, data):
    x = array(data, shape(data, 1, 4, 9))
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    d = x.shape[axis]
    form = data.draw(st.sampled_from(["input", "attr", "num_outputs"]))
    if form == "num_outputs":
        n = data.draw(st.integers(1, d))
        if -(-d // n) * (n - 1) > d:  # the last part would be negative: not a valid model
            n = 1
        same(dev, "Split", {"x": x}, {"axis": axis, "num_outputs": n}, 18, n)
        return
    cuts = sorted(data.draw(st.lists(st.integers(0, d), max_size=3)))
    sizes = [b - a for a, b in zip([0] + cuts, cuts + [d])]
    if form == "input":
        same(dev, "Split", {"x": x, "split": np.array(sizes, np.int64)}, {"axis": axis}, 13, len(sizes))
    else:
        same(dev, "Split", {"x": x}, {"axis": axis, "split": sizes}, 11, len(sizes))


@HYP
@given(data=st.data())
def test_split_equal_parts_before_opset_18(dev, data):
    """No split and no num_outputs: as many equal parts as the node has outputs (the kernel
    sees that count as `_num_outputs`, as vkml.kernels.registry.node_attrs passes it)."""
    n = data.draw(st.integers(1, 4))
    base = list(shape(data, 1, 4, 5))
    axis = data.draw(st.integers(-len(base), len(base) - 1))
    base[axis] *= n
    x = array(data, tuple(base))
    opset = data.draw(st.sampled_from([2, 11, 13]))
    want = cpu("Split", {"x": x}, {"axis": axis}, opset, n)
    got = gpu(dev, "Split", {"x": x}, {"axis": axis, "_opset": opset, "_num_outputs": n}, n)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def test_split_equal_parts_unsupported(dev):
    """Without the node's output count (or from opset 18, where num_outputs is required) the
    part count is unknown: the kernel refuses rather than guess."""
    x = np.zeros((4, 6), np.float32)
    with pytest.raises(Unsupported, match="num_outputs"):
        get_kernel("Split").check(dev, "Split", {"axis": 1}, [TensorSpec.of(x)])
    with pytest.raises(Unsupported, match="num_outputs"):
        get_kernel("Split").check(dev, "Split", {"axis": 1, "_opset": 18, "_num_outputs": 2}, [TensorSpec.of(x)])


# ---------------------------------------------------------------- Expand, Tile
@HYP
@given(data=st.data())
def test_expand(dev, data):
    out = shape(data, 1, 5, 5)
    lead = len(out) - data.draw(st.integers(0, len(out)))  # x has the trailing dims
    xs = tuple(1 if data.draw(st.booleans()) else d for d in out[lead:])
    # a target dim may be 1 where x already has the full size
    target = [1 if i >= lead and xs[i - lead] == d and data.draw(st.booleans()) else d
              for i, d in enumerate(out)]
    x = array(data, xs)
    same(dev, "Expand", {"x": x, "s": np.array(target, np.int64)}, {}, 13)


@HYP
@given(data=st.data())
def test_tile(dev, data):
    x = array(data, shape(data, 1, 4, 5, 0))
    reps = [data.draw(st.integers(0, 3)) for _ in range(x.ndim)]
    same(dev, "Tile", {"x": x, "r": np.array(reps, np.int64)}, {}, 13)


def test_tile_high_rank(dev):
    """Rank 5 with every axis repeated: 10 copy dimensions, so Tile falls back to pad.comp."""
    from vkml.kernels import pad

    x = np.arange(2 * 3 * 2 * 3 * 2, dtype=np.int16).reshape(2, 3, 2, 3, 2)
    reps = np.array([2, 2, 3, 2, 2], np.int64)
    lay = pad.tile_layout(get_kernel("Tile").plan([TensorSpec.of(x), TensorSpec.of(reps, reps)],
                                                  pad.HostInputs([TensorSpec.of(x), TensorSpec.of(reps, reps)])))
    assert len(lay.collapsed()[0]) > 8
    same(dev, "Tile", {"x": x, "r": reps}, {}, 13)


# ---------------------------------------------------------------- Pad
@HYP
@given(data=st.data())
def test_pad(dev, data):
    x = array(data, shape(data, 1, 4, 6))
    mode = data.draw(st.sampled_from(["constant", "reflect", "edge", "wrap"]))
    use_axes = data.draw(st.booleans())
    axes = data.draw(st.permutations(range(x.ndim)))[:data.draw(st.integers(1, x.ndim))] if use_axes \
        else list(range(x.ndim))
    pads = []
    for _ in range(2):
        for a in axes:
            pads.append(data.draw(st.integers(-(x.shape[a] // 2), 2 * x.shape[a] + 1)))
    value = np.array(3).astype(x.dtype) if data.draw(st.booleans()) else None
    inputs = {"x": x, "p": np.array(pads, np.int64), "v": value,
              "a": np.array(axes, np.int64) if use_axes else None}
    same(dev, "Pad", inputs, {"mode": mode}, 18)


def test_pad_forms(dev):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    same(dev, "Pad", {"x": x}, {"pads": [1, 0, 2, 3], "mode": "constant", "value": -1.5}, 2)  # Pad-2
    same(dev, "Pad", {"x": np.zeros((0, 3), np.int64), "p": np.array([1, 1, 2, 0])}, {}, 13)
    with pytest.raises(Unsupported, match="crop more"):
        gpu(dev, "Pad", {"x": x, "p": np.array([-2, 0, -2, 0])}, {})
    with pytest.raises(Unsupported, match="empty axis"):
        gpu(dev, "Pad", {"x": np.zeros((0, 3), np.float32), "p": np.array([1, 0, 0, 0])}, {"mode": "edge"})


# ---------------------------------------------------------------- Gather
@HYP
@given(data=st.data())
def test_gather(dev, data):
    x = array(data, shape(data, 1, 4, 6))
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    d = x.shape[axis]
    ishape = data.draw(hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=5))
    idt = data.draw(st.sampled_from([np.int32, np.int64]))
    idx = data.draw(hnp.arrays(idt, ishape, elements=st.integers(-d, d - 1)))
    same(dev, "Gather", {"x": x, "i": idx}, {"axis": axis}, 13)


def test_gather_out_of_range(dev):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    idx = np.array([0, 7, -1, -9], np.int64)
    with pytest.raises(Unsupported, match="outside"):
        gpu(dev, "Gather", {"x": x, "i": idx}, {"axis": 1})  # known on the host: the CPU reports it
    # computed on the device: the fault word gives the CPU operator's error
    with pytest.raises(NodeFailure, match=r"Gather indices: index (7|-9) is out of range for a dimension of size 4"):
        gpu(dev, "Gather", {"x": x, "i": idx}, {"axis": 1}, consts=False)
    for bad in (2**33, -(2**33), 2**62, -(2**63)):  # beyond int32: out of range, not wrapped
        with pytest.raises(NodeFailure, match=f"index {bad} is out of range"):
            gpu(dev, "Gather", {"x": x, "i": np.array([1, bad, 2], np.int64)}, {"axis": 1}, consts=False)
    for dt in (np.int32, np.int64):  # the edges: -d and d - 1 are fine
        got = gpu(dev, "Gather", {"x": x, "i": np.array([-4, 3], dt)}, {"axis": 1}, consts=False)[0]
        np.testing.assert_array_equal(got, x[:, [0, 3]])


# ---------------------------------------------------------------- DepthToSpace, SpaceToDepth
@HYP
@given(data=st.data())
def test_depth_space(dev, data):
    k = data.draw(st.integers(1, 3))
    mode = data.draw(st.sampled_from(["DCR", "CRD"]))
    b, c, h, w = (data.draw(st.integers(1, 3)) for _ in range(4))
    x = array(data, (b, c * k * k, h, w))
    same(dev, "DepthToSpace", {"x": x}, {"blocksize": k, "mode": mode}, 13)
    y = array(data, (b, c, h * k, w * k))
    same(dev, "SpaceToDepth", {"x": y}, {"blocksize": k, "mode": mode}, 28)


# ---------------------------------------------------------------- Resize
COORDS = ["half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel", "half_pixel_symmetric",
          "tf_half_pixel_for_nn"]
NEAREST = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]


@HYP
@given(data=st.data())
def test_resize(dev, data):
    mode = data.draw(st.sampled_from(["nearest", "linear"]))
    dt = data.draw(st.sampled_from([np.float32, np.float16] if mode == "linear" else DTYPES))
    x = data.draw(hnp.arrays(dt, shape(data, 1, 4, 9), elements=st.floats(-100, 100, width=16))) \
        if np.dtype(dt).kind == "f" else array(data, shape(data, 1, 4, 9), dt)
    rank = x.ndim
    axes = sorted(data.draw(st.permutations(range(rank)))[:data.draw(st.integers(1, rank))])
    attrs = {"mode": mode, "coordinate_transformation_mode": data.draw(st.sampled_from(COORDS))}
    if mode == "nearest":
        attrs["nearest_mode"] = data.draw(st.sampled_from(NEAREST))
    if data.draw(st.booleans()):
        attrs["axes"] = axes
        n = len(axes)
    else:
        n = rank
    inputs = {"x": x, "roi": None, "scales": None, "sizes": None}
    if data.draw(st.booleans()):
        inputs["scales"] = np.array([data.draw(st.sampled_from([0.5, 0.6, 1.0, 1.5, 2.0, 3.0, 2.3]))
                                     for _ in range(n)], np.float32)
    else:
        inputs["sizes"] = np.array([data.draw(st.integers(1, 12)) for _ in range(n)], np.int64)
        attrs["keep_aspect_ratio_policy"] = data.draw(st.sampled_from(["stretch", "not_larger", "not_smaller"]))
    try:
        get_kernel("Resize").check(dev, "Resize", attrs, [TensorSpec.of(v, v) if v is not None else None
                                                          for v in inputs.values()])
    except Unsupported as e:
        assert "linear Resize over" in str(e)  # more than 4 interpolated axes
        return
    same(dev, "Resize", inputs, attrs, 19)


def test_resize_old_forms(dev):
    x = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5) / 7
    s = np.array([1, 1, 2.5, 0.5], np.float32)
    same(dev, "Resize", {"x": x, "s": s}, {"mode": "nearest"}, 10)
    same(dev, "Resize", {"x": x, "s": s}, {"mode": "linear"}, 10)
    same(dev, "Upsample", {"x": x, "s": np.array([1, 1, 2, 3], np.float32)}, {"mode": "nearest"}, 9)
    same(dev, "Upsample", {"x": x}, {"mode": "linear", "scales": [1.0, 1.0, 2.0, 1.5]}, 7)


# Cubic, antialias and tf_crop_and_resize run on the GPU: tests/ops/test_gpu_resize.py.
@pytest.mark.parametrize("attrs, dtype, match", [
    ({"mode": "cubic"}, np.float64, "cubic Resize of float64"),
    ({"mode": "nearest", "antialias": 1}, np.float32, "antialias"),
    ({"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize"}, np.float32, "roi is not known"),
    ({"mode": "linear"}, np.int32, "linear Resize of int32"),
])
def test_resize_unsupported(dev, attrs, dtype, match):
    x = np.zeros((1, 1, 4, 4), dtype)
    tf = attrs.get("coordinate_transformation_mode") == "tf_crop_and_resize"
    roi = TensorSpec.of(np.zeros(8, np.float32)) if tf else None  # a roi with no host value
    specs = [TensorSpec.of(x), roi, TensorSpec.of(np.ones(4, np.float32), np.array([1, 1, 2, 2], np.float32))]
    with pytest.raises(Unsupported, match=match):
        get_kernel("Resize").check(dev, "Resize", attrs, specs)


# ---------------------------------------------------------------- views
@HYP
@given(data=st.data())
def test_views(dev, data):
    x = array(data, shape(data, 0, 5, 4, 0))
    op = data.draw(st.sampled_from(["Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"]))
    if op == "Reshape":
        target = list(x.shape)[::-1]
        if target and data.draw(st.booleans()):
            target[data.draw(st.integers(0, len(target) - 1))] = -1 if x.size else 0
        same(dev, op, {"x": x, "s": np.array(target, np.int64)}, {"allowzero": int(0 in x.shape)}, 14)
    elif op == "Flatten":
        same(dev, op, {"x": x}, {"axis": data.draw(st.integers(-x.ndim, x.ndim))}, 13)
    elif op == "Squeeze":
        ones = [a for a, d in enumerate(x.shape) if d == 1]
        if data.draw(st.booleans()):
            same(dev, op, {"x": x}, {}, 13)
        else:
            same(dev, op, {"x": x, "a": np.array(ones[:1], np.int64)}, {}, 13)
            if ones:
                same(dev, op, {"x": x}, {"axes": [ones[0] - x.ndim]}, 11)
    elif op == "Unsqueeze":
        axes = sorted(set(data.draw(st.lists(st.integers(0, x.ndim + 1), min_size=1, max_size=2))))
        axes = [a for a in axes if a < x.ndim + len(axes)]
        same(dev, op, {"x": x, "a": np.array(axes, np.int64)}, {}, 13)
    else:
        same(dev, op, {"x": x}, {}, 13)


def test_views_alias_and_fallback_copy(dev):
    """With the runtime's aliasing, the output is the input's buffer; handed a separate
    buffer instead, record() copies."""
    from vkml.vulkan._commands import CommandRecorder
    from vkml.vulkan.tensor import DeviceTensor

    k = get_kernel("Reshape")
    assert k.alias and not get_kernel("Transpose").alias
    x = np.arange(24, dtype=np.float16).reshape(2, 3, 4)
    t = DeviceTensor.from_numpy(dev, x)
    s = np.array([4, -1], np.int64)
    specs = [TensorSpec.of(t), TensorSpec.of(s, s)]
    (spec,) = k.infer("Reshape", {}, specs)
    assert spec.shape == (4, 6)
    view = t.reshape(spec.shape)
    assert view.view is t.view
    rec = CommandRecorder(dev)
    k.record(rec, "Reshape", {}, [t, None], [view], {1: s})
    sep = DeviceTensor.empty(dev, spec.shape, spec.dtype)
    k.record(rec, "Reshape", {}, [t, None], [sep], {1: s})
    rec.finish().run(timeout=60)
    np.testing.assert_array_equal(sep.numpy(), x.reshape(4, 6))
    np.testing.assert_array_equal(view.numpy(), x.reshape(4, 6))
    with pytest.raises(ValueError):
        t.reshape((5, 5))


def test_chain_views_and_copies(dev):
    """Aliased views feeding copies and back (a typical attention reshuffle)."""
    x = np.arange(2 * 6 * 8, dtype=np.float32).reshape(2, 6, 8)
    ops = [("Reshape", {}, ["x", "s1"], ["a"]), ("Transpose", {"perm": [0, 2, 1, 3]}, ["a"], ["b"]),
           ("Reshape", {}, ["b", "s2"], ["c"]), ("Unsqueeze", {}, ["c", "ax"], ["d"]),
           ("Slice", {}, ["d", "st", "en", "sa", "sp"], ["e"])]
    feeds = {"x": x, "s1": np.array([2, 6, 2, 4]), "s2": np.array([4, 6, 4]), "ax": np.array([0]),
             "st": np.array([-1]), "en": np.array([-100]), "sa": np.array([2]), "sp": np.array([-1])}
    out = run_ops(dev, ops, feeds)
    want = x.reshape(2, 6, 2, 4).transpose(0, 2, 1, 3).reshape(4, 6, 4)[None][:, :, ::-1]
    np.testing.assert_array_equal(out["e"], want)


# ---------------------------------------------------------------- validation layer
WORKLOAD = textwrap.dedent("""
    import numpy as np
    import vkml.vulkan as vk
    from vkml.vulkan import _instance
    from vkml.runtime.testing import run_ops

    assert _instance.instance().validation, "validation layer not enabled"
    dev = vk.device(int(__import__("os").environ.get("VKML_TEST_DEVICE", "0")))
    x = np.arange(2 * 3 * 40 * 36, dtype=np.float32).reshape(2, 3, 40, 36)
    ops = [("Transpose", {"perm": [0, 1, 3, 2]}, ["x"], ["t"]), ("Transpose", {"perm": [2, 0, 3, 1]}, ["t"], ["u"]),
           ("Slice", {}, ["t", "s", "e", "a", "p"], ["v"]), ("Concat", {"axis": 1}, ["x", "x"], ["c"]),
           ("Split", {"axis": 2, "split": [10, 30]}, ["x"], ["s0", "s1"]), ("Expand", {}, ["b", "shp"], ["ex"]),
           ("Tile", {}, ["b", "reps"], ["ti"]), ("Pad", {"mode": "reflect"}, ["b", "pads"], ["pd"]),
           ("Gather", {"axis": 2}, ["x", "idx"], ["g"]), ("Cast", {"to": 9}, ["g"], ["gb"]),
           ("Transpose", {}, ["gb"], ["gt"]), ("Resize", {"mode": "linear"}, ["x", "", "sc"], ["rl"]),
           ("Resize", {"mode": "nearest"}, ["x", "", "sc"], ["rn"]), ("Reshape", {}, ["rn", "rs"], ["r2"]),
           ("DepthToSpace", {"blocksize": 2}, ["d2s"], ["ds"]), ("Relu", {}, ["r2"], ["rr"])]
    feeds = {"x": x, "s": np.array([-1]), "e": np.array([0]), "a": np.array([3]), "p": np.array([-3]),
             "b": np.arange(6, dtype=np.float16).reshape(2, 3), "shp": np.array([4, 2, 3]),
             "reps": np.array([2, 3]), "pads": np.array([1, 2, 1, 2]), "idx": np.array([[0, -1], [5, 3]]),
             "sc": np.array([1, 1, 1.5, 0.5], np.float32), "rs": np.array([-1]),
             "d2s": np.arange(1 * 8 * 3 * 3, dtype=np.int64).reshape(1, 8, 3, 3)}
    out = run_ops(dev, ops, feeds)
    assert np.array_equal(out["u"], x.transpose(0, 1, 3, 2).transpose(2, 0, 3, 1))
    assert np.array_equal(out["gt"], np.take(x, [[0, 39], [5, 3]], axis=2).astype(bool).T)
    vk.close_all()
    print("VALIDATION-CLEAN")
""")


def test_validation_clean(dev):
    run_validated(WORKLOAD)


@pytest.mark.parametrize("opset", [7, 10, 12, 13])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int64"])
@pytest.mark.parametrize("training", [None, False, True])
def test_dropout_inference(dev, opset, dtype, training):
    """Dropout's data and mask outputs against the NumPy operator; training with a non-zero
    ratio is random and stays off the GPU."""
    if dtype == "int64" and opset < 12:
        return  # (integer inputs came with opset 12)
    rng = np.random.default_rng(opset)
    x = (rng.standard_normal((3, 5, 2)) * 10).astype(dtype)
    feeds, ins = {"x": x}, ["x"]
    if opset >= 12:
        feeds["r"] = np.array(0.0 if training else 0.3, np.float32)
        ins.append("r")
        if training is not None:
            feeds["t"] = np.array(training)
            ins.append("t")
    attrs = {"_opset": opset, "_num_outputs": 2}
    out = run_ops(dev, [("Dropout", attrs, ins, ["y", "m"])], feeds)
    want = cpu_op("Dropout", opset, {}, *[feeds[n] for n in ins], outputs=2)
    for got, w in zip((out["y"], out["m"]), want):
        assert got.dtype == w.dtype and got.shape == w.shape
        np.testing.assert_array_equal(got, w)
    if opset >= 12 and training:
        feeds["r"] = np.array(0.5, np.float32)
        with pytest.raises(Unsupported, match="random"):
            run_ops(dev, [("Dropout", attrs, ins, ["y", "m"])], feeds)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(shape=st.lists(st.integers(1, 6), min_size=2, max_size=4), k=st.one_of(st.none(), st.integers(-8, 8)),
       upper=st.sampled_from([0, 1]), dtype=st.sampled_from(["float32", "float16", "int32", "int64", "bool"]))
def test_trilu(dev, shape, k, upper, dtype):
    x = (np.random.default_rng(len(shape)).standard_normal(shape) * 5).astype(dtype)
    feeds, ins = {"x": x}, ["x"]
    if k is not None:
        feeds["k"] = np.array(k, np.int64)
        ins.append("k")
    got = run_ops(dev, [("Trilu", {"upper": upper}, ins, ["y"])], feeds)["y"]
    want, = cpu_op("Trilu", 14, {"upper": upper}, *[feeds[n] for n in ins])
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=4), data=st.data(),
       dtype=st.sampled_from(["float32", "float16", "int64", "int32", "bool", "uint8"]),
       index_dtype=st.sampled_from(["int32", "int64"]))
def test_gather_elements(dev, shape, data, dtype, index_dtype):
    rank = len(shape)
    axis = data.draw(st.integers(-rank, rank - 1))
    a = axis % rank
    # indices: any size along the axis, at most the data's size elsewhere
    ishape = [data.draw(st.integers(1, 6)) if d == a else data.draw(st.integers(1, n)) for d, n in enumerate(shape)]
    rng = np.random.default_rng(rank * 7 + a)
    x = (rng.standard_normal(shape) * 9).astype(dtype)
    idx = rng.integers(-shape[a], shape[a], ishape).astype(index_dtype)
    got = run_ops(dev, [("GatherElements", {"axis": axis}, ["x", "i"], ["y"])], {"x": x, "i": idx})["y"]
    want, = cpu_op("GatherElements", 13, {"axis": axis}, x, idx)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_gather_elements_out_of_range(dev):
    """Known indices out of range stay on the CPU (which raises); indices computed on the GPU
    that fall out of range raise the CPU operator's error through the fault word."""
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    idx = np.array([[0, 3, -4], [1, 2, -1]], np.int64)
    with pytest.raises(Unsupported, match="outside"):
        run_ops(dev, [("GatherElements", {"axis": 1}, ["x", "i"], ["y"])], {"x": x, "i": idx})
    with pytest.raises(NodeFailure, match=r"GatherElements indices: index (3|-4) is out of range for a dimension of size 3"):
        run_ops(dev, [("GatherElements", {"axis": 1}, ["x", "i"], ["y"])], {"x": x, "i": idx}, consts=False)
    idx32 = np.array([[0, 2, -3], [1, 2, -1]], np.int32)
    got = run_ops(dev, [("GatherElements", {"axis": 1}, ["x", "i"], ["y"])], {"x": x, "i": idx32}, consts=False)["y"]
    np.testing.assert_array_equal(got, [[0, 2, 0], [4, 5, 5]])
