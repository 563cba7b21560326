"""Follow ownerReferences from a Pod of the Deployment to its ReplicaSet, then to the Deployment."""

import json

import yaml

from labkit.exercises import answer_path
from labkit.apiserver.target import for_env


def solve(env):
    target = for_env(env)
    pods = json.loads(target.kubectl("get", "pods", "-n", "shop", "-l", "app=web", "-o", "json"))["items"]
    pod = pods[0]
    rs_ref = next(r for r in pod["metadata"]["ownerReferences"] if r.get("controller"))
    rs = json.loads(target.kubectl("get", "rs", rs_ref["name"], "-n", "shop", "-o", "json"))
    dep_ref = next(r for r in rs["metadata"]["ownerReferences"] if r.get("controller"))
    path = answer_path(env.lab.id, "owner-chain")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"pod": pod["metadata"]["name"], "replicaset": rs_ref["uid"],
                                    "deployment": dep_ref["uid"]}))
