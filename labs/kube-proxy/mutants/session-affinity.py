"""Near-misses of the session-affinity solution: every one-step edit of Service api as applied
(affinity, its timeout, type, ports, selector, policies: each dropped or changed), with the rules
kube-proxy would sync for it; and every one-step edit of api's affinity rules typed by hand on
node1 (its KUBE-SVC chain's `recent --rcheck` and statistic jumps, its KUBE-SEP chains'
`recent --set` DNATs: a rule or option dropped, negated or changed, neighbours swapped)."""

from labkit.kubeproxy import live, nearmiss
from labkit.kubeproxy import judge as packets
from labkit.kubeproxy.chains import service_chain, service_port_name
from labkit.netfilter import parse


def mutants(ctx):
    checks = ctx.lab._load("checks.py")
    lab = ctx.lab.environment_module()
    service = ctx.params["service"]
    observation = nearmiss.settled(checks.observe_session_affinity(ctx))
    reference = lambda state, node: checks.reference(ctx, state, node)

    def longer(edit, before, after):
        """Affinity kept at least as long as Kubernetes' default is what the exercise allows."""
        if edit.path.endswith("timeoutSeconds") and isinstance(edit.after, int) \
                and edit.after >= checks.DEFAULT_AFFINITY_SECONDS:
            return ("the exercise asks for affinity at least as long as Kubernetes' default; kube-proxy's rules "
                    "differ only in the recent match's --seconds")
        return None
    names = lambda edit: ("timeoutSeconds",) if edit.path.endswith("timeoutSeconds") else (
        ("sessionAffinity",) if "sessionAffinity" in edit.path else (edit.key,))
    yield from nearmiss.service_mutants(ctx, observation, service, reference, equivalent=longer, names=names)
    state = observation["state"]
    node = "node1"
    svc_chain = service_chain(service_port_name("default", service, "http"), "tcp")
    text = observation["rules"][node]
    nat = parse(text).table("nat")
    seps = [r.target for r in nat.chain(svc_chain).rules if r.target.startswith("KUBE-SEP-") and r.cond("recent") is None]
    chains = [svc_chain, *seps]
    rules = nearmiss.chain_rules(text, "nat", chains)
    everything = [s["metadata"]["name"] for s in state.services if s["metadata"]["name"] != lab.HAND_BUILT_SERVICE]

    def differences(new_text):
        space = packets.probes(state, node, [state.service(n) for n in everything])
        return packets.compare(node, new_text, checks.reference(ctx, state, node),
                               live.proxier_config(state, node).local_addresses, space, affinity=True) or \
            checks.service_rule_differences(ctx, state, node, new_text, service)
    yield from nearmiss.rule_mutants(
        ctx, observation, node, "nat", chains, rules, names=(node,),
        values={"--probability": ["0.5", "0.33"], "-j": [seps[-1], "KUBE-MARK-MASQ"],
                "--to-destination": ["10.244.2.4:9377"]},
        equivalent_space=differences)
