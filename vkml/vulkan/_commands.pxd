# cython: language_level=3
from libc.stdint cimport uint32_t, uint64_t
from vkml.vulkan.vkapi cimport *
from vkml.vulkan._device cimport Device
from vkml.vulkan._pipeline cimport Pipeline


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

    cdef int _hazard_barrier(self, list reads, list writes) except -1
    cdef int _emit_barrier(self) except -1
    cdef int _check_recording(self) except -1
    cdef VkDescriptorSet _alloc_set(self, Pipeline p) except? 0
