"""Reference solution: on every node, the chains kube-proxy would write for the Service's cluster
IP, typed in as iptables commands (what a student does in `labkit shell kube-proxy NODE`)."""

from labkit.kubeproxy import live
from labkit.kubeproxy.chains import endpoint_chain, probability, service_chain, service_port_name
from labkit.netlab import run_in


def rules_for(env):
    """(chains, rules, entry): the chains to create, their rules as iptables arguments ("-A"),
    and the KUBE-SERVICES rule to insert first. In kube-proxy's order (proxier.go,
    syncProxyRules): the KUBE-SVC chain's first rule marks cluster-IP traffic from outside the
    cluster CIDR for masquerading (the "cluster IP" rule with localDetector.IfNotLocal, here
    `! -s <clusterCIDR>`), then one statistic jump per endpoint (computeProbability: 1/n, 1/(n-1),
    ..., the last without); each KUBE-SEP chain marks the endpoint's own packets (the hairpin)
    and DNATs. Every rule carries kube-proxy's comment (`-m comment --comment`, first, as
    kube-proxy writes it): "<service port> cluster IP" on the KUBE-SERVICES jump and the masquerade
    mark, "<service port> -> <endpoint>" on the statistic jumps, the service port name on the
    KUBE-SEP rules (appendServiceCommentLocked)."""
    params = env.lab.exercise("clusterip-by-hand").params
    state = live.load(env)
    svc = state.service(params["service"])
    ip, port = svc["spec"]["clusterIP"], svc["spec"]["ports"][0]["port"]
    spn = service_port_name("default", params["service"], params["port_name"])
    endpoints = sorted(f"{ep['addresses'][0]}:{s['ports'][0]['port']}"
                       for s in state.slices_of("default", params["service"]) for ep in s["endpoints"])
    svc_chain = service_chain(spn, "tcp")
    chains = [svc_chain] + [endpoint_chain(spn, "tcp", e) for e in endpoints]
    cluster_cidr = state.kube_proxy_configuration["clusterCIDR"]
    comment = lambda text: ["-m", "comment", "--comment", text]
    cluster_ip = comment(f"{spn} cluster IP")
    rules = [["-A", svc_chain, *cluster_ip, "-d", f"{ip}/32", "-p", "tcp", "--dport", str(port), "!", "-s",
              cluster_cidr, "-j", "KUBE-MARK-MASQ"]]
    for i, (endpoint, sep) in enumerate(zip(endpoints, chains[1:])):
        pick = ["-m", "statistic", "--mode", "random", "--probability", probability(len(endpoints) - i)]
        rules.append(["-A", svc_chain, *comment(f"{spn} -> {endpoint}"), *(pick if i < len(endpoints) - 1 else []),
                      "-j", sep])
    for endpoint, sep in zip(endpoints, chains[1:]):
        rules.append(["-A", sep, *comment(spn), "-s", endpoint.split(":")[0] + "/32", "-j", "KUBE-MARK-MASQ"])
        rules.append(["-A", sep, *comment(spn), "-p", "tcp", "-j", "DNAT", "--to-destination", endpoint])
    entry = ["-I", "KUBE-SERVICES", *cluster_ip, "-d", f"{ip}/32", "-p", "tcp", "--dport", str(port), "-j", svc_chain]
    return chains, rules, entry


def write(env, chains, rules, entry, nodes=None):
    """Type the rules on each node: new (or emptied) chains, their rules, the KUBE-SERVICES rule
    inserted first (before the jump to KUBE-NODEPORTS, which must stay last)."""
    state = live.load(env)
    for node in nodes or state.node_names():
        netns = env.netns_name(node)
        iptables = lambda *args, check=True: run_in(netns, ["iptables-legacy", "-w", "-t", "nat", *args], check=check)
        for chain in chains:
            iptables("-N", chain, check=False)      # new, or already there from an earlier attempt:
            iptables("-F", chain)                   # start it empty
        for args in rules:
            iptables(*args)
        if entry:
            check = ["-C", *entry[1:]]
            if iptables(*check, check=False).returncode != 0:
                iptables(entry[0], entry[1], "1", *entry[2:]) if entry[0] == "-I" else iptables(*entry)


def solve(env):
    write(env, *rules_for(env))
    env.lab.environment_module().record_solution(env, "clusterip-by-hand")
