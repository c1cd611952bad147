# cython: language_level=3
from libc.stdint cimport uint8_t, uint32_t
from vkml.vulkan.vkapi cimport *
from vkml.vulkan._device cimport Device


cdef class Pipeline:
    cdef readonly Device device
    cdef VkPipeline handle
    cdef VkPipelineLayout layout
    cdef VkDescriptorSetLayout set_layout
    cdef readonly str shader
    cdef readonly str bindings          # one letter per binding: r, w or x
    cdef readonly uint32_t nbindings
    cdef readonly uint32_t push_size
    cdef readonly tuple spec
    cdef readonly tuple local_size      # (x, y, z) after specialization
    cdef readonly double create_seconds  # vkCreateComputePipelines' wall time (0 until compiled)
    cdef bytes code                      # SPIR-V and specialization data, kept until compiled
    cdef bytes spec_data
    cdef object lock                     # one compile per pipeline, whichever thread asks first
    cpdef int compile(self) except -1
    cdef uint8_t access[32]             # per binding: 1 read, 2 write, 3 both
    cdef object __weakref__
