# cython: language_level=3
"""The subset of the Vulkan C API that vkml uses, declared by hand.

Why by hand: the build must not need a Vulkan SDK or headers (Debian's are 1.3.239 and
lack VK_KHR_cooperative_matrix). Every struct below mirrors the layout in the Vulkan
specification member for member; Cython emits these definitions into the generated C, so
the field order IS the ABI. Dispatchable handles are pointers, non-dispatchable handles
are uint64_t (the 32-bit ABI, and register-compatible with pointers on 64-bit targets).
Function pointers are loaded at run time (see _instance.pyx / _device.pyx).
"""
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t

ctypedef int32_t VkResult
ctypedef int32_t VkStructureType
ctypedef uint32_t VkFlags
ctypedef uint32_t VkBool32
ctypedef uint64_t VkDeviceSize

ctypedef void* VkInstance
ctypedef void* VkPhysicalDevice
ctypedef void* VkDevice
ctypedef void* VkQueue
ctypedef void* VkCommandBuffer
ctypedef uint64_t VkSemaphore
ctypedef uint64_t VkFence
ctypedef uint64_t VkDeviceMemory
ctypedef uint64_t VkBuffer
ctypedef uint64_t VkShaderModule
ctypedef uint64_t VkPipelineCache
ctypedef uint64_t VkPipelineLayout
ctypedef uint64_t VkPipeline
ctypedef uint64_t VkDescriptorSetLayout
ctypedef uint64_t VkDescriptorPool
ctypedef uint64_t VkDescriptorSet
ctypedef uint64_t VkCommandPool
ctypedef uint64_t VkQueryPool
ctypedef uint64_t VkDebugUtilsMessengerEXT

cdef enum:
    VK_SUCCESS = 0
    VK_NOT_READY = 1
    VK_TIMEOUT = 2
    VK_INCOMPLETE = 5
    VK_ERROR_OUT_OF_HOST_MEMORY = -1
    VK_ERROR_OUT_OF_DEVICE_MEMORY = -2
    VK_ERROR_INITIALIZATION_FAILED = -3
    VK_ERROR_DEVICE_LOST = -4
    VK_ERROR_LAYER_NOT_PRESENT = -6
    VK_ERROR_EXTENSION_NOT_PRESENT = -7
    VK_ERROR_FEATURE_NOT_PRESENT = -8
    VK_ERROR_INCOMPATIBLE_DRIVER = -9
    VK_ERROR_TOO_MANY_OBJECTS = -10

cdef enum:  # VkStructureType values
    VK_STRUCTURE_TYPE_APPLICATION_INFO = 0
    VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO = 1
    VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO = 2
    VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO = 3
    VK_STRUCTURE_TYPE_SUBMIT_INFO = 4
    VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO = 5
    VK_STRUCTURE_TYPE_FENCE_CREATE_INFO = 8
    VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO = 9
    VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO = 11
    VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO = 12
    VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO = 16
    VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO = 17
    VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO = 18
    VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO = 29
    VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO = 30
    VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO = 32
    VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO = 33
    VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO = 34
    VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET = 35
    VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO = 39
    VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO = 40
    VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO = 42
    VK_STRUCTURE_TYPE_MEMORY_BARRIER = 46
    VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2 = 1000059000
    VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2 = 1000059001
    VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2 = 1000059006
    VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES = 1000094000
    VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES = 1000083000
    VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES = 1000168000
    VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES = 1000177000
    VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES = 1000082000
    VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES = 1000196000
    VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES = 1000071004
    VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PCI_BUS_INFO_PROPERTIES_EXT = 1000212000
    VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES = 1000207000
    VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO = 1000207002
    VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO = 1000207003
    VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO = 1000207004
    VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES = 1000211000
    VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SUBGROUP_EXTENDED_TYPES_FEATURES = 1000175000
    VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES = 1000225000
    VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES = 1000225002
    VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PUSH_DESCRIPTOR_PROPERTIES_KHR = 1000080000
    VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT = 1000237000
    VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CALLBACK_DATA_EXT = 1000128003
    VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT = 1000128004
    VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT = 1000247000
    VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR = 1000506000
    VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR = 1000506001
    VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV = 1000593000
    VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_FLEXIBLE_DIMENSIONS_PROPERTIES_NV = 1000593001
    VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_PROPERTIES_NV = 1000593002
    VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR = 1000269000
    VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR = 1000269001
    VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR = 1000269002
    VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR = 1000269003
    VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR = 1000269004

cdef enum:  # flags and enums
    VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR = 0x1
    VK_PHYSICAL_DEVICE_TYPE_OTHER = 0
    VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU = 1
    VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU = 2
    VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU = 3
    VK_PHYSICAL_DEVICE_TYPE_CPU = 4
    VK_QUEUE_GRAPHICS_BIT = 0x1
    VK_QUEUE_COMPUTE_BIT = 0x2
    VK_QUEUE_TRANSFER_BIT = 0x4
    VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT = 0x1
    VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT = 0x2
    VK_MEMORY_PROPERTY_HOST_COHERENT_BIT = 0x4
    VK_MEMORY_PROPERTY_HOST_CACHED_BIT = 0x8
    VK_MEMORY_PROPERTY_LAZILY_ALLOCATED_BIT = 0x10
    VK_MEMORY_PROPERTY_PROTECTED_BIT = 0x20
    VK_MEMORY_PROPERTY_DEVICE_COHERENT_BIT_AMD = 0x40
    VK_MEMORY_HEAP_DEVICE_LOCAL_BIT = 0x1
    VK_BUFFER_USAGE_TRANSFER_SRC_BIT = 0x1
    VK_BUFFER_USAGE_TRANSFER_DST_BIT = 0x2
    VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT = 0x10
    VK_BUFFER_USAGE_STORAGE_BUFFER_BIT = 0x20
    VK_SHARING_MODE_EXCLUSIVE = 0
    VK_SHADER_STAGE_COMPUTE_BIT = 0x20
    VK_DESCRIPTOR_TYPE_STORAGE_BUFFER = 7
    VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR = 0x1
    VK_DESCRIPTOR_POOL_CREATE_FREE_DESCRIPTOR_SET_BIT = 0x1
    VK_PIPELINE_BIND_POINT_COMPUTE = 1
    VK_COMMAND_POOL_CREATE_TRANSIENT_BIT = 0x1
    VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT = 0x2
    VK_COMMAND_BUFFER_LEVEL_PRIMARY = 0
    VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT = 0x1
    VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT = 0x4
    VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT = 0x1
    VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT = 0x800
    VK_PIPELINE_STAGE_TRANSFER_BIT = 0x1000
    VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT = 0x2000
    VK_PIPELINE_STAGE_HOST_BIT = 0x4000
    VK_PIPELINE_STAGE_ALL_COMMANDS_BIT = 0x10000
    VK_ACCESS_SHADER_READ_BIT = 0x20
    VK_ACCESS_SHADER_WRITE_BIT = 0x40
    VK_ACCESS_TRANSFER_READ_BIT = 0x800
    VK_ACCESS_TRANSFER_WRITE_BIT = 0x1000
    VK_ACCESS_HOST_READ_BIT = 0x2000
    VK_ACCESS_HOST_WRITE_BIT = 0x4000
    VK_SEMAPHORE_TYPE_TIMELINE = 1
    VK_SEMAPHORE_WAIT_ANY_BIT = 0x1
    VK_DEBUG_UTILS_MESSAGE_SEVERITY_VERBOSE_BIT_EXT = 0x1
    VK_DEBUG_UTILS_MESSAGE_SEVERITY_INFO_BIT_EXT = 0x10
    VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT = 0x100
    VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT = 0x1000
    VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT = 0x1
    VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT = 0x2
    VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT = 0x4
    VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT = 4
    VK_QUERY_TYPE_TIMESTAMP = 2
    VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR = 0x40
    VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR = 0  # VkPipelineExecutableStatisticFormatKHR
    VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR = 1
    VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR = 2
    VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR = 3

# ---------------------------------------------------------------- instance level
ctypedef struct VkApplicationInfo:
    VkStructureType sType
    const void* pNext
    const char* pApplicationName
    uint32_t applicationVersion
    const char* pEngineName
    uint32_t engineVersion
    uint32_t apiVersion

ctypedef struct VkInstanceCreateInfo:
    VkStructureType sType
    const void* pNext
    VkFlags flags
    const VkApplicationInfo* pApplicationInfo
    uint32_t enabledLayerCount
    const char* const* ppEnabledLayerNames
    uint32_t enabledExtensionCount
    const char* const* ppEnabledExtensionNames

ctypedef struct VkExtensionProperties:
    char extensionName[256]
    uint32_t specVersion

ctypedef struct VkLayerProperties:
    char layerName[256]
    uint32_t specVersion
    uint32_t implementationVersion
    char description[256]

ctypedef struct VkValidationFeaturesEXT:
    VkStructureType sType
    const void* pNext
    uint32_t enabledValidationFeatureCount
    const int32_t* pEnabledValidationFeatures
    uint32_t disabledValidationFeatureCount
    const int32_t* pDisabledValidationFeatures

ctypedef struct VkDebugUtilsMessengerCallbackDataEXT:
    VkStructureType sType
    const void* pNext
    VkFlags flags
    const char* pMessageIdName
    int32_t messageIdNumber
    const char* pMessage
    uint32_t queueLabelCount
    const void* pQueueLabels
    uint32_t cmdBufLabelCount
    const void* pCmdBufLabels
    uint32_t objectCount
    const void* pObjects

ctypedef VkBool32 (*PFN_vkDebugUtilsMessengerCallbackEXT)(
    uint32_t, VkFlags, const VkDebugUtilsMessengerCallbackDataEXT*, void*) noexcept nogil

ctypedef struct VkDebugUtilsMessengerCreateInfoEXT:
    VkStructureType sType
    const void* pNext
    VkFlags flags
    VkFlags messageSeverity
    VkFlags messageType
    PFN_vkDebugUtilsMessengerCallbackEXT pfnUserCallback
    void* pUserData

# ---------------------------------------------------------------- physical device
ctypedef struct VkPhysicalDeviceLimits:
    uint32_t maxImageDimension1D
    uint32_t maxImageDimension2D
    uint32_t maxImageDimension3D
    uint32_t maxImageDimensionCube
    uint32_t maxImageArrayLayers
    uint32_t maxTexelBufferElements
    uint32_t maxUniformBufferRange
    uint32_t maxStorageBufferRange
    uint32_t maxPushConstantsSize
    uint32_t maxMemoryAllocationCount
    uint32_t maxSamplerAllocationCount
    VkDeviceSize bufferImageGranularity
    VkDeviceSize sparseAddressSpaceSize
    uint32_t maxBoundDescriptorSets
    uint32_t maxPerStageDescriptorSamplers
    uint32_t maxPerStageDescriptorUniformBuffers
    uint32_t maxPerStageDescriptorStorageBuffers
    uint32_t maxPerStageDescriptorSampledImages
    uint32_t maxPerStageDescriptorStorageImages
    uint32_t maxPerStageDescriptorInputAttachments
    uint32_t maxPerStageResources
    uint32_t maxDescriptorSetSamplers
    uint32_t maxDescriptorSetUniformBuffers
    uint32_t maxDescriptorSetUniformBuffersDynamic
    uint32_t maxDescriptorSetStorageBuffers
    uint32_t maxDescriptorSetStorageBuffersDynamic
    uint32_t maxDescriptorSetSampledImages
    uint32_t maxDescriptorSetStorageImages
    uint32_t maxDescriptorSetInputAttachments
    uint32_t maxVertexInputAttributes
    uint32_t maxVertexInputBindings
    uint32_t maxVertexInputAttributeOffset
    uint32_t maxVertexInputBindingStride
    uint32_t maxVertexOutputComponents
    uint32_t maxTessellationGenerationLevel
    uint32_t maxTessellationPatchSize
    uint32_t maxTessellationControlPerVertexInputComponents
    uint32_t maxTessellationControlPerVertexOutputComponents
    uint32_t maxTessellationControlPerPatchOutputComponents
    uint32_t maxTessellationControlTotalOutputComponents
    uint32_t maxTessellationEvaluationInputComponents
    uint32_t maxTessellationEvaluationOutputComponents
    uint32_t maxGeometryShaderInvocations
    uint32_t maxGeometryInputComponents
    uint32_t maxGeometryOutputComponents
    uint32_t maxGeometryOutputVertices
    uint32_t maxGeometryTotalOutputComponents
    uint32_t maxFragmentInputComponents
    uint32_t maxFragmentOutputAttachments
    uint32_t maxFragmentDualSrcAttachments
    uint32_t maxFragmentCombinedOutputResources
    uint32_t maxComputeSharedMemorySize
    uint32_t maxComputeWorkGroupCount[3]
    uint32_t maxComputeWorkGroupInvocations
    uint32_t maxComputeWorkGroupSize[3]
    uint32_t subPixelPrecisionBits
    uint32_t subTexelPrecisionBits
    uint32_t mipmapPrecisionBits
    uint32_t maxDrawIndexedIndexValue
    uint32_t maxDrawIndirectCount
    float maxSamplerLodBias
    float maxSamplerAnisotropy
    uint32_t maxViewports
    uint32_t maxViewportDimensions[2]
    float viewportBoundsRange[2]
    uint32_t viewportSubPixelBits
    size_t minMemoryMapAlignment
    VkDeviceSize minTexelBufferOffsetAlignment
    VkDeviceSize minUniformBufferOffsetAlignment
    VkDeviceSize minStorageBufferOffsetAlignment
    int32_t minTexelOffset
    uint32_t maxTexelOffset
    int32_t minTexelGatherOffset
    uint32_t maxTexelGatherOffset
    float minInterpolationOffset
    float maxInterpolationOffset
    uint32_t subPixelInterpolationOffsetBits
    uint32_t maxFramebufferWidth
    uint32_t maxFramebufferHeight
    uint32_t maxFramebufferLayers
    VkFlags framebufferColorSampleCounts
    VkFlags framebufferDepthSampleCounts
    VkFlags framebufferStencilSampleCounts
    VkFlags framebufferNoAttachmentsSampleCounts
    uint32_t maxColorAttachments
    VkFlags sampledImageColorSampleCounts
    VkFlags sampledImageIntegerSampleCounts
    VkFlags sampledImageDepthSampleCounts
    VkFlags sampledImageStencilSampleCounts
    VkFlags storageImageSampleCounts
    uint32_t maxSampleMaskWords
    VkBool32 timestampComputeAndGraphics
    float timestampPeriod
    uint32_t maxClipDistances
    uint32_t maxCullDistances
    uint32_t maxCombinedClipAndCullDistances
    uint32_t discreteQueuePriorities
    float pointSizeRange[2]
    float lineWidthRange[2]
    float pointSizeGranularity
    float lineWidthGranularity
    VkBool32 strictLines
    VkBool32 standardSampleLocations
    VkDeviceSize optimalBufferCopyOffsetAlignment
    VkDeviceSize optimalBufferCopyRowPitchAlignment
    VkDeviceSize nonCoherentAtomSize

ctypedef struct VkPhysicalDeviceSparseProperties:
    VkBool32 residencyStandard2DBlockShape
    VkBool32 residencyStandard2DMultisampleBlockShape
    VkBool32 residencyStandard3DBlockShape
    VkBool32 residencyAlignedMipSize
    VkBool32 residencyNonResidentStrict

ctypedef struct VkPhysicalDeviceProperties:
    uint32_t apiVersion
    uint32_t driverVersion
    uint32_t vendorID
    uint32_t deviceID
    int32_t deviceType
    char deviceName[256]
    uint8_t pipelineCacheUUID[16]
    VkPhysicalDeviceLimits limits
    VkPhysicalDeviceSparseProperties sparseProperties

ctypedef struct VkPhysicalDeviceProperties2:
    VkStructureType sType
    void* pNext
    VkPhysicalDeviceProperties properties

ctypedef struct VkConformanceVersion:
    uint8_t major
    uint8_t minor
    uint8_t subminor
    uint8_t patch

ctypedef struct VkPhysicalDeviceDriverProperties:
    VkStructureType sType
    void* pNext
    int32_t driverID
    char driverName[256]
    char driverInfo[256]
    VkConformanceVersion conformanceVersion

ctypedef struct VkPhysicalDeviceIDProperties:
    VkStructureType sType
    void* pNext
    uint8_t deviceUUID[16]
    uint8_t driverUUID[16]
    uint8_t deviceLUID[8]
    uint32_t deviceNodeMask
    VkBool32 deviceLUIDValid

ctypedef struct VkPhysicalDevicePCIBusInfoPropertiesEXT:
    VkStructureType sType
    void* pNext
    uint32_t pciDomain
    uint32_t pciBus
    uint32_t pciDevice
    uint32_t pciFunction

ctypedef struct VkPhysicalDeviceSubgroupProperties:
    VkStructureType sType
    void* pNext
    uint32_t subgroupSize
    VkFlags supportedStages
    VkFlags supportedOperations
    VkBool32 quadOperationsInAllStages

ctypedef struct VkPhysicalDeviceSubgroupSizeControlProperties:
    VkStructureType sType
    void* pNext
    uint32_t minSubgroupSize
    uint32_t maxSubgroupSize
    uint32_t maxComputeWorkgroupSubgroups
    VkFlags requiredSubgroupSizeStages

ctypedef struct VkPhysicalDevicePushDescriptorPropertiesKHR:
    VkStructureType sType
    void* pNext
    uint32_t maxPushDescriptors

ctypedef struct VkPhysicalDeviceMaintenance3Properties:
    VkStructureType sType
    void* pNext
    uint32_t maxPerSetDescriptors
    VkDeviceSize maxMemoryAllocationSize

ctypedef struct VkPhysicalDeviceFeatures:
    VkBool32 robustBufferAccess
    VkBool32 fullDrawIndexUint32
    VkBool32 imageCubeArray
    VkBool32 independentBlend
    VkBool32 geometryShader
    VkBool32 tessellationShader
    VkBool32 sampleRateShading
    VkBool32 dualSrcBlend
    VkBool32 logicOp
    VkBool32 multiDrawIndirect
    VkBool32 drawIndirectFirstInstance
    VkBool32 depthClamp
    VkBool32 depthBiasClamp
    VkBool32 fillModeNonSolid
    VkBool32 depthBounds
    VkBool32 wideLines
    VkBool32 largePoints
    VkBool32 alphaToOne
    VkBool32 multiViewport
    VkBool32 samplerAnisotropy
    VkBool32 textureCompressionETC2
    VkBool32 textureCompressionASTC_LDR
    VkBool32 textureCompressionBC
    VkBool32 occlusionQueryPrecise
    VkBool32 pipelineStatisticsQuery
    VkBool32 vertexPipelineStoresAndAtomics
    VkBool32 fragmentStoresAndAtomics
    VkBool32 shaderTessellationAndGeometryPointSize
    VkBool32 shaderImageGatherExtended
    VkBool32 shaderStorageImageExtendedFormats
    VkBool32 shaderStorageImageMultisample
    VkBool32 shaderStorageImageReadWithoutFormat
    VkBool32 shaderStorageImageWriteWithoutFormat
    VkBool32 shaderUniformBufferArrayDynamicIndexing
    VkBool32 shaderSampledImageArrayDynamicIndexing
    VkBool32 shaderStorageBufferArrayDynamicIndexing
    VkBool32 shaderStorageImageArrayDynamicIndexing
    VkBool32 shaderClipDistance
    VkBool32 shaderCullDistance
    VkBool32 shaderFloat64
    VkBool32 shaderInt64
    VkBool32 shaderInt16
    VkBool32 shaderResourceResidency
    VkBool32 shaderResourceMinLod
    VkBool32 sparseBinding
    VkBool32 sparseResidencyBuffer
    VkBool32 sparseResidencyImage2D
    VkBool32 sparseResidencyImage3D
    VkBool32 sparseResidency2Samples
    VkBool32 sparseResidency4Samples
    VkBool32 sparseResidency8Samples
    VkBool32 sparseResidency16Samples
    VkBool32 sparseResidencyAliased
    VkBool32 variableMultisampleRate
    VkBool32 inheritedQueries

ctypedef struct VkPhysicalDeviceFeatures2:
    VkStructureType sType
    void* pNext
    VkPhysicalDeviceFeatures features

ctypedef struct VkPhysicalDevice16BitStorageFeatures:
    VkStructureType sType
    void* pNext
    VkBool32 storageBuffer16BitAccess
    VkBool32 uniformAndStorageBuffer16BitAccess
    VkBool32 storagePushConstant16
    VkBool32 storageInputOutput16

ctypedef struct VkPhysicalDevice8BitStorageFeatures:
    VkStructureType sType
    void* pNext
    VkBool32 storageBuffer8BitAccess
    VkBool32 uniformAndStorageBuffer8BitAccess
    VkBool32 storagePushConstant8

ctypedef struct VkPhysicalDeviceShaderFloat16Int8Features:
    VkStructureType sType
    void* pNext
    VkBool32 shaderFloat16
    VkBool32 shaderInt8

ctypedef struct VkPhysicalDeviceTimelineSemaphoreFeatures:
    VkStructureType sType
    void* pNext
    VkBool32 timelineSemaphore

ctypedef struct VkPhysicalDeviceVulkanMemoryModelFeatures:
    VkStructureType sType
    void* pNext
    VkBool32 vulkanMemoryModel
    VkBool32 vulkanMemoryModelDeviceScope
    VkBool32 vulkanMemoryModelAvailabilityVisibilityChains

ctypedef struct VkPhysicalDeviceShaderSubgroupExtendedTypesFeatures:
    VkStructureType sType
    void* pNext
    VkBool32 shaderSubgroupExtendedTypes

ctypedef struct VkPhysicalDeviceSubgroupSizeControlFeatures:
    VkStructureType sType
    void* pNext
    VkBool32 subgroupSizeControl
    VkBool32 computeFullSubgroups

ctypedef struct VkPhysicalDeviceCooperativeMatrixFeaturesKHR:
    VkStructureType sType
    void* pNext
    VkBool32 cooperativeMatrix
    VkBool32 cooperativeMatrixRobustBufferAccess

ctypedef struct VkPhysicalDeviceCooperativeMatrix2FeaturesNV:
    VkStructureType sType
    void* pNext
    VkBool32 cooperativeMatrixWorkgroupScope
    VkBool32 cooperativeMatrixFlexibleDimensions
    VkBool32 cooperativeMatrixReductions
    VkBool32 cooperativeMatrixConversions
    VkBool32 cooperativeMatrixPerElementOperations
    VkBool32 cooperativeMatrixTensorAddressing
    VkBool32 cooperativeMatrixBlockLoads

ctypedef struct VkPhysicalDeviceCooperativeMatrix2PropertiesNV:
    VkStructureType sType
    void* pNext
    uint32_t cooperativeMatrixWorkgroupScopeMaxWorkgroupSize
    uint32_t cooperativeMatrixFlexibleDimensionsMaxDimension
    uint32_t cooperativeMatrixWorkgroupScopeReservedSharedMemory

ctypedef struct VkCooperativeMatrixFlexibleDimensionsPropertiesNV:
    VkStructureType sType
    void* pNext
    uint32_t MGranularity
    uint32_t NGranularity
    uint32_t KGranularity
    int32_t AType
    int32_t BType
    int32_t CType
    int32_t ResultType
    VkBool32 saturatingAccumulation
    int32_t scope
    uint32_t workgroupInvocations

ctypedef struct VkCooperativeMatrixPropertiesKHR:
    VkStructureType sType
    void* pNext
    uint32_t MSize
    uint32_t NSize
    uint32_t KSize
    int32_t AType
    int32_t BType
    int32_t CType
    int32_t ResultType
    VkBool32 saturatingAccumulation
    int32_t scope

ctypedef struct VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR:
    VkStructureType sType
    void* pNext
    VkBool32 pipelineExecutableInfo

ctypedef struct VkMemoryType:
    VkFlags propertyFlags
    uint32_t heapIndex

ctypedef struct VkMemoryHeap:
    VkDeviceSize size
    VkFlags flags

ctypedef struct VkPhysicalDeviceMemoryProperties:
    uint32_t memoryTypeCount
    VkMemoryType memoryTypes[32]
    uint32_t memoryHeapCount
    VkMemoryHeap memoryHeaps[16]

ctypedef struct VkPhysicalDeviceMemoryProperties2:
    VkStructureType sType
    void* pNext
    VkPhysicalDeviceMemoryProperties memoryProperties

ctypedef struct VkPhysicalDeviceMemoryBudgetPropertiesEXT:
    VkStructureType sType
    void* pNext
    VkDeviceSize heapBudget[16]
    VkDeviceSize heapUsage[16]

ctypedef struct VkExtent3D:
    uint32_t width
    uint32_t height
    uint32_t depth

ctypedef struct VkQueueFamilyProperties:
    VkFlags queueFlags
    uint32_t queueCount
    uint32_t timestampValidBits
    VkExtent3D minImageTransferGranularity

# ---------------------------------------------------------------- device level
ctypedef struct VkDeviceQueueCreateInfo:
    VkStructureType sType
    const void* pNext
    VkFlags flags
    uint32_t queueFamilyIndex
    uint32_t queueCount
    const float* pQueuePriorities

ctypedef struct VkDeviceCreateInfo:
    VkStructureType sType
    const void* pNext
    VkFlags flags
    uint32_t queueCreateInfoCount
    const VkDeviceQueueCreateInfo* pQueueCreateInfos
    uint32_t enabledLayerCount
    const char* const* ppEnabledLayerNames
    uint32_t enabledExtensionCount
    const char* const* ppEnabledExtensionNames
    const VkPhysicalDeviceFeatures* pEnabledFeatures

ctypedef struct VkMemoryAllocateInfo:
    VkStructureType sType
    const void* pNext
    VkDeviceSize allocationSize
    uint32_t memoryTypeIndex

ctypedef struct VkMemoryRequirements:
    VkDeviceSize size
    VkDeviceSize alignment
    uint32_t memoryTypeBits

ctypedef struct VkBufferCreateInfo:
    VkStructureType sType
    const void* pNext
    VkFlags flags
    VkDeviceSize size
    VkFlags usage
    int32_t sharingMode
    uint32_t queueFamilyIndexCount
    const uint32_t* pQueueFamilyIndices

ctypedef struct VkShaderModuleCreateInfo:
    VkStructureType sType
    const void* pNext
    VkFlags flags
    size_t codeSize
    const uint32_t* pCode

ctypedef struct VkPipelineCacheCreateInfo:
    VkStructureType sType
    const void* pNext
    VkFlags flags
    size_t initialDataSize
    const void* pInitialData

ctypedef struct VkSpecializationMapEntry:
    uint32_t constantID
    uint32_t offset
    size_t size

ctypedef struct VkSpecializationInfo:
    uint32_t mapEntryCount
    const VkSpecializationMapEntry* pMapEntries
    size_t dataSize
    const void* pData

ctypedef struct VkPipelineShaderStageCreateInfo:
    VkStructureType sType
    const void* pNext
    VkFlags flags
    VkFlags stage
    VkShaderModule module
    const char* pName
    const VkSpecializationInfo* pSpecializationInfo

ctypedef struct VkComputePipelineCreateInfo:
    VkStructureType sType
    const void* pNext
    VkFlags flags
    VkPipelineShaderStageCreateInfo stage
    VkPipelineLayout layout
    VkPipeline basePipelineHandle
    int32_t basePipelineIndex

# VK_KHR_pipeline_executable_properties: what the driver's compiler made of a pipeline.
ctypedef struct VkPipelineInfoKHR:
    VkStructureType sType
    const void* pNext
    VkPipeline pipeline

ctypedef struct VkPipelineExecutablePropertiesKHR:
    VkStructureType sType
    void* pNext
    VkFlags stages
    char name[256]
    char description[256]
    uint32_t subgroupSize

ctypedef struct VkPipelineExecutableInfoKHR:
    VkStructureType sType
    const void* pNext
    VkPipeline pipeline
    uint32_t executableIndex

ctypedef union VkPipelineExecutableStatisticValueKHR:
    VkBool32 b32
    int64_t i64
    uint64_t u64
    double f64

ctypedef struct VkPipelineExecutableStatisticKHR:
    VkStructureType sType
    void* pNext
    char name[256]
    char description[256]
    int32_t format  # VkPipelineExecutableStatisticFormatKHR
    VkPipelineExecutableStatisticValueKHR value

ctypedef struct VkPushConstantRange:
    VkFlags stageFlags
    uint32_t offset
    uint32_t size

ctypedef struct VkPipelineLayoutCreateInfo:
    VkStructureType sType
    const void* pNext
    VkFlags flags
    uint32_t setLayoutCount
    const VkDescriptorSetLayout* pSetLayouts
    uint32_t pushConstantRangeCount
    const VkPushConstantRange* pPushConstantRanges

ctypedef struct VkDescriptorSetLayoutBinding:
    uint32_t binding
    int32_t descriptorType
    uint32_t descriptorCount
    VkFlags stageFlags
    const void* pImmutableSamplers

ctypedef struct VkDescriptorSetLayoutCreateInfo:
    VkStructureType sType
    const void* pNext
    VkFlags flags
    uint32_t bindingCount
    const VkDescriptorSetLayoutBinding* pBindings

ctypedef struct VkDescriptorPoolSize:
    int32_t type
    uint32_t descriptorCount

ctypedef struct VkDescriptorPoolCreateInfo:
    VkStructureType sType
    const void* pNext
    VkFlags flags
    uint32_t maxSets
    uint32_t poolSizeCount
    const VkDescriptorPoolSize* pPoolSizes

ctypedef struct VkDescriptorSetAllocateInfo:
    VkStructureType sType
    const void* pNext
    VkDescriptorPool descriptorPool
    uint32_t descriptorSetCount
    const VkDescriptorSetLayout* pSetLayouts

ctypedef struct VkDescriptorBufferInfo:
    VkBuffer buffer
    VkDeviceSize offset
    VkDeviceSize range

ctypedef struct VkWriteDescriptorSet:
    VkStructureType sType
    const void* pNext
    VkDescriptorSet dstSet
    uint32_t dstBinding
    uint32_t dstArrayElement
    uint32_t descriptorCount
    int32_t descriptorType
    const void* pImageInfo
    const VkDescriptorBufferInfo* pBufferInfo
    const void* pTexelBufferView

ctypedef struct VkCommandPoolCreateInfo:
    VkStructureType sType
    const void* pNext
    VkFlags flags
    uint32_t queueFamilyIndex

ctypedef struct VkCommandBufferAllocateInfo:
    VkStructureType sType
    const void* pNext
    VkCommandPool commandPool
    int32_t level
    uint32_t commandBufferCount

ctypedef struct VkCommandBufferBeginInfo:
    VkStructureType sType
    const void* pNext
    VkFlags flags
    const void* pInheritanceInfo

ctypedef struct VkMemoryBarrier:
    VkStructureType sType
    const void* pNext
    VkFlags srcAccessMask
    VkFlags dstAccessMask

ctypedef struct VkBufferCopy:
    VkDeviceSize srcOffset
    VkDeviceSize dstOffset
    VkDeviceSize size

ctypedef struct VkSubmitInfo:
    VkStructureType sType
    const void* pNext
    uint32_t waitSemaphoreCount
    const VkSemaphore* pWaitSemaphores
    const VkFlags* pWaitDstStageMask
    uint32_t commandBufferCount
    const VkCommandBuffer* pCommandBuffers
    uint32_t signalSemaphoreCount
    const VkSemaphore* pSignalSemaphores

ctypedef struct VkTimelineSemaphoreSubmitInfo:
    VkStructureType sType
    const void* pNext
    uint32_t waitSemaphoreValueCount
    const uint64_t* pWaitSemaphoreValues
    uint32_t signalSemaphoreValueCount
    const uint64_t* pSignalSemaphoreValues

ctypedef struct VkSemaphoreTypeCreateInfo:
    VkStructureType sType
    const void* pNext
    int32_t semaphoreType
    uint64_t initialValue

ctypedef struct VkSemaphoreCreateInfo:
    VkStructureType sType
    const void* pNext
    VkFlags flags

ctypedef struct VkSemaphoreWaitInfo:
    VkStructureType sType
    const void* pNext
    VkFlags flags
    uint32_t semaphoreCount
    const VkSemaphore* pSemaphores
    const uint64_t* pValues

ctypedef struct VkQueryPoolCreateInfo:
    VkStructureType sType
    const void* pNext
    VkFlags flags
    int32_t queryType
    uint32_t queryCount
    VkFlags pipelineStatistics

# ---------------------------------------------------------------- function pointer types
ctypedef void (*PFN_vkVoidFunction)() noexcept nogil
ctypedef PFN_vkVoidFunction (*PFN_vkGetInstanceProcAddr)(VkInstance, const char*) noexcept nogil
ctypedef PFN_vkVoidFunction (*PFN_vkGetDeviceProcAddr)(VkDevice, const char*) noexcept nogil
ctypedef VkResult (*PFN_vkEnumerateInstanceVersion)(uint32_t*) noexcept nogil
ctypedef VkResult (*PFN_vkEnumerateInstanceExtensionProperties)(
    const char*, uint32_t*, VkExtensionProperties*) noexcept nogil
ctypedef VkResult (*PFN_vkEnumerateInstanceLayerProperties)(uint32_t*, VkLayerProperties*) noexcept nogil
ctypedef VkResult (*PFN_vkCreateInstance)(
    const VkInstanceCreateInfo*, const void*, VkInstance*) noexcept nogil
ctypedef void (*PFN_vkDestroyInstance)(VkInstance, const void*) noexcept nogil
ctypedef VkResult (*PFN_vkEnumeratePhysicalDevices)(VkInstance, uint32_t*, VkPhysicalDevice*) noexcept nogil
ctypedef void (*PFN_vkGetPhysicalDeviceProperties2)(
    VkPhysicalDevice, VkPhysicalDeviceProperties2*) noexcept nogil
ctypedef void (*PFN_vkGetPhysicalDeviceFeatures2)(VkPhysicalDevice, VkPhysicalDeviceFeatures2*) noexcept nogil
ctypedef void (*PFN_vkGetPhysicalDeviceMemoryProperties2)(
    VkPhysicalDevice, VkPhysicalDeviceMemoryProperties2*) noexcept nogil
ctypedef void (*PFN_vkGetPhysicalDeviceQueueFamilyProperties)(
    VkPhysicalDevice, uint32_t*, VkQueueFamilyProperties*) noexcept nogil
ctypedef VkResult (*PFN_vkEnumerateDeviceExtensionProperties)(
    VkPhysicalDevice, const char*, uint32_t*, VkExtensionProperties*) noexcept nogil
ctypedef VkResult (*PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)(
    VkPhysicalDevice, uint32_t*, VkCooperativeMatrixPropertiesKHR*) noexcept nogil
ctypedef VkResult (*PFN_vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV)(
    VkPhysicalDevice, uint32_t*, VkCooperativeMatrixFlexibleDimensionsPropertiesNV*) noexcept nogil
ctypedef VkResult (*PFN_vkCreateDevice)(
    VkPhysicalDevice, const VkDeviceCreateInfo*, const void*, VkDevice*) noexcept nogil
ctypedef VkResult (*PFN_vkCreateDebugUtilsMessengerEXT)(
    VkInstance, const VkDebugUtilsMessengerCreateInfoEXT*, const void*,
    VkDebugUtilsMessengerEXT*) noexcept nogil
ctypedef void (*PFN_vkDestroyDebugUtilsMessengerEXT)(
    VkInstance, VkDebugUtilsMessengerEXT, const void*) noexcept nogil

ctypedef void (*PFN_vkDestroyDevice)(VkDevice, const void*) noexcept nogil
ctypedef void (*PFN_vkGetDeviceQueue)(VkDevice, uint32_t, uint32_t, VkQueue*) noexcept nogil
ctypedef VkResult (*PFN_vkDeviceWaitIdle)(VkDevice) noexcept nogil
ctypedef VkResult (*PFN_vkQueueSubmit)(VkQueue, uint32_t, const VkSubmitInfo*, VkFence) noexcept nogil
ctypedef VkResult (*PFN_vkAllocateMemory)(
    VkDevice, const VkMemoryAllocateInfo*, const void*, VkDeviceMemory*) noexcept nogil
ctypedef void (*PFN_vkFreeMemory)(VkDevice, VkDeviceMemory, const void*) noexcept nogil
ctypedef VkResult (*PFN_vkMapMemory)(
    VkDevice, VkDeviceMemory, VkDeviceSize, VkDeviceSize, VkFlags, void**) noexcept nogil
ctypedef void (*PFN_vkUnmapMemory)(VkDevice, VkDeviceMemory) noexcept nogil
ctypedef VkResult (*PFN_vkCreateBuffer)(
    VkDevice, const VkBufferCreateInfo*, const void*, VkBuffer*) noexcept nogil
ctypedef void (*PFN_vkDestroyBuffer)(VkDevice, VkBuffer, const void*) noexcept nogil
ctypedef void (*PFN_vkGetBufferMemoryRequirements)(VkDevice, VkBuffer, VkMemoryRequirements*) noexcept nogil
ctypedef VkResult (*PFN_vkBindBufferMemory)(VkDevice, VkBuffer, VkDeviceMemory, VkDeviceSize) noexcept nogil
ctypedef VkResult (*PFN_vkCreateShaderModule)(
    VkDevice, const VkShaderModuleCreateInfo*, const void*, VkShaderModule*) noexcept nogil
ctypedef void (*PFN_vkDestroyShaderModule)(VkDevice, VkShaderModule, const void*) noexcept nogil
ctypedef VkResult (*PFN_vkCreatePipelineCache)(
    VkDevice, const VkPipelineCacheCreateInfo*, const void*, VkPipelineCache*) noexcept nogil
ctypedef void (*PFN_vkDestroyPipelineCache)(VkDevice, VkPipelineCache, const void*) noexcept nogil
ctypedef VkResult (*PFN_vkGetPipelineCacheData)(VkDevice, VkPipelineCache, size_t*, void*) noexcept nogil
ctypedef VkResult (*PFN_vkMergePipelineCaches)(VkDevice, VkPipelineCache, uint32_t, const VkPipelineCache*) noexcept nogil
ctypedef VkResult (*PFN_vkCreateComputePipelines)(
    VkDevice, VkPipelineCache, uint32_t, const VkComputePipelineCreateInfo*, const void*,
    VkPipeline*) noexcept nogil
ctypedef void (*PFN_vkDestroyPipeline)(VkDevice, VkPipeline, const void*) noexcept nogil
ctypedef VkResult (*PFN_vkCreatePipelineLayout)(
    VkDevice, const VkPipelineLayoutCreateInfo*, const void*, VkPipelineLayout*) noexcept nogil
ctypedef void (*PFN_vkDestroyPipelineLayout)(VkDevice, VkPipelineLayout, const void*) noexcept nogil
ctypedef VkResult (*PFN_vkCreateDescriptorSetLayout)(
    VkDevice, const VkDescriptorSetLayoutCreateInfo*, const void*, VkDescriptorSetLayout*) noexcept nogil
ctypedef void (*PFN_vkDestroyDescriptorSetLayout)(VkDevice, VkDescriptorSetLayout, const void*) noexcept nogil
ctypedef VkResult (*PFN_vkCreateDescriptorPool)(
    VkDevice, const VkDescriptorPoolCreateInfo*, const void*, VkDescriptorPool*) noexcept nogil
ctypedef void (*PFN_vkDestroyDescriptorPool)(VkDevice, VkDescriptorPool, const void*) noexcept nogil
ctypedef VkResult (*PFN_vkAllocateDescriptorSets)(
    VkDevice, const VkDescriptorSetAllocateInfo*, VkDescriptorSet*) noexcept nogil
ctypedef void (*PFN_vkUpdateDescriptorSets)(
    VkDevice, uint32_t, const VkWriteDescriptorSet*, uint32_t, const void*) noexcept nogil
ctypedef VkResult (*PFN_vkCreateCommandPool)(
    VkDevice, const VkCommandPoolCreateInfo*, const void*, VkCommandPool*) noexcept nogil
ctypedef void (*PFN_vkDestroyCommandPool)(VkDevice, VkCommandPool, const void*) noexcept nogil
ctypedef VkResult (*PFN_vkAllocateCommandBuffers)(
    VkDevice, const VkCommandBufferAllocateInfo*, VkCommandBuffer*) noexcept nogil
ctypedef VkResult (*PFN_vkBeginCommandBuffer)(VkCommandBuffer, const VkCommandBufferBeginInfo*) noexcept nogil
ctypedef VkResult (*PFN_vkEndCommandBuffer)(VkCommandBuffer) noexcept nogil
ctypedef void (*PFN_vkCmdBindPipeline)(VkCommandBuffer, int32_t, VkPipeline) noexcept nogil
ctypedef void (*PFN_vkCmdBindDescriptorSets)(
    VkCommandBuffer, int32_t, VkPipelineLayout, uint32_t, uint32_t, const VkDescriptorSet*,
    uint32_t, const uint32_t*) noexcept nogil
ctypedef void (*PFN_vkCmdPushDescriptorSetKHR)(
    VkCommandBuffer, int32_t, VkPipelineLayout, uint32_t, uint32_t,
    const VkWriteDescriptorSet*) noexcept nogil
ctypedef void (*PFN_vkCmdPushConstants)(
    VkCommandBuffer, VkPipelineLayout, VkFlags, uint32_t, uint32_t, const void*) noexcept nogil
ctypedef void (*PFN_vkCmdDispatch)(VkCommandBuffer, uint32_t, uint32_t, uint32_t) noexcept nogil
ctypedef void (*PFN_vkCmdPipelineBarrier)(
    VkCommandBuffer, VkFlags, VkFlags, VkFlags, uint32_t, const VkMemoryBarrier*,
    uint32_t, const void*, uint32_t, const void*) noexcept nogil
ctypedef void (*PFN_vkCmdCopyBuffer)(
    VkCommandBuffer, VkBuffer, VkBuffer, uint32_t, const VkBufferCopy*) noexcept nogil
ctypedef void (*PFN_vkCmdFillBuffer)(
    VkCommandBuffer, VkBuffer, VkDeviceSize, VkDeviceSize, uint32_t) noexcept nogil
ctypedef VkResult (*PFN_vkCreateSemaphore)(
    VkDevice, const VkSemaphoreCreateInfo*, const void*, VkSemaphore*) noexcept nogil
ctypedef void (*PFN_vkDestroySemaphore)(VkDevice, VkSemaphore, const void*) noexcept nogil
ctypedef VkResult (*PFN_vkWaitSemaphores)(VkDevice, const VkSemaphoreWaitInfo*, uint64_t) noexcept nogil
ctypedef VkResult (*PFN_vkGetSemaphoreCounterValue)(VkDevice, VkSemaphore, uint64_t*) noexcept nogil
ctypedef VkResult (*PFN_vkCreateQueryPool)(
    VkDevice, const VkQueryPoolCreateInfo*, const void*, VkQueryPool*) noexcept nogil
ctypedef void (*PFN_vkDestroyQueryPool)(VkDevice, VkQueryPool, const void*) noexcept nogil
ctypedef void (*PFN_vkCmdResetQueryPool)(VkCommandBuffer, VkQueryPool, uint32_t, uint32_t) noexcept nogil
ctypedef void (*PFN_vkCmdWriteTimestamp)(VkCommandBuffer, VkFlags, VkQueryPool, uint32_t) noexcept nogil
ctypedef VkResult (*PFN_vkGetQueryPoolResults)(
    VkDevice, VkQueryPool, uint32_t, uint32_t, size_t, void*, VkDeviceSize, VkFlags) noexcept nogil
ctypedef VkResult (*PFN_vkGetPipelineExecutablePropertiesKHR)(
    VkDevice, const VkPipelineInfoKHR*, uint32_t*, VkPipelineExecutablePropertiesKHR*) noexcept nogil
ctypedef VkResult (*PFN_vkGetPipelineExecutableStatisticsKHR)(
    VkDevice, const VkPipelineExecutableInfoKHR*, uint32_t*, VkPipelineExecutableStatisticKHR*) noexcept nogil

# ---------------------------------------------------------------- dispatch tables
ctypedef struct InstanceFns:
    PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr
    PFN_vkDestroyInstance vkDestroyInstance
    PFN_vkEnumeratePhysicalDevices vkEnumeratePhysicalDevices
    PFN_vkGetPhysicalDeviceProperties2 vkGetPhysicalDeviceProperties2
    PFN_vkGetPhysicalDeviceFeatures2 vkGetPhysicalDeviceFeatures2
    PFN_vkGetPhysicalDeviceMemoryProperties2 vkGetPhysicalDeviceMemoryProperties2
    PFN_vkGetPhysicalDeviceQueueFamilyProperties vkGetPhysicalDeviceQueueFamilyProperties
    PFN_vkEnumerateDeviceExtensionProperties vkEnumerateDeviceExtensionProperties
    PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR
    PFN_vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV
    PFN_vkCreateDevice vkCreateDevice
    PFN_vkGetDeviceProcAddr vkGetDeviceProcAddr
    PFN_vkCreateDebugUtilsMessengerEXT vkCreateDebugUtilsMessengerEXT
    PFN_vkDestroyDebugUtilsMessengerEXT vkDestroyDebugUtilsMessengerEXT

ctypedef struct DeviceFns:
    PFN_vkDestroyDevice vkDestroyDevice
    PFN_vkGetDeviceQueue vkGetDeviceQueue
    PFN_vkDeviceWaitIdle vkDeviceWaitIdle
    PFN_vkQueueSubmit vkQueueSubmit
    PFN_vkAllocateMemory vkAllocateMemory
    PFN_vkFreeMemory vkFreeMemory
    PFN_vkMapMemory vkMapMemory
    PFN_vkUnmapMemory vkUnmapMemory
    PFN_vkCreateBuffer vkCreateBuffer
    PFN_vkDestroyBuffer vkDestroyBuffer
    PFN_vkGetBufferMemoryRequirements vkGetBufferMemoryRequirements
    PFN_vkBindBufferMemory vkBindBufferMemory
    PFN_vkCreateShaderModule vkCreateShaderModule
    PFN_vkDestroyShaderModule vkDestroyShaderModule
    PFN_vkCreatePipelineCache vkCreatePipelineCache
    PFN_vkDestroyPipelineCache vkDestroyPipelineCache
    PFN_vkGetPipelineCacheData vkGetPipelineCacheData
    PFN_vkMergePipelineCaches vkMergePipelineCaches
    PFN_vkCreateComputePipelines vkCreateComputePipelines
    PFN_vkDestroyPipeline vkDestroyPipeline
    PFN_vkCreatePipelineLayout vkCreatePipelineLayout
    PFN_vkDestroyPipelineLayout vkDestroyPipelineLayout
    PFN_vkCreateDescriptorSetLayout vkCreateDescriptorSetLayout
    PFN_vkDestroyDescriptorSetLayout vkDestroyDescriptorSetLayout
    PFN_vkCreateDescriptorPool vkCreateDescriptorPool
    PFN_vkDestroyDescriptorPool vkDestroyDescriptorPool
    PFN_vkAllocateDescriptorSets vkAllocateDescriptorSets
    PFN_vkUpdateDescriptorSets vkUpdateDescriptorSets
    PFN_vkCreateCommandPool vkCreateCommandPool
    PFN_vkDestroyCommandPool vkDestroyCommandPool
    PFN_vkAllocateCommandBuffers vkAllocateCommandBuffers
    PFN_vkBeginCommandBuffer vkBeginCommandBuffer
    PFN_vkEndCommandBuffer vkEndCommandBuffer
    PFN_vkCmdBindPipeline vkCmdBindPipeline
    PFN_vkCmdBindDescriptorSets vkCmdBindDescriptorSets
    PFN_vkCmdPushDescriptorSetKHR vkCmdPushDescriptorSetKHR
    PFN_vkCmdPushConstants vkCmdPushConstants
    PFN_vkCmdDispatch vkCmdDispatch
    PFN_vkCmdPipelineBarrier vkCmdPipelineBarrier
    PFN_vkCmdCopyBuffer vkCmdCopyBuffer
    PFN_vkCmdFillBuffer vkCmdFillBuffer
    PFN_vkCreateSemaphore vkCreateSemaphore
    PFN_vkDestroySemaphore vkDestroySemaphore
    PFN_vkWaitSemaphores vkWaitSemaphores
    PFN_vkGetSemaphoreCounterValue vkGetSemaphoreCounterValue
    PFN_vkCreateQueryPool vkCreateQueryPool
    PFN_vkDestroyQueryPool vkDestroyQueryPool
    PFN_vkCmdResetQueryPool vkCmdResetQueryPool
    PFN_vkCmdWriteTimestamp vkCmdWriteTimestamp
    PFN_vkGetQueryPoolResults vkGetQueryPoolResults
    PFN_vkGetPipelineExecutablePropertiesKHR vkGetPipelineExecutablePropertiesKHR  # NULL unless stats are on
    PFN_vkGetPipelineExecutableStatisticsKHR vkGetPipelineExecutableStatisticsKHR
