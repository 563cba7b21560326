"""Features of the rule generator the shared fidelity cases do not cover.

Each expectation is derived from the upstream source named in the test (kubernetes/kubernetes at
531be81: pkg/proxy/iptables/proxier.go syncProxyRules unless said otherwise), and checked on the
rendered text and, where it is about behaviour, with the packet tracer.
"""

from __future__ import annotations

import logging

import pytest

from kubeproxy_cases import with_jump_rules
from labkit.errors import ConfigError
from labkit.kubeproxy import (ProxierConfig, endpoint_chain, external_chain, firewall_chain, load_objects,
                              local_service_chain, render, service_chain)
from labkit.netfilter import Packet, Tracer

NODE_IP = "192.168.0.2"
LOCAL = [NODE_IP, "127.0.0.1/8", "::1/128"]


def config(**kw) -> ProxierConfig:
    base = dict(hostname="node-a", node_ips=[NODE_IP], cluster_cidr="10.0.0.0/8", masquerade_mark="0x4000",
                local_addresses=[f"{NODE_IP}/24", "127.0.0.1/8", "::1/128"], random_fully=False)
    base.update(kw)
    return ProxierConfig(**base)


def service(name="svc1", ns="ns1", ip="172.30.0.41", port=80, **spec):
    body = {"clusterIP": ip, "ports": [{"name": "p80", "port": port, "protocol": "TCP", **spec.pop("port_extra", {})}]}
    status = spec.pop("status", None)
    body.update(spec)
    obj = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns}, "spec": body}
    if status:
        obj["status"] = status
    return obj


def slice_(endpoints, name="svc1", ns="ns1", port=80, port_name="p80", family="IPv4"):
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": f"{name}-1", "namespace": ns, "labels": {"kubernetes.io/service-name": name}},
            "addressType": family, "ports": [{"name": port_name, "port": port, "protocol": "TCP"}],
            "endpoints": endpoints}


def ep(ip, node=None, **conditions):
    out = {"addresses": [ip]}
    if node:
        out["nodeName"] = node
    if conditions:
        out["conditions"] = conditions
    return out


def rules(text: str, chain: str, table: str = "nat") -> list[str]:
    part = text.split(f"*{table}\n", 1)[1].split("COMMIT", 1)[0]
    return [l for l in part.splitlines() if l.startswith(f"-A {chain} ")]


def trace(text, src, dst, port, local=LOCAL, **kw):
    return Tracer(with_jump_rules(text), local, **kw).trace(Packet(src, dst, port))


SPN = "ns1/svc1:p80"


def test_load_balancer_source_ranges_firewall():
    # syncProxyRules "Set up firewall chain": one rule per source range; if a range holds the
    # node IP, also one per LB IP; then a target-less rule; filter KUBE-PROXY-FIREWALL drops the rest.
    objs = load_objects([service(type="LoadBalancer", port_extra={"nodePort": 30080},
                                 loadBalancerSourceRanges=["192.168.0.0/24", "203.0.113.0/25"],
                                 status={"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}),
                         slice_([ep("10.180.0.1", "node-b")])])
    text = render(objs, config())
    fw = firewall_chain(SPN, "tcp")
    assert rules(text, fw) == [
        f'-A {fw} -m comment --comment "{SPN} loadbalancer IP" -s 192.168.0.0/24 -j {external_chain(SPN, "tcp")}',
        f'-A {fw} -m comment --comment "{SPN} loadbalancer IP" -s 203.0.113.0/25 -j {external_chain(SPN, "tcp")}',
        f'-A {fw} -m comment --comment "{SPN} loadbalancer IP" -s 1.2.3.4 -j {external_chain(SPN, "tcp")}',
        f'-A {fw} -m comment --comment "other traffic to {SPN} will be dropped by KUBE-PROXY-FIREWALL"',
    ]
    assert rules(text, "KUBE-PROXY-FIREWALL", "filter") == [
        f'-A KUBE-PROXY-FIREWALL -m comment --comment "{SPN} traffic not accepted by {fw}" -m tcp -p tcp -d 1.2.3.4 --dport 80 -j DROP']
    allowed = trace(text, "203.0.113.9", "1.2.3.4", 80)
    assert allowed.dnat == [{"target": "10.180.0.1:80", "probability": 1.0}] and allowed.masquerade
    blocked = trace(text, "203.0.113.200", "1.2.3.4", 80)
    assert blocked.dnat == [] and blocked.verdict == "DROP" and blocked.output == "DROP"
    # NodePorts are not subject to source ranges.
    assert trace(text, "203.0.113.200", NODE_IP, 30080).dnat[0]["target"] == "10.180.0.1:80"


def test_zero_source_range_and_proxy_ip_mode():
    # serviceport.go: a zero-masked CIDR means "allow any" (no KUBE-FW); util IsVIPMode: an
    # ingress with ipMode Proxy gets no rule.
    objs = load_objects([service(type="LoadBalancer", loadBalancerSourceRanges=["0.0.0.0/0", "203.0.113.0/25"],
                                 status={"loadBalancer": {"ingress": [{"ip": "1.2.3.4"},
                                                                      {"ip": "5.6.7.8", "ipMode": "Proxy"}]}}),
                         slice_([ep("10.180.0.1")])])
    text = render(objs, config())
    assert "KUBE-FW-" not in text
    assert [r for r in rules(text, "KUBE-SERVICES") if "loadbalancer IP" in r] == [
        f'-A KUBE-SERVICES -m comment --comment "{SPN} loadbalancer IP" -m tcp -p tcp -d 1.2.3.4 --dport 80 -j {external_chain(SPN, "tcp")}']


def test_external_ips(caplog):
    # MapIPsByIPFamily: invalid IPs are skipped (logged), other-family IPs left to the other proxier;
    # eTP=Cluster: KUBE-EXT masquerades everything, then jumps to KUBE-SVC.
    objs = load_objects([service(externalIPs=["192.168.99.33", "2001:db8::5", "not-an-ip"], type="ClusterIP"),
                         slice_([ep("10.180.0.4")])])
    with caplog.at_level(logging.WARNING, logger="labkit.kubeproxy"):
        text = render(objs, config())
    assert "Service ns1/svc1" in caplog.text and "not-an-ip" in caplog.text
    ext = external_chain(SPN, "tcp")
    assert [r for r in rules(text, "KUBE-SERVICES") if "external IP" in r] == [
        f'-A KUBE-SERVICES -m comment --comment "{SPN} external IP" -m tcp -p tcp -d 192.168.99.33 --dport 80 -j {ext}']
    assert rules(text, ext) == [
        f'-A {ext} -m comment --comment "masquerade traffic for {SPN} external destinations" -j KUBE-MARK-MASQ',
        f"-A {ext} -j {service_chain(SPN, 'tcp')}"]
    r = trace(text, "203.0.113.2", "192.168.99.33", 80)
    assert r.dnat[0]["target"] == "10.180.0.4:80" and r.masquerade


def test_internal_traffic_policy_local():
    # internalTrafficPolicy Local: cluster-IP traffic goes to KUBE-SVL with local endpoints only;
    # without local endpoints, filter KUBE-SERVICES drops it ("has no local endpoints").
    objs = [service(internalTrafficPolicy="Local"), slice_([ep("10.180.0.1", "node-a"), ep("10.180.2.1", "node-b")])]
    text = render(load_objects(objs), config())
    svl = local_service_chain(SPN, "tcp")
    assert f"-d 172.30.0.41 --dport 80 -j {svl}" in text and service_chain(SPN, "tcp") not in text
    assert trace(text, "10.0.0.2", "172.30.0.41", 80).output == "10.180.0.1:80"
    remote_only = render(load_objects([service(internalTrafficPolicy="Local"), slice_([ep("10.180.2.1", "node-b")])]), config())
    assert rules(remote_only, "KUBE-SERVICES", "filter") == [
        f'-A KUBE-SERVICES -m comment --comment "{SPN} has no local endpoints" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j DROP']
    assert "-A KUBE-SERVICES -m comment --comment \"ns1/svc1:p80 cluster IP\"" not in remote_only
    assert trace(remote_only, "10.0.0.2", "172.30.0.41", 80).verdict == "DROP"


def test_session_affinity_with_external_traffic_policy_local():
    # writeServiceToEndpointRules: ClientIP affinity puts one --rcheck rule per endpoint before
    # the statistic cascade, in KUBE-SVC (all endpoints) and in KUBE-SVL (local ones); each SEP
    # --set's the list named after itself. timeoutSeconds defaults to 10800 (API defaulting).
    svc = service(type="NodePort", externalTrafficPolicy="Local", sessionAffinity="ClientIP",
                  sessionAffinityConfig={"clientIP": {"timeoutSeconds": 60}}, port_extra={"nodePort": 30080})
    text = render(load_objects([svc, slice_([ep("10.180.0.1", "node-a"), ep("10.180.2.1", "node-b")])]), config())
    sep_local = endpoint_chain(SPN, "tcp", "10.180.0.1:80")
    svl = local_service_chain(SPN, "tcp")
    assert rules(text, svl) == [
        f'-A {svl} -m comment --comment "{SPN} -> 10.180.0.1:80" -m recent --name {sep_local} --rcheck --seconds 60 --reap -j {sep_local}',
        f'-A {svl} -m comment --comment "{SPN} -> 10.180.0.1:80" -j {sep_local}']
    assert len([r for r in rules(text, service_chain(SPN, "tcp")) if "--rcheck" in r]) == 2
    assert f"-m recent --name {sep_local} --set -m tcp -p tcp -j DNAT --to-destination 10.180.0.1:80" in text
    first = trace(text, "203.0.113.2", NODE_IP, 30080)
    assert first.output == "10.180.0.1:80" and not first.masquerade       # external: local endpoint, source kept
    assert {a["list"] for a in first.affinity} == {sep_local}
    returning = trace(text, "203.0.113.2", NODE_IP, 30080, affinity=[sep_local])
    assert returning.dnat == [{"target": "10.180.0.1:80", "probability": 1.0}]
    no_config = service(sessionAffinity="ClientIP")
    assert "--seconds 10800" in render(load_objects([no_config, slice_([ep("10.180.0.1")])]), config())


def test_terminating_endpoints_fallback():
    # topology.go CategorizeEndpoints: no ready endpoint -> serving+terminating ones are used;
    # terminating endpoints that no longer serve count as none (REJECT).
    serving = [ep("10.180.0.1", ready=False, serving=True, terminating=True),
               ep("10.180.0.2", ready=False, serving=False, terminating=True)]
    text = render(load_objects([service(), slice_(serving)]), config())
    assert trace(text, "10.0.0.2", "172.30.0.41", 80).output == "10.180.0.1:80"
    gone = [ep("10.180.0.2", ready=False, serving=False, terminating=True)]
    text = render(load_objects([service(), slice_(gone)]), config())
    assert rules(text, "KUBE-SERVICES", "filter")[0].endswith("-d 172.30.0.41 --dport 80 -j REJECT")
    assert trace(text, "10.0.0.2", "172.30.0.41", 80).verdict == "REJECT"
    # a ready endpoint wins over terminating ones; duplicates prefer the non-terminating copy
    mixed = [ep("10.180.0.1", ready=False, serving=True, terminating=True), ep("10.180.0.3")]
    assert trace(render(load_objects([service(), slice_(mixed)]), config()), "10.0.0.2", "172.30.0.41", 80).output == "10.180.0.3:80"


def test_nodeport_addresses_and_localhost():
    # NodePortAddresses.GetNodeIPs + "Finally, tail-call to the nodePorts chain": one jump per
    # matching node address instead of addrtype LOCAL; NewProxier turns localhostNodePorts off
    # when the CIDRs hold no IPv4 loopback, so no KUBE-FIREWALL rule and no localhost rule.
    cfg = ProxierConfig.from_kube_proxy_configuration(
        "nodePortAddresses: [192.168.0.0/24]\nclusterCIDR: 10.0.0.0/8\n", hostname="node-a", node_ips=[NODE_IP],
        local_addresses=[f"{NODE_IP}/24", "192.168.1.2/24", "127.0.0.1/8"])
    assert cfg.localhost_nodeports is False
    svc = service(type="NodePort", port_extra={"nodePort": 30080})
    text = render(load_objects([svc, slice_([ep("10.180.0.1")])]), cfg)
    assert rules(text, "KUBE-SERVICES")[-1] == ('-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; '
                                                 'NOTE: this must be the last rule in this chain" -d 192.168.0.2 -j KUBE-NODEPORTS')
    assert "KUBE-FIREWALL" not in text and "127.0.0.0/8 --dport" not in text
    local = [f"{NODE_IP}/24", "192.168.1.2/24", "127.0.0.1/8"]
    assert trace(text, "203.0.113.2", NODE_IP, 30080, local=local).output == "10.180.0.1:80"
    assert trace(text, "203.0.113.2", "192.168.1.2", 30080, local=local).output == ""


def test_localhost_nodeports_off():
    # localhostNodePorts=false: the nodeports jump excludes 127.0.0.0/8 and there is no KUBE-FIREWALL.
    svc = service(type="NodePort", port_extra={"nodePort": 30080})
    text = render(load_objects([svc, slice_([ep("10.180.0.1")])]), config(localhost_nodeports=False))
    assert '-m addrtype --dst-type LOCAL ! -d 127.0.0.0/8 -j KUBE-NODEPORTS' in text
    assert ":KUBE-FIREWALL" not in text and "localhost_nps_accepted_pkts" not in text
    assert trace(text, "127.0.0.1", "127.0.0.1", 30080).dnat == []
    on = render(load_objects([svc, slice_([ep("10.180.0.1")])]), config())
    r = trace(on, "127.0.0.1", "127.0.0.1", 30080)
    assert r.dnat[0]["target"] == "10.180.0.1:80" and r.masquerade


def test_masquerade_all_and_no_local_detector():
    # "Set up internal traffic handling": masqueradeAll marks every cluster-IP packet; with no
    # local detector (and no masqueradeAll) there is no masquerade rule at all, and eTP=Local's
    # "pod traffic" short-circuit is missing.
    objs = load_objects([service(type="NodePort", externalTrafficPolicy="Local", port_extra={"nodePort": 30080}),
                         slice_([ep("10.180.0.1", "node-a"), ep("10.180.2.1", "node-b")])])
    svc = service_chain(SPN, "tcp")
    all_masq = render(objs, config(masquerade_all=True))
    assert rules(all_masq, svc)[0] == f'-A {svc} -m comment --comment "{SPN} cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j KUBE-MARK-MASQ'
    assert trace(all_masq, "10.0.0.2", "172.30.0.41", 80).masquerade
    none = render(objs, config(detect_local_mode="None"))
    assert not any("KUBE-MARK-MASQ" in r for r in rules(none, svc))
    assert "pod traffic for" not in none
    assert trace(none, "10.0.0.2", "172.30.0.41", 80).masquerade is False
    # without the short-circuit a pod reaching the NodePort only gets the local endpoint
    assert trace(none, "10.0.0.2", NODE_IP, 30080).output == "10.180.0.1:80"


def test_mark_random_fully_and_nfacct():
    # NewProxier: mark = fmt.Sprintf("%#08x", 1<<bit) (Go pads digits, then adds 0x);
    # MASQUERADE --random-fully when iptables supports it; -m nfacct only for existing counters.
    text = render([], ProxierConfig(masquerade_bit=10, random_fully=True, nfacct_counters=[]))
    assert "-A KUBE-MARK-MASQ -j MARK --or-mark 0x00000400" in text
    assert '-j MASQUERADE --random-fully' in text
    assert "-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP" in text and "nfacct" not in text
    assert "INVALID" not in render([], ProxierConfig(conntrack_tcp_be_liberal=True))


def test_ipv6_proxier():
    # IPv6: bracketed DNAT targets, nodeports jump excludes ::1, no KUBE-FIREWALL / localhost rules.
    objs = load_objects([service(ip="fd00:172:30::41", type="NodePort", port_extra={"nodePort": 30080}),
                         slice_([ep("fd00:10:180::1")], family="IPv6")])
    cfg = config(ip_family="IPv6", node_ips=["2001:db8::1"], cluster_cidr="10.0.0.0/8,fd00:10::/64",
                 local_addresses=["2001:db8::1/64", "::1/128"])
    text = render(objs, cfg)
    assert "--to-destination [fd00:10:180::1]:80" in text
    assert endpoint_chain(SPN, "tcp", "[fd00:10:180::1]:80") in text
    assert "! -d ::1/128 -j KUBE-NODEPORTS" in text and "KUBE-FIREWALL" not in text
    assert "! -s fd00:10::/64 -j KUBE-MARK-MASQ" in text
    assert "172.30" not in render(load_objects([service(), slice_([ep("10.180.0.1")])]), cfg)


def test_topology_zone_hints():
    # topology.go: when every ready endpoint has a zone hint and one names this node's zone,
    # only those endpoints are used for Cluster policy.
    hinted = [dict(ep("10.180.0.1"), hints={"forZones": [{"name": "zone-a"}]}),
              dict(ep("10.180.0.2"), hints={"forZones": [{"name": "zone-b"}]})]
    objs = load_objects([service(), slice_(hinted)])
    assert trace(render(objs, config(topology_zone="zone-a")), "10.0.0.2", "172.30.0.41", 80).output == "10.180.0.1:80"
    assert trace(render(objs, config()), "10.0.0.2", "172.30.0.41", 80).output == "10.180.0.1:80, 10.180.0.2:80"


def test_large_cluster_mode_drops_comments():
    # appendServiceCommentLocked: above 1000 endpoints SEP and SVC->SEP rules lose their comments.
    eps = [ep(f"10.1.{i // 250}.{i % 250 + 1}") for i in range(1001)]
    text = render(load_objects([service(), slice_(eps)]), config())
    sep = endpoint_chain(SPN, "tcp", "10.1.0.1:80")
    assert f"-A {sep} -m tcp -p tcp -j DNAT --to-destination 10.1.0.1:80" in text
    assert f'-A {service_chain(SPN, "tcp")} -m comment --comment "{SPN} cluster IP"' in text


def test_objects_kube_proxy_ignores(caplog):
    # ShouldSkipService (headless, ExternalName), cmd/kube-proxy's label selector, and the
    # EndpointSlice cache (no service-name label; ports without a name) -- skipped, with a word.
    objs = load_objects([
        service(name="headless", ip="None"), service(name="ext", type="ExternalName"),
        dict(service(name="other"), metadata={"name": "other", "namespace": "ns1",
                                              "labels": {"service.kubernetes.io/service-proxy-name": "x"}}),
        service(), slice_([ep("10.180.0.1")], port_name=None),
        {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": {"name": "orphan", "namespace": "ns1"},
         "addressType": "IPv4", "endpoints": [], "ports": []},
    ])
    with caplog.at_level(logging.WARNING, logger="labkit.kubeproxy"):
        text = render(objs, config())
    assert "headless" not in text and "ns1/ext" not in text and "ns1/other" not in text
    assert "EndpointSlice ns1/orphan" in caplog.text and "EndpointSlice ns1/svc1-1" in caplog.text
    assert f'"{SPN} has no endpoints"' in text


def test_malformed_objects_are_config_errors(tmp_path):
    path = tmp_path / "objects.yaml"
    path.write_text("apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: shop}\n"
                    "spec: {clusterIP: 10.96.0.10, ports: [{port: eighty}]}\n")
    with pytest.raises(ConfigError) as err:
        load_objects(path)
    assert str(err.value) == f"{path}: Service shop/web: spec.ports[0].port: expected a port number 1-65535, got 'eighty'"
    path.write_text("kind: List\nitems:\n- kind: EndpointSlice\n  metadata: {name: s}\n  addressType: IPv4\n"
                    "  endpoints: [{addresses: [10.0.0.300]}]\n")
    with pytest.raises(ConfigError, match=r"EndpointSlice default/s: endpoints\[0\].addresses\[0\]: expected an IP address"):
        load_objects(path)
    path.write_text("kind: Service\nmetadata: {name: a}\nspec: [\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_objects(path)


def test_kube_proxy_configuration():
    cfg = ProxierConfig.from_kube_proxy_configuration(
        "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
        "clusterCIDR: 10.244.0.0/16,fd00:10::/64\niptables: {masqueradeBit: 12, masqueradeAll: true}\n"
        "conntrack: {tcpBeLiberal: true}\nnodePortAddresses: [primary]\n", node_ips=["192.168.0.2"])
    assert cfg.mark == "0x00001000" and cfg.masquerade_all and cfg.conntrack_tcp_be_liberal
    assert cfg.local_detector() == (["-s", "10.244.0.0/16"], ["!", "-s", "10.244.0.0/16"])
    assert cfg.nodeport_addresses == ["192.168.0.2/32"] and cfg.localhost_nodeports is False
    with pytest.raises(ConfigError, match="iptables.masqueradeBit: expected an integer"):
        ProxierConfig.from_kube_proxy_configuration("iptables: {masqueradeBit: high}\n")
    with pytest.raises(ConfigError, match="detectLocalMode"):
        ProxierConfig.from_kube_proxy_configuration("detectLocalMode: Magic\n")
