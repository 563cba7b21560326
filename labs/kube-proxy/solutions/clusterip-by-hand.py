"""Reference solution: on every node, the chains kube-proxy would write for the Service's cluster
IP, typed in as iptables commands (what a student does in `labkit shell kube-proxy NODE`)."""

from labkit.kubeproxy import live
from labkit.kubeproxy.chains import endpoint_chain, probability, service_chain, service_port_name
from labkit.netlab import run_in


def solve(env):
    params = env.lab.exercise("clusterip-by-hand").params
    state = live.load(env)
    svc = state.service(params["service"])
    ip, port = svc["spec"]["clusterIP"], svc["spec"]["ports"][0]["port"]
    spn = service_port_name("default", params["service"], params["port_name"])
    endpoints = sorted(f"{ep['addresses'][0]}:{s['ports'][0]['port']}"
                       for s in state.slices_of("default", params["service"]) for ep in s["endpoints"])
    svc_chain = service_chain(spn, "tcp")
    chains = [svc_chain] + [endpoint_chain(spn, "tcp", e) for e in endpoints]
    rules = []
    for i, (endpoint, sep) in enumerate(zip(endpoints, chains[1:])):
        pick = ["-m", "statistic", "--mode", "random", "--probability", probability(len(endpoints) - i)]
        rules.append(["-A", svc_chain, *(pick if i < len(endpoints) - 1 else []), "-j", sep])
        rules.append(["-A", sep, "-s", endpoint.split(":")[0], "-j", "KUBE-MARK-MASQ"])
        rules.append(["-A", sep, "-p", "tcp", "-j", "DNAT", "--to-destination", endpoint])
    entry = ["KUBE-SERVICES", "-d", ip, "-p", "tcp", "--dport", str(port), "-j", svc_chain]
    for node in state.node_names():
        netns = env.netns_name(node)
        iptables = lambda *args, check=True: run_in(netns, ["iptables-legacy", "-w", "-t", "nat", *args], check=check)
        for chain in chains:
            iptables("-N", chain, check=False)      # new, or already there from an earlier attempt:
            iptables("-F", chain)                   # start it empty
        for args in rules:
            iptables(*args)
        if iptables("-C", *entry, check=False).returncode != 0:
            iptables("-I", *entry[:1], "1", *entry[1:])
