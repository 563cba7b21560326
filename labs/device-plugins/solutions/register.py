"""Reference solution: the widget plugin. MODEL is complete — devices with their NUMA nodes,
health from the health file, GetPreferredAllocation on one NUMA node, Allocate's env and mount,
re-registration after a kubelet restart — so every exercise's solution writes it to that
exercise's file (the mistakes change one part of it)."""

MODEL = '''\
"""The widget device plugin: four widgets on two NUMA nodes (device plugin API v1beta1)."""

import os
import time
from pathlib import Path

import grpc
import yaml

from labkit.devices import api

RESOURCE = "example.com/widget"
SOCKET = "widget.sock"
DEVICES = {"widget-0": 0, "widget-1": 0, "widget-2": 1, "widget-3": 1}     # ID -> NUMA node
DRIVER = Path(__file__).resolve().parent.parent / "widget-driver"
PLUGIN_DIR = Path(os.environ["DEVICE_PLUGIN_DIR"])
HEALTH_FILE = Path(os.environ["DEVICE_HEALTH_FILE"])
OPTIONS = api.DevicePluginOptions(get_preferred_allocation_available=True)


def health():
    """Every device's health as the health file says (a device it does not name is healthy)."""
    try:
        given = yaml.safe_load(HEALTH_FILE.read_text()) or {}
    except (OSError, yaml.YAMLError):
        given = {}
    return {dev: given.get(dev, api.HEALTHY) for dev in DEVICES}


def device_list(now):
    return api.ListAndWatchResponse(devices=[
        api.Device(ID=dev, health=now[dev], topology=api.TopologyInfo(nodes=[api.NUMANode(ID=node)]))
        for dev, node in DEVICES.items()])


class Widgets:
    def GetDevicePluginOptions(self, request, context):
        return OPTIONS

    def ListAndWatch(self, request, context):
        last = None
        while context.is_active():
            now = health()
            if now != last:
                last = now
                yield device_list(now)
            time.sleep(0.1)

    def GetPreferredAllocation(self, request, context):
        answers = []
        for req in request.container_requests:
            chosen = list(req.must_include_deviceIDs)
            near = {DEVICES.get(dev) for dev in chosen}
            per_node = {}
            for dev in req.available_deviceIDs:
                if dev not in chosen:
                    per_node.setdefault(DEVICES.get(dev), []).append(dev)
            # the NUMA nodes of the must-include devices first, then the node with most available
            for node in sorted(per_node, key=lambda n: (n not in near, -len(per_node[n]), str(n))):
                for dev in sorted(per_node[node]):
                    if len(chosen) < req.allocation_size:
                        chosen.append(dev)
            answers.append(api.ContainerPreferredAllocationResponse(deviceIDs=chosen))
        return api.PreferredAllocationResponse(container_responses=answers)

    def Allocate(self, request, context):
        return api.AllocateResponse(container_responses=[
            api.ContainerAllocateResponse(
                envs={"WIDGET_VISIBLE_DEVICES": ",".join(req.devices_ids)},
                mounts=[api.Mount(container_path="/var/lib/widget", host_path=str(DRIVER), read_only=True)])
            for req in request.container_requests])

    def PreStartContainer(self, request, context):
        return api.PreStartContainerResponse()


def kubelet_socket():
    """Which kubelet.sock is there now (None: none): a new one may reuse the inode, not the ctime."""
    try:
        st = os.stat(PLUGIN_DIR / api.KUBELET_SOCKET)
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_ctime_ns


def serve_and_register():
    """Serve first: kubelet dials the plugin back before it answers Register."""
    (PLUGIN_DIR / SOCKET).unlink(missing_ok=True)
    server = api.serve_plugin(Widgets(), str(PLUGIN_DIR / SOCKET))
    api.register(str(PLUGIN_DIR / api.KUBELET_SOCKET), SOCKET, RESOURCE, OPTIONS)
    return server


def main():
    registered_with = kubelet_socket()
    server = serve_and_register()
    while True:
        now = kubelet_socket()
        if now is not None and now != registered_with:
            # kubelet restarted: it removed our socket too; serve anew, register again.
            # wait for the old server to stop: gRPC removes its socket file as it shuts down
            server.stop(0).wait()
            try:
                server = serve_and_register()
                registered_with = now
            except grpc.RpcError as exc:
                print("registration failed:", exc.details(), flush=True)
        time.sleep(0.05)     # a stat of kubelet.sock: cheap; a restart is answered within 0.05 s


if __name__ == "__main__":
    main()
'''


def solve(env):
    env.lab.environment_module().write_plugin(env, "register", MODEL)
