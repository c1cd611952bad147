"""Epilogue fusion for GPU plans: a Conv followed by a residual Add and/or an activation (Relu, Clip
with constant bounds as in ReLU6, SiLU written as x * Sigmoid(x), Sigmoid, HardSigmoid, HardSwish,
LeakyRelu) becomes one FusedConv node, whose GPU kernel applies them before its store
(shaders/include/vkml_epilogue.glsl); a Gemm or MatMul (float32 or float16) with the same followers
becomes one FusedGemm (the SIMT, small and cooperative-matrix GEMM shaders and the split-K reduce
pass all take the epilogue); a GEMM also takes a constant bias Add along the last axis first (what
transformer exports write after each MatMul of a 3-D activation, which fold_bias's 2-D Gemm form
does not cover) and GELU in the erf form exporters write (Div(x, sqrt 2) -> Erf -> Add 1 -> Mul x
-> Mul 0.5). A 2x2 or 3x3 MaxPool of the same stride after a small Conv (the direct route:
LeNet-style CNNs such as mnist-12) joins it too, when no residual is added
(kernels/conv.fusable_pool). Before a pointwise Conv, a Mul of its input by one value per channel
(and image), the gate of a squeeze-excitation block, joins it as a scale the GEMM applies while
it reads the input (kernels/conv.scalable_input). A GlobalAveragePool of a depthwise Conv's
(fused) output, a squeeze-excitation block's, becomes the FusedConv's second output
(kernels/conv.fusable_mean): the convolution's workgroups average the planes they compute.

Why: on a GPU each op is a dispatch and a barrier. In a ResNet-50 at batch 1 the 49 Relu and 16
Add dispatches after convolutions were 0.35 of its 2.5 GPU ms on the H100
(bench/results/checks/h100-2026-11-23-profile-resnet50-splitk.txt); in BERT-base at seq 128, 72
bias Adds, 24 residual Adds and 60 GELU ops of ~5.5 us each were 0.9 of its 2.9 GPU ms.

The patterns, on one input signature's live nodes (concrete shapes): Conv -> Relu, Conv -> Add,
Conv -> Add -> Relu (and Clip in Relu's place wherever its bounds are constants, or Sigmoid,
HardSigmoid, HardSwish, LeakyRelu; SiLU: the value read by exactly a Sigmoid and a Mul of it with
the Sigmoid's output), where each intermediate value has that one reader and is no graph output,
the Add's other input has the Conv output's shape and dtype (no broadcasting), the dtype is float32
or float16 (each step rounded to it) and the Conv's geometry is one the GPU kernel takes. The fused
node keeps the results: on the CPU it replays the original operators, on the GPU each step rounds
to the output type as the separate ops do.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from ..ir.graph import Node, TensorDesc, _graphs_in
from ..ops.fused import BINARY_CODES, OP_TYPE as FUSED_ELEMENTWISE, UNARY_CODES
from ..kernels.conv import FUSED_CONV, fusable_mean, fusable_pool, fusable_route, scalable_input
from ..kernels.elementwise import UNARY
from ..kernels.matmul import FUSED_GEMM
from ..kernels.gemm import (EPI_CLIP, EPI_DIV, EPI_GELU, EPI_GELU_TANH, EPI_HARD_SIGMOID, EPI_HARD_SWISH,
                            EPI_LEAKY_RELU, EPI_RELU, EPI_RESIDUAL, EPI_SIGMOID, EPI_SILU, MAX_BATCH_RANK)
from ..kernels.matmul import matmul_problem
from ..ops.registry import Op
from .rewrite import fold_chain, only_reader, other_input, readers_of, rewritten, transpose_perm

DOMAIN = "ai.vkml"
# Off: a Mul before a pointwise Conv stays a dispatch of its own (A/Bs: bench/probe_knobs.py
# "compile.epilogue.INPUT_SCALE:False")
INPUT_SCALE = True
# Off: a GlobalAveragePool after a depthwise Conv stays a dispatch of its own ("compile.epilogue.FUSE_MEAN:False")
FUSE_MEAN = True
F32 = np.dtype(np.float32)
F16 = np.dtype(np.float16)
# The one-input activations an epilogue applies, each as the unary shader computes it. Those with
# parameters carry what the unary kernel would push (kernels/elementwise.UNARY) in Clip's bounds'
# place: none of them fuses after a GEMM's Div, whose divisor is there.
ACTIVATIONS = {"Relu": EPI_RELU, "Sigmoid": EPI_SIGMOID, "HardSigmoid": EPI_HARD_SIGMOID,
               "HardSwish": EPI_HARD_SWISH, "LeakyRelu": EPI_LEAKY_RELU}


class FusedConv(Op):
    """[Mul of X by a per-channel scale] Conv [+ Add residual] [+ an activation: ACTIVATIONS, Clip
    or SiLU] [+ MaxPool]. Inputs: X, W, B ("" if none), R ("" if none), S (absent if none).
    `replay`: (conv, add or None, activation or None, max pool or None), the original operators
    run in order on the CPU; an activation is ("unary", op, extra inputs) or ("silu", Sigmoid,
    Mul, whether the Mul reads x first); `pool`: the max pool's window side (0: none); `scale`:
    (the Mul, whether it reads S first) or None; `mean`: a GlobalAveragePool of the result,
    a second output, or None."""

    op_type, domain, since = FUSED_CONV, DOMAIN, 1
    attrs = {"epilogue": None, "replay": None, "fused": None, "clip": None, "pool": 0, "scale": None,
             "mean": None, "auto_pad": "NOTSET", "dilations": None, "group": 1, "kernel_shape": None, "pads": None,
             "strides": None}

    def check(self) -> None:
        self._conv, self._add, self._act, self._pool = self.replay

    def infer(self, inputs: list[TensorDesc], consts: list) -> list[TensorDesc]:
        out = self._conv.infer(list(inputs[:3]), list(consts[:3]))
        out = out if self._pool is None else self._pool.infer(out, [None])
        return out if self.mean is None else out + self.mean.infer(out, [None])

    def run(self, x, w, b=None, r=None, s=None) -> list[np.ndarray]:
        if self.scale is not None:
            mul, first = self.scale
            x = mul.run(s, x)[0] if first else mul.run(x, s)[0]
        y = self._conv.run(x, w, b)[0] if b is not None else self._conv.run(x, w)[0]
        if self._add is not None:
            y = self._add.run(y, r)[0]
        y = _activate(self._act, y)
        if self._pool is not None:
            y = self._pool.run(y)[0]
        return [y] if self.mean is None else [y, self.mean.run(y)[0]]


class FusedGemm(Op):
    """[Transpose of A or B] Gemm or MatMul (`base`) [+ Add bias] [/ constant] [+ Add residual]
    [+ an activation: ACTIVATIONS, Clip, SiLU or GELU]. Inputs: A, B (a MatMul's: before the
    Transposes `a_perm` / `b_perm`, whose operators `views` replays), C ("" if none: Gemm's C,
    or a MatMul's bias), R ("" if none). `replay`: (gemm or matmul, add or None, activation or
    None), as FusedConv's, a GELU as ("gelu", [(op, operand order)] of its steps); `bias`: a
    MatMul's bias Add and whether it reads the bias first, else None; `div`: the Div's operator
    and divisor, else None."""

    op_type, domain, since = FUSED_GEMM, DOMAIN, 1
    attrs = {"base": None, "epilogue": None, "replay": None, "fused": None, "clip": None, "alpha": 1.0,
             "beta": 1.0, "transA": 0, "transB": 0, "bias": None, "a_perm": None, "b_perm": None,
             "views": None, "div": None}

    def check(self) -> None:
        self._mm, self._add, self._act = self.replay
        self._views = self.views or (None, None)

    def infer(self, inputs: list[TensorDesc], consts: list) -> list[TensorDesc]:
        n = 3 if self.base == "Gemm" and len(inputs) > 2 and inputs[2] is not None else 2
        ins = list(inputs[:n])
        for i, t in enumerate(self._views):
            if t is not None:
                ins[i] = t.infer([ins[i]], [None])[0]
        return self._mm.infer(ins, list(consts[:n]))

    def run(self, a, b, c=None, r=None) -> list[np.ndarray]:
        ta, tb = self._views
        a = a if ta is None else ta.run(a)[0]
        b = b if tb is None else tb.run(b)[0]
        if self.bias is not None:
            y = self._mm.run(a, b)[0]
            add, first = self.bias
            y = add.run(c, y)[0] if first else add.run(y, c)[0]
        else:
            y = self._mm.run(a, b, c)[0] if c is not None else self._mm.run(a, b)[0]
        if self.div is not None:
            y = self.div[0].run(y, self.div[1])[0]
        if self._add is not None:
            y = self._add.run(y, r)[0]
        return [_activate(self._act, y)]


def _activate(act, y: np.ndarray) -> np.ndarray:
    """The replay of an epilogue's activation on the CPU: the original operators in order."""
    if act is None:
        return y
    if act[0] == "unary":
        return act[1].run(y, *act[2])[0]
    if act[0] == "silu":
        sg = act[1].run(y)[0]
        return act[2].run(y, sg)[0] if act[3] else act[2].run(sg, y)[0]
    t = y
    for op, args in act[1]:  # ("gelu", [(op, operand template)]): "y" the input, "t" the running value
        t = op.run(*[y if x == "y" else t if x == "t" else x for x in args])[0]
    return t


def _single(node: Node, op_type: str) -> bool:
    return node.op_type == op_type and node.domain in ("", "ai.onnx") and not _graphs_in(node.attrs)


def _clip_bounds(node: Node, consts: Mapping[str, np.ndarray], dtype=F32) -> tuple[tuple[float, float], tuple] | None:
    """((lo, hi), the bound arrays Clip.run takes) of a Clip of `dtype` whose bounds are known
    now (attributes before opset 11, constant inputs after), else None."""
    if node.opset < 11:
        lo, hi = float(node.attrs.get("min", -np.inf)), float(node.attrs.get("max", np.inf))
        return (lo, hi), ()
    args, bounds = [], [-np.inf, np.inf]
    for k, name in enumerate(node.inputs[1:3]):
        if not name:
            args.append(None)
            continue
        v = consts.get(name)
        if v is None or v.dtype != dtype or v.size != 1:
            return None
        args.append(v)
        bounds[k] = float(v.reshape(-1)[0])
    while args and args[-1] is None:
        args.pop()
    return (bounds[0], bounds[1]), tuple(args)


def _silu(name: str, readers, values, y: TensorDesc, keep, replace) -> tuple[Node, Node] | None:
    """(Sigmoid, Mul) when `name` is read by exactly a Sigmoid of it and a Mul of it with that
    Sigmoid's output (its only reader), all of y's shape and dtype, else None."""
    rs = readers.get(name, ())
    if len(rs) != 2 or None in rs:
        return None
    sig = next((r for r in rs if _single(r, "Sigmoid")), None)
    if sig is None or len(sig.inputs) != 1 or sig.name in keep or id(sig) in replace:
        return None
    mul = only_reader(readers, sig.outputs[0])
    if mul is None or mul is sig or not _single(mul, "Mul") or mul.name in keep or id(mul) in replace \
            or sorted(mul.inputs) != sorted([name, sig.outputs[0]]) or [r for r in rs if r is not sig] != [mul]:
        return None
    if values.get(sig.outputs[0]) != y or values.get(mul.outputs[0]) != y:
        return None
    return sig, mul


def _scalar(consts, name: str, dtype) -> float | None:
    v = consts.get(name) if name else None
    return float(v.reshape(-1)[0]) if v is not None and v.size == 1 and v.dtype == dtype else None


def _gelu(name: str, readers, values, y: TensorDesc, keep, replace, consts):
    """GELU as exporters write it (torch's erf form): Div(v, c1) -> Erf -> Add(., 1) -> Mul(v, .)
    -> Mul(., c3), where v is read by exactly that Div and that Mul, every value of y's shape and
    dtype and each link the only reader of the one before. (nodes, (c1, c3), replay), else None."""
    rs = readers.get(name, ())
    if len(rs) != 2 or None in rs:
        return None
    div = next((r for r in rs if _single(r, "Div")), None)
    if div is None or len(div.inputs) != 2 or div.inputs[0] != name:
        return None
    c1 = _scalar(consts, div.inputs[1], y.dtype)
    nodes, t = [div], div.outputs[0]
    for op_type in ("Erf", "Add", "Mul", "Mul"):
        r = only_reader(readers, t)
        if r is None or not _single(r, op_type) or values.get(r.outputs[0]) != y:
            return None
        nodes.append(r)
        t = r.outputs[0]
    erf, add, mul1, mul2 = nodes[1:]
    if c1 is None or [r for r in rs if r is not div] != [mul1] or any(n.name in keep or id(n) in replace for n in nodes):
        return None
    one = _scalar(consts, other_input(add, erf.outputs[0]), y.dtype)
    c3 = _scalar(consts, other_input(mul2, mul1.outputs[0]), y.dtype)
    if one != 1.0 or c3 is None or sorted(mul1.inputs) != sorted([name, add.outputs[0]]) \
            or len(add.inputs) != 2 or len(mul2.inputs) != 2 or values.get(div.outputs[0]) != y:
        return None
    replay = [(div.op, ("y", consts[div.inputs[1]]))] + [(n.op, _args(n, name, prev.outputs[0], consts))
                                                         for prev, n in zip(nodes, nodes[1:])]
    return nodes, (c1, c3), replay


def _args(node: Node, x: str, prev: str, consts) -> tuple:
    """A replay template of `node`'s inputs: "y" for the epilogue's input, "t" for the value
    the step before made, else the constant."""
    return tuple("t" if i == prev else "y" if i == x else consts[i] for i in node.inputs)


def _gelu_tanh(name: str, readers, values, y: TensorDesc, keep, replace, consts):
    """GELU's tanh form as torch exports it (GPT-2's): x*x -> * x -> * c1 -> x + . -> * c2 ->
    Tanh -> + 1 -> x * . -> * 0.5, the middle three as written (float16) or as the fusion pass's
    FusedElementwise (float32), each link the only reader of the one before and x read by exactly
    the four that take it. (nodes, (c1, c2), replay), else None."""
    if y.dtype not in (F32, F16):
        return None
    rs = readers.get(name, ())
    if None in rs or len(rs) != 5:  # (x * x reads it twice)
        return None
    m1 = next((r for r in rs if _single(r, "Mul") and list(r.inputs) == [name, name]), None)
    if m1 is None:
        return None

    def link(t: str, want: str):
        r = only_reader(readers, t)
        ok = r is not None and values.get(r.outputs[0]) == y and r.name not in keep and id(r) not in replace \
            and len(r.outputs) == 1 and (r.op_type == want if want == FUSED_ELEMENTWISE else _single(r, want))
        return r if ok else None

    nodes = [m1]
    for want in ("Mul", "Mul", "Add"):
        nodes.append(link(nodes[-1].outputs[0], want))
        if nodes[-1] is None:
            return None
    fe = link(nodes[-1].outputs[0], FUSED_ELEMENTWISE)
    middle = [fe] if fe is not None else []
    if fe is None:
        for want in ("Mul", "Tanh", "Add"):
            middle.append(link((middle or nodes)[-1].outputs[0], want))
            if middle[-1] is None:
                return None
    nodes += middle
    for want in ("Mul", "Mul"):
        nodes.append(link(nodes[-1].outputs[0], want))
        if nodes[-1] is None:
            return None
    m2, m3, add, m5, m6 = nodes[1], nodes[2], nodes[3], nodes[-2], nodes[-1]
    if {id(r) for r in rs} != {id(m1), id(m2), id(add), id(m5)} or m1.name in keep or id(m1) in replace:
        return None
    if sorted(m2.inputs) != sorted([name, m1.outputs[0]]) or sorted(add.inputs) != sorted([name, m3.outputs[0]]) \
            or sorted(m5.inputs) != sorted([name, middle[-1].outputs[0]]):
        return None
    c1 = _scalar(consts, other_input(m3, m2.outputs[0]), y.dtype)
    half = _scalar(consts, other_input(m6, m5.outputs[0]), y.dtype)
    if fe is not None:
        prog = [(int(r[0]), float(r[1])) for r in np.asarray(fe.attrs["program"])]
        ok = len(prog) == 3 and prog[0][0] == BINARY_CODES["Mul"][0] and prog[1][0] == UNARY_CODES["Tanh"] \
            and prog[2] == (BINARY_CODES["Add"][0], 1.0)
        c2 = prog[0][1] if ok else None
    else:
        mul_c2, tanh, plus1 = middle
        c2 = _scalar(consts, other_input(mul_c2, add.outputs[0]), y.dtype)
        ok = len(mul_c2.inputs) == 2 and len(plus1.inputs) == 2 and \
            _scalar(consts, other_input(plus1, tanh.outputs[0]), y.dtype) == 1.0
    if not ok or c1 is None or c2 is None or half != 0.5:
        return None
    replay = [(m1.op, ("y", "y"))] + [(n.op, _args(n, name, prev.outputs[0], consts))
                                      for prev, n in zip(nodes, nodes[1:])]
    return nodes, (c1, c2), replay


def _bias(head: Node, y: TensorDesc, values, next_node, replace, consts):
    """(Add, bias value name, whether the Add reads the bias first) when a constant bias along
    the last axis follows a Gemm without C or a MatMul that is one 2-D GEMM (B a matrix), else None."""
    if head.op_type == "Gemm":
        if len(head.inputs) > 2 and head.inputs[2]:
            return None
    else:
        ad, bd = values.get(head.inputs[0]), values.get(head.inputs[1])
        try:
            g, _ = matmul_problem(ad.shape, bd.shape)
        except ValueError:
            return None
        if g.batch != 1 or len(bd.shape) != 2:
            return None
    add = next_node(head.outputs[0])
    if add is None or not _single(add, "Add") or len(add.inputs) != 2 or id(add) in replace \
            or values.get(add.outputs[0]) != y:
        return None
    first = add.inputs[0] != head.outputs[0]
    c = add.inputs[0] if first else add.inputs[1]
    cv = consts.get(c) if c else None
    n = y.shape[-1] if y.shape else 1
    if cv is None or cv.dtype != y.dtype or cv.ndim > len(y.shape) or cv.size not in (1, n) \
            or any(d != 1 for d in cv.shape[:-1]):
        return None
    return add, c, first


def _tail(head: Node, y: TensorDesc, values, readers, next_node, keep, replace, consts, gemm: bool = False):
    """What follows `head` and can run in its epilogue: (chain from head on, residual value or "",
    EPI_* flags, Clip bounds (GELU: its constants; Div: its divisor; HardSigmoid, HardSwish,
    LeakyRelu: their alpha, beta) or None, activation replay or None, bias (Add, value, bias first)
    or None, (Div, divisor) or None). `gemm`: a Gemm/MatMul head, which also takes a constant bias
    Add along the last axis first, then a division by a constant, and GELU."""
    chain, res, flags = [head], "", 0
    bias = _bias(head, y, values, next_node, replace, consts) if gemm else None
    if bias is not None:
        chain.append(bias[0])
    cur = chain[-1].outputs[0]
    nxt = next_node(cur)
    div = None  # (Div, divisor): a GEMM's division by a constant (attention's scores / sqrt(d))
    if gemm and nxt is not None and _single(nxt, "Div") and len(nxt.inputs) == 2 and nxt.inputs[0] == cur \
            and id(nxt) not in replace and values.get(nxt.outputs[0]) == y:
        c = _scalar(consts, nxt.inputs[1], y.dtype)
        if c is not None:
            div = (nxt, c)
            chain.append(nxt)
            flags |= EPI_DIV
            cur = nxt.outputs[0]
            nxt = next_node(cur)
    if nxt is not None and _single(nxt, "Add") and len(nxt.inputs) == 2 and id(nxt) not in replace:
        other = other_input(nxt, cur)
        od = values.get(other)
        if other and other != cur and od == y and values.get(nxt.outputs[0]) == y:
            chain.append(nxt)
            res, flags = other, EPI_RESIDUAL
            cur = nxt.outputs[0]
            nxt = next_node(cur)
        else:
            nxt = None
    clip, act = None, None
    if nxt is not None and id(nxt) not in replace and values.get(nxt.outputs[0]) == y:
        flag = next((f for t, f in ACTIVATIONS.items() if _single(nxt, t)), 0)
        params = UNARY[nxt.op_type][2] if flag else None
        if flag and len(nxt.inputs) == 1 and nxt.op is not None and (params is None or div is None):
            chain.append(nxt)
            flags |= flag
            act = ("unary", nxt.op, ())
            if params is not None:
                clip = tuple(float(v) for v in params(nxt.attrs))
        elif _single(nxt, "Clip") and len(nxt.outputs) == 1 and nxt.op is not None and div is None:
            got = _clip_bounds(nxt, consts, y.dtype)
            if got is not None:
                clip, args = got
                chain.append(nxt)
                flags |= EPI_CLIP
                act = ("unary", nxt.op, args)
    elif nxt is None:
        silu = None if flags & EPI_RESIDUAL else _silu(cur, readers, values, y, keep, replace)
        gelu = _gelu(cur, readers, values, y, keep, replace, consts) if gemm and silu is None and div is None else None
        tanh = _gelu_tanh(cur, readers, values, y, keep, replace, consts) \
            if gemm and silu is None and gelu is None and div is None else None
        if silu is not None:
            sig, mul = silu
            chain += [sig, mul]
            flags |= EPI_SILU
            act = ("silu", sig.op, mul.op, mul.inputs[0] == cur)
        elif gelu is not None or tanh is not None:
            nodes, clip, replay = gelu or tanh
            chain += nodes
            flags |= EPI_GELU if gelu is not None else EPI_GELU_TANH
            act = ("gelu", replay)
    if div is not None:
        clip = (div[1], 0.0)  # (the divisor travels where Clip's bounds would: no Clip or GELU then)
    return chain, res, flags, clip, act, bias, div


def fuse_epilogues(live: Sequence[Node], values: Mapping[str, TensorDesc], outputs: Sequence[str],
                   keep: set[str] | frozenset[str] = frozenset(), consts: Mapping[str, np.ndarray] | None = None
                   ) -> tuple[list[Node], dict[str, list[Node]]]:
    """(live nodes with Conv / Gemm / MatMul [+ Add] [+ activation] [+ MaxPool after a
    small Conv] patterns replaced, {fused name: originals}); `consts` gives Clip's bound inputs
    (without them only attribute bounds fuse)."""
    consts = consts or {}
    readers = readers_of(live, outputs)

    def next_node(name: str) -> Node | None:
        r = only_reader(readers, name)
        return r if r is not None and r.name not in keep else None

    replace: dict[int, Node | None] = {}
    fused: dict[str, list[Node]] = {}
    producers = {o: n for n in live for o in n.outputs if o}
    for head in live:
        if head.name in keep or id(head) in replace or len(head.outputs) != 1 or head.op is None:
            continue
        if _single(head, "Conv"):
            _fuse_conv(head, values, readers, next_node, keep, replace, fused, consts, producers)
        elif _single(head, "Gemm") or _single(head, "MatMul"):
            views = _transposed_operands(head, producers, values, readers, keep, replace) \
                if head.op_type == "MatMul" else (None, None)
            _fuse_gemm(head, values, readers, next_node, keep, replace, fused, consts, views)
    return rewritten(live, replace, fused)


def _transposed_operands(mm: Node, producers, values, readers, keep, replace) -> tuple:
    """For each MatMul operand: the Transpose that made it, when that Transpose has no other
    reader and the GEMM can read its input in place (a unit stride in the last two dims of the
    view: attention's head split (0, 2, 1, 3) and K's (0, 2, 3, 1)), else None."""
    found = []
    for name in mm.inputs[:2]:
        t = producers.get(name)
        d = values.get(t.inputs[0]) if t is not None and t.inputs else None
        ok = t is not None and _single(t, "Transpose") and t.name not in keep and id(t) not in replace \
            and t.op is not None and only_reader(readers, name) is mm and d is not None and d.static
        found.append((t, transpose_perm(t, len(d.shape))) if ok else None)
    if len(mm.inputs) < 2 or any(values.get(i) is None or not values[i].static for i in mm.inputs[:2]):
        return None, None
    shapes = [values[mm.inputs[i]].shape if f is None else values[f[0].inputs[0]].shape for i, f in enumerate(found)]
    def readable(trial, perms) -> bool:  # (batch strides that do not collapse count against the kernel's rank)
        try:
            g, _ = matmul_problem(*trial, *perms)
        except ValueError:
            return False
        return len(g.bshape) <= MAX_BATCH_RANK

    for i in range(2):  # (each alone: a view the GEMM cannot read stays a Transpose)
        if found[i] is None:
            continue
        perms = [None, None]
        perms[i] = found[i][1]
        trial = list(shapes)
        trial[1 - i] = values[mm.inputs[1 - i]].shape
        if not readable(trial, perms):
            found[i] = None
    if found[0] is not None and found[1] is not None and not readable(shapes, [found[0][1], found[1][1]]):
        found[1] = None
    return tuple(found)


def _input_scale(conv: Node, xd: TensorDesc, wd: TensorDesc, values, readers, producers, keep, replace):
    """(Mul, the scaled tensor, the per-channel scale, whether the Mul reads the scale first) when
    the Conv's input is a Mul of a tensor of that input's shape by one value per channel (and
    image), read by the Conv alone, and the GPU kernel can scale as it reads (conv.scalable_input:
    squeeze-excitation before a pointwise convolution, as in EfficientNet and MobileNetV3), else None."""
    mul = producers.get(conv.inputs[0])
    if mul is None or not _single(mul, "Mul") or len(mul.inputs) != 2 or mul.name in keep or id(mul) in replace \
            or mul.op is None or only_reader(readers, conv.inputs[0]) is not conv:
        return None
    for i in (0, 1):
        big, small = values.get(mul.inputs[i]), values.get(mul.inputs[1 - i])
        if big is None or small is None or not big.static or not small.static or big != xd \
                or small.dtype != xd.dtype:
            continue
        if scalable_input(conv.attrs, xd.shape, wd.shape, small.shape):
            return mul, mul.inputs[i], mul.inputs[1 - i], i == 1
    return None


def _fuse_conv(conv: Node, values, readers, next_node, keep, replace, fused, consts, producers) -> None:
    x, w = conv.inputs[0], conv.inputs[1] if len(conv.inputs) > 1 else ""
    y = values.get(conv.outputs[0])
    xd, wd = values.get(x), values.get(w)
    if not w or y is None or xd is None or wd is None or y.dtype not in (F32, F16) or not y.static \
            or not xd.static or not wd.static:
        return
    if not fusable_route("Conv", conv.attrs, xd.shape, wd.shape):
        return
    scale = _input_scale(conv, xd, wd, values, readers, producers, keep, replace) if INPUT_SCALE else None
    chain, res, flags, clip, act, _, _ = _tail(conv, y, values, readers, next_node, keep, replace, consts)
    pool, window = None, 0
    nxt = next_node(chain[-1].outputs[0])
    if nxt is not None and not flags & EPI_RESIDUAL and id(nxt) not in replace and _single(nxt, "MaxPool") \
            and len(nxt.inputs) == 1 and [o for o in nxt.outputs if o] == [nxt.outputs[0]] and nxt.op is not None:
        window = fusable_pool(conv.attrs, xd.shape, wd.shape, nxt.attrs, nxt.opset)
        if window:
            pool = nxt
            chain.append(nxt)
    mean = None
    if FUSE_MEAN and pool is None and scale is None and fusable_mean(conv.attrs, xd.shape, wd.shape):
        mean = _mean_reader(chain[-1].outputs[0], readers, keep, replace)
    if len(chain) == 1 and scale is None and mean is None:
        return
    add = chain[1] if flags & EPI_RESIDUAL else None
    ins = [x, w, conv.inputs[2] if len(conv.inputs) > 2 else "", res]
    if scale is not None:
        mul, ins[0], s, first = scale
        chain.insert(0, mul)
        ins.append(s)
    name = "+".join(n.name for n in chain + ([mean] if mean is not None else []))
    attrs = {k: v for k, v in conv.attrs.items()}
    attrs.update(epilogue=flags, replay=(conv.op, None if add is None else add.op, act,
                                         None if pool is None else pool.op),
                 fused=[n.name for n in chain], clip=clip, pool=window,
                 scale=None if scale is None else (scale[0].op, scale[3]),
                 mean=None if mean is None else mean.op)
    outs = [chain[-1].outputs[0]] + ([mean.outputs[0]] if mean is not None else [])
    node = Node(name, FUSED_CONV, DOMAIN, ins, outs, attrs, 1)
    node.op = FusedConv(node)
    # At the chain's last node: the residual may be computed after the Conv (a projection
    # shortcut), never after the Add that reads it. The pool, which reads only the result,
    # moves up to it.
    fold_chain(replace, fused, node, chain)
    if mean is not None:
        replace[id(mean)] = None
        fused[node.name].append(mean)


def _mean_reader(name: str, readers, keep, replace) -> Node | None:
    """A GlobalAveragePool (default domain, one output) among the readers of value `name`, that
    no other fusion took and no caller keeps."""
    for r in readers.get(name, ()):
        if r is not None and _single(r, "GlobalAveragePool") and r.name not in keep and id(r) not in replace \
                and list(r.inputs) == [name] and len(r.outputs) == 1 and r.op is not None:
            return r
    return None


def _fuse_gemm(mm: Node, values, readers, next_node, keep, replace, fused, consts, views=(None, None)) -> None:
    """A Gemm or MatMul (float32 or float16), the Transposes before it that it can read through
    (`views`: (Transpose, perm) or None per operand) and what _tail finds after it, as one FusedGemm."""
    a, b = mm.inputs[0], mm.inputs[1] if len(mm.inputs) > 1 else ""
    y = values.get(mm.outputs[0])
    ad, bd = values.get(a), values.get(b)
    if not b or y is None or ad is None or bd is None or y.dtype not in (F32, F16) or not y.static \
            or not ad.static or not bd.static or ad.dtype != y.dtype or bd.dtype != y.dtype:
        return
    chain, res, flags, clip, act, bias, div = _tail(mm, y, values, readers, next_node, keep, replace, consts,
                                                    gemm=True)
    va, vb = views
    if len(chain) == 1 and va is None and vb is None:
        return
    if va is not None:
        a = va[0].inputs[0]
    if vb is not None:
        b = vb[0].inputs[0]
    chain = [v[0] for v in (va, vb) if v is not None] + chain
    at = chain.index(mm)
    add = chain[at + 1 + (bias is not None) + (div is not None)] if flags & EPI_RESIDUAL else None
    c = mm.inputs[2] if mm.op_type == "Gemm" and len(mm.inputs) > 2 else ""
    if bias is not None:
        c = bias[1]
    attrs = {k: v for k, v in mm.attrs.items()}
    attrs.update(base=mm.op_type, epilogue=flags, replay=(mm.op, None if add is None else add.op, act),
                 fused=[n.name for n in chain], clip=clip, bias=None if bias is None else (bias[0].op, bias[2]),
                 a_perm=None if va is None else va[1], b_perm=None if vb is None else vb[1],
                 views=None if va is None and vb is None else (va and va[0].op, vb and vb[0].op),
                 div=None if div is None else (div[0].op, consts[div[0].inputs[1]]))
    if bias is not None:
        attrs["beta"] = 1.0  # (a Gemm without C: its beta never applied; the bias is added as is)
    node = Node("+".join(n.name for n in chain), FUSED_GEMM, DOMAIN, [a, b, c, res], [chain[-1].outputs[0]],
                attrs, 1)
    node.op = FusedGemm(node)
    fold_chain(replace, fused, node, chain)
