"""The resources lab's prediction exercises, for labkit.predictions: what each one's outcome is, so
that the lab's tools know when they are about to show it (`labkit resources get` the QoS classes and
oom_score_adj of the qos Pods, `plan` what kubelet makes of them, `evict` the eviction ranking of the
eviction-order Pods, `convert` the requests behind the weight Pod's value), whatever the names.
Withholding, keeping the answer when a tool first shows the outcome, and grading that kept answer
are labkit.predictions'.
"""

from __future__ import annotations

import copy

LAB_ID = "resources"


# -- what each prediction exercise's outcome is, to know when a tool is about to show it ------------

def _exercise(lab, exercise_id: str):
    return lab.exercise(exercise_id)


def _scenario(lab, file: str, node: str) -> list:
    from labkit.inputs import load_yaml
    from labkit.resources.node import load_pods_strict
    classes = {str(k): int(v) for k, v in (load_yaml(lab.directory / "nodes.yaml").get("priorityClasses") or {}).items()}
    return load_pods_strict(lab.directory / "scenarios" / file, node, classes)


def qos_pods(lab) -> dict:
    """The qos exercise's Pods as the lab ships them, by name."""
    params = _exercise(lab, "qos").params
    names = [n.strip() for n in params["pods"].split(",")]
    pods = {p.name: p for p in _scenario(lab, params["file"].rsplit("/", 1)[-1], params["node"])}
    return {n: pods[n] for n in names}


def _bare_spec(manifest: dict) -> dict:
    """What of a Pod's spec decides the exercises' outcomes, whatever its names and its workload:
    the spec without the node it is bound to, and without each container's name, command and
    args. QoS class, oom_score_adj and cgroup values come from the resources alone
    (pkg/apis/core/v1/helper/qos/qos.go ComputePodQOS, pkg/kubelet/qos/policy.go
    GetContainerOOMScoreAdjust), and the eviction ranking from the requests, the priority and the
    memory the workload holds (pkg/kubelet/eviction/helpers.go rankMemoryPressure): a copy with
    other names, or a workload a few MiB larger, is ranked and classified as the original is."""
    spec = copy.deepcopy(dict(manifest.get("spec") or {}))
    spec.pop("nodeName", None)
    for field in ("initContainers", "containers"):
        for container in spec.get(field) or []:
            for key in ("name", "command", "args"):
                container.pop(key, None)
    return spec


def is_qos_pod(lab, pod) -> bool:
    """A Pod whose spec is one of the qos exercise's (whatever its names, node or workload)."""
    return any(_bare_spec(pod.manifest) == _bare_spec(p.manifest) for p in qos_pods(lab).values())


def eviction_pod_names(lab) -> set[str]:
    """The names of the eviction-order exercise's Pods."""
    params = _exercise(lab, "eviction-order").params
    return {p.name for p in _scenario(lab, params["file"].rsplit("/", 1)[-1], params["node"])}


def eviction_pods_among(lab, pods) -> set[str]:
    """The names of `pods` that are the eviction-order exercise's Pods: by name, or by spec under
    other names or with another workload (a near copy is ranked as the original is)."""
    params = _exercise(lab, "eviction-order").params
    ours = _scenario(lab, params["file"].rsplit("/", 1)[-1], params["node"])
    names = {p.name for p in ours}
    specs = [_bare_spec(p.manifest) for p in ours]
    return {p.name for p in pods if p.name in names or _bare_spec(p.manifest) in specs}


def same_spec(a, b) -> bool:
    """Two Pods with the same spec, whatever their names, nodes and workloads (`_bare_spec`)."""
    return _bare_spec(a.manifest) == _bare_spec(b.manifest)


def weight_pod(lab):
    """The weight exercise's Pod as the scenario gives it."""
    params = _exercise(lab, "weight").params
    return next(p for p in _scenario(lab, "node-1.yaml", params["node"]) if p.name == params["pod"])


def weight_values(lab) -> tuple[int, int]:
    """(cpu.shares, cpu.weight) kubelet writes into the weight exercise's pod cgroup."""
    from labkit.resources import kubelet
    shares = kubelet.pod_cgroup(weight_pod(lab)).cpu_shares
    return shares, kubelet.shares_to_weight(shares)
