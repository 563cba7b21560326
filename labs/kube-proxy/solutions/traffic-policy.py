"""Reference solution: the prediction, from the Services and where their endpoints run.

Through a node's NodePort, externalTrafficPolicy Cluster answers whenever the Service has
endpoints anywhere, and masquerades (the pod sees a node address). Local answers only on nodes
with a local endpoint (the others drop the packet in filter KUBE-EXTERNAL-SERVICES) and does not
masquerade, so the pod sees the client's own address.
"""

import yaml

from labkit.exercises import answer_path
from labkit.kubeproxy import live


def solve(env):
    params = env.lab.exercise("traffic-policy").params
    state = live.load(env)
    prediction = {}
    for name in (params["cluster_service"], params["local_service"]):
        local = state.service(name)["spec"]["externalTrafficPolicy"] == "Local"
        endpoint_nodes = {ep["nodeName"] for s in state.slices_of("default", name) for ep in s["endpoints"]}
        prediction[name] = {}
        for node in state.node_names():
            answers = node in endpoint_nodes if local else bool(endpoint_nodes)
            prediction[name][node] = {"answers": answers, "client_ip_preserved": local} if answers else {"answers": False}
    path = answer_path(env.lab.id, "traffic-policy")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(prediction))
