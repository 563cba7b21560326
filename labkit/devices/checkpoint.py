"""kubelet_internal_checkpoint (pkg/kubelet/cm/devicemanager/checkpoint/checkpoint.go, manager.go
writeCheckpoint / readCheckpoint): `{"Data": {"PodDeviceEntries": [...], "RegisteredDevices": {...}},
"Checksum": N}` with DeviceIDs per NUMA node (`-1`: no topology) and AllocResp the protobuf
encoding of the container's ContainerAllocateResponse (base64 in the JSON).

The checksum is checkpointmanager/checksum's: FNV-1a 32 over go-spew's `%#v` dump of Data.Data.
The dump of this struct is rendered below as spew writes the types it holds; no upstream test
fixes a checksum of this file, so the rendering follows spew's rules for maps (keys sorted),
slices and byte slices [unsure in its details: labkit's own checkpoints read back with it]."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Callable

from labkit.apiserver.protobuf import length_delimited, varint_field
from labkit.checksum import fnv1a32
from labkit.devices.manager import Allocation, DeviceManager, Endpoint, Options

CORRUPTED = "checkpoint is corrupted"


def _quoted(text: str) -> str:
    return json.dumps(text)


def spew_dump(data: dict) -> str:
    """`%#v` of checkpoint.checkpointData, as go-spew (SortKeys, DisableMethods) prints it."""
    entries = []
    for e in data.get("PodDeviceEntries") or []:
        per_numa = e.get("DeviceIDs") or {}
        numa = "map[" + " ".join(f"{int(k)}:[{' '.join(_quoted(v) for v in per_numa[k])}]"
                                 for k in sorted(per_numa, key=int)) + "]"
        raw = base64.b64decode(e.get("AllocResp") or "")
        alloc = "[" + " ".join(str(b) for b in raw) + "]" if raw else "<nil>"
        entries.append(f"{{PodUID:(string){_quoted(e['PodUID'])} ContainerName:(string){_quoted(e['ContainerName'])} "
                       f"ResourceName:(string){_quoted(e['ResourceName'])} DeviceIDs:(checkpoint.DevicesPerNUMA){numa} "
                       f"AllocResp:([]uint8){alloc}}}")
    registered = data.get("RegisteredDevices") or {}
    reg = "map[" + " ".join(f"{_quoted(k)}:[{' '.join(_quoted(v) for v in registered[k])}]" for k in sorted(registered)) + "]"
    pods = "[" + " ".join(entries) + "]" if entries else "<nil>"
    return (f"(checkpoint.checkpointData){{PodDeviceEntries:([]checkpoint.PodDevicesEntry){pods} "
            f"RegisteredDevices:(map[string][]string){reg}}}")


def checksum(data: dict) -> int:
    return fnv1a32(spew_dump(data))


# -- ContainerAllocateResponse in protobuf (api.proto field numbers) -------------------------------

def _string(number: int, text: str) -> bytes:
    return length_delimited(number, text.encode())


def encode_response(resp: dict) -> bytes:
    """ContainerAllocateResponse: envs [1] and annotations [4] (map<string,string>), mounts [2]
    {container_path 1, host_path 2, read_only 3}, devices [3] {container_path 1, host_path 2,
    permissions 3}, cdi_devices [5] {name 1} — deterministic order (map keys sorted)."""
    out = b""
    for key, value in sorted((resp.get("envs") or {}).items()):
        out += length_delimited(1, _string(1, key) + _string(2, value))
    for m in resp.get("mounts") or []:
        body = _string(1, m.get("container_path", "")) + _string(2, m.get("host_path", ""))
        if m.get("read_only"):
            body += varint_field(3, 1)
        out += length_delimited(2, body)
    for d in resp.get("devices") or []:
        out += length_delimited(3, _string(1, d.get("container_path", "")) + _string(2, d.get("host_path", ""))
                      + (_string(3, d["permissions"]) if d.get("permissions") else b""))
    for key, value in sorted((resp.get("annotations") or {}).items()):
        out += length_delimited(4, _string(1, key) + _string(2, value))
    for c in resp.get("cdi_devices") or []:
        out += length_delimited(5, _string(1, c.get("name", "")))
    return out


def to_data(manager: DeviceManager) -> dict:
    entries = []
    for uid, containers in manager.pod_devices.items():
        for name, resources in containers.items():
            for resource, a in resources.items():
                if a.response is None:
                    continue
                entries.append({"PodUID": uid, "ContainerName": name, "ResourceName": resource,
                                "DeviceIDs": {str(k): v for k, v in sorted(a.numa.items())},
                                "AllocResp": base64.b64encode(encode_response(a.response)).decode()})
    registered = {r: sorted(ids) for r, ids in manager.healthy.items()}
    return {"PodDeviceEntries": entries, "RegisteredDevices": registered}


def write(manager: DeviceManager, path: Path) -> Path:
    data = to_data(manager)
    path.write_text(json.dumps({"Data": data, "Checksum": checksum(data)}, separators=(",", ":")))
    return path


def decode(path: Path, response: Callable[[bytes], dict]) -> dict:
    """The file as readCheckpoint sees it, for people: its checksum stored and computed (a
    mismatch is what kubelet logs as `checkpoint is corrupted` and then starts empty), the
    registered resources, and each container's devices per NUMA node with its Allocate answer
    (`response(bytes)` decodes a ContainerAllocateResponse). Raises ValueError for a file that
    is not a checkpoint at all."""
    try:
        blob = json.loads(Path(path).read_text())
        data = blob["Data"]
        entries = [{"pod": e["PodUID"], "container": e["ContainerName"], "resource": e["ResourceName"],
                    "devices": {str(k): list(v) for k, v in (e.get("DeviceIDs") or {}).items()},
                    "allocate_response": response(base64.b64decode(e.get("AllocResp") or ""))}
                   for e in data.get("PodDeviceEntries") or []]
        stored = int(blob.get("Checksum") or 0)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise ValueError(f"{path}: not a device manager checkpoint ({type(exc).__name__}: {exc})") from None
    computed = checksum(data)
    return {"file": str(path), "checksum": {"stored": stored, "computed": computed,
                                           "verdict": "ok" if stored == computed else CORRUPTED},
            "registered": {r: list(ids) for r, ids in (data.get("RegisteredDevices") or {}).items()},
            "entries": entries}


def read(manager: DeviceManager, path: Path, now: float, responses: dict | None = None) -> None:
    """readCheckpoint: restore allocations; every registered resource gets empty device sets and
    a stopped endpoint (capacity and allocatable 0 until its plugin registers again). A missing
    file is no error; a corrupted one raises and leaves the state empty."""
    if not path.exists():
        return
    blob = json.loads(path.read_text())
    data = blob.get("Data") or {}
    if int(blob.get("Checksum") or 0) != checksum(data):
        raise ValueError(CORRUPTED)
    for e in data.get("PodDeviceEntries") or []:
        numa = {int(k): list(v) for k, v in (e.get("DeviceIDs") or {}).items()}
        devices = sorted(d for ids in numa.values() for d in ids)
        response = (responses or {}).get((e["PodUID"], e["ContainerName"], e["ResourceName"]), {})
        manager.pod_devices.setdefault(e["PodUID"], {}).setdefault(e["ContainerName"], {})[e["ResourceName"]] = \
            Allocation(devices, response, numa)
    for resource in data.get("RegisteredDevices") or {}:
        manager.healthy[resource] = set()
        manager.unhealthy[resource] = set()
        manager.endpoints[resource] = Endpoint(resource, None, Options(), stopped_at=now)
