"""Reference solution: the hairpin rule masquerades a pod's packets to itself, so it sees its
node's address on the pod bridge; the other pods see the pod's own address (pod-to-Service traffic
from inside the cluster CIDR is not masqueraded). The rule is in the pod's KUBE-SEP chain."""

import yaml

from labkit.exercises import answer_path
from labkit.kubeproxy import live
from labkit.kubeproxy.chains import endpoint_chain, service_port_name


def solve(env):
    params = env.lab.exercise("hairpin").params
    state = live.load(env)
    pod = state.pod(params["pod"])
    node = state.network_layout().node(pod["spec"]["nodeName"])
    port = state.slices_of("default", params["service"])[0]["ports"][0]["port"]
    chain = endpoint_chain(service_port_name("default", params["service"], "http"), "tcp",
                           f"{pod['status']['podIP']}:{port}")
    path = answer_path(env.lab.id, "hairpin")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"seen_by_itself": node.pod_gateway, "seen_by_others": pod["status"]["podIP"],
                                    "chain": chain}))
