"""kube-proxy's iptables mode, reconstructed: Services + EndpointSlices -> the node's rules.

Public API (stable; the live kube-proxy lab and the checks build on it):

    load_objects(source) -> list[dict]
        Services and EndpointSlices (discovery.k8s.io/v1) from YAML text, a path, a dict or a
        list of dicts; multi-document YAML and `kind: List` both work; other kinds are ignored.
        Malformed objects raise labkit.errors.ConfigError naming file, object and field.

    ProxierConfig(...)                       the node: hostname, node_ips, ip_family,
        detect_local_mode + cluster_cidr (or pod_cidr / bridge_interface / interface_name_prefix),
        masquerade_bit (or masquerade_mark), masquerade_all, localhost_nodeports,
        nodeport_addresses, local_addresses (interface addresses, loopback included),
        random_fully, nfacct_counters, conntrack_tcp_be_liberal, topology_zone.
    ProxierConfig.from_kube_proxy_configuration(yaml_or_path_or_dict, **overrides)
        as cmd/kube-proxy derives it from a KubeProxyConfiguration (v1alpha1).

    render(objects, config, *, existing_nat_chains=None, changed_services=None) -> str
        The iptables-restore input kube-proxy writes on a sync (full by default). Objects
        kube-proxy ignores are skipped with a warning on the "labkit.kubeproxy" logger.
    changed_services(old_objects, new_objects, config) -> set[str]
        The services a partial sync would rewrite.
    large_cluster_mode(objects, config) -> bool
        More endpoints than largeClusterEndpointsThreshold: no comments on per-endpoint rules,
        stale chains deleted at most once per syncPeriod (the caller's clock decides).
    jump_rules() -> [(table, chain, args)]
        The jump rules from built-in chains kube-proxy installs outside iptables-restore.
    sort_rules(text) -> str
        kube-proxy's canonical order (sortIPTablesRules of its unit tests), for comparisons.

    Chain names ("kube-proxy would name this chain X"):
        service_port_name(namespace, name, port_name="") -> "ns/name[:port]"
        service_chain(spn, protocol)        KUBE-SVC-…   (Cluster policy endpoint picker)
        local_service_chain(spn, protocol)  KUBE-SVL-…   (Local policy endpoint picker)
        external_chain(spn, protocol)       KUBE-EXT-…
        firewall_chain(spn, protocol)       KUBE-FW-…
        endpoint_chain(spn, protocol, "ip:port")  KUBE-SEP-…
        probability(n)                      "%0.10f" of 1/n

    sync_node(netns, objects, config) (labkit.kubeproxy.sync)
        A kube-proxy full sync into a lab network namespace: jump rules, nfacct counters,
        stale-chain cleanup and iptables-legacy-restore --noflush.

Kubernetes v1.34, the version labkit reconstructs. Upstream: kubernetes/kubernetes
pkg/proxy/iptables/proxier.go at commit 531be81 (master after v1.33, the v1.34 development line)
and the helpers it calls; see proxier.py for where older releases differ.
"""

from labkit.kubeproxy.canonical import sort_rules
from labkit.kubeproxy.chains import (
    endpoint_chain, external_chain, firewall_chain, local_service_chain, probability, service_chain,
    service_port_name,
)
from labkit.kubeproxy.config import ProxierConfig
from labkit.kubeproxy.objects import load_objects
from labkit.kubeproxy.proxier import changed_services, jump_rules, large_cluster_mode, render

__all__ = [
    "load_objects", "ProxierConfig", "render", "changed_services", "jump_rules", "sort_rules", "large_cluster_mode",
    "service_port_name", "service_chain", "local_service_chain", "external_chain", "firewall_chain",
    "endpoint_chain", "probability",
]
