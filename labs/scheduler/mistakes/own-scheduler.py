"""Common wrong schedulers in own-scheduler: each a variant of the reference program, run as the
student's would be (labkit scheduler serve), or the Pods given a node without any scheduler."""

import json
from pathlib import Path

from labkit import paths
from labkit.apiserver.target import for_env
from labkit.errors import LabkitError
from labkit.exercises import mistake, wait_for
from labkit.scheduler import own

FITS_RESOURCES = "    return all(room[r] >= amount for r, amount in requests(pod).items())"
BEST = "    best = max(feasible, key=lambda n: (rooms[n.metadata.name][\"cpu\"], n.metadata.name))"


def _serve_variant(env, *replacements):
    text = paths.reference_file(Path(env.lab.directory), "solutions/my_scheduler.py").read_text()
    for old, new in replacements:
        if old not in text:
            raise LabkitError(f"the reference scheduler has no line {old.strip()!r} to change")
        text = text.replace(old, new)
    program = paths.answers_root() / "scheduler" / "my_scheduler.py"
    program.parent.mkdir(parents=True, exist_ok=True)
    program.write_text(text)
    target = for_env(env)
    own.serve(env, program, target)
    client = target.client()
    if not wait_for(lambda: all((client.get("v1", "pods", name, "sched").get("spec") or {}).get("nodeName")
                                for name in env.lab.environment_module().JOBS), timeout=30, interval=0.2):
        raise LabkitError(f"the variant did not bind the Pods within 30 s (log: {own.log_path(env)})")


@mistake("job-2", "Insufficient cpu")
def first_fit_without_resources(env):
    """Binds each Pod to the first node (by name) that matches its selector and taints, without
    counting the CPU of the Pods already there."""
    _serve_variant(env, (FITS_RESOURCES, "    return True"),
                   (BEST, "    best = min(feasible, key=lambda n: n.metadata.name)"))


@mistake("job-3", "TaintToleration")
def resources_only(env):
    """Looks only at free CPU and memory: ignores taints and the nodeSelector."""
    _serve_variant(env, ("    if node.spec.unschedulable:\n        return False\n", "    if False:\n        pass\n"),
                   ("    if any(t.effect in", "    if False and any(t.effect in"),
                   ("    if any(labels.get(k) != v", "    if False and any(labels.get(k) != v"))


@mistake("test Pod", "TaintToleration")
def ignores_taints(env):
    """Honours the nodeSelector, spec.unschedulable, CPU and memory, but not taints, and prefers the
    node with the most room: the lab's disk=hdd nodes carry no taint, so the jobs land well; the
    check's tainted test Node is the roomiest."""
    _serve_variant(env, ("    if any(t.effect in", "    if False and any(t.effect in"))


@mistake("test Pod", "NodeAffinity")
def ignores_node_selector(env):
    """Honours taints, spec.unschedulable, CPU and memory, but not the nodeSelector, and prefers the
    node with the most room: the lab's roomiest free nodes are disk=hdd, so the jobs land well; the
    check's roomiest test Node that fits otherwise is disk=ssd."""
    _serve_variant(env, ("    if any(labels.get(k) != v", "    if False and any(labels.get(k) != v"))


@mistake("test Pod", "Insufficient memory")
def first_fit_without_memory(env):
    """Counts CPU but not memory, and binds each Pod to the first node by name that passes its
    filters: the jobs fit where it puts them; of the check's test Nodes one with too little memory
    comes first by name."""
    _serve_variant(env, (FITS_RESOURCES, "    return room[\"cpu\"] >= requests(pod)[\"cpu\"]"),
                   (BEST, "    best = min(feasible, key=lambda n: n.metadata.name)"))


@mistake("test Pod", "TaintToleration")
def first_fit_ignoring_taints(env):
    """Honours the nodeSelector, spec.unschedulable, CPU and memory, but not taints, and binds each
    Pod to the first node by name that passes: the lab's disk=hdd nodes carry no taint, so the jobs
    land well; of the check's tainted test Nodes one comes before the one that fits (with a single
    tainted Node on a side drawn at random, this passed every other time)."""
    _serve_variant(env, ("    if any(t.effect in", "    if False and any(t.effect in"),
                   (BEST, "    best = min(feasible, key=lambda n: n.metadata.name)"))


@mistake("without a binding")
def node_name_by_hand(env):
    """Gives each Pod a node by re-creating it with spec.nodeName set, without a scheduler."""
    target = for_env(env)
    for name, node in (("job-1", "node-e"), ("job-2", "node-e"), ("job-3", "node-b")):
        pod = json.loads(target.kubectl("get", "pod", name, "-n", "sched", "-o", "json"))
        target.kubectl("delete", "pod", name, "-n", "sched", "--force", "--grace-period=0")
        spec = {k: v for k, v in pod["spec"].items() if k in ("schedulerName", "nodeSelector", "containers")}
        spec["nodeName"] = node
        target.kubectl("create", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": name, "namespace": "sched", "labels": pod["metadata"]["labels"]}, "spec": spec}))


@mistake("job-1", "by hand")
def bindings_by_hand(env):
    """No program at all: each Pod bound with a binding POSTed by hand with kubectl, to a node that
    fits it."""
    target = for_env(env)
    for name, node in (("job-1", "node-b"), ("job-2", "node-e"), ("job-3", "node-e")):
        binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "namespace": "sched"},
                   "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
        target.kubectl("create", "--raw", f"/api/v1/namespaces/sched/pods/{name}/binding", "-f", "-",
                       input=json.dumps(binding))


@mistake("test Pod", "Insufficient cpu")
def hard_coded_nodes(env):
    """Binds job-1 and job-2 to node-e and job-3 to node-b, places that fit, named in the program;
    any other Pod goes to node-e: it cannot place a Pod on Nodes it was not written for."""
    _serve_variant(env, (BEST, "    best = next(n for n in nodes if n.metadata.name == {\"job-1\": \"node-e\", "
                               "\"job-2\": \"node-e\", \"job-3\": \"node-b\"}.get(pod.metadata.name, \"node-e\"))"))


@mistake("test Pod", "TaintToleration")
def tolerations_matched_by_key_alone(env):
    """Matches a toleration to a taint by its key alone (value and effect ignored), and prefers the
    node with the most room: a toleration of the key dedicated then seems to tolerate every taint
    dedicated=...; the test Pod's tolerations of that key tolerate neither effect nor value of the
    tainted test Nodes' taint."""
    _serve_variant(env, ("        if t.effect and t.effect != taint.effect:\n            continue\n", ""),
                   ("        if t.key == taint.key and (t.value or \"\") == (taint.value or \"\"):",
                    "        if t.key == taint.key:"))


@mistake("test Pod", "TaintToleration")
def tolerations_matched_without_effect(env):
    """Matches a toleration's key and value to a taint but not its effect, and prefers the node with
    the most room: a NoExecute toleration seems to tolerate the NoSchedule taint of the same key and
    value."""
    _serve_variant(env, ("        if t.effect and t.effect != taint.effect:\n            continue\n", ""))
