# cython: language_level=3
from libc.stdint cimport uint32_t, uint64_t
from vkml.vulkan.vkapi cimport *
from vkml.vulkan._instance cimport Instance


cdef extern from "<pthread.h>" nogil:
    ctypedef struct pthread_mutex_t:
        pass
    int pthread_mutex_init(pthread_mutex_t*, const void*)
    int pthread_mutex_lock(pthread_mutex_t*)
    int pthread_mutex_unlock(pthread_mutex_t*)
    int pthread_mutex_destroy(pthread_mutex_t*)


cdef class Device:
    cdef Instance inst
    cdef VkPhysicalDevice phys
    cdef VkDevice handle
    cdef DeviceFns fn
    cdef VkQueue queue
    cdef readonly uint32_t queue_family
    cdef VkSemaphore timeline
    cdef uint64_t submitted          # last timeline value handed to a submission
    cdef uint64_t spin_ns            # how long wait_value polls before blocking
    cdef pthread_mutex_t queue_lock  # the queue is externally synchronised
    cdef bint queue_lock_ready
    cdef VkPipelineCache pipeline_cache
    cdef VkCommandPool copy_pool     # for copy_now()
    cdef VkCommandBuffer copy_cmd
    cdef object copy_lock
    cdef readonly int index
    cdef readonly str name           # "vulkan:N"
    cdef readonly object info        # DeviceInfo
    cdef readonly frozenset features # enabled features, by DeviceInfo.features names
    cdef readonly dict limits
    cdef readonly bint closed
    cdef readonly bint push_descriptors
    cdef readonly uint32_t max_storage_buffer_range
    cdef readonly uint32_t max_push_constants_size
    cdef readonly uint64_t storage_alignment
    cdef uint32_t max_group_count[3]
    cdef readonly object allocator   # vkml.vulkan._memory.Allocator
    cdef readonly str pipeline_cache_path
    cdef readonly object loaded_cache_bytes  # size of the cache blob read at open
    cdef bytes cache_uuid                    # pipelineCacheUUID (the driver's build)
    cdef bytes _saved_cache                  # the file's content as last read or written
    cdef dict pipelines              # (shader, bindings, push size, spec) -> Pipeline
    cdef dict set_layouts            # (nbindings) -> (VkDescriptorSetLayout, VkPipelineLayout per push size)
    cdef object pipeline_lock
    cdef object children             # WeakSet of objects to _release() at close
    cdef object __weakref__

    cdef int submit_raw(self, VkCommandBuffer cmd, const uint64_t* waits, uint32_t nwait,
                        uint64_t* signaled) except -1 nogil
    cdef int wait_value(self, uint64_t value, double timeout) except -1
    cdef int copy_now(self, VkBuffer src, uint64_t src_offset, VkBuffer dst, uint64_t dst_offset,
                      uint64_t size) except -1
    cdef int ensure_open(self) except -1
