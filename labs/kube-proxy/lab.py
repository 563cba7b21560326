"""The kube-proxy lab's environment: a two-node cluster in network namespaces (labkit.kubeproxy.live)."""

from pathlib import Path

from labkit.kubeproxy import live

SCENARIO = Path(__file__).resolve().parent / "scenarios" / "cluster.yaml"


def up(env):
    live.build(env, SCENARIO, log=env.log)


def is_up(env):
    return live.is_up(env)


def hosts(env):
    return live.hosts(env)
