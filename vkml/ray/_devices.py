"""Which vkml devices a Ray worker should open, from what Ray assigned it.

Ray hands out GPUs as ids (`ray.get_gpu_ids()`, through CUDA_VISIBLE_DEVICES and its AMD and
Intel equivalents), but Vulkan ignores those variables: every process sees every GPU of the
host. So an actor has to find its GPU among vkml's Vulkan devices itself, or two actors would
share one GPU and leave the other idle. In order of trust:

1. by device UUID: NVIDIA's Vulkan deviceUUID is the UUID nvidia-smi prints ("GPU-...");
2. by PCI bus address (VK_EXT_pci_bus_info against nvidia-smi's pci.bus_id);
3. by index: Ray's id k is the k-th GPU of the host in PCI order (NVML's order), and the Vulkan
   loader on Linux enumerates GPUs of one type in PCI order too, so the k-th Vulkan GPU of the
   vendor Ray manages is the same card. This is the fallback, and today the only rule in use:
   vkml's device list does not carry UUIDs or PCI addresses yet (`match_gpus` takes them as
   soon as `vkml.devices()` reports them as details "uuid" / "pci bus").

Hosts whose GPUs Ray does not manage (no NVIDIA/AMD/Intel plugin) can declare a custom
resource, `ray start --resources='{"vulkan": 2}'`: an actor holding `vulkan` units claims that
many free Vulkan devices of its host with a file lock each, released by the kernel when the
process dies, so a restarted actor finds its device free again.
"""
from __future__ import annotations

import fcntl
import logging
import os
import re
import shutil
import subprocess
import tempfile
from typing import Any, Sequence

log = logging.getLogger("vkml")

# The environment variable Ray sets for a worker's GPUs, by the vendor whose plugin manages them.
_VISIBLE_VARS = (("CUDA_VISIBLE_DEVICES", 0x10DE), ("HIP_VISIBLE_DEVICES", 0x1002),
                 ("ROCR_VISIBLE_DEVICES", 0x1002), ("ONEAPI_DEVICE_SELECTOR", 0x8086))
VULKAN_RESOURCE = "vulkan"  # the custom resource name for hosts whose GPUs Ray does not manage
_held_locks: list[int] = []  # file descriptors of claimed devices, kept open for the process's life


def normalize_uuid(value: Any) -> str | None:
    """32 lowercase hex digits from bytes, "GPU-xxxxxxxx-xxxx-..." or plain hex; None if neither."""
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex() if len(value) == 16 else None
    text = re.sub(r"^(GPU|MIG)-", "", str(value).strip(), flags=re.I).replace("-", "").lower()
    return text if re.fullmatch(r"[0-9a-f]{32}", text) else None


def normalize_pci(value: Any) -> tuple[int, int, int, int] | None:
    """(domain, bus, device, function) from "0000:17:00.0" or nvidia-smi's "00000000:17:00.0"."""
    if value is None:
        return None
    m = re.fullmatch(r"(?:([0-9a-fA-F]+):)?([0-9a-fA-F]+):([0-9a-fA-F]+)\.([0-7])", str(value).strip())
    if not m:
        return None
    dom, bus, dev, fn = m.groups()
    return int(dom or "0", 16), int(bus, 16), int(dev, 16), int(fn)


def _identity(info: Any) -> tuple[str | None, tuple | None]:
    """A vkml.DeviceInfo's UUID and PCI address where vkml reports them (details "uuid" and
    "pci bus", or the Vulkan description's `uuid` / `pci_bus`), else None."""
    details = getattr(info, "details", None) or {}
    vk = getattr(info, "vulkan", None)
    uuid = details.get("uuid") or getattr(vk, "uuid", None) or getattr(vk, "device_uuid", None)
    pci = details.get("pci bus") or getattr(vk, "pci_bus", None)
    return normalize_uuid(uuid), normalize_pci(pci)


def _vendor_id(info: Any) -> int | None:
    vid = getattr(getattr(info, "vulkan", None), "vendor_id", None)
    return vid if isinstance(vid, int) else None


def _vulkan_index(info: Any) -> int:
    idx = getattr(getattr(info, "vulkan", None), "index", None)
    if isinstance(idx, int):
        return idx
    m = re.fullmatch(r"vulkan:(\d+)", info.name)
    return int(m.group(1)) if m else 1 << 30


def nvidia_smi_gpus() -> dict[str, dict[str, str]]:
    """nvidia-smi's view of the host: {index: {"uuid", "pci"}} for every NVIDIA GPU (ignoring
    CUDA_VISIBLE_DEVICES, as Ray's ids do); {} without nvidia-smi."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return {}
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    try:
        out = subprocess.run([exe, "--query-gpu=index,uuid,pci.bus_id", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, env=env).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    gpus = {}
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3 and parts[0].isdigit():
            gpus[parts[0]] = {"uuid": parts[1], "pci": parts[2]}
    return gpus


def match_gpus(ray_ids: Sequence[str], gpus: Sequence[Any], host: dict[str, dict[str, str]] | None = None,
               vendor_id: int | None = None) -> tuple[list[str], str]:
    """The vkml device names of Ray's GPU ids, and the rule that matched them ("uuid", "pci"
    or "index").

    ray_ids: what Ray assigned (indices such as "1", or UUIDs when the raylet was started with
    CUDA_VISIBLE_DEVICES=GPU-...). gpus: vkml.DeviceInfo of the real Vulkan GPUs. host:
    nvidia_smi_gpus() (index -> uuid, pci), {} when unknown. vendor_id: the vendor whose GPUs
    Ray counts (a host's integrated GPU of another vendor is then not counted by index).
    Raises RuntimeError when an id matches no device, saying what was seen."""
    host = host or {}
    by_uuid = {u: g for g in gpus for u in [_identity(g)[0]] if u}
    by_pci = {p: g for g in gpus for p in [_identity(g)[1]] if p}
    uuid_of = {i: normalize_uuid(h.get("uuid")) for i, h in host.items()}
    pci_of = {i: normalize_pci(h.get("pci")) for i, h in host.items()}
    index_of_uuid = {u: i for i, u in uuid_of.items() if u}

    names, rules = [], set()
    for rid in ray_ids:
        rid = str(rid).strip()
        uuid = normalize_uuid(rid) or uuid_of.get(rid)
        if uuid and uuid in by_uuid:
            names.append(by_uuid[uuid].name)
            rules.add("uuid")
            continue
        index = rid if rid.isdigit() else index_of_uuid.get(uuid) if uuid else None
        pci = pci_of.get(index) if index is not None else None
        if pci and pci in by_pci:
            names.append(by_pci[pci].name)
            rules.add("pci")
            continue
        pool = [g for g in gpus if vendor_id is None or _vendor_id(g) in (None, vendor_id)]
        pool.sort(key=_vulkan_index)
        if index is None:
            raise RuntimeError(f"Ray assigned GPU {rid!r}, which names no Vulkan device here: vkml reports no "
                               f"device UUIDs, and nvidia-smi does not list it ({sorted(host) or 'no nvidia-smi'})")
        k = int(index)
        if k >= len(pool) and len(pool) == len(ray_ids):
            # The driver already hid the other GPUs (it honours the visible-devices variable):
            # the Vulkan GPUs are the assigned ones, in the assigned order.
            k = [str(r).strip() for r in ray_ids].index(rid)
        if k >= len(pool):
            raise RuntimeError(f"Ray assigned GPU {rid}, but vkml sees {len(pool)} Vulkan GPU(s) of that vendor: "
                               f"{[g.name for g in pool]}")
        names.append(pool[k].name)
        rules.add("index")
    return names, "+".join(sorted(rules)) or "none"


def _claim(candidates: Sequence[str], count: int, lock_dir: str | None = None) -> list[str]:
    """Take `count` of `candidates` that no other process of this host holds (one lock file per
    device, held until this process exits); RuntimeError when too few are free."""
    lock_dir = lock_dir or os.path.join(tempfile.gettempdir(), f"vkml-ray-{os.getuid()}")
    os.makedirs(lock_dir, exist_ok=True)
    got: list[str] = []
    for name in candidates:
        if len(got) == count:
            break
        fd = os.open(os.path.join(lock_dir, name.replace(":", "-") + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        _held_locks.append(fd)
        got.append(name)
    if len(got) < count:
        for _ in got:
            os.close(_held_locks.pop())
        raise RuntimeError(f"this worker holds {count} '{VULKAN_RESOURCE}' resource unit(s), but only {len(got)} "
                           f"of this host's Vulkan devices {list(candidates)} are free (lock files in {lock_dir}); "
                           f"declare no more '{VULKAN_RESOURCE}' units per node than it has Vulkan devices")
    return got


def _ray_assignment() -> tuple[list[str], float, int | None]:
    """(GPU ids, units of the custom vulkan resource, the GPU vendor's PCI id) of this worker."""
    import ray

    vendor = next((vid for var, vid in _VISIBLE_VARS if os.environ.get(var)), None)
    if not ray.is_initialized():  # not in a Ray worker: nothing was assigned
        return [], 0.0, vendor
    ctx = ray.get_runtime_context()
    # Each question may fail where nothing was assigned: asked from the driver (Ray asserts it
    # is no worker), or of an older Ray. Then this process holds none of it.
    try:
        gpu_ids = [str(i) for i in ctx.get_accelerator_ids().get("GPU", [])]
    except Exception as e:
        log.debug("vkml.ray: get_accelerator_ids failed (%s: %s); asking get_gpu_ids", type(e).__name__, e)
        try:
            gpu_ids = [str(i) for i in ray.get_gpu_ids()]
        except Exception as e2:
            log.debug("vkml.ray: get_gpu_ids failed too (%s: %s); no GPUs assigned", type(e2).__name__, e2)
            gpu_ids = []
    try:
        vulkan = float(ctx.get_assigned_resources().get(VULKAN_RESOURCE, 0.0))
    except Exception as e:
        log.debug("vkml.ray: get_assigned_resources failed (%s: %s); no %r units assigned",
                  type(e).__name__, e, VULKAN_RESOURCE)
        vulkan = 0.0
    return gpu_ids, vulkan, vendor


def assigned_devices(devices: Sequence[Any] | None = None) -> tuple[list[Any], dict[str, Any]]:
    """The devices this Ray worker serves from, one session each, and how they were chosen.

    devices: given explicitly, used as they are (each a vkml device name, or a list of names
    for one session spread over several devices). None: Ray's GPUs (`num_gpus=`), mapped to
    Vulkan devices by UUID, PCI bus or index; else the custom "vulkan" resource's units,
    claimed on this host; else the CPU device. Returns (devices, a placement record)."""
    import vkml

    record: dict[str, Any] = {"ray_gpu_ids": [], "vulkan_units": 0.0}
    if devices is not None:
        if isinstance(devices, str):
            devices = [devices]
        chosen = [d if isinstance(d, str) else list(d) for d in devices]
        if not chosen:
            raise ValueError("devices= is empty: give device names such as 'vulkan:0' or 'cpu', or None")
        record["matched_by"] = "explicit"
        return chosen, record
    gpu_ids, units, vendor = _ray_assignment()
    record.update(ray_gpu_ids=gpu_ids, vulkan_units=units)
    if gpu_ids:
        gpus = [d for d in vkml.devices() if d.name != "cpu" and d.kind != "cpu"]
        # nvidia-smi only when it can help: an id that is a UUID, or devices that carry identities.
        need_host = vendor == 0x10DE and (any(not i.isdigit() for i in gpu_ids)
                                          or any(any(_identity(g)) for g in gpus))
        names, rule = match_gpus(gpu_ids, gpus, nvidia_smi_gpus() if need_host else {}, vendor)
        record["matched_by"] = rule
        return names, record
    if units > 0:
        if units != int(units):
            raise ValueError(f"this worker holds {units} '{VULKAN_RESOURCE}' units: give whole units (one per Vulkan "
                             f"device); to share a GPU between actors, use Ray's num_gpus= with a fraction")
        every = [d for d in vkml.devices() if d.name != "cpu"]
        real = [d for d in every if d.kind != "cpu"]
        candidates = sorted(real or every, key=_vulkan_index)  # lavapipe only where there is no GPU
        names = _claim([d.name for d in candidates], int(units))
        record["matched_by"] = f"{VULKAN_RESOURCE} resource (host lock)"
        return names, record
    record["matched_by"] = "no GPU assigned: the CPU device"
    return ["cpu"], record
