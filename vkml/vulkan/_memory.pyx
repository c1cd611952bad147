# cython: language_level=3
"""Device memory: large blocks sub-allocated with free lists, and views into them.

Each block is one VkDeviceMemory with one VkBuffer over all of it, so a tensor is a
(block, offset, size) view: binding it is (block.buffer, offset, size), and no tensor ever
costs a vkAllocateMemory. Host-visible blocks stay mapped for their whole life.

Three pools, each on the memory type that suits it:
  device    DEVICE_LOCAL, the largest such heap; HOST_VISIBLE|HOST_COHERENT preferred within
            that heap (resizable BAR, unified memory, lavapipe): then uploads are memcpy.
  host      HOST_VISIBLE|HOST_COHERENT, not device-local if possible: staging for uploads,
            small constant buffers.
  readback  HOST_VISIBLE|HOST_COHERENT|HOST_CACHED if possible: staging for downloads.
"""
import bisect
import logging
import threading

from libc.stdint cimport uint32_t, uint64_t
from libc.string cimport memcpy, memset

from vkml.vulkan.vkapi cimport *
from vkml.vulkan._device cimport Device
from vkml.vulkan._instance cimport check, check_messages

from vkml import config
from vkml.vulkan.errors import BufferTooLarge, OutOfDeviceMemory, VulkanError
from vkml.vulkan.facts import MIN_ALIGNMENT, budget_bytes

_log = logging.getLogger("vkml")

cdef VkFlags BUFFER_USAGE = (VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT
                             | VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT)
cdef VkFlags BAD_TYPE_FLAGS = (VK_MEMORY_PROPERTY_PROTECTED_BIT | VK_MEMORY_PROPERTY_LAZILY_ALLOCATED_BIT
                               | VK_MEMORY_PROPERTY_DEVICE_COHERENT_BIT_AMD)
cdef VkFlags HOST_VC = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT

MIB = 1 << 20
DEVICE_BLOCK_MAX = 256 * MIB  # shared device blocks grow 32, 64, 128, 256 MiB (capped by limits)
DEVICE_BLOCK_FIRST = 32 * MIB
HOST_BLOCK_MAX = 64 * MIB
HOST_BLOCK_FIRST = 4 * MIB
STAGING_CHUNK = 32 * MIB
BIG_COPY = 1 << 16            # memcpy without the GIL from this size on


cdef inline uint64_t _round_up(uint64_t n, uint64_t a) noexcept nogil:
    return (n + a - 1) // a * a


def _fmt(n):
    from vkml.vulkan.errors import _fmt as f
    return f(n)


cdef class Pool:
    def __repr__(self):
        return (f"<Pool {self.kind} type={self.memory_type} heap={self.heap} flags=0x{self.flags:x} "
                f"blocks={len(self.blocks)}>")


cdef class Block:
    """One VkDeviceMemory + a VkBuffer spanning it, with a free list."""

    def __cinit__(self):
        self.memory = 0
        self.buffer = 0
        self.mapped = NULL
        self.alive = False
        self.used = 0

    @property
    def kind(self) -> str:
        return self.pool.kind

    @property
    def is_mapped(self) -> bool:
        return self.mapped != NULL and self.pool.mappable

    @property
    def host_cached(self) -> bool:
        return bool(self.pool.flags & VK_MEMORY_PROPERTY_HOST_CACHED_BIT)

    @property
    def free_ranges(self) -> list:
        return [tuple(r) for r in self.free]

    cdef int _take(self, Py_ssize_t i, uint64_t size) except -1:
        r = self.free[i]
        off = r[0]
        if r[1] == size:
            del self.free[i]
        else:
            r[0] = off + size
            r[1] = r[1] - size
        self.used += size
        return 0

    cdef int _give(self, uint64_t offset, uint64_t size) except -1:
        cdef Py_ssize_t i = bisect.bisect_left(self.free, offset, key=lambda r: r[0])
        if i < len(self.free) and self.free[i][0] < offset + size:
            raise RuntimeError(f"double free of [{offset}, {offset + size}) in block {self.id}")
        if i > 0 and self.free[i - 1][0] + self.free[i - 1][1] > offset:
            raise RuntimeError(f"double free of [{offset}, {offset + size}) in block {self.id}")
        # Coalesce with the neighbours.
        if i > 0 and self.free[i - 1][0] + self.free[i - 1][1] == offset:
            self.free[i - 1][1] += size
            if i < len(self.free) and self.free[i - 1][0] + self.free[i - 1][1] == self.free[i][0]:
                self.free[i - 1][1] += self.free[i][1]
                del self.free[i]
        elif i < len(self.free) and offset + size == self.free[i][0]:
            self.free[i][0] = offset
            self.free[i][1] += size
        else:
            self.free.insert(i, [offset, size])
        self.used -= size
        return 0

    def __repr__(self):
        return (f"<Block {self.id} {self.pool.kind} {self.size} B used={self.used} "
                f"{'dedicated ' if self.dedicated else ''}{'alive' if self.alive else 'released'}>")


cdef class BufferView:
    """(block, offset, size): a range of device memory, bindable as a storage buffer.

    Frees its range when garbage-collected (or on free()); sub-views keep their parent
    alive. Anything that records the view into a command buffer keeps a reference."""

    def __cinit__(self):
        self.freed = False
        self.taken = 0

    cdef int check_alive(self) except -1:
        if self.freed:
            raise ValueError("this BufferView was freed")
        if not self.block.alive:
            raise VulkanError(f"{self.block.device.name} was closed; this BufferView is gone")
        return 0

    @property
    def device(self):
        return self.block.device

    @property
    def buffer_handle(self) -> int:
        return self.block.buffer

    @property
    def mapped(self) -> bool:
        """True when the host writes/reads this memory directly (no staging copy)."""
        return self.block.is_mapped

    @property
    def alive(self) -> bool:
        return not self.freed and self.block.alive

    def sub(self, uint64_t offset, uint64_t size) -> BufferView:
        """A view of bytes [offset, offset+size) of this one (shares its memory)."""
        self.check_alive()
        if offset + size > self.size:
            raise ValueError(f"sub-view [{offset}, {offset + size}) exceeds the view's {self.size} bytes")
        cdef BufferView v = BufferView.__new__(BufferView)
        v.block = self.block
        v.offset = self.offset + offset
        v.size = size
        v.parent = self
        return v

    def free(self) -> None:
        """Give the range back now (the view must not be used afterwards)."""
        if self.freed:
            return
        self.freed = True
        if self.taken and self.block is not None and self.block.alive:
            (<Allocator>self.block.device.allocator).release_range(self.block, self.offset, self.taken)

    def __dealloc__(self):
        if not self.freed and self.taken and self.block is not None and self.block.alive:
            try:
                (<Allocator>self.block.device.allocator).release_range(self.block, self.offset, self.taken)
            except Exception as e:  # a destructor cannot raise: say what it could not give back
                if _log is not None:  # (None late in the interpreter's exit)
                    _log.warning("vkml: giving back %d bytes of a memory block failed (%s: %s); the "
                                 "allocator keeps them until the block goes", self.taken, type(e).__name__, e)

    # ------------------------------------------------------------ host transfers
    def write(self, data, uint64_t offset=0) -> None:
        """Copy the bytes of a C-contiguous buffer (bytes, ndarray...) into the view at
        `offset`: a memcpy into mapped memory, or a staging buffer + copy + wait."""
        self.check_alive()
        cdef const unsigned char[::1] src = _bytes_view(data)
        cdef uint64_t n = src.shape[0]
        if offset + n > self.size:
            raise ValueError(f"writing {n} bytes at offset {offset} overflows the view's {self.size} bytes")
        if n == 0:
            return
        if self.block.is_mapped:
            _copy(self.block.mapped + self.offset + offset, <const char*>&src[0], n)
            return
        cdef Allocator alloc = self.block.device.allocator
        cdef uint64_t done = 0, chunk
        cdef BufferView stage
        while done < n:
            chunk = min(n - done, STAGING_CHUNK)
            stage = alloc.alloc(chunk, "host")
            _copy(stage.block.mapped + stage.offset, <const char*>&src[done], chunk)
            self.block.device.copy_now(stage.block.buffer, stage.offset, self.block.buffer,
                                       self.offset + offset + done, chunk)
            stage.free()
            done += chunk

    def read_into(self, out, uint64_t offset=0) -> None:
        """Fill the writable C-contiguous buffer `out` from the view's bytes at `offset`."""
        self.check_alive()
        cdef unsigned char[::1] dst = _writable_bytes_view(out)
        cdef uint64_t n = dst.shape[0]
        if offset + n > self.size:
            raise ValueError(f"reading {n} bytes at offset {offset} overruns the view's {self.size} bytes")
        if n == 0:
            return
        cdef Allocator alloc = self.block.device.allocator
        mode = alloc.readback
        if self.block.is_mapped and (mode == "map" or (mode == "auto" and self.block.host_cached)):
            _copy(<char*>&dst[0], self.block.mapped + self.offset + offset, n)
            return
        cdef uint64_t done = 0, chunk
        cdef BufferView stage
        while done < n:
            chunk = min(n - done, STAGING_CHUNK)
            stage = alloc.alloc(chunk, "readback")
            self.block.device.copy_now(self.block.buffer, self.offset + offset + done,
                                       stage.block.buffer, stage.offset, chunk)
            _copy(<char*>&dst[done], stage.block.mapped + stage.offset, chunk)
            stage.free()
            done += chunk

    def read_mapped(self, out, uint64_t offset=0) -> None:
        """read_into() straight from the mapping, whatever VKML_READBACK says: for a few
        bytes read after every run (a fault word), where staging would cost a submit and a
        wait. The view must be host-visible (kind "host" or "readback")."""
        self.check_alive()
        cdef unsigned char[::1] dst = _writable_bytes_view(out)
        cdef uint64_t n = dst.shape[0]
        if offset + n > self.size:
            raise ValueError(f"reading {n} bytes at offset {offset} overruns the view's {self.size} bytes")
        if not self.block.is_mapped:
            raise ValueError(f"read_mapped() of a view that is not host-visible ({self.block.pool.kind} memory)")
        if n:
            _copy(<char*>&dst[0], self.block.mapped + self.offset + offset, n)

    def read(self, nbytes=None, uint64_t offset=0) -> bytes:
        """The view's bytes (all of them, or `nbytes` from `offset`)."""
        n = self.size - offset if nbytes is None else nbytes
        out = bytearray(n)
        self.read_into(out, offset)
        return bytes(out)

    def __repr__(self):
        return (f"<BufferView block={self.block.id} offset={self.offset} size={self.size}"
                f"{' mapped' if self.block.is_mapped else ''}{' freed' if self.freed else ''}>")


cdef const unsigned char[::1] _bytes_view(data) except *:
    mv = memoryview(data)
    if not mv.c_contiguous:
        raise ValueError("write() needs C-contiguous data (use numpy.ascontiguousarray)")
    return mv.cast("B") if mv.ndim != 1 or mv.format != "B" else mv


cdef unsigned char[::1] _writable_bytes_view(out) except *:
    mv = memoryview(out)
    if mv.readonly:
        raise ValueError("read_into() needs a writable buffer")
    if not mv.c_contiguous:
        raise ValueError("read_into() needs a C-contiguous buffer")
    return mv.cast("B") if mv.ndim != 1 or mv.format != "B" else mv


cdef void _copy(char* dst, const char* src, uint64_t n) noexcept:
    if n >= BIG_COPY:
        with nogil:
            memcpy(dst, src, n)
    else:
        memcpy(dst, src, n)


cdef class Allocator:
    """Sub-allocating allocator of one Device, with a per-heap budget."""

    def __init__(self, Device device):
        self.device = device
        self.lock = threading.RLock()
        self.alignment = max(device.storage_alignment, MIN_ALIGNMENT)
        self.reserved = {}
        self.budget_setting = config.budget_setting()
        self.allocations = 0
        self.max_allocations = device.limits["max_memory_allocation_count"]
        self.readback = config.readback_mode()
        self.next_id = 0
        self.pools = {}
        self._choose_pools()

    def _choose_pools(self):
        cdef Device dev = self.device
        raw_types = [(t["flags"], t["heap"]) for t in dev.inst.describe(dev.index)["memory_types"]]
        heaps = dev.info.heaps
        allowed = self._probe_type_bits()
        usable = [(i, f, h) for i, (f, h) in enumerate(raw_types)
                  if allowed & (1 << i) and not f & BAD_TYPE_FLAGS]
        if not usable:
            raise VulkanError(f"{dev.name}: no memory type can back a storage buffer")
        no_map = "mapped_memory" in config.disabled_features()

        # device pool: DEVICE_LOCAL on the largest device-local heap.
        local = [(i, f, h) for i, f, h in usable if f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT]
        if local:
            big_heap = max({h for _, _, h in local}, key=lambda h: heaps[h].size)
            cands = [(i, f, h) for i, f, h in local if h == big_heap]
        else:  # some integrated GPUs and software devices have no device-local type
            cands = usable
        if no_map:
            ordered = sorted(cands, key=lambda t: bool(t[1] & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT))
        else:
            ordered = sorted(cands, key=lambda t: (t[1] & HOST_VC) != HOST_VC)
        self._add_pool("device", ordered[0], mappable_ok=not no_map)

        host = [(i, f, h) for i, f, h in usable if (f & HOST_VC) == HOST_VC]
        if not host:
            raise VulkanError(f"{dev.name}: no HOST_VISIBLE|HOST_COHERENT memory type")
        up = sorted(host, key=lambda t: (bool(t[1] & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT),
                                         bool(t[1] & VK_MEMORY_PROPERTY_HOST_CACHED_BIT)))
        self._add_pool("host", up[0], mappable_ok=True)
        down = sorted(host, key=lambda t: (not t[1] & VK_MEMORY_PROPERTY_HOST_CACHED_BIT,
                                           bool(t[1] & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)))
        self._add_pool("readback", down[0], mappable_ok=True)

    def _add_pool(self, str kind, tuple t, bint mappable_ok):
        cdef Device dev = self.device
        cdef Pool p = Pool.__new__(Pool)
        p.kind = kind
        p.memory_type, p.flags, p.heap = t
        p.mappable = mappable_ok and (p.flags & HOST_VC) == HOST_VC
        cap = DEVICE_BLOCK_MAX if kind == "device" else HOST_BLOCK_MAX
        cap = min(cap, dev.max_storage_buffer_range, dev.limits["max_memory_allocation_size"])
        p.block_cap = cap // self.alignment * self.alignment
        p.blocks = []
        p.made = 0
        self.pools[kind] = p

    def _probe_type_bits(self) -> int:
        cdef Device dev = self.device
        cdef VkBufferCreateInfo bci
        cdef VkBuffer buf = 0
        cdef VkMemoryRequirements req
        memset(&bci, 0, sizeof(bci))
        bci.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO
        bci.size = 65536
        bci.usage = BUFFER_USAGE
        bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE
        check(dev.fn.vkCreateBuffer(dev.handle, &bci, NULL, &buf), b"vkCreateBuffer")
        dev.fn.vkGetBufferMemoryRequirements(dev.handle, buf, &req)
        dev.fn.vkDestroyBuffer(dev.handle, buf, NULL)
        return req.memoryTypeBits

    # ------------------------------------------------------------ budget
    def set_budget(self, value) -> None:
        self.budget_setting = config.parse_budget(value)

    def budget(self, int heap) -> int:
        """Bytes vkml may hold in `heap` (see VKML_MEMORY_BUDGET)."""
        cdef Device dev = self.device
        size, heap_budget, _ = dev.inst.heap_budgets(dev.index)[heap]
        if "memory_budget" not in dev.features:
            heap_budget = None
        return budget_bytes(size, heap_budget, self.budget_setting)

    def _budget_source(self, int heap) -> str:
        setting = self.budget_setting
        has = "memory_budget" in self.device.features
        if setting is None:
            return (f"{config.DEFAULT_BUDGET_FRACTION:.0%} of VK_EXT_memory_budget's heapBudget" if has
                    else f"{config.DEFAULT_NO_BUDGET_FRACTION:.0%} of heap {heap}'s size (no VK_EXT_memory_budget)")
        kind, v = setting
        if kind == "fraction":
            return f"{v:.0%} of {'heapBudget' if has else 'the heap size'} (VKML_MEMORY_BUDGET / set_memory_budget)"
        return "absolute budget (VKML_MEMORY_BUDGET / set_memory_budget)"

    # ------------------------------------------------------------ allocation
    def alloc(self, size_t nbytes, str kind="device") -> BufferView:
        """A view of at least `nbytes` (offset aligned to the storage-buffer alignment)."""
        cdef Device dev = self.device
        dev.ensure_open()
        check_messages()
        if kind not in self.pools:
            raise ValueError(f"unknown memory kind {kind!r}; use device, host or readback")
        if nbytes > dev.max_storage_buffer_range:
            raise BufferTooLarge(f"{dev.name} ({dev.info.device_name})", nbytes, dev.max_storage_buffer_range)
        cdef Pool pool = self.pools[kind]
        cdef uint64_t size = _round_up(max(nbytes, 1), self.alignment)
        cdef Block b
        cdef BufferView v
        cdef Py_ssize_t i
        with self.lock:
            found = None
            if size <= pool.block_cap // 2:
                for b in pool.blocks:
                    if b.dedicated:
                        continue
                    for i in range(len(b.free)):
                        if b.free[i][1] >= size:
                            found = (b, i)
                            break
                    if found is not None:
                        break
            if found is None:
                b = self._new_block(pool, size)
                i = 0
            else:
                b, i = found
            off = b.free[i][0]
            b._take(i, size)
        v = BufferView.__new__(BufferView)
        v.block = b
        v.offset = off
        v.size = nbytes
        v.taken = size
        return v

    cdef Block _new_block(self, Pool pool, uint64_t size):
        cdef Device dev = self.device
        cdef bint dedicated = size > pool.block_cap // 2
        cdef uint64_t block_size = size
        budget = self.budget(pool.heap)
        in_use = self.reserved.get(pool.heap, 0)
        if not dedicated:
            first = DEVICE_BLOCK_FIRST if pool.kind == "device" else HOST_BLOCK_FIRST
            block_size = max(size, min(pool.block_cap, first << pool.made))
            if in_use + block_size > budget and in_use + size <= budget:
                # Near the budget: half of what is left, not all of it, so that the other
                # pools (staging, readback) still get a block of their own.
                block_size = max(size, (budget - in_use) // 2 // self.alignment * self.alignment)
        if in_use + block_size > budget:
            raise OutOfDeviceMemory(f"{dev.name} ({dev.info.device_name})", size, budget, in_use,
                                    f"heap {pool.heap}; budget = {self._budget_source(pool.heap)}")
        if self.allocations >= self.max_allocations:
            raise OutOfDeviceMemory(f"{dev.name} ({dev.info.device_name})", size, budget, in_use,
                                    f"maxMemoryAllocationCount ({self.max_allocations}) reached")
        cdef Block b = Block.__new__(Block)
        b.device = dev
        b.pool = pool
        b.size = block_size
        b.dedicated = dedicated
        b.id = self.next_id
        self.next_id += 1
        cdef VkBufferCreateInfo bci
        cdef VkMemoryRequirements req
        cdef VkMemoryAllocateInfo mai
        cdef VkResult r
        cdef void* ptr = NULL
        memset(&bci, 0, sizeof(bci))
        bci.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO
        bci.size = block_size
        bci.usage = BUFFER_USAGE
        bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE
        check(dev.fn.vkCreateBuffer(dev.handle, &bci, NULL, &b.buffer), b"vkCreateBuffer")
        dev.fn.vkGetBufferMemoryRequirements(dev.handle, b.buffer, &req)
        if not req.memoryTypeBits & (1u << pool.memory_type):
            dev.fn.vkDestroyBuffer(dev.handle, b.buffer, NULL)
            raise VulkanError(f"{dev.name}: memory type {pool.memory_type} cannot back a {block_size}-byte buffer")
        memset(&mai, 0, sizeof(mai))
        mai.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO
        mai.allocationSize = req.size
        mai.memoryTypeIndex = pool.memory_type
        with nogil:
            r = dev.fn.vkAllocateMemory(dev.handle, &mai, NULL, &b.memory)
        if r != VK_SUCCESS:
            dev.fn.vkDestroyBuffer(dev.handle, b.buffer, NULL)
            b.buffer = 0
            b.memory = 0
            if r == VK_ERROR_OUT_OF_DEVICE_MEMORY or r == VK_ERROR_OUT_OF_HOST_MEMORY:
                raise OutOfDeviceMemory(f"{dev.name} ({dev.info.device_name})", size, budget, in_use,
                                        f"the driver refused a {_fmt(block_size)} block on heap {pool.heap}")
            check(r, b"vkAllocateMemory")
        try:
            check(dev.fn.vkBindBufferMemory(dev.handle, b.buffer, b.memory, 0), b"vkBindBufferMemory")
            if pool.flags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT:
                with nogil:
                    r = dev.fn.vkMapMemory(dev.handle, b.memory, 0, req.size, 0, &ptr)
                check(r, b"vkMapMemory")
                b.mapped = <char*>ptr
        except BaseException:
            dev.fn.vkDestroyBuffer(dev.handle, b.buffer, NULL)
            dev.fn.vkFreeMemory(dev.handle, b.memory, NULL)
            raise
        b.free = [[0, block_size]]
        b.alive = True
        self.reserved[pool.heap] = in_use + block_size
        self.allocations += 1
        pool.blocks.append(b)
        pool.made += 1
        return b

    cdef int release_range(self, Block b, uint64_t offset, uint64_t size) except -1:
        with self.lock:
            if not b.alive:
                return 0
            b._give(offset, size)
            if b.used == 0:
                if b.dedicated or any((<Block>o).used == 0 and o is not b and not (<Block>o).dedicated
                                      for o in b.pool.blocks):
                    self._destroy_block(b)
        return 0

    cdef _destroy_block(self, Block b):
        cdef Device dev = self.device
        if not b.alive:
            return
        b.alive = False
        if dev.handle != NULL:
            if b.mapped != NULL:
                dev.fn.vkUnmapMemory(dev.handle, b.memory)
            dev.fn.vkDestroyBuffer(dev.handle, b.buffer, NULL)
            dev.fn.vkFreeMemory(dev.handle, b.memory, NULL)
        b.mapped = NULL
        b.buffer = 0
        b.memory = 0
        self.reserved[b.pool.heap] -= b.size
        self.allocations -= 1
        b.pool.blocks.remove(b)

    def trim(self) -> None:
        """Release every block that holds no live view."""
        with self.lock:
            for pool in self.pools.values():
                for b in list((<Pool>pool).blocks):
                    if (<Block>b).used == 0:
                        self._destroy_block(b)

    def _release_all(self) -> None:
        with self.lock:
            for pool in self.pools.values():
                for b in list((<Pool>pool).blocks):
                    self._destroy_block(b)

    def stats(self) -> dict:
        """Per pool: memory type, heap, blocks, bytes reserved and in use; per heap: budget."""
        out = {"pools": {}, "heaps": {}}
        with self.lock:
            for kind, pool in self.pools.items():
                p = <Pool>pool
                out["pools"][kind] = {
                    "memory_type": p.memory_type, "heap": p.heap, "flags": p.flags,
                    "mapped": p.mappable, "blocks": len(p.blocks),
                    "reserved": sum((<Block>b).size for b in p.blocks),
                    "used": sum((<Block>b).used for b in p.blocks),
                    "block_cap": p.block_cap,
                }
            for heap, n in self.reserved.items():
                out["heaps"][heap] = {"reserved": n, "budget": self.budget(heap)}
        out["allocations"] = self.allocations
        out["alignment"] = self.alignment
        return out

    def blocks(self, str kind="device") -> list:
        return list((<Pool>self.pools[kind]).blocks)
