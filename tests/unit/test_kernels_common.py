"""vkml/kernels/common.py's dtype -> device-feature table and require_dtypes: the one place that
says what a dtype needs of a device, for the kernels that take float64 and bfloat16 as for the
rest, with messages that name the dtype and the missing feature."""
from __future__ import annotations

import types

import ml_dtypes
import numpy as np
import pytest

from vkml.kernels import cumulative, einsum, elementwise, matmul, rotary, softmax
from vkml.kernels.common import BF16, DTYPE_FEATURES, DTYPE_NAMES, F64, VULKAN_FEATURE, require_dtypes
from vkml.kernels.registry import TensorSpec, Unsupported, get_kernel

EVERY = frozenset(VULKAN_FEATURE)


def _dev(features, name="stand-in GPU"):
    return types.SimpleNamespace(name=name, features=frozenset(features), max_storage_buffer_range=1 << 30)


def test_the_table_covers_every_dtype_and_names_every_feature():
    assert set(DTYPE_NAMES) <= set(DTYPE_FEATURES)
    assert DTYPE_FEATURES[F64] == ("fp64",)  # doubles only: no 64-bit integers
    assert DTYPE_FEATURES[BF16] == ("storage_16bit",)  # stored as 16 bits, computed in float32
    assert F64 not in DTYPE_NAMES and BF16 not in DTYPE_NAMES  # not every kernel's: only where allowed
    for feats in DTYPE_FEATURES.values():
        assert set(feats) <= set(VULKAN_FEATURE)


@pytest.mark.parametrize("allowed", [matmul.DTYPES, softmax.EXTRA, einsum.SUFFIX, rotary.DTYPES,
                                     cumulative.TAKES, elementwise.EXTRA],
                         ids=["matmul", "softmax", "einsum", "rotary", "cumulative", "elementwise"])
def test_kernels_allow_only_dtypes_the_table_knows(allowed):
    assert set(allowed) <= set(DTYPE_FEATURES)


@pytest.mark.parametrize("dtype,feature,vulkan", [(F64, "fp64", "shaderFloat64"),
                                                  (BF16, "storage_16bit", "storageBuffer16BitAccess"),
                                                  (np.dtype(np.int64), "int64", "shaderInt64"),
                                                  (np.dtype(np.int8), "storage_8bit", "storageBuffer8BitAccess"),
                                                  (np.dtype(np.float16), "storage_16bit", "storageBuffer16BitAccess")])
def test_refuses_a_dtype_whose_feature_the_device_lacks(dtype, feature, vulkan):
    allowed = (*DTYPE_NAMES, F64, BF16)
    with pytest.raises(Unsupported) as e:
        require_dtypes(_dev(EVERY - {feature}, "bare GPU"), dtype, allowed=allowed, what="SomeOp")
    assert str(e.value) == f"SomeOp: {dtype} needs {feature} ({vulkan}), which bare GPU lacks"
    require_dtypes(_dev(EVERY), dtype, allowed=allowed)
    require_dtypes(_dev({feature}), dtype, allowed=allowed)  # that one feature is all it needs


def test_float64_and_bfloat16_only_where_the_kernel_allows_them():
    for dt in (F64, BF16, np.dtype(ml_dtypes.float8_e4m3fn)):
        with pytest.raises(Unsupported, match=f"no GPU shaders for dtype {dt}"):
            require_dtypes(_dev(EVERY), dt)
    require_dtypes(_dev(EVERY), F64, BF16, allowed=(F64, BF16))
    with pytest.raises(Unsupported, match="no GPU shaders for dtype bfloat16"):
        require_dtypes(_dev(EVERY), BF16, allowed=(F64,))
    require_dtypes(_dev(()), np.float32, np.int32, np.uint32)  # need nothing


@pytest.mark.parametrize("op,attrs,n", [("MatMul", {}, 2), ("Softmax", {"_opset": 13}, 1), ("Add", {}, 2),
                                        ("Einsum", {"equation": "ij,jk->ik"}, 2)])
def test_kernels_refuse_through_the_table(op, attrs, n):
    """Kernels that take float64 and bfloat16 refuse them on a device without what the table says."""
    k = get_kernel(op)
    for dt, feature, vulkan in ((F64, "fp64", "shaderFloat64"), (BF16, "storage_16bit", "storageBuffer16BitAccess")):
        specs = [TensorSpec((4, 4), dt)] * n
        with pytest.raises(Unsupported, match=rf"{dt} needs {feature} \({vulkan}\), which bare GPU lacks"):
            k.check(_dev(EVERY - {feature}, "bare GPU"), op, attrs, specs)
