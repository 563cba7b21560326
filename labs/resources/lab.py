"""The resources lab: three kubelet nodes whose Pods are real processes in real cgroups.

Lab directory (env.dir):
  nodes/<node>/node.json        the node's configuration (from nodes.yaml)
  nodes/<node>/pods/<pod>.json  its Pods: the stored (defaulted) object, status, containers
  nodes/<node>/eviction.json    what `labkit resources evict` did there
  scenarios/                    the Pods of the exercises, to read, copy and apply again
The cgroups are under the lab's own subtree (labkit.resources.cgroupfs): on cgroup v1 in the cpu,
cpuacct and memory hierarchies, on v2 in one tree.
"""

import os
import shutil
from pathlib import Path

from labkit.crashpoints import crash_point
from labkit.inputs import load_yaml
from labkit.numa.quantity import Quantity
from labkit.resources import cgroupfs
from labkit.resources.node import Node, NodeConfig

HERE = Path(__file__).resolve().parent


def node_configs() -> list[tuple[NodeConfig, str | None]]:
    """(configuration, Pods to start) for each node of nodes.yaml."""
    data = load_yaml(HERE / "nodes.yaml")
    cpus = len(os.sched_getaffinity(0)) * 1000
    out = []
    for item in data["nodes"]:
        config = NodeConfig(item["name"], Quantity.parse(item["memoryCapacity"]).value_int(), cpus,
                            eviction_hard=dict(item.get("evictionHard") or {}),
                            eviction_minimum_reclaim=dict(item.get("evictionMinimumReclaim") or {}),
                            priority_classes=dict(data.get("priorityClasses") or {}))
        out.append((config, item.get("pods")))
    return out


def _record(env, name: str) -> Path:
    path = Path(env.dir) / name
    env.ledger.record("path", path=str(path))
    return path


def up(env):
    cgroupfs.version()    # a clear error when cpu and memory controllers are missing
    shutil.copytree(HERE / "scenarios", _record(env, "scenarios"))
    _record(env, "nodes")
    crash_point("resources:scenarios")
    started = []
    for config, pods in node_configs():
        node = Node(env, config)
        node.create()
        crash_point("resources:node")
        if pods:
            node.apply(node.load(Path(env.dir) / pods), wait=False)
        started.append(node)
    for node in started:     # every container process in its cgroups before `labkit run` returns
        node.wait_started()


def is_up(env):
    return all(Node(env, config).exists() for config, _pods in node_configs())


def access(env):
    return (
        "## Your lab\n\n"
        f"`cd {env.dir}` — `scenarios/` holds the exercises' Pods.\n\n"
        "* `labkit resources nodes` — the nodes, their memory budget and `memory.available`\n"
        "* `labkit resources get [--node N] [--json]` — Pods, QoS, containers, cgroup settings next to the spec\n"
        "* `labkit resources top [--node N] [--watch]` — live CPU, throttling, memory, OOM kills\n"
        "* `labkit resources apply -f FILE`, `labkit resources delete POD [--node N]`\n"
        "* `labkit resources oom-kills` — the kernel's log of OOM kills in the lab's cgroups\n"
        "* `labkit resources evict --node N` — kubelet's eviction manager, now\n"
        "* `labkit resources plan -f FILE`, `labkit resources convert --cpu 250m` — kubelet's numbers, offline\n"
    )


# -- steps the reference solutions and the common wrong ones share --------------------------------

def scenario_pod(env, file: str, name: str) -> dict:
    """A Pod manifest of one of the lab's scenario files (the student's copy in the lab directory)."""
    import yaml
    for doc in yaml.safe_load_all((Path(env.dir) / "scenarios" / file).read_text()):
        if doc and doc["metadata"]["name"] == name:
            return doc
    raise KeyError(name)


def replace_pod(env, node_name: str, manifest: dict) -> None:
    """What a student does: delete the Pod, write the changed manifest, apply it."""
    import tempfile

    import yaml
    from labkit.resources.node import lab_nodes

    node = lab_nodes(env)[node_name]
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        f.write(yaml.safe_dump(manifest))
        f.flush()
        pods = node.load(f.name)          # the API server's defaulting and validation first
    if node.record(manifest["metadata"]["name"]) is not None:
        node.delete(manifest["metadata"]["name"])
    node.apply(pods)


def wait_settled(env, node_name: str, pod: str, timeout: float = 60.0) -> None:
    """Until every container of the Pod holds the memory its workload allocates, or has stopped."""
    import time
    from labkit.resources.node import lab_nodes
    from labkit.resources.workload import memory_target

    node = lab_nodes(env)[node_name]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        record = node.record(pod)
        if record is None or record["status"]["phase"] != "Running":
            return
        specs = {c.name: c for c in node.pod(record).all_containers()}
        pending = False
        for view in node.containers(record):
            if not view.pids or not node.cgroups.exists(view.cgroup):
                continue
            memory = node.cgroups.memory(view.cgroup)
            target = memory_target(specs[view.name].command, memory.limit)
            pending = pending or (target is not None and memory.working_set < target)
        if not pending:
            return
        time.sleep(0.05)
