# cython: language_level=3
from libc.stdint cimport uint32_t
from vkml.vulkan.vkapi cimport InstanceFns, VkInstance, VkPhysicalDevice, VkResult, VkDebugUtilsMessengerEXT


cdef class Instance:
    cdef void* lib
    cdef VkInstance handle
    cdef InstanceFns fn
    cdef uint32_t api_version
    cdef readonly bint validation
    cdef VkDebugUtilsMessengerEXT messenger
    cdef VkPhysicalDevice* phys
    cdef readonly uint32_t nphys
    cdef readonly str library
    cdef dict _ext_cache

    cdef VkPhysicalDevice physical(self, int index) except NULL


# Raises VulkanError for a failed result (naming `what`) or ValidationError for collected
# validation messages; returns 0 otherwise. Safe to call without the GIL.
cdef int check(VkResult r, const char* what) except -1 nogil
# Raises ValidationError if the validation layer reported anything since the last call.
cdef int check_messages() except -1 nogil
