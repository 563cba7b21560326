"""labkit's reference device plugin: a small, real `v1beta1.DevicePlugin` server on a unix socket
in kubelet's device-plugins directory, registering with kubelet.sock as any device plugin does.
Tests use it, and students read it as the model of their own plugin.

Its devices come from a spec (a YAML/JSON file, re-read when it changes, or flags):

    resource: example.com/widget
    socket: widget.sock              # the endpoint: a file name in kubelet's directory
    devices:
      - {id: widget-0, numa: 0}
      - {id: widget-1, numa: 1, health: Unhealthy}
    preferred: true                  # offers GetPreferredAllocation (same NUMA node first)
    pre_start: false                 # asks for PreStartContainer
    allocate:                        # the ContainerAllocateResponse; "{ids}" becomes the IDs, comma-separated
      envs: {WIDGET_VISIBLE_DEVICES: "{ids}"}
      mounts: [{container_path: /run/widget, host_path: /srv/widget, read_only: true}]

The plugin serves first, then registers (plugin/v1beta1/server.go Register dials back before it
answers), sends the whole device list on ListAndWatch and again after every change of the spec,
and registers again whenever kubelet.sock is created anew (kubelet restarted and removed every
socket of the directory, ours included) — as NVIDIA's plugin does with fsnotify.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import grpc

from labkit.devices import api

POLL = 0.1


def load_spec(path: Path) -> dict:
    import yaml
    text = Path(path).read_text()
    spec = json.loads(text) if text.lstrip().startswith("{") else yaml.safe_load(text)
    if not isinstance(spec, dict) or not spec.get("resource"):
        raise ValueError(f"{path}: a device plugin spec needs at least `resource` and `devices`")
    return spec


def _identity(path: Path) -> tuple[int, int]:
    """Which kubelet.sock this is: a socket made anew may reuse the inode number, not its ctime."""
    st = os.stat(path)
    return st.st_ino, st.st_ctime_ns


def _device(item) -> "api.Device":
    if isinstance(item, str):
        item = {"id": item}
    if not isinstance(item, dict) or item.get("id") in (None, ""):
        raise ValueError(f"a device of the spec needs an `id` (and optionally `numa`, `health`), got {item!r}")
    try:
        numa = None if item.get("numa") is None else int(item["numa"])
    except (TypeError, ValueError):
        raise ValueError(f"device {item['id']}: `numa` is a NUMA node number, got {item['numa']!r}") from None
    d = api.Device(ID=str(item["id"]), health=str(item.get("health", api.HEALTHY)))
    if numa is not None:
        d.topology.nodes.add(ID=numa)
    return d


class ReferencePlugin:
    """The DevicePlugin servicer (methods named as the rpcs) and its registration loop."""

    def __init__(self, spec: dict, directory: Path, spec_file: Path | None = None):
        self.directory = Path(directory)
        self.spec_file = spec_file
        self.changed = threading.Condition()
        self.generation = 0
        self.stopping = False
        self.server: grpc.Server | None = None
        self.registered_inode: tuple[int, int] | None = None
        self.last_error = ""
        self._apply(spec)

    def _apply(self, spec: dict) -> None:
        with self.changed:
            self.spec = spec
            self.resource = str(spec["resource"])
            self.endpoint = str(spec.get("socket") or self.resource.split("/")[-1] + ".sock")
            self.devices = [_device(d) for d in spec.get("devices") or []]
            self.generation += 1
            self.changed.notify_all()

    # -- DevicePlugin service -----------------------------------------------------------------------
    def GetDevicePluginOptions(self, request, context):
        return api.DevicePluginOptions(pre_start_required=bool(self.spec.get("pre_start")),
                                       get_preferred_allocation_available=bool(self.spec.get("preferred")))

    def ListAndWatch(self, request, context):
        seen = -1
        while context.is_active() and not self.stopping:
            with self.changed:
                if seen == self.generation:
                    self.changed.wait(timeout=0.5)
                    continue
                seen = self.generation
                message = api.ListAndWatchResponse(devices=self.devices)
            yield message

    def GetPreferredAllocation(self, request, context):
        numa = {d.ID: (d.topology.nodes[0].ID if d.topology.nodes else -1) for d in self.devices}
        answers = []
        for creq in request.container_requests:
            chosen = list(creq.must_include_deviceIDs)
            rest = [i for i in creq.available_deviceIDs if i not in chosen]
            # the NUMA nodes of what must be included first, then the node with most devices left
            by_node: dict[int, list[str]] = {}
            for dev_id in rest:
                by_node.setdefault(numa.get(dev_id, -1), []).append(dev_id)
            first = {numa.get(i, -1) for i in chosen}
            order = sorted(by_node, key=lambda n: (n not in first, -len(by_node[n]), n))
            for node in order:
                for dev_id in sorted(by_node[node]):
                    if len(chosen) < creq.allocation_size:
                        chosen.append(dev_id)
            answers.append(api.ContainerPreferredAllocationResponse(deviceIDs=chosen))
        return api.PreferredAllocationResponse(container_responses=answers)

    def Allocate(self, request, context):
        template = self.spec.get("allocate") or {}
        known = {d.ID for d in self.devices}
        out = []
        for creq in request.container_requests:
            unknown = [i for i in creq.devices_ids if i not in known]
            if unknown:
                context.abort(grpc.StatusCode.UNKNOWN, f"unknown device IDs {unknown}")
            ids = ",".join(creq.devices_ids)
            fill = (lambda text: str(text).replace("{ids}", ids))
            resp = api.ContainerAllocateResponse()
            for key, value in (template.get("envs") or {}).items():
                resp.envs[key] = fill(value)
            for m in template.get("mounts") or []:
                resp.mounts.add(container_path=fill(m["container_path"]), host_path=fill(m["host_path"]),
                                read_only=bool(m.get("read_only")))
            for d in template.get("devices") or []:
                resp.devices.add(container_path=fill(d["container_path"]), host_path=fill(d["host_path"]),
                                 permissions=str(d.get("permissions", "rw")))
            for key, value in (template.get("annotations") or {}).items():
                resp.annotations[key] = fill(value)
            out.append(resp)
        return api.AllocateResponse(container_responses=out)

    def PreStartContainer(self, request, context):
        return api.PreStartContainerResponse()

    # -- serving and registering --------------------------------------------------------------------
    @property
    def socket_path(self) -> Path:
        return self.directory / self.endpoint

    def start(self) -> None:
        """Serve on our socket (a stale one removed first), then Register."""
        if self.server is not None:
            # wait until it has stopped: gRPC unlinks a unix listener's path as it shuts down, and
            # a shutdown still going on would unlink the socket served anew below
            self.server.stop(0).wait()
        self.socket_path.unlink(missing_ok=True)
        self.server = api.serve_plugin(self, str(self.socket_path))
        kubelet = self.directory / api.KUBELET_SOCKET
        inode = _identity(kubelet)
        options = self.GetDevicePluginOptions(None, None)
        api.register(str(kubelet), self.endpoint, self.resource, options)
        self.registered_inode = inode

    def step(self) -> None:
        """One turn of the watch loop: reload a changed spec; register again when kubelet.sock is new."""
        if self.spec_file is not None:
            try:
                mtime = self.spec_file.stat().st_mtime_ns
                if mtime != getattr(self, "_mtime", None):
                    if getattr(self, "_mtime", None) is not None:
                        self._apply(load_spec(self.spec_file))
                    self._mtime = mtime
            except (OSError, ValueError) as exc:
                self.last_error = str(exc)
        try:
            inode = _identity(self.directory / api.KUBELET_SOCKET)
        except FileNotFoundError:
            return
        if inode != self.registered_inode:
            try:
                self.start()
                self.last_error = ""
            except (grpc.RpcError, OSError) as exc:
                self.last_error = exc.details() if isinstance(exc, grpc.RpcError) else str(exc)

    def run(self, until=lambda: False) -> None:
        while not until() and not self.stopping:
            self.step()
            time.sleep(POLL)

    def stop(self) -> None:
        self.stopping = True
        with self.changed:
            self.changed.notify_all()
        if self.server is not None:
            self.server.stop(0).wait()
            self.server = None
        self.socket_path.unlink(missing_ok=True)
