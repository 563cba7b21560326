"""Reference solution: kube-proxy's chain name for the service port, and its probability sequence
1/n, 1/(n-1), ..., 1/2 and then the rest (computeProbability in proxier.go)."""

import yaml

from labkit.exercises import answer_path
from labkit.kubeproxy import live
from labkit.kubeproxy.chains import probability, service_chain, service_port_name


def solve(env):
    params = env.lab.exercise("follow-the-chain").params
    state = live.load(env)
    endpoints = sum(len(s["endpoints"]) for s in state.slices_of("default", params["service"]))
    chain = service_chain(service_port_name("default", params["service"], "http"), "tcp")
    probabilities = [float(probability(endpoints - i)) for i in range(endpoints - 1)] + [1]
    path = answer_path(env.lab.id, "follow-the-chain")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"chain": chain, "probabilities": probabilities}))
