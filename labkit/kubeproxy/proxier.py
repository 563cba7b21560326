"""render(): the iptables-restore input kube-proxy's iptables proxier writes for one node.

Kubernetes v1.34. A reconstruction of `syncProxyRules` in pkg/proxy/iptables/proxier.go of
kubernetes/kubernetes at commit 531be81 (master after v1.33, the v1.34 development line; the rule
layout has been stable since about 1.28) and of `CategorizeEndpoints` in pkg/proxy/topology.go. Every rule below is written in the same
order, with the same arguments, as upstream; comments name the upstream step.

Where older releases differ (for reading blog posts and old dumps):
- before ~1.24 eTP=Local used KUBE-XLB-<hash> chains; there were no KUBE-EXT / KUBE-SVL chains,
  and missing local endpoints jumped to KUBE-MARK-DROP;
- before 1.28 (IPTablesOwnershipCleanup) KUBE-MARK-DROP existed and kubelet also wrote
  KUBE-MARK-MASQ / KUBE-POSTROUTING;
- before 1.27 every sync rewrote every chain (no partial syncs, MinimizeIPTablesRestore);
- before ~1.29 there were no nfacct counters (-m nfacct) on the INVALID-drop and localhost
  NodePort rules, and older releases wrote "-d X/32" and a KUBE-NODEPORTS "-s 127.0.0.0/8" masquerade rule.

The order in which kube-proxy visits Services is Go's map order, random on every sync; here it is
namespace/name order. Upstream's tests compare after `sortIPTablesRules` (see canonical.py), and
the kernel's behaviour does not depend on it (rules of different services never overlap).
"""

from __future__ import annotations

import ipaddress
from typing import Iterable

import labkit.kubeproxy.chains as chains
from labkit.kubeproxy.config import CT_STATE_INVALID_DROPPED, LOCALHOST_NODEPORTS_ACCEPTED, ProxierConfig
from labkit.kubeproxy.objects import ClusterState, EndpointInfo, ServicePortInfo, build_state

KUBE_SERVICES = "KUBE-SERVICES"
KUBE_EXTERNAL_SERVICES = "KUBE-EXTERNAL-SERVICES"
KUBE_NODEPORTS = "KUBE-NODEPORTS"
KUBE_POSTROUTING = "KUBE-POSTROUTING"
KUBE_MARK_MASQ = "KUBE-MARK-MASQ"
KUBE_FORWARD = "KUBE-FORWARD"
KUBE_PROXY_FIREWALL = "KUBE-PROXY-FIREWALL"
KUBE_FIREWALL = "KUBE-FIREWALL"             # kubelet's anti-martian chain, duplicated by kube-proxy
NODEPORTS_COMMENT = '"kubernetes service nodeports; NOTE: this must be the last rule in this chain"'

# iptablesJumpChains + iptablesKubeletJumpChains: (table, from chain, to chain, comment, extra args).
# kube-proxy installs each with EnsureRule(Prepend) on a full sync, outside iptables-restore.
JUMP_CHAINS = (
    ("filter", "INPUT", KUBE_EXTERNAL_SERVICES, "kubernetes externally-visible service portals", ("-m", "conntrack", "--ctstate", "NEW")),
    ("filter", "FORWARD", KUBE_EXTERNAL_SERVICES, "kubernetes externally-visible service portals", ("-m", "conntrack", "--ctstate", "NEW")),
    ("filter", "INPUT", KUBE_NODEPORTS, "kubernetes health check service ports", ()),
    ("filter", "FORWARD", KUBE_SERVICES, "kubernetes service portals", ("-m", "conntrack", "--ctstate", "NEW")),
    ("filter", "OUTPUT", KUBE_SERVICES, "kubernetes service portals", ("-m", "conntrack", "--ctstate", "NEW")),
    ("filter", "FORWARD", KUBE_FORWARD, "kubernetes forwarding rules", ()),
    ("filter", "INPUT", KUBE_PROXY_FIREWALL, "kubernetes load balancer firewall", ("-m", "conntrack", "--ctstate", "NEW")),
    ("filter", "OUTPUT", KUBE_PROXY_FIREWALL, "kubernetes load balancer firewall", ("-m", "conntrack", "--ctstate", "NEW")),
    ("filter", "FORWARD", KUBE_PROXY_FIREWALL, "kubernetes load balancer firewall", ("-m", "conntrack", "--ctstate", "NEW")),
    ("nat", "OUTPUT", KUBE_SERVICES, "kubernetes service portals", ()),
    ("nat", "PREROUTING", KUBE_SERVICES, "kubernetes service portals", ()),
    ("nat", "POSTROUTING", KUBE_POSTROUTING, "kubernetes postrouting rules", ()),
    ("filter", "INPUT", KUBE_FIREWALL, "", ()),
    ("filter", "OUTPUT", KUBE_FIREWALL, "", ()),
)


def jump_rules() -> list[tuple[str, str, list[str]]]:
    """The jump rules from built-in chains, in the order kube-proxy ensures them:
    (table, chain, rule arguments). Each is inserted at position 1 (-I CHAIN 1) if missing,
    so on a fresh node they end up in reverse order."""
    rules = []
    for table, src, dst, comment, extra in JUMP_CHAINS:
        args = list(extra) + (["-m", "comment", "--comment", comment] if comment else []) + ["-j", dst]
        rules.append((table, src, args))
    return rules


def categorize_endpoints(endpoints: list[EndpointInfo], sp: ServicePortInfo, node_name: str,
                         zone: str = "") -> tuple[list[EndpointInfo], list[EndpointInfo], list[EndpointInfo], bool]:
    """CategorizeEndpoints (pkg/proxy/topology.go): (cluster, local, all reachable, has any).

    "Usable" means ready; if none is, serving-and-terminating ones (separately for Cluster and
    Local). Topology: if every ready endpoint has a node hint and one names this node, only those
    (PreferSameNode; PreferSameTrafficDistribution is beta and on since 1.34); otherwise if every
    ready endpoint has a zone hint and one names this node's zone, only those (PreferSameZone).
    """
    cluster: list[EndpointInfo] = []
    local: list[EndpointInfo] = []
    has_any = False
    if not endpoints:
        return cluster, local, [], False
    topology_mode = ""
    if sp.uses_cluster_endpoints:
        topology_mode = _topology_mode(endpoints, node_name, zone)
        cluster = [e for e in endpoints if e.ready and _available(e, topology_mode, node_name, zone)]
        if not cluster:
            cluster = [e for e in endpoints if e.serving and e.terminating]
        has_any = bool(cluster)
    if not sp.uses_local_endpoints:
        return cluster, local, cluster, has_any
    local_ready = local_terminating = False
    for e in endpoints:
        if e.ready:
            has_any = True
            local_ready = local_ready or e.is_local
        elif e.serving and e.terminating:
            has_any = True
            local_terminating = local_terminating or e.is_local
    use_terminating = False
    if local_ready:
        local = [e for e in endpoints if e.is_local and e.ready]
    elif local_terminating:
        use_terminating = True
        local = [e for e in endpoints if e.is_local and e.serving and e.terminating]
    if not sp.uses_cluster_endpoints:
        return cluster, local, local, has_any
    if topology_mode == "" and not use_terminating:
        return cluster, local, cluster, has_any
    merged = {e.endpoint: e for e in cluster}
    merged.update((e.endpoint, e) for e in local)
    return cluster, local, [merged[k] for k in sorted(merged)], has_any


def _topology_mode(endpoints: list[EndpointInfo], node_name: str, zone: str) -> str:
    ready = [e for e in endpoints if e.ready]
    if not ready:
        return ""
    if all(e.node_hints for e in ready) and any(node_name in e.node_hints for e in ready):
        return "PreferSameNode"
    if all(e.zone_hints for e in ready) and any(zone in e.zone_hints for e in ready):
        return "PreferSameZone"
    return ""


def _available(e: EndpointInfo, mode: str, node_name: str, zone: str) -> bool:
    if mode == "":
        return True
    if mode == "PreferSameNode":
        return node_name in e.node_hints
    return zone in e.zone_hints


class _Lines:
    __slots__ = ("lines",)

    def __init__(self):
        self.lines: list[str] = []

    def write(self, *words: str) -> None:
        self.lines.append(" ".join(words))


def render(objects: Iterable[dict], config: ProxierConfig, *, existing_nat_chains: Iterable[str] | None = None,
           changed_services: Iterable[str] | None = None, metrics: dict | None = None) -> str:
    """The iptables-restore text kube-proxy writes for `objects` on the node of `config`.

    objects: Services and EndpointSlices (dicts, e.g. from load_objects).
    existing_nat_chains: chain names now in the node's nat table (what kube-proxy reads with
        iptables-save -t nat); per-service chains no longer in use get ":CHAIN" plus "-X CHAIN".
        None: a fresh node, nothing to delete.
    changed_services: None for a full sync; otherwise a partial sync that rewrites the
        SVC/SVL/EXT/FW/SEP chains only of these "namespace/name" services (see changed_services()).
    metrics: a dict to receive the gauges kube-proxy sets at the end of this sync (syncProxyRules):
        "sync_proxy_rules_no_local_endpoints_total": {"internal": n, "external": n} (service ports
        whose Local traffic policy finds no local endpoint while other endpoints exist), and
        "iptables_rules_total" / "iptables_rules_last_sync": {"filter": n, "nat": n}.
    """
    return _render(build_state(objects, config), config, existing_nat_chains, changed_services, metrics)


def large_cluster_mode(objects: Iterable[dict], config: ProxierConfig) -> bool:
    """proxier.largeClusterMode of syncProxyRules: more endpoints (summed over the service ports
    this proxier handles) than largeClusterEndpointsThreshold (1000). In that mode rule comments
    are left off the per-endpoint rules, and stale chains are deleted at most once per syncPeriod."""
    return _large_cluster(build_state(objects, config), config)


def health_check_services(objects: Iterable[dict], config: ProxierConfig) -> list[dict]:
    """What kube-proxy's service health server serves on this node: for every Service with a
    healthCheckNodePort (type LoadBalancer, externalTrafficPolicy Local), the port and its count
    of ready local endpoints. proxier.go syncProxyRules ends with
    serviceHealthServer.SyncServices(svcPortMap.HealthCheckNodePorts()) and
    SyncEndpoints(endpointsMap.LocalReadyEndpoints()); the count adds up, per service port, the
    endpoints that are local and ready (EndpointsMap.LocalReadyEndpoints, pkg/proxy/endpoints.go)."""
    state = build_state(objects, config)
    out: dict[str, dict] = {}
    for sp in state.service_ports:
        if not sp.health_check_node_port:
            continue
        entry = out.setdefault(sp.service, {"namespace": sp.namespace, "name": sp.name,
                                             "port": sp.health_check_node_port, "localEndpoints": 0})
        entry["localEndpoints"] += sum(1 for e in state.endpoints_for(sp) if e.is_local and e.ready)
    return list(out.values())


def _large_cluster(state: ClusterState, cfg: ProxierConfig) -> bool:
    total_endpoints = sum(len(state.endpoints_for(sp)) for sp in state.service_ports)
    return total_endpoints > cfg.large_cluster_endpoints_threshold


def _render(state: ClusterState, cfg: ProxierConfig, existing_nat_chains, changed_services, metrics=None) -> str:
    full_sync = changed_services is None
    changed = set(changed_services or ())
    mark = cfg.mark
    ipv6 = cfg.ipv6
    detector = cfg.local_detector()
    filter_chains, filter_rules, nat_chains, nat_rules = _Lines(), _Lines(), _Lines(), _Lines()
    skipped = _Lines()       # chains and rules of unchanged services in a partial sync (not written)

    # Chain lines for the top-level chains.
    for chain in (KUBE_SERVICES, KUBE_EXTERNAL_SERVICES, KUBE_FORWARD, KUBE_NODEPORTS, KUBE_PROXY_FIREWALL):
        filter_chains.write(f":{chain} - [0:0]")
    for chain in (KUBE_SERVICES, KUBE_NODEPORTS, KUBE_POSTROUTING, KUBE_MARK_MASQ):
        nat_chains.write(f":{chain} - [0:0]")

    # The postrouting and mark-for-masquerade rules.
    nat_rules.write("-A", KUBE_POSTROUTING, "-m", "mark", "!", "--mark", f"{mark}/{mark}", "-j", "RETURN")
    nat_rules.write("-A", KUBE_POSTROUTING, "-j", "MARK", "--xor-mark", mark)
    masq = ["-A", KUBE_POSTROUTING, "-m", "comment", "--comment", '"kubernetes service traffic requiring SNAT"', "-j", "MASQUERADE"]
    if cfg.random_fully:
        masq.append("--random-fully")
    nat_rules.write(*masq)
    nat_rules.write("-A", KUBE_MARK_MASQ, "-j", "MARK", "--or-mark", mark)

    # kubelet's anti-martian rule, needed because of route_localnet (IPv4 localhost NodePorts).
    if not ipv6 and cfg.localhost_nodeports:
        filter_chains.write(f":{KUBE_FIREWALL} - [0:0]")
        filter_rules.write("-A", KUBE_FIREWALL, "-m", "comment", "--comment", '"block incoming localnet connections"',
                           "-d", "127.0.0.0/8", "!", "-s", "127.0.0.0/8", "-m", "conntrack", "!", "--ctstate",
                           "RELATED,ESTABLISHED,DNAT", "-j", "DROP")

    active_nat_chains: set[str] = set()
    large_cluster = _large_cluster(state, cfg)
    localhost_nodeport_rule = cfg.localhost_nodeports and not ipv6 and cfg.has_counter(LOCALHOST_NODEPORTS_ACCEPTED)

    no_local_internal = no_local_external = 0

    def comment(args: list[str], text: str) -> list[str]:
        # appendServiceCommentLocked: comments are left off in large-cluster mode.
        return args if large_cluster else args + ["-m", "comment", "--comment", text]

    for sp in state.service_ports:
        proto = sp.proto
        name = sp.name_string
        port = str(sp.port)
        port_hash = chains.port_proto_hash(name, proto)
        cluster_chain = chains.SERVICE_PREFIX + port_hash
        local_chain = chains.LOCAL_SERVICE_PREFIX + port_hash
        ext_chain = chains.EXTERNAL_PREFIX + port_hash
        fw_chain = chains.FIREWALL_PREFIX + port_hash

        cluster_eps, local_eps, reachable_eps, has_endpoints = categorize_endpoints(
            state.endpoints_for(sp), sp, cfg.hostname, cfg.topology_zone)
        uses_cluster_chain = bool(cluster_eps) and sp.uses_cluster_endpoints
        uses_local_chain = bool(local_eps) and sp.uses_local_endpoints

        internal_chain, has_internal = cluster_chain, has_endpoints
        if sp.internal_policy_local:
            internal_chain = local_chain
            has_internal = has_internal and bool(local_eps)
        external_policy_chain, has_external = cluster_chain, has_endpoints
        if sp.external_policy_local:
            external_policy_chain = local_chain
            has_external = has_external and bool(local_eps)
        uses_ext = has_endpoints and sp.externally_accessible
        uses_fw = has_endpoints and bool(sp.load_balancer_vips) and bool(sp.load_balancer_source_ranges)
        lb_chain = fw_chain if uses_fw else ext_chain

        if not has_endpoints:
            internal_target, internal_comment = "REJECT", f'"{name} has no endpoints"'
            external_target, external_comment = "REJECT", internal_comment
        else:
            internal_target = internal_comment = external_target = external_comment = ""
            if not has_internal:
                internal_target, internal_comment = "DROP", f'"{name} has no local endpoints"'
                no_local_internal += 1          # serviceNoLocalEndpointsTotalInternal
            if not has_external:
                external_target, external_comment = "DROP", f'"{name} has no local endpoints"'
                no_local_external += 1          # serviceNoLocalEndpointsTotalExternal

        match = ["-m", proto, "-p", proto]
        # Capture the cluster IP.
        if has_internal:
            nat_rules.write("-A", KUBE_SERVICES, "-m", "comment", "--comment", f'"{name} cluster IP"', *match,
                            "-d", sp.cluster_ip, "--dport", port, "-j", internal_chain)
        else:
            filter_rules.write("-A", KUBE_SERVICES, "-m", "comment", "--comment", internal_comment, *match,
                               "-d", sp.cluster_ip, "--dport", port, "-j", internal_target)
        # Capture external IPs.
        for ip in sp.external_ips:
            if has_endpoints:
                nat_rules.write("-A", KUBE_SERVICES, "-m", "comment", "--comment", f'"{name} external IP"', *match,
                                "-d", ip, "--dport", port, "-j", ext_chain)
            if not has_external:
                filter_rules.write("-A", KUBE_EXTERNAL_SERVICES, "-m", "comment", "--comment", external_comment, *match,
                                   "-d", ip, "--dport", port, "-j", external_target)
        # Capture load-balancer ingress IPs.
        for ip in sp.load_balancer_vips:
            if has_endpoints:
                nat_rules.write("-A", KUBE_SERVICES, "-m", "comment", "--comment", f'"{name} loadbalancer IP"', *match,
                                "-d", ip, "--dport", port, "-j", lb_chain)
            if uses_fw:
                filter_rules.write("-A", KUBE_PROXY_FIREWALL, "-m", "comment", "--comment",
                                   f'"{name} traffic not accepted by {fw_chain}"', *match, "-d", ip, "--dport", port,
                                   "-j", "DROP")
        if not has_external:
            for ip in sp.load_balancer_vips:
                filter_rules.write("-A", KUBE_EXTERNAL_SERVICES, "-m", "comment", "--comment", external_comment, *match,
                                   "-d", ip, "--dport", port, "-j", external_target)
        # Capture node ports.
        if sp.node_port:
            node_port = str(sp.node_port)
            if has_endpoints:
                if localhost_nodeport_rule:
                    nat_rules.write("-A", KUBE_NODEPORTS, "-m", "comment", "--comment", name, *match,
                                    "-d", "127.0.0.0/8", "--dport", node_port,
                                    "-m", "nfacct", "--nfacct-name", LOCALHOST_NODEPORTS_ACCEPTED, "-j", ext_chain)
                nat_rules.write("-A", KUBE_NODEPORTS, "-m", "comment", "--comment", name, *match,
                                "--dport", node_port, "-j", ext_chain)
            if not has_external:
                filter_rules.write("-A", KUBE_EXTERNAL_SERVICES, "-m", "comment", "--comment", external_comment,
                                   "-m", "addrtype", "--dst-type", "LOCAL", *match, "--dport", node_port,
                                   "-j", external_target)
        # Capture health-check node ports (accepted whether or not there are local endpoints).
        if sp.health_check_node_port:
            filter_rules.write("-A", KUBE_NODEPORTS, "-m", "comment", "--comment", f'"{name} health check node port"',
                               "-m", "tcp", "-p", "tcp", "--dport", str(sp.health_check_node_port), "-j", "ACCEPT")

        # A partial sync leaves the per-service chains of unchanged services as they are.
        if full_sync or sp.service in changed:
            svc_chains, svc_rules = nat_chains, nat_rules
        else:
            svc_chains, svc_rules = skipped, skipped

        # Internal traffic: masquerade off-cluster traffic to the cluster IP.
        if has_internal:
            args = ["-m", "comment", "--comment", f'"{name} cluster IP"', *match, "-d", sp.cluster_ip, "--dport", port]
            if cfg.masquerade_all:
                svc_rules.write("-A", internal_chain, *args, "-j", KUBE_MARK_MASQ)
            elif detector is not None:
                svc_rules.write("-A", internal_chain, *args, *detector[1], "-j", KUBE_MARK_MASQ)

        # External traffic: the KUBE-EXT dispatcher.
        if uses_ext:
            svc_chains.write(f":{ext_chain} - [0:0]")
            active_nat_chains.add(ext_chain)
            if not sp.external_policy_local:
                svc_rules.write("-A", ext_chain, "-m", "comment", "--comment",
                                f'"masquerade traffic for {name} external destinations"', "-j", KUBE_MARK_MASQ)
            else:
                if detector is not None:
                    svc_rules.write("-A", ext_chain, "-m", "comment", "--comment",
                                    f'"pod traffic for {name} external destinations"', *detector[0], "-j", cluster_chain)
                svc_rules.write("-A", ext_chain, "-m", "comment", "--comment",
                                f'"masquerade LOCAL traffic for {name} external destinations"',
                                "-m", "addrtype", "--src-type", "LOCAL", "-j", KUBE_MARK_MASQ)
                svc_rules.write("-A", ext_chain, "-m", "comment", "--comment",
                                f'"route LOCAL traffic for {name} external destinations"',
                                "-m", "addrtype", "--src-type", "LOCAL", "-j", cluster_chain)
            if has_external:
                svc_rules.write("-A", ext_chain, "-j", external_policy_chain)

        # Firewall chain for loadBalancerSourceRanges.
        if uses_fw:
            svc_chains.write(f":{fw_chain} - [0:0]")
            active_nat_chains.add(fw_chain)
            args = ["-A", fw_chain, "-m", "comment", "--comment", f'"{name} loadbalancer IP"']
            allow_from_node = False
            node_ip = cfg.node_ip
            for cidr in sp.load_balancer_source_ranges:
                svc_rules.write(*args, "-s", cidr, "-j", ext_chain)
                if node_ip is not None and _contains(cidr, node_ip):
                    allow_from_node = True
            if allow_from_node:
                for ip in sp.load_balancer_vips:
                    svc_rules.write(*args, "-s", ip, "-j", ext_chain)
            svc_rules.write("-A", fw_chain, "-m", "comment", "--comment",
                            f'"other traffic to {name} will be dropped by KUBE-PROXY-FIREWALL"')

        # The endpoint pickers.
        ep_cache: dict[str, str] = {}
        if uses_cluster_chain:
            svc_chains.write(f":{cluster_chain} - [0:0]")
            active_nat_chains.add(cluster_chain)
            _service_to_endpoints(svc_rules, name, sp, cluster_chain, cluster_eps, comment, ep_cache)
        if uses_local_chain:
            svc_chains.write(f":{local_chain} - [0:0]")
            active_nat_chains.add(local_chain)
            _service_to_endpoints(svc_rules, name, sp, local_chain, local_eps, comment, ep_cache)

        # The per-endpoint chains.
        for ep in reachable_eps:
            if ep.endpoint not in ep_cache:
                ep_cache[ep.endpoint] = chains.endpoint_chain(name, proto, ep.endpoint)
            ep_chain = ep_cache[ep.endpoint]
            svc_chains.write(f":{ep_chain} - [0:0]")
            active_nat_chains.add(ep_chain)
            args = comment(["-A", ep_chain], name)
            svc_rules.write(*args, "-s", ep.ip, "-j", KUBE_MARK_MASQ)        # hairpin: the endpoint reaching itself
            if sp.session_affinity_client_ip:
                args = args + ["-m", "recent", "--name", ep_chain, "--set"]
            svc_rules.write(*args, *match, "-j", "DNAT", "--to-destination", ep.endpoint)

    # Delete chains no longer in use (kube-proxy lists them with iptables-save -t nat).
    # syncProxyRules does this only `if !largeClusterMode || time.Since(lastIPTablesCleanup) >
    # syncPeriod`: above the large-cluster threshold stale chains linger until a sync period has
    # passed since the last cleanup. labkit's syncs have no clock; a caller modelling that delay
    # passes existing_nat_chains=None for the syncs in between.
    deleted_chains = 0
    if existing_nat_chains is not None:
        for chain in sorted(set(existing_nat_chains) - active_nat_chains):
            if chains.is_service_chain(chain):
                nat_chains.write(f":{chain} - [0:0]")
                nat_rules.write("-X", chain)
                deleted_chains += 1

    # Finally, the jump to KUBE-NODEPORTS, last in KUBE-SERVICES.
    if not cfg.nodeport_addresses_for_family():
        destinations = ["-m", "addrtype", "--dst-type", "LOCAL"]
        if ipv6:
            destinations += ["!", "-d", "::1/128"]
        elif not cfg.localhost_nodeports:
            destinations += ["!", "-d", "127.0.0.0/8"]
        nat_rules.write("-A", KUBE_SERVICES, "-m", "comment", "--comment", NODEPORTS_COMMENT, *destinations,
                        "-j", KUBE_NODEPORTS)
    else:
        for ip in cfg.nodeport_ips():
            if ipaddress.ip_address(ip).is_loopback:
                if ipv6 or not cfg.localhost_nodeports:
                    continue           # upstream logs an error and skips the loopback address
            nat_rules.write("-A", KUBE_SERVICES, "-m", "comment", "--comment", NODEPORTS_COMMENT, "-d", ip,
                            "-j", KUBE_NODEPORTS)

    # Drop INVALID packets unless nf_conntrack_tcp_be_liberal is set, then accept marked and
    # established forwarded traffic.
    if not cfg.conntrack_tcp_be_liberal:
        rule = ["-A", KUBE_FORWARD, "-m", "conntrack", "--ctstate", "INVALID"]
        if cfg.has_counter(CT_STATE_INVALID_DROPPED):
            rule += ["-m", "nfacct", "--nfacct-name", CT_STATE_INVALID_DROPPED]
        filter_rules.write(*rule, "-j", "DROP")
    filter_rules.write("-A", KUBE_FORWARD, "-m", "comment", "--comment", '"kubernetes forwarding rules"',
                       "-m", "mark", "--mark", f"{mark}/{mark}", "-j", "ACCEPT")
    filter_rules.write("-A", KUBE_FORWARD, "-m", "comment", "--comment", '"kubernetes forwarding conntrack rule"',
                       "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ACCEPT")

    if metrics is not None:
        # The gauges syncProxyRules sets: rule counts are LineBuffer line counts (a "-X" line
        # counts as a nat rule, hence "- deletedChains"; skipped rules of unchanged services
        # still count towards the total).
        metrics["sync_proxy_rules_no_local_endpoints_total"] = {"internal": no_local_internal, "external": no_local_external}
        metrics["iptables_rules_total"] = {"filter": len(filter_rules.lines),
                                           "nat": len(nat_rules.lines) + _rule_lines(skipped) - deleted_chains}
        metrics["iptables_rules_last_sync"] = {"filter": len(filter_rules.lines), "nat": len(nat_rules.lines) - deleted_chains}

    parts = ["*filter", *filter_chains.lines, *filter_rules.lines, "COMMIT",
             "*nat", *nat_chains.lines, *nat_rules.lines, "COMMIT"]
    return "\n".join(parts) + "\n"


def _service_to_endpoints(rules: _Lines, name: str, sp: ServicePortInfo, chain: str,
                          endpoints: list[EndpointInfo], comment, cache: dict) -> None:
    """writeServiceToEndpointRules: affinity checks first, then the statistic cascade."""
    ep_chains = []
    for ep in endpoints:
        if ep.endpoint not in cache:
            cache[ep.endpoint] = chains.endpoint_chain(name, sp.proto, ep.endpoint)
        ep_chains.append(cache[ep.endpoint])
    if sp.session_affinity_client_ip:
        for ep, ep_chain in zip(endpoints, ep_chains):
            args = comment(["-A", chain], f'"{name} -> {ep.endpoint}"')
            rules.write(*args, "-m", "recent", "--name", ep_chain, "--rcheck", "--seconds",
                        str(sp.sticky_max_age_seconds), "--reap", "-j", ep_chain)
    n = len(endpoints)
    for i, (ep, ep_chain) in enumerate(zip(endpoints, ep_chains)):
        args = comment(["-A", chain], f'"{name} -> {ep.endpoint}"')
        if i < n - 1:
            args += ["-m", "statistic", "--mode", "random", "--probability", chains.probability(n - i)]
        rules.write(*args, "-j", ep_chain)


def _rule_lines(lines: _Lines) -> int:
    """Rule lines of a discard buffer that also held chain lines (":CHAIN - [0:0]")."""
    return sum(1 for line in lines.lines if not line.startswith(":"))


def _contains(cidr: str, ip: str) -> bool:
    return ipaddress.ip_address(ip) in ipaddress.ip_network(cidr, strict=False)


def changed_services(old_objects: Iterable[dict], new_objects: Iterable[dict], config: ProxierConfig) -> set[str]:
    """The "namespace/name" services a partial sync rewrites after old_objects became new_objects.

    As kube-proxy's change trackers see it: a Service whose ports, as kube-proxy reads them
    (ServicePortMap), differ (added, removed, changed), or any of whose EndpointSlices changed in
    any way (EndpointSliceCache compares whole objects).
    """
    old, new = build_state(old_objects, config), build_state(new_objects, config)

    def ports(state: ClusterState) -> dict[str, list]:
        grouped: dict[str, list] = {}
        for sp in state.service_ports:
            grouped.setdefault(sp.service, []).append(sp)
        return {k: sorted(v, key=lambda p: (p.port_name, p.protocol)) for k, v in grouped.items()}

    old_ports, new_ports = ports(old), ports(new)
    changed = {s for s in old_ports.keys() | new_ports.keys() if old_ports.get(s) != new_ports.get(s)}
    changed |= {s for s in old.slices_by_service.keys() | new.slices_by_service.keys()
                if old.slices_by_service.get(s) != new.slices_by_service.get(s)}
    return changed
