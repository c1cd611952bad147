"""Train the small CNN that ships inside vkml, and export it to ONNX.

`python -m vkml run` (no model argument) runs this network on held-back test images, so the
package demonstrates a real model end to end without downloads. Training uses plain NumPy (the
forward and backward passes are written out below) so the only extra dependency is scikit-learn,
for its offline 8x8 digits data set.

Usage: python tools/train_digits.py [--epochs 40] [--out-dir vkml/data]
Writes digits_cnn.onnx and digits_test.npz into --out-dir and checks the export with onnxruntime.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

SEED = 20240607
N_TEST = 360
C1, C2, N_CLASSES = 16, 32, 10


# ---------------------------------------------------------------- data

def load_split(seed: int = SEED) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Deterministic stratified split of the 1797 digits into 1437 train / 360 test.

    Written out (rather than sklearn's train_test_split) so the split cannot drift with
    scikit-learn versions. Pixels 0..16 are scaled to [0, 1]; the model expects that scaling.
    """
    from sklearn.datasets import load_digits

    d = load_digits()
    x = (d.images.astype(np.float32) / 16.0)[:, None, :, :]
    y = d.target.astype(np.int64)
    rng = np.random.default_rng(seed)
    counts = np.bincount(y, minlength=N_CLASSES)
    # Largest-remainder allocation of the test quota per class: exactly N_TEST, stratified.
    share = counts * N_TEST / len(y)
    quota = np.floor(share).astype(int)
    short = N_TEST - quota.sum()
    quota[np.argsort(-(share - quota), kind="stable")[:short]] += 1
    test_idx = []
    for c in range(N_CLASSES):
        members = np.flatnonzero(y == c)
        test_idx.append(rng.permutation(members)[: quota[c]])
    test = np.sort(np.concatenate(test_idx))
    train = np.setdiff1d(np.arange(len(y)), test)
    return x[train], y[train], x[test], y[test]


# ---------------------------------------------------------------- layers

def im2col3(x: np.ndarray) -> np.ndarray:
    """[N,C,H,W] → [N, C*9, H*W] patches of a 3x3 window, stride 1, zero padding 1."""
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    cols = np.empty((n, c, 3, 3, h, w), dtype=x.dtype)
    for i in range(3):
        for j in range(3):
            cols[:, :, i, j] = xp[:, :, i:i + h, j:j + w]
    return cols.reshape(n, c * 9, h * w)


def col2im3(dcols: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Adjoint of im2col3: scatter-add patch gradients back onto the input."""
    n, c, h, w = shape
    d = dcols.reshape(n, c, 3, 3, h, w)
    dxp = np.zeros((n, c, h + 2, w + 2), dtype=dcols.dtype)
    for i in range(3):
        for j in range(3):
            dxp[:, :, i:i + h, j:j + w] += d[:, :, i, j]
    return dxp[:, :, 1:-1, 1:-1]


def conv_fwd(x, w, b):
    n, _, h, wd = x.shape
    cols = im2col3(x)
    out = np.matmul(w.reshape(w.shape[0], -1), cols) + b[None, :, None]
    return out.reshape(n, w.shape[0], h, wd), cols


def conv_bwd(dout, cols, x_shape, w):
    f = w.shape[0]
    d = dout.reshape(dout.shape[0], f, -1)
    dw = np.einsum("nfp,nkp->fk", d, cols).reshape(w.shape)
    db = d.sum(axis=(0, 2))
    dcols = np.matmul(w.reshape(f, -1).T, d)
    return col2im3(dcols, x_shape), dw, db


def pool_fwd(x):
    """2x2 max pool, stride 2. Returns the argmax (first max in row-major window order)."""
    n, c, h, w = x.shape
    win = x.reshape(n, c, h // 2, 2, w // 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(n, c, h // 2, w // 2, 4)
    arg = win.argmax(axis=-1)
    return np.take_along_axis(win, arg[..., None], axis=-1)[..., 0], arg


def pool_bwd(dout, arg, x_shape):
    n, c, h, w = x_shape
    dwin = np.zeros((n, c, h // 2, w // 2, 4), dtype=dout.dtype)
    np.put_along_axis(dwin, arg[..., None], dout[..., None], axis=-1)
    return dwin.reshape(n, c, h // 2, w // 2, 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(x_shape)


def softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


# ---------------------------------------------------------------- model

def init_params(rng: np.random.Generator, dtype=np.float32) -> dict[str, np.ndarray]:
    """He-normal weights, zero biases."""
    def he(shape, fan_in):
        return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(dtype)
    return {
        "conv1.weight": he((C1, 1, 3, 3), 9),
        "conv1.bias": np.zeros(C1, dtype),
        "conv2.weight": he((C2, C1, 3, 3), C1 * 9),
        "conv2.bias": np.zeros(C2, dtype),
        "fc.weight": he((N_CLASSES, C2 * 4), C2 * 4),
        "fc.bias": np.zeros(N_CLASSES, dtype),
    }


def forward(p: dict[str, np.ndarray], x: np.ndarray, keep: bool = False):
    """Logits [N,10]; with keep=True also the cache the backward pass needs."""
    a1, cols1 = conv_fwd(x, p["conv1.weight"], p["conv1.bias"])
    r1 = np.maximum(a1, 0)
    m1, arg1 = pool_fwd(r1)
    a2, cols2 = conv_fwd(m1, p["conv2.weight"], p["conv2.bias"])
    r2 = np.maximum(a2, 0)
    m2, arg2 = pool_fwd(r2)
    flat = m2.reshape(len(x), -1)
    logits = flat @ p["fc.weight"].T + p["fc.bias"]
    if not keep:
        return logits
    return logits, (x, a1, cols1, r1, arg1, m1, a2, cols2, r2, arg2, m2, flat)


def loss_and_grads(p, x, y):
    """Mean softmax cross-entropy and its gradient for every parameter."""
    logits, (x, a1, cols1, r1, arg1, m1, a2, cols2, r2, arg2, m2, flat) = forward(p, x, keep=True)
    n = len(x)
    prob = softmax(logits)
    loss = -np.log(prob[np.arange(n), y] + 1e-12).mean()
    dz = prob
    dz[np.arange(n), y] -= 1
    dz /= n
    g = {"fc.weight": dz.T @ flat, "fc.bias": dz.sum(axis=0)}
    dm2 = (dz @ p["fc.weight"]).reshape(m2.shape)
    da2 = pool_bwd(dm2, arg2, r2.shape) * (a2 > 0)
    dm1, g["conv2.weight"], g["conv2.bias"] = conv_bwd(da2, cols2, m1.shape, p["conv2.weight"])
    da1 = pool_bwd(dm1, arg1, r1.shape) * (a1 > 0)
    _, g["conv1.weight"], g["conv1.bias"] = conv_bwd(da1, cols1, x.shape, p["conv1.weight"])
    return float(loss), g


def check_gradients(x: np.ndarray, y: np.ndarray) -> float:
    """Central differences in float64 on a few coordinates of every parameter: the largest
    relative error. Guards the hand-written backward pass."""
    rng = np.random.default_rng(1)
    p = init_params(rng, np.float64)
    p = {k: v + rng.standard_normal(v.shape) * 0.05 for k, v in p.items()}  # non-zero biases
    x = x.astype(np.float64)
    _, g = loss_and_grads(p, x, y)
    worst, eps = 0.0, 1e-6
    for k, v in p.items():
        for idx in rng.choice(v.size, size=min(6, v.size), replace=False):
            flat = v.reshape(-1)
            old = flat[idx]
            flat[idx] = old + eps
            lp, _ = loss_and_grads(p, x, y)
            flat[idx] = old - eps
            lm, _ = loss_and_grads(p, x, y)
            flat[idx] = old
            num = (lp - lm) / (2 * eps)
            ana = g[k].reshape(-1)[idx]
            worst = max(worst, abs(num - ana) / max(1e-8, abs(num) + abs(ana)))
    return worst


def accuracy(p, x, y) -> float:
    return float((forward(p, x).argmax(axis=1) == y).mean())


def train(xtr, ytr, epochs: int, seed: int = SEED, batch: int = 32, lr: float = 3e-3):
    """Adam with a cosine-decayed learning rate and a little weight decay on the weights."""
    rng = np.random.default_rng(seed)
    p = init_params(rng)
    m = {k: np.zeros_like(v) for k, v in p.items()}
    v = {k: np.zeros_like(v) for k, v in p.items()}
    b1, b2, eps, wd = 0.9, 0.999, 1e-8, 1e-4
    steps_per_epoch = -(-len(xtr) // batch)
    total, t = epochs * steps_per_epoch, 0
    for epoch in range(epochs):
        order = rng.permutation(len(xtr))
        losses = []
        for s in range(0, len(xtr), batch):
            idx = order[s:s + batch]
            loss, g = loss_and_grads(p, xtr[idx], ytr[idx])
            losses.append(loss)
            t += 1
            rate = lr * 0.5 * (1 + np.cos(np.pi * (t - 1) / total))
            for k in p:
                gk = g[k] + (wd * p[k] if k.endswith("weight") else 0)
                m[k] = b1 * m[k] + (1 - b1) * gk
                v[k] = b2 * v[k] + (1 - b2) * gk * gk
                mh = m[k] / (1 - b1 ** t)
                vh = v[k] / (1 - b2 ** t)
                p[k] = (p[k] - rate * mh / (np.sqrt(vh) + eps)).astype(np.float32)
        if epoch % 5 == 4 or epoch == epochs - 1:
            print(f"epoch {epoch + 1:3d}  loss {np.mean(losses):.4f}  train acc {accuracy(p, xtr, ytr):.4f}")
    return p


# ---------------------------------------------------------------- export

def export_onnx(p: dict[str, np.ndarray], doc: str):
    """An opset-17 ONNX model: Conv→Relu→MaxPool ×2 → Flatten → Gemm (logits) → Softmax."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    inits = [numpy_helper.from_array(np.ascontiguousarray(v, dtype=np.float32), name=k) for k, v in p.items()]
    for t in inits:
        assert t.HasField("raw_data")
    pool = dict(kernel_shape=[2, 2], strides=[2, 2])
    conv = dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1])
    nodes = [
        helper.make_node("Conv", ["images", "conv1.weight", "conv1.bias"], ["conv1"], name="conv1", **conv),
        helper.make_node("Relu", ["conv1"], ["relu1"], name="relu1"),
        helper.make_node("MaxPool", ["relu1"], ["pool1"], name="pool1", **pool),
        helper.make_node("Conv", ["pool1", "conv2.weight", "conv2.bias"], ["conv2"], name="conv2", **conv),
        helper.make_node("Relu", ["conv2"], ["relu2"], name="relu2"),
        helper.make_node("MaxPool", ["relu2"], ["pool2"], name="pool2", **pool),
        helper.make_node("Flatten", ["pool2"], ["flat"], name="flatten", axis=1),
        helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], name="fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["probabilities"], name="softmax", axis=1),
    ]
    graph = helper.make_graph(
        nodes, "digits_cnn",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["N", 1, 8, 8])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", N_CLASSES]),
         helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["N", N_CLASSES])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="vkml tools/train_digits.py", producer_version="1",
                              doc_string=doc)
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def verify_with_onnxruntime(path: Path, p, xte, yte) -> tuple[float, float]:
    """Accuracy under onnxruntime and the largest logit difference from the NumPy forward."""
    import onnxruntime as ort

    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    logits, probs = sess.run(["logits", "probabilities"], {"images": xte})
    ours = forward(p, xte)
    diff = float(np.abs(logits - ours).max())
    if not np.array_equal(logits.argmax(1), ours.argmax(1)):
        raise SystemExit("onnxruntime and the NumPy forward pass disagree on a prediction")
    if not np.allclose(probs, softmax(ours.astype(np.float64)), atol=1e-5):
        raise SystemExit("onnxruntime probabilities do not match softmax of the NumPy logits")
    return float((logits.argmax(1) == yte).mean()), diff


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=40)
    ap.add_argument("--out-dir", type=Path, default=Path(__file__).resolve().parents[1] / "vkml" / "data")
    args = ap.parse_args(argv)

    xtr, ytr, xte, yte = load_split()
    print(f"digits: {len(xtr)} train / {len(xte)} test, test class counts {np.bincount(yte).tolist()}")
    err = check_gradients(xtr[:8], ytr[:8])
    print(f"gradient check: worst relative error {err:.2e}")
    if err > 1e-5:
        raise SystemExit("backward pass does not match finite differences")

    t0 = time.perf_counter()
    p = train(xtr, ytr, args.epochs)
    seconds = time.perf_counter() - t0
    n_params = sum(v.size for v in p.values())
    tr_acc, te_acc = accuracy(p, xtr, ytr), accuracy(p, xte, yte)
    print(f"trained in {seconds:.1f} s: {n_params} parameters, train acc {tr_acc:.4f}, test acc {te_acc:.4f}")

    doc = (f"8x8 handwritten digits CNN (scikit-learn load_digits, pixels scaled /16 to [0,1], "
           f"input [N,1,8,8] float32). Conv3x3({C1})-Relu-MaxPool2-Conv3x3({C2})-Relu-MaxPool2-"
           f"Flatten-Gemm(10); outputs logits and Softmax probabilities. {n_params} parameters. "
           f"Trained by vkml tools/train_digits.py with plain NumPy: Adam (lr 3e-3, cosine decay, "
           f"weight decay 1e-4), batch 32, {args.epochs} epochs, seed {SEED}, on a stratified "
           f"{len(xtr)}/{len(xte)} train/test split. Train accuracy {tr_acc:.4f}; "
           f"test accuracy {te_acc:.4f} ({int(round(te_acc * len(yte)))}/{len(yte)}).")
    model = export_onnx(p, doc)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    onnx_path = args.out_dir / "digits_cnn.onnx"
    npz_path = args.out_dir / "digits_test.npz"
    onnx_path.write_bytes(model.SerializeToString())
    np.savez_compressed(npz_path, images=xte.astype(np.float32), labels=yte.astype(np.int64))

    ort_acc, diff = verify_with_onnxruntime(onnx_path, p, xte, yte)
    print(f"onnxruntime: test acc {ort_acc:.4f}, max |logit diff| vs NumPy {diff:.2e}")
    if abs(ort_acc - te_acc) > 1e-9:
        raise SystemExit("onnxruntime accuracy differs from the NumPy forward pass")
    for f in (onnx_path, npz_path):
        print(f"wrote {f} ({os.path.getsize(f)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
