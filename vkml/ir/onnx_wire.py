"""Zero-copy ONNX loading: split a serialized model into a small protobuf skeleton and the
byte ranges of its initializers' raw data.

protobuf copies every bytes field it parses (twice, counting the Python bytes object), so a
model parsed whole costs three times its size at peak. Here only the skeleton (nodes, types,
small tensors) goes through protobuf; raw initializer data stays in the caller's buffer (an mmap
of the file), and the loader makes NumPy views over it.
"""
from __future__ import annotations

from typing import Iterator

_MODEL_GRAPH = 7
_GRAPH_INITIALIZER = 5
_TENSOR_NAME = 8
_TENSOR_RAW = 9
_MIN_SPLIT = 1024  # raw data smaller than this is simply left in the skeleton


class WireError(ValueError):
    pass


def _varint(buf, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end:
            raise WireError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise WireError("varint too long")


def _encode_varint(v: int) -> bytes:
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _fields(buf, pos: int, end: int) -> Iterator[tuple[int, int, int, int, int]]:
    """(field number, wire type, field start, payload start, payload end) for each field."""
    while pos < end:
        start = pos
        key, pos = _varint(buf, pos, end)
        num, wt = key >> 3, key & 7
        if wt == 0:
            _, pos2 = _varint(buf, pos, end)
        elif wt == 1:
            pos2 = pos + 8
        elif wt == 2:
            n, pos = _varint(buf, pos, end)
            pos2 = pos + n
        elif wt == 5:
            pos2 = pos + 4
        else:
            raise WireError(f"unsupported wire type {wt}")
        if pos2 > end:
            raise WireError("field runs past the end of its message")
        yield num, wt, start, pos, pos2
        pos = pos2


def _len_field(num: int, payload: bytes) -> bytes:
    return _encode_varint(num << 3 | 2) + _encode_varint(len(payload)) + payload


def split_model(buf) -> tuple[bytes, dict[str, tuple[int, int]]]:
    """Skeleton bytes to parse with protobuf, and {initializer name: (offset, length)} in buf.

    buf is anything indexable by int and sliceable to bytes (bytes, mmap, memoryview).
    """
    end = len(buf)
    spans: dict[str, tuple[int, int]] = {}
    out = bytearray()
    copied = 0
    for num, wt, start, p0, p1 in _fields(buf, 0, end):
        if num != _MODEL_GRAPH or wt != 2:
            continue
        graph = bytearray()
        g_copied = p0
        for gnum, gwt, gstart, q0, q1 in _fields(buf, p0, p1):
            if gnum != _GRAPH_INITIALIZER or gwt != 2:
                continue
            name = raw = None
            for tnum, twt, _, r0, r1 in _fields(buf, q0, q1):
                if tnum == _TENSOR_NAME and twt == 2:
                    name = bytes(buf[r0:r1]).decode("utf-8", "replace")
                elif tnum == _TENSOR_RAW and twt == 2:
                    raw = (r0, r1)
            if name is None or raw is None or raw[1] - raw[0] < _MIN_SPLIT or name in spans:
                continue
            # Copy what precedes this initializer, then the initializer minus its raw_data.
            graph += buf[g_copied:gstart]
            tensor = bytearray()
            t_copied = q0
            for tnum, twt, tstart, r0, r1 in _fields(buf, q0, q1):
                if tnum == _TENSOR_RAW:
                    tensor += buf[t_copied:tstart]
                    t_copied = r1
            tensor += buf[t_copied:q1]
            graph += _len_field(_GRAPH_INITIALIZER, bytes(tensor))
            g_copied = q1
            spans[name] = (raw[0], raw[1] - raw[0])
        graph += buf[g_copied:p1]
        out += buf[copied:start]
        out += _len_field(_MODEL_GRAPH, bytes(graph))
        copied = p1
    out += buf[copied:end]
    return bytes(out), spans
