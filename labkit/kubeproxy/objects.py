"""Services and EndpointSlices as kubectl shows them: loading, validation, and kube-proxy's view.

`load_objects` reads YAML text, a path or a list of dicts (multi-document YAML and `kind: List`
both work) and checks the structure the API server would guarantee; a malformed object is a
ConfigError naming the file, the object and the field.

`ServicePortInfo` / `EndpointInfo` and `build_state` are kube-proxy's view of those objects for one
IP family, reconstructed from upstream (kubernetes/kubernetes, Kubernetes v1.34; read at master
after v1.33):
pkg/proxy/servicechangetracker.go (serviceToServiceMap), pkg/proxy/serviceport.go
(newBaseServiceInfo), pkg/api/v1/service/util.go (ExternalPolicyLocal, InternalPolicyLocal,
NeedsHealthCheck), pkg/proxy/endpointschangetracker.go + endpointslicecache.go (which slices and
endpoints count, readiness defaults, de-duplication, ordering) and pkg/proxy/util (family
filtering, IsVIPMode, zero-CIDR source ranges). Objects kube-proxy ignores are skipped with a
warning naming the object (logger "labkit.kubeproxy").
"""

from __future__ import annotations

import copy
import ipaddress
import json
import logging
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable


import yaml

from labkit import yaml_fast
from labkit.errors import ConfigError
from labkit.inputs import load_yaml_all, read_text
import labkit.kubeproxy.chains as chains

log = logging.getLogger("labkit.kubeproxy")

SERVICE_NAME_LABEL = "kubernetes.io/service-name"          # discovery.LabelServiceName
SERVICE_PROXY_NAME_LABEL = "service.kubernetes.io/service-proxy-name"
HEADLESS_LABEL = "service.kubernetes.io/headless"
PROTOCOLS = ("TCP", "UDP", "SCTP")


# -- loading ------------------------------------------------------------------------------------

def load_objects(source, *, origin: str | None = None) -> list[dict]:
    """Services and EndpointSlices from YAML text, a path, a dict or a list of dicts.

    Other kinds are ignored (a manifest may hold Pods or Deployments too). Returns the objects
    (copies of those passed in as dicts), each with metadata.namespace set ("default" when absent).
    Raises ConfigError naming the file, the object and the field for anything the API server
    would have rejected. A file or text that is JSON (`kubectl get -o json`) is read as JSON.
    """
    where, documents, owned = _documents(source, origin)
    objects: list[dict] = []
    for index, doc in enumerate(documents):
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise ConfigError(where, f"document {index + 1}", "expected a Kubernetes object (a mapping)")
        if doc.get("kind") == "List" or (isinstance(doc.get("kind"), str) and doc["kind"].endswith("List") and "items" in doc):
            items = doc.get("items") or []
            if not isinstance(items, list):
                raise ConfigError(where, f"document {index + 1}: items", "expected a list of objects")
            candidates = items
        else:
            candidates = [doc]
        for obj in candidates:
            if not isinstance(obj, dict):
                raise ConfigError(where, f"document {index + 1}", "expected a Kubernetes object (a mapping)")
            kind = obj.get("kind")
            if kind not in ("Service", "EndpointSlice"):
                continue
            if not owned:
                obj = copy.deepcopy(obj)
            validate_object(obj, where)
            objects.append(obj)
    return objects


def _documents(source, origin) -> tuple[str, list, bool]:
    """(where, documents, whether the documents are ours to change)."""
    if isinstance(source, dict):
        return origin or "<objects>", [source], False
    if isinstance(source, (list, tuple)):
        return origin or "<objects>", list(source), False
    if isinstance(source, Path) or (isinstance(source, str) and "\n" not in source and Path(source).exists()):
        path = Path(source)
        text = read_text(path)
        where = origin or str(path)
    elif isinstance(source, str):
        text, where = source, origin or "<objects>"
    else:
        raise ConfigError(origin or "<objects>", None, f"expected YAML text, a path or a list of objects, got {type(source).__name__}")
    if text.lstrip()[:1] == "{":
        # JSON, as `kubectl get -o json` writes it: the json module reads it many times faster
        # than a YAML parser; what it refuses (YAML flow style, broken JSON) the YAML parser reads
        # or reports, line and column included.
        try:
            return where, [json.loads(text)], True
        except ValueError:
            pass
    return where, _yaml_documents(where, text), True


def _yaml_documents(where: str, text: str) -> list:
    """YAML documents: by labkit.yaml_fast where it can promise PyYAML's reading (large clusters
    in seconds), else with libyaml's parser where PyYAML has it (the same SafeLoader constructors
    and resolvers, so the same objects, several times faster); what that refuses is read again by
    labkit.inputs for its one-line error."""
    fast = yaml_fast.documents(text)
    if fast is not None:
        return fast
    loader = getattr(yaml, "CSafeLoader", None)
    if loader is not None:
        try:
            return list(yaml.load_all(text, Loader=loader))
        except (yaml.YAMLError, RecursionError):
            pass
    return load_yaml_all(where, text=text)


def object_name(obj: dict) -> str:
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    return f"{obj.get('kind')} {meta.get('namespace') or 'default'}/{meta.get('name')}"


class _Checker:
    def __init__(self, where: str, obj: dict):
        self.where, self.obj = where, obj

    def fail(self, field_path: str, problem: str):
        raise ConfigError(self.where, f"{object_name(self.obj)}: {field_path}", problem)

    def mapping(self, value, path, required=False) -> dict:
        if value is None:
            if required:
                self.fail(path, "is required")
            return {}
        if not isinstance(value, dict):
            self.fail(path, "expected a mapping")
        return value

    def sequence(self, value, path) -> list:
        if value is None:
            return []
        if not isinstance(value, list):
            self.fail(path, "expected a list")
        return value

    def string(self, value, path, required=False):
        if value is None:
            if required:
                self.fail(path, "is required")
            return None
        if not isinstance(value, str):
            self.fail(path, f"expected a string, got {value!r}")
        return value

    def port(self, value, path, required=False, allow_zero=False):
        if value is None:
            if required:
                self.fail(path, "is required")
            return None
        low = 0 if allow_zero else 1
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= 65535:
            self.fail(path, f"expected a port number {low}-65535, got {value!r}")
        return value

    def ip(self, value, path) -> int:
        """The address's IP version (4 or 6)."""
        self.string(value, path, required=True)
        if _plain_ipv4(value):
            return 4
        try:
            return ipaddress.ip_address(_sloppy(value)).version
        except ValueError:
            self.fail(path, f"expected an IP address, got {value!r}")

    def protocol(self, value, path):
        if value is None:
            return "TCP"       # API defaulting
        if value not in PROTOCOLS:
            self.fail(path, f"expected TCP, UDP or SCTP, got {value!r}")
        return value

    def boolean(self, value, path):
        if value is not None and not isinstance(value, bool):
            self.fail(path, f"expected true or false, got {value!r}")
        return value


def validate_object(obj: dict, where: str = "<objects>") -> None:
    """Structural checks of one Service or EndpointSlice (fills in metadata.namespace)."""
    c = _Checker(where, obj)
    meta = c.mapping(obj.get("metadata"), "metadata", required=True)
    c.string(meta.get("name"), "metadata.name", required=True)
    if not meta.get("name"):
        c.fail("metadata.name", "is required")
    meta["namespace"] = c.string(meta.get("namespace"), "metadata.namespace") or "default"
    labels = c.mapping(meta.get("labels"), "metadata.labels")
    for key, value in labels.items():
        c.string(value, f"metadata.labels.{key}")
    if obj["kind"] == "Service":
        _validate_service(c, obj)
    else:
        _validate_slice(c, obj)


def _validate_service(c: _Checker, obj: dict) -> None:
    spec = c.mapping(obj.get("spec"), "spec", required=True)
    stype = c.string(spec.get("type"), "spec.type")
    if stype not in (None, "", "ClusterIP", "NodePort", "LoadBalancer", "ExternalName"):
        c.fail("spec.type", f"expected ClusterIP, NodePort, LoadBalancer or ExternalName, got {stype!r}")
    cluster_ip = c.string(spec.get("clusterIP"), "spec.clusterIP")
    if cluster_ip not in (None, "", "None"):
        c.ip(cluster_ip, "spec.clusterIP")
    for i, ip in enumerate(c.sequence(spec.get("clusterIPs"), "spec.clusterIPs")):
        if ip != "None":
            c.ip(ip, f"spec.clusterIPs[{i}]")
    for i, fam in enumerate(c.sequence(spec.get("ipFamilies"), "spec.ipFamilies")):
        if fam not in ("IPv4", "IPv6"):
            c.fail(f"spec.ipFamilies[{i}]", f"expected IPv4 or IPv6, got {fam!r}")
    ports = c.sequence(spec.get("ports"), "spec.ports")
    for i, port in enumerate(ports):
        p = c.mapping(port, f"spec.ports[{i}]")
        c.string(p.get("name"), f"spec.ports[{i}].name")
        c.port(p.get("port"), f"spec.ports[{i}].port", required=True)
        c.protocol(p.get("protocol"), f"spec.ports[{i}].protocol")
        c.port(p.get("nodePort"), f"spec.ports[{i}].nodePort", allow_zero=True)
        target = p.get("targetPort")
        if target is not None and not isinstance(target, (int, str)):
            c.fail(f"spec.ports[{i}].targetPort", f"expected a port number or name, got {target!r}")
    for i, ip in enumerate(c.sequence(spec.get("externalIPs"), "spec.externalIPs")):
        c.string(ip, f"spec.externalIPs[{i}]")      # invalid ones are skipped by kube-proxy (MapIPsByIPFamily)
    for i, cidr in enumerate(c.sequence(spec.get("loadBalancerSourceRanges"), "spec.loadBalancerSourceRanges")):
        c.string(cidr, f"spec.loadBalancerSourceRanges[{i}]")
    for key in ("externalTrafficPolicy", "internalTrafficPolicy"):
        value = c.string(spec.get(key), f"spec.{key}")
        if value not in (None, "", "Cluster", "Local"):
            c.fail(f"spec.{key}", f"expected Cluster or Local, got {value!r}")
    c.port(spec.get("healthCheckNodePort"), "spec.healthCheckNodePort", allow_zero=True)
    affinity = c.string(spec.get("sessionAffinity"), "spec.sessionAffinity")
    if affinity not in (None, "", "None", "ClientIP"):
        c.fail("spec.sessionAffinity", f"expected None or ClientIP, got {affinity!r}")
    sac = c.mapping(spec.get("sessionAffinityConfig"), "spec.sessionAffinityConfig")
    client = c.mapping(sac.get("clientIP"), "spec.sessionAffinityConfig.clientIP")
    timeout = client.get("timeoutSeconds")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int) or not 0 < timeout <= 86400):
        c.fail("spec.sessionAffinityConfig.clientIP.timeoutSeconds", f"expected 1-86400 seconds, got {timeout!r}")
    status = c.mapping(obj.get("status"), "status")
    lb = c.mapping(status.get("loadBalancer"), "status.loadBalancer")
    for i, ing in enumerate(c.sequence(lb.get("ingress"), "status.loadBalancer.ingress")):
        ing = c.mapping(ing, f"status.loadBalancer.ingress[{i}]")
        if ing.get("ip"):
            c.ip(ing["ip"], f"status.loadBalancer.ingress[{i}].ip")
        mode = c.string(ing.get("ipMode"), f"status.loadBalancer.ingress[{i}].ipMode")
        if mode not in (None, "VIP", "Proxy"):
            c.fail(f"status.loadBalancer.ingress[{i}].ipMode", f"expected VIP or Proxy, got {mode!r}")


_ENDPOINT_KEYS = frozenset(("addresses", "conditions", "nodeName", "targetRef", "zone", "hostname", "deprecatedTopology"))


_NAME_TYPES = (str, type(None))


def _plain_endpoint(ep) -> bool:
    """The common well-formed IPv4 endpoint, recognised without the field-by-field walk (which
    would only confirm it): plain IPv4 addresses, boolean conditions, string names."""
    if type(ep) is not dict or not _ENDPOINT_KEYS.issuperset(ep):
        return False
    addresses, conditions = ep.get("addresses"), ep.get("conditions")
    if type(addresses) is not list or not addresses:
        return False
    for address in addresses:
        if type(address) is not str or not _plain_ipv4(address):
            return False
    if conditions is not None:
        if type(conditions) is not dict:
            return False
        for value in conditions.values():
            if value is not True and value is not False and value is not None:
                return False
    return (type(ep.get("nodeName")) in _NAME_TYPES and type(ep.get("zone")) in _NAME_TYPES
            and type(ep.get("hostname")) in _NAME_TYPES)


def _validate_slice(c: _Checker, obj: dict) -> None:
    address_type = c.string(obj.get("addressType"), "addressType", required=True)
    if address_type not in ("IPv4", "IPv6", "FQDN"):
        c.fail("addressType", f"expected IPv4, IPv6 or FQDN, got {address_type!r}")
    for i, ep in enumerate(c.sequence(obj.get("endpoints"), "endpoints")):
        if address_type == "IPv4" and _plain_endpoint(ep):
            continue
        ep = c.mapping(ep, f"endpoints[{i}]")
        addresses = c.sequence(ep.get("addresses"), f"endpoints[{i}].addresses")
        for j, address in enumerate(addresses):
            if address_type == "FQDN":
                c.string(address, f"endpoints[{i}].addresses[{j}]")
                continue
            version = c.ip(address, f"endpoints[{i}].addresses[{j}]")
            if ("IPv6" if version == 6 else "IPv4") != address_type:
                c.fail(f"endpoints[{i}].addresses[{j}]", f"{address} is not an {address_type} address (addressType)")
        conditions = c.mapping(ep.get("conditions"), f"endpoints[{i}].conditions")
        for key in ("ready", "serving", "terminating"):
            c.boolean(conditions.get(key), f"endpoints[{i}].conditions.{key}")
        c.string(ep.get("nodeName"), f"endpoints[{i}].nodeName")
        c.string(ep.get("zone"), f"endpoints[{i}].zone")
        hints = c.mapping(ep.get("hints"), f"endpoints[{i}].hints")
        for key in ("forZones", "forNodes"):
            for k, hint in enumerate(c.sequence(hints.get(key), f"endpoints[{i}].hints.{key}")):
                c.string(c.mapping(hint, f"endpoints[{i}].hints.{key}[{k}]").get("name"),
                         f"endpoints[{i}].hints.{key}[{k}].name", required=True)
    for i, port in enumerate(c.sequence(obj.get("ports"), "ports")):
        p = c.mapping(port, f"ports[{i}]")
        c.string(p.get("name"), f"ports[{i}].name")
        c.port(p.get("port"), f"ports[{i}].port", allow_zero=True)
        c.protocol(p.get("protocol"), f"ports[{i}].protocol")


# -- kube-proxy's view --------------------------------------------------------------------------

def _plain_ipv4(text: str) -> bool:
    """A canonical dotted quad ("10.1.2.3"), checked in C: the common case, parsed fast."""
    try:
        return socket.inet_ntoa(socket.inet_aton(text)) == text
    except (OSError, TypeError, ValueError, UnicodeError):
        return False


def _normal_ip(text: str) -> str:
    """The address as kube-proxy prints it (netutils.ParseIPSloppy, then String())."""
    return text if _plain_ipv4(text) else str(ipaddress.ip_address(_sloppy(text)))


def _sloppy(text: str) -> str:
    """netutils.ParseIPSloppy accepts IPv4 octets with leading zeros ("010.001.0.1")."""
    text = text.strip()
    if "." in text and ":" not in text:
        parts = text.split(".")
        if len(parts) == 4 and all(p.isdigit() for p in parts):
            return ".".join(str(int(p)) for p in parts)
    return text


def _parse_ip(text) -> ipaddress._BaseAddress | None:
    if not isinstance(text, str):
        return None
    if _plain_ipv4(text):
        return ipaddress.IPv4Address(socket.inet_aton(text))
    try:
        return ipaddress.ip_address(_sloppy(text))
    except ValueError:
        return None


def _parse_cidr(text: str) -> ipaddress._BaseNetwork | None:
    text = text.strip()
    if "/" not in text:
        return None
    address, _, prefix = text.partition("/")
    try:
        return ipaddress.ip_network(f"{_sloppy(address)}/{prefix}", strict=False)
    except ValueError:
        return None


def _family(ip) -> str:
    return "IPv6" if ip.version == 6 else "IPv4"


@dataclass(eq=True)
class ServicePortInfo:
    """One port of one Service as kube-proxy sees it (BaseServicePortInfo + servicePortInfo)."""
    namespace: str
    name: str
    port_name: str
    protocol: str                 # "TCP", "UDP", "SCTP"
    cluster_ip: str
    port: int
    node_port: int
    external_ips: list[str]
    load_balancer_vips: list[str]
    load_balancer_source_ranges: list[str]
    health_check_node_port: int
    external_policy_local: bool
    internal_policy_local: bool
    session_affinity_client_ip: bool
    sticky_max_age_seconds: int

    @property
    def service(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def name_string(self) -> str:
        return chains.service_port_name(self.namespace, self.name, self.port_name)

    @property
    def proto(self) -> str:
        return self.protocol.lower()

    @property
    def externally_accessible(self) -> bool:
        return self.node_port != 0 or bool(self.load_balancer_vips) or bool(self.external_ips)

    @property
    def uses_cluster_endpoints(self) -> bool:
        return not self.internal_policy_local or self.externally_accessible

    @property
    def uses_local_endpoints(self) -> bool:
        return self.internal_policy_local or (self.external_policy_local and self.externally_accessible)


@dataclass(slots=True)
class EndpointInfo:
    """One endpoint of one service port (BaseEndpointInfo)."""
    ip: str
    port: int
    is_local: bool
    ready: bool
    serving: bool
    terminating: bool
    zone_hints: frozenset = frozenset()
    node_hints: frozenset = frozenset()
    endpoint: str = field(init=False)

    def __post_init__(self):
        # net.JoinHostPort (chains.join_host_port), inline: this runs once per endpoint
        self.endpoint = f"[{self.ip}]:{self.port}" if ":" in self.ip else f"{self.ip}:{self.port}"


@dataclass
class ClusterState:
    """svcPortMap + endpointsMap of one proxier, and each Service's EndpointSlices (for change detection)."""
    service_ports: list[ServicePortInfo]
    endpoints: dict[tuple[str, str, str], list[EndpointInfo]]     # (ns/svc, port name, protocol) -> sorted endpoints
    slices_by_service: dict[str, dict[str, dict]]

    def endpoints_for(self, sp: ServicePortInfo) -> list[EndpointInfo]:
        return self.endpoints.get((sp.service, sp.port_name, sp.protocol), [])


def _service_ports(svc: dict, family: str) -> list[ServicePortInfo]:
    meta, spec = svc["metadata"], svc.get("spec") or {}
    status = svc.get("status") or {}
    ref = f"Service {meta['namespace']}/{meta['name']}"
    labels = meta.get("labels") or {}
    if SERVICE_PROXY_NAME_LABEL in labels or HEADLESS_LABEL in labels:
        # cmd/kube-proxy watches Services with a label selector that excludes these.
        log.info("%s: skipped (label %s: kube-proxy does not watch it)", ref,
                 SERVICE_PROXY_NAME_LABEL if SERVICE_PROXY_NAME_LABEL in labels else HEADLESS_LABEL)
        return []
    stype = spec.get("type") or ""
    cluster_ip_spec = spec.get("clusterIP") or ""
    # proxyutil.ShouldSkipService
    if cluster_ip_spec in ("", "None"):
        log.info("%s: skipped (clusterIP %r: headless or not allocated)", ref, cluster_ip_spec)
        return []
    if stype == "ExternalName":
        log.info("%s: skipped (type ExternalName is not proxied)", ref)
        return []
    # proxyutil.GetClusterIPByFamily
    cluster_ip = None
    families = spec.get("ipFamilies") or []
    if not families:
        ip = _parse_ip(cluster_ip_spec)
        if ip is not None and _family(ip) == family:
            cluster_ip = ip
    else:
        ips = spec.get("clusterIPs") or []
        for idx, fam in enumerate(families):
            if fam == family and idx < len(ips):
                cluster_ip = _parse_ip(ips[idx])
    if cluster_ip is None:
        log.debug("%s: no %s cluster IP, not handled by this proxier", ref, family)
        return []
    # pkg/api/v1/service/util.go
    externally_accessible = stype in ("LoadBalancer", "NodePort") or (stype == "ClusterIP" and bool(spec.get("externalIPs")))
    external_policy_local = externally_accessible and spec.get("externalTrafficPolicy") == "Local"
    internal_policy_local = spec.get("internalTrafficPolicy") == "Local"
    needs_health_check = stype == "LoadBalancer" and external_policy_local
    client_ip = spec.get("sessionAffinity") == "ClientIP"
    sticky = 0
    if client_ip:
        # The API server defaults sessionAffinityConfig.clientIP.timeoutSeconds to 10800.
        sticky = (((spec.get("sessionAffinityConfig") or {}).get("clientIP") or {}).get("timeoutSeconds")) or 10800

    external_ips = []
    for text in spec.get("externalIPs") or []:
        ip = _parse_ip(text)
        if ip is None:
            if text.strip():
                log.warning("%s: spec.externalIPs: skipping invalid IP %r", ref, text)
            continue
        if _family(ip) == family:
            external_ips.append(str(ip))
    ranges = []
    for text in spec.get("loadBalancerSourceRanges") or []:
        net = _parse_cidr(text)
        if net is None:
            if text.strip():
                log.warning("%s: spec.loadBalancerSourceRanges: ignoring invalid CIDR %r", ref, text)
            continue
        if _family(net) == family:
            ranges.append(net)
    if any(net.prefixlen == 0 for net in ranges):
        ranges = []          # a zero-masked CIDR means "allow any", like no source ranges at all
    vips = []
    for ing in ((status.get("loadBalancer") or {}).get("ingress") or []):
        if not ing.get("ip") or ing.get("ipMode") not in (None, "VIP"):   # proxyutil.IsVIPMode
            continue
        ip = _parse_ip(ing["ip"])
        if ip is not None and _family(ip) == family:
            vips.append(str(ip))
    hc_port = 0
    if needs_health_check:
        hc_port = spec.get("healthCheckNodePort") or 0
        if not hc_port:
            log.warning("%s: type LoadBalancer with externalTrafficPolicy Local has no healthCheckNodePort", ref)

    out = []
    for port in spec.get("ports") or []:
        out.append(ServicePortInfo(
            namespace=meta["namespace"], name=meta["name"], port_name=port.get("name") or "",
            protocol=port.get("protocol") or "TCP", cluster_ip=str(cluster_ip), port=port["port"],
            node_port=port.get("nodePort") or 0, external_ips=external_ips, load_balancer_vips=vips,
            load_balancer_source_ranges=[str(n) for n in ranges], health_check_node_port=hc_port,
            external_policy_local=external_policy_local, internal_policy_local=internal_policy_local,
            session_affinity_client_ip=client_ip, sticky_max_age_seconds=sticky,
        ))
    return out


@dataclass(frozen=True)
class _Ref:
    """An EndpointSlice's name for log messages, formatted only when a message is written."""
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"EndpointSlice {self.namespace}/{self.name}"


def build_state(objects: Iterable[dict], config) -> ClusterState:
    """kube-proxy's svcPortMap and endpointsMap for `config`'s node and IP family."""
    family, hostname = config.ip_family, config.hostname
    service_ports: list[ServicePortInfo] = []
    slices_by_service: dict[str, dict[str, dict]] = {}
    services = []
    for obj in objects:
        kind = obj.get("kind")
        if kind == "Service":
            services.append(obj)
        elif kind == "EndpointSlice":
            meta = obj["metadata"]
            ref = f"EndpointSlice {meta['namespace']}/{meta['name']}"
            labels = meta.get("labels") or {}
            if obj.get("addressType") not in ("IPv4", "IPv6"):
                log.info("%s: skipped (addressType %s is not supported by kube-proxy)", ref, obj.get("addressType"))
                continue
            if SERVICE_PROXY_NAME_LABEL in labels or HEADLESS_LABEL in labels:
                log.info("%s: skipped (labelled as not for kube-proxy)", ref)
                continue
            service = labels.get(SERVICE_NAME_LABEL)
            if not service:
                log.warning("%s: skipped: no %s label, so kube-proxy cannot tell which Service it belongs to", ref, SERVICE_NAME_LABEL)
                continue
            if obj["addressType"] != family:
                continue
            slices_by_service.setdefault(f"{meta['namespace']}/{service}", {})[meta["name"]] = obj
    services.sort(key=lambda s: (s["metadata"]["namespace"], s["metadata"]["name"]))
    for svc in services:
        service_ports.extend(_service_ports(svc, family))

    endpoints: dict[tuple[str, str, str], list[EndpointInfo]] = {}
    for service, slices in slices_by_service.items():
        by_port: dict[tuple[str, str, str], dict[str, EndpointInfo]] = {}
        for slice_name in sorted(slices):
            obj = slices[slice_name]
            ref = _Ref(obj["metadata"]["namespace"], slice_name)
            for i, port in enumerate(obj.get("ports") or []):
                if port.get("name") is None:
                    log.warning("%s: ports[%d] has no name and is ignored by kube-proxy "
                                "(an unnamed Service port is matched by name: \"\")", ref, i)
                    continue
                if not port.get("port"):
                    log.warning("%s: ports[%d] (%s) has no port number and is ignored", ref, i, port["name"])
                    continue
                key = (service, port["name"], port.get("protocol") or "TCP")
                found = by_port.setdefault(key, {})
                for j, ep in enumerate(obj.get("endpoints") or []):
                    addresses = ep.get("addresses") or []
                    if not addresses:
                        log.warning("%s: endpoints[%d] has no addresses and is ignored", ref, j)
                        continue
                    conditions = ep.get("conditions") or {}
                    terminating = conditions.get("terminating") is True
                    hints = ep.get("hints")
                    info = EndpointInfo(
                        _normal_ip(addresses[0]), port["port"], bool(hostname) and ep.get("nodeName") == hostname,
                        conditions.get("ready") is not False, conditions.get("serving") is not False, terminating,
                        *((frozenset(h["name"] for h in (hints.get("forZones") or [])),
                           frozenset(h["name"] for h in (hints.get("forNodes") or []))) if hints else ()),
                    )
                    # A later duplicate replaces an earlier one unless it is terminating.
                    if info.endpoint not in found or not terminating:
                        found[info.endpoint] = info
        for key, found in by_port.items():
            if found:
                endpoints[key] = sorted(found.values(), key=lambda e: e.endpoint)
    return ClusterState(service_ports, endpoints, slices_by_service)
