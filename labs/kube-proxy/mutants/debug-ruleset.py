"""Near-misses of the debug-ruleset repair on node2: every one-step edit of catalog's repaired
chains (its KUBE-SVC chain's statistic jumps, its KUBE-SEP chains' masquerade marks and DNATs: a
rule or option dropped, negated or changed to another probability, port or endpoint, neighbours
swapped); the repair left to kube-proxy (a full sync of node2, or a sync after catalog changed);
kube-proxy's canary chain deleted from one table; node1's nat table copied onto node2."""

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
        space = packets.probes(state, node, [state.service(n) for n in everything])
        return packets.compare(node, new_text, checks.reference(ctx, state, node),
                               live.proxier_config(state, node).local_addresses, space)
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
    node1_nat = _table(observation["rules"]["node1"], "nat")

    def copy_nat(env):
        restore(env.netns_name(node), save(env.netns_name("node1"), "nat"), noflush=False)
    yield Mutant("node1-nat-copied", f"node1's nat table copied onto {node}", names=(node,),
                 observation={**observation, "rules": {**observation["rules"],
                                                       node: text.replace(_table(text, "nat"), node1_nat)}},
                 apply=copy_nat)
