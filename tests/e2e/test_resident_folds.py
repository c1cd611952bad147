"""Device-resident runs fold their copies into the GPU chunks (vkml/runtime/gpurun.py _folds):
a feed already on the GPU is read in place or copied in by the chunk that reads it, a kept
output (output_device=) written or copied by the chunk that makes it into buffers reused
once the caller holds nothing of them. Checked against the CPU device: outputs a caller still holds are never
overwritten, reshapes of them neither, many threads, the fallback when every buffer is held."""

import numpy as np
import pytest

import vkml
from _models import cnn, mlp
from _threads import hammer


def _plan(sess, kept: bool = True):
    """The plan of the runs with outputs kept on the GPU (kept=False: with host outputs). A model
    with fixed shapes also has the host plan the session warmed up."""
    (plan,) = [p for p in sess._gpu._plans.values() if (p.output_device not in (None, "cpu")) == kept]
    return plan


def _slots(plan):
    return list(plan.pool._free)


def test_resident_runs_fold_and_match(gpu):
    model = mlp()
    sess = vkml.InferenceSession(model, devices=[gpu], max_slots=1)
    ref = vkml.InferenceSession(model, devices=["cpu"])
    rng = np.random.default_rng(0)
    for _ in range(6):
        x = rng.standard_normal((5, 16)).astype(np.float32)
        t = vkml.Tensor.from_numpy(x, gpu)
        (y,) = sess.run(None, {"x": t}, output_device=gpu)
        assert isinstance(y, vkml.Tensor) and y.device == gpu
        np.testing.assert_allclose(y.numpy(), ref.run(None, {"x": x})[0], rtol=1e-4, atol=1e-5)
        del y
    plan = _plan(sess)
    assert plan.fold_in and plan.fold_out, (plan.fold_in, plan.fold_out)
    (slot,) = _slots(plan)
    assert slot.variants, "the resident runs did not take the folded chunk"
    assert len(slot.kept_gens) == 1  # every output was dropped before the next run: one set reused
    assert all(key[1] == () for key in slot.variants)  # fresh feeds each run: copied in apart


def test_held_outputs_are_never_overwritten(gpu):
    model = mlp()
    sess = vkml.InferenceSession(model, devices=[gpu], max_slots=1)
    ref = vkml.InferenceSession(model, devices=["cpu"])
    rng = np.random.default_rng(1)
    held, want = [], []
    for k in range(8):  # more than the slot's buffer sets: the later runs take the plain copy
        x = rng.standard_normal((3, 16)).astype(np.float32)
        (y,) = sess.run(None, {"x": vkml.Tensor.from_numpy(x, gpu)}, output_device=gpu)
        if k % 2:
            held.append(y.device_tensor.reshape((24,)))  # only a reshape of it is kept
        else:
            held.append(y)
        want.append(ref.run(None, {"x": x})[0])
        del y
    for h, w in zip(held, want, strict=True):
        np.testing.assert_allclose(np.asarray(h.numpy()).reshape(w.shape), w, rtol=1e-4, atol=1e-5)
    (slot,) = _slots(_plan(sess))
    assert len(slot.kept_gens) == _plan(sess).KEPT_GENERATIONS
    held.clear()
    x = rng.standard_normal((3, 16)).astype(np.float32)
    (y,) = sess.run(None, {"x": vkml.Tensor.from_numpy(x, gpu)}, output_device=gpu)
    np.testing.assert_allclose(y.numpy(), ref.run(None, {"x": x})[0], rtol=1e-4, atol=1e-5)
    assert len(slot.kept_gens) == _plan(sess).KEPT_GENERATIONS  # released sets reused, no more made


def test_host_feeds_with_kept_outputs_and_resident_feeds_with_host_outputs(gpu):
    model = cnn()
    sess = vkml.InferenceSession(model, devices=[gpu])
    ref = vkml.InferenceSession(model, devices=["cpu"])
    x = np.random.default_rng(2).standard_normal((2, 3, 12, 12)).astype(np.float32)
    want = ref.run(None, {"x": x})[0]
    for _ in range(3):
        (a,) = sess.run(None, {"x": x}, output_device=gpu)
        np.testing.assert_allclose(a.numpy(), want, rtol=1e-4, atol=1e-5)
        (b,) = sess.run(None, {"x": vkml.Tensor.from_numpy(x, gpu)})
        np.testing.assert_allclose(b, want, rtol=1e-4, atol=1e-5)


def test_many_threads_resident(gpu):
    model = mlp()
    sess = vkml.InferenceSession(model, devices=[gpu], max_slots=3)
    ref = vkml.InferenceSession(model, devices=["cpu"])
    rng = np.random.default_rng(3)
    cases, want_of = [], {}
    for _ in range(6):
        x = rng.standard_normal((4, 16)).astype(np.float32)
        t = vkml.Tensor.from_numpy(x, gpu)
        cases.append((t, ref.run(None, {"x": x})[0]))
        want_of[id(t)] = cases[-1][1]
    keep: list = []
    count = iter(range(10**9))

    def run(t):
        (y,) = sess.run(None, {"x": t}, output_device=gpu)
        if next(count) % 5 == 0:
            keep.append((y, want_of[id(t)]))  # some outputs outlive their run
        return y.numpy()

    errors = hammer(sess, cases, 6, 25, run)
    assert not errors, errors[:3]
    assert keep
    for y, want in keep:
        np.testing.assert_allclose(y.numpy(), want, rtol=1e-4, atol=1e-5)


def _one_node_model(n: int, reshape: bool = False) -> bytes:
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    if reshape:  # y's input is a view of x: x's memory is not x's alone
        nodes = [helper.make_node("Reshape", ["x", "s"], ["v"]), helper.make_node("Relu", ["v"], ["y"])]
    g = helper.make_graph(nodes, "big", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, n])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n * n] if reshape else [n, n])],
                          [helper.make_tensor("s", TensorProto.INT64, [1], [n * n])] if reshape else [])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def test_large_tensors_are_read_and_written_in_place(gpu):
    """A feed over FOLD_MAX_BYTES is read where the caller keeps it (from its second run on) and
    the kept output written straight into the buffer handed out: no copies at all."""
    n = 1100  # 1100 x 1100 float32: 4.8 MB, over the 4 MiB copy-fold limit
    sess = vkml.InferenceSession(_one_node_model(n), devices=[gpu], max_slots=1)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((n, n)).astype(np.float32)
    t = vkml.Tensor.from_numpy(x, gpu)
    held = []
    for k in range(4):
        (y,) = sess.run(None, {"x": t}, output_device=gpu)
        np.testing.assert_array_equal(y.numpy(), np.maximum(x, 0))
        held.append(y) if k == 1 else None  # one output outlives the later runs
        del y
    plan = _plan(sess)
    assert x.nbytes > plan.FOLD_MAX_BYTES
    assert not plan.fold_in and plan.bind_in and plan.bind_out == {"y"}
    (slot,) = _slots(plan)
    assert len(slot.copy_in) == 1  # the first run's copy; later runs read t in place
    assert any(len(key[2]) == 2 for key in slot.variants)  # x and y bound in one chunk
    np.testing.assert_array_equal(held[0].numpy(), np.maximum(x, 0))
    x2 = rng.standard_normal((n, n)).astype(np.float32)
    t.device_tensor.view.write(x2.reshape(-1).view(np.uint8))  # the caller's buffer changes: read anew
    (y,) = sess.run(None, {"x": t}, output_device=gpu)
    np.testing.assert_array_equal(y.numpy(), np.maximum(x2, 0))
    np.testing.assert_array_equal(held[0].numpy(), np.maximum(x, 0))


def test_viewed_feeds_are_copied(gpu):
    """A feed whose slot memory a view shares (a Reshape) is never bound in place: the view
    would read memory nothing wrote."""
    n = 1100
    sess = vkml.InferenceSession(_one_node_model(n, reshape=True), devices=[gpu])
    x = np.random.default_rng(6).standard_normal((n, n)).astype(np.float32)
    t = vkml.Tensor.from_numpy(x, gpu)
    for _ in range(3):
        (y,) = sess.run(None, {"x": t}, output_device=gpu)
        np.testing.assert_array_equal(y.numpy(), np.maximum(x, 0).reshape(-1))
    assert not _plan(sess).bind_in


def test_fresh_feed_tensors_do_not_record_chunks_again(gpu):
    """A feed tensor made anew for every run takes the plain copy (a folded chunk would be
    recorded again each time); a tensor fed again is folded from its second run on."""
    model = mlp()
    sess = vkml.InferenceSession(model, devices=[gpu], max_slots=1)
    ref = vkml.InferenceSession(model, devices=["cpu"])
    rng = np.random.default_rng(5)
    for _ in range(5):
        x = rng.standard_normal((2, 16)).astype(np.float32)
        (y,) = sess.run(None, {"x": vkml.Tensor.from_numpy(x, gpu)})
        np.testing.assert_allclose(y, ref.run(None, {"x": x})[0], rtol=1e-4, atol=1e-5)
    (slot,) = _slots(_plan(sess, kept=False))
    assert not slot.variants
    t = vkml.Tensor.from_numpy(x, gpu)
    for _ in range(3):
        (y,) = sess.run(None, {"x": t})
        np.testing.assert_allclose(y, ref.run(None, {"x": x})[0], rtol=1e-4, atol=1e-5)
    assert len(slot.variants) == 1

