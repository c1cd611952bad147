"""ModelProto → (blueprint Graph, weights): parse, validate, fold Constant nodes.

The model comes out unbound: no node has its operator yet (``Node.op`` is None) and the values
carry only the types the model declares. The loader knows no operator (ir sits below ops):
vkml/ops/bind.py binds each node's operator class and infers the types through them.

Initializers become read-only NumPy views over the model's bytes where their encoding allows
(raw_data). A model named by path is first read once into private memory, and external data
tensors are read into arrays of their own: never memory-mapped, so a file changed or truncated
under a live session cannot change its weights or crash it (vkml/ir/model_files.py says why and what
it costs).
"""
from __future__ import annotations

import itertools
import math
import os
from collections import ChainMap
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np
import onnx
from onnx import AttributeProto, ModelProto, TensorProto, numpy_helper
from google.protobuf.message import DecodeError

from . import dtypes, model_files, onnx_wire, schemas
from .functions import Inliner
from ..errors import ModelError
from .graph import Graph, Node, TensorDesc, canonical_domain

MIN_IR, MAX_IR = 3, onnx.IR_VERSION
MAX_OPSET = onnx.defs.onnx_opset_version()
# Domains vkml knows, with the newest opset it accepts for each.
KNOWN_DOMAINS = {"": MAX_OPSET, "ai.onnx.ml": 5, "ai.onnx.preview.training": 1, "com.microsoft": 1}
MAX_NESTING = 64  # subgraphs (If/Loop/Scan bodies) inside subgraphs: deeper is a ModelError, not a RecursionError


@dataclass(eq=False)
class Model:
    """A loaded model: the blueprint graph and, separately, the constant data. As read_model
    returns it, unbound (see vkml/ops/bind.py)."""

    graph: Graph
    weights: dict[str, np.ndarray]  # initializers and folded Constant outputs of every graph
    opsets: dict[str, int]
    ir_version: int
    overridable: set[str] = field(default_factory=set)  # initializers a caller may feed
    producer: str = ""
    # What onnxruntime's get_modelmeta reports: graph_name, domain, description,
    # graph_description, version, custom_metadata_map.
    meta: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------- parsing
@dataclass
class Source:
    """A parsed model and where its bytes live (kept alive by the weights' views)."""

    proto: ModelProto
    base_dir: str | None  # the folder that external data is relative to
    buffer: Any = None  # the serialized model (a private copy of the file, or the caller's bytes)
    spans: dict[str, tuple[int, int]] = field(default_factory=dict)  # initializer → raw bytes


def parse(model: Any) -> Source:
    """Parse a path, bytes or ModelProto. Paths are read into private memory and bytes used in
    place: large raw initializers are split off before protobuf sees them (see onnx_wire)."""
    if isinstance(model, ModelProto):
        return Source(model, None)
    if isinstance(model, (bytes, bytearray, memoryview)):
        buffer, base = model, None
    elif isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        buffer = model_files.read_model_file(path)
        base = os.path.dirname(os.path.abspath(path))
    else:
        raise TypeError(f"model must be a path, bytes or onnx.ModelProto, not {type(model).__name__}")
    try:
        skeleton, spans = onnx_wire.split_model(buffer)
    except onnx_wire.WireError as e:
        raise ModelError(f"not a valid ONNX model (protobuf wire format: {e})") from None
    proto = ModelProto()
    try:
        proto.ParseFromString(skeleton)
    except (DecodeError, RuntimeError, ValueError) as e:
        raise ModelError(f"not a valid ONNX model (protobuf decoding failed: {e})") from e
    if not proto.HasField("graph") and not proto.opset_import:
        raise ModelError("not a valid ONNX model: no graph and no opset_import (empty or foreign bytes?)")
    return Source(proto, base, buffer, spans)


def tensor_to_array(t: TensorProto, base_dir: str | None, where: str,
                    span: tuple[Any, int, int] | None = None) -> np.ndarray:
    """A read-only array over the tensor's bytes: a view when raw or external, else converted.

    span (buffer, offset, length): the raw data was split off the protobuf (onnx_wire)."""
    try:
        dtype = dtypes.np_dtype(t.data_type)
    except KeyError:
        raise ModelError(f"{where}: tensor {t.name!r} has unsupported data type {t.data_type}") from None
    shape = tuple(t.dims)
    count = _element_count(shape, dtype, f"{where}: tensor {t.name!r}")
    if span is not None:
        buf, offset, length = span
        if length != count * dtype.itemsize or dtype.kind == "O" or _packed(t.data_type):
            raise ModelError(f"{where}: tensor {t.name!r} has {length} bytes of raw data, "
                             f"expected {count * dtype.itemsize} for shape {list(shape)} of {dtype.name}")
        arr = np.frombuffer(buf, dtype=dtype, count=count, offset=offset)
    elif t.data_location == TensorProto.EXTERNAL:
        arr = _external(t, base_dir, dtype, count, where)
    elif t.HasField("raw_data") and dtype.kind != "O" and dtype.itemsize * 8 >= 8 and not _packed(t.data_type):
        if len(t.raw_data) != count * dtype.itemsize:
            raise ModelError(
                f"{where}: tensor {t.name!r} has {len(t.raw_data)} bytes of raw data, "
                f"expected {count * dtype.itemsize} for shape {list(shape)} of {dtype.name}"
            )
        arr = np.frombuffer(t.raw_data, dtype=dtype, count=count)
    else:
        try:
            arr = numpy_helper.to_array(t)
        except Exception as e:  # the protobuf's content is inconsistent
            raise ModelError(f"{where}: cannot decode tensor {t.name!r}: {e}") from e
        if arr.dtype != dtype and dtype.kind != "O":
            arr = arr.astype(dtype)
        if arr.size != count:
            raise ModelError(f"{where}: tensor {t.name!r} has {arr.size} values, shape {list(shape)} needs {count}")
    arr = arr.reshape(shape)
    if arr.flags.writeable:
        arr.flags.writeable = False
    return arr


def _packed(elem_type: int) -> bool:
    return elem_type in (TensorProto.INT4, TensorProto.UINT4) or elem_type in {
        getattr(TensorProto, n, -1) for n in ("FLOAT4E2M1", "INT2", "UINT2")
    }


def _element_count(shape: tuple[int, ...], dtype: np.dtype, where: str) -> int:
    """Elements of a tensor's dims; negative dims and sizes past int64 are ModelErrors."""
    bad = [d for d in shape if d < 0]
    if bad:
        raise ModelError(f"{where} has negative dimension {bad[0]} in shape {list(shape)}")
    count = math.prod(shape)
    if math.prod(d for d in shape if d) * max(dtype.itemsize, 1) > np.iinfo(np.int64).max:
        raise ModelError(f"{where}: shape {list(shape)} of {dtype.name} overflows int64 bytes")
    return count


def _external(t: TensorProto, base_dir: str | None, dtype: np.dtype, count: int, where: str) -> np.ndarray:
    """External data, read into an array of its own (relative to the working directory for a
    model given as bytes or a ModelProto)."""
    if _packed(t.data_type):
        raise ModelError(f"{where}: tensor {t.name!r}: packed 2/4-bit external data is not supported")
    info = {e.key: e.value for e in t.external_data}
    return model_files.read_external(os.getcwd() if base_dir is None else base_dir, info, dtype, count,
                                     f"{where}: tensor {t.name!r}")


def type_to_desc(tp: onnx.TypeProto) -> TensorDesc:
    which = tp.WhichOneof("value")
    if which == "tensor_type" or which == "sparse_tensor_type":
        tt = getattr(tp, which)
        try:
            dtype = dtypes.np_dtype(tt.elem_type) if tt.elem_type else None
        except KeyError:
            dtype = None
        shape = None
        if tt.HasField("shape"):
            # A negative dim_value (Paddle2ONNX writes -1 for a batch dim) is unknown, as in onnxruntime.
            shape = tuple(
                (d.dim_value if d.dim_value >= 0 else None) if d.HasField("dim_value") else (d.dim_param or None)
                for d in tt.shape.dim
            )
        return TensorDesc(dtype, shape)
    if which == "sequence_type":
        return TensorDesc(None, None, "sequence", type_to_desc(tp.sequence_type.elem_type))
    if which == "optional_type":
        return TensorDesc(None, None, "optional", type_to_desc(tp.optional_type.elem_type))
    if which == "map_type":
        return TensorDesc(None, None, "map", type_to_desc(tp.map_type.value_type))
    return TensorDesc(None, None)


# ---------------------------------------------------------------- graphs
class _Builder:
    def __init__(self, src: Source):
        proto = src.proto
        self.src = src
        self.base_dir = src.base_dir
        self.opsets = {canonical_domain(o.domain): o.version for o in proto.opset_import}
        self.weights: dict[str, np.ndarray] = {}
        self.inliner = Inliner(proto.functions)
        self.unnamed = itertools.count()
        self.nesting = 0  # subgraph level being built

    def graph(self, g: onnx.GraphProto, outer: Mapping[str, TensorDesc], top: bool) -> tuple[Graph, set[str]]:
        """Build one graph; outer is the enclosing scope (a ChainMap, never copied: linear load)."""
        where = f"graph {g.name!r}"
        values: dict[str, TensorDesc] = {}
        constants: set[str] = set()
        keys: dict[str, str] = {}
        for t in g.initializer:
            span = self.src.spans.get(t.name) if top else None
            if span is not None:
                span = (self.src.buffer, *span)
            arr = tensor_to_array(t, self.base_dir, where, span)
            self._add_weight(t.name, arr, where, constants, keys)
            values[t.name] = TensorDesc(arr.dtype, arr.shape)
        for sp in g.sparse_initializer:
            name = sp.values.name
            dense = _sparse_to_dense(sp, self.base_dir, where)
            self._add_weight(name, dense, where, constants, keys)
            values[name] = TensorDesc(dense.dtype, dense.shape)
        inputs = []
        seen_inputs = set()
        for vi in g.input:
            if not vi.name:
                raise ModelError(f"{where}: an input has an empty name")
            if vi.name in seen_inputs:
                raise ModelError(f"{where}: input {vi.name!r} is declared twice")
            seen_inputs.add(vi.name)
            inputs.append(vi.name)
            declared = type_to_desc(vi.type)
            if vi.name not in values:
                values[vi.name] = declared
        if top:
            self.overridable = {n for n in inputs if n in constants}
        declared_types = {vi.name: type_to_desc(vi.type) for vi in itertools.chain(g.value_info, g.output)}
        protos = self.inliner.expand(g.node) if self.inliner.functions else list(g.node)

        nodes: list[Node] = []
        produced: dict[str, str] = {}
        # Subgraphs may read any value of this graph (the toposort orders them after it).
        node_outputs = {o: TensorDesc(None, None) for p in protos for o in p.output if o}
        for p in protos:
            name = p.name or f"{p.op_type}_{next(self.unnamed)}"
            domain = canonical_domain(p.domain)
            if domain not in self.opsets:
                if domain in KNOWN_DOMAINS:
                    raise ModelError(f"node {name!r} ({p.op_type}): domain {p.domain!r} is not in the model's opset_import")
                raise ModelError(f"node {name!r} ({p.op_type}): unknown domain {p.domain!r}")
            schemas.check_node(p, name, domain, self.opsets[domain])
            for o in p.output:
                if not o:
                    continue
                if o in produced or o in constants or o in seen_inputs:
                    first = produced.get(o, "a graph input or initializer")
                    raise ModelError(f"node {name!r} ({p.op_type}): output {o!r} is already produced by {first!r}")
                produced[o] = name
            if domain == "" and p.op_type == "Constant":
                w = self._fold_constant(p, name, where, constants, keys)
                values[p.output[0]] = TensorDesc(w.dtype, w.shape)
                continue
            # A subgraph sees this graph's values through a ChainMap of these, never a per-node copy.
            scope = (values, node_outputs, outer)
            attrs = {a.name: self._attr(a, name, scope) for a in p.attribute}
            nodes.append(Node(name, p.op_type, domain, list(p.input), list(p.output), attrs,
                              self.opsets[domain]))
        nodes = _toposort(nodes, ChainMap(values, outer), where)
        used_outer = sorted({i for n in nodes for i in _reads(n) if i and i not in produced and i not in values})
        for o in g.output:
            if not o.name:
                raise ModelError(f"{where}: an output has an empty name")
            if o.name not in produced and o.name not in values and o.name not in outer:
                raise ModelError(f"{where}: output {o.name!r} is produced by no node, input or initializer")
        graph = Graph(g.name, inputs, [o.name for o in g.output], nodes, values, constants, used_outer, keys)
        graph.values.update({k: v for k, v in declared_types.items() if k not in graph.values})
        return graph, set(declared_types)

    def _add_weight(self, name: str, arr: np.ndarray, where: str, constants: set[str],
                    keys: dict[str, str]) -> None:
        """Store a constant; a name that another graph (a sibling subgraph) already used gets a
        unique key in Model.weights, recorded in this graph's weight_keys."""
        if not name:
            raise ModelError(f"{where}: an initializer (or a Constant's output) has an empty name")
        if name in constants:
            raise ModelError(f"{where}: initializer {name!r} is defined twice")
        constants.add(name)
        key = name
        n = 0
        while key in self.weights:
            n += 1
            key = f"{name}@{n}"
        if key != name:
            keys[name] = key
        self.weights[key] = arr

    def _fold_constant(self, p: onnx.NodeProto, name: str, where: str, constants: set[str],
                       keys: dict[str, str]) -> np.ndarray:
        if len(p.attribute) != 1 or len(p.output) != 1:
            raise ModelError(f"node {name!r} (Constant): needs exactly one value attribute and one output")
        a = p.attribute[0]
        kind = a.name
        if kind == "value":
            arr = tensor_to_array(a.t, self.base_dir, f"node {name!r}")
        elif kind == "sparse_value":
            arr = _sparse_to_dense(a.sparse_tensor, self.base_dir, f"node {name!r}")
        elif kind in ("value_float", "value_floats"):
            arr = np.array(a.f if kind == "value_float" else list(a.floats), np.float32)
        elif kind in ("value_int", "value_ints"):
            arr = np.array(a.i if kind == "value_int" else list(a.ints), np.int64)
        elif kind in ("value_string", "value_strings"):
            vals = a.s.decode() if kind == "value_string" else [s.decode() for s in a.strings]
            arr = np.array(vals, dtype=object)
        else:
            raise ModelError(f"node {name!r} (Constant): unknown attribute {kind!r}")
        if arr.flags.writeable:
            arr.flags.writeable = False
        self._add_weight(p.output[0], arr, where, constants, keys)
        return arr

    def _attr(self, a: AttributeProto, node: str, scope: tuple[Mapping[str, TensorDesc], ...]) -> Any:
        """The attribute's Python value; scope: the mappings a subgraph reads names from, innermost first."""
        t = a.type
        if a.ref_attr_name:
            raise ModelError(f"node {node!r}: attribute {a.name!r} refers to {a.ref_attr_name!r} outside a function")
        if t == AttributeProto.FLOAT:
            return float(a.f)
        if t == AttributeProto.INT:
            return int(a.i)
        if t == AttributeProto.STRING:
            return a.s.decode("utf-8", "replace")
        if t == AttributeProto.FLOATS:
            return [float(x) for x in a.floats]
        if t == AttributeProto.INTS:
            return [int(x) for x in a.ints]
        if t == AttributeProto.STRINGS:
            return [s.decode("utf-8", "replace") for s in a.strings]
        if t == AttributeProto.TENSOR:
            return tensor_to_array(a.t, self.base_dir, f"node {node!r}")
        if t == AttributeProto.TENSORS:
            return [tensor_to_array(x, self.base_dir, f"node {node!r}") for x in a.tensors]
        if t == AttributeProto.SPARSE_TENSOR:
            return _sparse_to_dense(a.sparse_tensor, self.base_dir, f"node {node!r}")
        if t in (AttributeProto.GRAPH, AttributeProto.GRAPHS):
            if self.nesting >= MAX_NESTING:
                raise ModelError(f"node {node!r}: attribute {a.name!r}: subgraphs nest more than {MAX_NESTING} deep")
            self.nesting += 1
            try:
                if t == AttributeProto.GRAPH:
                    return self.graph(a.g, ChainMap(*scope), top=False)[0]
                return [self.graph(g, ChainMap(*scope), top=False)[0] for g in a.graphs]
            finally:
                self.nesting -= 1
        if t == AttributeProto.TYPE_PROTO:
            return type_to_desc(a.tp)
        if t == AttributeProto.TYPE_PROTOS:
            return [type_to_desc(x) for x in a.type_protos]
        raise ModelError(f"node {node!r}: attribute {a.name!r} has undefined type {t}")


def _sparse_to_dense(sp: onnx.SparseTensorProto, base_dir: str | None, where: str) -> np.ndarray:
    """The dense array of a sparse tensor; every inconsistency is a ModelError naming it."""
    what = f"{where}: sparse tensor {sp.values.name!r}"
    values = tensor_to_array(sp.values, base_dir, where).reshape(-1)
    idx = tensor_to_array(sp.indices, base_dir, where)
    shape = tuple(sp.dims)
    count = _element_count(shape, values.dtype, what)
    if idx.dtype.kind not in "iu":
        raise ModelError(f"{what}: indices must be integers, not {idx.dtype.name}")
    idx = idx.astype(np.int64)
    if idx.shape == (values.size,):
        flat = idx
    elif idx.shape == (values.size, len(shape)):
        if idx.size and ((idx < 0).any() or (idx >= np.array(shape, np.int64)).any()):
            raise ModelError(f"{what} has indices out of range for shape {list(shape)}")
        flat = np.ravel_multi_index(tuple(idx.T), shape) if idx.size else np.zeros(0, np.int64)
    else:
        raise ModelError(f"{what}: indices of shape {list(idx.shape)} do not fit {values.size} values of "
                         f"rank {len(shape)}")
    if flat.size and (flat.min() < 0 or flat.max() >= count):
        raise ModelError(f"{what} has indices out of range for shape {list(shape)}")
    try:  # zeros (or empty strings), in pages the system hands out as they are written
        dense = np.full(count, "", object) if values.dtype.kind == "O" else np.zeros(count, values.dtype)
    except MemoryError:
        raise ModelError(f"{what}: shape {list(shape)} is too large to make dense") from None
    dense[flat] = values
    dense = dense.reshape(shape)
    dense.flags.writeable = False
    return dense


def _reads(n: Node) -> list[str]:
    """Inputs plus what subgraphs read from the enclosing scope."""
    names = [i for i in n.inputs if i]
    for v in n.attrs.values():
        for g in v if isinstance(v, list) else [v]:
            if isinstance(g, Graph):
                names.extend(g.outer)
    return names


def _toposort(nodes: list[Node], known: Mapping[str, Any], where: str) -> list[Node]:
    """Kahn's algorithm, stable for already-sorted input; names dangling inputs and cycles."""
    producer = {o: i for i, n in enumerate(nodes) for o in n.outputs if o}
    indeg = [0] * len(nodes)
    succ: list[list[int]] = [[] for _ in nodes]
    for i, n in enumerate(nodes):
        for name in set(_reads(n)):
            if name in producer:
                j = producer[name]
                if j == i:
                    raise ModelError(f"node {n.name!r} ({n.op_type}) reads its own output {name!r}")
                succ[j].append(i)
                indeg[i] += 1
            elif name not in known:
                raise ModelError(
                    f"node {n.name!r} ({n.op_type}): input {name!r} is not a graph input, initializer "
                    f"or output of any node ({where})"
                )
    import heapq

    ready = [i for i, d in enumerate(indeg) if d == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append(nodes[i])
        for j in succ[i]:
            indeg[j] -= 1
            if indeg[j] == 0:
                heapq.heappush(ready, j)
    if len(order) != len(nodes):
        stuck = [nodes[i].name for i, d in enumerate(indeg) if d > 0]
        raise ModelError(f"{where} has a cycle through node(s) {stuck[:10]}")
    return order


# ---------------------------------------------------------------- entry point
def read_model(model: Any) -> Model:
    """Parse and validate a path, bytes or ModelProto: every problem is a ModelError naming where
    it is. The model is unbound (vkml/ops/bind.py: bind, or load_model for both steps)."""
    src = parse(model)
    proto = src.proto
    if not MIN_IR <= proto.ir_version <= MAX_IR:
        raise ModelError(f"IR version {proto.ir_version} is out of the supported range {MIN_IR}..{MAX_IR}")
    if not proto.opset_import:
        raise ModelError("the model has no opset_import")
    if not proto.HasField("graph"):
        raise ModelError("the model has no graph")
    b = _Builder(src)
    for dom, ver in b.opsets.items():
        if dom not in KNOWN_DOMAINS and (dom, ) and not any(f.domain == dom for f in proto.functions):
            continue  # checked per node: only an error if a node uses it
        if dom in KNOWN_DOMAINS and not 1 <= ver <= KNOWN_DOMAINS[dom]:
            raise ModelError(f"opset {ver} of domain {dom or 'ai.onnx'!r} is out of the supported range 1..{KNOWN_DOMAINS[dom]}")
    b.overridable = set()
    b.inliner.check(proto.graph)
    graph, _ = b.graph(proto.graph, {}, top=True)
    meta = {"graph_name": proto.graph.name, "domain": proto.domain, "description": proto.doc_string,
            "graph_description": proto.graph.doc_string, "version": int(proto.model_version),
            "custom_metadata_map": {p.key: p.value for p in proto.metadata_props}}
    return Model(graph, b.weights, b.opsets, proto.ir_version, b.overridable, proto.producer_name, meta)
