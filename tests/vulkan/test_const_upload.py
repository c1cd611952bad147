"""Constants a slot needs are uploaded once, in pieces copied by several threads when they are
big and the memory is mapped (vkml/runtime/slots.py ConstCache.prefetch): every byte lands."""
from __future__ import annotations

import numpy as np

from vkml.runtime.slots import PARALLEL_UPLOAD_BYTES, UPLOAD_PIECE, ConstCache


def test_prefetch_uploads_every_byte_once(dev):
    rng = np.random.default_rng(0)
    arrays = {f"w{i}": rng.standard_normal(n).astype(dt) for i, (n, dt) in enumerate(
        [(3 * UPLOAD_PIECE // 4 + 7, np.float32), (1, np.float32), (0, np.float32),
         (PARALLEL_UPLOAD_BYTES // 8 + 3, np.float16), (12345, np.int64)])}
    assert sum(a.nbytes for a in arrays.values()) > PARALLEL_UPLOAD_BYTES  # the threaded path
    cache = ConstCache()
    cache.prefetch(dev, list(arrays.items()))
    for name, a in arrays.items():
        t = cache.get(dev, name, a)
        assert t.shape == a.shape and t.dtype == a.dtype
        np.testing.assert_array_equal(t.numpy(), a)
    first = cache.get(dev, "w0", arrays["w0"])
    cache.prefetch(dev, list(arrays.items()))  # cached: nothing uploaded again
    assert cache.get(dev, "w0", arrays["w0"]) is first


def test_small_prefetch_is_serial_and_exact(dev):
    a = np.arange(1000, dtype=np.float32)
    cache = ConstCache()
    cache.prefetch(dev, [("a", a)])
    np.testing.assert_array_equal(cache.get(dev, "a", a).numpy(), a)
