"""Feeds: the checks every input passes before a run (dtype, rank, fixed and named dimensions,
size against the machine's memory), the signature under which a feed's checks are remembered,
and the random feed `python -m vkml run` and `bench --profile` make for a model given no inputs.

A leaf below the session, its I/O binding and the command line, which all read from here.
"""
from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..ir import dtypes
from ..ir.graph import TensorDesc
from ..runtime.tensor import Tensor


def check_output_device(name: Any) -> None:
    if name == "cpu":
        return
    if not isinstance(name, str) or not name.startswith("vulkan:") or not name[7:].isdigit():
        raise ValueError(f"output_device must be 'cpu' or 'vulkan:N', not {name!r}")


def signature(feed: Any) -> tuple | None:
    """(name, dtype, shape) of every input when the feed is a dict of plain C-contiguous NumPy
    arrays, plus the device for vkml.Tensors (whose checks are their dtype and shape too), else
    None: the key under which a feed's checks and its plan are remembered."""
    if type(feed) is not dict:
        return None
    sig = []
    for k, v in feed.items():
        t = type(v)
        if t is np.ndarray:
            if not v.flags.c_contiguous:
                return None  # other layouts are copied by check_value on every run
            sig.append((k, v.dtype, v.shape))
        elif t is Tensor:
            sig.append((k, v.dtype, v.shape, v.device))
        else:
            return None
    return tuple(sig)


def check_value(name: str, value: Any, desc: TensorDesc | None, symbols: dict[str, tuple[int, str]]) -> Any:
    if isinstance(value, Tensor):
        if desc is not None and desc.kind == "tensor":
            check_tensor(name, value, desc, symbols)
        return value
    if desc is None or desc.kind != "tensor":
        if desc is not None and desc.kind == "sequence" and not isinstance(value, list):
            raise ValueError(f"input {name!r}: expected a sequence (list of arrays), got {type(value).__name__}")
        return value
    if isinstance(value, (list, bool, int, float, complex, np.generic)):
        try:
            value = np.asarray(value)
        except (ValueError, TypeError, OverflowError) as e:  # ragged lists, ints beyond int64
            raise ValueError(f"input {name!r}: cannot be read as an array: {e}") from None
    elif not isinstance(value, np.ndarray):
        raise ValueError(f"input {name!r}: expected a NumPy array, got {type(value).__name__}")
    check_tensor(name, value, desc, symbols)
    # One layout for every run: the same values give the same bits whatever their strides (BLAS
    # takes other paths for Fortran-ordered or strided operands), and no kernel sees a view.
    return value if value.flags.c_contiguous else np.ascontiguousarray(value)


def check_tensor(name: str, value: Any, desc: TensorDesc, symbols: dict[str, tuple[int, str]]) -> None:
    nbytes = int(np.prod(value.shape, dtype=object)) * value.dtype.itemsize
    if nbytes > host_memory():
        # A zero-stride view costs nothing to make; running it would allocate its full size.
        raise ValueError(f"input {name!r}: shape {list(value.shape)} ({value.dtype}) is {fmt_bytes(nbytes)}, "
                         f"more than this machine's memory ({fmt_bytes(host_memory())})")
    want = desc.dtype
    if want is not None and value.dtype != want:
        if not (want.kind == "O" and value.dtype.kind in "OUS"):
            raise ValueError(f"input {name!r}: expected {dtypes.type_name(want)}, got "
                             f"{dtypes.type_name(value.dtype) if value.dtype in dtypes._NP_TO_ONNX else value.dtype}")
    if desc.shape is not None:
        if value.ndim != len(desc.shape):
            raise ValueError(f"input {name!r}: expected rank {len(desc.shape)} {fmt_shape(desc.shape)}, "
                             f"got rank {value.ndim} {list(value.shape)}")
        for axis, (d, n) in enumerate(zip(desc.shape, value.shape)):
            if isinstance(d, int) and d != n:
                raise ValueError(f"input {name!r}: dimension {axis} must be {d} {fmt_shape(desc.shape)}, "
                                 f"got shape {list(value.shape)}")
            if isinstance(d, str):
                seen = symbols.setdefault(d, (n, name))
                if seen[0] != n:
                    raise ValueError(f"input {name!r}: dimension {axis} ({d!r}) is {n}, but {d!r} is "
                                     f"{seen[0]} in input {seen[1]!r}")


def host_memory() -> int:
    """Physical memory in bytes: no feed larger than this can be run (nor copied)."""
    global _HOST_MEMORY
    if _HOST_MEMORY is None:
        try:
            _HOST_MEMORY = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):  # not POSIX: no limit of our own
            _HOST_MEMORY = 1 << 62
    return _HOST_MEMORY


_HOST_MEMORY: int | None = None


def fmt_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if n < 1024 or unit == "EiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n} B"
        n /= 1024
    return f"{n} B"


def fmt_shape(shape) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def random_feed(sess: Any, rng: np.random.Generator) -> dict:
    """A feed for every input of `sess`: its fixed dims, 1 for symbolic or unknown ones; normal
    floats, random booleans, integers in [0, 4) (small, so they are valid indices and counts)."""
    feed = {}
    for arg in sess.get_inputs():
        desc = sess.model.graph.values[arg.name]
        shape = [d if isinstance(d, int) else 1 for d in (desc.shape or ())]
        dt = desc.dtype or np.dtype(np.float32)
        if dt.kind == "f":
            feed[arg.name] = rng.standard_normal(shape).astype(dt)
        elif dt.kind == "b":
            feed[arg.name] = rng.random(shape) < 0.5
        else:
            feed[arg.name] = rng.integers(0, 4, shape).astype(dt)
    return feed
