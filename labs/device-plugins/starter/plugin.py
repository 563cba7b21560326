"""A device plugin for example.com/widget — yours to write (see the exercise's prompt).

Run against a fresh kubelet:  labkit devices try THIS_FILE
Environment it is started with:
  DEVICE_PLUGIN_DIR   kubelet's device-plugins directory: kubelet.sock is there, your socket goes there
  DEVICE_HEALTH_FILE  YAML: device ID -> Healthy | Unhealthy (a device not named is healthy)

labkit.devices.api has the v1beta1 messages (api.Device, api.ListAndWatchResponse, ...) with the
field names of kubelet's api.proto, and:
  api.serve_plugin(servicer, socket_path)   a grpc server for the DevicePlugin service: the
                                           servicer's methods are named as the rpcs and take
                                           (request, context)
  api.register(kubelet_socket, endpoint, resource, options)   the Register call
"""

import os
import time
from pathlib import Path

from labkit.devices import api

RESOURCE = "example.com/widget"
SOCKET = "widget.sock"
PLUGIN_DIR = Path(os.environ["DEVICE_PLUGIN_DIR"])


class Widgets:
    def GetDevicePluginOptions(self, request, context):
        return api.DevicePluginOptions()

    def ListAndWatch(self, request, context):
        # TODO: the devices, and again whenever they change
        yield api.ListAndWatchResponse(devices=[])
        while context.is_active():
            time.sleep(0.5)

    def Allocate(self, request, context):
        return api.AllocateResponse(container_responses=[api.ContainerAllocateResponse()
                                                         for _ in request.container_requests])

    def PreStartContainer(self, request, context):
        return api.PreStartContainerResponse()


def main():
    server = api.serve_plugin(Widgets(), str(PLUGIN_DIR / SOCKET))
    # TODO: register with kubelet, then keep serving (and watch for what your exercise asks)
    server.stop(0)
    raise SystemExit("not written yet: the plugin does not register")


if __name__ == "__main__":
    main()
