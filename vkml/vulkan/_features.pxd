# cython: language_level=3
# The chain of VkPhysicalDevice*Features structs vkml queries (Instance.describe) and enables
# (Device.__init__): one definition, so the two can never disagree on a struct or its sType.
from libc.string cimport memset
from vkml.vulkan.vkapi cimport *


cdef struct _Head:
    VkStructureType sType
    void* pNext


cdef struct FeatureChain:
    VkPhysicalDeviceFeatures2 f2
    VkPhysicalDevice16BitStorageFeatures f16s
    VkPhysicalDevice8BitStorageFeatures f8s
    VkPhysicalDeviceShaderFloat16Int8Features f16a
    VkPhysicalDeviceTimelineSemaphoreFeatures ftl
    VkPhysicalDeviceVulkanMemoryModelFeatures fmm
    VkPhysicalDeviceShaderSubgroupExtendedTypesFeatures fsgx
    VkPhysicalDeviceSubgroupSizeControlFeatures fsgs
    VkPhysicalDeviceCooperativeMatrixFeaturesKHR fcm
    VkPhysicalDeviceCooperativeMatrix2FeaturesNV fcm2
    VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR fpe


cdef inline int feature_chain_init(FeatureChain* c, dict linked) except -1:
    """Zero every struct, set its sType, and link into c.f2.pNext those `linked` marks true
    (16bit_storage, 8bit_storage, float16_int8, timeline, memory_model, subgroup_ext_types,
    subgroup_size, coop_matrix, coop_matrix2, pipeline_exec): a struct the driver does not know must stay out."""
    memset(c, 0, sizeof(FeatureChain))
    c.f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2
    c.f16s.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES
    c.f8s.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES
    c.f16a.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES
    c.ftl.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES
    c.fmm.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES
    c.fsgx.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SUBGROUP_EXTENDED_TYPES_FEATURES
    c.fsgs.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES
    c.fcm.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR
    c.fcm2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV
    c.fpe.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR
    # Every Vulkan struct starts with sType and pNext: link through that common head.
    cdef void* parts[10]
    parts[0] = &c.f16s
    parts[1] = &c.f8s
    parts[2] = &c.f16a
    parts[3] = &c.ftl
    parts[4] = &c.fmm
    parts[5] = &c.fsgx
    parts[6] = &c.fsgs
    parts[7] = &c.fcm
    parts[8] = &c.fcm2
    parts[9] = &c.fpe
    cdef _Head* tail = <_Head*>&c.f2
    cdef int i
    for i, key in enumerate(("16bit_storage", "8bit_storage", "float16_int8", "timeline", "memory_model",
                             "subgroup_ext_types", "subgroup_size", "coop_matrix", "coop_matrix2",
                             "pipeline_exec")):
        if linked[key]:
            tail.pNext = parts[i]
            tail = <_Head*>parts[i]
    return 0
