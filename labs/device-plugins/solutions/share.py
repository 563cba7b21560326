"""Reference solution: the vcore plugin — each widget advertised as four vcores of
example.com/vcore, GetPreferredAllocation packing a request onto one widget best fit (tkestack
gpu-manager's share mode, pkg/algorithm/nvidia/share.go), Allocate naming the widgets behind the
IDs it is given — written to plugins/share.py."""

MODEL = '''\
"""Widgets shared four ways: example.com/vcore, four vcores per widget (device plugin API v1beta1)."""

import os
import time
from pathlib import Path

from labkit.devices import api

RESOURCE = "example.com/vcore"
SOCKET = "vcore.sock"
WIDGETS = {"widget-0": 0, "widget-1": 0, "widget-2": 1, "widget-3": 1}     # widget -> NUMA node
VCORES = {f"{widget}-vcore-{k}": widget for widget in WIDGETS for k in range(4)}     # vcore ID -> widget
PLUGIN_DIR = Path(os.environ["DEVICE_PLUGIN_DIR"])
OPTIONS = api.DevicePluginOptions(get_preferred_allocation_available=True)


class Vcores:
    def GetDevicePluginOptions(self, request, context):
        return OPTIONS

    def ListAndWatch(self, request, context):
        yield api.ListAndWatchResponse(devices=[
            api.Device(ID=vcore, health=api.HEALTHY, topology=api.TopologyInfo(nodes=[api.NUMANode(ID=WIDGETS[widget])]))
            for vcore, widget in VCORES.items()])
        while context.is_active():
            time.sleep(0.5)

    def GetPreferredAllocation(self, request, context):
        answers = []
        for req in request.container_requests:
            must = list(req.must_include_deviceIDs)
            per_widget = {}
            for vcore in req.available_deviceIDs:
                per_widget.setdefault(VCORES.get(vcore), []).append(vcore)
            homes = {VCORES.get(vcore) for vcore in must}
            fits = [w for w, free in per_widget.items()
                    if len(free) >= req.allocation_size and (not homes or homes == {w})]
            if fits:
                # best fit: of the widgets that hold the whole request, the one with the fewest free vcores
                pool = per_widget[min(fits, key=lambda w: (len(per_widget[w]), str(w)))]
            else:
                pool = req.available_deviceIDs
            chosen = must + [vcore for vcore in sorted(pool) if vcore not in must]
            answers.append(api.ContainerPreferredAllocationResponse(deviceIDs=chosen[:req.allocation_size]))
        return api.PreferredAllocationResponse(container_responses=answers)

    def Allocate(self, request, context):
        # devices_ids is all kubelet says: no Pod, no preference. The widgets are the IDs' own.
        return api.AllocateResponse(container_responses=[
            api.ContainerAllocateResponse(envs={
                "WIDGET_VISIBLE_DEVICES": ",".join(sorted({VCORES.get(v, v) for v in req.devices_ids}))})
            for req in request.container_requests])

    def PreStartContainer(self, request, context):
        return api.PreStartContainerResponse()


def main():
    (PLUGIN_DIR / SOCKET).unlink(missing_ok=True)
    server = api.serve_plugin(Vcores(), str(PLUGIN_DIR / SOCKET))    # serve first: kubelet dials back
    api.register(str(PLUGIN_DIR / api.KUBELET_SOCKET), SOCKET, RESOURCE, OPTIONS)
    server.wait_for_termination()


if __name__ == "__main__":
    main()
'''


def solve(env):
    env.lab.environment_module().write_plugin(env, "share", MODEL)
