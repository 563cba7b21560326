"""A lab node as a real kubeadm or kind node has it around kube-proxy's rules (Kubernetes v1.34).

kube-proxy's syncs (labkit.kubeproxy.sync) are not all a node's netfilter state. Before kube-proxy
runs, kubelet and the CNI plugin have been at work, and kube-proxy itself sets sysctls when it
starts. `prepare(netns, ...)` does that part, once per node, before the first sync, in this order:

- the CNI: `net.bridge.bridge-nf-call-iptables=1` (and ip6tables) so that pod traffic crossing the
  pod bridge meets iptables (br_netfilter; labkit.netlab.brnetfilter), and the egress masquerade
  of a CNI with ipMasq (`egress_masquerade`);
- kubelet (pkg/kubelet/kubelet_network_linux.go, initNetworkUtil and syncIPTablesRules):
  mangle KUBE-IPTABLES-HINT; filter KUBE-FIREWALL with the "block incoming localnet connections"
  rule, jumped to from OUTPUT and then INPUT with EnsureRule(Prepend); and its iptables.Monitor's
  canary chain KUBE-KUBELET-CANARY in mangle, nat and filter. For IPv6 (ip6tables) only the hint
  and the canaries. Because kubelet runs first, kube-proxy's later prepends push kubelet's
  KUBE-FIREWALL jump to the end of INPUT and OUTPUT, as on a real node;
- kube-proxy at start (cmd/kube-proxy/app/server_linux.go setupConntrack and conntrack.go;
  pkg/proxy/iptables/proxier.go NewProxier): the conntrack sysctls of its KubeProxyConfiguration
  (`conntrack_settings`), route_localnet for localhost NodePorts. Its own canary chain
  KUBE-PROXY-CANARY comes with its syncs (labkit.kubeproxy.sync).

nf_conntrack_max is one value for the whole machine (read-only inside a network namespace), so the
lab cannot set it per node and leaves it alone; `conntrack_settings` says what kube-proxy would
write.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from labkit.netfilter import load
from labkit.netlab import brnetfilter
from labkit.netlab.netns import run_in

KUBELET_CANARY = "KUBE-KUBELET-CANARY"
PROXY_CANARY = "KUBE-PROXY-CANARY"
HINT_CHAIN = "KUBE-IPTABLES-HINT"
MASQ_AGENT_CHAIN = "KIND-MASQ-AGENT"


# -- kube-proxy's conntrack settings ---------------------------------------------------------------

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|m|s|ms)")


def _seconds(value, field: str) -> int:
    """A Go duration as a KubeProxyConfiguration writes it ("24h0m0s", "1h", "90s")."""
    if value is None:
        return 0
    text = str(value).strip()
    parts = _DURATION.findall(text)
    if not parts or "".join(a + b for a, b in parts) != text:
        raise ValueError(f"conntrack.{field}: expected a duration such as 24h0m0s, got {value!r}")
    factor = {"h": 3600, "m": 60, "s": 1, "ms": 0.001}
    return int(sum(float(n) * factor[u] for n, u in parts))


@dataclass(frozen=True)
class ConntrackSettings:
    """What kube-proxy writes to net/netfilter/* at start (v1alpha1 defaults)."""
    max: int                         # nf_conntrack_max: max(maxPerCore * CPUs, min); 0 = leave alone
    tcp_established_timeout: int     # nf_conntrack_tcp_timeout_established, 0 = leave alone
    tcp_close_wait_timeout: int      # nf_conntrack_tcp_timeout_close_wait, 0 = leave alone
    tcp_be_liberal: bool

    def per_namespace(self) -> list[str]:
        """The sysctls kube-proxy sets that exist per network namespace (name=value)."""
        out = []
        if self.tcp_established_timeout:
            out.append(f"net.netfilter.nf_conntrack_tcp_timeout_established={self.tcp_established_timeout}")
        if self.tcp_close_wait_timeout:
            out.append(f"net.netfilter.nf_conntrack_tcp_timeout_close_wait={self.tcp_close_wait_timeout}")
        if self.tcp_be_liberal:
            out.append("net.netfilter.nf_conntrack_tcp_be_liberal=1")
        return out


def conntrack_settings(kube_proxy_configuration: dict, cpus: int | None = None) -> ConntrackSettings:
    """getConntrackMax and setupConntrack: maxPerCore 32768 and min 131072 by default, TCP
    established timeout 24h, close-wait 1h (pkg/proxy/apis/config/v1alpha1 defaults)."""
    conntrack = (kube_proxy_configuration or {}).get("conntrack") or {}
    per_core = conntrack.get("maxPerCore", 32768)
    floor = conntrack.get("min", 131072) or 0
    cpus = cpus or os.cpu_count() or 1
    maximum = max(per_core * cpus, floor) if per_core and per_core > 0 else 0
    return ConntrackSettings(
        max=maximum,
        tcp_established_timeout=_seconds(conntrack.get("tcpEstablishedTimeout", "24h0m0s"), "tcpEstablishedTimeout"),
        tcp_close_wait_timeout=_seconds(conntrack.get("tcpCloseWaitTimeout", "1h0m0s"), "tcpCloseWaitTimeout"),
        tcp_be_liberal=bool(conntrack.get("tcpBeLiberal", False)),
    )


# -- kubelet's chains and the CNI's masquerade --------------------------------------------------------

def kubelet_rules() -> str:
    """kubelet's syncIPTablesRules for IPv4 plus its canaries, as iptables-restore --noflush input."""
    return (
        "*mangle\n"
        f":{HINT_CHAIN} - [0:0]\n"
        f":{KUBELET_CANARY} - [0:0]\n"
        "COMMIT\n"
        "*filter\n"
        ":KUBE-FIREWALL - [0:0]\n"
        f":{KUBELET_CANARY} - [0:0]\n"
        "-I OUTPUT 1 -j KUBE-FIREWALL\n"
        "-I INPUT 1 -j KUBE-FIREWALL\n"
        '-A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 '
        "! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP\n"
        "COMMIT\n"
        "*nat\n"
        f":{KUBELET_CANARY} - [0:0]\n"
        "COMMIT\n"
    )


def kubelet_rules_ipv6() -> str:
    """kubelet's IPv6 client: the hint chain and the canaries only (no KUBE-FIREWALL for IPv6)."""
    return "".join(f"*{table}\n" + (f":{HINT_CHAIN} - [0:0]\n" if table == "mangle" else "")
                   + f":{KUBELET_CANARY} - [0:0]\nCOMMIT\n" for table in ("mangle", "filter", "nat"))


def egress_masquerade(cluster_cidr: str) -> str:
    """The CNI's egress masquerade (what ipMasq does in CNI plugins), in the form of kind's
    kindnetd masquerade agent (kubernetes-sigs/kind, images/kindnetd, masq.go): traffic leaving
    the node for anything but a local address or the cluster's pod network is masqueraded, so pods
    reach machines outside the cluster (which know no route back to pod IPs) and other nodes see
    the node's address. Appended to nat POSTROUTING, after kube-proxy's KUBE-POSTROUTING jump."""
    return (
        "*nat\n"
        f":{MASQ_AGENT_CHAIN} - [0:0]\n"
        f'-A {MASQ_AGENT_CHAIN} -d {cluster_cidr} -m comment --comment "kind-masq-agent: local traffic is not '
        'subject to MASQUERADE" -j RETURN\n'
        f'-A {MASQ_AGENT_CHAIN} -m comment --comment "kind-masq-agent: outbound traffic is subject to '
        'MASQUERADE (must be last in chain)" -j MASQUERADE\n'
        '-A POSTROUTING -m addrtype ! --dst-type LOCAL -m comment --comment "kind-masq-agent: ensure nat '
        f'POSTROUTING directs all non-LOCAL destination traffic to our custom {MASQ_AGENT_CHAIN} chain" '
        f"-j {MASQ_AGENT_CHAIN}\n"
        "COMMIT\n"
    )


def prepare(netns: str, kube_proxy_configuration: dict, *, localhost_nodeports: bool = True) -> None:
    """Everything of a node but kube-proxy's syncs, in the order a node gets it (see above)."""
    sysctls = list(brnetfilter.NODE_SYSCTLS)
    sysctls += conntrack_settings(kube_proxy_configuration).per_namespace()
    if localhost_nodeports:
        sysctls.append("net.ipv4.conf.all.route_localnet=1")
    run_in(netns, ["sysctl", "-qw", *sysctls])
    cluster_cidr = (kube_proxy_configuration or {}).get("clusterCIDR")
    text = kubelet_rules() + (egress_masquerade(cluster_cidr) if cluster_cidr else "")
    load.restore(netns, text, noflush=True)
    load.restore(netns, kubelet_rules_ipv6(), noflush=True, family="IPv6")


def node_sysctls(netns: str) -> dict[str, str]:
    """The node's bridge-nf-call-iptables and conntrack timeouts, as the kernel has them now."""
    names = ["net.bridge.bridge-nf-call-iptables", "net.netfilter.nf_conntrack_tcp_timeout_established",
             "net.netfilter.nf_conntrack_tcp_timeout_close_wait"]
    out = run_in(netns, ["sysctl", *names], check=False).stdout
    return {k.strip(): v.strip() for k, _, v in (line.partition("=") for line in out.splitlines()) if k.strip()}
