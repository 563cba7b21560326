"""The kube-proxy lab's environment: a two-node cluster in network namespaces, programmed like
kube-proxy (labkit.kubeproxy.live), plus the damage the debug-ruleset exercise asks to repair."""

import re
from pathlib import Path

from labkit.kubeproxy import live
from labkit.kubeproxy.chains import service_chain, service_port_name
from labkit.netfilter import parse, restore, save

SCENARIO = Path(__file__).resolve().parent / "scenarios" / "cluster.yaml"
# debug-ruleset: these rules of one node are edited by hand after kube-proxy's first sync
BROKEN_NODE, BROKEN_SERVICE, BROKEN_PORT_NAME = "node2", "catalog", "http"


def up(env):
    state = live.build(env, SCENARIO, log=env.log)
    break_rules(env, state)
    env.log(f"edited {BROKEN_SERVICE}'s rules on {BROKEN_NODE}")


def break_rules(env, state):
    """Two mistakes in the live chains of BROKEN_SERVICE on BROKEN_NODE: the third jump of its
    KUBE-SVC chain loses its probability (so the fourth endpoint is never chosen and the third
    gets half), and the second endpoint's KUBE-SEP chain DNATs to the wrong port."""
    netns = env.netns_name(BROKEN_NODE)
    nat = parse(save(netns, "nat")).table("nat")
    spn = service_port_name("default", BROKEN_SERVICE, BROKEN_PORT_NAME)
    svc_chain = service_chain(spn, "tcp")
    jumps = [r for r in nat.chain(svc_chain).rules if r.target and r.target.startswith("KUBE-SEP-")]
    second = jumps[1].target
    lines = [f":{svc_chain} - [0:0]", f":{second} - [0:0]"]
    for rule in nat.chain(svc_chain).rules:
        text = rule.text
        if rule is jumps[2]:
            text = re.sub(r" -m statistic --mode random --probability \S+", "", text)
        lines.append(text)
    for rule in nat.chain(second).rules:
        lines.append(re.sub(r"(--to-destination [\d.]+:)(\d+)", lambda m: m.group(1) + str(int(m.group(2)) + 1), rule.text))
    restore(netns, "*nat\n" + "\n".join(lines) + "\nCOMMIT\n", noflush=True)


def is_up(env):
    return live.is_up(env)


def hosts(env):
    return live.hosts(env)


def access(env):
    state = live.load(env)
    rows = ["| host | what | address |", "|---|---|---|"]
    for node in state.node_names():
        rows.append(f"| {node} | node (kube-proxy's rules live here) | {state.node_address(node)} |")
    for host in state.hosts:
        extra = f" (and {host['addresses'][1]}–{host['addresses'][-1]})" if len(host["addresses"]) > 1 else ""
        rows.append(f"| {host['name']} | outside the cluster | {host['addresses'][0]}{extra} |")
    for pod in state.pods:
        rows.append(f"| {pod['metadata']['name']} | pod on {pod['spec']['nodeName']} | {pod['status']['podIP']} |")
    return "\n".join([
        "## Your cluster",
        "",
        *rows,
        "",
        "- `labkit shell kube-proxy HOST` opens a shell in a host (`iptables` there is iptables-legacy).",
        "- `labkit kube-proxy get services|endpointslices|pods [-o yaml]` shows the cluster state.",
        "- `labkit kube-proxy curl --from HOST --to SERVICE|IP:PORT -n 20` sends real requests.",
        "- `labkit kube-proxy graph --node node1 [--service web]` draws a node's chains.",
        "- `labkit trace --node node1 --src 10.244.1.2 --dst 10.96.0.10:80` follows one packet through them.",
        "- `labkit kube-proxy apply -f FILE` changes Services (kube-proxy then syncs both nodes).",
    ])
