"""GPU kernels: per-op glue between ONNX nodes and vkml.vulkan pipelines.

    k = vkml.kernels.get_kernel("Add")
    k.check(device, "Add", attrs, [TensorSpec, ...])      # raises Unsupported(reason)
    specs = k.infer("Add", attrs, in_specs)               # output shapes/dtypes
    k.record(recorder, "Add", attrs, in_tensors, out_tensors, consts)

See docs/vulkan.md, "Writing a kernel".
"""
from .registry import Kernel, TensorSpec, Unsupported, get_kernel, register, supported_ops
from . import elementwise  # noqa: F401  (registers its kernels)
from . import normalization, pool, reduce, softmax  # noqa: F401  (reductions, pooling, normalizations)
from . import gather, movement, pad, resize, views  # noqa: F401  (data movement)
from . import loss  # noqa: F401  (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss)
from . import cumulative  # noqa: F401  (CumSum, CumProd)
from . import attention  # noqa: F401  (Attention)
from . import gru, lstm, topk  # noqa: F401  (GRU, LSTM, TopK)
from . import rnn  # noqa: F401  (RNN)
from . import dft  # noqa: F401  (DFT)
from . import onehot  # noqa: F401  (OneHot, EyeLike)
from . import max_unpool, reverse_sequence  # noqa: F401  (MaxUnpool, ReverseSequence)
from . import roialign  # noqa: F401  (RoiAlign)
from . import gridsample  # noqa: F401  (GridSample)
from . import lrn  # noqa: F401  (LRN)
from . import quantize  # noqa: F401  (QuantizeLinear, DequantizeLinear)
from . import qlinear  # noqa: F401  (MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv, DynamicQuantizeLinear)
from . import conv, matmul  # noqa: F401  (Conv, ConvTranspose, MatMul, Gemm)
from . import scatter  # noqa: F401  (ScatterND, ScatterElements, Scatter)
from . import einsum, col2im, center_crop_pad  # noqa: F401  (Einsum, Col2Im, CenterCropPad)
from . import fused  # noqa: F401  (vkml.compile.fusion's chains)
from . import rotary, swiglu  # noqa: F401  (RotaryEmbedding, SwiGLU)
from . import deform_conv, affine_grid, tensor_scatter  # noqa: F401  (DeformConv, AffineGrid, TensorScatter)
from . import causal_conv, flex_attention, linear_attention  # noqa: F401  (CausalConvWithState, FlexAttention, LinearAttention)
from . import nms, nonzero  # noqa: F401  (NonMaxSuppressionPadded, NonZeroPadded: vkml/compile/ragged.py)

__all__ = ["Kernel", "TensorSpec", "Unsupported", "get_kernel", "register", "supported_ops"]
