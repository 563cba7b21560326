"""The Pod subresources kube-apiserver serves by proxying to the node's kubelet: `pods/log`
(GET), `pods/exec` and `pods/attach` (POST for SPDY, GET for WebSocket), `pods/portforward`.

kube-apiserver v1.34.1 answers them in this order (pkg/registry/core/pod/rest/log.go
`LogREST.Get`, subresources.go `ExecREST.Connect` ...; pkg/registry/core/pod/strategy.go
`LogLocation`, `streamLocation`, `validateContainer`; pkg/kubelet/client/kubelet_client.go
`NodeConnectionInfoGetter.GetConnectionInfo`):

1. the log options are validated (`ValidatePodLogOptions`): 422 on PodLogOptions;
2. the Pod is read: 404 `pods "x" not found`;
3. the container is chosen: the only one when none is named, else 400 `a container name must be
   specified for pod x, choose one of: [a b]`; a named one must exist (init and ephemeral
   containers count): 400 `container c is not valid for pod x`;
4. a Pod without spec.nodeName: a log is empty (LocationStreamer without a location: 204 No
   Content), exec/attach/portforward get 400 `pod x does not have a host assigned`;
5. the Node is read (404 `nodes "n" not found`) and its address picked in the order of
   `--kubelet-preferred-address-types` (kubeadm sets InternalIP,ExternalIP,Hostname:
   cmd/kubeadm/app/phases/controlplane/manifests.go), else 500 `no preferred addresses found;
   known addresses: [...]` (pkg/util/node GetPreferredNodeAddress); the port is the Node's
   status.daemonEndpoints.kubeletEndpoint.Port, or 10250;
6. the kubelet is dialled. labkit runs no kubelet, so the dial really is made, to the address and
   port the Node publishes, and its failure is answered as kube-apiserver answers it: an error
   that is no Status becomes a 500 whose message is the error's text (apiserver
   endpoints/handlers/responsewriters/status.go `ErrorToAPIStatus`) — for a log the http
   client's `Get "https://host:port/containerLogs/ns/pod/c": dial tcp host:port: connect:
   connection refused` (genericrest.LocationStreamer.InputStream), for exec, attach and
   port-forward the upgrade-aware proxy's `error dialing backend: dial tcp ...`
   (apimachinery util/proxy/upgradeaware.go `dial`).

A lab that runs a real process for a Pod's container names its output file in the API server's
state directory (`container-logs.json`, see `register_container_log`); the answer then carries a
warning that points there.
"""

from __future__ import annotations

import errno
import json
import socket
from pathlib import Path
from typing import Callable
from urllib.parse import quote, urlencode

from labkit.apiserver.errors import ApiError, FieldError, bad_request, field_invalid, invalid

CONNECT_SUBRESOURCES = ("log", "exec", "attach", "portforward")
DEFAULT_KUBELET_PORT = 10250                       # pkg/cluster/ports KubeletPort
PREFERRED_ADDRESS_TYPES = ("InternalIP", "ExternalIP", "Hostname")
DIAL_TIMEOUT = 5.0                                 # kube-apiserver's KubeletClientConfig HTTPTimeout
CONTAINER_LOGS_FILE = "container-logs.json"

# Go's syscall.Errno texts for the failures a TCP connect meets (net.OpError "dial tcp A: connect: E")
_ERRNO_TEXT = {errno.ECONNREFUSED: "connection refused", errno.ENETUNREACH: "network is unreachable",
               errno.EHOSTUNREACH: "no route to host", errno.EADDRNOTAVAIL: "cannot assign requested address",
               errno.ECONNRESET: "connection reset by peer", errno.ETIMEDOUT: "connection timed out"}


def dial(host: str, port: int, timeout: float = DIAL_TIMEOUT) -> str | None:
    """Connect to host:port as Go's net.Dial("tcp", ...) would: None when it connects, else the
    text of Go's error."""
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror:
        return f"dial tcp: lookup {host}: no such host"
    try:
        with socket.create_connection(infos[0][4][:2], timeout=timeout):
            return None
    except socket.timeout:
        return f"dial tcp {address}: i/o timeout"
    except OSError as exc:
        text = _ERRNO_TEXT.get(exc.errno or 0, (exc.strerror or str(exc)).lower())
        return f"dial tcp {address}: connect: {text}"


def _containers(spec: dict) -> list[str]:
    """podutil.VisitContainers with every feature on: init, regular, then ephemeral containers."""
    names = []
    for key in ("initContainers", "containers", "ephemeralContainers"):
        names += [str(c.get("name", "")) for c in spec.get(key) or [] if isinstance(c, dict)]
    return names


def choose_container(pod: dict, container: str) -> str:
    """strategy.go validateContainer."""
    name = pod["metadata"]["name"]
    spec = pod.get("spec") or {}
    if not container:
        regular = [c for c in spec.get("containers") or [] if isinstance(c, dict)]
        if len(regular) == 1:
            return str(regular[0].get("name", ""))
        if not regular:
            raise bad_request(f"a container name must be specified for pod {name}")
        raise bad_request(f"a container name must be specified for pod {name}, "
                          f"choose one of: [{' '.join(_containers(spec))}]")
    if container not in _containers(spec):
        raise bad_request(f"container {container} is not valid for pod {name}")
    return container


def _go_addresses(addresses: list) -> str:
    """Go's %v of a []NodeAddress: `[{InternalIP 1.2.3.4} {Hostname n}]`."""
    return "[" + " ".join(f"{{{a.get('type', '')} {a.get('address', '')}}}" for a in addresses
                          if isinstance(a, dict)) + "]"


def kubelet_location(node: dict) -> tuple[str, int]:
    """GetConnectionInfo: the Node's preferred address and its kubelet port."""
    status = node.get("status") or {}
    addresses = [a for a in status.get("addresses") or [] if isinstance(a, dict)]
    for kind in PREFERRED_ADDRESS_TYPES:
        for address in addresses:
            if address.get("type") == kind and address.get("address"):
                return str(address["address"]), _port(status)
    raise ApiError(500, "", f"no preferred addresses found; known addresses: {_go_addresses(addresses)}")


def _port(status: dict) -> int:
    port = ((status.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}).get("Port")
    return port if isinstance(port, int) and port > 0 else DEFAULT_KUBELET_PORT


def _int_option(query: dict, key: str) -> int | None:
    if key not in query or query[key] == "":
        return None
    try:
        return int(query[key])
    except ValueError:
        raise bad_request(f"strconv.ParseInt: parsing {json.dumps(query[key])}: invalid syntax")


def _true(query: dict, key: str) -> bool:
    return str(query.get(key, "")).lower() in ("true", "1")


def log_query(query: dict, name: str) -> str:
    """ValidatePodLogOptions, then the query LogLocation sends to the kubelet (url.Values.Encode:
    keys sorted)."""
    tail, limit, since = _int_option(query, "tailLines"), _int_option(query, "limitBytes"), \
        _int_option(query, "sinceSeconds")
    errors: list[FieldError] = []
    if tail is not None and tail < 0:
        errors.append(field_invalid("tailLines", tail, "must be greater than or equal to 0"))
    if limit is not None and limit < 1:
        errors.append(field_invalid("limitBytes", limit, "must be greater than 0"))
    if since is not None and query.get("sinceTime"):
        errors.append(FieldError("Forbidden", "", "at most one of `sinceTime` or `sinceSeconds` may be specified"))
    elif since is not None and since < 1:
        errors.append(field_invalid("sinceSeconds", since, "must be greater than 0"))
    if errors:
        raise invalid("PodLogOptions", "", name, errors)
    params = {}
    for key in ("follow", "previous", "timestamps"):
        if _true(query, key):
            params[key] = "true"
    for key, value in (("limitBytes", limit), ("sinceSeconds", since), ("tailLines", tail)):
        if value is not None:
            params[key] = str(value)
    if query.get("sinceTime"):
        params["sinceTime"] = query["sinceTime"]
    return urlencode(sorted(params.items()))


def connect(name: str, get_pod: Callable[[], dict], get_node: Callable[[str], dict], subresource: str, query: dict,
            dialer: Callable[[str, int], str | None] = dial,
            log_file: Callable[[dict, str], str | None] = lambda pod, container: None) -> None:
    """Answer a connect subresource as kube-apiserver does when it cannot reach the kubelet:
    raises the ApiError kube-apiserver would answer; returns None for a log of a Pod without a
    node (204, an empty log)."""
    # what exec, attach and port-forward forward to the kubelet is not in their error's text
    path_query = log_query(query, name) if subresource == "log" else ""
    pod = get_pod()
    name = pod["metadata"]["name"]
    container = "" if subresource == "portforward" else choose_container(pod, query.get("container", ""))
    node_name = (pod.get("spec") or {}).get("nodeName") or ""
    if not node_name:
        if subresource == "log":
            return None
        raise bad_request(f"pod {name} does not have a host assigned")
    host, port = kubelet_location(get_node(node_name))
    hostport = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    ns = pod["metadata"].get("namespace", "")
    if subresource == "portforward":
        path = f"/portForward/{quote(ns)}/{quote(name)}"
    else:
        path = f"/{'containerLogs' if subresource == 'log' else subresource}/{quote(ns)}/{quote(name)}/{quote(container)}"
    url = f"https://{hostport}{path}" + (f"?{path_query}" if path_query else "")
    failure = dialer(host, port)
    if failure is None:
        error = ApiError(503, "ServiceUnavailable", f"the kubelet at {hostport} answered the dial, "
                         "but this API server does not proxy to kubelets")
    elif subresource == "log":
        error = ApiError(500, "", f'Get "{url}": {failure}')
    else:
        error = ApiError(500, "", f"error dialing backend: {failure}")
    path_of_log = log_file(pod, container) if container else None
    if path_of_log:
        error.warnings.append(f"labkit runs no kubelet for node {node_name!r}: the process that stands for "
                              f"container {container!r} of this Pod writes its output to {path_of_log}")
    else:
        error.warnings.append(f"labkit runs no kubelet for node {node_name!r}: the containers of this "
                              "Pod are not run, so there is no output to read and nothing to exec into")
    raise error


def register_container_log(state_dir: str | Path, namespace: str, labels: dict, container: str,
                           path: str | Path) -> None:
    """Record, for the API server of `state_dir`, that the Pods in `namespace` with `labels` have
    their container `container` stood for by a process whose output is in `path`."""
    target = Path(state_dir) / CONTAINER_LOGS_FILE
    entries = json.loads(target.read_text()) if target.exists() else []
    entry = {"namespace": namespace, "labels": dict(labels), "container": container, "path": str(path)}
    if entry not in entries:
        entries.append(entry)
    target.write_text(json.dumps(entries, indent=1) + "\n")


def container_log_finder(state_dir: str | Path) -> Callable[[dict, str], str | None]:
    """The file a lab registered for a Pod's container (register_container_log), or None."""
    target = Path(state_dir) / CONTAINER_LOGS_FILE

    def find(pod: dict, container: str) -> str | None:
        try:
            entries = json.loads(target.read_text())
        except (OSError, ValueError):
            return None
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        for entry in entries:
            if entry.get("namespace") == meta.get("namespace") and entry.get("container") == container and \
                    all(labels.get(k) == v for k, v in (entry.get("labels") or {}).items()):
                return entry.get("path")
        return None
    return find
