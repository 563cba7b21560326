"""Reference solution: put back the Service's chains on the node as kube-proxy writes them.

Render what kube-proxy would write for the node, take the Service's KUBE-SVC and KUBE-SEP chains
from it, and load just those chains (iptables-restore --noflush replaces a chain it declares).
"""

from labkit.kubeproxy import live
from labkit.kubeproxy.chains import service_chain, service_port_name
from labkit.kubeproxy.proxier import render
from labkit.netfilter import parse, restore


def solve(env):
    params = env.lab.exercise("debug-ruleset").params
    state = live.load(env)
    nat = parse(render(state.objects(), live.proxier_config(state, params["node"]))).table("nat")
    svc_chain = nat.chain(service_chain(service_port_name("default", params["service"], "http"), "tcp"))
    chains = [svc_chain] + [nat.chain(r.target) for r in svc_chain.rules if r.target.startswith("KUBE-SEP-")]
    lines = [f":{c.name} - [0:0]" for c in chains] + [r.text for c in chains for r in c.rules]
    restore(env.netns_name(params["node"]), "*nat\n" + "\n".join(lines) + "\nCOMMIT\n", noflush=True)
    env.lab.environment_module().record_solution(env, "debug-ruleset")
