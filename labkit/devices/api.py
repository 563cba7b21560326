"""The device plugin API `v1beta1` (k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1, api.proto and
constants.go at v1.34.1) as protobuf message classes and gRPC method tables, for both sides:
kubelet's (labkit.devices.kubelet) and a plugin's (labkit.devices.plugin, students' plugins).

The schema is written here as a protobuf FileDescriptorProto built in Python (descriptor_pb2) and
turned into message classes by the protobuf runtime: no protoc step at build time, no generated
files in the tree, and the message names, field names, numbers and types are exactly api.proto's,
so any real plugin or kubelet reads what these classes write. The services are served and called
through grpcio's generic handlers and `channel.unary_unary/unary_stream` with these classes'
(de)serializers, under the full method names `/v1beta1.Registration/Register` and
`/v1beta1.DevicePlugin/<Method>`.

A plugin written against this module:

    from labkit.devices import api
    api.Device(ID="dev-0", health=api.HEALTHY)
    api.serve_plugin(servicer, socket_path)   # servicer: methods named as the DevicePlugin rpcs
"""

from __future__ import annotations

from concurrent import futures

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

VERSION = "v1beta1"                                   # constants.go Version
HEALTHY, UNHEALTHY = "Healthy", "Unhealthy"           # constants.go Healthy / Unhealthy
KUBELET_SOCKET = "kubelet.sock"                       # constants.go KubeletSocket (file name)
PRE_START_TIMEOUT = 30                                # KubeletPreStartContainerRPCTimeoutInSecs
DIAL_TIMEOUT = 10                                     # plugin/v1beta1/client.go dial: 10 s

_F = descriptor_pb2.FieldDescriptorProto
_STRING, _BOOL, _INT64, _INT32, _MESSAGE = _F.TYPE_STRING, _F.TYPE_BOOL, _F.TYPE_INT64, _F.TYPE_INT32, _F.TYPE_MESSAGE
_ONE, _MANY = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED

# message -> [(field name, number, type, label, message type)] — api.proto, field for field
_MESSAGES = {
    "DevicePluginOptions": [("pre_start_required", 1, _BOOL, _ONE, None),
                            ("get_preferred_allocation_available", 2, _BOOL, _ONE, None)],
    "RegisterRequest": [("version", 1, _STRING, _ONE, None), ("endpoint", 2, _STRING, _ONE, None),
                        ("resource_name", 3, _STRING, _ONE, None),
                        ("options", 4, _MESSAGE, _ONE, "DevicePluginOptions")],
    "Empty": [],
    "ListAndWatchResponse": [("devices", 1, _MESSAGE, _MANY, "Device")],
    "TopologyInfo": [("nodes", 1, _MESSAGE, _MANY, "NUMANode")],
    "NUMANode": [("ID", 1, _INT64, _ONE, None)],
    "Device": [("ID", 1, _STRING, _ONE, None), ("health", 2, _STRING, _ONE, None),
               ("topology", 3, _MESSAGE, _ONE, "TopologyInfo")],
    "PreStartContainerRequest": [("devices_ids", 1, _STRING, _MANY, None)],
    "PreStartContainerResponse": [],
    "PreferredAllocationRequest": [("container_requests", 1, _MESSAGE, _MANY, "ContainerPreferredAllocationRequest")],
    "ContainerPreferredAllocationRequest": [("available_deviceIDs", 1, _STRING, _MANY, None),
                                            ("must_include_deviceIDs", 2, _STRING, _MANY, None),
                                            ("allocation_size", 3, _INT32, _ONE, None)],
    "PreferredAllocationResponse": [("container_responses", 1, _MESSAGE, _MANY, "ContainerPreferredAllocationResponse")],
    "ContainerPreferredAllocationResponse": [("deviceIDs", 1, _STRING, _MANY, None)],
    "AllocateRequest": [("container_requests", 1, _MESSAGE, _MANY, "ContainerAllocateRequest")],
    "ContainerAllocateRequest": [("devices_ids", 1, _STRING, _MANY, None)],
    "CDIDevice": [("name", 1, _STRING, _ONE, None)],
    "AllocateResponse": [("container_responses", 1, _MESSAGE, _MANY, "ContainerAllocateResponse")],
    "ContainerAllocateResponse": [("envs", 1, _MESSAGE, _MANY, "ContainerAllocateResponse.EnvsEntry"),
                                  ("mounts", 2, _MESSAGE, _MANY, "Mount"),
                                  ("devices", 3, _MESSAGE, _MANY, "DeviceSpec"),
                                  ("annotations", 4, _MESSAGE, _MANY, "ContainerAllocateResponse.AnnotationsEntry"),
                                  ("cdi_devices", 5, _MESSAGE, _MANY, "CDIDevice")],
    "Mount": [("container_path", 1, _STRING, _ONE, None), ("host_path", 2, _STRING, _ONE, None),
              ("read_only", 3, _BOOL, _ONE, None)],
    "DeviceSpec": [("container_path", 1, _STRING, _ONE, None), ("host_path", 2, _STRING, _ONE, None),
                   ("permissions", 3, _STRING, _ONE, None)],
}
_MAPS = {"ContainerAllocateResponse": ["EnvsEntry", "AnnotationsEntry"]}     # map<string, string>

# service -> [(method, request, response, server-streaming)]
SERVICES = {
    "Registration": [("Register", "RegisterRequest", "Empty", False)],
    "DevicePlugin": [("GetDevicePluginOptions", "Empty", "DevicePluginOptions", False),
                     ("ListAndWatch", "Empty", "ListAndWatchResponse", True),
                     ("GetPreferredAllocation", "PreferredAllocationRequest", "PreferredAllocationResponse", False),
                     ("Allocate", "AllocateRequest", "AllocateResponse", False),
                     ("PreStartContainer", "PreStartContainerRequest", "PreStartContainerResponse", False)],
}


def _field(name, number, kind, label, type_name):
    f = _F(name=name, number=number, type=kind, label=label)
    if type_name:
        f.type_name = f".v1beta1.{type_name}"
    return f


def file_descriptor() -> descriptor_pb2.FileDescriptorProto:
    """api.proto as a FileDescriptorProto (proto3, package v1beta1)."""
    fd = descriptor_pb2.FileDescriptorProto(name="labkit/devices/deviceplugin_v1beta1.proto", package="v1beta1",
                                            syntax="proto3")
    for name, fields in _MESSAGES.items():
        msg = fd.message_type.add(name=name)
        for entry in _MAPS.get(name, []):
            nested = msg.nested_type.add(name=entry)
            nested.field.extend([_field("key", 1, _STRING, _ONE, None), _field("value", 2, _STRING, _ONE, None)])
            nested.options.map_entry = True
        msg.field.extend([_field(*f) for f in fields])
    for service, methods in SERVICES.items():
        svc = fd.service.add(name=service)
        for method, request, response, streaming in methods:
            svc.method.add(name=method, input_type=f".v1beta1.{request}", output_type=f".v1beta1.{response}",
                           server_streaming=streaming)
    return fd


_POOL = descriptor_pool.DescriptorPool()
_FILE = _POOL.Add(file_descriptor())
_CLASSES = {name: message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"v1beta1.{name}")) for name in _MESSAGES}

DevicePluginOptions = _CLASSES["DevicePluginOptions"]
RegisterRequest = _CLASSES["RegisterRequest"]
Empty = _CLASSES["Empty"]
ListAndWatchResponse = _CLASSES["ListAndWatchResponse"]
TopologyInfo = _CLASSES["TopologyInfo"]
NUMANode = _CLASSES["NUMANode"]
Device = _CLASSES["Device"]
PreStartContainerRequest = _CLASSES["PreStartContainerRequest"]
PreStartContainerResponse = _CLASSES["PreStartContainerResponse"]
PreferredAllocationRequest = _CLASSES["PreferredAllocationRequest"]
ContainerPreferredAllocationRequest = _CLASSES["ContainerPreferredAllocationRequest"]
PreferredAllocationResponse = _CLASSES["PreferredAllocationResponse"]
ContainerPreferredAllocationResponse = _CLASSES["ContainerPreferredAllocationResponse"]
AllocateRequest = _CLASSES["AllocateRequest"]
ContainerAllocateRequest = _CLASSES["ContainerAllocateRequest"]
CDIDevice = _CLASSES["CDIDevice"]
AllocateResponse = _CLASSES["AllocateResponse"]
ContainerAllocateResponse = _CLASSES["ContainerAllocateResponse"]
Mount = _CLASSES["Mount"]
DeviceSpec = _CLASSES["DeviceSpec"]


def message(name: str):
    return _CLASSES[name]


def method_path(service: str, method: str) -> str:
    return f"/v1beta1.{service}/{method}"


def generic_handler(service: str, servicer) -> grpc.GenericRpcHandler:
    """A grpc handler serving `service` from the servicer's methods named as the rpcs (a method the
    servicer lacks answers UNIMPLEMENTED, as a Go server's embedded Unimplemented server does)."""
    handlers = {}
    for method, request, response, streaming in SERVICES[service]:
        if getattr(servicer, method, None) is None:
            continue
        fn = (lambda request, context, name=method: getattr(servicer, name)(request, context))   # looked up per call
        make = grpc.unary_stream_rpc_method_handler if streaming else grpc.unary_unary_rpc_method_handler
        handlers[method] = make(fn, request_deserializer=_CLASSES[request].FromString,
                                response_serializer=_CLASSES[response].SerializeToString)
    return grpc.method_handlers_generic_handler(f"v1beta1.{service}", handlers)


def serve(service: str, servicer, socket_path: str, workers: int = 8) -> grpc.Server:
    """A started grpc server for `service` on the unix socket `socket_path`."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers))
    server.add_generic_rpc_handlers((generic_handler(service, servicer),))
    if server.add_insecure_port(f"unix://{socket_path}") == 0:
        raise OSError(f"cannot listen on {socket_path}")
    server.start()
    return server


def serve_plugin(servicer, socket_path: str) -> grpc.Server:
    return serve("DevicePlugin", servicer, socket_path)


class Stub:
    """Callables for every rpc of `service` on a channel: stub.Allocate(request, timeout=...)."""

    def __init__(self, channel: grpc.Channel, service: str):
        for method, request, response, streaming in SERVICES[service]:
            make = channel.unary_stream if streaming else channel.unary_unary
            setattr(self, method, make(method_path(service, method), request_serializer=_CLASSES[request].SerializeToString,
                                       response_deserializer=_CLASSES[response].FromString))


def unix_channel(socket_path: str) -> grpc.Channel:
    """A channel to a unix socket, authority `localhost` as kubelet's dial sets it. Its connection is
    its own (a local subchannel pool), as each of Go's grpc.Dial is: gRPC Python otherwise shares one
    per address in the process, and a socket served anew at a path whose earlier server went away
    waited out that shared connection's reconnect backoff (a re-registration's dial then ran out)."""
    return grpc.insecure_channel(f"unix://{socket_path}", options=[("grpc.default_authority", "localhost"),
                                                                  ("grpc.use_local_subchannel_pool", 1)])


def register(kubelet_socket: str, endpoint: str, resource: str, options=None, version: str = VERSION,
             timeout: float = 10.0) -> None:
    """A plugin's Register call to kubelet (raises grpc.RpcError with kubelet's message)."""
    with unix_channel(kubelet_socket) as channel:
        Stub(channel, "Registration").Register(
            RegisterRequest(version=version, endpoint=endpoint, resource_name=resource,
                            options=options or DevicePluginOptions()), timeout=timeout)
