# cython: language_level=3
"""Compute pipelines: described cheaply, compiled apart, cached per (shader, bindings, push
size, spec constants) on the Device, compiled through the device's persistent VkPipelineCache.

Compiling (vkCreateComputePipelines) is the expensive part of a model's first run on NVIDIA, so
it is split from describing: Device.pipeline() returns a Pipeline whose layout is ready and
whose code is compiled by Pipeline.compile(), by compile_pipelines() for many at once on
threads (the driver call runs without the GIL), or on first use by a recorder.

Every vkml pipeline has one descriptor set (set 0) of storage buffers at bindings
0..n-1 and at most one push-constant range at offset 0. With VK_KHR_push_descriptor the
set layout is a push-descriptor layout (bindings are pushed at record time); otherwise the
recorder allocates descriptor sets from its own pool.

With VKML_PIPELINE_STATS (and VK_KHR_pipeline_executable_properties) pipelines are compiled with
statistics captured, and Pipeline.statistics() reads them back: what the driver's compiler made
of the shader (registers, binary size, shared and local memory), for tuning.
"""
import os
import struct
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from libc.stdint cimport uint32_t
from libc.stdlib cimport calloc, free
from libc.string cimport memchr, memset

from vkml.vulkan.vkapi cimport *
from vkml.vulkan._device cimport Device
from vkml.vulkan._instance cimport check

from vkml.vulkan import reflect as _reflect
from vkml.vulkan import shaders as _shaders

MAX_BINDINGS = 32
PORTABLE_PUSH_BYTES = 128  # the Vulkan minimum of maxPushConstantsSize


cdef class Pipeline:
    """A compute pipeline and its layout; get one with Device.pipeline(...)."""

    def __cinit__(self):
        self.handle = 0

    def _release(self):
        if self.handle and self.device is not None and self.device.handle != NULL:
            self.device.fn.vkDestroyPipeline(self.device.handle, self.handle, NULL)
        self.handle = 0

    @property
    def alive(self) -> bool:
        return self.handle != 0

    @property
    def compiled(self) -> bool:
        return self.handle != 0

    cpdef int compile(self) except -1:
        """Compile this pipeline (once; later calls and other threads waiting on it return
        when it is done). The driver's compiler runs without the GIL."""
        if self.handle:
            return 0
        with self.lock:
            if self.handle:
                return 0
            if self.code is None:
                raise RuntimeError(f"pipeline {self.shader} was released")
            _compile(self)
        return 0

    def statistics(self) -> list[dict]:
        """What the driver's compiler made of this pipeline, one dict per executable:
        {"name", "description", "subgroup_size", "stats": {name: int, float or bool}}. Empty
        when the device does not capture statistics (VKML_PIPELINE_STATS, and the driver must
        offer VK_KHR_pipeline_executable_properties) or the pipeline is not compiled yet."""
        cdef Device dev = self.device
        if not self.handle or dev is None or not dev.pipeline_stats:
            return []
        dev.ensure_open()
        return _executables(dev, self.handle)

    def groups_for(self, size_t n) -> int:
        """Workgroups along x to cover n invocations (at least 1, capped by the device)."""
        lx = self.local_size[0]
        g = max(1, (n + lx - 1) // lx)
        return min(g, self.device.max_group_count[0])

    def __repr__(self):
        return (f"<Pipeline {self.shader} bindings={self.bindings!r} push={self.push_size} "
                f"spec={self.spec} local={self.local_size}>")


def _spec_bytes(tuple spec) -> bytes:
    out = bytearray()
    for i, v in enumerate(spec):
        if isinstance(v, bool):
            out += struct.pack("<I", int(v))
        elif isinstance(v, int):
            if not -(1 << 31) <= v < (1 << 32):
                raise ValueError(f"specialization constant {i} = {v} does not fit in 32 bits")
            out += struct.pack("<i" if v < 0 else "<I", v)
        elif isinstance(v, float):
            out += struct.pack("<f", v)
        else:
            raise TypeError(f"specialization constant {i} must be bool, int or float, not {type(v).__name__}")
    return bytes(out)


cdef tuple _layouts(Device dev, uint32_t nbindings, uint32_t push_size):
    """(set layout, pipeline layout), shared by every pipeline of the same shape."""
    cdef VkDescriptorSetLayout set_layout = 0
    cdef VkPipelineLayout layout = 0
    cdef VkDescriptorSetLayoutBinding b[32]
    cdef VkDescriptorSetLayoutCreateInfo sci
    cdef VkPushConstantRange pr
    cdef VkPipelineLayoutCreateInfo lci
    cdef uint32_t i
    entry = dev.set_layouts.get(nbindings)
    if entry is None:
        memset(&sci, 0, sizeof(sci))
        for i in range(nbindings):
            memset(&b[i], 0, sizeof(VkDescriptorSetLayoutBinding))
            b[i].binding = i
            b[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER
            b[i].descriptorCount = 1
            b[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT
        sci.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO
        sci.flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR if dev.push_descriptors else 0
        sci.bindingCount = nbindings
        sci.pBindings = b
        check(dev.fn.vkCreateDescriptorSetLayout(dev.handle, &sci, NULL, &set_layout),
              b"vkCreateDescriptorSetLayout")
        entry = (set_layout, {})
        dev.set_layouts[nbindings] = entry
    set_layout = entry[0]
    if push_size not in entry[1]:
        memset(&lci, 0, sizeof(lci))
        memset(&pr, 0, sizeof(pr))
        pr.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT
        pr.offset = 0
        pr.size = push_size
        lci.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO
        lci.setLayoutCount = 1
        lci.pSetLayouts = &set_layout
        lci.pushConstantRangeCount = 1 if push_size else 0
        lci.pPushConstantRanges = &pr
        check(dev.fn.vkCreatePipelineLayout(dev.handle, &lci, NULL, &layout), b"vkCreatePipelineLayout")
        entry[1][push_size] = layout
    return set_layout, entry[1][push_size]


def create_pipeline(Device dev, str shader, str bindings, int push_size, tuple spec) -> Pipeline:
    """Describe and compile one pipeline (Device.pipeline() caches; call that instead)."""
    cdef Pipeline p = describe_pipeline(dev, shader, bindings, push_size, spec)
    p.compile()
    return p


def describe_pipeline(Device dev, str shader, str bindings, int push_size, tuple spec) -> Pipeline:
    """A pipeline with its layout made and its SPIR-V checked, not yet compiled (cheap)."""
    dev.ensure_open()
    cdef uint32_t nb = len(bindings)
    if not bindings or any(c not in "rwx" for c in bindings):
        raise ValueError(f"bindings must be a non-empty string of r/w/x (one per binding), not {bindings!r}")
    limit = min(MAX_BINDINGS, dev.limits["max_per_stage_storage_buffers"])
    if dev.push_descriptors:
        limit = min(limit, dev.limits["max_push_descriptors"])
    if nb > limit:
        raise ValueError(f"{shader}: {nb} storage buffers exceed {dev.name}'s limit of {limit}")
    if push_size < 0 or push_size % 4 or push_size > min(dev.max_push_constants_size, PORTABLE_PUSH_BYTES):
        raise ValueError(f"{shader}: push constant size {push_size} must be a multiple of 4 and at most "
                         f"{min(dev.max_push_constants_size, PORTABLE_PUSH_BYTES)} bytes")
    code = _shaders.load(shader)
    info = _reflect.reflect(code)
    if info.bindings and list(info.bindings) != list(range(nb)):
        raise ValueError(f"{shader} uses bindings {list(info.bindings)} of set 0 but bindings={bindings!r} "
                         f"declares {nb}")
    spec_data = _spec_bytes(spec)
    local = info.local_size_with(spec)
    if local[0] * local[1] * local[2] > dev.limits["max_compute_work_group_invocations"]:
        raise ValueError(f"{shader}: workgroup {local} exceeds {dev.name}'s "
                         f"{dev.limits['max_compute_work_group_invocations']} invocations")

    if len(spec) > 64:
        raise ValueError("at most 64 specialization constants")
    cdef Pipeline p = Pipeline.__new__(Pipeline)
    p.device = dev
    p.shader = shader
    p.bindings = bindings
    p.nbindings = nb
    p.push_size = push_size
    p.spec = spec
    p.local_size = local
    for i, c in enumerate(bindings):
        p.access[i] = 1 if c == "r" else (2 if c == "w" else 3)
    p.set_layout, p.layout = _layouts(dev, nb, push_size)

    p.code = code
    p.spec_data = spec_data
    p.lock = threading.Lock()
    return p


cdef int _compile(Pipeline p) except -1:
    cdef Device dev = p.device
    cdef bytes code = p.code
    cdef bytes spec_data = p.spec_data
    spec = p.spec
    cdef const unsigned char* code_p = code
    cdef const unsigned char* spec_p = spec_data
    cdef VkShaderModuleCreateInfo mci
    cdef VkShaderModule module = 0
    memset(&mci, 0, sizeof(mci))
    mci.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO
    mci.codeSize = len(code)
    mci.pCode = <const uint32_t*>code_p
    check(dev.fn.vkCreateShaderModule(dev.handle, &mci, NULL, &module), b"vkCreateShaderModule")

    cdef VkSpecializationMapEntry entries[64]
    cdef VkSpecializationInfo si
    cdef uint32_t k
    for k in range(len(spec)):
        entries[k].constantID = k
        entries[k].offset = 4 * k
        entries[k].size = 4
    si.mapEntryCount = len(spec)
    si.pMapEntries = entries
    si.dataSize = len(spec_data)
    si.pData = spec_p

    cdef VkComputePipelineCreateInfo ci
    memset(&ci, 0, sizeof(ci))
    ci.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO
    ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO
    ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT
    ci.stage.module = module
    ci.stage.pName = b"main"
    ci.stage.pSpecializationInfo = &si if len(spec) else NULL
    ci.layout = p.layout
    ci.basePipelineIndex = -1
    if dev.pipeline_stats:  # (the flag needs the extension, enabled only then)
        ci.flags = VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR
    cdef VkResult r
    cdef VkPipeline handle = 0
    t0 = time.perf_counter()
    with nogil:
        r = dev.fn.vkCreateComputePipelines(dev.handle, dev.pipeline_cache, 1, &ci, NULL, &handle)
    p.create_seconds = time.perf_counter() - t0
    dev.fn.vkDestroyShaderModule(dev.handle, module, NULL)
    check(r, b"vkCreateComputePipelines")
    p.handle = handle  # published last: readers test it without the lock
    p.code = None
    p.spec_data = None
    return 0


cdef str _text(const char* p, size_t cap):
    """A fixed-size char array of the driver as text (up to its NUL, never past `cap`)."""
    cdef const char* end = <const char*>memchr(p, 0, cap)
    cdef size_t n = <size_t>(end - p) if end != NULL else cap
    return p[:n].decode("utf-8", "replace")


cdef list _executables(Device dev, VkPipeline handle):
    """Pipeline.statistics(): the pipeline's executables (a compute pipeline usually has one)."""
    cdef VkPipelineInfoKHR info
    cdef VkPipelineExecutablePropertiesKHR* props = NULL
    cdef uint32_t n = 0, i
    cdef VkResult r
    memset(&info, 0, sizeof(info))
    info.sType = VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR
    info.pipeline = handle
    check(dev.fn.vkGetPipelineExecutablePropertiesKHR(dev.handle, &info, &n, NULL),
          b"vkGetPipelineExecutablePropertiesKHR")
    if n == 0:
        return []
    props = <VkPipelineExecutablePropertiesKHR*>calloc(n, sizeof(VkPipelineExecutablePropertiesKHR))
    if props == NULL:
        raise MemoryError()
    try:
        for i in range(n):
            props[i].sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR
        r = dev.fn.vkGetPipelineExecutablePropertiesKHR(dev.handle, &info, &n, props)
        if r != VK_INCOMPLETE:  # (fewer than asked: n says how many were written)
            check(r, b"vkGetPipelineExecutablePropertiesKHR")
        return [{"name": _text(props[i].name, 256), "description": _text(props[i].description, 256),
                 "subgroup_size": props[i].subgroupSize, "stats": _statistics(dev, handle, i)}
                for i in range(n)]
    finally:
        free(props)


cdef object _value(const VkPipelineExecutableStatisticKHR* s):
    """A statistic's value as Python: its union member chosen by its format."""
    if s.format == VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR:
        return bool(s.value.b32)
    if s.format == VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR:
        return s.value.i64
    if s.format == VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR:
        return s.value.f64
    return s.value.u64  # UINT64 (and a format newer than this code)


cdef dict _statistics(Device dev, VkPipeline handle, uint32_t index):
    """{name: value} of executable `index` of the pipeline."""
    cdef VkPipelineExecutableInfoKHR info
    cdef VkPipelineExecutableStatisticKHR* stats = NULL
    cdef uint32_t n = 0, i
    cdef VkResult r
    memset(&info, 0, sizeof(info))
    info.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR
    info.pipeline = handle
    info.executableIndex = index
    check(dev.fn.vkGetPipelineExecutableStatisticsKHR(dev.handle, &info, &n, NULL),
          b"vkGetPipelineExecutableStatisticsKHR")
    if n == 0:
        return {}
    stats = <VkPipelineExecutableStatisticKHR*>calloc(n, sizeof(VkPipelineExecutableStatisticKHR))
    if stats == NULL:
        raise MemoryError()
    try:
        for i in range(n):
            stats[i].sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR
        r = dev.fn.vkGetPipelineExecutableStatisticsKHR(dev.handle, &info, &n, stats)
        if r != VK_INCOMPLETE:
            check(r, b"vkGetPipelineExecutableStatisticsKHR")
        return {_text(stats[i].name, 256): _value(&stats[i]) for i in range(n)}
    finally:
        free(stats)


def compile_pipelines(pipelines, threads: int | None = None) -> float:
    """Compile every pipeline of `pipelines` not compiled yet, on up to `threads` threads at
    once (default: the CPU count; the driver compiles each on the calling thread). Returns the
    wall seconds. The first failure is raised after the others finished."""
    todo = []
    seen = set()
    for p in pipelines:
        if not (<Pipeline>p).handle and id(p) not in seen:
            seen.add(id(p))
            todo.append(p)
    if not todo:
        return 0.0
    t0 = time.perf_counter()
    n = min(len(todo), threads or os.cpu_count() or 1)
    if n <= 1:
        for p in todo:
            (<Pipeline>p).compile()
    else:
        with ThreadPoolExecutor(n, thread_name_prefix="vkml-compile") as ex:
            futures = [ex.submit(Pipeline.compile, p) for p in todo]
        for f in futures:
            f.result()
    return time.perf_counter() - t0
