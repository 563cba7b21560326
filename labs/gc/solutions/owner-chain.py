"""Follow ownerReferences from a Pod of the Deployment to its ReplicaSet, then to the Deployment."""

import json

from labkit.exercises import write_answer
from labkit.apiserver.target import for_env


def solve(env):
    target = for_env(env)
    pods = json.loads(target.kubectl("get", "pods", "-n", "shop", "-l", "app=web", "-o", "json"))["items"]
    pod = pods[0]
    rs_ref = next(r for r in pod["metadata"]["ownerReferences"] if r.get("controller"))
    rs = json.loads(target.kubectl("get", "rs", rs_ref["name"], "-n", "shop", "-o", "json"))
    dep_ref = next(r for r in rs["metadata"]["ownerReferences"] if r.get("controller"))
    write_answer(env, "owner-chain", {"pod": pod["metadata"]["name"], "replicaset": rs_ref["uid"],
                                      "deployment": dep_ref["uid"]})
