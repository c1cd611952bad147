# cython: language_level=3
"""Loading Vulkan at run time, the process-wide VkInstance, and physical-device queries.

Nothing here runs at import: the loader is dlopen'ed on the first call to instance() (or
unavailable_reason()), so `import vkml` works on a machine without libvulkan. Every
failure on the way becomes a sentence in unavailable_reason().
"""
import logging
import threading

from libc.stdint cimport int32_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memset, strcmp
from posix.dlfcn cimport RTLD_LOCAL, RTLD_NOW, dlclose, dlerror, dlopen, dlsym

from vkml.vulkan.vkapi cimport *
from vkml.vulkan._features cimport FeatureChain, feature_chain_init

from vkml import config
from vkml.vulkan.errors import DeviceLost, ValidationError, VulkanError, VulkanUnavailable

cdef extern from "vk_messages.h" nogil:
    void vkml_msg_push(uint32_t severity, const char* id, const char* text)
    int vkml_msg_pending()
    int vkml_msg_take(char*** out, int* dropped)

cdef enum:
    API_1_1 = (1 << 22) | (1 << 12)
    API_1_2 = (1 << 22) | (2 << 12)
    API_1_3 = (1 << 22) | (3 << 12)

RESULT_NAMES = {
    0: "VK_SUCCESS", 1: "VK_NOT_READY", 2: "VK_TIMEOUT", 5: "VK_INCOMPLETE",
    -1: "VK_ERROR_OUT_OF_HOST_MEMORY", -2: "VK_ERROR_OUT_OF_DEVICE_MEMORY",
    -3: "VK_ERROR_INITIALIZATION_FAILED", -4: "VK_ERROR_DEVICE_LOST",
    -5: "VK_ERROR_MEMORY_MAP_FAILED", -6: "VK_ERROR_LAYER_NOT_PRESENT",
    -7: "VK_ERROR_EXTENSION_NOT_PRESENT", -8: "VK_ERROR_FEATURE_NOT_PRESENT",
    -9: "VK_ERROR_INCOMPATIBLE_DRIVER", -10: "VK_ERROR_TOO_MANY_OBJECTS",
    -11: "VK_ERROR_FORMAT_NOT_SUPPORTED", -12: "VK_ERROR_FRAGMENTED_POOL", -13: "VK_ERROR_UNKNOWN",
    -1000011001: "VK_ERROR_VALIDATION_FAILED", -1000069000: "VK_ERROR_OUT_OF_POOL_MEMORY",
    -1000161000: "VK_ERROR_FRAGMENTATION", 1000297000: "VK_PIPELINE_COMPILE_REQUIRED",
}


def result_name(int r) -> str:
    return RESULT_NAMES.get(r, f"VkResult({r})")


# ---------------------------------------------------------------- errors and validation messages
_log = logging.getLogger("vkml")

_layer_notes_seen = set()


def _layer_lacks_structure(str msg) -> bool:
    """Whether a message only says that the validation layer does not know a structure in a
    pNext chain: a layer older than the driver, which names extensions the layer never heard
    of (seen on an H200: a Debian 12 layer and VK_NV_cooperative_matrix2's properties). That
    is no error of vkml's, and raising it would make every call fail under that layer."""
    return "-pNext-pNext]" in msg and "unknown VkStructureType" in msg


cdef object _take_messages():
    """The queued messages, less those the layer raises only because it is older than the
    driver (_layer_lacks_structure), which go to the vkml logger once each."""
    cdef char** arr = NULL
    cdef int dropped = 0
    cdef int n = vkml_msg_take(&arr, &dropped)
    msgs = []
    for i in range(n):
        m = arr[i].decode("utf-8", "replace")
        free(arr[i])
        if _layer_lacks_structure(m):
            key = m.split("; Allowed", 1)[0]
            if key not in _layer_notes_seen:
                _layer_notes_seen.add(key)
                _log.warning("the validation layer does not know a structure the driver offers (an older "
                             "layer than the driver); not raised: %s", m[:400])
            continue
        msgs.append(m)
    free(arr)
    return msgs, dropped


cdef int check_messages() except -1 nogil:
    if vkml_msg_pending():
        with gil:
            msgs, dropped = _take_messages()
            if msgs or dropped:
                raise ValidationError(msgs, dropped)
    return 0


cdef int check(VkResult r, const char* what) except -1 nogil:
    if r >= 0:
        if vkml_msg_pending():
            check_messages()
        return 0
    with gil:
        name = what.decode()
        msgs, dropped = _take_messages()
        text = f"{name} failed: {result_name(r)}"
        if msgs:
            text += "\nvalidation layer:\n" + "\n".join(msgs)
        if r == VK_ERROR_DEVICE_LOST:
            raise DeviceLost(text, r, name)
        raise VulkanError(text, r, name)


cdef VkBool32 _on_message(uint32_t severity, VkFlags types,
                          const VkDebugUtilsMessengerCallbackDataEXT* data,
                          void* user) noexcept nogil:
    if severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT and data != NULL:
        vkml_msg_push(severity, data.pMessageIdName, data.pMessage)
    return 0


def _push_test_message(str text) -> None:
    """Inject a message as if the layer had sent it (tests of the raising path)."""
    b = text.encode()
    vkml_msg_push(VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT, b"vkml-test", b)


def raise_pending_messages() -> None:
    """Raise ValidationError now if the validation layer reported anything."""
    check_messages()


# ---------------------------------------------------------------- the instance
cdef bytes _cstr(const char* s):
    return <bytes>s


cdef list _instance_extensions(PFN_vkEnumerateInstanceExtensionProperties enum_ext, const char* layer):
    cdef uint32_t n = 0
    cdef VkExtensionProperties* props = NULL
    cdef VkResult r
    with nogil:  # (the loader reads every driver's manifest here: other threads go on)
        r = enum_ext(layer, &n, NULL)
    if r < 0 or n == 0:
        return []
    props = <VkExtensionProperties*>calloc(n, sizeof(VkExtensionProperties))
    try:
        with nogil:
            r = enum_ext(layer, &n, props)
        if r < 0:
            return []
        return [_cstr(props[i].extensionName).decode() for i in range(n)]
    finally:
        free(props)


cdef list _instance_layers(PFN_vkEnumerateInstanceLayerProperties enum_layers):
    cdef uint32_t n = 0
    cdef VkLayerProperties* props = NULL
    if enum_layers == NULL or enum_layers(&n, NULL) < 0 or n == 0:
        return []
    props = <VkLayerProperties*>calloc(n, sizeof(VkLayerProperties))
    try:
        if enum_layers(&n, props) < 0:
            return []
        return [_cstr(props[i].layerName).decode() for i in range(n)]
    finally:
        free(props)


def _split_factor() -> int:
    """VKML_SPLIT_DEVICE=N (tests): list every physical device N times, so one device opens as
    N independent logical devices (own queue, memory, timeline) and multi-GPU paths run on CI."""
    try:
        return config.split_device()
    except ValueError as e:
        raise VulkanUnavailable(str(e)) from None


cdef class Instance:
    """The process-wide VkInstance (created once, on first use)."""

    def __cinit__(self):
        self.lib = NULL
        self.handle = NULL
        self.phys = NULL
        self.nphys = 0
        self.messenger = 0
        self._ext_cache = {}
        memset(&self.fn, 0, sizeof(InstanceFns))

    cdef VkPhysicalDevice physical(self, int index) except NULL:
        if index < 0 or <uint32_t>index >= self.nphys:
            raise IndexError(f"no Vulkan device vulkan:{index} (there are {self.nphys})")
        return self.phys[index]

    @property
    def api_version(self) -> int:
        return self.api_version

    def _create(self, str library, bint validation):
        cdef bytes lib_b = library.encode()
        cdef const char* lib_c = lib_b
        cdef const char* err
        cdef void* lib
        self.library = library
        # Loading the loader, reading the drivers' manifests, creating the instance and
        # enumerating the GPUs (which loads and starts each driver) take tens to hundreds of
        # milliseconds: without the GIL, so that a session reads its model meanwhile.
        with nogil:
            lib = dlopen(lib_c, RTLD_NOW | RTLD_LOCAL)
        self.lib = lib
        if self.lib == NULL:
            err = dlerror()
            raise VulkanUnavailable(
                f"cannot load the Vulkan loader {library!r}: "
                f"{(<bytes>err).decode(errors='replace') if err != NULL else 'not found'}"
            )
        cdef PFN_vkGetInstanceProcAddr gipa = <PFN_vkGetInstanceProcAddr>dlsym(self.lib, b"vkGetInstanceProcAddr")
        if gipa == NULL:
            raise VulkanUnavailable(f"{library!r} has no vkGetInstanceProcAddr; is it a Vulkan loader?")
        self.fn.vkGetInstanceProcAddr = gipa
        cdef PFN_vkEnumerateInstanceVersion enum_version = <PFN_vkEnumerateInstanceVersion>gipa(
            NULL, b"vkEnumerateInstanceVersion")
        cdef PFN_vkEnumerateInstanceExtensionProperties enum_ext = <PFN_vkEnumerateInstanceExtensionProperties>gipa(
            NULL, b"vkEnumerateInstanceExtensionProperties")
        cdef PFN_vkEnumerateInstanceLayerProperties enum_layers = <PFN_vkEnumerateInstanceLayerProperties>gipa(
            NULL, b"vkEnumerateInstanceLayerProperties")
        cdef PFN_vkCreateInstance create = <PFN_vkCreateInstance>gipa(NULL, b"vkCreateInstance")
        if create == NULL or enum_ext == NULL:
            raise VulkanUnavailable(f"{library!r} does not export the Vulkan 1.0 global commands")
        cdef uint32_t loader_version = 1 << 22
        if enum_version != NULL:
            enum_version(&loader_version)
        if loader_version < API_1_1:
            raise VulkanUnavailable("the Vulkan loader supports only Vulkan 1.0; vkml needs 1.1 or newer")
        self.api_version = min(loader_version & ~0xFFF, API_1_3)

        available = set(_instance_extensions(enum_ext, NULL))
        layers = []
        extensions = []
        if "VK_KHR_portability_enumeration" in available:
            extensions.append("VK_KHR_portability_enumeration")
        layer_exts = set()
        if validation:
            if "VK_LAYER_KHRONOS_validation" not in _instance_layers(enum_layers):
                raise VulkanUnavailable(
                    "VKML_VALIDATION=1 but the Khronos validation layer (VK_LAYER_KHRONOS_validation) "
                    "is not installed (Debian/Ubuntu: apt install vulkan-validationlayers)")
            layers.append("VK_LAYER_KHRONOS_validation")
            layer_exts = set(_instance_extensions(enum_ext, b"VK_LAYER_KHRONOS_validation"))
            if "VK_EXT_debug_utils" not in available | layer_exts:
                raise VulkanUnavailable("VKML_VALIDATION=1 but VK_EXT_debug_utils is not available")
            extensions.append("VK_EXT_debug_utils")
            if "VK_EXT_validation_features" in available | layer_exts:
                extensions.append("VK_EXT_validation_features")

        cdef list keep = [s.encode() for s in layers + extensions]
        cdef const char** names = <const char**>malloc(sizeof(char*) * (len(keep) + 1))
        for i, s in enumerate(keep):
            names[i] = <const char*>s
        cdef VkApplicationInfo app
        memset(&app, 0, sizeof(app))
        app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO
        app.pApplicationName = b"vkml"
        app.pEngineName = b"vkml"
        app.apiVersion = self.api_version
        cdef VkInstanceCreateInfo ci
        memset(&ci, 0, sizeof(ci))
        ci.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO
        ci.pApplicationInfo = &app
        ci.enabledLayerCount = len(layers)
        ci.ppEnabledLayerNames = names
        ci.enabledExtensionCount = len(extensions)
        ci.ppEnabledExtensionNames = names + len(layers)
        if "VK_KHR_portability_enumeration" in extensions:
            ci.flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR
        cdef VkDebugUtilsMessengerCreateInfoEXT dbg
        memset(&dbg, 0, sizeof(dbg))
        dbg.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT
        dbg.messageSeverity = (VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT
                               | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT)
        dbg.messageType = (VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT
                           | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT
                           | VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT)
        dbg.pfnUserCallback = _on_message
        cdef int32_t sync_feature = VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT
        cdef VkValidationFeaturesEXT vfeat
        memset(&vfeat, 0, sizeof(vfeat))
        vfeat.sType = VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT
        vfeat.enabledValidationFeatureCount = 1
        vfeat.pEnabledValidationFeatures = &sync_feature
        if validation:
            ci.pNext = &dbg
            if "VK_EXT_validation_features" in extensions:
                dbg.pNext = &vfeat
        cdef VkResult r
        with nogil:
            r = create(&ci, NULL, &self.handle)
        free(names)
        if r != VK_SUCCESS:
            self.handle = NULL
            msgs, _ = _take_messages()
            hint = ""
            if r == VK_ERROR_INCOMPATIBLE_DRIVER:
                hint = " (no Vulkan driver (ICD) is installed, or none supports Vulkan 1.1)"
            elif r == VK_ERROR_LAYER_NOT_PRESENT:
                hint = " (the validation layer is missing)"
            raise VulkanUnavailable(f"vkCreateInstance failed: {result_name(r)}{hint}"
                                    + ("\n" + "\n".join(msgs) if msgs else ""), r, "vkCreateInstance")
        self.validation = validation
        self._load_functions()
        if validation:
            dbg.pNext = NULL
            check(self.fn.vkCreateDebugUtilsMessengerEXT(self.handle, &dbg, NULL, &self.messenger),
                  b"vkCreateDebugUtilsMessengerEXT")
        self._enumerate()

    def _load_functions(self):
        cdef PFN_vkGetInstanceProcAddr g = self.fn.vkGetInstanceProcAddr
        cdef VkInstance i = self.handle
        self.fn.vkDestroyInstance = <PFN_vkDestroyInstance>g(i, b"vkDestroyInstance")
        self.fn.vkEnumeratePhysicalDevices = <PFN_vkEnumeratePhysicalDevices>g(i, b"vkEnumeratePhysicalDevices")
        self.fn.vkGetPhysicalDeviceProperties2 = <PFN_vkGetPhysicalDeviceProperties2>g(
            i, b"vkGetPhysicalDeviceProperties2")
        self.fn.vkGetPhysicalDeviceFeatures2 = <PFN_vkGetPhysicalDeviceFeatures2>g(i, b"vkGetPhysicalDeviceFeatures2")
        self.fn.vkGetPhysicalDeviceMemoryProperties2 = <PFN_vkGetPhysicalDeviceMemoryProperties2>g(
            i, b"vkGetPhysicalDeviceMemoryProperties2")
        self.fn.vkGetPhysicalDeviceQueueFamilyProperties = <PFN_vkGetPhysicalDeviceQueueFamilyProperties>g(
            i, b"vkGetPhysicalDeviceQueueFamilyProperties")
        self.fn.vkEnumerateDeviceExtensionProperties = <PFN_vkEnumerateDeviceExtensionProperties>g(
            i, b"vkEnumerateDeviceExtensionProperties")
        self.fn.vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR = (
            <PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR>g(
                i, b"vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR"))
        self.fn.vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV = (
            <PFN_vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV>g(
                i, b"vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV"))
        self.fn.vkCreateDevice = <PFN_vkCreateDevice>g(i, b"vkCreateDevice")
        self.fn.vkGetDeviceProcAddr = <PFN_vkGetDeviceProcAddr>g(i, b"vkGetDeviceProcAddr")
        self.fn.vkCreateDebugUtilsMessengerEXT = <PFN_vkCreateDebugUtilsMessengerEXT>g(
            i, b"vkCreateDebugUtilsMessengerEXT")
        self.fn.vkDestroyDebugUtilsMessengerEXT = <PFN_vkDestroyDebugUtilsMessengerEXT>g(
            i, b"vkDestroyDebugUtilsMessengerEXT")
        missing = []
        if self.fn.vkEnumeratePhysicalDevices == NULL:
            missing.append("vkEnumeratePhysicalDevices")
        if self.fn.vkGetPhysicalDeviceProperties2 == NULL:
            missing.append("vkGetPhysicalDeviceProperties2")
        if self.fn.vkGetPhysicalDeviceFeatures2 == NULL:
            missing.append("vkGetPhysicalDeviceFeatures2")
        if self.fn.vkGetPhysicalDeviceMemoryProperties2 == NULL:
            missing.append("vkGetPhysicalDeviceMemoryProperties2")
        if self.fn.vkCreateDevice == NULL:
            missing.append("vkCreateDevice")
        if self.fn.vkGetDeviceProcAddr == NULL:
            missing.append("vkGetDeviceProcAddr")
        if missing:
            raise VulkanUnavailable(f"the Vulkan loader lacks {', '.join(missing)}")

    def _enumerate(self):
        cdef uint32_t n = 0, k, split = _split_factor()
        cdef VkResult r
        with nogil:
            r = self.fn.vkEnumeratePhysicalDevices(self.handle, &n, NULL)
        check(r, b"vkEnumeratePhysicalDevices")
        self.phys = <VkPhysicalDevice*>calloc(n * split + 1, sizeof(VkPhysicalDevice))
        if n:
            with nogil:
                r = self.fn.vkEnumeratePhysicalDevices(self.handle, &n, self.phys)
            check(r, b"vkEnumeratePhysicalDevices")
        if split > 1:  # device k is physical device k // split (in place, from the end)
            for k in range(n * split - 1, -1, -1):
                self.phys[k] = self.phys[k // split]
        self.nphys = n * split

    def destroy(self) -> None:
        """Destroy the VkInstance (after every Device is closed)."""
        if self.handle != NULL:
            if self.messenger and self.fn.vkDestroyDebugUtilsMessengerEXT != NULL:
                self.fn.vkDestroyDebugUtilsMessengerEXT(self.handle, self.messenger, NULL)
                self.messenger = 0
            self.fn.vkDestroyInstance(self.handle, NULL)
            self.handle = NULL
        free(self.phys)
        self.phys = NULL
        self.nphys = 0

    # ------------------------------------------------------------ physical-device queries
    def device_extensions(self, int index) -> list:
        cdef VkPhysicalDevice pd = self.physical(index)
        cdef uint32_t n = 0
        cdef VkExtensionProperties* props = NULL
        if index in self._ext_cache:
            return list(self._ext_cache[index])
        check(self.fn.vkEnumerateDeviceExtensionProperties(pd, NULL, &n, NULL), b"vkEnumerateDeviceExtensionProperties")
        props = <VkExtensionProperties*>calloc(n + 1, sizeof(VkExtensionProperties))
        try:
            check(self.fn.vkEnumerateDeviceExtensionProperties(pd, NULL, &n, props),
                  b"vkEnumerateDeviceExtensionProperties")
            exts = sorted(_cstr(props[i].extensionName).decode() for i in range(n))
            self._ext_cache[index] = tuple(exts)
            return exts
        finally:
            free(props)

    def heap_budgets(self, int index) -> list:
        """[(heap size, budget or None, usage or None)] for every memory heap, queried now."""
        cdef VkPhysicalDevice pd = self.physical(index)
        cdef VkPhysicalDeviceMemoryProperties2 mp
        cdef VkPhysicalDeviceMemoryBudgetPropertiesEXT budget
        memset(&mp, 0, sizeof(mp))
        memset(&budget, 0, sizeof(budget))
        mp.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2
        budget.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT
        has_budget = "VK_EXT_memory_budget" in self.device_extensions(index)
        if has_budget:
            mp.pNext = &budget
        self.fn.vkGetPhysicalDeviceMemoryProperties2(pd, &mp)
        check_messages()
        out = []
        for h in range(mp.memoryProperties.memoryHeapCount):
            size = mp.memoryProperties.memoryHeaps[h].size
            if has_budget:
                out.append((size, budget.heapBudget[h], budget.heapUsage[h]))
            else:
                out.append((size, None, None))
        return out

    def describe(self, int index) -> dict:
        """Everything vkml wants to know about physical device `index`, as plain Python data."""
        cdef VkPhysicalDevice pd = self.physical(index)
        exts = set(self.device_extensions(index))
        cdef VkPhysicalDeviceProperties2 props
        cdef VkPhysicalDeviceDriverProperties driver
        cdef VkPhysicalDeviceSubgroupProperties subgroup
        cdef VkPhysicalDeviceSubgroupSizeControlProperties sgsize
        cdef VkPhysicalDevicePushDescriptorPropertiesKHR pushd
        cdef VkPhysicalDeviceMaintenance3Properties maint3
        cdef VkPhysicalDeviceIDProperties idp
        cdef VkPhysicalDevicePCIBusInfoPropertiesEXT pcib
        cdef VkPhysicalDeviceCooperativeMatrix2PropertiesNV cm2p
        memset(&cm2p, 0, sizeof(cm2p))
        memset(&idp, 0, sizeof(idp))
        memset(&pcib, 0, sizeof(pcib))
        memset(&props, 0, sizeof(props))
        memset(&driver, 0, sizeof(driver))
        memset(&subgroup, 0, sizeof(subgroup))
        memset(&sgsize, 0, sizeof(sgsize))
        memset(&pushd, 0, sizeof(pushd))
        memset(&maint3, 0, sizeof(maint3))
        props.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2
        # First the plain properties, to learn the device's API version (it decides which
        # structures may be chained).
        self.fn.vkGetPhysicalDeviceProperties2(pd, &props)
        cdef uint32_t dev_api = props.properties.apiVersion
        cdef uint32_t api = min(dev_api, self.api_version)
        cdef void** nxt = &props.pNext
        driver.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES
        subgroup.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES
        sgsize.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES
        pushd.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PUSH_DESCRIPTOR_PROPERTIES_KHR
        maint3.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES
        has_driver = api >= API_1_2 or "VK_KHR_driver_properties" in exts
        has_sgsize = api >= API_1_3 or "VK_EXT_subgroup_size_control" in exts
        has_push = "VK_KHR_push_descriptor" in exts
        has_id = api >= API_1_1  # the device and driver UUIDs (core since 1.1)
        has_pci = "VK_EXT_pci_bus_info" in exts
        has_cm2 = "VK_NV_cooperative_matrix2" in exts and "VK_KHR_cooperative_matrix" in exts
        cm2p.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_PROPERTIES_NV
        idp.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES
        pcib.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PCI_BUS_INFO_PROPERTIES_EXT
        if has_driver:
            nxt[0] = &driver
            nxt = &driver.pNext
        nxt[0] = &subgroup
        nxt = &subgroup.pNext
        nxt[0] = &maint3
        nxt = &maint3.pNext
        if has_sgsize:
            nxt[0] = &sgsize
            nxt = &sgsize.pNext
        if has_push:
            nxt[0] = &pushd
            nxt = &pushd.pNext
        if has_id:
            nxt[0] = &idp
            nxt = &idp.pNext
        if has_pci:
            nxt[0] = &pcib
            nxt = &pcib.pNext
        if has_cm2:
            nxt[0] = &cm2p
            nxt = &cm2p.pNext
        self.fn.vkGetPhysicalDeviceProperties2(pd, &props)

        cdef FeatureChain fc
        chain = {
            "16bit_storage": api >= API_1_1 or "VK_KHR_16bit_storage" in exts,
            "8bit_storage": api >= API_1_2 or "VK_KHR_8bit_storage" in exts,
            "float16_int8": api >= API_1_2 or "VK_KHR_shader_float16_int8" in exts,
            "timeline": api >= API_1_2 or "VK_KHR_timeline_semaphore" in exts,
            "memory_model": api >= API_1_2 or "VK_KHR_vulkan_memory_model" in exts,
            "subgroup_ext_types": api >= API_1_2 or "VK_KHR_shader_subgroup_extended_types" in exts,
            "subgroup_size": has_sgsize,
            "coop_matrix": "VK_KHR_cooperative_matrix" in exts,
            "coop_matrix2": has_cm2,
            "pipeline_exec": "VK_KHR_pipeline_executable_properties" in exts,
        }
        feature_chain_init(&fc, chain)
        self.fn.vkGetPhysicalDeviceFeatures2(pd, &fc.f2)

        cdef VkPhysicalDeviceLimits* lim = &props.properties.limits
        features = {
            "fp16_arithmetic": bool(fc.f16a.shaderFloat16),
            "int8_arithmetic": bool(fc.f16a.shaderInt8),
            "storage_16bit": bool(fc.f16s.storageBuffer16BitAccess),
            "push_constant_16bit": bool(fc.f16s.storagePushConstant16),
            "storage_8bit": bool(fc.f8s.storageBuffer8BitAccess),
            "int64": bool(fc.f2.features.shaderInt64),
            "int16": bool(fc.f2.features.shaderInt16),
            "fp64": bool(fc.f2.features.shaderFloat64),
            "timeline_semaphore": bool(fc.ftl.timelineSemaphore),
            "push_descriptor": has_push,
            "memory_budget": "VK_EXT_memory_budget" in exts,
            "vulkan_memory_model": bool(fc.fmm.vulkanMemoryModel),
            "vulkan_memory_model_device_scope": bool(fc.fmm.vulkanMemoryModelDeviceScope),
            "subgroup_extended_types": bool(fc.fsgx.shaderSubgroupExtendedTypes),
            "subgroup_size_control": bool(fc.fsgs.subgroupSizeControl),
            "compute_full_subgroups": bool(fc.fsgs.computeFullSubgroups),
            "cooperative_matrix": bool(fc.fcm.cooperativeMatrix),
            # VK_NV_cooperative_matrix2's workgroup-scope matrices of flexible sizes loaded and
            # stored through tensor layouts (shaders/matmul_cm2.comp needs all three)
            "cooperative_matrix2": bool(fc.fcm.cooperativeMatrix and fc.fcm2.cooperativeMatrixWorkgroupScope
                                        and fc.fcm2.cooperativeMatrixFlexibleDimensions
                                        and fc.fcm2.cooperativeMatrixTensorAddressing),
        }

        coop = []
        cdef uint32_t ncm = 0
        cdef VkCooperativeMatrixPropertiesKHR* cm = NULL
        if features["cooperative_matrix"] and self.fn.vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR != NULL:
            check(self.fn.vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR(pd, &ncm, NULL),
                  b"vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR")
            cm = <VkCooperativeMatrixPropertiesKHR*>calloc(ncm + 1, sizeof(VkCooperativeMatrixPropertiesKHR))
            for i in range(ncm):
                cm[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR
            try:
                check(self.fn.vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR(pd, &ncm, cm),
                      b"vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR")
                for i in range(ncm):
                    coop.append((cm[i].MSize, cm[i].NSize, cm[i].KSize, cm[i].AType, cm[i].BType,
                                 cm[i].CType, cm[i].ResultType, bool(cm[i].saturatingAccumulation),
                                 cm[i].scope))
            finally:
                free(cm)

        # VK_NV_cooperative_matrix2: the sizes workgroup-scope matrices may take (multiples of
        # these granules, for exactly `workgroupInvocations` invocations)
        flexible = []
        cdef uint32_t nfl = 0
        cdef VkCooperativeMatrixFlexibleDimensionsPropertiesNV* fl = NULL
        if (features["cooperative_matrix2"]
                and self.fn.vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV != NULL):
            check(self.fn.vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV(pd, &nfl, NULL),
                  b"vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV")
            fl = <VkCooperativeMatrixFlexibleDimensionsPropertiesNV*>calloc(
                nfl + 1, sizeof(VkCooperativeMatrixFlexibleDimensionsPropertiesNV))
            for i in range(nfl):
                fl[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_FLEXIBLE_DIMENSIONS_PROPERTIES_NV
            try:
                check(self.fn.vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV(pd, &nfl, fl),
                      b"vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV")
                for i in range(nfl):
                    flexible.append((fl[i].MGranularity, fl[i].NGranularity, fl[i].KGranularity, fl[i].AType,
                                     fl[i].BType, fl[i].CType, fl[i].ResultType,
                                     bool(fl[i].saturatingAccumulation), fl[i].scope, fl[i].workgroupInvocations))
            finally:
                free(fl)
        if not flexible:
            features["cooperative_matrix2"] = False

        cdef uint32_t nq = 0
        cdef VkQueueFamilyProperties* qf = NULL
        self.fn.vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, NULL)
        qf = <VkQueueFamilyProperties*>calloc(nq + 1, sizeof(VkQueueFamilyProperties))
        self.fn.vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, qf)
        queues = [(qf[i].queueFlags, qf[i].queueCount, qf[i].timestampValidBits) for i in range(nq)]
        free(qf)

        cdef VkPhysicalDeviceMemoryProperties2 mp
        memset(&mp, 0, sizeof(mp))
        mp.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2
        self.fn.vkGetPhysicalDeviceMemoryProperties2(pd, &mp)
        budgets = self.heap_budgets(index)
        heaps = [
            {"size": mp.memoryProperties.memoryHeaps[h].size,
             "flags": mp.memoryProperties.memoryHeaps[h].flags,
             "budget": budgets[h][1], "usage": budgets[h][2]}
            for h in range(mp.memoryProperties.memoryHeapCount)
        ]
        mtypes = [
            {"flags": mp.memoryProperties.memoryTypes[t].propertyFlags,
             "heap": mp.memoryProperties.memoryTypes[t].heapIndex}
            for t in range(mp.memoryProperties.memoryTypeCount)
        ]
        check_messages()
        max_alloc = maint3.maxMemoryAllocationSize if maint3.maxMemoryAllocationSize else (1 << 30)
        return {
            "index": index,
            "device_name": _cstr(props.properties.deviceName).decode(errors="replace"),
            "vendor_id": props.properties.vendorID,
            "device_id": props.properties.deviceID,
            "device_type": props.properties.deviceType,
            "api_version": dev_api,
            "effective_api_version": api,
            "driver_version": props.properties.driverVersion,
            "driver_id": driver.driverID if has_driver else 0,
            "driver_name": _cstr(driver.driverName).decode(errors="replace") if has_driver else "",
            "driver_info": _cstr(driver.driverInfo).decode(errors="replace") if has_driver else "",
            "pipeline_cache_uuid": (<char*>props.properties.pipelineCacheUUID)[:16],
            # what matches a GPU to other APIs' names for it (CUDA's and nvidia-smi's UUID, the PCI
            # address Ray and schedulers report): None where the driver does not say
            "device_uuid": (<char*>idp.deviceUUID)[:16].hex() if has_id else None,
            "pci_bus": (f"{pcib.pciDomain:04x}:{pcib.pciBus:02x}:{pcib.pciDevice:02x}.{pcib.pciFunction:x}"
                        if has_pci else None),
            "subgroup_size": subgroup.subgroupSize,
            "min_subgroup_size": sgsize.minSubgroupSize if has_sgsize else subgroup.subgroupSize,
            "max_subgroup_size": sgsize.maxSubgroupSize if has_sgsize else subgroup.subgroupSize,
            "subgroup_operations": subgroup.supportedOperations,
            "subgroup_stages": subgroup.supportedStages,
            "features": features,
            "feature_structs": chain,
            # VK_KHR_pipeline_executable_properties (VKML_PIPELINE_STATS): kept out of `features`,
            # which planning reads, because it changes no kernel's choice
            "pipeline_executable_info": bool(fc.fpe.pipelineExecutableInfo),
            "cooperative_matrix": coop,
            "cooperative_matrix_flexible": flexible,
            "cooperative_matrix2_limits": {
                "max_workgroup_size": cm2p.cooperativeMatrixWorkgroupScopeMaxWorkgroupSize,
                "max_dimension": cm2p.cooperativeMatrixFlexibleDimensionsMaxDimension,
                "reserved_shared_memory": cm2p.cooperativeMatrixWorkgroupScopeReservedSharedMemory,
            },
            "queue_families": queues,
            "heaps": heaps,
            "memory_types": mtypes,
            "extensions": sorted(exts),
            "limits": {
                "max_storage_buffer_range": lim.maxStorageBufferRange,
                "max_push_constants_size": lim.maxPushConstantsSize,
                "max_memory_allocation_count": lim.maxMemoryAllocationCount,
                "max_memory_allocation_size": max_alloc,
                "max_bound_descriptor_sets": lim.maxBoundDescriptorSets,
                "max_per_stage_storage_buffers": lim.maxPerStageDescriptorStorageBuffers,
                "max_push_descriptors": pushd.maxPushDescriptors if has_push else 0,
                "max_compute_shared_memory_size": lim.maxComputeSharedMemorySize,
                "max_compute_work_group_count": (lim.maxComputeWorkGroupCount[0], lim.maxComputeWorkGroupCount[1], lim.maxComputeWorkGroupCount[2]),
                "max_compute_work_group_invocations": lim.maxComputeWorkGroupInvocations,
                "max_compute_work_group_size": (lim.maxComputeWorkGroupSize[0], lim.maxComputeWorkGroupSize[1], lim.maxComputeWorkGroupSize[2]),
                "min_storage_buffer_offset_alignment": lim.minStorageBufferOffsetAlignment,
                "min_memory_map_alignment": lim.minMemoryMapAlignment,
                "non_coherent_atom_size": lim.nonCoherentAtomSize,
                "timestamp_period": lim.timestampPeriod,
                "timestamp_compute_and_graphics": bool(lim.timestampComputeAndGraphics),
            },
        }


# ---------------------------------------------------------------- the singleton
cdef Instance _INSTANCE = None
cdef object _REASON = None
_LOCK = threading.Lock()


def instance() -> Instance:
    """The process-wide Instance; raises VulkanUnavailable (with the reason) if there is none."""
    global _INSTANCE, _REASON
    with _LOCK:
        if _INSTANCE is not None:
            return _INSTANCE
        if _REASON is not None:
            raise VulkanUnavailable(_REASON)
        disabled_by = config.vulkan_disabled_by()
        if disabled_by is not None:
            _REASON = f"Vulkan disabled by VKML_VULKAN={disabled_by}"
            raise VulkanUnavailable(_REASON)
        library = config.vulkan_library()
        inst = Instance()
        try:
            inst._create(library, config.validation())
        except VulkanError as e:
            inst.destroy()
            _REASON = str(e)
            raise
        if inst.nphys == 0:
            _REASON = "the Vulkan loader found no physical device (no driver, or the driver sees no GPU)"
            inst.destroy()
            raise VulkanUnavailable(_REASON)
        _INSTANCE = inst
        return inst


_INHERITED = []  # instances a forked child inherited: never used or destroyed there


def forget_after_fork() -> None:
    """In a forked child: the parent's instance belongs to the parent (its driver threads did
    not come along), so the next instance() makes a new one; the old one is kept, untouched."""
    global _INSTANCE, _LOCK
    if _INSTANCE is not None:
        _INHERITED.append(_INSTANCE)
    _INSTANCE = None
    _LOCK = threading.Lock()  # (another thread may have held it at the fork)


def unavailable_reason():
    """None when Vulkan works, else one sentence saying why it does not."""
    try:
        instance()
    except VulkanError as e:
        return str(e)
    return None


def shutdown() -> None:
    """Destroy the instance (at interpreter exit, after the devices)."""
    global _INSTANCE
    with _LOCK:
        if _INSTANCE is not None:
            _INSTANCE.destroy()
            _INSTANCE = None
