"""Common wrong answers to hairpin."""

import yaml

from labkit.exercises import answer_path, mistake
from labkit.kubeproxy import live
from labkit.kubeproxy.chains import endpoint_chain, service_port_name


def _write(env, seen_by_itself=None, seen_by_others=None, chain_service="web"):
    state = live.load(env)
    pod = state.pod("web-1")
    node = state.network_layout().node(pod["spec"]["nodeName"])
    chain = endpoint_chain(service_port_name("default", chain_service, "http"), "tcp", f"{pod['status']['podIP']}:8080")
    path = answer_path(env.lab.id, "hairpin")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"seen_by_itself": seen_by_itself or node.pod_gateway,
                                    "seen_by_others": seen_by_others or pod["status"]["podIP"], "chain": chain}))


@mistake("answer is not right")
def itself_sees_its_own_address(env):
    """Thinks pod-to-Service traffic is never masqueraded, so web-1 sees its own address in its own answers too."""
    _write(env, seen_by_itself=live.load(env).pod("web-1")["status"]["podIP"])


@mistake("answer is not right")
def the_chain_of_another_service(env):
    """Names web-1's KUBE-SEP chain of Service catalog, which selects the same pod, instead of web's."""
    _write(env, chain_service="catalog")


@mistake("seen_by_itself", "an IP address", "10.244.1.1/24")
def address_with_its_prefix(env):
    """Writes the address web-1 sees with the pod bridge's prefix length, as `ip addr` shows it (10.244.1.1/24)."""
    state = live.load(env)
    gateway = state.network_layout().node(state.pod("web-1")["spec"]["nodeName"]).pod_gateway
    _write(env, seen_by_itself=f"{gateway}/24")
