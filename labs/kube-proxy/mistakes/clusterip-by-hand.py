"""Common wrong solutions to clusterip-by-hand: the rules typed by hand, each time with one thing
a student plausibly gets wrong."""

from labkit.exercises import mistake
from labkit.kubeproxy import live
from labkit.kubeproxy.chains import endpoint_chain, probability, service_chain, service_port_name
from labkit.netlab import run_in


def _write_rules(env, *, hairpin=True, append=False, nodes=None, names=None):
    state = live.load(env)
    svc = state.service("legacy")
    ip, port = svc["spec"]["clusterIP"], svc["spec"]["ports"][0]["port"]
    spn = service_port_name("default", "legacy", "http")
    endpoints = sorted(f"{ep['addresses'][0]}:{s['ports'][0]['port']}"
                       for s in state.slices_of("default", "legacy") for ep in s["endpoints"])
    svc_chain = names[0] if names else service_chain(spn, "tcp")
    seps = names[1:] if names else [endpoint_chain(spn, "tcp", e) for e in endpoints]
    rules = []
    for i, (endpoint, sep) in enumerate(zip(endpoints, seps)):
        pick = ["-m", "statistic", "--mode", "random", "--probability", probability(len(endpoints) - i)]
        rules.append(["-A", svc_chain, *(pick if i < len(endpoints) - 1 else []), "-j", sep])
        if hairpin:
            rules.append(["-A", sep, "-s", endpoint.split(":")[0], "-j", "KUBE-MARK-MASQ"])
        rules.append(["-A", sep, "-p", "tcp", "-j", "DNAT", "--to-destination", endpoint])
    entry = ["KUBE-SERVICES", "-d", ip, "-p", "tcp", "--dport", str(port), "-j", svc_chain]
    for node in nodes or state.node_names():
        netns = env.netns_name(node)
        for chain in [svc_chain, *seps]:
            run_in(netns, ["iptables-legacy", "-w", "-t", "nat", "-N", chain])
        for args in rules:
            run_in(netns, ["iptables-legacy", "-w", "-t", "nat", *args])
        if append:
            run_in(netns, ["iptables-legacy", "-w", "-t", "nat", "-A", *entry])
        else:
            run_in(netns, ["iptables-legacy", "-w", "-t", "nat", "-I", entry[0], "1", *entry[1:]])


@mistake("hairpin", "KUBE-MARK-MASQ")
def no_hairpin_masquerade(env):
    """Writes each KUBE-SEP chain with only its DNAT, without the -s <endpoint> -j KUBE-MARK-MASQ rule."""
    _write_rules(env, hairpin=False)


@mistake("must be the last rule")
def jump_appended_after_nodeports(env):
    """Appends the KUBE-SERVICES rule (-A), so it comes after the jump to KUBE-NODEPORTS."""
    _write_rules(env, append=True)


@mistake("kube-proxy's name", "KUBE-SVC-LEGACY")
def own_chain_names(env):
    """Names the chains KUBE-SVC-LEGACY and KUBE-SEP-LEGACY-1..3 instead of computing kube-proxy's hashes."""
    _write_rules(env, names=["KUBE-SVC-LEGACY", "KUBE-SEP-LEGACY-1", "KUBE-SEP-LEGACY-2", "KUBE-SEP-LEGACY-3"])
