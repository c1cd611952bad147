"""String ops, TfIdfVectorizer and the ai.onnx.ml encoders against onnx.reference."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import vkml

FAST = settings(deadline=None, max_examples=30)
S = TensorProto.STRING
WORDS = ["a", "B", "cat", "Dog", "  x ", "", "é", "a,b", "a,,b", "1 2  3", "aa"]


def run_both(node, inputs, opset=21, ml=None):
    ins = []
    for k, v in inputs.items():
        elem = S if v.dtype == object else helper.np_dtype_to_tensor_dtype(v.dtype)
        ins.append(helper.make_tensor_value_info(k, elem, v.shape))
    outs = [helper.make_value_info(o, helper.TypeProto()) for o in node.output]
    ops = [helper.make_opsetid("", opset)] + ([helper.make_opsetid("ai.onnx.ml", ml)] if ml else [])
    m = helper.make_model(helper.make_graph([node], "g", ins, outs), opset_imports=ops, ir_version=10)
    want = ReferenceEvaluator(m).run(None, inputs)
    sess = vkml.InferenceSession(m, devices=["cpu"])
    got = sess.run(None, inputs)
    for k, (g, w) in enumerate(zip(got, want)):
        w = np.asarray(w)
        if w.dtype.kind == "U":  # the reference returns fixed-width unicode for ONNX strings
            w = w.astype(object)
        assert g.dtype == w.dtype and g.shape == w.shape, f"output {k}: {g.dtype}{g.shape} vs {w.dtype}{w.shape}"
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=1e-6)
        else:
            np.testing.assert_array_equal(g, w)
    for arg, g in zip(sess.get_outputs(), got):  # inferred types agree with the real ones
        assert arg.shape is None or len(arg.shape) == g.ndim
    return got


def words(draw, shape):
    return np.array(draw(st.lists(st.sampled_from(WORDS), min_size=int(np.prod(shape)),
                                  max_size=int(np.prod(shape)))), dtype=object).reshape(shape)


@FAST
@given(st.data())
def test_string_concat(data):
    shape = tuple(data.draw(st.lists(st.integers(1, 3), max_size=2)))
    x = words(data.draw, shape)
    y = words(data.draw, shape[data.draw(st.integers(0, len(shape))):])
    run_both(helper.make_node("StringConcat", ["x", "y"], ["z"]), {"x": x, "y": y}, opset=20)


@FAST
@given(st.data())
def test_string_split(data):
    x = words(data.draw, (data.draw(st.integers(1, 4)),))
    attrs = {}
    if data.draw(st.booleans()):
        attrs["delimiter"] = data.draw(st.sampled_from([",", " ", "a"]))
    if data.draw(st.booleans()):
        attrs["maxsplit"] = data.draw(st.integers(0, 2))
    if "delimiter" not in attrs and "maxsplit" in attrs:
        x = np.array([s.strip() for s in x], dtype=object)  # whitespace split + maxsplit: see below
    run_both(helper.make_node("StringSplit", ["x"], ["y", "n"], **attrs), {"x": x}, opset=20)


def test_string_split_whitespace_strips():
    x = np.array(["  a  b c  ", ""], dtype=object)
    node = helper.make_node("StringSplit", ["x"], ["y", "n"])
    y, n = run_both(node, {"x": x}, opset=20)
    assert y.tolist() == [["a", "b", "c"], ["", "", ""]] and n.tolist() == [3, 0]


@FAST
@given(st.data())
def test_string_normalizer(data):
    c = data.draw(st.integers(1, 5))
    x = words(data.draw, (c,) if data.draw(st.booleans()) else (1, c))
    attrs = {"case_change_action": data.draw(st.sampled_from(["NONE", "LOWER", "UPPER"])),
             "is_case_sensitive": data.draw(st.integers(0, 1))}
    if data.draw(st.booleans()):
        attrs["stopwords"] = data.draw(st.lists(st.sampled_from(["a", "cat", "DOG", "b"]), min_size=1, max_size=3))
    # onnx.reference strips accents and drops empty strings, which the spec does not say, and
    # onnxruntime needs system locales for case changes: the oracle is the spec, written out.
    stop = attrs.get("stopwords", [])
    if attrs["is_case_sensitive"]:
        kept = [w for w in x.reshape(-1) if w not in stop]
    else:
        kept = [w for w in x.reshape(-1) if w.lower() not in {t.lower() for t in stop}]
    change = {"LOWER": str.lower, "UPPER": str.upper, "NONE": str}[attrs["case_change_action"]]
    want = np.array([change(w) for w in kept] or [""], dtype=object)
    want = want.reshape(1, -1) if x.ndim == 2 else want
    node = helper.make_node("StringNormalizer", ["x"], ["y"], **attrs)
    m = helper.make_model(helper.make_graph([node], "g", [helper.make_tensor_value_info("x", S, x.shape)],
                                            [helper.make_value_info("y", helper.TypeProto())]),
                          opset_imports=[helper.make_opsetid("", 10)], ir_version=10)
    got = vkml.InferenceSession(m, devices=["cpu"]).run(None, {"x": x})[0]
    assert got.dtype == object and got.shape == want.shape and got.tolist() == want.tolist()
    if attrs["case_change_action"] == "NONE" and "" not in kept and all(w.isascii() for w in kept) and (
            attrs["is_case_sensitive"] or not stop):
        run_both(node, {"x": x}, opset=10)  # where the reference's quirks cannot show


@pytest.mark.parametrize("pattern", [r"[a-z]+", r"\d+", r"(a|b)*c?", r".*@example\.com", r"\w+"])
def test_regex_full_match(pattern):
    # ASCII only: the reference uses Python's Unicode classes, vkml RE2's ASCII ones (see below)
    x = np.array(["abc", "123", "ab", "abc1", "x@example.com", "", "a_1", "c"], dtype=object)
    run_both(helper.make_node("RegexFullMatch", ["x"], ["y"], pattern=pattern), {"x": x}, opset=20)


def test_regex_ascii_classes_like_re2():
    x = np.array(["٣", "3"], dtype=object)  # an Arabic-Indic digit is not \d in RE2
    node = helper.make_node("RegexFullMatch", ["x"], ["y"], pattern=r"\d")
    m = helper.make_model(helper.make_graph([node], "g", [helper.make_tensor_value_info("x", S, [2])],
                                            [helper.make_value_info("y", helper.TypeProto())]),
                          opset_imports=[helper.make_opsetid("", 20)], ir_version=10)
    assert vkml.InferenceSession(m, devices=["cpu"]).run(None, {"x": x})[0].tolist() == [False, True]


@FAST
@given(st.data())
def test_tfidf(data):
    strings = data.draw(st.booleans())
    vocab = ["a", "b", "c", "d"] if strings else [1, 2, 3, 4]
    pool1 = data.draw(st.lists(st.sampled_from(vocab), min_size=1, max_size=3, unique=True))
    pool2 = data.draw(st.lists(st.tuples(st.sampled_from(vocab), st.sampled_from(vocab)), max_size=3, unique=True))
    pool = pool1 + [t for p in pool2 for t in p]
    n = len(pool1) + len(pool2)
    attrs = {"mode": data.draw(st.sampled_from(["TF", "IDF", "TFIDF"])), "min_gram_length": data.draw(
        st.integers(1, 2)), "max_gram_length": 2, "max_skip_count": data.draw(st.integers(0, 2)),
        "ngram_counts": [0, len(pool1)], "ngram_indexes": data.draw(st.permutations(range(n))),
        "weights": [float(data.draw(st.integers(1, 4))) for _ in range(n)]}
    attrs["pool_strings" if strings else "pool_int64s"] = pool
    shape = (data.draw(st.integers(1, 3)), data.draw(st.integers(1, 6)))
    if data.draw(st.booleans()):
        shape = shape[1:]
    tokens = data.draw(st.lists(st.sampled_from(vocab + (["z"] if strings else [9])), min_size=int(np.prod(shape)),
                                max_size=int(np.prod(shape))))
    x = np.array(tokens, dtype=object if strings else np.int64).reshape(shape)
    run_both(helper.make_node("TfIdfVectorizer", ["x"], ["y"], **attrs), {"x": x}, opset=9)


@FAST
@given(st.data())
def test_label_encoder(data):
    kind = data.draw(st.sampled_from(["si", "is", "fs", "sf"]))
    n = data.draw(st.integers(1, 4))
    keys = {"s": ["a", "b", "c", "d"][:n], "i": [3, -1, 7, 0][:n], "f": [0.5, -2.0, 3.25, 1.0][:n]}
    vals = {"s": ["w", "x", "y", "z"][:n], "i": [10, 20, 30, 40][:n], "f": [1.5, 2.5, 3.5, 4.5][:n]}
    name = {"s": "strings", "i": "int64s", "f": "floats"}
    attrs = {f"keys_{name[kind[0]]}": keys[kind[0]], f"values_{name[kind[1]]}": vals[kind[1]]}
    pool = keys[kind[0]] + (["q"] if kind[0] == "s" else [99])
    x = np.array(data.draw(st.lists(st.sampled_from(pool), min_size=1, max_size=5)),
                 dtype={"s": object, "i": np.int64, "f": np.float32}[kind[0]])
    run_both(helper.make_node("LabelEncoder", ["x"], ["y"], domain="ai.onnx.ml", **attrs), {"x": x}, ml=2)
    if kind[1] != "s":  # opset 4 adds tensor-valued keys/values
        tk = helper.make_tensor("k", helper.np_dtype_to_tensor_dtype(x.dtype) if kind[0] != "s" else S, [n],
                                [v.encode() for v in keys["s"]] if kind[0] == "s" else keys[kind[0]])
        vv = np.array(vals[kind[1]], np.int64 if kind[1] == "i" else np.float32)
        tv = helper.make_tensor("v", helper.np_dtype_to_tensor_dtype(vv.dtype), [n], vv.tolist())
        td = helper.make_tensor("d", helper.np_dtype_to_tensor_dtype(vv.dtype), [1], [-7])
        run_both(helper.make_node("LabelEncoder", ["x"], ["y"], domain="ai.onnx.ml", keys_tensor=tk,
                                  values_tensor=tv, default_tensor=td), {"x": x}, ml=4)


def test_ml_array_feature_extractor_binarizer():
    x = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    run_both(helper.make_node("ArrayFeatureExtractor", ["x", "i"], ["y"], domain="ai.onnx.ml"),
             {"x": x, "i": np.array([3, 0, 3], np.int64)}, ml=1)
    run_both(helper.make_node("Binarizer", ["x"], ["y"], domain="ai.onnx.ml", threshold=1.5), {"x": x}, ml=1)
