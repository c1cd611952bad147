# cython: language_level=3
"""A whole GPU run without the GIL, for plans that are only uploads, GPU chunks and readbacks
on one device (most models with host inputs and outputs).

The generic path (vkml.runtime.gpurun) runs each unit as a Python task: the GIL is taken for every
upload, submission, wait and readback, so concurrent run() calls of one session queue on it.
A Program is made once per run slot: the mapped pointers, command buffers and waits of every
step, in unit order. Program.run takes the feeds' and outputs' data pointers with the GIL, then
without it copies the feeds into mapped memory, submits the chunks on the slot's lane, waits
for each readback's producer (polling, then blocking in the driver; Ctrl-C is honoured every
50 ms) and copies the results out. The GIL is taken twice per run: to accept the feeds and to
hand back the outputs (gil_ns reports how long, summed over runs).

Threads sharing a plan hand over to each other through include/run_handoff.h, spinning briefly
before they sleep: a Gate (VKML_GPU_RUNS) lets `width` runs through at once, passed without the
GIL, and the GIL token makes a run that is done wait for the runner in its Python part to drop
the GIL instead of sleeping in it (VKML_HANDOFF_SPIN_US).

A Shortcut is Session.run itself for feeds of one signature: the dict checked, a slot taken,
the outputs made and the Program run, all here (runs of another kind go the usual way).
"""
from libc.stdint cimport int64_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec
from cpython.exc cimport PyErr_CheckSignals

cimport numpy as cnp

from vkml.vulkan.vkapi cimport *
from vkml.vulkan._device cimport Device
from vkml.vulkan._commands cimport CommandBuffer
from vkml.vulkan._memory cimport BufferView
from vkml.vulkan._instance cimport check

cnp.import_array()

cdef extern from "run_handoff.h" nogil:
    ctypedef struct vkml_gate:
        unsigned width
    ctypedef struct vkml_gate_wait:
        uint64_t since
        int starved
    void vkml_gate_init(vkml_gate* g, unsigned width)
    int vkml_gate_acquire(vkml_gate* g, uint64_t spin_ns, uint64_t timeout_ns, vkml_gate_wait* w)
    void vkml_gate_forget(vkml_gate* g, vkml_gate_wait* w)
    void vkml_gate_release(vkml_gate* g)
    int vkml_gate_may(vkml_gate* g, vkml_gate_wait* w)
    int vkml_gate_try(vkml_gate* g)
    unsigned vkml_gate_inflight(vkml_gate* g)
    void vkml_token_leave()
    void vkml_token_enter(uint64_t spin_ns)
    void vkml_handoff_set_max_spinning(int n)
    uint64_t vkml_token_spins
    uint64_t vkml_token_stolen

cdef enum:
    COPY_IN = 0      # feed -> mapped memory
    SUBMIT = 1       # a command buffer (a staged upload's copy, or a GPU chunk)
    COPY_OUT = 2     # wait for the producer, then mapped memory -> output
    SLICE_NS = 50000000


cdef struct Step:
    int kind
    int unit          # the unit whose timeline value a SUBMIT sets (tl index)
    int io            # COPY_IN: feed index; COPY_OUT: output index
    int wait_unit     # COPY_OUT: the producer unit
    char* ptr         # mapped memory (COPY_IN, COPY_OUT)
    uint64_t nbytes
    VkCommandBuffer cmd
    int wait0         # SUBMIT: waits are wait_idx[wait0:wait0 + nwait] (unit indices)
    int nwait


cdef inline uint64_t _now_ns() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <uint64_t>ts.tv_sec * 1000000000ULL + <uint64_t>ts.tv_nsec


cdef inline uint64_t _slice_left(uint64_t deadline) noexcept nogil:
    """How long the next wait may block: SLICE_NS (then back with the GIL for Ctrl-C), less what
    is left before `deadline` (0: none)."""
    if not deadline:
        return SLICE_NS
    cdef uint64_t now = _now_ns()
    cdef uint64_t left = deadline - now if deadline > now else 0
    return left if left < SLICE_NS else SLICE_NS


cdef char* _mapped(BufferView v) except NULL:
    if not v.block.is_mapped:
        raise ValueError("not host-visible memory")
    return v.block.mapped + v.offset


import os as _os

# Spinners at once, gate and token together (as the GPU waits: a quarter of the cores), so that
# the threads holding the GIL, the driver and the rest of the program keep theirs.
vkml_handoff_set_max_spinning(max(1, (_os.cpu_count() or 2) // 4))


def token_counts() -> tuple:
    """(hand-offs that spun for the GIL token, tokens taken without waiting for their holder):
    process totals, for tests and probes."""
    return (vkml_token_spins, vkml_token_stolen)


cdef class Gate:
    """At most `width` native runs at once (VKML_GPU_RUNS); Program.run passes it without the
    GIL, spinning up to the program's spin_ns before it sleeps, none waiting much past 2 ms
    while others barge in (include/run_handoff.h)."""

    cdef vkml_gate g
    cdef readonly unsigned width

    def __init__(self, unsigned width):
        if width < 1:
            raise ValueError(f"a run gate lets at least one run through, not {width}")
        self.width = width
        vkml_gate_init(&self.g, width)

    @property
    def inflight(self) -> int:
        """Runs past the gate now."""
        return vkml_gate_inflight(&self.g)

    def acquire(self, timeout=None, double spin_us=0.0) -> bool:
        """Wait (without the GIL, spinning up to spin_us first) for a turn: True, or False when
        `timeout` seconds (None: no limit) passed first. Program.run takes its turns itself;
        this is for tests and for holding a turn from Python."""
        cdef uint64_t spin = <uint64_t>(spin_us * 1000.0) if spin_us > 0 else 0
        cdef uint64_t deadline = 0
        if timeout is not None:
            deadline = _now_ns() + <uint64_t>(max(0.0, float(timeout)) * 1e9)
        return self._wait(spin, deadline, False) == 1

    cdef int _wait(self, uint64_t spin, uint64_t deadline, bint token) except -1:
        """A turn: 1, or 0 when `deadline` (0: none) passed first. At once when one is free,
        else without the GIL, in slices (Ctrl-C honoured between them); `token`: the wait gives the GIL token back while it
        waits and takes it again after (as Program.run's waits do)."""
        cdef uint64_t left
        cdef int ok = 0
        cdef vkml_gate_wait w
        w.since = 0
        w.starved = 0
        if vkml_gate_may(&self.g, &w) and vkml_gate_try(&self.g):
            return 1  # (a turn free, none starving: taken without dropping the GIL)
        try:
            while True:
                with nogil:
                    if token:
                        vkml_token_leave()
                    left = _slice_left(deadline)
                    ok = vkml_gate_acquire(&self.g, spin, left, &w)
                    if token:
                        vkml_token_enter(spin)
                if ok:
                    return 1
                if deadline and _now_ns() >= deadline:
                    return 0
                PyErr_CheckSignals()
        finally:
            if not ok:
                vkml_gate_forget(&self.g, &w)

    def release(self) -> None:
        """Give back a turn taken with acquire()."""
        if vkml_gate_inflight(&self.g) == 0:
            raise RuntimeError("Gate.release() without a turn taken")
        vkml_gate_release(&self.g)

cdef class Program:
    """The steps of one slot's run (see the module docstring). steps: a list of
    ("in", feed index, BufferView) / ("submit", unit, CommandBuffer, [wait units]) /
    ("out", output index, producer unit, BufferView), in unit order; nunits sizes the run's
    timeline array."""

    cdef Device dev
    cdef readonly uint32_t lane
    cdef Step* steps
    cdef int nsteps
    cdef int* wait_idx
    cdef uint64_t* tl
    cdef uint64_t* waitv
    cdef int nunits
    cdef int nin, nout
    cdef uint64_t* in_bytes
    cdef uint64_t* out_bytes
    cdef const char** src     # run(): the feeds' data, by feed index
    cdef char** dst           # run(): the outputs' data, by output index
    cdef list keep           # what the pointers point into, and the command buffers
    cdef list cbs            # (unit, CommandBuffer) of SUBMIT steps
    cdef readonly uint64_t last    # the last value this program's latest run submitted
    cdef readonly uint64_t gil_ns  # time holding the GIL inside run(), summed
    cdef readonly uint64_t free_ns  # time without it (copies, submits, waits), summed
    cdef readonly uint64_t last_free_ns  # the latter in the latest run
    cdef readonly uint64_t runs
    cdef public uint64_t spin_ns  # hand-offs spin this long before sleeping (0: no token, the gate sleeps)
    cdef bint gated               # a run of this program is past its gate (released by run())
    cdef vkml_gate_wait gwait     # ... waiting at it (forgotten by run() when it gives up)

    def __cinit__(self):
        self.steps = NULL
        self.wait_idx = NULL
        self.tl = NULL
        self.waitv = NULL
        self.in_bytes = NULL
        self.out_bytes = NULL
        self.src = NULL
        self.dst = NULL

    def __init__(self, Device dev, uint32_t lane, list steps, int nunits, int nin, int nout,
                 double spin_us=0.0):
        self.spin_ns = <uint64_t>(spin_us * 1000.0) if spin_us > 0 else 0
        if lane >= dev.nlanes:
            raise ValueError(f"{dev.name} has no lane {lane}")
        self.dev = dev
        self.lane = lane
        self.nunits = nunits
        self.nin = nin
        self.nout = nout
        self.keep = []
        self.cbs = []
        nwaits = sum(len(s[3]) for s in steps if s[0] == "submit")
        self.steps = <Step*>malloc(sizeof(Step) * max(1, len(steps)))
        self.wait_idx = <int*>malloc(sizeof(int) * max(1, nwaits))
        self.waitv = <uint64_t*>malloc(sizeof(uint64_t) * max(1, nwaits))
        self.tl = <uint64_t*>malloc(sizeof(uint64_t) * max(1, nunits))
        self.in_bytes = <uint64_t*>malloc(sizeof(uint64_t) * max(1, nin))
        self.out_bytes = <uint64_t*>malloc(sizeof(uint64_t) * max(1, nout))
        self.src = <const char**>malloc(sizeof(char*) * max(1, nin))
        self.dst = <char**>malloc(sizeof(char*) * max(1, nout))
        if (self.steps == NULL or self.wait_idx == NULL or self.waitv == NULL or self.tl == NULL
                or self.in_bytes == NULL or self.out_bytes == NULL or self.src == NULL or self.dst == NULL):
            raise MemoryError()
        for i in range(nin):
            self.in_bytes[i] = <uint64_t>-1
        for i in range(nout):
            self.out_bytes[i] = <uint64_t>-1
        cdef int w = 0
        cdef Step* st
        cdef CommandBuffer cb
        cdef BufferView view
        for i, s in enumerate(steps):
            st = &self.steps[i]
            st.unit = -1
            st.io = -1
            st.wait_unit = -1
            st.ptr = NULL
            st.nbytes = 0
            st.cmd = NULL
            st.wait0 = 0
            st.nwait = 0
            if s[0] == "in":
                view = s[2]
                st.kind = COPY_IN
                st.io = s[1]
                st.ptr = _mapped(view)
                st.nbytes = view.size
                if not 0 <= st.io < nin:
                    raise ValueError(f"feed index {st.io} out of range")
                self.in_bytes[st.io] = view.size
                self.keep.append(view)
            elif s[0] == "submit":
                cb = s[2]
                if cb.device is not dev or cb.cmd == NULL or cb.recording:
                    raise ValueError("a command buffer of another device, released or still recording")
                st.kind = SUBMIT
                st.unit = s[1]
                st.cmd = cb.cmd
                st.wait0 = w
                for u in s[3]:
                    if not 0 <= u < nunits:
                        raise ValueError(f"wait unit {u} out of range")
                    self.wait_idx[w] = u
                    w += 1
                st.nwait = w - st.wait0
                self.keep.append(cb)
                self.cbs.append((st.unit, cb))
            elif s[0] == "out":
                view = s[3]
                st.kind = COPY_OUT
                st.io = s[1]
                st.wait_unit = s[2]
                st.ptr = _mapped(view)
                st.nbytes = view.size
                if not 0 <= st.io < nout or not 0 <= st.wait_unit < nunits:
                    raise ValueError("output or producer index out of range")
                self.out_bytes[st.io] = view.size
                self.keep.append(view)
            else:
                raise ValueError(f"unknown step {s[0]!r}")
            if st.unit >= nunits:
                raise ValueError(f"unit {st.unit} out of range")
            self.nsteps = i + 1
        for i in range(nin):
            if self.in_bytes[i] == <uint64_t>-1:
                raise ValueError(f"feed {i} has no step")
        for i in range(nout):
            if self.out_bytes[i] == <uint64_t>-1:
                raise ValueError(f"output {i} has no step")

    def __dealloc__(self):
        free(self.steps)
        free(self.wait_idx)
        free(self.waitv)
        free(self.tl)
        free(self.in_bytes)
        free(self.out_bytes)
        free(<void*>self.src)
        free(self.dst)

    def run(self, list feeds, list outs, double timeout, Gate gate=None) -> None:
        """Copy feeds (C-contiguous arrays of the planned sizes, by feed index) in, run,
        fill outs (likewise). timeout < 0: wait forever; else TimeoutError past it, with the
        GPU work maybe still running (last says up to which value of the lane). With `gate`,
        the run first waits (without the GIL) for its turn there, within the same timeout."""
        cdef uint64_t t0 = _now_ns()
        cdef cnp.ndarray a
        if len(feeds) != self.nin or len(outs) != self.nout:
            raise ValueError(f"expected {self.nin} feeds and {self.nout} outputs")
        for i in range(self.nin):
            a = feeds[i]
            if not cnp.PyArray_IS_C_CONTIGUOUS(a) or <uint64_t>cnp.PyArray_NBYTES(a) != self.in_bytes[i]:
                raise ValueError(f"feed {i}: expected a C-contiguous array of {self.in_bytes[i]} bytes")
            self.src[i] = <const char*>cnp.PyArray_DATA(a)
        for i in range(self.nout):
            a = outs[i]
            if (not cnp.PyArray_IS_C_CONTIGUOUS(a) or not cnp.PyArray_ISWRITEABLE(a)
                    or <uint64_t>cnp.PyArray_NBYTES(a) != self.out_bytes[i]):
                raise ValueError(f"output {i}: expected a writable C-contiguous array of "
                                 f"{self.out_bytes[i]} bytes")
            self.dst[i] = <char*>cnp.PyArray_DATA(a)
        self._call(timeout, gate, t0)

    cdef int _call(self, double timeout, Gate gate, uint64_t t0) except -1:
        """run() on the pointers already in self.src and self.dst (filled since t0)."""
        cdef uint64_t t1, t2
        self.dev.ensure_open()
        t1 = _now_ns()
        try:
            self._run(self.src, self.dst, timeout, gate)
        finally:
            if self.gated:  # (left early: timed out, interrupted, a failed wait)
                self.gated = False
                vkml_gate_release(&gate.g)
            elif gate is not None:  # (timed out or interrupted before its turn: no longer starving)
                vkml_gate_forget(&gate.g, &self.gwait)
        t2 = _now_ns()
        for unit, cb in self.cbs:
            (<CommandBuffer>cb).last_value = self.tl[unit]
            (<CommandBuffer>cb).last_lane = self.lane
        self.runs += 1
        self.free_ns += self.last_free_ns
        self.gil_ns += (t2 - t1 - self.last_free_ns) + (t1 - t0) + (_now_ns() - t2)
        return 0

    cdef int _run(self, const char** src, char** dst, double timeout, Gate gate) except -1:
        cdef int i, k, nw
        cdef Step* st
        cdef uint64_t value, deadline = 0, left, f0
        cdef uint64_t spin = self.spin_ns
        cdef VkResult r = VK_SUCCESS
        cdef int status = 0     # 1: timed out, 2: a wait failed (r), 3: timed out at the gate
        cdef vkml_gate* g = &gate.g if gate is not None else NULL
        cdef bint through = g == NULL  # past the gate (or none)
        if timeout >= 0:
            deadline = _now_ns() + <uint64_t>(timeout * 1e9)
        for i in range(self.nunits):
            self.tl[i] = 0
        self.last = 0
        self.last_free_ns = 0
        self.gated = False
        self.gwait.since = 0
        self.gwait.starved = 0
        i = 0
        while i < self.nsteps or not through:
            with nogil:
                vkml_token_leave()
                f0 = _now_ns()
                if not through:
                    left = _slice_left(deadline)
                    if vkml_gate_acquire(g, spin, left, &self.gwait):
                        through = self.gated = True
                    elif deadline and _now_ns() >= deadline:
                        status = 3
                while through and i < self.nsteps:
                    st = &self.steps[i]
                    if st.kind == COPY_IN:
                        if st.nbytes:
                            memcpy(st.ptr, src[st.io], st.nbytes)
                    elif st.kind == SUBMIT:
                        nw = 0
                        for k in range(st.wait0, st.wait0 + st.nwait):
                            if self.tl[self.wait_idx[k]]:
                                self.waitv[st.wait0 + nw] = self.tl[self.wait_idx[k]]
                                nw += 1
                        self.dev.submit_raw(self.lane, st.cmd, &self.waitv[st.wait0], nw, &value)
                        self.tl[st.unit] = value
                        self.last = value
                    else:
                        value = self.tl[st.wait_unit]
                        if value:
                            left = _slice_left(deadline)
                            r = self.dev.wait_nogil(self.lane, value, left)
                            if r == VK_TIMEOUT:
                                if deadline and _now_ns() >= deadline:
                                    status = 1
                                break  # back with the GIL for Ctrl-C, then on with this step
                            if r != VK_SUCCESS:
                                status = 2
                                break
                        if st.nbytes:
                            memcpy(dst[st.io], st.ptr, st.nbytes)
                    i += 1
                if self.gated and i >= self.nsteps:
                    self.gated = False  # done: the next run goes through while this one takes the GIL
                    vkml_gate_release(g)
                self.last_free_ns += _now_ns() - f0
                vkml_token_enter(spin)
            if status == 3:
                raise TimeoutError(f"this run waited {timeout} s for its turn among the {gate.width} runs of this "
                                   f"input shape that may run at once (VKML_GPU_RUNS), and the runs ahead of it did "
                                   f"not end (a hung GPU or driver?); VKML_GPU_TIMEOUT sets the limit")
            if status == 1:
                raise TimeoutError(f"{self.dev.name}: lane {self.lane} did not reach timeline value "
                                   f"{self.tl[self.steps[i].wait_unit]} within {timeout} s")
            if status == 2:
                check(r, b"vkWaitSemaphores")
            if i < self.nsteps or not through:
                PyErr_CheckSignals()
        return 0



cdef class Feeds:
    """What one plan's native runs take and give, checked and made here rather than in Python
    (the GIL is held for as little as it can): the fed names with their dtype and shape, each
    program output's dtype and shape, and where each graph output comes from: ("rb", index
    into the program's outputs), ("const", array: a copy each run) or ("feed", name)."""

    cdef tuple names
    cdef tuple in_dtypes
    cdef tuple in_shapes
    cdef tuple out_dtypes
    cdef tuple out_shapes
    cdef tuple sources        # graph output k -> (kind, index / array / name)
    cdef object empty         # numpy.empty
    cdef object copy          # numpy.array

    def __init__(self, names, in_dtypes, in_shapes, out_dtypes, out_shapes, sources):
        import numpy

        self.names = tuple(names)
        self.in_dtypes = tuple(numpy.dtype(d) for d in in_dtypes)
        self.in_shapes = tuple(tuple(int(d) for d in s) for s in in_shapes)
        self.out_dtypes = tuple(numpy.dtype(d) for d in out_dtypes)
        self.out_shapes = tuple(tuple(int(d) for d in s) for s in out_shapes)
        self.sources = tuple((kind, int(v) if kind == "rb" else v) for kind, v in sources)
        self.empty = numpy.empty
        self.copy = numpy.array

    def arrays(self, feeds):
        """The feeds in program order as C-contiguous arrays, or None when one is missing, not
        an ndarray, or of another dtype or shape than planned (the caller then takes the
        generic path)."""
        cdef list out = []
        cdef cnp.ndarray arr
        for i in range(len(self.names)):
            a = feeds.get(self.names[i])
            if type(a) is not cnp.ndarray:
                return None
            if a.shape != self.in_shapes[i] or a.dtype != self.in_dtypes[i]:
                return None
            arr = <cnp.ndarray>a
            if not cnp.PyArray_IS_C_CONTIGUOUS(arr):
                arr = cnp.PyArray_GETCONTIGUOUS(arr)
            out.append(arr)
        return out

    def run(self, Program program, list arrays, feeds, double timeout, Gate gate=None):
        """Run `program` on arrays (from arrays() of `feeds`), through `gate` if given; the
        graph's outputs, newly made."""
        cdef list flat = []
        cdef list shaped = []
        for i in range(len(self.out_shapes)):
            a = self.empty(self.out_shapes[i], self.out_dtypes[i])
            shaped.append(a)
            flat.append(a.reshape(-1))
        program.run(arrays, flat, timeout, gate)
        return self.results(shaped, feeds)

    cdef list results(self, list made, feeds):
        """The graph's outputs of a run whose program outputs are `made`, fed `feeds`."""
        return [made[v] if kind == "rb" else self.copy(v) if kind == "const" else feeds[v]
                for kind, v in self.sources]


cdef extern from "Python.h":
    ctypedef struct PyObject
    PyObject* PyDict_GetItem(object d, object key)
    Py_ssize_t PyDict_Size(object d)

from cpython.ref cimport Py_INCREF

cdef extern from "numpy/arrayobject.h":
    object _empty "PyArray_Empty"(int nd, cnp.npy_intp* dims, cnp.dtype descr, int fortran)  # (takes descr)
from libc.stdlib cimport getenv
from libc.string cimport strcmp, strlen

DEF MAX_IO = 64  # feeds and outputs a shortcut takes (a plan with more runs the usual way)


from vkml import config as _config

cdef bytes _timeout_name = _config.GPU_TIMEOUT_VARIABLE.encode()
cdef char* _timeout_text = NULL   # its text as config last parsed it (malloc'd), and the value
cdef double _timeout_value = -2.0


cdef double _gpu_timeout() except? -3.0:
    """config.gpu_timeout() as Program.run takes it (< 0: none), asking config only when the
    variable's text changed: a getenv instead of os.environ's Python per run (os.environ
    writes go through putenv, so getenv sees them; config parses and documents the variable)."""
    global _timeout_text, _timeout_value
    cdef const char* now = getenv(_timeout_name)
    if now == NULL:
        now = b""
    if _timeout_text != NULL and strcmp(now, _timeout_text) == 0:
        return _timeout_value
    t = _config.gpu_timeout()
    cdef double value = -1.0 if t is None else float(t)
    cdef size_t n = strlen(now)
    cdef char* copy = <char*>malloc(n + 1)
    if copy == NULL:
        raise MemoryError()
    memcpy(copy, now, n + 1)
    free(_timeout_text)
    _timeout_text = copy
    _timeout_value = value
    return value


cdef int _pack(shape, int* nd, int* dim0, cnp.npy_intp* dims, int d) except -1:
    """Shape into dims[d:] (at most 4 * MAX_IO dimensions in all), its rank into nd and its
    first index into dim0; returns the next free index."""
    if d + len(shape) > 4 * MAX_IO:
        raise ValueError("no shortcut for this plan (too many dimensions)")
    nd[0] = len(shape)
    dim0[0] = d
    for n in shape:
        dims[d] = n
        d += 1
    return d


cdef class Shortcut:
    """A session's run of one plan for exactly the feeds it was made for, all in C but the calls
    on failure: the feed dict holds the same names, each a C-contiguous ndarray of the planned
    dtype and shape, no run options. It takes a free slot of the plan's pool, makes the outputs,
    runs the slot's Program and hands the slot back, touching as few Python objects as it can:
    every object a run touches moves between cores when threads share the session (issue #14).
    Its runs pass no gate: the plan's Gate (VKML_GPU_RUNS) keeps threads from trading the GIL
    on the usual path, which holds it for several times as long; here at most the pool's slots
    run at once.
    run() returns None, having done nothing, where the usual path must take the run (another
    signature, a name it does not know, no free slot, retired slots to look at)."""

    cdef object plan           # the ConcretePlan
    cdef Gate slot_gate        # runs of this plan's shortcuts holding a slot (width: the pool's limit)
    cdef uint64_t spin_ns      # hand-offs spin this long (VKML_HANDOFF_SPIN_US)
    cdef object pool           # its SlotPool
    cdef list free_slots       # pool._free (the same list)
    cdef Feeds feeds
    cdef object vk             # the vkml.vulkan module, for FORK_GENERATION
    cdef object fork_gen
    cdef tuple keys            # the signature's names, in the dict's order
    cdef tuple descrs          # ... their dtypes
    cdef int nkeys
    cdef int nin, nout, nres
    cdef int key_nd[MAX_IO]
    cdef int key_dim0[MAX_IO]  # index of a key's first dimension in dims
    cdef int key_feed[MAX_IO]  # program feed index of a key, or -1
    cdef cnp.npy_intp dims[4 * MAX_IO]
    cdef int out_nd[MAX_IO]
    cdef int out_dim0[MAX_IO]
    cdef cnp.npy_intp odims[4 * MAX_IO]
    cdef tuple out_descrs
    cdef dict out_index        # graph output name -> its place in the outputs
    cdef readonly uint64_t runs  # runs that took the shortcut (done or failed)

    def __init__(self, plan, sig, Gate slot_gate, double spin_us):
        """sig: the session's signature of the feeds ((name, dtype, shape), ...), made on a
        run that took the usual way (so in the process that opened the GPUs: a forked child's
        runs go that way, and fail there). slot_gate: shared by the plan's shortcuts, as wide
        as its pool: a run that finds every slot taken waits there without the GIL."""
        from vkml import vulkan

        feeds = <Feeds?>plan.feeds
        self.plan = plan
        self.slot_gate = slot_gate
        self.spin_ns = <uint64_t>(spin_us * 1000.0) if spin_us > 0 else 0
        self.pool = plan.pool
        self.free_slots = self.pool._free
        self.feeds = feeds
        self.vk = vulkan
        self.fork_gen = vulkan.FORK_GENERATION
        self.nin = len(feeds.names)
        self.nout = len(feeds.out_shapes)
        self.nres = len(feeds.sources)
        self.nkeys = len(sig)
        out_names = list(plan.graph_outputs)
        if self.nkeys > MAX_IO or self.nout > MAX_IO or self.nres != len(out_names):
            raise ValueError("no shortcut for this plan")
        self.keys = tuple(s[0] for s in sig)
        self.descrs = tuple(s[1] for s in sig)
        cdef int d = 0
        for i, s in enumerate(sig):
            if len(s) != 3:
                raise ValueError("no shortcut for vkml.Tensor feeds")
            shape = s[2]
            d = _pack(shape, &self.key_nd[i], &self.key_dim0[i], self.dims, d)
            name = s[0]
            self.key_feed[i] = feeds.names.index(name) if name in feeds.names else -1
            if self.key_feed[i] >= 0 and (feeds.in_dtypes[self.key_feed[i]] != s[1]
                                          or feeds.in_shapes[self.key_feed[i]] != tuple(shape)):
                raise ValueError(f"feed {name!r}: the signature is not the plan's")
        for n in feeds.names:
            if n not in self.keys:
                raise ValueError(f"feed {n!r} is not in the signature")
        d = 0
        for i, shape in enumerate(feeds.out_shapes):
            d = _pack(shape, &self.out_nd[i], &self.out_dim0[i], self.odims, d)
        self.out_descrs = feeds.out_dtypes
        self.out_index = {n: i for i, n in enumerate(out_names)}

    def run(self, output_names, dict feed):
        """The outputs named (all for None), or None: not this shortcut's run (nothing done)."""
        cdef PyObject* o
        cdef cnp.ndarray a
        cdef int i, j, nd
        cdef cnp.npy_intp* shape
        cdef const char* src[MAX_IO]
        cdef list held = []  # the fed arrays, alive until run() returns (the caller's dict may change)
        if PyDict_Size(feed) != self.nkeys or self.vk.FORK_GENERATION != self.fork_gen:
            return None
        for i in range(self.nkeys):
            o = PyDict_GetItem(feed, self.keys[i])
            if o == NULL or type(<object>o) is not cnp.ndarray:
                return None
            a = <cnp.ndarray>o
            if not cnp.PyArray_IS_C_CONTIGUOUS(a):
                return None
            if <object>cnp.PyArray_DESCR(a) is not self.descrs[i] and a.dtype != self.descrs[i]:
                return None
            nd = self.key_nd[i]
            if cnp.PyArray_NDIM(a) != nd:
                return None
            shape = cnp.PyArray_DIMS(a)
            for j in range(nd):
                if shape[j] != self.dims[self.key_dim0[i] + j]:
                    return None
            j = self.key_feed[i]
            if j >= 0:
                src[j] = <const char*>cnp.PyArray_DATA(a)
                held.append(a)
        picks = None
        if output_names is not None:
            if type(output_names) is not list and type(output_names) is not tuple:
                return None
            picks = []
            for name in output_names:
                k = self.out_index.get(name)
                if k is None:
                    return None
                picks.append(k)
        if self.pool._retired:
            return None
        self.slot_gate._wait(self.spin_ns, 0, True)
        try:
            slot = self.free_slots.pop()
        except IndexError:  # (taken by a run on the usual path, or never made yet: that path makes it)
            vkml_gate_release(&self.slot_gate.g)
            return None
        program = slot.program
        if program is None:
            self.pool.release(slot)
            vkml_gate_release(&self.slot_gate.g)
            return None
        try:
            return self._go(<Program>program, slot, src, picks, feed)
        finally:
            vkml_gate_release(&self.slot_gate.g)  # (after the slot went back to the pool)

    cdef object _go(self, Program p, object slot, const char** src, object picks, dict feed):
        cdef uint64_t t0 = _now_ns()
        cdef int i, k
        cdef cnp.ndarray a
        cdef double timeout
        cdef list made = []
        try:
            timeout = _gpu_timeout()
            for i in range(self.nin):
                p.src[i] = src[i]
            for i in range(self.nout):
                descr = self.out_descrs[i]
                Py_INCREF(descr)  # (PyArray_Empty takes the reference)
                a = _empty(self.out_nd[i], &self.odims[self.out_dim0[i]], <cnp.dtype>descr, 0)
                made.append(a)
                p.dst[i] = <char*>cnp.PyArray_DATA(a)
        except BaseException:
            self.pool.release(slot)
            raise
        self.runs += 1
        try:
            p._call(timeout, None, t0)
        except BaseException as e:
            err = self.plan._native_failed(slot, p, e, None if timeout < 0 else timeout)
            if err is not None:
                raise err from None
            raise
        if slot.faults:
            self.plan._native_faults(slot)
        else:
            self.pool.release(slot)
        cdef list outs = self.feeds.results(made, feed)
        if picks is None:
            return outs
        return [outs[k] for k in picks]
