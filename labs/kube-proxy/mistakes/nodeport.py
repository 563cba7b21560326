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


@mistake("externalTrafficPolicy Local", "own pods")
def local_traffic_policy(env):
    """Opens port 30080 with externalTrafficPolicy Local: each node forwards the client only to its own pods."""
    def change(spec):
        spec.update(type="NodePort", externalTrafficPolicy="Local")
        spec["ports"][0]["nodePort"] = 30080
    _apply(env, change)
