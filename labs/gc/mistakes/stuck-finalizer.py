"""Common wrong solutions to stuck-finalizer."""

import json

from labkit.apiserver.target import for_env
from labkit.errors import LabkitError
from labkit.exercises import mistake, wait_for, write_answer


def _stuck_pod(env):
    pods = json.loads(for_env(env).kubectl("get", "pods", "-n", "shop", "-l", "app=reports", "-o", "json"))["items"]
    return next(p for p in pods if p["metadata"].get("finalizers"))


def _answer(env, pod, finalizer):
    write_answer(env, "stuck-finalizer", {"pod": pod, "finalizer": finalizer})


@mistake("by hand", "foregroundDeletion")
def strips_the_replicaset(env):
    """Removes the ReplicaSet's foregroundDeletion finalizer: the ReplicaSet goes, the Pod stays stuck."""
    for_env(env).kubectl("patch", "rs", "reports", "-n", "shop", "--type=json",
                         "-p", '[{"op":"remove","path":"/metadata/finalizers"}]')
    _answer(env, "reports", "foregroundDeletion")


@mistake("still Terminating")
def force_deletes_the_pod(env):
    """Force-deletes the stuck Pod (--force --grace-period=0): its finalizer still keeps it."""
    pod = _stuck_pod(env)
    for_env(env).kubectl("delete", "pod", pod["metadata"]["name"], "-n", "shop", "--force", "--grace-period=0",
                         "--wait=false")
    _answer(env, pod["metadata"]["name"], pod["metadata"]["finalizers"][0])


@mistake("diagnosis is wrong", "foregroundDeletion was the ReplicaSet's", "finalizer of the garbage collector's own")
def names_the_replicasets_finalizer(env):
    """Releases the Pod's finalizer the right way, but writes down foregroundDeletion."""
    target = for_env(env)
    pod = _stuck_pod(env)
    target.kubectl("patch", "pod", pod["metadata"]["name"], "-n", "shop", "--type=json",
                   "-p", '[{"op":"remove","path":"/metadata/finalizers/0"}]')
    client = target.client()
    wait_for(lambda: client.get_or_none("apps/v1", "replicasets", "reports", "shop") is None, timeout=30)
    _answer(env, pod["metadata"]["name"], "foregroundDeletion")


@mistake("beyond its finalizers", "metadata.ownerReferences")
def cuts_the_owner_references(env):
    """Removes the ownerReferences of every Pod of reports (the ReplicaSet then goes while a Pod
    still holds example.com/upload), then removes that finalizer, and names the Pod and it."""
    target = for_env(env)
    pod = _stuck_pod(env)
    client = target.client()
    for p in client.list("v1", "pods", "shop", label_selector="app=reports")[0]:
        if p["metadata"].get("ownerReferences"):
            try:
                target.kubectl("patch", "pod", p["metadata"]["name"], "-n", "shop", "--type=json",
                               "-p", '[{"op":"remove","path":"/metadata/ownerReferences"}]')
            except LabkitError:     # a Pod that finished its grace period meanwhile
                pass
    wait_for(lambda: client.get_or_none("apps/v1", "replicasets", "reports", "shop") is None, timeout=30)
    target.kubectl("patch", "pod", pod["metadata"]["name"], "-n", "shop", "--type=json",
                   "-p", '[{"op":"remove","path":"/metadata/finalizers/0"}]')
    wait_for(lambda: not client.list("v1", "pods", "shop", label_selector="app=reports")[0], timeout=30)
    _answer(env, pod["metadata"]["name"], pod["metadata"]["finalizers"][0])


@mistake("diagnosis is not right", "does not say how many")
def names_a_finalizer_seen_elsewhere(env):
    """Releases the Pod's finalizer the right way and names the Pod, but writes down the other
    finalizer of its own the lab shows (the Secret archive-key's example.com/keep): the feedback
    must not tell which of the two parts is wrong, or flipping parts would find the answer."""
    target = for_env(env)
    pod = _stuck_pod(env)
    target.kubectl("patch", "pod", pod["metadata"]["name"], "-n", "shop", "--type=json",
                   "-p", '[{"op":"remove","path":"/metadata/finalizers/0"}]')
    client = target.client()
    wait_for(lambda: client.get_or_none("apps/v1", "replicasets", "reports", "shop") is None, timeout=30)
    _answer(env, pod["metadata"]["name"], "example.com/keep")
