"""kubelet's side of the device plugin API over real gRPC on real unix sockets, driving the
reconstructed device manager (labkit.devices.manager) — the transport only, no second copy of
the manager's rules.

* Start (plugin/v1beta1/server.go Start; manager.go CleanupPluginDirectory, readCheckpoint):
  `mkdir -p` the socket directory (0750), remove every unix socket in it (the checkpoint and
  other files stay), restore allocations from `kubelet_internal_checkpoint` (every resource it
  names: capacity 0, endpoint stopped, until its plugin registers again), then serve
  `v1beta1.Registration` on `kubelet.sock`.
* Register (server.go Register, handler.go connectClient, client.go Connect/dial,
  manager.go PluginConnected): version, then resource name, then — before answering — dial
  `<dir>/<endpoint>` (10 s) and call GetDevicePluginOptions; the options in the RegisterRequest
  are not used, the rpc's answer is. Then a ListAndWatch stream is read in the background.
* ListAndWatch (client.go Run, manager.go genericDeviceUpdateCallback): every message is the
  resource's whole device list; the checkpoint is rewritten after each. When the stream ends
  (plugin gone, socket closed), PluginDisconnected marks every device unhealthy and stops the
  endpoint (the manager's 5-minute grace period follows).
* Allocate / GetPreferredAllocation (endpoint.go allocate, getPreferredAllocation): one container
  request per call, `container_responses[0]` used; the device IDs in no order (a Go set's
  UnsortedList(): manager.unsorted_list). PreStartContainer (manager.go
  callPreStartContainerIfNeeded) only when the plugin's options ask for it, 30 s timeout.
* Restart (`restart`): the Registration server stops, every plugin connection closes, and a
  fresh device manager starts as above from the checkpoint: the plugins' sockets are gone and
  they must notice `kubelet.sock` was recreated and register again.

A re-registration of a resource replaces its endpoint; the replaced connection's stream ending
later is ignored (handler.go keeps clients per socket path and disconnects only the one whose
stream ended).
"""

from __future__ import annotations

import base64
import json
import os
import posixpath
import stat
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import grpc
from google.protobuf.message import DecodeError

from labkit.devices import api, checkpoint
from labkit.devices.manager import (HEALTHY, Device, DeviceError, DeviceManager, Options, admission_error)

# CLOCK_REALTIME_COARSE of linux/time.h (Python's time module names it from 3.13 on only)
_CLOCK_REALTIME_COARSE = getattr(time, "CLOCK_REALTIME_COARSE", 5)

CHECKPOINT = "kubelet_internal_checkpoint"     # manager.go kCheckpointName
SUN_PATH_MAX = 107                             # struct sockaddr_un's sun_path, less its NUL


def endpoint_path(directory: Path, endpoint: str) -> str:
    """The socket kubelet dials for a RegisterRequest's endpoint: plugin/v1beta1/server.go Register
    dials filepath.Join(s.socketDir, r.Endpoint). Go's Join puts the endpoint under the directory
    even when it is an absolute path (Python's `/` would let it replace the directory) and cleans
    the result: an endpoint that is the socket's full path names a socket that is not there."""
    return posixpath.normpath(f"{directory}/{endpoint}")


def go_status(exc: grpc.RpcError) -> str:
    """A gRPC error as grpc-go prints it: `rpc error: code = Unknown desc = <message>`."""
    code = exc.code() if hasattr(exc, "code") else grpc.StatusCode.UNKNOWN
    name = "".join(w.capitalize() for w in code.name.split("_"))
    return f"rpc error: code = {name} desc = {exc.details() if hasattr(exc, 'details') else exc}"


class PluginCallError(Exception):
    """A failed rpc to a plugin, worded as grpc-go words it."""


def _devices(response) -> list[Device]:
    out = []
    for d in response.devices:
        nodes = tuple(n.ID for n in d.topology.nodes) if d.HasField("topology") else ()
        out.append(Device(d.ID, d.health, nodes or None))
    return out


def response_dict(resp) -> dict:
    """A ContainerAllocateResponse as the manager and checkpoint keep it."""
    out: dict = {}
    if resp.envs:
        out["envs"] = dict(resp.envs)
    if resp.mounts:
        out["mounts"] = [{"container_path": m.container_path, "host_path": m.host_path, "read_only": m.read_only}
                         for m in resp.mounts]
    if resp.devices:
        out["devices"] = [{"container_path": d.container_path, "host_path": d.host_path, "permissions": d.permissions}
                          for d in resp.devices]
    if resp.annotations:
        out["annotations"] = dict(resp.annotations)
    if resp.cdi_devices:
        out["cdi_devices"] = [{"name": c.name} for c in resp.cdi_devices]
    return out


class GrpcPlugin:
    """A registered plugin as the manager's Plugin: each call is a real rpc on the plugin's socket.

    kubelet calls GetDevicePluginOptions, GetPreferredAllocation and Allocate without a deadline
    (context.Background in manager.go PluginConnected, endpoint.go): a plugin that hangs hangs the
    Pod's admission. labkit stops waiting after the dial timeout instead (10 s, the lab's runs 2 s),
    so that a hanging student plugin gives an error (DeadlineExceeded) rather than a hung lab."""

    def __init__(self, resource: str, socket_path: str, dial_timeout: float = api.DIAL_TIMEOUT):
        self.resource = resource
        self.dial_timeout = dial_timeout
        self.socket_path = socket_path
        self.channel: grpc.Channel | None = None
        self.stub: api.Stub | None = None
        self.stream = None
        self.record: dict | None = None          # the Register call that made this client (Kubelet.registrations)
        self._options: Options | None = None
        self.socket_missing = False             # a dial that timed out found no socket at socket_path

    def dial(self) -> None:
        """client.go dial: block until connected, 10 s at most."""
        channel = api.unix_channel(self.socket_path)
        try:
            grpc.channel_ready_future(channel).result(timeout=self.dial_timeout)
        except grpc.FutureTimeoutError:
            channel.close()
            # not kubelet's to say, but what the check tells the student: was anything there to dial?
            self.socket_missing = not is_socket(self.socket_path)
            raise DeviceError("failed to dial device plugin: context deadline exceeded") from None
        self.channel, self.stub = channel, api.Stub(channel, "DevicePlugin")

    def options(self) -> Options:
        if self._options is None:
            if self.stub is None:
                self.dial()
            try:
                got = self.stub.GetDevicePluginOptions(api.Empty(), timeout=self.dial_timeout)
            except grpc.RpcError as exc:
                raise DeviceError(f"failed to get device plugin options: {go_status(exc)}") from None
            self._options = Options(got.pre_start_required, got.get_preferred_allocation_available)
        return self._options

    def get_preferred_allocation(self, available: list[str], must_include: list[str], size: int) -> list[str]:
        request = api.PreferredAllocationRequest(container_requests=[api.ContainerPreferredAllocationRequest(
            available_deviceIDs=available, must_include_deviceIDs=must_include, allocation_size=size)])
        try:
            got = self.stub.GetPreferredAllocation(request, timeout=self.dial_timeout)
        except grpc.RpcError as exc:
            raise PluginCallError(go_status(exc)) from None
        return list(got.container_responses[0].deviceIDs) if got.container_responses else []

    def allocate(self, device_ids: list[str]) -> dict:
        request = api.AllocateRequest(container_requests=[api.ContainerAllocateRequest(devices_ids=device_ids)])
        try:
            got = self.stub.Allocate(request, timeout=self.dial_timeout)
        except grpc.RpcError as exc:
            raise PluginCallError(go_status(exc)) from None
        if not got.container_responses:
            # manager.go allocateContainerResources; `%v` of the gogo message [unsure: exact rendering]
            raise DeviceError("no containers return in allocation response "
                              "&AllocateResponse{ContainerResponses:[]*ContainerAllocateResponse{},}")
        return response_dict(got.container_responses[0])

    def pre_start(self, device_ids: list[str]) -> None:
        try:
            self.stub.PreStartContainer(api.PreStartContainerRequest(devices_ids=device_ids),
                                        timeout=api.PRE_START_TIMEOUT)
        except grpc.RpcError as exc:
            raise DeviceError(f"device plugin PreStartContainer rpc failed with err: {go_status(exc)}") from None

    def close(self) -> None:
        if self.stream is not None:
            self.stream.cancel()
        if self.channel is not None:
            self.channel.close()


@dataclass
class Kubelet:
    """The device manager of one node behind kubelet.sock in `directory`."""

    directory: Path
    numa_nodes: list[int] = field(default_factory=lambda: [0])
    clock: Callable[[], float] = time.time
    on_change: Callable[[], None] = lambda: None
    dial_timeout: float = api.DIAL_TIMEOUT

    def __post_init__(self):
        self.directory = Path(self.directory)
        self.lock = threading.RLock()
        self.manager = DeviceManager(self.numa_nodes)
        self.clients: dict[str, GrpcPlugin] = {}
        self.server: grpc.Server | None = None
        self.events: list[str] = []               # what kubelet logged, for the lab's views
        # every Register call: what it asked, kubelet's error, which kubelet start it reached
        # (`kubelet`: 1 for the first start, 2 after one restart, ...) and what became of the
        # ListAndWatch stream it opened (`stream`: open | ended (the plugin's side: `end` says how) |
        # replaced (the plugin registered again) | closed (kubelet stopped or restarted); `ended_at`:
        # when the plugin's side ended it)
        self.registrations: list[dict] = []
        self.starts = 0
        self.node_capacity: dict[str, int] = {}   # what the Node status shows (removed: 0)

    @property
    def socket(self) -> Path:
        return self.directory / api.KUBELET_SOCKET

    @property
    def checkpoint_path(self) -> Path:
        return self.directory / CHECKPOINT

    # -- start / stop / restart -------------------------------------------------------------------
    def start(self) -> None:
        if len(os.fsencode(self.socket)) > SUN_PATH_MAX:
            raise DeviceError(f"{self.socket}: longer than a unix socket's path may be ({SUN_PATH_MAX} bytes); "
                              "a shorter directory is needed (LABKIT_STATE_DIR)")
        self.directory.mkdir(mode=0o750, parents=True, exist_ok=True)
        self.cleanup_directory()
        with self.lock:
            self.manager = DeviceManager(self.numa_nodes)
            try:
                checkpoint.read(self.manager, self.checkpoint_path, self.clock(), self._saved_responses())
            except (ValueError, KeyError) as exc:
                # manager.go Start: the error is logged and the state stays empty
                self.manager = DeviceManager(self.numa_nodes)
                self.events.append(f"Continue after failing to read checkpoint file. Device allocation info "
                                   f"may NOT be up-to-date: {exc}")
        self.socket.unlink(missing_ok=True)
        self.starts += 1
        self.server = api.serve("Registration", self, str(self.socket))

    def _saved_responses(self) -> dict:
        """The Allocate answers the checkpoint keeps (AllocResp: ContainerAllocateResponse bytes)."""
        try:
            entries = json.loads(self.checkpoint_path.read_text())["Data"]["PodDeviceEntries"] or []
            return {(e["PodUID"], e["ContainerName"], e["ResourceName"]):
                    response_dict(api.ContainerAllocateResponse.FromString(base64.b64decode(e.get("AllocResp") or "")))
                    for e in entries}
        except (OSError, ValueError, KeyError, TypeError, DecodeError):
            return {}

    def cleanup_directory(self) -> None:
        """manager.go CleanupPluginDirectory: every unix socket goes, nothing else."""
        for entry in self.directory.iterdir():
            try:
                if stat.S_ISSOCK(entry.lstat().st_mode):
                    entry.unlink()
            except FileNotFoundError:
                continue

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop(0).wait()
            self.server = None
        with self.lock:
            clients, self.clients = self.clients, {}
        for client in clients.values():
            if client.record is not None and client.record["stream"] == "open":
                client.record["stream"] = "closed"
            client.close()
        self.socket.unlink(missing_ok=True)

    def restart(self) -> None:
        try:
            before = self.socket.stat().st_ctime_ns
        except FileNotFoundError:
            before = None
        self.stop()
        # a plugin tells a kubelet.sock made anew by its inode and change time, and the kernel stamps
        # times from its coarse clock (a jiffy, up to 4 ms): a restart quicker than that could make a
        # socket with the same inode number and the same time, which no plugin could tell apart (a
        # real kubelet takes seconds to come back). Wait for the coarse clock to pass the old time.
        while before is not None and time.clock_gettime_ns(_CLOCK_REALTIME_COARSE) <= before:
            time.sleep(0.001)
        self.start()
        self.on_change()

    # -- Registration service ---------------------------------------------------------------------
    def Register(self, request, context):
        resource = request.resource_name
        record = {"resource": resource, "endpoint": request.endpoint, "version": request.version, "error": None,
                  "answered": False, "kubelet": self.starts, "at": self.clock(), "answered_at": None, "stream": None,
                  "end": None, "ended_at": None}
        self.registrations.append(record)
        client = GrpcPlugin(resource, endpoint_path(self.directory, request.endpoint), self.dial_timeout)
        client.record = record
        try:
            with self.lock:
                self.manager.register(resource, client, request.version)
                old = self.clients.get(resource)
                self.clients[resource] = client
        except DeviceError as exc:
            client.close()
            record["error"], record["answered"], record["answered_at"] = str(exc), True, self.clock()
            if client.socket_missing:
                record["socket_missing"] = client.socket_path
            self.events.append(f"registration of {resource!r} refused: {exc}")
            context.abort(grpc.StatusCode.UNKNOWN, str(exc))
        if old is not None:
            if old.record is not None and old.record["stream"] == "open":
                old.record["stream"] = "replaced"
            old.close()
        record["answered"], record["answered_at"], record["stream"] = True, self.clock(), "open"
        self.events.append(f"registered {resource} at {request.endpoint}")
        client.stream = client.stub.ListAndWatch(api.Empty())
        threading.Thread(target=self._watch, args=(client,), daemon=True, name=f"listandwatch {resource}").start()
        return api.Empty()

    def _watch(self, client: GrpcPlugin) -> None:
        resource = client.resource
        try:
            for response in client.stream:
                devices = _devices(response)
                with self.lock:
                    if self.clients.get(resource) is not client:
                        return
                    self.manager.list_and_watch(resource, devices)
                    self.manager.calls.append({"call": "ListAndWatch", "resource": resource,
                                               "answer": [{"ID": d.id, "health": d.health, "numa": list(d.numa or [])}
                                                          for d in devices]})
                    checkpoint.write(self.manager, self.checkpoint_path)
                self.on_change()
            ended = "the plugin finished the stream"          # grpc-go's Recv gives io.EOF then
        except grpc.RpcError as exc:
            ended = go_status(exc)
            if self.clients.get(resource) is client:     # not kubelet's own stop or a replaced client
                self.events.append(f"ListAndWatch ended unexpectedly for device plugin {resource}: {ended}")
        with self.lock:
            if self.clients.get(resource) is not client:
                return
            if client.record is not None:
                client.record.update(stream="ended", end=ended, ended_at=self.clock())
            del self.clients[resource]
            self.manager.plugin_stopped(resource, self.clock())
            if self.checkpoint_path.parent.exists():
                checkpoint.write(self.manager, self.checkpoint_path)
        client.close()
        self.on_change()

    # -- node status and pods ---------------------------------------------------------------------
    def device_capacity(self) -> tuple[dict[str, int], dict[str, int], list[str]]:
        """manager.go GetCapacity now: (capacity, allocatable, the resources removed by this call
        after their grace period); a removal rewrites the checkpoint."""
        with self.lock:
            capacity, allocatable, removed = self.manager.get_capacity(self.clock())
            if removed:
                checkpoint.write(self.manager, self.checkpoint_path)
            return capacity, allocatable, removed

    def node_status(self) -> tuple[dict[str, int], dict[str, int]]:
        """nodestatus/setters.go MachineInfo: capacity per resource (a removed one stays at 0),
        allocatable the healthy devices (labkit.devices.nodestatus writes the same to a Node)."""
        with self.lock:
            capacity, allocatable, removed = self.device_capacity()
            self.node_capacity.update(capacity)
            for resource in removed:
                self.node_capacity[resource] = 0
            return dict(self.node_capacity), {r: allocatable.get(r, 0) for r in self.node_capacity}

    def admit(self, pod: dict) -> dict | None:
        """Allocate for the Pod's containers; None when admitted, else what the rejected Pod shows."""
        uid = pod.get("uid") or pod["name"]
        with self.lock:
            try:
                self.manager.admit_pod(pod)
            except DeviceError as exc:
                self.manager.forget_pod(uid)
                return admission_error(str(exc))
            checkpoint.write(self.manager, self.checkpoint_path)
        return None

    def run_options(self, pod_uid: str, container: str) -> dict:
        """manager.go GetDeviceRunContainerOptions + pod_devices.go deviceRunContainerOptions:
        PreStartContainer for plugins that ask for it, then the container's Allocate answers
        merged over its resources (first writer wins for an env name, a mount's or device's
        container path, an annotation)."""
        with self.lock:
            held = dict(self.manager.pod_devices.get(pod_uid, {}).get(container, {}))
            clients = dict(self.clients)
        merged: dict = {"envs": {}, "mounts": [], "devices": [], "annotations": {}, "cdi_devices": []}
        for resource in sorted(held):
            allocation = held[resource]
            client = clients.get(resource)
            if client is not None and client.options().pre_start_required:
                sent = self.manager.unsorted(allocation.devices)     # callPreStartContainerIfNeeded: UnsortedList()
                client.pre_start(sent)
                self.manager.calls.append({"call": "PreStartContainer", "resource": resource, "devices": sent})
            response = allocation.response or {}
            for key, value in (response.get("envs") or {}).items():
                merged["envs"].setdefault(key, value)
            for kind in ("mounts", "devices"):
                seen = {m["container_path"] for m in merged[kind]}
                for m in response.get(kind) or []:
                    if m["container_path"] not in seen:
                        merged[kind].append(m)
                        seen.add(m["container_path"])
            for key, value in (response.get("annotations") or {}).items():
                merged["annotations"].setdefault(key, value)
            merged["cdi_devices"] += [c["name"] for c in response.get("cdi_devices") or []
                                      if c["name"] not in merged["cdi_devices"]]
        return merged

    def healthy_count(self, resource: str) -> int:
        with self.lock:
            return len(self.manager.healthy.get(resource, set()))


def device(dev_id: str, healthy: bool = True, numa: int | None = None):
    """An api.Device, for plugins."""
    d = api.Device(ID=dev_id, health=HEALTHY if healthy else "Unhealthy")
    if numa is not None:
        d.topology.nodes.add(ID=numa)
    return d


def is_socket(path: str | os.PathLike) -> bool:
    try:
        return stat.S_ISSOCK(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False
