# cython: language_level=3
from libc.stdint cimport uint32_t, uint64_t
from vkml.vulkan.vkapi cimport *
from vkml.vulkan._device cimport Device
from vkml.vulkan._pipeline cimport Pipeline
from vkml.vulkan._memory cimport BufferView


cdef class CommandBuffer:
    cdef readonly Device device
    cdef VkCommandPool pool
    cdef VkCommandBuffer cmd
    cdef list descriptor_pools          # VkDescriptorPool handles (fallback without push descriptors)
    cdef VkDescriptorPool cur_dpool
    cdef uint32_t dpool_left
    cdef VkQueryPool query_pool
    cdef uint32_t query_count
    cdef uint32_t query_cap
    cdef readonly list timestamp_labels
    cdef list keep                      # pipelines and views the commands use
    cdef readonly uint64_t last_value   # timeline value of the latest submission (0: never)
    cdef readonly uint32_t last_lane    # the device lane it went to
    cdef readonly bint recording
    cdef readonly int dispatches
    cdef readonly int barriers
    cdef readonly int copies
    cdef object __weakref__


cdef class CommandRecorder:
    cdef readonly Device device
    cdef readonly CommandBuffer cb
    cdef readonly bint auto_barriers
    cdef list pending_reads             # (block id, start, end) since the last barrier
    cdef list pending_writes
    cdef Pipeline bound
    cdef readonly list deferred         # commands waiting for their pipelines (defer=True), else None
    cdef dict scratches                 # tag -> the shared scratch buffer (scratch())

    cdef int _hazard_barrier(self, list reads, list writes) except -1
    cdef int _emit_barrier(self) except -1
    cdef int _issue_barrier(self) except -1
    cdef int _issue_dispatch(self, Pipeline pipeline, list views, bytes push_b, uint32_t gx, uint32_t gy,
                             uint32_t gz) except -1
    cdef int _issue_copy(self, BufferView src, BufferView dst, uint64_t n, uint64_t so, uint64_t do) except -1
    cdef int _issue_fill(self, BufferView view, uint32_t value) except -1
    cdef int _issue_timestamp(self, str label) except -1
    cdef int _replay(self) except -1
    cdef int _check_recording(self) except -1
    cdef VkDescriptorSet _alloc_set(self, Pipeline p) except? 0
