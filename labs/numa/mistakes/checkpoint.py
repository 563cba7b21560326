"""Common wrong repairs of node-b's checkpoint."""

import json

from labkit.exercises import mistake
from labkit.numa.cpuset import format_cpus, parse


@mistake("edited by hand again")
def undo_the_edit_by_hand(env):
    """Takes the CPU that was written back into defaultCpuSet out again, by hand: the checksum fits again."""
    path = env.dir / "node-b" / "kubelet" / "cpu_manager_state"
    data = json.loads(path.read_text())
    held = set().union(*(parse(c) for containers in data["entries"].values() for c in containers.values()))
    data["defaultCpuSet"] = format_cpus(parse(data["defaultCpuSet"]) - held)
    path.write_text(json.dumps(data, separators=(",", ":")))


@mistake("must be drained")
def delete_without_draining(env):
    """Deletes cpu_manager_state while Pods are still bound to node-b."""
    (env.dir / "node-b" / "kubelet" / "cpu_manager_state").unlink()


@mistake("still does not start")
def drain_only(env):
    """Drains node-b but leaves the broken checkpoint in place."""
    (env.dir / "node-b" / "pods.yaml").write_text("# drained\n")


@mistake("kubelet-config.yaml changed")
def policy_switched_off(env):
    """Drains node-b and switches its CPU Manager to the none policy instead of deleting the checkpoint."""
    (env.dir / "node-b" / "pods.yaml").write_text("# drained\n")
    path = env.dir / "node-b" / "kubelet-config.yaml"
    path.write_text(path.read_text().replace("cpuManagerPolicy: static", "cpuManagerPolicy: none"))


@mistake("must be drained", "keeps those it was admitted with")
def rewrites_the_bound_pods_as_burstable(env):
    """Instead of draining node-b, turns the limits of its Guaranteed Pods into requests in pods.yaml
    (Burstable: no exclusive CPUs to lose), then deletes cpu_manager_state: the Pods are still bound."""
    path = env.dir / "node-b" / "pods.yaml"
    path.write_text(path.read_text().replace("limits: {cpu:", "requests: {cpu:"))
    (env.dir / "node-b" / "kubelet" / "cpu_manager_state").unlink()
