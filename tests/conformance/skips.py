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
