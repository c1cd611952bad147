"""String ops and the ai.onnx.ml encoders (LabelEncoder, ArrayFeatureExtractor, Binarizer).

ONNX strings are object arrays of Python str. Where NumPy has vectorised string kernels
(``numpy.strings`` over StringDType: concatenation, case changes, search) we convert to
StringDType for the kernel and back; splitting and regular expressions have no NumPy kernel, so
those two loop over the strings in Python.

RegexFullMatch uses Python's ``re`` with ``re.ASCII`` so that \\d, \\w, \\s and \\b mean what
they mean in RE2 (ASCII classes). Remaining differences from RE2: Python accepts some syntax
RE2 rejects (backreferences, lookaround, possessive quantifiers, atomic groups: such patterns run
here instead of failing), and RE2-only syntax (\\pL-style Unicode classes, \\C, \\z) is rejected
at load time with a ModelError.
"""
from __future__ import annotations

import re

import numpy as np

from ..ir import dtypes
from ..ir.graph import TensorDesc
from ._common import broadcast_dims
from .registry import REQUIRED, Op, register

_STR = np.dtypes.StringDType()
_OBJ = np.dtype(object)
_INT64 = np.dtype(np.int64)
_BOOL = np.dtype(np.bool_)
ML = "ai.onnx.ml"


def _text(x) -> str:
    return x.decode("utf-8") if isinstance(x, bytes) else str(x)


def to_str(x: np.ndarray) -> np.ndarray:
    """An object array of str/bytes as a StringDType array (vectorised string kernels)."""
    if x.dtype.kind != "O" and x.dtype != _STR:
        raise ValueError(f"expected a string tensor, got {x.dtype}")
    if x.dtype == _OBJ and x.size and any(isinstance(v, bytes) for v in x.reshape(-1)[:1]):
        x = np.array([_text(v) for v in x.reshape(-1)], dtype=_OBJ).reshape(x.shape)
    return x.astype(_STR)


def to_obj(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=_STR).astype(_OBJ)  # (NumPy kernels return str scalars for 0-d)


# ------------------------------------------------------------------ string ops
@register
class StringConcat(Op):
    op_type, since = "StringConcat", 20

    def infer(self, inputs, consts):
        return [TensorDesc(_OBJ, broadcast_dims(inputs[0].shape, inputs[1].shape))]

    def run(self, x, y):
        return (to_obj(np.strings.add(to_str(x), to_str(y))),)


@register
class StringSplit(Op):
    op_type, since = "StringSplit", 20
    attrs = {"delimiter": None, "maxsplit": None}

    def check(self):
        if self.maxsplit is not None and self.maxsplit < 0:
            raise self.fail(f"maxsplit must be non-negative, got {self.maxsplit}")

    def infer(self, inputs, consts):
        x = inputs[0]
        shape = None if x.shape is None else x.shape + (None,)
        return [TensorDesc(_OBJ, shape), TensorDesc(_INT64, x.shape)]

    def _split(self, s: str) -> list[str]:
        limit = -1 if self.maxsplit is None else self.maxsplit
        if not self.delimiter:
            parts = s.strip().split(None, limit)  # runs of whitespace, no empty ends
            if parts and limit >= 0 and len(parts) > limit:
                parts[-1] = parts[-1].strip()
            return parts
        return s.split(self.delimiter, limit)

    def run(self, x):
        flat = [self._split(_text(s)) for s in x.reshape(-1)]
        counts = np.array([len(p) for p in flat], dtype=np.int64).reshape(x.shape)
        width = max((len(p) for p in flat), default=0)
        out = np.full((len(flat), width), "", dtype=_OBJ)
        for i, parts in enumerate(flat):  # one row per input string
            out[i, :len(parts)] = parts
        return out.reshape(x.shape + (width,)), counts


@register
class StringNormalizer(Op):
    op_type, since = "StringNormalizer", 10
    attrs = {"case_change_action": "NONE", "is_case_sensitive": 0, "locale": None, "stopwords": None}

    def check(self):
        if self.case_change_action not in ("NONE", "LOWER", "UPPER"):
            raise self.fail(f"case_change_action must be NONE, LOWER or UPPER, got {self.case_change_action!r}")

    def infer(self, inputs, consts):
        x = inputs[0]
        if x.shape is None:
            return [TensorDesc(_OBJ, None)]
        return [TensorDesc(_OBJ, x.shape[:-1] + (None,))]

    def run(self, x):
        if not (x.ndim == 1 or (x.ndim == 2 and x.shape[0] == 1)):
            raise ValueError(f"StringNormalizer accepts [C] or [1, C] tensors, got shape {list(x.shape)}")
        s = to_str(x.reshape(-1))
        if self.stopwords:
            stop = np.array(self.stopwords, dtype=_STR)
            if self.is_case_sensitive:
                keep = ~np.isin(s, stop)
            else:
                keep = ~np.isin(np.strings.lower(s), np.strings.lower(stop))
            s = s[keep]
        if self.case_change_action == "LOWER":
            s = np.strings.lower(s)
        elif self.case_change_action == "UPPER":
            s = np.strings.upper(s)
        if s.size == 0:
            s = np.array([""], dtype=_STR)  # the spec's "empty value"
        out = to_obj(s)
        return (out.reshape(1, -1) if x.ndim == 2 else out,)


@register
class RegexFullMatch(Op):
    op_type, since = "RegexFullMatch", 20
    attrs = {"pattern": None}

    def check(self):
        if self.pattern is None:
            raise self.fail("the pattern attribute is required")
        try:
            self.regex = re.compile(self.pattern, re.ASCII)
        except re.error as e:
            raise self.fail(f"invalid pattern {self.pattern!r}: {e}") from None

    def infer(self, inputs, consts):
        return [TensorDesc(_BOOL, inputs[0].shape)]

    def run(self, x):
        if x.dtype.kind != "O":
            raise ValueError(f"RegexFullMatch expects strings, got {x.dtype}")
        match = self.regex.fullmatch
        out = np.fromiter((match(_text(s)) is not None for s in x.reshape(-1)), dtype=bool, count=x.size)
        return (out.reshape(x.shape),)


# ------------------------------------------------------------------ TfIdfVectorizer
@register
class TfIdfVectorizer(Op):
    op_type, since = "TfIdfVectorizer", 9
    attrs = {"max_gram_length": REQUIRED, "max_skip_count": REQUIRED, "min_gram_length": REQUIRED,
             "mode": REQUIRED, "ngram_counts": REQUIRED, "ngram_indexes": REQUIRED, "pool_int64s": None,
             "pool_strings": None, "weights": None}

    def check(self):
        if (self.pool_int64s is None) == (self.pool_strings is None):
            raise self.fail("exactly one of pool_int64s and pool_strings must be set")
        if self.mode not in ("TF", "IDF", "TFIDF"):
            raise self.fail(f"mode must be TF, IDF or TFIDF, got {self.mode!r}")
        if not 1 <= self.min_gram_length <= self.max_gram_length:
            raise self.fail(f"need 1 <= min_gram_length <= max_gram_length, got {self.min_gram_length}, "
                            f"{self.max_gram_length}")
        if self.max_skip_count < 0:
            raise self.fail(f"max_skip_count must be non-negative, got {self.max_skip_count}")
        pool = np.array(self.pool_strings if self.pool_int64s is None else self.pool_int64s,
                        dtype=_OBJ if self.pool_int64s is None else np.int64)
        if self.pool_int64s is None:
            pool = to_str(pool)
        starts = list(self.ngram_counts) + [len(pool)]
        self.n_out = max(self.ngram_indexes, default=-1) + 1
        n_grams = sum((starts[g + 1] - starts[g]) // (g + 1) for g in range(len(self.ngram_counts)))
        if len(self.ngram_indexes) != n_grams:
            raise self.fail(f"ngram_indexes has {len(self.ngram_indexes)} entries for {n_grams} pool n-grams")
        if self.weights is not None and len(self.weights) != n_grams:
            raise self.fail(f"weights has {len(self.weights)} entries for {n_grams} pool n-grams")
        # Token vocabulary: tokens get ids 1..V (0: not in the pool), n-grams become id rows.
        self.vocab = np.unique(pool)
        self.pool_rows: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # n -> (id rows, output index)
        k = 0
        for g in range(len(self.ngram_counts)):
            n = g + 1
            seg = pool[starts[g]:starts[g + 1]]
            count = len(seg) // n
            if count and n <= self.max_gram_length:
                rows = self._ids(seg[:count * n]).reshape(count, n)
                self.pool_rows[n] = (rows, np.arange(k, k + count))
            k += count

    def _ids(self, tokens: np.ndarray) -> np.ndarray:
        pos = np.searchsorted(self.vocab, tokens)
        pos = np.minimum(pos, max(len(self.vocab) - 1, 0))
        hit = self.vocab[pos] == tokens if len(self.vocab) else np.zeros(tokens.shape, bool)
        return np.where(hit, pos + 1, 0)

    def infer(self, inputs, consts):
        x = inputs[0]
        if x.shape is not None and len(x.shape) == 2:
            return [TensorDesc(np.dtype(np.float32), (x.shape[0], self.n_out))]
        return [TensorDesc(np.dtype(np.float32), (self.n_out,))]

    def run(self, x):
        if x.ndim not in (1, 2):
            raise ValueError(f"TfIdfVectorizer expects a 1-D or 2-D input, got shape {list(x.shape)}")
        rows2d = x.reshape(1, -1) if x.ndim == 1 else x
        tokens = to_str(rows2d) if self.pool_int64s is None else rows2d.astype(np.int64)
        ids = self._ids(tokens)  # (N, C)
        n_rows, c = ids.shape
        counts = np.zeros(n_rows * max(self.n_out, 1), np.float64)
        out_index = np.asarray(self.ngram_indexes, np.int64)
        for n in range(self.min_gram_length, self.max_gram_length + 1):
            if n not in self.pool_rows:
                continue
            pool_rows, pool_pos = self.pool_rows[n]
            for skip in range(self.max_skip_count + 1 if n > 1 else 1):  # unigrams ignore skips
                span = (n - 1) * (skip + 1)
                if span >= c:
                    break
                starts = np.arange(c - span)
                win = ids[:, starts[:, None] + np.arange(n)[None, :] * (skip + 1)]  # (N, W, n)
                win = win.reshape(-1, n)
                both = np.concatenate([pool_rows, win])
                _, inv = np.unique(both, axis=0, return_inverse=True)
                inv = inv.reshape(-1)
                table = np.full(inv.max() + 1, -1, np.int64)
                table[inv[:len(pool_rows)]] = pool_pos
                found = table[inv[len(pool_rows):]]
                row = np.repeat(np.arange(n_rows), len(starts))
                ok = found >= 0
                np.add.at(counts, row[ok] * self.n_out + out_index[found[ok]], 1.0)
        counts = counts.reshape(n_rows, self.n_out)
        if self.mode != "TF":
            # weights[j] scales output coordinate j: what onnxruntime and onnx.reference do (the
            # spec's "i-th n-gram in pool" reads the same when ngram_indexes is the identity).
            scale = np.ones(self.n_out)
            if self.weights is not None:
                w = np.asarray(self.weights, np.float64)[:self.n_out]
                scale[:len(w)] = w
            counts = (np.minimum(counts, 1.0) if self.mode == "IDF" else counts) * scale
        out = counts.astype(np.float32)
        return (out.reshape(-1) if x.ndim == 1 else out,)


# ------------------------------------------------------------------ ai.onnx.ml
def lookup(x: np.ndarray, keys: np.ndarray, values: np.ndarray, default) -> np.ndarray:
    """values[i] where x == keys[i] (the last of repeated keys wins; NaN matches NaN), else default."""
    if len(keys) != len(values):
        raise ValueError(f"keys ({len(keys)}) and values ({len(values)}) differ in length")
    out_dtype = values.dtype
    if len(keys) == 0:
        return np.full(x.shape, default, dtype=out_dtype)
    strings = keys.dtype.kind in "OT"
    k = to_str(keys) if strings else keys
    q = to_str(x) if strings else x.astype(keys.dtype, copy=False)
    uk, first = np.unique(k[::-1], return_index=True)  # first in the reversed list = last given
    uv = values[::-1][first]
    pos = np.minimum(np.searchsorted(uk, q), len(uk) - 1)
    hit = uk[pos] == q
    if uk.dtype.kind == "f":
        hit |= np.isnan(uk[pos]) & np.isnan(q)
    out = np.where(hit, uv[pos], np.asarray(default, dtype=out_dtype) if out_dtype != _OBJ else default)
    return out.astype(out_dtype, copy=False)


def _check_key_type(x: np.ndarray, keys: np.ndarray) -> None:
    if (keys.dtype.kind in "OT") != (x.dtype.kind in "OT"):
        raise ValueError(f"LabelEncoder: input of type {x.dtype} against keys of type {keys.dtype}")


@register
class LabelEncoder1(Op):
    op_type, domain, since = "LabelEncoder", ML, 1
    attrs = {"classes_strings": None, "default_int64": -1, "default_string": "_Unused"}

    def infer(self, inputs, consts):
        x = inputs[0]
        return [TensorDesc(_INT64 if x.dtype == _OBJ else _OBJ, x.shape)]

    def run(self, x):
        classes = np.array(self.classes_strings or [], dtype=_OBJ)
        if x.dtype.kind == "O":
            return (lookup(x, classes, np.arange(len(classes), dtype=np.int64), self.default_int64),)
        idx = x.astype(np.int64)
        ok = (idx >= 0) & (idx < len(classes))
        picked = classes[np.where(ok, idx, 0)] if len(classes) else np.full(x.shape, "", _OBJ)
        return (np.where(ok, picked, self.default_string).astype(_OBJ),)


_KEY_ATTRS = (("keys_floats", np.float32), ("keys_int64s", np.int64), ("keys_strings", _OBJ))
_VALUE_ATTRS = (("values_floats", np.float32, "default_float"), ("values_int64s", np.int64, "default_int64"),
                ("values_strings", _OBJ, "default_string"))


@register
class LabelEncoder2(Op):
    op_type, domain, since = "LabelEncoder", ML, 2
    attrs = {"default_float": -0.0, "default_int64": -1, "default_string": "_Unused", "keys_floats": None,
             "keys_int64s": None, "keys_strings": None, "values_floats": None, "values_int64s": None,
             "values_strings": None}

    def check(self):
        keys = [(n, t) for n, t in _KEY_ATTRS if getattr(self, n) is not None] + self._tensor("keys_tensor")
        values = [(n, t, d) for n, t, d in _VALUE_ATTRS if getattr(self, n) is not None] + \
            [(n, t, "default_tensor") for n, t in self._tensor("values_tensor")]
        if len(keys) != 1 or len(values) != 1:
            raise self.fail("exactly one keys_* and one values_* attribute must be set")
        (kname, ktype), (vname, vtype, dname) = keys[0], values[0]
        self.keys = np.asarray(getattr(self, kname), dtype=ktype).reshape(-1)
        self.values = np.asarray(getattr(self, vname), dtype=vtype).reshape(-1)
        if len(self.keys) != len(self.values):
            raise self.fail(f"{kname} has {len(self.keys)} entries, {vname} {len(self.values)}")
        self.default = self._default(dname)

    def _tensor(self, name):
        v = getattr(self, name, None)
        return [] if v is None else [(name, np.asarray(v).dtype)]

    def _default(self, dname):
        return getattr(self, dname)

    def infer(self, inputs, consts):
        return [TensorDesc(self.values.dtype, inputs[0].shape)]

    def run(self, x):
        _check_key_type(x, self.keys)
        return (lookup(x, self.keys, self.values, self.default),)


@register
class LabelEncoder4(LabelEncoder2):
    since = 4
    attrs = {**LabelEncoder2.attrs, "default_tensor": None, "keys_tensor": None, "values_tensor": None}

    def _default(self, dname):
        if self.default_tensor is not None:
            d = np.asarray(self.default_tensor).reshape(-1)
            if d.size != 1:
                raise self.fail(f"default_tensor must hold one value, got {d.size}")
            return d[0]
        if dname == "default_tensor":  # values_tensor without default_tensor: the type's default
            kind = self.values.dtype.kind
            return "_Unused" if kind == "O" else (-1 if kind in "iu" else -0.0)
        return getattr(self, dname)


@register
class ArrayFeatureExtractor(Op):
    op_type, domain, since = "ArrayFeatureExtractor", ML, 1

    def infer(self, inputs, consts):
        x, y = inputs
        n = None
        if y.shape is not None and all(isinstance(d, int) for d in y.shape):
            n = int(np.prod(y.shape, dtype=np.int64))
        if x.shape is None:
            return [TensorDesc(x.dtype, None)]
        lead = x.shape[:-1] if len(x.shape) > 1 else (1,)
        return [TensorDesc(x.dtype, lead + (n,))]

    def run(self, x, indices):
        if indices.dtype.kind not in "iu":
            raise ValueError(f"ArrayFeatureExtractor: indices must be integers, got {indices.dtype}")
        idx = indices.astype(np.int64).reshape(-1)
        n = x.shape[-1] if x.ndim else 0
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            raise ValueError(f"ArrayFeatureExtractor: index out of range for a last axis of size {n}")
        out = np.take(x, idx, axis=-1)
        return (out.reshape(1, -1) if x.ndim == 1 else out,)


@register
class Binarizer(Op):
    op_type, domain, since = "Binarizer", ML, 1
    attrs = {"threshold": 0.0}

    def infer(self, inputs, consts):
        return [inputs[0]]

    def run(self, x):
        return ((x > self.threshold).astype(x.dtype),)
