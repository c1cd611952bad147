"""Backend test cases vkml does not pass, each with the reason. Regexes over test names.

Keep this honest: remove an entry the moment its case passes. To see what fails without the
list: `python tests/conformance/node_suite.py --failures` (it ignores this file).
"""

SKIPS: dict[str, str] = {
    # --- not runnable here
    r"^test_(bvlc_alexnet|densenet121|inception_v[12]|resnet50|shufflenet|squeezenet|vgg19|zfnet512)_":
        "real models are downloaded at test time (no network in CI)",
    # --- behaviour that cannot match
    r"^test_bernoulli(_double|_seed)?(_expanded)?_":
        "random samples: the expected values come from onnx's own NumPy RNG stream, which no "
        "other generator reproduces (onnxruntime skips these too)",
    r"^test_attention_4d_causal_fp16_expanded_":
        "the expected output was computed with float16 intermediate rounding in the expanded "
        "Softmax; vkml accumulates float16 in float32 (more accurate), off by one fp16 ulp in 2 of 192 values",
    # --- not implemented (yet)
    r"^test_image_decoder_":
        "ImageDecoder needs JPEG/PNG/TIFF/WebP/JPEG 2000 codecs, which are not among vkml's dependencies",
    r"^test_gradient_of_add":
        "ai.onnx.preview.training Gradient differentiates the surrounding graph; not implemented",
    r"^test_loop16_seq_none_":
        "vkml's output equals the expected one, but onnx's Runner.assert_similar_outputs cannot "
        "compare a sequence holding 0-d tensors (it calls len() on them): errors for any backend",
}


def _host_wraps_narrow_casts() -> bool:
    """Whether this host's ml_dtypes wraps an out-of-range float -> int4 cast, as vkml does (CPU
    device and GPU kernels). onnx computes the expected outputs of its Cast cases to int4, uint4,
    int2 and uint2 with ml_dtypes when the cases load, and ONNX leaves such casts undefined
    ("fixed point: undefined if OOR"): ml_dtypes' C conversion wrapped on the hosts CI ran on and
    gave 0 on an AVX2 AMD EPYC host (2026-12-01), so there the expected values are not the spec's."""
    import ml_dtypes
    import numpy as np

    with np.errstate(all="ignore"):
        return int(np.array([9.0, -9.0], np.float32).astype(ml_dtypes.int4).astype(np.int8)[0]) == -7


# Cases skipped on some hosts only (included in SKIPS there); they run entirely on the GPU
# elsewhere, so the GPU suite's bar counts them out where they are skipped.
HOST_SKIPS: dict[str, str] = {}
if not _host_wraps_narrow_casts():
    HOST_SKIPS[r"^test_cast(like)?_FLOAT(16)?_to_U?INT[24](_expanded)?(_cpu)?$"] = (
        "out-of-range casts to 4- and 2-bit integers are undefined (ONNX), and this host's ml_dtypes, "
        "which computes the expected values, does not wrap them as vkml does (skipped on such hosts only)")
SKIPS.update(HOST_SKIPS)

