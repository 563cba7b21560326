"""Common wrong answers to owner-chain."""

import json

from labkit.apiserver.target import for_env
from labkit.exercises import mistake, write_answer


def _chain(env):
    """A Pod of web, its ReplicaSet's ownerReference, the ReplicaSet's ownerReference."""
    target = for_env(env)
    pods = json.loads(target.kubectl("get", "pods", "-n", "shop", "-l", "app=web", "-o", "json"))["items"]
    pod = next(p for p in pods if not p["metadata"].get("deletionTimestamp"))
    rs_ref = pod["metadata"]["ownerReferences"][0]
    rs = json.loads(target.kubectl("get", "rs", rs_ref["name"], "-n", "shop", "-o", "json"))
    return pod, rs_ref, rs["metadata"]["ownerReferences"][0]


@mistake("write UIDs")
def names_not_uids(env):
    """Writes the owners' names (as `kubectl get` shows them) instead of their UIDs."""
    pod, rs_ref, dep_ref = _chain(env)
    write_answer(env, "owner-chain", {"pod": pod["metadata"]["name"], "replicaset": rs_ref["name"], "deployment": dep_ref["name"]})


@mistake("swapped")
def swapped_uids(env):
    """Puts the Deployment's UID under replicaset and the ReplicaSet's under deployment."""
    pod, rs_ref, dep_ref = _chain(env)
    write_answer(env, "owner-chain", {"pod": pod["metadata"]["name"], "replicaset": dep_ref["uid"], "deployment": rs_ref["uid"]})


@mistake("the start of the right UID only", "shortens UIDs")
def graph_short_uids(env):
    """Copies the UIDs as `labkit gc graph` prints them: their first 8 characters."""
    pod, rs_ref, dep_ref = _chain(env)
    write_answer(env, "owner-chain", {"pod": pod["metadata"]["name"], "replicaset": rs_ref["uid"][:8],
                                      "deployment": dep_ref["uid"][:8]})


@mistake("the Pod's own UID")
def pod_uid(env):
    """Copies metadata.uid of the Pod itself as the ReplicaSet's UID."""
    pod, _rs_ref, dep_ref = _chain(env)
    write_answer(env, "owner-chain", {"pod": pod["metadata"]["name"], "replicaset": pod["metadata"]["uid"], "deployment": dep_ref["uid"]})


@mistake("changed the chain of Deployment web by hand", "reading an owner chain changes nothing")
def scales_while_reading(env):
    """Reads the chain right, after `kubectl scale deploy web -n shop --replicas=4`."""
    for_env(env).kubectl("scale", "deployment", "web", "-n", "shop", "--replicas=4")
    pod, rs_ref, dep_ref = _chain(env)
    write_answer(env, "owner-chain", {"pod": pod["metadata"]["name"], "replicaset": rs_ref["uid"], "deployment": dep_ref["uid"]})


@mistake("changed the chain of Deployment web by hand", "patch Pod")
def labels_the_pod(env):
    """Reads the chain right, after `kubectl label pod <the Pod> -n shop extra=1` (a patch)."""
    pod, rs_ref, dep_ref = _chain(env)
    for_env(env).kubectl("label", "pod", pod["metadata"]["name"], "-n", "shop", "extra=1")
    write_answer(env, "owner-chain", {"pod": pod["metadata"]["name"], "replicaset": rs_ref["uid"], "deployment": dep_ref["uid"]})


@mistake("pod:", "name alone, without a namespace")
def namespace_in_the_name(env):
    """Writes the Pod as `shop/<name>`, as some tools print it."""
    pod, rs_ref, dep_ref = _chain(env)
    write_answer(env, "owner-chain", {"pod": "shop/" + pod["metadata"]["name"], "replicaset": rs_ref["uid"],
                                      "deployment": dep_ref["uid"]})


@mistake("gives replicaset twice", "YAML keeps only the last one")
def keys_given_twice(env):
    """Writes the two UIDs swapped, then again the right way round below (YAML would keep the last)."""
    from labkit.exercises import answer_path
    pod, rs_ref, dep_ref = _chain(env)
    path = answer_path("gc", "owner-chain")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"pod: {pod['metadata']['name']}\nreplicaset: {dep_ref['uid']}\ndeployment: {rs_ref['uid']}\n"
                    f"replicaset: {rs_ref['uid']}\ndeployment: {dep_ref['uid']}\n")


@mistake("changed the chain", "create Pod")
def adds_a_pod_to_the_chain(env):
    """Makes a Pod of their own, `extra`, controlled by web's ReplicaSet (its
    ownerReference by UID), deletes it again, and answers with a real Pod's chain: the chain was
    changed on the way."""
    from labkit.apiserver.target import for_env
    client = for_env(env).client()
    pods = client.list("v1", "pods", "shop", label_selector="app=web")[0]
    pod = next(p for p in pods if not p["metadata"].get("deletionTimestamp"))
    rs = next(r for r in pod["metadata"]["ownerReferences"] if r.get("controller"))
    extra = {"metadata": {"name": "extra", "labels": {"app": "web"}, "ownerReferences": [rs]},
             "spec": {"containers": [{"name": "c", "image": "busybox:1.36", "command": ["sleep", "infinity"]}]}}
    client.create("v1", "pods", extra, "shop")
    client.delete("v1", "pods", "extra", "shop", options={"gracePeriodSeconds": 0})
    dep = client.get("apps/v1", "replicasets", rs["name"], "shop")["metadata"]["ownerReferences"][0]["uid"]
    write_answer(env, "owner-chain", {"pod": pod["metadata"]["name"], "replicaset": rs["uid"], "deployment": dep})
