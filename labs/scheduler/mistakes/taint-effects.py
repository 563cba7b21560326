"""Common wrong ways to retire node-f."""

from labkit.apiserver.target import for_env
from labkit.exercises import mistake


@mistake("NoSchedule", "even when no other node fits")
def no_schedule(env):
    """Taints node-f NoSchedule: new Pods can no longer land there at all."""
    for_env(env).kubectl("taint", "node", "node-f", "retiring=true:NoSchedule")


@mistake("NoExecute", "legacy")
def no_execute(env):
    """Taints node-f NoExecute: legacy would be evicted."""
    for_env(env).kubectl("taint", "node", "node-f", "retiring=true:NoExecute")


@mistake("cordoned")
def cordon(env):
    """Cordons node-f (spec.unschedulable) instead of tainting it."""
    for_env(env).kubectl("cordon", "node-f")


@mistake("conditions", "changed")
def marks_the_node_not_ready(env):
    """Taints node-f PreferNoSchedule and also reports it NotReady (its Ready condition False),
    which a node lifecycle controller turns into not-ready taints: another field of the node."""
    target = for_env(env)
    target.kubectl("taint", "node", "node-f", "retiring=true:PreferNoSchedule")
    target.kubectl("patch", "node", "node-f", "--subresource=status", "--type=json", "-p",
                   '[{"op":"replace","path":"/status/conditions/0/status","value":"False"}]')


@mistake("legacy", "deleted")
def makes_legacy_again(env):
    """Deletes legacy and creates a Pod of that name again on node-f, then taints node-f
    PreferNoSchedule: the Pod that ran there did not keep running."""
    import json
    target = for_env(env)
    target.kubectl("delete", "pod", "legacy", "-n", "sched", "--force", "--grace-period=0")
    target.kubectl("create", "-n", "sched", "-f", "-", input=json.dumps(env.lab.environment_module().LEGACY))
    target.kubectl("taint", "node", "node-f", "retiring=true:PreferNoSchedule")


@mistake("NoExecute", "toleration you gave it", "even when no other node fits")
def no_execute_that_legacy_tolerates(env):
    """Gives legacy a toleration of the taint (tolerations may be added to a Pod), then taints
    node-f NoExecute: legacy stays, but new Pods are kept off node-f as by NoSchedule."""
    target = for_env(env)
    target.kubectl("patch", "pod", "legacy", "-n", "sched", "--type=json", "-p",
                   '[{"op":"add","path":"/spec/tolerations/-","value":{"key":"retiring","operator":"Exists",'
                   '"effect":"NoExecute"}}]')
    target.kubectl("taint", "node", "node-f", "retiring=true:NoExecute")


@mistake("deleted the Node node-f", "in place")
def registers_the_node_again_tainted(env):
    """Deletes node-f and creates it again with a PreferNoSchedule taint (from `kubectl get node
    node-f -o json`, its uid and resourceVersion dropped): every field as asked, but the Node was
    deleted, which on a cluster takes legacy with it (Pod GC)."""
    import json
    target = for_env(env)
    node = target.client().get("v1", "nodes", "node-f")
    for key in ("uid", "resourceVersion", "creationTimestamp", "managedFields"):
        node["metadata"].pop(key, None)
    node["spec"]["taints"] = [{"key": "retiring", "value": "true", "effect": "PreferNoSchedule"}]
    target.kubectl("delete", "node", "node-f")
    target.kubectl("create", "-f", "-", input=json.dumps(node))


@mistake("legacy", "deleted", "taint-eviction controller")
def no_execute_then_prefer(env):
    """Taints node-f NoExecute first, then, once legacy is Terminating, swaps the taint for
    PreferNoSchedule: the node ends tainted right, but the taint-eviction controller has already
    deleted legacy."""
    import json

    from labkit.exercises import wait_for
    target = for_env(env)
    target.kubectl("taint", "node", "node-f", "retiring=true:NoExecute")

    def terminating():
        pod = json.loads(target.kubectl("get", "pod", "legacy", "-n", "sched", "-o", "json"))
        return bool(pod["metadata"].get("deletionTimestamp"))
    if not wait_for(terminating, timeout=30, interval=0.1):
        raise RuntimeError("the taint-eviction controller did not delete legacy within 30 s")
    target.kubectl("taint", "node", "node-f", "retiring=true:NoExecute-")
    target.kubectl("taint", "node", "node-f", "retiring=true:PreferNoSchedule")


@mistake("node-e", "changed")
def wrong_node(env):
    """Taints node-e, the other hdd node, by mistake."""
    for_env(env).kubectl("taint", "node", "node-e", "retiring=true:PreferNoSchedule")
