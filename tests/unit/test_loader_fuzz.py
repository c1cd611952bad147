"""Structure-aware fuzzing of model files (issue #19): real models with their protobuf structure
mutated (nodes dropped or duplicated, attribute types changed, names swapped, dims corrupted,
random raw data, bad external data, truncated bytes) must load or raise vkml.ModelError with a
message: never another exception, a crash or a hang.

The cases run in a child process, so a crash fails the test instead of killing pytest, with a
fixed seed and a time box. Reproduce or search longer by hand:

    python tests/unit/test_loader_fuzz.py --seed 19 --seconds 60 [--verbose]
"""
from __future__ import annotations

import argparse
import faulthandler
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback

import numpy as np
import onnx
from onnx import AttributeProto as A
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEED = 19
PER_CASE = 20  # seconds: a case taking longer is a hang; the child prints where and exits
SECONDS = 12.0  # the fuzzing itself (CI budget: 20 s for the test); the child start-up comes on top


# ---------------------------------------------------------------- seed models
def _opsets(*extra):
    return [h.make_opsetid("", 17), *extra]


def _model(nodes, inputs, outputs, inits=(), **kw) -> onnx.ModelProto:
    kw.setdefault("opset_imports", _opsets())
    m = h.make_model(h.make_graph(nodes, "g", inputs, outputs, list(inits)), **kw)
    m.ir_version = 8
    return m


def seeds() -> dict[str, onnx.ModelProto]:
    """Small models covering what the loader parses: convolutions, raw initializers big enough to
    be split off the protobuf, Constant folding, subgraphs, model-local functions, external data."""
    out = {"digits_cnn": onnx.load(os.path.join(ROOT, "vkml", "data", "digits_cnn.onnx"))}
    x = h.make_tensor_value_info("x", T.FLOAT, ["N", 512])
    y = h.make_tensor_value_info("y", T.FLOAT, None)
    w = nh.from_array(np.linspace(-1, 1, 512, dtype=np.float32), "w")
    shape = h.make_node("Constant", [], ["shape"], value=nh.from_array(np.int64([-1, 16, 32])), name="k")
    out["dense"] = _model([
        h.make_node("Add", ["x", "w"], ["a"], name="add"),
        h.make_node("Reshape", ["a", "shape"], ["r"], name="reshape"),
        h.make_node("Softmax", ["r"], ["s"], name="softmax", axis=-1),
        h.make_node("Transpose", ["s"], ["t"], name="transpose", perm=[0, 2, 1]),
        h.make_node("ReduceSum", ["t"], ["y"], name="sum", keepdims=0),
        shape], [x], [y], [w])
    c = h.make_tensor_value_info("c", T.BOOL, [])
    o = h.make_tensor_value_info("o", T.FLOAT, None)
    then = h.make_graph([h.make_node("Mul", ["x", "k2"], ["o"], name="mul")], "then", [], [o],
                        [nh.from_array(np.float32([2]), "k2")])
    other = h.make_graph([h.make_node("Neg", ["x"], ["o"], name="neg")], "else", [], [o])
    sparse = h.make_sparse_tensor(nh.from_array(np.float32([1, 2, 3]), "sp"), nh.from_array(np.int64([0, 9, 511]), "i"),
                                  [512])
    out["if"] = _model([h.make_node("If", ["c"], ["z"], name="if", then_branch=then, else_branch=other),
                        h.make_node("Add", ["z", "sp"], ["y"], name="add")], [c, x], [y])
    out["if"].graph.sparse_initializer.append(sparse)
    ops = _opsets(h.make_opsetid("local", 1))
    scale = h.make_function("local", "Scale", ["a"], ["b"], [
        h.make_node("Constant", [], ["s"], value_float=0.0, name="s"),
        h.make_node("Mul", ["a", "s"], ["b"], name="m")], ops, attributes=["alpha"])
    scale.node[0].attribute[0].ref_attr_name = "alpha"
    twice = h.make_function("local", "Twice", ["a"], ["b"], [
        h.make_node("Scale", ["a"], ["t"], domain="local", alpha=2.0),
        h.make_node("Scale", ["t"], ["b"], domain="local", alpha=3.0)], ops)
    out["functions"] = _model([h.make_node("Twice", ["x"], ["y"], domain="local", name="call")], [x], [y],
                              functions=[scale, twice], opset_imports=ops)
    ext = _model([h.make_node("Add", ["x", "w"], ["y"], name="add")], [x], [y], [w])
    onnx.external_data_helper.convert_model_to_external_data(ext, location="w.bin", size_threshold=0)
    out["external"] = ext
    return out


# ---------------------------------------------------------------- mutations
_ODD = [-1, -2, 0, 1, 3, 7, 2 ** 31, 2 ** 62, -2 ** 63, 2 ** 63 - 1]
_OPS = ["Add", "Relu", "Conv", "Softmax", "If", "Loop", "Reshape", "Gather", "Constant", "Concat", "Split",
        "Scan", "MaxPool", "NoSuchOp", "Twice", "Scale", "Identity", "Cast", "Expand"]


def _containers(m: onnx.ModelProto) -> list:
    """Every graph (the main one, subgraphs at any depth) and function: whatever holds nodes."""
    out, todo = [], [m.graph, *m.functions]
    while todo:
        g = todo.pop()
        out.append(g)
        for n in g.node:
            for a in n.attribute:
                todo.extend([a.g] if a.HasField("g") else list(a.graphs))
    return out


def _tensors(m: onnx.ModelProto) -> list[onnx.TensorProto]:
    out = []
    for g in _containers(m):
        out.extend(getattr(g, "initializer", []))
        for sp in getattr(g, "sparse_initializer", []):
            out.extend((sp.values, sp.indices))
        for n in g.node:
            out.extend(a.t for a in n.attribute if a.HasField("t"))
    return out


def _names(m: onnx.ModelProto) -> list[str]:
    names = {"", "ghost"}
    for g in _containers(m):
        for n in g.node:
            names.update(n.input)
            names.update(n.output)
    return sorted(names)


def _pick(rng, seq):
    return seq[int(rng.integers(len(seq)))] if len(seq) else None


def _node(rng, m):
    g = _pick(rng, [g for g in _containers(m) if len(g.node)])
    return (g, _pick(rng, g.node)) if g is not None else (None, None)


def m_drop_node(rng, m):
    g, n = _node(rng, m)
    if n is not None:
        g.node.remove(n)


def m_dup_node(rng, m):
    g, n = _node(rng, m)
    if n is not None:
        g.node.add().CopyFrom(n)


def m_rename_edge(rng, m):
    _, n = _node(rng, m)
    if n is None:
        return
    field = n.input if (rng.random() < 0.6 or not n.output) else n.output
    if len(field):
        field[int(rng.integers(len(field)))] = _pick(rng, _names(m))
    else:
        field.append(_pick(rng, _names(m)))


def m_swap_inputs(rng, m):
    (_, a), (_, b) = _node(rng, m), _node(rng, m)
    if a is not None and b is not None and len(a.input) and len(b.input):
        i, j = int(rng.integers(len(a.input))), int(rng.integers(len(b.input)))
        a.input[i], b.input[j] = b.input[j], a.input[i]


def m_arity(rng, m):
    _, n = _node(rng, m)
    if n is None:
        return
    field = n.input if rng.random() < 0.7 else n.output
    if len(field) and rng.random() < 0.5:
        del field[-1]
    else:
        field.append(_pick(rng, _names(m)))


def m_attr_type(rng, m):
    _, n = _node(rng, m)
    if n is None or not len(n.attribute):
        return
    a = _pick(rng, n.attribute)
    a.type = int(rng.integers(0, 15))
    if rng.random() < 0.5:  # give the new type a value of its own
        for f in ("f", "i", "s", "t", "g", "floats", "ints", "strings", "tensors", "graphs"):
            a.ClearField(f)
        t = a.type
        if t == A.FLOAT:
            a.f = float(_pick(rng, _ODD))
        elif t == A.INT:
            a.i = int(_pick(rng, _ODD))
        elif t == A.INTS:
            a.ints.extend(int(_pick(rng, _ODD)) for _ in range(int(rng.integers(0, 4))))
        elif t == A.GRAPH:
            a.g.name = "stray"
        elif t == A.TENSOR:
            a.t.CopyFrom(nh.from_array(np.float32([1, 2])))
        elif t == A.STRING:
            a.s = b"\xff\xfe"


def m_attr_value(rng, m):
    _, n = _node(rng, m)
    if n is None:
        return
    if len(n.attribute) and rng.random() < 0.4:
        n.attribute.remove(_pick(rng, n.attribute))
        return
    name = _pick(rng, ["axis", "perm", "pads", "strides", "kernel_shape", "to", "bogus", "then_branch", "value"])
    if rng.random() < 0.5:
        n.attribute.append(h.make_attribute(name, [int(_pick(rng, _ODD)) for _ in range(int(rng.integers(0, 5)))],
                                            attr_type=A.INTS))
    else:
        n.attribute.append(h.make_attribute(name, int(_pick(rng, _ODD))))


def m_op(rng, m):
    _, n = _node(rng, m)
    if n is not None:
        if rng.random() < 0.8:
            n.op_type = _pick(rng, _OPS)
        else:
            n.domain = _pick(rng, ["", "ai.onnx", "ai.onnx.ml", "local", "com.microsoft", "x.y"])


def m_dims(rng, m):
    t = _pick(rng, _tensors(m))
    if t is not None:
        del t.dims[:]
        t.dims.extend(int(_pick(rng, _ODD)) for _ in range(int(rng.integers(0, 4))))


def m_raw(rng, m):
    t = _pick(rng, [t for t in _tensors(m) if t.HasField("raw_data")])
    if t is None:
        return
    n = len(t.raw_data)
    if rng.random() < 0.5:
        t.raw_data = rng.bytes(int(rng.integers(0, 2 * n + 2)))
    else:
        raw = bytearray(t.raw_data)
        for _ in range(int(rng.integers(1, 8))):
            if raw:
                raw[int(rng.integers(len(raw)))] = int(rng.integers(256))
        t.raw_data = bytes(raw)


def m_sparse(rng, m):
    sp = _pick(rng, m.graph.sparse_initializer)
    if sp is not None:
        del sp.dims[:]
        sp.dims.extend(int(_pick(rng, _ODD)) for _ in range(int(rng.integers(0, 3))))


def m_dtype(rng, m):
    t = _pick(rng, _tensors(m))
    if t is not None:
        t.data_type = int(rng.integers(0, 27))


def m_tensor_name(rng, m):
    t = _pick(rng, _tensors(m))
    if t is not None:
        t.name = _pick(rng, _names(m))


def m_external(rng, m):
    t = _pick(rng, _tensors(m))
    if t is None:
        return
    t.data_location = T.EXTERNAL if rng.random() < 0.9 else T.DEFAULT
    key = _pick(rng, ["location", "offset", "length", "checksum"])
    value = _pick(rng, ["w.bin", "../w.bin", "/etc/passwd", "", ".", "sub", "nothere", "-4", "abc", "0", "16",
                        "99999999999999999999", "w.bin\x00x"])
    entries = {e.key: e.value for e in t.external_data}
    entries[key] = value
    del t.external_data[:]
    for k, v in entries.items():
        t.external_data.add(key=k, value=v)


def m_value_info(rng, m):
    g = _pick(rng, [g for g in _containers(m) if isinstance(g, onnx.GraphProto)])
    vis = list(g.input) + list(g.output) + list(g.value_info)
    vi = _pick(rng, vis)
    if vi is None:
        return
    r = rng.random()
    if r < 0.4:
        for d in vi.type.tensor_type.shape.dim:
            if rng.random() < 0.5:
                d.dim_value = int(_pick(rng, _ODD))
    elif r < 0.6:
        vi.type.tensor_type.elem_type = int(rng.integers(0, 27))
    elif r < 0.8:
        vi.name = _pick(rng, _names(m))
    else:
        vi.type.ClearField("tensor_type")


def m_model(rng, m):
    r = rng.random()
    if r < 0.4 and len(m.opset_import):
        _pick(rng, m.opset_import).version = int(_pick(rng, [0, 1, 7, 13, 999, -1]))
    elif r < 0.6:
        m.ir_version = int(_pick(rng, [0, 2, 3, 7, 11, 99]))
    elif r < 0.8 and len(m.functions):
        f = _pick(rng, m.functions)
        f.name = _pick(rng, ["Twice", "Scale", "Add", "Relu"])
    else:
        del m.opset_import[:]


MUTATIONS = [m_drop_node, m_dup_node, m_rename_edge, m_swap_inputs, m_arity, m_attr_type, m_attr_value, m_op,
             m_dims, m_sparse, m_raw, m_dtype, m_tensor_name, m_external, m_value_info, m_model]


def mutate(rng, m: onnx.ModelProto) -> tuple[bytes, list[str]]:
    done = []
    for _ in range(int(rng.integers(1, 4))):
        f = _pick(rng, MUTATIONS)
        f(rng, m)
        done.append(f.__name__)
    data = m.SerializeToString()
    if rng.random() < 0.1:  # byte-level damage on top
        cut = int(rng.integers(len(data) + 1))
        data = data[:cut]
        done.append(f"truncate@{cut}")
    return data, done


# ---------------------------------------------------------------- the loop (run in a child)
def fuzz(seed: int, seconds: float, verbose: bool = False) -> dict:
    import vkml

    base = {name: m.SerializeToString() for name, m in seeds().items()}
    names = sorted(base)
    folder = tempfile.mkdtemp(prefix="vkml-fuzz-")
    with open(os.path.join(folder, "w.bin"), "wb") as f:
        f.write(np.linspace(-1, 1, 512, dtype=np.float32).tobytes())
    os.mkdir(os.path.join(folder, "sub"))
    tally: dict[str, int] = {}
    failures = []
    start = time.perf_counter()
    case = 0
    while time.perf_counter() - start < seconds:
        rng = np.random.default_rng([seed, case])
        name = names[case % len(names)]
        m = onnx.ModelProto()
        m.ParseFromString(base[name])
        data, done = mutate(rng, m)
        where = f"case {case} ({name}: {', '.join(done)})"
        if verbose:
            print(where, file=sys.stderr, flush=True)
        faulthandler.dump_traceback_later(PER_CASE, exit=True)
        path = os.path.join(folder, "m.onnx")
        with open(path, "wb") as f:  # every case from a path, so external data is looked up
            f.write(data)
        try:
            vkml.InferenceSession(path, devices=["cpu"])
            outcome = "loaded"
        except vkml.ModelError as e:
            outcome = type(e).__name__
            if not str(e).strip():
                failures.append(f"{where}: {outcome} without a message")
        except Exception as e:
            outcome = type(e).__name__
            failures.append(f"{where}: {outcome}: {e}\n{traceback.format_exc(limit=-4)}")
        tally[outcome] = tally.get(outcome, 0) + 1
        case += 1
    faulthandler.cancel_dump_traceback_later()
    return {"cases": case, "tally": tally, "failures": failures[:20], "seconds": time.perf_counter() - start}


def test_mutated_models_load_or_raise_model_error():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    cmd = [sys.executable, os.path.abspath(__file__), "--seed", str(SEED), "--seconds", str(SECONDS), "--verbose"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=SECONDS + PER_CASE + 60, env=env)
    # Each case is named on stderr before it runs: the last one named is the one that crashed or hung.
    assert r.returncode == 0, f"the fuzzing child died (rc {r.returncode}):\n{r.stderr[-3000:]}"
    report = json.loads(r.stdout.strip().splitlines()[-1])
    print(f"loader fuzz: {report['cases']} cases in {report['seconds']:.1f} s: {report['tally']}")
    assert report["cases"] >= 100, report
    assert report["tally"].get("loaded", 0) > 0, report  # the mutations do not all stop at the parser
    assert not report["failures"], "\n\n".join(report["failures"])


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--seconds", type=float, default=SECONDS)
    ap.add_argument("--verbose", action="store_true", help="print each case before it runs (to find a crash)")
    args = ap.parse_args()
    print(json.dumps(fuzz(args.seed, args.seconds, args.verbose)))
