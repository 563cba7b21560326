"""The node-side settings kube-proxy's iptables proxier renders with (ProxierConfig).

A ProxierConfig holds the *effective* state of one single-family proxier (the fields of
`Proxier` in pkg/proxy/iptables/proxier.go that change the rules), so tests can set it exactly as
kube-proxy's own unit tests set their fake proxier. `ProxierConfig.from_kube_proxy_configuration`
derives it from a KubeProxyConfiguration (kubeproxy.config.k8s.io/v1alpha1) the way
cmd/kube-proxy and NewProxier do: defaults, the local-traffic detector for the family, the
masquerade mark from the bit, and localhostNodePorts forced off when nodePortAddresses contains
no IPv4 loopback address.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field, replace
from pathlib import Path


from labkit.errors import ConfigError
from labkit.inputs import load_yaml

# metrics.IPTablesCTStateInvalidDroppedNFAcctCounter / metrics.LocalhostNodePortAcceptedNFAcctCounter
CT_STATE_INVALID_DROPPED = "ct_state_invalid_dropped_pkts"
LOCALHOST_NODEPORTS_ACCEPTED = "localhost_nps_accepted_pkts"
NFACCT_COUNTERS = (CT_STATE_INVALID_DROPPED, LOCALHOST_NODEPORTS_ACCEPTED)

DETECT_LOCAL_MODES = ("ClusterCIDR", "NodeCIDR", "BridgeInterface", "InterfaceNamePrefix", "None")


def go_mark(bit: int) -> str:
    """NewProxier: fmt.Sprintf("%#08x", 1<<bit). Go pads the digits to 8 and then adds the 0x
    prefix, so bit 14 gives "0x00004000" (kube-proxy's unit tests hard-code "0x4000")."""
    return "0x%08x" % (1 << bit)


def _family_of(text: str) -> str:
    net = ipaddress.ip_network(text.strip(), strict=False)
    return "IPv6" if net.version == 6 else "IPv4"


@dataclass
class ProxierConfig:
    hostname: str = ""                       # the node name; endpoints with this nodeName are local
    node_ips: list[str] = field(default_factory=list)   # the node's IPs; the first of the family is the proxier's nodeIP
    ip_family: str = "IPv4"                  # the family this proxier handles: IPv4 (iptables) or IPv6 (ip6tables)
    detect_local_mode: str = "ClusterCIDR"   # how pod traffic is told from other traffic
    cluster_cidr: str = ""                   # ClusterCIDR mode; may list one CIDR per family, comma-separated
    pod_cidr: str = ""                       # NodeCIDR mode: the node's podCIDR(s), comma-separated
    bridge_interface: str = ""               # BridgeInterface mode
    interface_name_prefix: str = ""          # InterfaceNamePrefix mode
    masquerade_bit: int = 14
    masquerade_mark: str | None = None       # None: derived from masquerade_bit as NewProxier does
    masquerade_all: bool = False
    localhost_nodeports: bool = True
    nodeport_addresses: list[str] = field(default_factory=list)   # CIDRs; empty means every local address
    local_addresses: list[str] = field(default_factory=list)      # the node's interface addresses, loopback included
    random_fully: bool = True                # iptables >= 1.6.2 supports MASQUERADE --random-fully
    nfacct_counters: list[str] = field(default_factory=lambda: list(NFACCT_COUNTERS))  # counters that exist
    conntrack_tcp_be_liberal: bool = False   # net.netfilter.nf_conntrack_tcp_be_liberal != 0
    topology_zone: str = ""                  # the node's topology.kubernetes.io/zone label (topology hints)
    large_cluster_endpoints_threshold: int = 1000

    def __post_init__(self):
        if self.ip_family not in ("IPv4", "IPv6"):
            raise ConfigError("proxier configuration", "ip_family", f"expected IPv4 or IPv6, got {self.ip_family!r}")
        if self.detect_local_mode not in DETECT_LOCAL_MODES:
            raise ConfigError("proxier configuration", "detectLocalMode",
                              f"expected one of {', '.join(DETECT_LOCAL_MODES)}, got {self.detect_local_mode!r}")
        if not 0 <= int(self.masquerade_bit) <= 31:
            raise ConfigError("proxier configuration", "iptables.masqueradeBit",
                              f"expected 0..31, got {self.masquerade_bit}")

    # -- derived values -------------------------------------------------------------------------
    @property
    def ipv6(self) -> bool:
        return self.ip_family == "IPv6"

    @property
    def mark(self) -> str:
        return self.masquerade_mark or go_mark(int(self.masquerade_bit))

    @property
    def node_ip(self) -> str | None:
        """The proxier's nodeIP (nodeIPs[family]): only used for the KUBE-FW allow-from-node rule."""
        for ip in self.node_ips:
            if _family_of(ip) == self.ip_family:
                return str(ipaddress.ip_address(ip.strip()))
        return None

    def _cidr_for_family(self, value: str) -> str | None:
        for cidr in (c.strip() for c in value.split(",") if c.strip()):
            if _family_of(cidr) == self.ip_family:
                return cidr
        return None

    def local_detector(self) -> tuple[list[str], list[str]] | None:
        """(IfLocal, IfNotLocal) match arguments of pkg/proxy/util LocalTrafficDetector, or None
        when no detector is implemented for this family (NewNoOpLocalDetector)."""
        mode = self.detect_local_mode
        if mode in ("ClusterCIDR", "NodeCIDR"):
            cidr = self._cidr_for_family(self.cluster_cidr if mode == "ClusterCIDR" else self.pod_cidr)
            return (["-s", cidr], ["!", "-s", cidr]) if cidr else None
        if mode == "BridgeInterface" and self.bridge_interface:
            return (["-i", self.bridge_interface], ["!", "-i", self.bridge_interface])
        if mode == "InterfaceNamePrefix" and self.interface_name_prefix:
            pattern = self.interface_name_prefix + "+"
            return (["-i", pattern], ["!", "-i", pattern])
        return None

    def nodeport_addresses_for_family(self) -> list[str]:
        """NewNodePortAddresses: this family's CIDRs; [] means "match all" (no CIDR of the
        family, or a zero CIDR among them)."""
        cidrs = [c.strip() for c in self.nodeport_addresses if _family_of(c) == self.ip_family]
        if any(ipaddress.ip_network(c, strict=False).prefixlen == 0 for c in cidrs):
            return []
        return cidrs

    def nodeport_ips(self) -> list[str]:
        """NodePortAddresses.GetNodeIPs: the node's addresses inside the nodePortAddresses CIDRs."""
        nets = [ipaddress.ip_network(c, strict=False) for c in self.nodeport_addresses_for_family()]
        found: list[str] = []
        for entry in self.local_addresses:
            ip = ipaddress.ip_interface(entry.strip()).ip
            if any(ip.version == net.version and ip in net for net in nets) and str(ip) not in found:
                found.append(str(ip))
        return found

    def has_counter(self, name: str) -> bool:
        return name in self.nfacct_counters

    def with_overrides(self, **overrides) -> "ProxierConfig":
        return replace(self, **{k: v for k, v in overrides.items() if v is not None})

    # -- construction from a KubeProxyConfiguration ---------------------------------------------
    @classmethod
    def from_kube_proxy_configuration(cls, source=None, **overrides) -> "ProxierConfig":
        """A ProxierConfig from a KubeProxyConfiguration (YAML text, a dict or a path), then the
        keyword overrides (hostname=, node_ips=, local_addresses=, random_fully=, ...).

        Reads clusterCIDR, detectLocalMode, detectLocal.{bridgeInterface,interfaceNamePrefix},
        iptables.{masqueradeBit,masqueradeAll,localhostNodePorts}, nodePortAddresses (CIDRs, or
        ["primary"] for the node IPs) and conntrack.tcpBeLiberal (kube-proxy itself reads the
        sysctl; tcpBeLiberal is what it sets it to). Defaults are v1alpha1's: masqueradeBit 14,
        localhostNodePorts true, detectLocalMode ClusterCIDR.
        """
        where, doc = _load_document(source)
        iptables = _section(doc, "iptables", where)
        conntrack = _section(doc, "conntrack", where)
        detect = _section(doc, "detectLocal", where)
        values = dict(
            hostname=_string(doc, "hostnameOverride", where) or "",
            detect_local_mode=_string(doc, "detectLocalMode", where) or "ClusterCIDR",
            cluster_cidr=_string(doc, "clusterCIDR", where) or "",
            bridge_interface=_string(detect, "bridgeInterface", where, "detectLocal.") or "",
            interface_name_prefix=_string(detect, "interfaceNamePrefix", where, "detectLocal.") or "",
            masquerade_bit=_int(iptables, "masqueradeBit", where, 14, "iptables."),
            masquerade_all=_bool(iptables, "masqueradeAll", where, False, "iptables."),
            localhost_nodeports=_bool(iptables, "localhostNodePorts", where, True, "iptables."),
            conntrack_tcp_be_liberal=_bool(conntrack, "tcpBeLiberal", where, False, "conntrack."),
        )
        mode = values["detect_local_mode"]
        if mode not in DETECT_LOCAL_MODES:
            raise ConfigError(where, "detectLocalMode", f"expected one of {', '.join(DETECT_LOCAL_MODES)}, got {mode!r}")
        if not 0 <= values["masquerade_bit"] <= 31:
            raise ConfigError(where, "iptables.masqueradeBit", f"expected 0..31, got {values['masquerade_bit']}")
        if values["cluster_cidr"]:
            for cidr in values["cluster_cidr"].split(","):
                _check_cidr(cidr, where, "clusterCIDR")
        addresses = doc.get("nodePortAddresses") or []
        if not isinstance(addresses, list) or not all(isinstance(a, str) for a in addresses):
            raise ConfigError(where, "nodePortAddresses", "expected a list of CIDRs (or [\"primary\"])")
        config = cls(**values).with_overrides(**overrides)
        if addresses == ["primary"]:
            # cmd/kube-proxy: "primary" means the node's IPs, as /32 and /128 CIDRs.
            addresses = [f"{ip}/{32 if _family_of(ip) == 'IPv4' else 128}" for ip in config.node_ips]
        else:
            for cidr in addresses:
                _check_cidr(cidr, where, "nodePortAddresses")
        if "nodeport_addresses" not in overrides:
            config.nodeport_addresses = list(addresses)
        if "localhost_nodeports" not in overrides and not contains_ipv4_loopback(config.nodeport_addresses, config.ip_family):
            # NewProxier: `if !nodePortAddresses.ContainsIPv4Loopback() { localhostNodePorts = false }`
            config.localhost_nodeports = False
        return config


def contains_ipv4_loopback(nodeport_addresses: list[str], family: str) -> bool:
    """NodePortAddresses.ContainsIPv4Loopback for the given family (an empty list means 0.0.0.0/0)."""
    cidrs = [c for c in nodeport_addresses if _family_of(c) == family] or (["0.0.0.0/0"] if family == "IPv4" else [])
    for cidr in cidrs:
        net = ipaddress.ip_network(cidr.strip(), strict=False)
        if net.version == 4 and (net.network_address.is_loopback or ipaddress.ip_address("127.0.0.0") in net):
            return True
    return False


def _load_document(source) -> tuple[str, dict]:
    if source is None:
        return "KubeProxyConfiguration", {}
    if isinstance(source, dict):
        where, doc = "KubeProxyConfiguration", source
    else:
        path = Path(source) if not (isinstance(source, str) and "\n" in source) else None
        if path is not None and path.exists():
            where = str(path)
            doc = load_yaml(path)
        else:
            where = "KubeProxyConfiguration"
            doc = load_yaml(where, text=source)
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise ConfigError(where, None, "expected a KubeProxyConfiguration mapping")
    kind = doc.get("kind")
    if kind not in (None, "KubeProxyConfiguration"):
        raise ConfigError(where, "kind", f"expected KubeProxyConfiguration, got {kind!r}")
    api = doc.get("apiVersion")
    if api not in (None, "kubeproxy.config.k8s.io/v1alpha1"):
        raise ConfigError(where, "apiVersion", f"expected kubeproxy.config.k8s.io/v1alpha1, got {api!r}")
    return where, doc


def _section(doc: dict, key: str, where: str) -> dict:
    value = doc.get(key) or {}
    if not isinstance(value, dict):
        raise ConfigError(where, key, "expected a mapping")
    return value


def _string(doc: dict, key: str, where: str, prefix: str = "") -> str | None:
    value = doc.get(key)
    if value is not None and not isinstance(value, str):
        raise ConfigError(where, prefix + key, f"expected a string, got {value!r}")
    return value


def _int(doc: dict, key: str, where: str, default: int, prefix: str = "") -> int:
    value = doc.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(where, prefix + key, f"expected an integer, got {value!r}")
    return value


def _bool(doc: dict, key: str, where: str, default: bool, prefix: str = "") -> bool:
    value = doc.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ConfigError(where, prefix + key, f"expected true or false, got {value!r}")
    return value


def _check_cidr(cidr, where: str, field_name: str) -> None:
    try:
        ipaddress.ip_network(str(cidr).strip(), strict=False)
    except ValueError:
        raise ConfigError(where, field_name, f"expected CIDRs such as 10.0.0.0/8, got {cidr!r}") from None
