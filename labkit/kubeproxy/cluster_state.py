"""The live kube-proxy lab's cluster state: nodes, pods, Services and EndpointSlices.

A scenario file (labs/kube-proxy/scenarios/*.yaml) describes the cluster:

    network:   {lan: CIDR, gateway: IP, serviceCIDR: CIDR, nodePortRange: "30000-32767"}
    hosts:     [{name, addresses: [IP, ...]}]          machines on the LAN outside the cluster
    kubeProxyConfiguration: {...}                      a KubeProxyConfiguration, used on every node
    objects:   [Node, Pod, Service, EndpointSlice ...] Kubernetes objects as kubectl shows them

Nodes give `spec.podCIDR` and an InternalIP in `status.addresses`; pods give `spec.nodeName`,
labels and container ports. labkit then does the work of the API server and the controllers a
real cluster runs, no more:
- pod IPs come from the node's pod CIDR, in order (like the host-local IPAM plugin);
- Services get the API server's defaults and allocations (pkg/apis/core/v1/defaults.go and
  pkg/registry/core/service: clusterIP from the service CIDR, nodePorts from the node-port range,
  protocol TCP, targetPort = port, sessionAffinity None, ClientIP timeout 10800 s, traffic
  policies Cluster), and clusterIP may not change once set;
- EndpointSlices of Services with a selector are written like the EndpointSlice controller
  (pkg/controller/endpointslice): one endpoint per matching pod with its IP, nodeName and
  ready/serving/terminating conditions, named ports resolved against the pod's container ports,
  labels kubernetes.io/service-name and endpointslice.kubernetes.io/managed-by. Slices of
  Services without a selector are whatever the user applies.

The state lives in the lab's state directory as JSON (cluster.json) and changes only through
`apply` (`labkit kube-proxy apply -f FILE`).
"""

from __future__ import annotations

import copy
import ipaddress
import json
import re
import os
import random
from dataclasses import dataclass
from pathlib import Path


from labkit import nodeports
from labkit.apiserver.registry import serviceips
from labkit.errors import ConfigError
from labkit.inputs import load_yaml, load_yaml_all
from labkit.netlab import cluster as netcluster

SERVICE_NAME_LABEL = "kubernetes.io/service-name"
MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by"
CONTROLLER_NAME = "endpointslice-controller.k8s.io"

SERVICE_TYPES = ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName")
PROTOCOLS = ("TCP", "UDP", "SCTP")
STATE_FILE = "cluster.json"
# k8s.io/apimachinery/pkg/util/rand: the alphabet of generated name suffixes
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def _key(obj: dict) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return meta.get("namespace") or "default", meta.get("name", "")


def check_object_shape(obj, source, where: str) -> None:
    """What every object must look like before any field is used: the API server's decoding and
    ObjectMeta validation (staging/src/k8s.io/apimachinery/pkg/api/validation/objectmeta.go) reject
    the rest. Names and namespaces are strings, labels a string-to-string mapping, spec a mapping."""
    if not isinstance(obj, dict):
        _fail(source, where, "expected a Kubernetes object (a mapping)")
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        _fail(source, f"{where}.metadata", "expected a mapping with the object's name")
    for key in ("name", "namespace"):
        if key in meta and not (isinstance(meta[key], str) and meta[key]):
            _fail(source, f"{where}.metadata.{key}", f"expected a non-empty string, got {meta[key]!r}")
    labels = meta.get("labels")
    if labels is not None and not (isinstance(labels, dict)
                                   and all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items())):
        _fail(source, f"{where}.metadata.labels", "expected a mapping of label names to string values")
    if not isinstance(obj.get("kind"), str):
        _fail(source, f"{where}.kind", f"expected the object's kind, got {obj.get('kind')!r}")
    if obj.get("spec") is not None and not isinstance(obj["spec"], dict):
        _fail(source, f"{where}.spec", "expected a mapping")


def _check_pod(pod: dict, source, where: str) -> None:
    containers = (pod.get("spec") or {}).get("containers")
    if not isinstance(containers, list) or not containers:
        _fail(source, f"{where}.spec.containers", "expected a non-empty list of containers")
    for c, container in enumerate(containers):
        if not isinstance(container, dict):
            _fail(source, f"{where}.spec.containers[{c}]", "expected a mapping")
        ports = container.get("ports") or []
        if not isinstance(ports, list):
            _fail(source, f"{where}.spec.containers[{c}].ports", "expected a list of ports")
        for i, port in enumerate(ports):
            pw = f"{where}.spec.containers[{c}].ports[{i}]"
            if not isinstance(port, dict):
                _fail(source, pw, "expected a mapping")
            number = port.get("containerPort")
            if not isinstance(number, int) or isinstance(number, bool) or not 1 <= number <= 65535:
                _fail(source, f"{pw}.containerPort", f"expected a port number 1-65535, got {number!r}")
            if port.get("protocol", "TCP") not in PROTOCOLS:
                _fail(source, f"{pw}.protocol", f"expected one of {', '.join(PROTOCOLS)}, got {port.get('protocol')!r}")
            if not isinstance(port.get("name", ""), str):
                _fail(source, f"{pw}.name", f"expected a string, got {port.get('name')!r}")


def _labels(obj: dict) -> dict:
    return (obj.get("metadata") or {}).get("labels") or {}


@dataclass
class ClusterState:
    network: dict
    hosts: list[dict]
    kube_proxy_configuration: dict
    nodes: list[dict]
    pods: list[dict]
    services: list[dict]
    endpoint_slices: list[dict]

    # -- persistence ----------------------------------------------------------------------------
    @staticmethod
    def path(env) -> Path:
        return Path(env.dir) / STATE_FILE

    @classmethod
    def load(cls, env) -> "ClusterState":
        data = json.loads(cls.path(env).read_text())
        return cls(data["network"], data["hosts"], data["kubeProxyConfiguration"], data["nodes"],
                   data["pods"], data["services"], data["endpointSlices"])

    def save(self, env) -> None:
        path = self.path(env)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps({
            "network": self.network, "hosts": self.hosts, "kubeProxyConfiguration": self.kube_proxy_configuration,
            "nodes": self.nodes, "pods": self.pods, "services": self.services, "endpointSlices": self.endpoint_slices,
        }, indent=1, sort_keys=True))
        os.replace(tmp, path)

    # -- queries --------------------------------------------------------------------------------
    def node_names(self) -> list[str]:
        return [n["metadata"]["name"] for n in self.nodes]

    def node_address(self, name: str) -> str:
        node = next(n for n in self.nodes if n["metadata"]["name"] == name)
        return next(a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP")

    def pod(self, name: str, namespace: str = "default") -> dict | None:
        return next((p for p in self.pods if _key(p) == (namespace, name)), None)

    def service(self, name: str, namespace: str = "default") -> dict | None:
        """A copy of the Service (change it and apply it)."""
        found = next((s for s in self.services if _key(s) == (namespace, name)), None)
        return copy.deepcopy(found)

    def slices_of(self, namespace: str, name: str) -> list[dict]:
        return [s for s in self.endpoint_slices
                if _key(s)[0] == namespace and _labels(s).get(SERVICE_NAME_LABEL) == name]

    def objects(self) -> list[dict]:
        """The Services and EndpointSlices, as kube-proxy's render() takes them (it skips those
        kube-proxy does not watch)."""
        return copy.deepcopy(self.services + self.endpoint_slices)

    def network_layout(self) -> netcluster.ClusterNetwork:
        net = self.network
        lan = netcluster.Lan(cidr=net["lan"], gateway=net["gateway"])
        nodes = [netcluster.Node(n["metadata"]["name"], self.node_address(n["metadata"]["name"]), n["spec"]["podCIDR"])
                 for n in self.nodes]
        pods = [netcluster.Pod(p["metadata"]["name"], p["spec"]["nodeName"], p["status"]["podIP"]) for p in self.pods]
        hosts = [netcluster.Host(h["name"], tuple(h["addresses"])) for h in self.hosts]
        return netcluster.ClusterNetwork(lan, nodes, pods, hosts)

    def pod_ports(self) -> dict[str, list[int]]:
        return {p["metadata"]["name"]: sorted({port["containerPort"] for c in p["spec"]["containers"]
                                               for port in c.get("ports", [])}) for p in self.pods}

    # -- changes --------------------------------------------------------------------------------
    def apply(self, documents: list[dict], source: str) -> list[str]:
        """Create or update Services and EndpointSlices, as `kubectl apply` would; returns one
        line per object, e.g. "service/web configured"."""
        services = {_key(s): s for s in self.services}
        slices = {_key(s): s for s in self.endpoint_slices}
        report = []
        for index, doc in enumerate(documents):
            where = f"documents[{index}]"
            check_object_shape(doc, source, where)
            kind = doc.get("kind")
            if kind == "Service":
                old = services.get(_key(doc))
                new = default_service(doc, old, self._allocator(services, _key(doc)), source, where)
                services[_key(new)] = new
            elif kind == "EndpointSlice":
                old = slices.get(_key(doc))
                new = validate_endpoint_slice(doc, source, where)
                slices[_key(new)] = new
            else:
                raise ConfigError(source, f"{where}.kind",
                                  f"expected Service or EndpointSlice (pods and nodes are fixed by the lab), got {kind!r}")
            verb = "created" if old is None else "unchanged" if old == new else "configured"
            report.append(f"{kind.lower()}/{new['metadata']['name']} {verb}")
        self.services = sorted(services.values(), key=_key)
        self.endpoint_slices = sorted(slices.values(), key=_key)
        self.reconcile_endpoint_slices()
        return report

    def delete(self, refs: list[tuple[str, str, str]]) -> tuple[list[str], list[str]]:
        """Delete Services and EndpointSlices, (kind, namespace, name) each, as `kubectl delete`
        does: (lines like `service "web" deleted`, the NotFound errors of the others). A deleted
        Service's own EndpointSlices go with it (the EndpointSlice controller's, owned by it)."""
        deleted, missing = [], []
        for kind, namespace, name in refs:
            plural = {"Service": "services", "EndpointSlice": "endpointslices"}[kind]
            objects = self.services if kind == "Service" else self.endpoint_slices
            kept = [o for o in objects if _key(o) != (namespace, name)]
            if len(kept) == len(objects):
                missing.append(f'Error from server (NotFound): {plural} "{name}" not found')
                continue
            if kind == "Service":
                self.services = kept
            else:
                self.endpoint_slices = kept
            deleted.append(f'{kind.lower()} "{name}" deleted')
        self.reconcile_endpoint_slices()
        return deleted, missing

    def apply_status(self, documents: list[dict], source: str) -> list[str]:
        """Replace the status of existing Services, like `kubectl replace --subresource status`
        (what a load-balancer controller does to publish status.loadBalancer.ingress)."""
        from labkit.kubeproxy.objects import validate_object

        services = {_key(s): s for s in self.services}
        report = []
        for index, doc in enumerate(documents):
            where = f"documents[{index}]"
            check_object_shape(doc, source, where)
            if doc.get("kind") != "Service":
                raise ConfigError(source, f"{where}.kind", f"only Services have a status here, got {doc.get('kind')!r}")
            stored = services.get(_key(doc))
            if stored is None:
                raise ConfigError(source, f"{where}.metadata.name", f"no Service {_key(doc)[0]}/{_key(doc)[1]} to update")
            candidate = copy.deepcopy(stored)
            candidate["status"] = copy.deepcopy(doc.get("status") or {"loadBalancer": {}})
            validate_object(candidate, str(source))
            verb = "unchanged" if candidate["status"] == stored.get("status") else "configured"
            services[_key(doc)] = candidate
            report.append(f"service/{candidate['metadata']['name']} {verb} (status)")
        self.services = sorted(services.values(), key=_key)
        return report

    def node_port_range(self) -> tuple[int, int]:
        """The API server's --service-node-port-range (network.nodePortRange): (low, high)."""
        return _Allocator.port_range(self.network) or (30000, 32767)

    def _allocator(self, services: dict, own_key) -> "_Allocator":
        others = [s for k, s in services.items() if k != own_key]
        return _Allocator(self.network, others)

    def reconcile_endpoint_slices(self) -> None:
        """The EndpointSlice controller: one slice per selector Service, rewritten from the pods."""
        keep = [s for s in self.endpoint_slices if _labels(s).get(MANAGED_BY_LABEL) != CONTROLLER_NAME]
        managed = {(_key(s)[0], _labels(s).get(SERVICE_NAME_LABEL)): s for s in self.endpoint_slices
                   if _labels(s).get(MANAGED_BY_LABEL) == CONTROLLER_NAME}
        for svc in self.services:
            selector = svc["spec"].get("selector")
            if not selector or svc["spec"].get("type") == "ExternalName":
                continue
            namespace, name = _key(svc)
            old = managed.get((namespace, name))
            slice_name = old["metadata"]["name"] if old else f"{name}-" + "".join(random.choices(_NAME_ALPHABET, k=5))
            keep.append(self._slice_for(svc, slice_name))
        self.endpoint_slices = sorted(keep, key=_key)

    def _slice_for(self, svc: dict, slice_name: str) -> dict:
        namespace, name = _key(svc)
        selector = svc["spec"]["selector"]
        pods = [p for p in self.pods if _key(p)[0] == namespace
                and all(_labels(p).get(k) == v for k, v in selector.items())]
        publish_not_ready = bool(svc["spec"].get("publishNotReadyAddresses"))
        ports, endpoints = None, []
        for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
            resolved = [_resolve_port(sp, pod) for sp in svc["spec"]["ports"]]
            if any(r is None for r in resolved):
                continue   # a named targetPort the pod does not have: the controller leaves it out
            if ports is None:
                ports = [{"name": sp.get("name", ""), "protocol": sp["protocol"], "port": r}
                         for sp, r in zip(svc["spec"]["ports"], resolved)]
            ready = publish_not_ready or _pod_ready(pod)
            endpoints.append({
                "addresses": [pod["status"]["podIP"]],
                "conditions": {"ready": ready, "serving": ready, "terminating": False},
                "nodeName": pod["spec"]["nodeName"],
                "targetRef": {"kind": "Pod", "namespace": namespace, "name": pod["metadata"]["name"]},
            })
        return {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {"name": slice_name, "namespace": namespace,
                         "labels": {SERVICE_NAME_LABEL: name, MANAGED_BY_LABEL: CONTROLLER_NAME}},
            "addressType": "IPv4",
            "endpoints": endpoints,
            "ports": ports or [],
        }


def _pod_ready(pod: dict) -> bool:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return True


def _resolve_port(service_port: dict, pod: dict) -> int | None:
    """FindPort (pkg/api/v1/pod): a numeric targetPort as is; a named one via the container ports."""
    target = service_port.get("targetPort", service_port["port"])
    if isinstance(target, int):
        return target
    for container in pod["spec"]["containers"]:
        for port in container.get("ports", []):
            if port.get("name") == target and port.get("protocol", "TCP") == service_port["protocol"]:
                return port["containerPort"]
    return None


# -- API server: defaults, allocation and validation of Services ---------------------------------


class _Allocator:
    def __init__(self, network: dict, other_services: list[dict]):
        self.service_cidr = ipaddress.ip_network(network["serviceCIDR"])
        low, high = self.port_range(network) or (30000, 32767)
        self.node_ports = range(low, high + 1)
        self.used_ips = {s["spec"].get("clusterIP") for s in other_services}
        self.used_ports = {p.get("nodePort") for s in other_services for p in s["spec"].get("ports", [])}
        self.used_ports |= {s["spec"].get("healthCheckNodePort") for s in other_services}

    @staticmethod
    def port_range(network: dict) -> tuple[int, int] | None:
        match = re.fullmatch(r"(\d{1,5})-(\d{1,5})", str(network.get("nodePortRange", "30000-32767")))
        if not match or not 1 <= int(match[1]) <= int(match[2]) <= 65535:
            return None
        return int(match[1]), int(match[2])

    def cluster_ip(self) -> str:
        """A random free address above the band kept for static IPs (KEP-3070: the first
        min(max(16, size/16), 256) addresses), as the API server's allocator prefers."""
        size = self.service_cidr.num_addresses
        static = min(max(16, size // 16), 256)
        while True:
            ip = str(self.service_cidr.network_address + random.randrange(static, size - 1))
            if ip not in self.used_ips:
                self.used_ips.add(ip)
                return ip

    def node_port(self) -> int:
        """A free port of the node-port range, drawn as the API server draws one (labkit/nodeports.py:
        KEP-3668 keeps the range's first min(max(16, size/32), 128) ports for Services that name
        their nodePort, so one that names none never gets 30080 while the upper part has room)."""
        port = nodeports.draw(self.node_ports.start, self.node_ports.stop - 1, self.used_ports)
        self.used_ports.add(port)
        return port


def _fail(source, field, problem):
    raise ConfigError(source, field, problem)


def in_api_words(error: ConfigError, documents: list[dict]) -> ConfigError:
    """A validation error of a Service of `documents` (its field `documents[i].spec…`) as
    kube-apiserver words it and kubectl prints it: `The Service "web" is invalid:
    spec.ports[0].nodePort: …` (apierrors.NewInvalid with the field path from the object's root,
    staging/src/k8s.io/apimachinery/pkg/api/errors/errors.go). Other errors stay as they are."""
    match = re.fullmatch(r"documents\[(\d+)\]\.((?:spec|metadata)\b.*)", error.field or "")
    if not match or int(match.group(1)) >= len(documents):
        return error
    doc = documents[int(match.group(1))]
    if not isinstance(doc, dict) or doc.get("kind") != "Service":
        return error
    name = (doc.get("metadata") or {}).get("name")
    return ConfigError(error.path, None, f'The Service "{name}" is invalid: {match.group(2)}: {error.problem}')


def _int_or_str(value) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, str) and value != "")


def default_service(doc: dict, old: dict | None, alloc: _Allocator, source: str, where: str) -> dict:
    """The Service as the API server would store it: validated, defaulted, allocated."""
    svc = copy.deepcopy(doc)
    meta = svc.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        _fail(source, f"{where}.metadata.name", "expected the Service's name")
    meta.setdefault("namespace", "default")
    meta.pop("resourceVersion", None)
    spec = svc.get("spec")
    if not isinstance(spec, dict):
        _fail(source, f"{where}.spec", "expected a mapping")
    svc_type = spec.setdefault("type", "ClusterIP")
    if svc_type not in SERVICE_TYPES:
        _fail(source, f"{where}.spec.type", f"expected one of {', '.join(SERVICE_TYPES)}, got {svc_type!r}")
    # Like `kubectl replace` (and apply): the status in the request is ignored. On update the API
    # server keeps the stored status (pkg/registry/core/service/strategy.go, PrepareForUpdate:
    # newService.Status = oldService.Status); a new Service starts with an empty one. A load
    # balancer's address comes in through the status subresource (`apply --subresource status`).
    svc.pop("status", None)
    svc["status"] = copy.deepcopy((old or {}).get("status") or {"loadBalancer": {}})
    if svc_type == "ExternalName":
        return svc
    old_spec = (old or {}).get("spec") or {}
    # the registry's beginCreate / beginUpdate, before anything else: an update keeps the
    # allocated cluster IPs it leaves out (patchAllocatedValues), clusterIPs follows a clusterIP
    # changed alone (normalizeClusterIPs), and a pair that does not match is refused before any
    # allocation (alloc.go initIPFamilyFields: ValidateServiceClusterIPsRelatedFields)
    if old is not None:
        serviceips.patch_allocated_cluster_ips(spec, old_spec)
    serviceips.normalize_cluster_ips(spec, old_spec if old is not None else None)
    for error in serviceips.cluster_ips_match_errors(spec):
        _fail(source, f"{where}.{error.field}", error.body())
    ports = spec.get("ports")
    if not isinstance(ports, list) or not ports:
        _fail(source, f"{where}.spec.ports", "expected a non-empty list of ports")
    old_ports = {(p.get("port"), p.get("protocol")): p for p in (old or {}).get("spec", {}).get("ports", [])}
    seen_names, seen = set(), set()
    by_port, node_port_protocols = {}, set()      # initNodePorts' svcPortToNodePort; validation's nodePorts
    for i, port in enumerate(ports):
        pw = f"{where}.spec.ports[{i}]"
        if not isinstance(port, dict):
            _fail(source, pw, "expected a mapping")
        number = port.get("port")
        if not isinstance(number, int) or isinstance(number, bool) or not 1 <= number <= 65535:
            _fail(source, f"{pw}.port", f"expected a port number 1-65535, got {number!r}")
        port.setdefault("protocol", "TCP")
        if port["protocol"] not in PROTOCOLS:
            _fail(source, f"{pw}.protocol", f"expected one of {', '.join(PROTOCOLS)}, got {port['protocol']!r}")
        if not isinstance(port.get("name", ""), str):
            _fail(source, f"{pw}.name", f"expected a string, got {port.get('name')!r}")
        if len(ports) > 1 and not port.get("name"):
            _fail(source, f"{pw}.name", "a Service with several ports must name each one")
        if port.get("name") in seen_names and port.get("name"):
            _fail(source, f"{pw}.name", f"duplicate port name {port['name']!r}")
        seen_names.add(port.get("name"))
        if (number, port["protocol"]) in seen:
            _fail(source, f"{pw}.port", f"duplicate port {number}/{port['protocol']}")
        seen.add((number, port["protocol"]))
        port.setdefault("targetPort", number)
        if not _int_or_str(port["targetPort"]):
            _fail(source, f"{pw}.targetPort", f"expected a port number or a container port name, got {port['targetPort']!r}")
        if svc_type in ("NodePort", "LoadBalancer"):
            # pkg/registry/core/service/storage/alloc.go, initNodePorts: ports with the same port
            # number share one node port (the first one requested among them, findRequestedNodePort,
            # or one allocated), so port 80/TCP and 80/UDP may both have nodePort 30080; any other
            # node port already taken is refused with portallocator's ErrAllocated. Validation
            # (pkg/apis/core/validation/validation.go, ValidateService) refuses a nodePort given
            # twice only for the same protocol.
            node_port = port.get("nodePort")
            shared = by_port.get(number)
            if node_port is not None and node_port not in alloc.node_ports:
                valid = f"{alloc.node_ports.start}-{alloc.node_ports.stop - 1}"
                if isinstance(node_port, int) and not isinstance(node_port, bool):
                    # the API server's port allocator (pkg/registry/core/service/portallocator, ErrNotInRange)
                    _fail(source, f"{pw}.nodePort", f"Invalid value: {node_port}: provided port is not in the valid "
                                                    f"range. The range of valid ports is {valid}")
                _fail(source, f"{pw}.nodePort", f"expected a port in {valid}, got {node_port!r}")
            if node_port is not None and (node_port, port["protocol"]) in node_port_protocols:
                _fail(source, f"{pw}.nodePort", f"Duplicate value: {node_port}")
            if shared is not None and node_port is None:
                node_port = shared
            elif shared is None and node_port is None:
                node_port = next((p.get("nodePort") for p in ports if isinstance(p, dict)
                                  and p.get("port") == number and p.get("nodePort")), None)
                if node_port is None:
                    previous = old_ports.get((number, port["protocol"]), {}).get("nodePort")
                    node_port = previous if previous and previous not in alloc.used_ports else alloc.node_port()
                    shared = node_port      # allocated here: taken now
            if node_port != shared:
                if node_port in alloc.used_ports:
                    _fail(source, f"{pw}.nodePort", f"Invalid value: {node_port}: provided port is already allocated")
                alloc.used_ports.add(node_port)
            alloc.used_ports.add(node_port)
            by_port.setdefault(number, node_port)
            node_port_protocols.add((node_port, port["protocol"]))
            port["nodePort"] = node_port
        elif "nodePort" in port:
            # pkg/apis/core/validation/validation.go ValidateService (field.Forbidden)
            _fail(source, f"{pw}.nodePort", f"Forbidden: may not be used when `type` is {svc_type!r}")
    old_ip = old_spec.get("clusterIP")
    ip = spec.get("clusterIP") or None
    if old is not None:
        # ValidateServiceUpdate refuses a changed primary IP (pkg/apis/core/validation/validation.go
        # validateUpgradeDowngradeClusterIPs: field.Invalid(spec.clusterIPs[0], the new clusterIPs,
        # "may not change once set"); apimachinery renders the list as JSON)
        for error in serviceips.upgrade_downgrade_errors(spec, old_spec):
            _fail(source, f"{where}.{error.field}", error.body())
    if ip is None:
        ip = alloc.cluster_ip()
    elif ip != "None":
        try:
            parsed = ipaddress.IPv4Address(ip)
        except ValueError:
            _fail(source, f"{where}.spec.clusterIP", f"expected an IPv4 address or None, got {ip!r}")
        if parsed not in alloc.service_cidr:
            _fail(source, f"{where}.spec.clusterIP", f"{ip} is not in the service CIDR {alloc.service_cidr}")
        if ip in alloc.used_ips and ip != old_ip:
            _fail(source, f"{where}.spec.clusterIP", f"{ip} is already allocated to another Service")
    spec["clusterIP"] = ip
    spec["clusterIPs"] = [ip]
    spec.setdefault("ipFamilies", ["IPv4"])
    spec.setdefault("ipFamilyPolicy", "SingleStack")
    # pkg/apis/core/validation/validation.go ValidateService: sessionAffinity is one of two values,
    # and a sessionAffinityConfig next to None is refused (Forbidden), never dropped
    affinity = spec.setdefault("sessionAffinity", "None")
    if affinity not in ("None", "ClientIP"):
        _fail(source, f"{where}.spec.sessionAffinity",
              f'Unsupported value: {json.dumps(affinity)}: supported values: "ClientIP", "None"')
    if affinity == "None" and spec.get("sessionAffinityConfig") is not None:
        _fail(source, f"{where}.spec.sessionAffinityConfig", "Forbidden: must not be set when session affinity is None")
    if affinity == "ClientIP":
        config = spec.get("sessionAffinityConfig") or {}
        if not isinstance(config, dict) or not isinstance(config.get("clientIP") or {}, dict):
            _fail(source, f"{where}.spec.sessionAffinityConfig", "expected a mapping {clientIP: {timeoutSeconds: N}}")
        spec["sessionAffinityConfig"] = config
        config["clientIP"] = config.get("clientIP") or {}
        timeout = config["clientIP"].setdefault("timeoutSeconds", 10800)
        if not isinstance(timeout, int) or not 0 < timeout <= 86400:
            # validateClientIPAffinityConfig (core.MaxClientIPServiceAffinitySeconds = 86400)
            _fail(source, f"{where}.spec.sessionAffinityConfig.clientIP.timeoutSeconds",
                  f"Invalid value: {json.dumps(timeout)}: must be greater than 0 and less than 86400")
    else:
        spec.pop("sessionAffinityConfig", None)
    spec.setdefault("internalTrafficPolicy", "Cluster")
    for policy in ("internalTrafficPolicy", "externalTrafficPolicy"):
        if policy in spec and spec[policy] not in ("Cluster", "Local"):
            _fail(source, f"{where}.spec.{policy}", f"expected Cluster or Local, got {spec[policy]!r}")
    if svc_type in ("NodePort", "LoadBalancer") or spec.get("externalIPs"):
        spec.setdefault("externalTrafficPolicy", "Cluster")
    else:
        spec.pop("externalTrafficPolicy", None)
    selector = spec.get("selector")
    if selector is not None and not (isinstance(selector, dict) and all(isinstance(v, str) for v in selector.values())):
        _fail(source, f"{where}.spec.selector", "expected a mapping of label names to values")
    _health_check_node_port(spec, old, alloc, source, where)
    return svc


def _health_check_node_port(spec: dict, old: dict | None, alloc: "_Allocator", source, where: str) -> None:
    """healthCheckNodePort, as the API server handles it (pkg/api/v1/service/util.go
    NeedsHealthCheck; pkg/registry/core/service/storage/alloc.go allocHealthCheckNodePort and
    updateHealthCheckNodePort; validation.ValidateService): a LoadBalancer Service with
    externalTrafficPolicy Local gets one from the node-port range (or keeps the one it has or
    asks for); a Service that stops needing one loses it; asking for one otherwise is invalid."""
    needs = spec.get("type") == "LoadBalancer" and spec.get("externalTrafficPolicy") == "Local"
    old_spec = (old or {}).get("spec") or {}
    old_port = old_spec.get("healthCheckNodePort") if old_spec.get("type") == "LoadBalancer" \
        and old_spec.get("externalTrafficPolicy") == "Local" else None
    port = spec.get("healthCheckNodePort")
    field = f"{where}.spec.healthCheckNodePort"
    if not needs:
        # strategy.go dropTypeDependentFields wipes the port a Service no longer needs when the update
        # left it as it was; any other is refused (validation.go validateServiceExternalTrafficPolicy)
        if port and port != old_port:
            _fail(source, field, f"Invalid value: {json.dumps(port)}: may only be set when `type` is 'LoadBalancer' "
                                 "and `externalTrafficPolicy` is 'Local'")
        spec.pop("healthCheckNodePort", None)
        return
    if not port:
        port = old_port or alloc.node_port()
    elif old_port and port != old_port:
        # validateServiceExternalTrafficFieldsUpdate
        error = serviceips.health_check_node_port_errors(spec, old_spec)[0]
        _fail(source, field, error.body())
    elif not isinstance(port, int) or isinstance(port, bool) or port not in alloc.node_ports:
        _fail(source, field, f"expected a port in {alloc.node_ports.start}-{alloc.node_ports.stop - 1}, got {port!r}")
    elif port in alloc.used_ports and port != old_port:
        _fail(source, field, f"port {port} is already allocated")
    alloc.used_ports.add(port)
    spec["healthCheckNodePort"] = port


def validate_endpoint_slice(doc: dict, source: str, where: str) -> dict:
    sl = copy.deepcopy(doc)
    meta = sl.get("metadata")
    if not isinstance(meta, dict) or not meta.get("name"):
        _fail(source, f"{where}.metadata.name", "expected the EndpointSlice's name")
    meta.setdefault("namespace", "default")
    if not (meta.get("labels") or {}).get(SERVICE_NAME_LABEL):
        _fail(source, f"{where}.metadata.labels", f"expected the label {SERVICE_NAME_LABEL} naming the Service")
    if sl.get("addressType") not in ("IPv4", "IPv6", "FQDN"):
        _fail(source, f"{where}.addressType", f"expected IPv4, IPv6 or FQDN, got {sl.get('addressType')!r}")
    for i, ep in enumerate(sl.setdefault("endpoints", []) or []):
        if not isinstance(ep, dict) or not isinstance(ep.get("addresses"), list) or not ep["addresses"]:
            _fail(source, f"{where}.endpoints[{i}].addresses", "expected a non-empty list of addresses")
    for i, port in enumerate(sl.setdefault("ports", []) or []):
        if not isinstance(port, dict) or not isinstance(port.get("port"), int):
            _fail(source, f"{where}.ports[{i}].port", "expected a port number")
        port.setdefault("protocol", "TCP")
        port.setdefault("name", "")
    return sl


# -- scenario ----------------------------------------------------------------------------------


def read_documents(path: Path) -> list[dict]:
    """Kubernetes objects from a YAML file: several documents and/or `kind: List` items."""
    docs = load_yaml_all(path)
    out = []
    for i, doc in enumerate(d for d in docs if d is not None):
        if not isinstance(doc, dict):
            raise ConfigError(path, f"documents[{i}]", "expected a Kubernetes object (a mapping)")
        if doc.get("kind") == "List":
            items = doc.get("items") or []
            if not isinstance(items, list):
                raise ConfigError(path, f"documents[{i}].items", "expected a list of objects")
            out.extend(items)
        else:
            out.append(doc)
    return out


def load_scenario(path: Path) -> ClusterState:
    """A fresh cluster from a scenario file: pod IPs assigned, Services defaulted, slices written."""
    raw = load_yaml(path)
    if not isinstance(raw, dict):
        raise ConfigError(path, None, "expected a mapping with network, hosts, kubeProxyConfiguration and objects")
    network = raw.get("network") or {}
    if not isinstance(network, dict):
        raise ConfigError(path, "network", "expected a mapping with lan, gateway and serviceCIDR")
    for key in ("lan", "gateway", "serviceCIDR"):
        if not isinstance(network.get(key), str):
            raise ConfigError(path, f"network.{key}", "expected an address or CIDR string")
    objects = raw.get("objects") or []
    if not isinstance(objects, list) or not all(isinstance(o, dict) for o in objects):
        raise ConfigError(path, "objects", "expected a list of Kubernetes objects")
    nodes, pods, free_ips = [], [], {}
    try:
        ipaddress.ip_network(network["serviceCIDR"])
    except ValueError as exc:
        raise ConfigError(path, "network.serviceCIDR", f"expected a CIDR: {exc}") from None
    if _Allocator.port_range(network) is None:
        raise ConfigError(path, "network.nodePortRange", f"expected LOW-HIGH within 1-65535, got {network.get('nodePortRange')!r}")
    for i, obj in enumerate(objects):
        check_object_shape(obj, path, f"objects[{i}]")
        meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
        if obj.get("kind") == "Node":
            if not meta.get("name") or not isinstance(spec.get("podCIDR"), str):
                raise ConfigError(path, f"objects[{i}]", "a Node needs metadata.name and spec.podCIDR")
            addresses = (obj.get("status") or {}).get("addresses") if isinstance(obj.get("status"), dict) else None
            if not isinstance(addresses, list) or not any(
                    isinstance(a, dict) and a.get("type") == "InternalIP" and isinstance(a.get("address"), str)
                    for a in addresses):
                raise ConfigError(path, f"objects[{i}].status.addresses", "expected an InternalIP address")
            try:
                pod_cidr = ipaddress.ip_network(spec["podCIDR"])
            except ValueError as exc:
                raise ConfigError(path, f"objects[{i}].spec.podCIDR", f"expected a CIDR: {exc}") from None
            if meta["name"] in free_ips:
                raise ConfigError(path, f"objects[{i}].metadata.name", f"duplicate Node {meta['name']!r}")
            nodes.append(obj)
            free_ips[meta["name"]] = pod_cidr.hosts()
            if next(free_ips[meta["name"]], None) is None:   # the first address is the node's, on its pod bridge
                raise ConfigError(path, f"objects[{i}].spec.podCIDR", "expected a range with room for pods")
        elif obj.get("kind") == "Pod":
            if not meta.get("name"):
                raise ConfigError(path, f"objects[{i}].metadata.name", "expected the Pod's name")
            pod = copy.deepcopy(obj)
            pod.setdefault("metadata", {}).setdefault("namespace", "default")
            node = spec.get("nodeName")
            if not isinstance(node, str) or node not in free_ips:
                raise ConfigError(path, f"objects[{i}].spec.nodeName",
                                  f"expected a Node listed before the pod ({', '.join(free_ips) or 'none'}), got {node!r}")
            _check_pod(obj, path, f"objects[{i}]")
            ip = next(free_ips[node], None)
            if ip is None:
                raise ConfigError(path, f"objects[{i}].spec.nodeName", f"no pod address left in {node}'s podCIDR")
            if not isinstance(pod.get("status") or {}, dict):
                raise ConfigError(path, f"objects[{i}].status", "expected a mapping")
            pod["status"] = pod.get("status") or {}
            pod["status"]["podIP"] = str(ip)
            pod["status"].setdefault("phase", "Running")
            pods.append(pod)
    hosts = raw.get("hosts") or []
    if not isinstance(hosts, list):
        raise ConfigError(path, "hosts", "expected a list of hosts")
    for i, host in enumerate(hosts):
        if not isinstance(host, dict) or not isinstance(host.get("name"), str) or not host["name"] \
                or not isinstance(host.get("addresses"), list) or not host["addresses"] \
                or not all(isinstance(a, str) for a in host["addresses"]):
            raise ConfigError(path, f"hosts[{i}]", "expected name (a string) and addresses (a list of strings)")
    if not isinstance(raw.get("kubeProxyConfiguration") or {}, dict):
        raise ConfigError(path, "kubeProxyConfiguration", "expected a mapping")
    names = [*free_ips, *(p["metadata"]["name"] for p in pods), *(h["name"] for h in hosts)]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ConfigError(path, "objects", f"node, pod and host names must differ; used twice: {', '.join(duplicates)}")
    state = ClusterState(network, hosts, raw.get("kubeProxyConfiguration") or {}, nodes, pods, [], [])
    state.apply([o for o in objects if o.get("kind") in ("Service", "EndpointSlice")], str(path))
    return state
