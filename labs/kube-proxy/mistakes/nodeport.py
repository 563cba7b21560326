"""Common wrong solutions to nodeport."""

from labkit.exercises import mistake
from labkit.kubeproxy import live


def _apply(env, change):
    svc = live.load(env).service("web")
    change(svc["spec"])
    live.apply_documents(env, [svc], "mistakes/nodeport.py")


@mistake("not 30080", "picks a free one")
def no_node_port_given(env):
    """Sets type NodePort but leaves nodePort out, so the API server picks a random port."""
    _apply(env, lambda spec: spec.update(type="NodePort"))


@mistake("externalTrafficPolicy Local, not Cluster", "only its type and the nodePort")
def local_traffic_policy(env):
    """Opens port 30080 with externalTrafficPolicy Local: each node forwards the client only to its own pods."""
    def change(spec):
        spec.update(type="NodePort", externalTrafficPolicy="Local")
        spec["ports"][0]["nodePort"] = 30080
    _apply(env, change)


@mistake("type LoadBalancer", "least privilege")
def load_balancer_instead(env):
    """Makes web a LoadBalancer with nodePort 30080: reachable too, but it opens more than the exercise asks."""
    def change(spec):
        spec.update(type="LoadBalancer")
        spec["ports"][0]["nodePort"] = 30080
    _apply(env, change)


@mistake("type ClusterIP", "not NodePort")
def node_port_rules_by_hand(env):
    """Writes kube-proxy's NodePort rules for web (KUBE-NODEPORTS, KUBE-EXT) into both nodes by hand instead of
    changing the Service."""
    from labkit.kubeproxy.proxier import render
    from labkit.netfilter import parse, restore

    state = live.load(env)
    svc = state.service("web")
    svc["spec"]["type"] = "NodePort"
    svc["spec"]["ports"][0]["nodePort"] = 30080
    objects = [o for o in state.objects() if not (o["kind"] == "Service" and o["metadata"]["name"] == "web")] + [svc]
    for node in state.node_names():
        nat = parse(render(objects, live.proxier_config(state, node))).table("nat")
        chains = [c for c in nat.chains.values() if c.name == "KUBE-NODEPORTS" or c.name.startswith("KUBE-EXT-")]
        text = "*nat\n" + "".join(f":{c.name} - [0:0]\n" for c in chains)
        text += "".join(r.text + "\n" for c in chains for r in c.rules) + "COMMIT\n"
        restore(env.netns_name(node), text, noflush=True)


@mistake("node1", "kube-proxy does not write", "change the Service, not the rules")
def also_a_rule_by_hand(env):
    """Applies the right Service, and also types a second jump for port 30080 into node1's KUBE-NODEPORTS:
    the packets go the same way, but the rule is not kube-proxy's."""
    from labkit.kubeproxy.chains import external_chain, service_port_name
    from labkit.netlab import run_in

    def change(spec):
        spec.update(type="NodePort")
        spec["ports"][0]["nodePort"] = 30080
    _apply(env, change)
    chain = external_chain(service_port_name("default", "web", "http"), "tcp")
    run_in(env.netns_name("node1"), ["iptables-legacy", "-w", "-t", "nat", "-A", "KUBE-NODEPORTS", "-p", "tcp",
                                     "--dport", "30080", "-j", chain])


@mistake("node1", "kube-proxy does not write", "written by hand")
def also_a_dnat_to_a_pod_by_hand(env):
    """Applies the right Service, and also DNATs port 31000 of node1 to web-1 by hand in kube-proxy's
    KUBE-NODEPORTS chain: the rule concerns none of web's addresses or ports, yet it is written by
    hand and opens web-1 on a port the exercise does not ask for. (In KUBE-NODEPORTS, which the
    exercise's reset rewrites as kube-proxy's sync does; one in PREROUTING would outlive it.)"""
    from labkit.netlab import run_in

    def change(spec):
        spec.update(type="NodePort")
        spec["ports"][0]["nodePort"] = 30080
    _apply(env, change)
    pod_ip = live.load(env).pod("web-1")["status"]["podIP"]
    run_in(env.netns_name("node1"), ["iptables-legacy", "-w", "-t", "nat", "-I", "KUBE-NODEPORTS", "-p", "tcp",
                                     "--dport", "31000", "-j", "DNAT", "--to-destination", f"{pod_ip}:8080"])


@mistake("web-extra", "also opens web's pods", "least privilege")
def a_second_service_opens_web(env):
    """Applies the right Service, and also a Service of its own, web-extra, selecting web's pods with
    nodePort 30081: port 30080 works, but web's pods are open to the outside on one more port."""
    def change(spec):
        spec.update(type="NodePort")
        spec["ports"][0]["nodePort"] = 30080
    _apply(env, change)
    extra = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web-extra", "namespace": "default"},
             "spec": {"type": "NodePort", "selector": {"app": "web"},
                      "ports": [{"name": "http", "port": 80, "targetPort": "http", "nodePort": 30081}]}}
    live.apply_documents(env, [extra], "mistakes/nodeport.py")


@mistake("node1", "raw table", "written by hand")
def drops_a_client_in_raw(env):
    """Applies the right Service, and also drops one client address's packets to port 30080 in node1's raw
    PREROUTING (an experiment left behind): the rule is written by hand, in a table kube-proxy never
    writes, and one client of the client host never reaches web through node1."""
    from labkit.netlab import run_in

    def change(spec):
        spec.update(type="NodePort")
        spec["ports"][0]["nodePort"] = 30080
    _apply(env, change)
    run_in(env.netns_name("node1"), ["iptables-legacy", "-w", "-t", "raw", "-A", "PREROUTING", "-s", "192.168.50.116",
                                     "-p", "tcp", "--dport", "30080", "-j", "DROP"])
