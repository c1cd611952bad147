# cython: language_level=3
"""Recording command buffers once and submitting them many times.

A CommandRecorder records dispatches (pipeline + buffer ranges + push constants + group
counts), copies and fills into one primary command buffer, inserting a pipeline barrier
only where a hazard exists: a command reads or writes a range that an earlier command since
the last barrier wrote, or writes a range one of them read. finish() returns the
CommandBuffer, which can be submitted any number of times (SIMULTANEOUS_USE), each
submission signalling the next value of the timeline of the device lane it goes to.

Every command buffer starts with a barrier against all earlier work on the queue (so chunks
submitted back to back on a lane see each other's results) and ends with one that makes its
writes visible to the host (so reading after Device.wait(value, lane=...) is correct).

A recorder made with defer=True checks each command when it is recorded but holds the Vulkan
calls back until finish(): the pipelines they use are then compiled together, on threads
(compile_pipelines), instead of one by one in the middle of recording. Several recorders can
share one such batch: pending_pipelines() of each, compiled at once, then finish() each.
"""
import logging

from libc.stdint cimport uint32_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memset

from vkml.vulkan.vkapi cimport *
from vkml.vulkan._device cimport Device
from vkml.vulkan._instance cimport check, check_messages
from vkml.vulkan._memory cimport Block, BufferView
from vkml.vulkan._pipeline cimport Pipeline
from vkml.vulkan._pipeline import compile_pipelines

from vkml.vulkan.errors import VulkanError

_log = logging.getLogger("vkml")

cdef VkFlags WORK_STAGES = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT
cdef VkFlags WORK_WRITES = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT
cdef VkFlags WORK_ACCESS = (VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT
                            | VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT)
cdef uint32_t SETS_PER_POOL = 128
cdef uint32_t QUERIES_PER_POOL = 512
cdef VkFlags QUERY_RESULT_64 = 0x1
cdef VkFlags QUERY_RESULT_WAIT = 0x2


cdef class CommandBuffer:
    """A recorded command buffer: submit() it (repeatedly), wait on the returned value."""

    def __cinit__(self):
        self.pool = 0
        self.cmd = NULL
        self.cur_dpool = 0
        self.dpool_left = 0
        self.query_pool = 0
        self.query_count = 0
        self.query_cap = 0
        self.last_value = 0
        self.last_lane = 0
        self.recording = False
        self.descriptor_pools = []
        self.keep = []
        self.timestamp_labels = []

    def submit(self, wait=(), uint32_t lane=0) -> int:
        """Queue the commands on the device's `lane`; returns the lane's timeline value that
        signals their completion.

        `wait`: timeline values of the same lane the GPU must reach before starting, e.g. the
        value of another chunk this one consumes. Waiting happens on the GPU, not here."""
        if self.recording:
            raise VulkanError("submit() before the recorder's finish()")
        self.device.ensure_open()
        if self.cmd == NULL:
            raise VulkanError("this command buffer was released")
        waits = [int(w) for w in wait]
        cdef uint32_t nw = len(waits)
        cdef uint64_t* wv = NULL
        cdef uint64_t value = 0
        cdef uint32_t i
        if lane >= self.device.nlanes:
            raise ValueError(f"{self.device.name} has no lane {lane} (it has {self.device.nlanes})")
        cdef uint64_t last = self.device.lanes[lane].submitted
        for w in waits:
            if w < 0 or w > last:
                raise ValueError(f"cannot wait for timeline value {w} of lane {lane}: it was never submitted "
                                 f"(last submitted {last}); it would deadlock the queue")
        if nw:
            wv = <uint64_t*>malloc(sizeof(uint64_t) * nw)
            for i in range(nw):
                wv[i] = waits[i]
        try:
            self.device.submit_raw(lane, self.cmd, wv, nw, &value)
        finally:
            free(wv)
        self.last_value = value
        self.last_lane = lane
        return value

    def run(self, timeout=None, uint32_t lane=0) -> int:
        """submit() and wait for completion; returns the timeline value."""
        v = self.submit((), lane)
        self.device.wait(v, timeout, lane)
        return v

    def timestamps(self) -> list:
        """[(label, seconds since the first timestamp)] of the latest completed submission."""
        if not self.query_count:
            return []
        if self.last_value == 0:
            raise VulkanError("no submission of this command buffer yet")
        self.device.wait(self.last_value, None, self.last_lane)
        raw = bytearray(8 * self.query_count)
        cdef unsigned char[::1] mv = raw
        check(self.device.fn.vkGetQueryPoolResults(self.device.handle, self.query_pool, 0, self.query_count,
                                                   len(raw), &mv[0], 8, QUERY_RESULT_64 | QUERY_RESULT_WAIT),
              b"vkGetQueryPoolResults")
        period = self.device.limits["timestamp_period"] * 1e-9
        ticks = [int.from_bytes(raw[8 * i:8 * i + 8], "little") for i in range(self.query_count)]
        return [(label, (t - ticks[0]) * period) for label, t in zip(self.timestamp_labels, ticks)]

    def pipelines(self) -> list:
        """The distinct pipelines its dispatches use, in the order first used: what a benchmark
        asks for statistics() (the device's cache also holds other recordings' pipelines)."""
        used = {}
        for x in self.keep:
            if isinstance(x, Pipeline):
                used.setdefault(id(x), x)
        return list(used.values())

    def _release(self):
        cdef Device dev = self.device
        if dev is None or dev.handle == NULL or self.pool == 0:
            self.pool = 0
            self.cmd = NULL
            return
        if self.last_value and not dev.closed:
            try:
                if dev.completed(self.last_lane) < self.last_value:
                    dev.wait(self.last_value, None, self.last_lane)
            except Exception as e:
                # A lost device (or an interrupted wait): its work will not finish either way,
                # and the pool must still go, so release without the wait.
                _log.debug("%s: waiting for a command buffer's last submission before freeing it failed "
                           "(%s: %s)", dev.name, type(e).__name__, e)
        for p in self.descriptor_pools:
            dev.fn.vkDestroyDescriptorPool(dev.handle, <VkDescriptorPool>p, NULL)
        self.descriptor_pools = []
        if self.query_pool:
            dev.fn.vkDestroyQueryPool(dev.handle, self.query_pool, NULL)
            self.query_pool = 0
        dev.fn.vkDestroyCommandPool(dev.handle, self.pool, NULL)
        self.pool = 0
        self.cmd = NULL
        self.keep = []

    def __dealloc__(self):
        try:
            self._release()
        except Exception as e:  # a destructor cannot raise: say what it could not free
            if _log is not None:  # (None late in the interpreter's exit)
                _log.warning("vkml: freeing a command buffer failed (%s: %s); its Vulkan objects may leak",
                             type(e).__name__, e)

    def __repr__(self):
        return (f"<CommandBuffer dispatches={self.dispatches} barriers={self.barriers} copies={self.copies}"
                f"{' recording' if self.recording else ''} last_value={self.last_value}>")


cdef inline bint _overlaps(tuple a, list ranges):
    for r in ranges:
        if r[0] == a[0] and <uint64_t>a[1] < <uint64_t>r[2] and <uint64_t>r[1] < <uint64_t>a[2]:
            return True
    return False


cdef class CommandRecorder:
    """Records one command buffer; see the module docstring. Not thread-safe: one recorder
    per thread (each has its own VkCommandPool, so threads record in parallel)."""

    def __init__(self, Device device, bint auto_barriers=True, bint defer=False):
        device.ensure_open()
        self.device = device
        self.auto_barriers = auto_barriers
        self.deferred = [] if defer else None
        self.pending_reads = []
        self.pending_writes = []
        self.bound = None
        self.scratches = {}
        cdef CommandBuffer cb = CommandBuffer.__new__(CommandBuffer)
        cb.device = device
        self.cb = cb
        device.register(cb)
        cdef VkCommandPoolCreateInfo pci
        memset(&pci, 0, sizeof(pci))
        pci.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO
        pci.queueFamilyIndex = device.queue_family
        check(device.fn.vkCreateCommandPool(device.handle, &pci, NULL, &cb.pool), b"vkCreateCommandPool")
        cdef VkCommandBufferAllocateInfo ai
        memset(&ai, 0, sizeof(ai))
        ai.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO
        ai.commandPool = cb.pool
        ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY
        ai.commandBufferCount = 1
        check(device.fn.vkAllocateCommandBuffers(device.handle, &ai, &cb.cmd), b"vkAllocateCommandBuffers")
        cdef VkCommandBufferBeginInfo bi
        memset(&bi, 0, sizeof(bi))
        bi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO
        bi.flags = VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT
        check(device.fn.vkBeginCommandBuffer(cb.cmd, &bi), b"vkBeginCommandBuffer")
        cb.recording = True
        # Against everything earlier on the queue.
        self._issue_barrier()
        cb.barriers = 0

    cdef int _check_recording(self) except -1:
        if not self.cb.recording:
            raise VulkanError("this recorder has finished; start a new CommandRecorder")
        self.device.ensure_open()
        return 0

    cdef int _emit_barrier(self) except -1:
        self.pending_reads = []
        self.pending_writes = []
        if self.deferred is not None:
            self.deferred.append((1,))
        else:
            self._issue_barrier()
        return 0

    cdef int _issue_barrier(self) except -1:
        cdef VkMemoryBarrier mb
        memset(&mb, 0, sizeof(mb))
        mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER
        mb.srcAccessMask = WORK_WRITES
        mb.dstAccessMask = WORK_ACCESS
        self.device.fn.vkCmdPipelineBarrier(self.cb.cmd, WORK_STAGES, WORK_STAGES, 0, 1, &mb, 0, NULL, 0, NULL)
        self.cb.barriers += 1
        return 0

    cdef int _hazard_barrier(self, list reads, list writes) except -1:
        if not self.auto_barriers:
            return 0
        hazard = False
        for r in reads:
            if _overlaps(r, self.pending_writes):
                hazard = True
                break
        if not hazard:
            for w in writes:
                if _overlaps(w, self.pending_writes) or _overlaps(w, self.pending_reads):
                    hazard = True
                    break
        if hazard:
            self._emit_barrier()
        self.pending_reads.extend(reads)
        self.pending_writes.extend(writes)
        return 0

    def barrier(self) -> None:
        """An explicit full compute/transfer memory barrier."""
        self._check_recording()
        self._emit_barrier()

    cdef VkDescriptorSet _alloc_set(self, Pipeline p) except? 0:
        cdef CommandBuffer cb = self.cb
        cdef Device dev = self.device
        cdef VkDescriptorPoolSize size
        cdef VkDescriptorPoolCreateInfo pci
        cdef VkDescriptorSetAllocateInfo ai
        cdef VkDescriptorSet ds = 0
        cdef VkResult r
        for attempt in range(2):
            if cb.cur_dpool == 0 or cb.dpool_left == 0:
                memset(&pci, 0, sizeof(pci))
                size.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER
                size.descriptorCount = SETS_PER_POOL * 8
                pci.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO
                pci.maxSets = SETS_PER_POOL
                pci.poolSizeCount = 1
                pci.pPoolSizes = &size
                check(dev.fn.vkCreateDescriptorPool(dev.handle, &pci, NULL, &cb.cur_dpool),
                      b"vkCreateDescriptorPool")
                cb.descriptor_pools.append(cb.cur_dpool)
                cb.dpool_left = SETS_PER_POOL
            memset(&ai, 0, sizeof(ai))
            ai.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO
            ai.descriptorPool = cb.cur_dpool
            ai.descriptorSetCount = 1
            ai.pSetLayouts = &p.set_layout
            r = dev.fn.vkAllocateDescriptorSets(dev.handle, &ai, &ds)
            if r == VK_SUCCESS:
                cb.dpool_left -= 1
                return ds
            cb.dpool_left = 0  # pool exhausted (descriptors, not sets): open a new one
        check(r, b"vkAllocateDescriptorSets")
        return 0

    def dispatch(self, Pipeline pipeline, buffers, push=b"", groups=1) -> None:
        """Record pipeline over `buffers` (one BufferView per binding, in order) with the push
        constant bytes `push` (exactly pipeline.push_size of them) and `groups` workgroups
        (an int for x, or an (x, y, z) tuple)."""
        self._check_recording()
        cdef Device dev = self.device
        if pipeline.device is not dev:
            raise ValueError(f"pipeline {pipeline.shader} belongs to another device")
        views = list(buffers)
        cdef uint32_t n = len(views)
        if n != pipeline.nbindings:
            raise ValueError(f"{pipeline.shader} takes {pipeline.nbindings} buffers, got {n}")
        cdef bytes push_b = bytes(push)
        if len(push_b) != pipeline.push_size:
            raise ValueError(f"{pipeline.shader} takes {pipeline.push_size} bytes of push constants, "
                             f"got {len(push_b)}")
        if isinstance(groups, int):
            gx, gy, gz = groups, 1, 1
        else:
            gx, gy, gz = (list(groups) + [1, 1])[:3]
        for axis, g in enumerate((gx, gy, gz)):
            if g < 1 or g > dev.max_group_count[axis]:
                raise ValueError(f"group count {g} on axis {axis} is outside 1..{dev.max_group_count[axis]}")

        cdef BufferView v
        cdef uint32_t i
        reads = []
        wr = []
        for i in range(n):
            v = views[i]
            if not isinstance(views[i], BufferView):
                raise TypeError(f"binding {i}: expected a BufferView, got {type(views[i]).__name__}")
            v.check_alive()
            if v.block.device is not dev:
                raise ValueError(f"binding {i} lives on {v.block.device.name}, not {dev.name}")
            if v.size == 0:
                raise ValueError(f"binding {i} is empty; skip the dispatch instead")
            if v.offset % dev.storage_alignment:
                raise ValueError(f"binding {i}: offset {v.offset} is not a multiple of "
                                 f"minStorageBufferOffsetAlignment ({dev.storage_alignment})")
            if v.size > dev.max_storage_buffer_range:
                raise ValueError(f"binding {i}: {v.size} bytes exceed maxStorageBufferRange")
            span = (v.block.id, v.offset, v.offset + v.size)
            if pipeline.access[i] & 1:
                reads.append(span)
            if pipeline.access[i] & 2:
                wr.append(span)
        self._hazard_barrier(reads, wr)
        if self.deferred is not None:
            self.deferred.append((0, pipeline, views, push_b, gx, gy, gz))
        else:
            pipeline.compile()  # (a no-op once compiled)
            self._issue_dispatch(pipeline, views, push_b, gx, gy, gz)

    cdef int _issue_dispatch(self, Pipeline pipeline, list views, bytes push_b, uint32_t gx, uint32_t gy,
                             uint32_t gz) except -1:
        cdef Device dev = self.device
        cdef CommandBuffer cb = self.cb
        cdef uint32_t n = len(views)
        cdef const unsigned char[::1] pc
        cdef VkDescriptorBufferInfo infos[32]
        cdef VkWriteDescriptorSet writes[32]
        cdef BufferView v
        cdef uint32_t i
        if pipeline.handle == 0:
            raise VulkanError(f"pipeline {pipeline.shader} was released")
        for i in range(n):
            v = views[i]
            infos[i].buffer = v.block.buffer
            infos[i].offset = v.offset
            infos[i].range = v.size
            memset(&writes[i], 0, sizeof(VkWriteDescriptorSet))
            writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET
            writes[i].dstBinding = i
            writes[i].descriptorCount = 1
            writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER
            writes[i].pBufferInfo = &infos[i]
        cdef VkDescriptorSet ds
        if self.bound is not pipeline:
            dev.fn.vkCmdBindPipeline(cb.cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.handle)
            self.bound = pipeline
        if dev.push_descriptors:
            dev.fn.vkCmdPushDescriptorSetKHR(cb.cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.layout, 0, n, writes)
        else:
            ds = self._alloc_set(pipeline)
            for i in range(n):
                writes[i].dstSet = ds
            dev.fn.vkUpdateDescriptorSets(dev.handle, n, writes, 0, NULL)
            dev.fn.vkCmdBindDescriptorSets(cb.cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.layout, 0, 1, &ds,
                                           0, NULL)
        if pipeline.push_size:
            pc = push_b
            dev.fn.vkCmdPushConstants(cb.cmd, pipeline.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                                      pipeline.push_size, &pc[0])
        dev.fn.vkCmdDispatch(cb.cmd, gx, gy, gz)
        cb.keep.append(pipeline)
        cb.keep.extend(views)
        cb.dispatches += 1
        check_messages()
        return 0

    def copy(self, BufferView src, BufferView dst, size=None, uint64_t src_offset=0,
             uint64_t dst_offset=0) -> None:
        """Copy `size` bytes (default: all of src) between views."""
        self._check_recording()
        src.check_alive()
        dst.check_alive()
        cdef uint64_t n = src.size - src_offset if size is None else size
        if src_offset + n > src.size or dst_offset + n > dst.size:
            raise ValueError(f"copy of {n} bytes overruns src ({src.size} B at {src_offset}) "
                             f"or dst ({dst.size} B at {dst_offset})")
        if n == 0:
            return
        if src.block.device is not self.device or dst.block.device is not self.device:
            raise ValueError("copy between devices is not a Vulkan copy; go through the host")
        self._hazard_barrier([(src.block.id, src.offset + src_offset, src.offset + src_offset + n)],
                             [(dst.block.id, dst.offset + dst_offset, dst.offset + dst_offset + n)])
        if self.deferred is not None:
            self.deferred.append((2, src, dst, n, src_offset, dst_offset))
        else:
            self._issue_copy(src, dst, n, src_offset, dst_offset)

    cdef int _issue_copy(self, BufferView src, BufferView dst, uint64_t n, uint64_t so, uint64_t do) except -1:
        cdef VkBufferCopy region
        region.srcOffset = src.offset + so
        region.dstOffset = dst.offset + do
        region.size = n
        self.device.fn.vkCmdCopyBuffer(self.cb.cmd, src.block.buffer, dst.block.buffer, 1, &region)
        self.cb.keep.append(src)
        self.cb.keep.append(dst)
        self.cb.copies += 1
        check_messages()
        return 0

    def fill(self, BufferView view, uint32_t value=0) -> None:
        """Set every 32-bit word of the view to `value` (its size must be a multiple of 4)."""
        self._check_recording()
        view.check_alive()
        if view.size % 4:
            raise ValueError(f"fill() needs a size that is a multiple of 4 bytes, not {view.size}")
        if view.size == 0:
            return
        self._hazard_barrier([], [(view.block.id, view.offset, view.offset + view.size)])
        if self.deferred is not None:
            self.deferred.append((3, view, value))
        else:
            self._issue_fill(view, value)

    cdef int _issue_fill(self, BufferView view, uint32_t value) except -1:
        self.device.fn.vkCmdFillBuffer(self.cb.cmd, view.block.buffer, view.offset, view.size, value)
        self.cb.keep.append(view)
        self.cb.copies += 1
        check_messages()
        return 0

    def constants(self, data) -> BufferView:
        """A read-only storage buffer holding `data` (bytes-like), alive as long as the
        command buffer: for parameters that do not fit in push constants."""
        self._check_recording()
        mv = memoryview(data).cast("B")
        cdef Device dev = self.device
        kind = "device" if dev.allocator.pools["device"].mappable else "host"
        cdef BufferView v = dev.allocator.alloc(max(len(mv), 4), kind)
        v.write(mv)
        self.cb.keep.append(v)
        return v

    def scratch(self, str tag, size_t nbytes) -> BufferView:
        """A device buffer of `nbytes` that every scratch() call with this `tag` in this
        recording shares: a kernel's intermediate values (Winograd's transformed tiles), so the
        nodes of a plan reuse one buffer instead of holding one each, ordered by the hazard
        barriers like any other range. A request bigger than the buffer so far gets a new one
        (the old one stays alive with the commands that used it)."""
        self._check_recording()
        cdef BufferView v = self.scratches.get(tag)
        if v is None or v.size < nbytes:
            v = self.device.alloc(max(nbytes, 4))
            self.scratches[tag] = v
            self.cb.keep.append(v)
        return v.sub(0, max(nbytes, 4))

    def timestamp(self, str label) -> None:
        """Record a GPU timestamp after all earlier commands; read with CommandBuffer.timestamps()."""
        self._check_recording()
        if self.deferred is not None:
            self.deferred.append((4, label))
        else:
            self._issue_timestamp(label)

    cdef int _issue_timestamp(self, str label) except -1:
        cdef CommandBuffer cb = self.cb
        cdef Device dev = self.device
        cdef VkQueryPoolCreateInfo qci
        if not dev.limits.get("timestamp_valid_bits"):
            raise VulkanError(f"{dev.name}: its compute queue family has no timestamps")
        if cb.query_pool == 0:
            memset(&qci, 0, sizeof(qci))
            qci.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO
            qci.queryType = VK_QUERY_TYPE_TIMESTAMP
            qci.queryCount = QUERIES_PER_POOL
            check(dev.fn.vkCreateQueryPool(dev.handle, &qci, NULL, &cb.query_pool), b"vkCreateQueryPool")
            cb.query_cap = QUERIES_PER_POOL
            dev.fn.vkCmdResetQueryPool(cb.cmd, cb.query_pool, 0, QUERIES_PER_POOL)
        if cb.query_count >= cb.query_cap:
            raise ValueError(f"at most {QUERIES_PER_POOL} timestamps per command buffer")
        dev.fn.vkCmdWriteTimestamp(cb.cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, cb.query_pool, cb.query_count)
        cb.timestamp_labels.append(label)
        cb.query_count += 1
        return 0

    def pending_pipelines(self) -> list:
        """The pipelines that deferred dispatches wait for (not compiled yet)."""
        return [p for p in self.dispatch_pipelines() if not (<Pipeline>p).compiled]

    def dispatch_pipelines(self, int start=0) -> list:
        """Every pipeline the deferred dispatches use, compiled or not; from the `start`-th
        deferred command on (len(recorder.deferred) before recording a node: that node's)."""
        return [c[1] for c in (self.deferred or ())[start:] if c[0] == 0]

    cdef int _replay(self) except -1:
        todo = self.deferred
        if not todo:
            return 0
        pending = self.pending_pipelines()
        if pending:
            compile_pipelines(pending)
        self.deferred = []
        for c in todo:
            k = c[0]
            if k == 0:
                self._issue_dispatch(c[1], c[2], c[3], c[4], c[5], c[6])
            elif k == 1:
                self._issue_barrier()
            elif k == 2:
                self._issue_copy(c[1], c[2], c[3], c[4], c[5])
            elif k == 3:
                self._issue_fill(c[1], c[2])
            else:
                self._issue_timestamp(c[1])
        return 0

    def finish(self) -> CommandBuffer:
        """End recording (compiling what deferred commands wait for); returns the CommandBuffer
        to submit."""
        self._check_recording()
        self._replay()
        cdef VkMemoryBarrier mb
        memset(&mb, 0, sizeof(mb))
        mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER
        mb.srcAccessMask = WORK_WRITES
        mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT
        self.device.fn.vkCmdPipelineBarrier(self.cb.cmd, WORK_STAGES, VK_PIPELINE_STAGE_HOST_BIT, 0,
                                            1, &mb, 0, NULL, 0, NULL)
        check(self.device.fn.vkEndCommandBuffer(self.cb.cmd), b"vkEndCommandBuffer")
        self.cb.recording = False
        return self.cb
