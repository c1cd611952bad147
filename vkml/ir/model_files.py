"""Reading a model's files as a hostile party may have laid them out.

Everything here answers to issue #19:
- Only regular files are read, and they are opened with O_NONBLOCK, so a FIFO, a device or a
  socket named as a model or as external data is a ModelError rather than a hang.
- External data must resolve (``os.path.realpath``: symlinked files and folders followed) to a
  file inside the model's folder; absolute locations and ``..`` are refused outright.
- Files are copied into private memory at load, never memory-mapped. With a shared mapping,
  re-saving the model changed a live session's weights and truncating it killed the process
  with SIGBUS; a private mapping (MAP_PRIVATE) does not help, since Linux still shows other
  writers' changes on pages not yet copied and still raises SIGBUS past the end of a shrunk file.
  The cost: resident memory is the same as a mapping whose pages have all been touched (every
  weight is read by the first run anyway), but the pages are anonymous, so processes holding the
  same model no longer share them and the kernel cannot drop them under pressure without swap.
  Measured on the 2-core VM, an MLP with 48 MiB of weights on the CPU device: 97 MiB resident
  after a run (mapped: 91), first-run peak 113 MiB (mapped: 93, as the mapping was paged in
  during the run while the copy is resident before it); onnxruntime: 137 MiB.
"""
from __future__ import annotations

import errno
import mmap
import os
import stat

import numpy as np

from ..errors import ModelError

_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def _open_regular(path: str, what: str, flags: int = 0) -> tuple[int, int]:
    """(fd, size) of a regular file opened without blocking; ModelError otherwise.

    what begins the message: "cannot read model file", "graph 'g': tensor 'w': external data file"."""
    try:
        fd = os.open(path, _OPEN_FLAGS | flags)
    except (OSError, ValueError) as e:  # ValueError: an embedded NUL byte
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        if isinstance(e, OSError) and e.errno == errno.ENXIO:
            why = "a socket or a device with nothing behind it"
        raise ModelError(f"{what} {path!r}: {why}") from e
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ModelError(f"{what} {path!r}: it is {_kind(st.st_mode)}, not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd, st.st_size


def _read_into(fd: int, buf: memoryview, offset: int, path: str, what: str) -> None:
    """Fill buf from the file at offset; a file that shrinks meanwhile is a ModelError."""
    done = 0
    while done < len(buf):
        try:
            n = os.preadv(fd, [buf[done:]], offset + done)
        except OSError as e:
            raise ModelError(f"{what} {path!r}: {e.strerror}") from e
        if n == 0:
            raise ModelError(f"{what} {path!r} shrank while it was read ({offset + done} bytes, "
                             f"{offset + len(buf)} expected)")
        done += n


HUGE_PAGE_MIN = 4 << 20


def private_buffer(size: int) -> mmap.mmap:
    """`size` bytes of anonymous memory, returned to the system whole when the last view of
    it goes. From HUGE_PAGE_MIN up, transparent huge pages are asked for: the copy of a model
    then takes a page fault per 2 MiB instead of per 4 KiB (ResNet-50's 98 MiB, 2-core VM:
    77 -> 30 ms)."""
    buf = mmap.mmap(-1, size)
    if size >= HUGE_PAGE_MIN and hasattr(mmap, "MADV_HUGEPAGE"):
        try:
            buf.madvise(mmap.MADV_HUGEPAGE)
        except OSError:  # a kernel without THP: ordinary pages
            pass
    return buf


PARALLEL_READ_CHUNK = 32 << 20


def _read_parallel(fd: int, buf: memoryview, offset: int, path: str, what: str) -> None:
    """_read_into, in pieces on up to 8 threads when the range is big: preadv releases the GIL,
    and a single reader is bound by page faults and copying, not by the disk (a 436 MB BERT-base
    model took 0.35 s on one thread on the H100 machine)."""
    pieces = min(8, os.cpu_count() or 1, len(buf) // PARALLEL_READ_CHUNK)
    if pieces < 2:
        _read_into(fd, buf, offset, path, what)
        return
    import threading

    step = -(-len(buf) // pieces)
    errors: list[BaseException] = []

    def read(lo: int) -> None:
        try:
            _read_into(fd, buf[lo:lo + step], offset + lo, path, what)
        except BaseException as e:  # re-raised on the caller's thread below
            errors.append(e)

    threads = [threading.Thread(target=read, args=(lo,), name="vkml-read-model") for lo in range(step, len(buf), step)]
    for t in threads:
        t.start()
    read(0)
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def read_model_file(path: str) -> bytes | mmap.mmap:
    """The whole file in private anonymous memory (see the module docstring for why a copy)."""
    fd, size = _open_regular(path, "cannot read model file")
    try:
        if size == 0:
            return b""
        buf = private_buffer(size)
        _read_parallel(fd, memoryview(buf), 0, path, "model file")
        return buf
    finally:
        os.close(fd)


def _inside(root: str, path: str) -> bool:
    return path != root and os.path.commonpath([root, path]) == root


def _confined(base_dir: str, location: str, where: str) -> tuple[str, str]:
    """(root, path): the real paths of base_dir and of an external data location, which must lie
    inside it."""
    parts = location.replace("\\", "/").split("/")
    if os.path.isabs(location) or location.startswith("\\") or ".." in parts:
        raise ModelError(f"{where}: external data location {location!r} leaves the model's folder "
                         "(absolute paths and '..' are refused)")
    if "\0" in location:
        raise ModelError(f"{where}: external data location {location!r} contains a NUL byte")
    root = os.path.realpath(base_dir)
    path = os.path.realpath(os.path.join(root, location))
    if not _inside(root, path):
        raise ModelError(f"{where}: external data location {location!r} resolves to {path!r}, outside the "
                         f"model's folder {root!r} (through a symbolic link)")
    return root, path


def _check_opened(fd: int, root: str, what: str) -> None:
    """The file actually opened is still inside root: a link swapped in between the realpath check
    and the open is caught here (Linux's /proc; elsewhere O_NOFOLLOW covers the last component)."""
    try:
        actual = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return
    if not _inside(root, actual):
        raise ModelError(f"{what} was replaced while it was opened: it is now {actual!r}, outside {root!r}")


def _count(info: dict[str, str], key: str, default: int, where: str) -> int:
    text = info.get(key)
    if text is None:
        return default
    if not (text.isascii() and text.isdigit()):
        raise ModelError(f"{where}: external data {key} {text!r} is not a non-negative integer")
    return int(text)


def read_external(base_dir: str, info: dict[str, str], dtype: np.dtype, count: int, where: str) -> np.ndarray:
    """A tensor's external data (location, offset, length in info) as a private flat array.

    where names the tensor; the file must be a regular file inside base_dir (see _confined)."""
    if dtype.kind == "O":
        raise ModelError(f"{where}: string tensors cannot be stored as external data")
    loc = info.get("location")
    if not loc:
        raise ModelError(f"{where}: external tensor has no location")
    root, path = _confined(base_dir, loc, where)
    offset = _count(info, "offset", 0, where)
    nbytes = count * dtype.itemsize
    length = _count(info, "length", nbytes, where)
    if length != nbytes:
        raise ModelError(f"{where}: external tensor has length {length}, expected {nbytes}")
    what = f"{where}: external data file"
    fd, size = _open_regular(path, what, getattr(os, "O_NOFOLLOW", 0))  # path has no links left
    try:
        _check_opened(fd, root, f"{what} {path!r}")
        if offset + nbytes > size:
            raise ModelError(f"{what} {path!r} is {size} bytes, the tensor needs {offset + nbytes}")
        arr = np.frombuffer(private_buffer(nbytes), dtype, count) if nbytes >= HUGE_PAGE_MIN else np.empty(count, dtype)
        if nbytes:
            _read_parallel(fd, memoryview(arr.view(np.uint8)), offset, path, what)
    finally:
        os.close(fd)
    return arr
