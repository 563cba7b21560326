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
