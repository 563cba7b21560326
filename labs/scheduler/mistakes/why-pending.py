"""Common wrong fixes of why-pending."""

import json

from labkit.apiserver.target import for_env
from labkit.exercises import mistake


def _tolerate(env, *tolerations):
    for_env(env).kubectl("patch", "pod", "web", "-n", "sched", "--type=json", "-p",
                         json.dumps([{"op": "add", "path": "/spec/tolerations/-", "value": t} for t in tolerations]))


@mistake("more than the team's taint")
def tolerates_everything(env):
    """Adds the toleration that tolerates every taint (operator Exists, no key)."""
    _tolerate(env, {"operator": "Exists"})


@mistake("does not tolerate")
def wrong_effect(env):
    """Tolerates the team's taint with effect NoExecute: the taint's effect is NoSchedule."""
    _tolerate(env, {"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoExecute"})


@mistake("node-a", "changed")
def removes_the_taint(env):
    """Takes the taint off node-a instead of tolerating it."""
    for_env(env).kubectl("taint", "node", "node-a", "dedicated-")


@mistake("nodeSelector")
def drops_the_selector(env):
    """Re-creates the Pod without its nodeSelector (and tolerating the team's taint)."""
    target = for_env(env)
    pod = json.loads(target.kubectl("get", "pod", "web", "-n", "sched", "-o", "json"))
    target.kubectl("delete", "pod", "web", "-n", "sched", "--force", "--grace-period=0")
    spec = {"containers": pod["spec"]["containers"],
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}]}
    target.kubectl("create", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "web", "namespace": "sched", "labels": pod["metadata"]["labels"]}, "spec": spec}))


@mistake("more than the team's taint", "dedicated=pack:NoSchedule", "dedicated=shop:NoSchedule")
def tolerates_the_whole_key(env):
    """Tolerates the key dedicated with operator Exists and no effect: every value and every effect
    of it (dedicated=anything:NoExecute too), not the team's taint only; among them the taints of the
    pack and shop pools, which are on Nodes today (the feedback names them)."""
    _tolerate(env, {"key": "dedicated", "operator": "Exists"})


@mistake("by hand")
def binds_it_by_hand(env):
    """Binds web to node-b (disk=hdd, against its nodeSelector) with a binding POSTed by hand,
    then adds the team's toleration."""
    target = for_env(env)
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "web", "namespace": "sched"},
               "target": {"apiVersion": "v1", "kind": "Node", "name": "node-b"}}
    target.kubectl("create", "--raw", "/api/v1/namespaces/sched/pods/web/binding", "-f", "-", input=json.dumps(binding))
    _tolerate(env, {"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"})


@mistake("requests", "memory removed")
def drops_the_memory_request(env):
    """Re-creates the Pod tolerating the team's taint, keeping its CPU request but not its memory
    request (the feedback names the memory request, not the CPU one)."""
    target = for_env(env)
    pod = json.loads(target.kubectl("get", "pod", "web", "-n", "sched", "-o", "json"))
    target.kubectl("delete", "pod", "web", "-n", "sched", "--force", "--grace-period=0")
    containers = pod["spec"]["containers"]
    containers[0]["resources"]["requests"].pop("memory")
    spec = {"containers": containers, "nodeSelector": pod["spec"]["nodeSelector"],
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}]}
    target.kubectl("create", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "web", "namespace": "sched", "labels": pod["metadata"]["labels"]}, "spec": spec}))


@mistake("by hand", "spec.nodeName")
def names_the_node_at_creation(env):
    """Re-creates the Pod with the team's toleration only and spec.nodeName node-a: the node fits
    (disk=ssd, 4 CPUs, the taint tolerated), but no scheduler placed the Pod."""
    target = for_env(env)
    pod = json.loads(target.kubectl("get", "pod", "web", "-n", "sched", "-o", "json"))
    target.kubectl("delete", "pod", "web", "-n", "sched", "--force", "--grace-period=0")
    spec = {"containers": pod["spec"]["containers"], "nodeSelector": pod["spec"]["nodeSelector"], "nodeName": "node-a",
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}]}
    target.kubectl("create", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "web", "namespace": "sched", "labels": pod["metadata"]["labels"]}, "spec": spec}))


@mistake("being deleted", "never runs")
def deletes_it_once_bound(env):
    """Tolerates the team's taint as the reference does, then, once the scheduler has bound web,
    deletes it without --force (to try another toleration, say): no kubelet confirms that its
    containers stopped, so it stays Terminating on node-a, and will never run."""
    from labkit.exercises import wait_for
    env.lab._load("solutions/why-pending.py").solve(env)
    target = for_env(env)
    client = target.client()
    assert wait_for(lambda: (client.get_or_none("v1", "pods", "web", "sched") or {"spec": {}})["spec"]
                    .get("nodeName"), timeout=10, interval=0.1)
    target.kubectl("delete", "pod", "web", "-n", "sched", "--wait=false")
