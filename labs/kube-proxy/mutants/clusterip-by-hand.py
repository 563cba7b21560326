"""Near-misses of the hand-built ClusterIP: every one-step edit of the reference solution's rules
on node1 (the KUBE-SERVICES jump, the KUBE-SVC chain's masquerade mark and statistic jumps, each
KUBE-SEP chain's hairpin mark and DNAT: a rule or option dropped, negated, or changed to another
address, port, protocol, probability, endpoint or chain; neighbours swapped), and each rule left
out on node2; and the solution with more than kube-proxy writes (a node port for legacy, its port
on a node's address or on every local address, a second jump from a built-in chain). An edit is
proven equivalent only when its rules treat every probe of the packet space (legacy's cluster IP
on every protocol and port, every other Service, from every kind of source) as kube-proxy's rules
would and every chain and rule is kube-proxy's."""

import importlib.util
from pathlib import Path

from labkit.kubeproxy import live, nearmiss
from labkit.kubeproxy import judge as packets
from labkit.mutants import Mutant
from labkit.netlab import run_in


def _solution():
    path = Path(__file__).resolve().parent.parent / "solutions" / "clusterip-by-hand.py"
    spec = importlib.util.spec_from_file_location("kube_proxy_clusterip_solution", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _without(text: str, chains: list[str], ip: str) -> str:
    """A node's iptables-save without the solution: its chains and the rules aimed at `ip`."""
    out = []
    for line in text.splitlines():
        words = line.split()
        if line.startswith(":") and line[1:].split()[0] in chains:
            continue
        if words[:1] == ["-A"] and (words[1] in chains or f"{ip}/32" in words):
            continue
        out.append(line)
    return "\n".join(out) + "\n"


def mutants(ctx):
    checks = ctx.lab._load("checks.py")
    lab = ctx.lab.environment_module()
    solution = _solution()
    observation = nearmiss.settled(checks.observe_clusterip_by_hand(ctx))
    state = observation["state"]
    chains, rules, entry = solution.rules_for(ctx.env)
    svc = state.service(ctx.params["service"])
    ip, port = svc["spec"]["clusterIP"], svc["spec"]["ports"][0]["port"]
    objects = checks.programmed_objects(state, ctx.params["service"])
    endpoints = [r[-1] for r in rules if r[-2] == "--to-destination"]
    broken = state.service(lab.BROKEN_SERVICE)["spec"]["clusterIP"]
    everything = [s["metadata"]["name"] for s in state.services]
    all_rules = [entry, *rules]

    for node in state.node_names():
        base = _without(observation["rules"][node], chains, ip)
        clean = {**observation, "rules": {**observation["rules"], node: base}}

        def differences(new_text, node=node):
            space = packets.probes(state, node, [state.service(n) for n in everything])
            space = [p for p in space if not (node == lab.BROKEN_NODE and p.dst == broken)]
            return packets.compare(node, new_text, checks.reference(ctx, state, node, objects),
                                   live.proxier_config(state, node).local_addresses, space) or \
                checks.clusterip_differences(ctx, state, node, new_text, objects) or \
                checks.clusterip_comment_differences(ctx, state, node, new_text, objects)

        def keep(rule, node=node):
            return False

        values = {"-d": ["10.96.0.0/16", "10.96.0.31/32"], "--dport": [str(port + 1), "8080"], "-p": ["udp"],
                  "-s": ["10.244.0.0/16", "10.244.1.0/24"], "--probability": ["0.5", "0.33", "0.25"],
                  "--to-destination": [f"{endpoints[0].split(':')[0]}:{int(endpoints[0].split(':')[1]) + 1}",
                                       endpoints[-1]],
                  "-j": [chains[-1], "KUBE-MARK-MASQ", "RETURN"]} if node == "node1" else {}
        for mutant in nearmiss.rule_mutants(ctx, clean, node, "nat", chains, all_rules, values=values,
                                            names=(node,), equivalent_space=differences):
            if node != "node1" and not mutant.name.split(":")[1] == "drop-rule":
                continue

            def apply(env, mutant=mutant, node=node, base=base):
                netns = env.netns_name(node)
                run_in(netns, ["iptables-legacy", "-w", "-t", "nat", "-D", *entry[1:]], check=False)
                mutant_block = mutant.observation["rules"][node][len(base):]
                from labkit.netfilter import restore
                restore(netns, mutant_block, noflush=True)
            yield mutant.__class__(**{**mutant.__dict__, "apply": apply})
    # more than kube-proxy writes: the solution, and legacy also opened where a ClusterIP Service is
    # not reached (a node port in KUBE-NODEPORTS, the node's address or every local address on the
    # Service's port in KUBE-SERVICES), or another rule for it in a built-in chain
    solved = observation["rules"]
    for node in state.node_names():
        address = state.node_address(node)
        extras = {
            "node-port": ["-A KUBE-NODEPORTS -p tcp -m tcp --dport 30200 -j KUBE-MARK-MASQ",
                          f"-A KUBE-NODEPORTS -p tcp -m tcp --dport 30200 -j {chains[0]}"],
            "node-address": [f"-I KUBE-SERVICES 1 -d {address}/32 -p tcp -m tcp --dport {port} -j {chains[0]}"],
            "local-addresses": [f"-I KUBE-SERVICES 1 -p tcp -m addrtype --dst-type LOCAL -m tcp --dport {port} "
                                f"-j {chains[0]}"],
            "prerouting-too": [f"-I PREROUTING 1 -d {ip}/32 -p tcp -m tcp --dport {port} -j {chains[0]}"],
        }
        for what, lines in extras.items():
            block = "*nat\n" + "".join(line + "\n" for line in lines) + "COMMIT\n"

            def apply(env, block=block, node=node):
                from labkit.netfilter import restore
                restore(env.netns_name(node), block, noflush=True)
            yield Mutant(f"{node}:more:{what}", f"on {node}: the solution and {'; '.join(lines)}", names=(node,),
                         observation={**observation, "rules": {**solved, node: solved[node] + block}}, apply=apply)
