"""Common wrong fixes of node-name."""

import json

from labkit.apiserver.target import for_env
from labkit.exercises import mistake, write_answer


def _again(env, **changes):
    """nightly deleted and made again (lab.remake_nightly)."""
    env.lab.environment_module().remake_nightly(env, **changes)


@mistake("requests", "changed")
def lowers_the_requests(env):
    """Makes the Pod again on node-c asking for 500m CPU, so that it fits the node it was pinned to."""
    _again(env, node="node-c", cpu="500m")


@mistake("by hand", "node-f")
def another_node_by_hand(env):
    """Pins the Pod to node-f by spec.nodeName: node-f has 2 CPUs, but legacy uses 500m of them."""
    _again(env, node="node-f")


@mistake("by hand", "node-b")
def a_node_that_fits_by_hand(env):
    """Pins the Pod to node-b by spec.nodeName: it fits there, but no scheduler judged it."""
    _again(env, node="node-b")


@mistake("legacy", "deleted")
def makes_room_on_node_f(env):
    """Deletes the Pod legacy to make room on node-f, then pins nightly there."""
    for_env(env).kubectl("delete", "pod", "legacy", "-n", "sched", "--force", "--grace-period=0")
    _again(env, node="node-f")


@mistake("not bound")
def pins_it_by_selector(env):
    """Makes the Pod again without nodeName but with the nodeSelector kubernetes.io/hostname=node-c:
    the scheduler judges it now, and finds no room on node-c (its FailedScheduling says so)."""
    _again(env, selector={"kubernetes.io/hostname": "node-c"})


@mistake("by hand", "binding")
def binds_it_by_hand(env):
    """Makes the Pod again for a scheduler that does not run, then POSTs its binding to node-b."""
    _again(env, scheduler="nobody")
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "nightly", "namespace": "sched"},
               "target": {"apiVersion": "v1", "kind": "Node", "name": "node-b"}}
    for_env(env).kubectl("create", "--raw", "/api/v1/namespaces/sched/pods/nightly/binding", "-f", "-",
                         input=json.dumps(binding))


@mistake("not right")
def reads_cpus_not_millicores(env):
    """Makes the workload run as the reference does, but writes the figures in CPUs (2, 0, 1), not as
    the message writes them (millicores)."""
    env.lab._load("solutions/node-name.py").solve(env)
    write_answer(env, "node-name", {"reason": "OutOfcpu", "requested": 2, "used": 0, "capacity": 1})


@mistake("being deleted", "never runs")
def deletes_it_once_scheduled(env):
    """Makes the Pod again as the reference does and reads the rejection right, then, once the
    scheduler has bound it, deletes it without --force (to try again, say): no kubelet confirms that
    its containers stopped, so it stays Terminating on a node where it fits, and will never run."""
    from labkit.exercises import wait_for
    env.lab._load("solutions/node-name.py").solve(env)
    target = for_env(env)
    client = target.client()
    assert wait_for(lambda: (client.get_or_none("v1", "pods", "nightly", "sched") or {"spec": {}})["spec"]
                    .get("nodeName"), timeout=10, interval=0.1)
    target.kubectl("delete", "pod", "nightly", "-n", "sched", "--wait=false")
