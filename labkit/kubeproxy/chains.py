"""kube-proxy's chain names: the sha256 + base32 hashes of pkg/proxy/iptables/proxier.go.

Upstream (kubernetes/kubernetes, pkg/proxy/iptables/proxier.go at 531be81, master after v1.33;
Kubernetes v1.34): `portProtoHash(servicePortName, protocol)` is the first 16 characters of the
standard base32 encoding (A-Z2-7, RFC 4648) of sha256(servicePortName + protocol), and
`servicePortEndpointChainName` hashes servicePortName + protocol + endpoint. The inputs are
joined without separators; the protocol is lower case ("tcp", "udp", "sctp"); the service port
name is "namespace/name" plus ":port-name" when the port is named (ServicePortName.String()); the
endpoint is "ip:port", or "[ip]:port" for IPv6 (net.JoinHostPort). KUBE-SVC, KUBE-SVL, KUBE-EXT
and KUBE-FW of one service port share the same hash.
"""

from __future__ import annotations

import hashlib

SERVICE_PREFIX = "KUBE-SVC-"          # Cluster traffic policy: picks among all usable endpoints
LOCAL_SERVICE_PREFIX = "KUBE-SVL-"    # Local traffic policy: picks among this node's endpoints
EXTERNAL_PREFIX = "KUBE-EXT-"         # NodePort / external IP / load-balancer traffic dispatcher
FIREWALL_PREFIX = "KUBE-FW-"          # loadBalancerSourceRanges filter
ENDPOINT_PREFIX = "KUBE-SEP-"         # one endpoint: hairpin masquerade + DNAT

SERVICE_CHAIN_PREFIXES = (SERVICE_PREFIX, LOCAL_SERVICE_PREFIX, ENDPOINT_PREFIX, FIREWALL_PREFIX, EXTERNAL_PREFIX)


_B32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
_PAIRS = [a + b for a in _B32 for b in _B32]          # two base32 characters per 10 bits


def _hash16(text: str) -> str:
    # The first 16 base32 characters encode exactly the first 10 bytes (80 bits) of the digest.
    v = int.from_bytes(hashlib.sha256(text.encode()).digest()[:10], "big")
    p = _PAIRS
    return (p[v >> 70] + p[(v >> 60) & 1023] + p[(v >> 50) & 1023] + p[(v >> 40) & 1023]
            + p[(v >> 30) & 1023] + p[(v >> 20) & 1023] + p[(v >> 10) & 1023] + p[v & 1023])


def service_port_name(namespace: str, name: str, port_name: str = "") -> str:
    """ServicePortName.String(): "ns/name" or "ns/name:port-name"."""
    return f"{namespace}/{name}" + (f":{port_name}" if port_name else "")


def join_host_port(ip: str, port: int | str) -> str:
    """net.JoinHostPort: IPv6 addresses are bracketed."""
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def port_proto_hash(spn: str, protocol: str) -> str:
    return _hash16(spn + protocol.lower())


def service_chain(spn: str, protocol: str) -> str:
    """KUBE-SVC-… (servicePortPolicyClusterChain)."""
    return SERVICE_PREFIX + port_proto_hash(spn, protocol)


def local_service_chain(spn: str, protocol: str) -> str:
    """KUBE-SVL-… (servicePortPolicyLocalChainName)."""
    return LOCAL_SERVICE_PREFIX + port_proto_hash(spn, protocol)


def external_chain(spn: str, protocol: str) -> str:
    """KUBE-EXT-… (serviceExternalChainName)."""
    return EXTERNAL_PREFIX + port_proto_hash(spn, protocol)


def firewall_chain(spn: str, protocol: str) -> str:
    """KUBE-FW-… (serviceFirewallChainName)."""
    return FIREWALL_PREFIX + port_proto_hash(spn, protocol)


def endpoint_chain(spn: str, protocol: str, endpoint: str) -> str:
    """KUBE-SEP-… (servicePortEndpointChainName); endpoint is "ip:port" or "[ipv6]:port"."""
    return ENDPOINT_PREFIX + _hash16(spn + protocol.lower() + endpoint)


def is_service_chain(name: str) -> bool:
    """isServiceChainName: the per-service chains kube-proxy deletes when they go stale."""
    return name.startswith(SERVICE_CHAIN_PREFIXES)


def probability(n: int) -> str:
    """computeProbability: Go's fmt.Sprintf("%0.10f", 1.0/float64(n))."""
    return "%0.10f" % (1.0 / n)
