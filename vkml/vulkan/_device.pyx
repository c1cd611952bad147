# cython: language_level=3
"""An opened Vulkan device: its lanes of submission, enabled features.

A lane is a compute queue with a timeline semaphore of its own: every submission on a lane
signals the lane's next value, so "is work N done" is one integer comparison and waiting never
needs a fence. A device has VKML_QUEUES lanes (default 4) over as many queues of its compute
family as it offers (lanes share queues beyond that). Work on one queue is ordered by the
barriers that begin every command buffer, so runs that share a queue wait for each other; run
slots therefore take lanes in turn (take_lane) and the GPU overlaps runs of different lanes.
A lane's values only mean something on that lane: every submit, wait and completed() names it
(lane 0 by default, which also carries copy_now). Queues are externally synchronised: a pthread
mutex per queue is held only around vkQueueSubmit.
"""
import logging
import os
import threading
import time
import weakref

from cpython.exc cimport PyErr_CheckSignals
from libc.stdint cimport uint32_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memset
from posix.time cimport clock_gettime, timespec, CLOCK_MONOTONIC

from vkml.vulkan.vkapi cimport *
from vkml.vulkan._features cimport FeatureChain, feature_chain_init

cdef extern from *:
    """
    static inline void vkml_cpu_relax(void) {
    #if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
    #elif defined(__aarch64__)
        __asm__ __volatile__("yield");
    #endif
    }
    static inline int vkml_atomic_add(int* p, int v) { return __atomic_add_fetch(p, v, __ATOMIC_RELAXED); }
    """
    void vkml_cpu_relax() nogil
    int vkml_atomic_add(int* p, int v) nogil


cdef inline uint64_t _now_ns() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <uint64_t>ts.tv_sec * 1000000000ULL + <uint64_t>ts.tv_nsec
from vkml.vulkan._instance cimport Instance, check, check_messages

from vkml import config
from vkml.vulkan.errors import VulkanError, VulkanUnavailable
from vkml.vulkan.facts import compute_family, device_limits, enabled_features, usable_info

try:
    import fcntl
except ImportError:  # not POSIX: saves are still atomic, only not merged
    fcntl = None

_log = logging.getLogger("vkml")

cdef int _fork_gen = 0  # forks this process is a child of (forked_in_child)


def forked_in_child() -> None:
    """Called in a forked child (vkml.vulkan registers it): every Device opened before the fork
    refuses further use with an error that says so, and close() leaves its handles alone."""
    global _fork_gen
    _fork_gen += 1


cdef enum:
    API_1_2 = (1 << 22) | (2 << 12)
    API_1_3 = (1 << 22) | (3 << 12)

# Stages/accesses that vkml's commands use; barriers are expressed with these.
cdef VkFlags WORK_STAGES = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT
cdef VkFlags WORK_WRITES = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT
cdef VkFlags WORK_ACCESS = (VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT
                            | VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT)

PIPELINE_CACHE_HEADER = 32  # VkPipelineCacheHeaderVersionOne


def _wants_stats(dict raw) -> bool:
    """Whether a device opened now captures pipeline statistics: VKML_PIPELINE_STATS is on and
    the device offers VK_KHR_pipeline_executable_properties with its feature (a struct or
    extension the driver does not know must stay out of vkCreateDevice)."""
    return bool(config.pipeline_stats() and raw["feature_structs"]["pipeline_exec"]
                and raw["pipeline_executable_info"])


cdef void* _load(PFN_vkGetDeviceProcAddr g, VkDevice d, const char* name, const char* alt) noexcept:
    cdef void* p = <void*>g(d, name)
    if p == NULL and alt != NULL:
        p = <void*>g(d, alt)
    return p


cdef class Device:
    """An opened Vulkan device. Get one with vkml.vulkan.device(index) (shared per process)."""

    def __cinit__(self):
        self.handle = NULL
        self.closed = True
        self.pipeline_cache = 0
        self.lanes = NULL
        self.nlanes = 0
        self.nqueues = 0
        self.queue_locks = NULL
        self.next_lane = 0
        self.copy_pool = 0
        self.copy_cmd = NULL
        memset(&self.fn, 0, sizeof(DeviceFns))

    def __init__(self, Instance inst, int index):
        self.inst = inst
        self.index = index
        self.phys = inst.physical(index)
        self.name = f"vulkan:{index}"
        raw = inst.describe(index)
        self.info = usable_info(raw)
        self.spin_ns = <uint64_t>(config.wait_spin_us(self.info.device_type) * 1000.0)
        self.shared_spin_ns = <uint64_t>(config.SHARED_SPIN_US * 1000.0)
        self.spinners = 0
        self.fork_gen = _fork_gen
        self.pid = os.getpid()
        self.max_spinners = max(1, (os.cpu_count() or 2) // 4)
        self.pipelines = {}
        self.set_layouts = {}
        self.pipeline_lock = threading.RLock()
        self.copy_lock = threading.Lock()
        self.children = weakref.WeakSet()
        self._create(raw)
        self.closed = False
        try:
            self._create_timeline()
            self._load_pipeline_cache(raw)
            from vkml.vulkan._memory import Allocator
            self.allocator = Allocator(self)
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------ creation
    def _create(self, dict raw):
        structs = raw["feature_structs"]
        exts = set(raw["extensions"])
        api = raw["effective_api_version"]
        lim = raw["limits"]
        fams = raw["queue_families"]
        # (vkml/vulkan/facts.py: the same choices planning makes before the device is open)
        self.queue_family = compute_family(raw)
        want_lanes = config.queues()
        cdef uint32_t nqueues = max(1, min(want_lanes, fams[self.queue_family][1]))
        enabled = enabled_features(raw)

        cdef bint stats = _wants_stats(raw)

        cdef FeatureChain fc
        feature_chain_init(&fc, dict(structs, coop_matrix=structs["coop_matrix"] and "cooperative_matrix" in enabled,
                                     coop_matrix2=structs["coop_matrix2"] and "cooperative_matrix2" in enabled,
                                     pipeline_exec=stats))
        fc.f2.features.shaderInt64 = "int64" in enabled
        fc.f2.features.shaderInt16 = "int16" in enabled
        fc.f2.features.shaderFloat64 = "fp64" in enabled
        fc.f16s.storageBuffer16BitAccess = "storage_16bit" in enabled
        fc.f16s.storagePushConstant16 = "push_constant_16bit" in enabled
        fc.f8s.storageBuffer8BitAccess = "storage_8bit" in enabled
        fc.f16a.shaderFloat16 = "fp16_arithmetic" in enabled
        fc.f16a.shaderInt8 = "int8_arithmetic" in enabled
        fc.ftl.timelineSemaphore = 1
        fc.fmm.vulkanMemoryModel = "vulkan_memory_model" in enabled
        fc.fmm.vulkanMemoryModelDeviceScope = ("vulkan_memory_model_device_scope" in enabled
                                               and fc.fmm.vulkanMemoryModel)
        fc.fsgx.shaderSubgroupExtendedTypes = "subgroup_extended_types" in enabled
        fc.fsgs.subgroupSizeControl = "subgroup_size_control" in enabled
        fc.fsgs.computeFullSubgroups = "compute_full_subgroups" in enabled
        fc.fcm.cooperativeMatrix = "cooperative_matrix" in enabled
        if "cooperative_matrix2" in enabled:
            fc.fcm2.cooperativeMatrixWorkgroupScope = 1
            fc.fcm2.cooperativeMatrixFlexibleDimensions = 1
            fc.fcm2.cooperativeMatrixTensorAddressing = 1
        fc.fpe.pipelineExecutableInfo = stats

        want = []
        if api < API_1_2:
            want += ["VK_KHR_timeline_semaphore", "VK_KHR_storage_buffer_storage_class",
                     "VK_KHR_8bit_storage", "VK_KHR_shader_float16_int8", "VK_KHR_driver_properties",
                     "VK_KHR_vulkan_memory_model", "VK_KHR_shader_subgroup_extended_types"]
        if api < API_1_3:
            want.append("VK_EXT_subgroup_size_control")
        if "push_descriptor" in enabled:
            want.append("VK_KHR_push_descriptor")
        if "memory_budget" in enabled:
            want.append("VK_EXT_memory_budget")
        if "cooperative_matrix" in enabled:
            want.append("VK_KHR_cooperative_matrix")
        if "cooperative_matrix2" in enabled:
            want.append("VK_NV_cooperative_matrix2")
        if stats:
            want.append("VK_KHR_pipeline_executable_properties")
        want.append("VK_KHR_portability_subset")  # must be enabled where it exists (MoltenVK)
        ext_list = [e for e in dict.fromkeys(want) if e in exts]
        cdef list keep = [e.encode() for e in ext_list]
        cdef const char** names = <const char**>malloc(sizeof(char*) * (len(keep) + 1))
        for i, b in enumerate(keep):
            names[i] = <const char*>b

        cdef float priority[64]
        for i in range(nqueues):
            priority[i] = 1.0
        cdef VkDeviceQueueCreateInfo qci
        memset(&qci, 0, sizeof(qci))
        qci.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO
        qci.queueFamilyIndex = self.queue_family
        qci.queueCount = nqueues
        qci.pQueuePriorities = priority
        cdef VkDeviceCreateInfo dci
        memset(&dci, 0, sizeof(dci))
        dci.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO
        dci.pNext = &fc.f2
        dci.queueCreateInfoCount = 1
        dci.pQueueCreateInfos = &qci
        dci.enabledExtensionCount = len(keep)
        dci.ppEnabledExtensionNames = names
        cdef VkResult r
        cdef VkPhysicalDevice pd = self.phys
        cdef PFN_vkCreateDevice create = self.inst.fn.vkCreateDevice
        with nogil:
            r = create(pd, &dci, NULL, &self.handle)
        free(names)
        if r != VK_SUCCESS:
            self.handle = NULL
        check(r, b"vkCreateDevice")
        self.pipeline_stats = stats  # (_load_functions turns it off if the driver lacks a function)
        self._load_functions()
        self.queue_locks = <pthread_mutex_t*>malloc(sizeof(pthread_mutex_t) * nqueues)
        self.lanes = <Lane*>malloc(sizeof(Lane) * want_lanes)
        if self.queue_locks == NULL or self.lanes == NULL:
            raise MemoryError()
        memset(self.lanes, 0, sizeof(Lane) * want_lanes)
        for i in range(nqueues):
            pthread_mutex_init(&self.queue_locks[i], NULL)
        self.nqueues = nqueues
        for i in range(want_lanes):
            self.fn.vkGetDeviceQueue(self.handle, self.queue_family, i % nqueues, &self.lanes[i].queue)
            self.lanes[i].lock = &self.queue_locks[i % nqueues]
        self.nlanes = want_lanes

        if "push_descriptor" in enabled and self.fn.vkCmdPushDescriptorSetKHR == NULL:
            enabled.discard("push_descriptor")
        self.features = frozenset(enabled)
        self.push_descriptors = "push_descriptor" in enabled
        self.limits = device_limits(raw, self.queue_family)  # timestamp_valid_bits 0: none on our queue
        self.max_storage_buffer_range = lim["max_storage_buffer_range"]
        self.max_push_constants_size = lim["max_push_constants_size"]
        self.storage_alignment = lim["min_storage_buffer_offset_alignment"]
        for k in range(3):
            self.max_group_count[k] = lim["max_compute_work_group_count"][k]

    def _load_functions(self):
        cdef PFN_vkGetDeviceProcAddr g = self.inst.fn.vkGetDeviceProcAddr
        cdef VkDevice d = self.handle
        self.fn.vkDestroyDevice = <PFN_vkDestroyDevice>_load(g, d, b"vkDestroyDevice", NULL)
        self.fn.vkGetDeviceQueue = <PFN_vkGetDeviceQueue>_load(g, d, b"vkGetDeviceQueue", NULL)
        self.fn.vkDeviceWaitIdle = <PFN_vkDeviceWaitIdle>_load(g, d, b"vkDeviceWaitIdle", NULL)
        self.fn.vkQueueSubmit = <PFN_vkQueueSubmit>_load(g, d, b"vkQueueSubmit", NULL)
        self.fn.vkAllocateMemory = <PFN_vkAllocateMemory>_load(g, d, b"vkAllocateMemory", NULL)
        self.fn.vkFreeMemory = <PFN_vkFreeMemory>_load(g, d, b"vkFreeMemory", NULL)
        self.fn.vkMapMemory = <PFN_vkMapMemory>_load(g, d, b"vkMapMemory", NULL)
        self.fn.vkUnmapMemory = <PFN_vkUnmapMemory>_load(g, d, b"vkUnmapMemory", NULL)
        self.fn.vkCreateBuffer = <PFN_vkCreateBuffer>_load(g, d, b"vkCreateBuffer", NULL)
        self.fn.vkDestroyBuffer = <PFN_vkDestroyBuffer>_load(g, d, b"vkDestroyBuffer", NULL)
        self.fn.vkGetBufferMemoryRequirements = <PFN_vkGetBufferMemoryRequirements>_load(
            g, d, b"vkGetBufferMemoryRequirements", NULL)
        self.fn.vkBindBufferMemory = <PFN_vkBindBufferMemory>_load(g, d, b"vkBindBufferMemory", NULL)
        self.fn.vkCreateShaderModule = <PFN_vkCreateShaderModule>_load(g, d, b"vkCreateShaderModule", NULL)
        self.fn.vkDestroyShaderModule = <PFN_vkDestroyShaderModule>_load(g, d, b"vkDestroyShaderModule", NULL)
        self.fn.vkCreatePipelineCache = <PFN_vkCreatePipelineCache>_load(g, d, b"vkCreatePipelineCache", NULL)
        self.fn.vkDestroyPipelineCache = <PFN_vkDestroyPipelineCache>_load(g, d, b"vkDestroyPipelineCache", NULL)
        self.fn.vkGetPipelineCacheData = <PFN_vkGetPipelineCacheData>_load(g, d, b"vkGetPipelineCacheData", NULL)
        self.fn.vkMergePipelineCaches = <PFN_vkMergePipelineCaches>_load(g, d, b"vkMergePipelineCaches", NULL)
        self.fn.vkCreateComputePipelines = <PFN_vkCreateComputePipelines>_load(
            g, d, b"vkCreateComputePipelines", NULL)
        self.fn.vkDestroyPipeline = <PFN_vkDestroyPipeline>_load(g, d, b"vkDestroyPipeline", NULL)
        self.fn.vkCreatePipelineLayout = <PFN_vkCreatePipelineLayout>_load(g, d, b"vkCreatePipelineLayout", NULL)
        self.fn.vkDestroyPipelineLayout = <PFN_vkDestroyPipelineLayout>_load(
            g, d, b"vkDestroyPipelineLayout", NULL)
        self.fn.vkCreateDescriptorSetLayout = <PFN_vkCreateDescriptorSetLayout>_load(
            g, d, b"vkCreateDescriptorSetLayout", NULL)
        self.fn.vkDestroyDescriptorSetLayout = <PFN_vkDestroyDescriptorSetLayout>_load(
            g, d, b"vkDestroyDescriptorSetLayout", NULL)
        self.fn.vkCreateDescriptorPool = <PFN_vkCreateDescriptorPool>_load(g, d, b"vkCreateDescriptorPool", NULL)
        self.fn.vkDestroyDescriptorPool = <PFN_vkDestroyDescriptorPool>_load(
            g, d, b"vkDestroyDescriptorPool", NULL)
        self.fn.vkAllocateDescriptorSets = <PFN_vkAllocateDescriptorSets>_load(
            g, d, b"vkAllocateDescriptorSets", NULL)
        self.fn.vkUpdateDescriptorSets = <PFN_vkUpdateDescriptorSets>_load(g, d, b"vkUpdateDescriptorSets", NULL)
        self.fn.vkCreateCommandPool = <PFN_vkCreateCommandPool>_load(g, d, b"vkCreateCommandPool", NULL)
        self.fn.vkDestroyCommandPool = <PFN_vkDestroyCommandPool>_load(g, d, b"vkDestroyCommandPool", NULL)
        self.fn.vkAllocateCommandBuffers = <PFN_vkAllocateCommandBuffers>_load(
            g, d, b"vkAllocateCommandBuffers", NULL)
        self.fn.vkBeginCommandBuffer = <PFN_vkBeginCommandBuffer>_load(g, d, b"vkBeginCommandBuffer", NULL)
        self.fn.vkEndCommandBuffer = <PFN_vkEndCommandBuffer>_load(g, d, b"vkEndCommandBuffer", NULL)
        self.fn.vkCmdBindPipeline = <PFN_vkCmdBindPipeline>_load(g, d, b"vkCmdBindPipeline", NULL)
        self.fn.vkCmdBindDescriptorSets = <PFN_vkCmdBindDescriptorSets>_load(
            g, d, b"vkCmdBindDescriptorSets", NULL)
        self.fn.vkCmdPushDescriptorSetKHR = <PFN_vkCmdPushDescriptorSetKHR>_load(
            g, d, b"vkCmdPushDescriptorSetKHR", NULL)
        self.fn.vkCmdPushConstants = <PFN_vkCmdPushConstants>_load(g, d, b"vkCmdPushConstants", NULL)
        self.fn.vkCmdDispatch = <PFN_vkCmdDispatch>_load(g, d, b"vkCmdDispatch", NULL)
        self.fn.vkCmdPipelineBarrier = <PFN_vkCmdPipelineBarrier>_load(g, d, b"vkCmdPipelineBarrier", NULL)
        self.fn.vkCmdCopyBuffer = <PFN_vkCmdCopyBuffer>_load(g, d, b"vkCmdCopyBuffer", NULL)
        self.fn.vkCmdFillBuffer = <PFN_vkCmdFillBuffer>_load(g, d, b"vkCmdFillBuffer", NULL)
        self.fn.vkCreateSemaphore = <PFN_vkCreateSemaphore>_load(g, d, b"vkCreateSemaphore", NULL)
        self.fn.vkDestroySemaphore = <PFN_vkDestroySemaphore>_load(g, d, b"vkDestroySemaphore", NULL)
        self.fn.vkWaitSemaphores = <PFN_vkWaitSemaphores>_load(g, d, b"vkWaitSemaphores", b"vkWaitSemaphoresKHR")
        self.fn.vkGetSemaphoreCounterValue = <PFN_vkGetSemaphoreCounterValue>_load(
            g, d, b"vkGetSemaphoreCounterValue", b"vkGetSemaphoreCounterValueKHR")
        self.fn.vkCreateQueryPool = <PFN_vkCreateQueryPool>_load(g, d, b"vkCreateQueryPool", NULL)
        self.fn.vkDestroyQueryPool = <PFN_vkDestroyQueryPool>_load(g, d, b"vkDestroyQueryPool", NULL)
        self.fn.vkCmdResetQueryPool = <PFN_vkCmdResetQueryPool>_load(g, d, b"vkCmdResetQueryPool", NULL)
        self.fn.vkCmdWriteTimestamp = <PFN_vkCmdWriteTimestamp>_load(g, d, b"vkCmdWriteTimestamp", NULL)
        self.fn.vkGetQueryPoolResults = <PFN_vkGetQueryPoolResults>_load(g, d, b"vkGetQueryPoolResults", NULL)
        if self.pipeline_stats:  # the extension is enabled only then; the pointers stay NULL otherwise
            self.fn.vkGetPipelineExecutablePropertiesKHR = <PFN_vkGetPipelineExecutablePropertiesKHR>_load(
                g, d, b"vkGetPipelineExecutablePropertiesKHR", NULL)
            self.fn.vkGetPipelineExecutableStatisticsKHR = <PFN_vkGetPipelineExecutableStatisticsKHR>_load(
                g, d, b"vkGetPipelineExecutableStatisticsKHR", NULL)
            self.pipeline_stats = (self.fn.vkGetPipelineExecutablePropertiesKHR != NULL
                                   and self.fn.vkGetPipelineExecutableStatisticsKHR != NULL)
        if self.fn.vkWaitSemaphores == NULL or self.fn.vkGetSemaphoreCounterValue == NULL:
            raise VulkanUnavailable(f"{self.name}: the driver exposes no vkWaitSemaphores")

    def _create_timeline(self):
        cdef VkSemaphoreTypeCreateInfo tci
        cdef VkSemaphoreCreateInfo sci
        memset(&tci, 0, sizeof(tci))
        memset(&sci, 0, sizeof(sci))
        tci.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO
        tci.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE
        tci.initialValue = 0
        sci.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO
        sci.pNext = &tci
        for i in range(self.nlanes):
            check(self.fn.vkCreateSemaphore(self.handle, &sci, NULL, &self.lanes[i].timeline), b"vkCreateSemaphore")
        cdef VkCommandPoolCreateInfo pci
        memset(&pci, 0, sizeof(pci))
        pci.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO
        pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT | VK_COMMAND_POOL_CREATE_TRANSIENT_BIT
        pci.queueFamilyIndex = self.queue_family
        check(self.fn.vkCreateCommandPool(self.handle, &pci, NULL, &self.copy_pool), b"vkCreateCommandPool")
        cdef VkCommandBufferAllocateInfo ai
        memset(&ai, 0, sizeof(ai))
        ai.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO
        ai.commandPool = self.copy_pool
        ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY
        ai.commandBufferCount = 1
        check(self.fn.vkAllocateCommandBuffers(self.handle, &ai, &self.copy_cmd), b"vkAllocateCommandBuffers")

    # ------------------------------------------------------------ pipeline cache
    def _load_pipeline_cache(self, dict raw):
        directory = config.cache_dir()
        uuid = raw["pipeline_cache_uuid"]
        self.cache_uuid = uuid
        self.pipeline_cache_path = None
        data = b""
        if directory is not None:
            self.pipeline_cache_path = os.path.join(
                directory, f"pipelines-{raw['vendor_id']:04x}-{raw['device_id']:04x}-{uuid.hex()}.bin")
            try:
                with open(self.pipeline_cache_path, "rb") as f:
                    data = f.read()
            except OSError:
                data = b""
            if not _cache_header_ok(data, raw["vendor_id"], raw["device_id"], uuid):
                data = b""
        cdef VkResult r = _create_cache(self, data, &self.pipeline_cache)
        if r != VK_SUCCESS and len(data):
            r = _create_cache(self, b"", &self.pipeline_cache)  # a cache the driver rejects is discarded
        check(r, b"vkCreatePipelineCache")
        self.loaded_cache_bytes = len(data)
        self._saved_cache = data

    def pipeline_cache_data(self) -> bytes:
        """The driver's current pipeline-cache blob (what save_pipeline_cache() writes)."""
        self.ensure_open()
        cdef size_t n = 0
        check(self.fn.vkGetPipelineCacheData(self.handle, self.pipeline_cache, &n, NULL), b"vkGetPipelineCacheData")
        buf = bytearray(n)
        cdef unsigned char[::1] mv = buf
        if n:
            check(self.fn.vkGetPipelineCacheData(self.handle, self.pipeline_cache, &n, &mv[0]),
                  b"vkGetPipelineCacheData")
        return bytes(buf[:n])

    def save_pipeline_cache(self) -> str | None:
        """Write the pipeline cache to its file; returns the path, or None if off or failed.
        Called after every batch of new pipelines (a killed process keeps what it compiled)
        and at close. Processes sharing the file take turns (a lock file) and merge what the
        others saved into theirs before writing, so none loses another's pipelines; the file
        is replaced atomically. A cache over VKML_PIPELINE_CACHE_MAX bytes is not written."""
        if self.pipeline_cache_path is None or self.closed:
            return None
        path = self.pipeline_cache_path
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path + ".lock", "ab") as lock:
                if fcntl is not None:
                    fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
                try:
                    with open(path, "rb") as f:
                        theirs = f.read()
                except FileNotFoundError:
                    theirs = b""
                if theirs and theirs != self._saved_cache:
                    self._merge_cache(theirs)
                data = self.pipeline_cache_data()
                if len(data) > config.pipeline_cache_max():
                    _log.warning("%s: the pipeline cache (%d bytes) exceeds VKML_PIPELINE_CACHE_MAX; not saved "
                                 "to %s", self.name, len(data), path)
                    return None
                tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
                with open(tmp, "wb") as f:
                    f.write(data)
                os.replace(tmp, path)
                self._saved_cache = data
        except OSError as e:
            _log.warning("%s: could not save the pipeline cache to %s: %s", self.name, path, e)
            return None
        return path

    def _merge_cache(self, bytes data):
        """Merge a cache blob (another process's save) into this device's cache."""
        if not _cache_header_ok(data, self.info.vendor_id, self.info.device_id, self.cache_uuid):
            return
        cdef VkPipelineCache other = 0
        cdef VkResult r = _create_cache(self, data, &other)
        if r != VK_SUCCESS:
            return  # a blob the driver rejects is left to be overwritten
        with nogil:
            r = self.fn.vkMergePipelineCaches(self.handle, self.pipeline_cache, 1, &other)
        self.fn.vkDestroyPipelineCache(self.handle, other, NULL)
        if r != VK_SUCCESS:
            _log.warning("%s: vkMergePipelineCaches failed (%d); the saved cache keeps this process's "
                         "pipelines only", self.name, r)

    # ------------------------------------------------------------ submission and waiting
    cdef int ensure_open(self) except -1:
        if self.fork_gen != _fork_gen:
            raise VulkanError(
                f"{self.name} was opened in process {self.pid}, before this process was forked from it: "
                f"GPU state does not survive fork(). Make the session in this process, or start worker "
                f"processes with multiprocessing's 'spawn' or 'forkserver' method")
        if self.closed:
            raise VulkanError(f"{self.name} is closed")
        return 0

    cdef int submit_raw(self, uint32_t lane, VkCommandBuffer cmd, const uint64_t* waits, uint32_t nwait,
                        uint64_t* signaled) except -1 nogil:
        """Submit cmd (NULL: only signal) on `lane`, after the GPU reached `waits` (values of
        the same lane); the value it will signal goes to signaled[0]."""
        cdef VkSemaphore* wait_sems = NULL
        cdef VkFlags* wait_stages = NULL
        cdef uint32_t i
        cdef uint64_t value
        cdef VkResult r
        cdef VkTimelineSemaphoreSubmitInfo ts
        cdef VkSubmitInfo si
        if lane >= self.nlanes:
            with gil:
                raise ValueError(f"{self.name} has no lane {lane} (it has {self.nlanes})")
        cdef Lane* L = &self.lanes[lane]
        if nwait:
            wait_sems = <VkSemaphore*>malloc(sizeof(VkSemaphore) * nwait)
            wait_stages = <VkFlags*>malloc(sizeof(VkFlags) * nwait)
            if wait_sems == NULL or wait_stages == NULL:
                free(wait_sems)
                free(wait_stages)
                with gil:
                    raise MemoryError()
            for i in range(nwait):
                wait_sems[i] = L.timeline
                wait_stages[i] = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT
        memset(&ts, 0, sizeof(ts))
        memset(&si, 0, sizeof(si))
        ts.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO
        ts.waitSemaphoreValueCount = nwait
        ts.pWaitSemaphoreValues = waits
        ts.signalSemaphoreValueCount = 1
        ts.pSignalSemaphoreValues = &value
        si.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO
        si.pNext = &ts
        si.waitSemaphoreCount = nwait
        si.pWaitSemaphores = wait_sems
        si.pWaitDstStageMask = wait_stages
        si.commandBufferCount = 1 if cmd != NULL else 0
        si.pCommandBuffers = &cmd
        si.signalSemaphoreCount = 1
        si.pSignalSemaphores = &L.timeline
        pthread_mutex_lock(L.lock)
        value = L.submitted + 1
        r = self.fn.vkQueueSubmit(L.queue, 1, &si, 0)
        if r == VK_SUCCESS:
            L.submitted = value
        pthread_mutex_unlock(L.lock)
        free(wait_sems)
        free(wait_stages)
        check(r, b"vkQueueSubmit")
        signaled[0] = value
        return 0

    cdef VkResult wait_nogil(self, uint32_t lane, uint64_t value, uint64_t timeout_ns) noexcept nogil:
        """Wait up to timeout_ns for `lane` to reach value: VK_SUCCESS, VK_TIMEOUT or the
        driver's error. Polls first (VKML_WAIT_SPIN_US, never past timeout_ns: a run under a
        shorter VKML_GPU_TIMEOUT must time out, not finish in the poll): most waits are for short
        chunks, and a blocking wait's wake-up costs more than the chunk. The caller checks lane
        and value."""
        cdef Lane* L = &self.lanes[lane]
        cdef uint64_t cur = 0, spin_end
        cdef VkResult r = self.fn.vkGetSemaphoreCounterValue(self.handle, L.timeline, &cur)
        if r != VK_SUCCESS or cur >= value:
            return r
        # (At most max_spinners threads poll at once: more would take the cores that the
        # threads holding the GIL, the driver and the rest of the program need.)
        # A lone waiter polls for the whole VKML_WAIT_SPIN_US (a blocking wait's wake-up costs
        # 0.05-0.15 ms on NVIDIA: resnet18 0.66 -> 0.60 ms at 3 ms against 0.1 ms of polling);
        # with others polling too, each polls for at most config.SHARED_SPIN_US, so that
        # threaded runs do not take the cores their GIL holders need.
        cdef int polling = vkml_atomic_add(&self.spinners, 1) if self.spin_ns else 0
        if self.spin_ns and polling <= self.max_spinners:
            spin_end = _now_ns() + min(timeout_ns, self.spin_ns if polling == 1
                                       else min(self.spin_ns, self.shared_spin_ns))
            while True:
                vkml_cpu_relax()
                r = self.fn.vkGetSemaphoreCounterValue(self.handle, L.timeline, &cur)
                if r != VK_SUCCESS or cur >= value:
                    vkml_atomic_add(&self.spinners, -1)
                    return r
                if _now_ns() >= spin_end:
                    break
            vkml_atomic_add(&self.spinners, -1)
        elif self.spin_ns:
            vkml_atomic_add(&self.spinners, -1)
        cdef VkSemaphoreWaitInfo wi
        memset(&wi, 0, sizeof(wi))
        wi.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO
        wi.semaphoreCount = 1
        wi.pSemaphores = &L.timeline
        wi.pValues = &value
        return self.fn.vkWaitSemaphores(self.handle, &wi, timeout_ns)

    cdef int _check_lane(self, uint32_t lane, uint64_t value) except -1:
        self.ensure_open()
        if lane >= self.nlanes:
            raise ValueError(f"{self.name} has no lane {lane} (it has {self.nlanes})")
        if value > self.lanes[lane].submitted:
            raise ValueError(f"{self.name}: timeline value {value} was never submitted on lane {lane} "
                             f"(last submitted: {self.lanes[lane].submitted}); waiting would never end")
        return 0

    cdef int wait_value(self, uint32_t lane, uint64_t value, double timeout) except -1:
        """Block (GIL released, Ctrl-C honoured every 50 ms) until `lane` reaches value.
        timeout < 0 waits forever; raises TimeoutError when it expires."""
        cdef VkResult r
        cdef uint64_t slice_ns = 50000000
        cdef uint64_t cur = 0
        cdef double deadline = time.monotonic() + timeout if timeout >= 0 else -1.0
        self._check_lane(lane, value)
        # Already there (a drain after the readback's wait, a chunk long done): return with the
        # GIL kept. Giving it up and taking it back costs a thread hand-over whenever other
        # threads are running Python.
        r = self.fn.vkGetSemaphoreCounterValue(self.handle, self.lanes[lane].timeline, &cur)
        if r == VK_SUCCESS and cur >= value:
            check_messages()
            return 0
        while True:
            if timeout >= 0:
                remaining = deadline - time.monotonic()
                slice_ns = <uint64_t>(max(0.0, min(remaining, 0.05)) * 1e9)
            with nogil:
                r = self.wait_nogil(lane, value, slice_ns)
            if r == VK_SUCCESS:
                check_messages()
                return 0
            if r != VK_TIMEOUT:
                check(r, b"vkWaitSemaphores")
            PyErr_CheckSignals()
            if timeout >= 0 and time.monotonic() >= deadline:
                raise TimeoutError(f"{self.name}: timeline value {value} of lane {lane} not reached within "
                                   f"{timeout} s (completed: {self.completed(lane)})")

    def wait(self, uint64_t value, timeout: float | None = None, uint32_t lane=0) -> None:
        """Wait (GIL released) until submission `value` of `lane` has completed on the GPU."""
        self.wait_value(lane, value, -1.0 if timeout is None else float(timeout))

    def wait_idle(self, timeout: float | None = None) -> None:
        """Wait until everything submitted so far, on every lane, has completed."""
        if self.closed:
            return
        for lane in range(self.nlanes):
            if self.lanes[lane].submitted:
                self.wait_value(lane, self.lanes[lane].submitted, -1.0 if timeout is None else float(timeout))

    def completed(self, uint32_t lane=0) -> int:
        """The highest timeline value `lane` has finished (never blocks)."""
        self.ensure_open()
        if lane >= self.nlanes:
            raise ValueError(f"{self.name} has no lane {lane} (it has {self.nlanes})")
        cdef uint64_t v = 0
        check(self.fn.vkGetSemaphoreCounterValue(self.handle, self.lanes[lane].timeline, &v),
              b"vkGetSemaphoreCounterValue")
        return v

    @property
    def last_submitted(self) -> int:
        """The last value submitted on lane 0 (submitted_on(lane) for the others)."""
        return self.lanes[0].submitted if self.lanes != NULL else 0

    def submitted_on(self, uint32_t lane) -> int:
        """The last value submitted on `lane`."""
        if self.lanes == NULL or lane >= self.nlanes:
            raise ValueError(f"{self.name} has no lane {lane}")
        return self.lanes[lane].submitted

    def take_lane(self) -> int:
        """The lane for a new run slot: each in turn, so that slots spread over the queues."""
        lane = self.next_lane % self.nlanes
        self.next_lane = (self.next_lane + 1) % self.nlanes
        return lane

    cdef int copy_now(self, VkBuffer src, uint64_t src_offset, VkBuffer dst, uint64_t dst_offset,
                      uint64_t size) except -1:
        """Copy between buffers on the queue and wait for it (used for staged upload/readback).
        Ordered after all earlier submissions by a leading barrier."""
        cdef VkCommandBufferBeginInfo bi
        cdef VkMemoryBarrier mb
        cdef VkBufferCopy region
        cdef uint64_t value = 0
        self.ensure_open()
        memset(&bi, 0, sizeof(bi))
        bi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO
        bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT
        memset(&mb, 0, sizeof(mb))
        mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER
        region.srcOffset = src_offset
        region.dstOffset = dst_offset
        region.size = size
        with self.copy_lock:
            check(self.fn.vkBeginCommandBuffer(self.copy_cmd, &bi), b"vkBeginCommandBuffer")
            mb.srcAccessMask = WORK_WRITES
            mb.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT
            self.fn.vkCmdPipelineBarrier(self.copy_cmd, WORK_STAGES, VK_PIPELINE_STAGE_TRANSFER_BIT, 0,
                                         1, &mb, 0, NULL, 0, NULL)
            self.fn.vkCmdCopyBuffer(self.copy_cmd, src, dst, 1, &region)
            mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT
            mb.dstAccessMask = WORK_ACCESS | VK_ACCESS_HOST_READ_BIT
            self.fn.vkCmdPipelineBarrier(self.copy_cmd, VK_PIPELINE_STAGE_TRANSFER_BIT,
                                         WORK_STAGES | VK_PIPELINE_STAGE_HOST_BIT, 0,
                                         1, &mb, 0, NULL, 0, NULL)
            check(self.fn.vkEndCommandBuffer(self.copy_cmd), b"vkEndCommandBuffer")
            self.submit_raw(0, self.copy_cmd, NULL, 0, &value)
            self.wait_value(0, value, -1.0)
        return 0

    # ------------------------------------------------------------ lifetime
    def register(self, obj) -> None:
        """Track an object whose Vulkan handles must go before the device does (it must
        have a _release() method, called by close())."""
        self.children.add(obj)

    def _forget_after_fork(self) -> None:
        """In a forked child: the handles are the parent's. Dropped without a Vulkan call, so
        that what still refers to this device (buffers, pipelines, command buffers of the
        parent's sessions) frees nothing through the driver when it goes."""
        self.handle = NULL
        self.closed = True

    def close(self) -> None:
        """Wait for the GPU, save the pipeline cache, destroy everything. Idempotent. In a
        forked child, a device of the parent is only marked closed (its handles are the
        parent's)."""
        if self.handle == NULL or self.fork_gen != _fork_gen:
            self.closed = True
            return
        cdef VkDevice d = self.handle
        with nogil:
            self.fn.vkDeviceWaitIdle(d)
        if not self.closed:
            try:
                self.save_pipeline_cache()
            except Exception as e:
                # Closing goes on (the device must be destroyed): the next process compiles the
                # pipelines this one added. (save_pipeline_cache logs its own I/O errors.)
                _log.warning("%s: saving the pipeline cache while closing failed (%s: %s)",
                             self.name, type(e).__name__, e)
        for child in list(self.children):
            try:
                child._release()
            except Exception as e:
                # Closing goes on: destroying the device frees what the child held.
                _log.debug("%s: releasing %r while closing failed (%s: %s)", self.name, child,
                           type(e).__name__, e)
        self.children = weakref.WeakSet()
        for p in list(self.pipelines.values()):
            p._release()
        self.pipelines.clear()
        for set_layout, layouts in self.set_layouts.values():
            for layout in layouts.values():
                self.fn.vkDestroyPipelineLayout(d, layout, NULL)
            self.fn.vkDestroyDescriptorSetLayout(d, set_layout, NULL)
        self.set_layouts.clear()
        if self.allocator is not None:
            self.allocator._release_all()
            self.allocator = None
        if self.pipeline_cache:
            self.fn.vkDestroyPipelineCache(d, self.pipeline_cache, NULL)
            self.pipeline_cache = 0
        if self.copy_pool:
            self.fn.vkDestroyCommandPool(d, self.copy_pool, NULL)
            self.copy_pool = 0
        if self.lanes != NULL:
            for i in range(self.nlanes):
                if self.lanes[i].timeline:
                    self.fn.vkDestroySemaphore(d, self.lanes[i].timeline, NULL)
            free(self.lanes)
            self.lanes = NULL
            self.nlanes = 0
        self.fn.vkDestroyDevice(d, NULL)
        self.handle = NULL
        self.closed = True
        if self.queue_locks != NULL:
            for i in range(self.nqueues):
                pthread_mutex_destroy(&self.queue_locks[i])
            free(self.queue_locks)
            self.queue_locks = NULL
            self.nqueues = 0

    # ------------------------------------------------------------ conveniences
    def alloc(self, size_t nbytes, str kind="device"):
        """A BufferView of `nbytes` from the device's allocator (kind: device, host, readback)."""
        self.ensure_open()
        return self.allocator.alloc(nbytes, kind)

    def memory_stats(self) -> dict:
        self.ensure_open()
        return self.allocator.stats()

    def set_memory_budget(self, value) -> None:
        """Budget for vkml's allocations on this device: a fraction (0.5) of heapBudget (or
        of the heap size), an absolute size ("6GiB", bytes), or None for the default."""
        self.ensure_open()
        self.allocator.set_budget(value)

    def pipeline(self, str shader, str bindings, int push_size=0, tuple spec=()):
        """The compute pipeline for SPIR-V `shader` (vkml/spv/<shader>.spv), described on first
        use and cached by (shader, bindings, push_size, spec). `bindings` has one letter per
        storage-buffer binding: r (read), w (write), x (read+write); `spec` gives the
        specialization constants by constant_id (0 = local_size_x by vkml convention).
        It may not be compiled yet: recorders compile on first use, or defer (see
        vkml.vulkan._pipeline.compile_pipelines)."""
        self.ensure_open()
        key = (shader, bindings, push_size, spec)
        p = self.pipelines.get(key)
        if p is not None:
            return p
        from vkml.vulkan._pipeline import describe_pipeline
        with self.pipeline_lock:
            p = self.pipelines.get(key)
            if p is None:
                p = describe_pipeline(self, shader, bindings, push_size, spec)
                self.pipelines[key] = p
        return p

    def __repr__(self):
        state = "closed" if self.closed else f"submitted={self.last_submitted}"
        return f"<vkml.vulkan.Device {self.name} {self.info.device_name!r} {state}>"


cdef VkResult _create_cache(Device dev, bytes data, VkPipelineCache* out):
    """A VkPipelineCache on `dev` holding `data` (a saved blob, or b"" for an empty cache)."""
    cdef const unsigned char* p = data
    cdef VkPipelineCacheCreateInfo ci
    cdef VkResult r
    memset(&ci, 0, sizeof(ci))
    ci.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO
    ci.initialDataSize = len(data)
    ci.pInitialData = p if len(data) else NULL
    with nogil:
        r = dev.fn.vkCreatePipelineCache(dev.handle, &ci, NULL, out)
    return r


def _cache_header_ok(bytes data, uint32_t vendor, uint32_t device, bytes uuid) -> bool:
    """VkPipelineCacheHeaderVersionOne: u32 length (>= 32), u32 version (1), u32 vendorID,
    u32 deviceID, u8 uuid[16]. Rejecting foreign blobs here spares drivers that parse badly."""
    if len(data) < PIPELINE_CACHE_HEADER:
        return False
    length = int.from_bytes(data[0:4], "little")
    version = int.from_bytes(data[4:8], "little")
    return (length >= 32 and version == 1
            and int.from_bytes(data[8:12], "little") == vendor
            and int.from_bytes(data[12:16], "little") == device
            and data[16:32] == uuid)
