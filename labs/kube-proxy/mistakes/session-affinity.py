"""Common wrong solutions to session-affinity."""

import shlex

from labkit.exercises import mistake
from labkit.kubeproxy import live


@mistake("Service api", "sessionAffinity None")
def affinity_on_the_wrong_service(env):
    """Gives ClientIP affinity to Service web instead of api."""
    svc = live.load(env).service("web")
    svc["spec"]["sessionAffinity"] = "ClientIP"
    live.apply_documents(env, [svc], "mistakes/session-affinity.py")


@mistake("Service api", "sessionAffinity None", "rewritten")
def recent_rules_on_one_node_only(env):
    """Writes kube-proxy's `recent` affinity rules by hand, on node1 only, instead of changing the Service."""
    from labkit.kubeproxy.proxier import render
    from labkit.netfilter import parse, restore

    state = live.load(env)
    svc = state.service("api")
    svc["spec"]["sessionAffinity"] = "ClientIP"
    svc["spec"]["sessionAffinityConfig"] = {"clientIP": {"timeoutSeconds": 10800}}
    objects = [o for o in state.objects() if not (o["kind"] == "Service" and o["metadata"]["name"] == "api")] + [svc]
    nat = parse(render(objects, live.proxier_config(state, "node1"))).table("nat")
    chains = [c for c in nat.chains.values() if c.name.startswith(("KUBE-SVC-", "KUBE-SEP-"))
              and any(r.comment and r.comment.startswith("default/api:") for r in c.rules)]
    text = "*nat\n" + "".join(f":{c.name} - [0:0]\n" for c in chains)
    text += "".join(r.text + "\n" for c in chains for r in c.rules) + "COMMIT\n"
    restore(env.netns_name("node1"), text, noflush=True)


@mistake("node2", "kube-proxy does not write", "change the Service, not the rules")
def also_a_rule_by_hand(env):
    """Gives api ClientIP affinity, and also appends a copy of kube-proxy's first `recent --rcheck` rule to api's
    KUBE-SVC chain on node2 (after its last jump, never reached): the packets go the same way, but the rule is not
    kube-proxy's."""
    from labkit.kubeproxy.chains import service_chain, service_port_name
    from labkit.netfilter import parse, save
    from labkit.netlab import run_in

    svc = live.load(env).service("api")
    svc["spec"]["sessionAffinity"] = "ClientIP"
    live.apply_documents(env, [svc], "mistakes/session-affinity.py")
    chain = service_chain(service_port_name("default", "api", "http"), "tcp")
    netns = env.netns_name("node2")
    first = next(r for r in parse(save(netns, "nat")).table("nat").chain(chain).rules if r.cond("recent"))
    run_in(netns, ["iptables-legacy", "-w", "-t", "nat", "-A", chain, *shlex.split(first.text)[2:]])


@mistake("node1", "raw table", "written by hand")
def drops_pods_in_raw(env):
    """Gives api ClientIP affinity, and also drops node1's pods' packets to api's cluster IP in node1's raw
    PREROUTING: the 16 clients outside the cluster stay sticky, but pods never reach api through node1, and
    the rule is written by hand in a table kube-proxy never writes."""
    from labkit.netlab import run_in

    state = live.load(env)
    svc = state.service("api")
    svc["spec"]["sessionAffinity"] = "ClientIP"
    live.apply_documents(env, [svc], "mistakes/session-affinity.py")
    run_in(env.netns_name("node1"), ["iptables-legacy", "-w", "-t", "raw", "-A", "PREROUTING",
                                     "-s", "10.244.1.0/24",
                                     "-d", f"{svc['spec']['clusterIP']}/32", "-j", "DROP"])
