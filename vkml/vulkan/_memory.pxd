# cython: language_level=3
from libc.stdint cimport uint32_t, uint64_t
from vkml.vulkan.vkapi cimport *
from vkml.vulkan._device cimport Device


cdef class Pool:
    cdef readonly str kind
    cdef readonly int memory_type
    cdef readonly int heap
    cdef readonly VkFlags flags
    cdef readonly bint mappable       # host-visible and coherent, and mapping allowed
    cdef readonly uint64_t block_cap  # largest shared block; bigger requests get their own
    cdef list blocks
    cdef int made


cdef class Block:
    cdef Device device
    cdef Pool pool
    cdef VkDeviceMemory memory
    cdef readonly VkBuffer buffer
    cdef readonly uint64_t size
    cdef char* mapped
    cdef readonly bint dedicated
    cdef readonly bint alive
    cdef list free                    # sorted [offset, size] ranges
    cdef readonly uint64_t used
    cdef readonly int id

    cdef int _take(self, Py_ssize_t i, uint64_t size) except -1
    cdef int _give(self, uint64_t offset, uint64_t size) except -1


cdef class BufferView:
    cdef readonly Block block
    cdef readonly uint64_t offset     # in bytes, within block.buffer
    cdef readonly uint64_t size       # bytes the caller asked for
    cdef uint64_t taken               # bytes taken from the block (0 for sub-views)
    cdef readonly BufferView parent
    cdef bint freed
    cdef object __weakref__

    cdef int check_alive(self) except -1


cdef class Allocator:
    cdef Device device
    cdef readonly dict pools
    cdef object lock
    cdef readonly uint64_t alignment
    cdef dict reserved                # heap -> bytes held in blocks
    cdef object budget_setting
    cdef readonly uint64_t allocations
    cdef uint64_t max_allocations
    cdef readonly str readback
    cdef int next_id

    cdef int release_range(self, Block b, uint64_t offset, uint64_t size) except -1
    cdef Block _new_block(self, Pool pool, uint64_t size)
    cdef _destroy_block(self, Block b)
