"""The profile bin-packer gets NodeResourcesFit's scoringStrategy MostAllocated (pluginConfig), and
the batch is made with spec.schedulerName bin-packer: the first Pod goes to any of the three empty
nodes (a tie), each next one to the fullest node that still fits (MostAllocated 50, 75, 100 for
cpu against 25 on an empty node), so four land on one node and two on another: two nodes, the
fewest that hold six CPUs on nodes of four."""

import json

import yaml

from labkit.apiserver.target import for_env

PROFILE = {"schedulerName": "bin-packer",
           "pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}]}


def configure(env, config: dict, text: str | None = None) -> None:
    """Write the configuration into the ConfigMap and wait until labkit's scheduler has read it
    (its decision log says so: profiles built, or the configuration refused)."""
    import time
    from labkit.exercises import wait_for
    target = for_env(env)
    since = time.time()
    target.kubectl("patch", "configmap", "kube-scheduler-config", "-n", "kube-system", "--type=merge", "-p",
                   json.dumps({"data": {"config.yaml": text or yaml.safe_dump(config, sort_keys=False)}}))
    wait_for(lambda: [d for d in target.decisions(since) or [] if d.get("controller") == "scheduler"
                      and d.get("action") in ("config", "config-refused")], timeout=10, interval=0.05)


def create_batch(env, scheduler_name: str | None = "bin-packer") -> None:
    lab = env.lab.environment_module()
    pods = [lab.batch_pod(i) for i in range(1, lab.BATCH + 1)]
    for pod in pods:
        if scheduler_name:
            pod["spec"]["schedulerName"] = scheduler_name
    for_env(env).kubectl("create", "-n", "sched", "-f", "-",
                         input=json.dumps({"apiVersion": "v1", "kind": "List", "items": pods}))


def solve(env):
    lab = env.lab.environment_module()
    config = yaml.safe_load(lab.SCHEDULER_CONFIG)
    config["profiles"] = [p if p["schedulerName"] != "bin-packer" else PROFILE for p in config["profiles"]]
    configure(env, config)
    create_batch(env)
