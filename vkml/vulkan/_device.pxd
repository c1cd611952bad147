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


cdef struct Lane:
    VkQueue queue
    VkSemaphore timeline
    uint64_t submitted               # last timeline value handed to a submission on this lane
    pthread_mutex_t* lock            # its queue's (lanes beyond the family's queue count share)


cdef class Device:
    cdef Instance inst
    cdef VkPhysicalDevice phys
    cdef VkDevice handle
    cdef DeviceFns fn
    cdef readonly uint32_t queue_family
    cdef Lane* lanes                 # see the module docstring; lane 0 also serves copy_now
    cdef readonly uint32_t nlanes
    cdef readonly uint32_t nqueues   # distinct VkQueues behind the lanes
    cdef pthread_mutex_t* queue_locks  # one per VkQueue (queues are externally synchronised)
    cdef uint32_t next_lane          # round robin of take_lane()
    cdef uint64_t spin_ns            # how long wait_value polls before blocking (a lone waiter)
    cdef uint64_t shared_spin_ns     # the same while other threads poll too (at most)
    cdef int spinners                # threads polling a timeline now (atomic)
    cdef int max_spinners            # at most this many poll at once: a quarter of the cores
    cdef int fork_gen                # _device._fork_gen when opened (a fork makes it stale)
    cdef readonly int pid            # the process that opened it
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
    cdef readonly bint pipeline_stats   # pipelines are compiled with statistics captured (VKML_PIPELINE_STATS)
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

    cdef int submit_raw(self, uint32_t lane, VkCommandBuffer cmd, const uint64_t* waits, uint32_t nwait,
                        uint64_t* signaled) except -1 nogil
    cdef int wait_value(self, uint32_t lane, uint64_t value, double timeout) except -1
    cdef VkResult wait_nogil(self, uint32_t lane, uint64_t value, uint64_t timeout_ns) noexcept nogil
    cdef int copy_now(self, VkBuffer src, uint64_t src_offset, VkBuffer dst, uint64_t dst_offset,
                      uint64_t size) except -1
    cdef int ensure_open(self) except -1
    cdef int _check_lane(self, uint32_t lane, uint64_t value) except -1
