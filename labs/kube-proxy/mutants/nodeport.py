"""Near-misses of the nodeport solution: every one-step edit of Service web as applied (type,
nodePort, ports, selector, policies, affinity: each dropped or changed), with the rules kube-proxy
would sync for it; and every one-step edit of web's node-port rules typed by hand on node1
(KUBE-NODEPORTS and web's KUBE-EXT chain: a rule or option dropped, negated or changed, neighbours
swapped)."""

from labkit.kubeproxy import live, nearmiss
from labkit.kubeproxy import judge as packets
from labkit.kubeproxy.chains import external_chain, service_port_name


def mutants(ctx):
    checks = ctx.lab._load("checks.py")
    lab = ctx.lab.environment_module()
    service = ctx.params["service"]
    observation = nearmiss.settled(checks.observe_nodeport(ctx))
    reference = lambda state, node: checks.reference(ctx, state, node)
    yield from nearmiss.service_mutants(ctx, observation, service, reference)
    state = observation["state"]
    node = "node1"
    ext = external_chain(service_port_name("default", service, "http"), "tcp")
    text = observation["rules"][node]
    rules = nearmiss.chain_rules(text, "nat", ["KUBE-NODEPORTS", ext])
    ours = lambda rule: rule[1] == "KUBE-NODEPORTS" and f"default/{service}:http" not in " ".join(rule)
    everything = [s["metadata"]["name"] for s in state.services if s["metadata"]["name"] != lab.HAND_BUILT_SERVICE]

    def differences(new_text):
        space = packets.probes(state, node, [state.service(n) for n in everything])
        return packets.compare(node, new_text, checks.reference(ctx, state, node),
                             live.proxier_config(state, node).local_addresses, space) or \
            checks.service_rule_differences(ctx, state, node, new_text, service)
    yield from nearmiss.rule_mutants(
        ctx, observation, node, "nat", ["KUBE-NODEPORTS", ext], rules, keep=ours, names=(node,),
        values={"--dport": [str(ctx.params["node_port"] + 1), "30090"], "-p": ["udp"], "-j": ["KUBE-MARK-MASQ", "RETURN"],
                "-d": ["0.0.0.0/0"]},
        equivalent_space=differences)
