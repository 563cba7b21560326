"""Common wrong answers to follow-the-chain."""

import yaml

from labkit.exercises import answer_path, mistake
from labkit.kubeproxy.chains import service_chain, service_port_name


def _write(env, chain_of: str, probabilities):
    chain = service_chain(service_port_name("default", chain_of, "http"), "tcp")
    path = answer_path(env.lab.id, "follow-the-chain")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"chain": chain, "probabilities": probabilities}))


@mistake("probabilities", "--probability", "iptables-save", "tolerance")
def rounded(env):
    """Copies the probabilities rounded to two digits."""
    _write(env, "web", [0.25, 0.33, 0.5, 1])


@mistake("is not the chain", "default/catalog:http cluster IP")
def chain_of_another_service(env):
    """Follows catalog's cluster-IP rule, which leads to the same pods, instead of web's."""
    _write(env, "catalog", [0.25, 0.3333333333, 0.5, 1])


@mistake("case-sensitive", "iptables-save")
def chain_name_in_lower_case(env):
    """Types web's chain name in lower case (kube-svc-…), with the right probabilities."""
    chain = service_chain(service_port_name("default", "web", "http"), "tcp")
    path = answer_path(env.lab.id, "follow-the-chain")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"chain": chain.lower(), "probabilities": [0.25, 0.3333333333, 0.5, 1]}))
