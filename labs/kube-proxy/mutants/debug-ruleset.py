"""Near-misses of the debug-ruleset repair on node2: every one-step edit of catalog's repaired
chains (its KUBE-SVC chain's statistic jumps, its KUBE-SEP chains' masquerade marks and DNATs: a
rule or option dropped, negated or changed to another probability, port or endpoint, neighbours
swapped); the repair left to kube-proxy (a full sync of node2, or a sync after catalog changed);
kube-proxy's canary chain deleted from one table; node1's nat table copied onto node2; the broken
chains left in place behind a bypass (correct copies under other names, jumped to first from nat
PREROUTING, OUTPUT or KUBE-SERVICES). An edit is proven equivalent only when its packets go as
with kube-proxy's rules and every chain and rule is kube-proxy's, its comment included."""

import re

from labkit.kubeproxy import live, nearmiss
from labkit.kubeproxy import judge as packets
from labkit.kubeproxy.chains import service_chain, service_port_name
from labkit.mutants import Mutant
from labkit.netfilter import parse, restore, save
from labkit.netlab import run_in


def _table(text: str, name: str) -> str:
    found = re.search(rf"(?ms)^\*{name}\n.*?^COMMIT\n", text)
    return found.group(0) if found else ""


def mutants(ctx):
    checks = ctx.lab._load("checks.py")
    lab = ctx.lab.environment_module()
    service, node = ctx.params["service"], ctx.params["node"]
    observation = nearmiss.settled(checks.observe_debug_ruleset(ctx))
    state = observation["state"]
    text = observation["rules"][node]
    svc_chain = service_chain(service_port_name("default", service, "http"), "tcp")
    nat = parse(text).table("nat")
    seps = [r.target for r in nat.chain(svc_chain).rules if r.target.startswith("KUBE-SEP-")]
    chains = [svc_chain, *seps]
    rules = nearmiss.chain_rules(text, "nat", chains)
    endpoints = [r.target_option("--to-destination") for c in seps for r in nat.chain(c).rules if r.target == "DNAT"]
    ip, port = endpoints[0].split(":")
    everything = [s["metadata"]["name"] for s in state.services if s["metadata"]["name"] != lab.HAND_BUILT_SERVICE]

    def differences(new_text):
        # equivalent only if the packets go the same way and the rules are kube-proxy's, every chain
        # and rule (the check judges both)
        space = packets.probes(state, node, [state.service(n) for n in everything])
        return packets.compare(node, new_text, checks.reference(ctx, state, node),
                               live.proxier_config(state, node).local_addresses, space) or \
            checks.debug_ruleset_differences(ctx, state, node, new_text) or \
            checks.debug_ruleset_comment_differences(ctx, state, node, new_text)
    yield from nearmiss.rule_mutants(
        ctx, observation, node, "nat", chains, rules, names=(node,),
        values={"--probability": ["0.25", "0.33", "0.5", "0.3333"], "-j": [seps[-1], "KUBE-MARK-MASQ"],
                "--to-destination": [f"{ip}:{int(port) + 1}", endpoints[-1]], "-s": ["10.244.0.0/16"]},
        equivalent_space=differences)
    for who, services, names in ((node, None, ("kube-proxy rewrote", "full sync")),
                                 (node, [f"default/{service}"], ("kube-proxy rewrote",)),
                                 ("node1", None, ())):
        sync = {"time": 0, "node": who, "services": services}
        yield Mutant(f"sync:{who}:{'full' if services is None else 'partial'}",
                     f"kube-proxy synced {who} ({'fully' if services is None else service + ' changed'}) after the break",
                     names=names, observation={**observation, "syncs": [sync]},
                     equivalent="a sync of node1 does not touch node2's rules" if who != node else None)
    for table in ("mangle", "nat", "filter"):
        section = _table(text, table)
        without = text.replace(section, section.replace(":KUBE-PROXY-CANARY - [0:0]\n", ""))

        def apply(env, table=table):
            run_in(env.netns_name(node), ["iptables-legacy", "-w", "-t", table, "-X", "KUBE-PROXY-CANARY"])
        yield Mutant(f"canary-deleted:{table}", f"KUBE-PROXY-CANARY deleted from {node}'s {table} table",
                     names=("KUBE-PROXY-CANARY", table), observation={**observation,
                                                                     "rules": {**observation["rules"], node: without}},
                     apply=apply)
    # a bypass: the broken chains left as the lab broke them, and correct copies under other names
    # jumped to first for catalog's cluster IP, from each chain a packet to it passes (nat PREROUTING
    # for pods, OUTPUT for the node, KUBE-SERVICES for both) and from both built-in chains
    broken = lab.broken_chains(ctx.env)
    svc = state.service(service)
    entry = f"-d {svc['spec']['clusterIP']}/32 -p tcp -m tcp --dport {svc['spec']['ports'][0]['port']}"
    copies = {c: f"MY-{i}" for i, c in enumerate(chains)}
    rename = lambda line: " ".join(copies.get(w, w) for w in line.split(" "))
    bypass = "".join(f":{copies[c]} - [0:0]\n" for c in chains) + "".join(
        rename(r.text) + "\n" for c in chains for r in nat.chain(c).rules)
    broken_back = "".join(f":{c} - [0:0]\n" for c in broken) + "".join(
        line + "\n" for lines in broken.values() for line in lines)
    for froms in (("PREROUTING",), ("OUTPUT",), ("KUBE-SERVICES",), ("PREROUTING", "OUTPUT")):
        jumps = "".join(f"-I {f} 1 {entry} -j {copies[svc_chain]}\n" for f in froms)
        block = "*nat\n" + bypass + broken_back + jumps + "COMMIT\n"
        # a bypass of both the node's and its pods' packets sends them right: only the rules tell
        names = (node, "kube-proxy does not write") if len(froms) == 2 or froms == ("KUBE-SERVICES",) else (node,)

        def apply(env, block=block):
            restore(env.netns_name(node), block, noflush=True)
        yield Mutant(f"bypass:{'+'.join(froms)}", f"catalog's chains left broken on {node}, correct copies jumped "
                     f"to first from {', '.join(froms)}", names=names,
                     observation={**observation, "rules": {**observation["rules"], node: text + block}}, apply=apply)
    node1_nat = _table(observation["rules"]["node1"], "nat")

    def copy_nat(env):
        restore(env.netns_name(node), save(env.netns_name("node1"), "nat"), noflush=False)
    yield Mutant("node1-nat-copied", f"node1's nat table copied onto {node}", names=(node,),
                 observation={**observation, "rules": {**observation["rules"],
                                                       node: text.replace(_table(text, "nat"), node1_nat)}},
                 apply=copy_nat)
