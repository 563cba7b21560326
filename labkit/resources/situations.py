"""The resources lab's prediction exercises, for labkit.predictions: what each one's outcome is, so
that the lab's tools know when they are about to show it (`labkit resources get` the QoS classes and
oom_score_adj of the qos Pods, `plan` what kubelet makes of them, `evict` the eviction ranking of the
eviction-order Pods, `convert` the requests behind the weight Pod's value), whatever the names.
Withholding, keeping the answer when a tool first shows the outcome, and grading that kept answer
are labkit.predictions'.
"""

from __future__ import annotations

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
    spec = dict(manifest.get("spec") or {})
    spec.pop("nodeName", None)
    return spec


def is_qos_pod(lab, pod) -> bool:
    """A Pod whose spec is one of the qos exercise's (whatever its name or node)."""
    return any(_bare_spec(pod.manifest) == _bare_spec(p.manifest) for p in qos_pods(lab).values())


def eviction_pods_among(lab, pods) -> set[str]:
    """The names of `pods` that are the eviction-order exercise's Pods: by name, or by spec under
    another name (a renamed copy is ranked exactly as the original is)."""
    params = _exercise(lab, "eviction-order").params
    ours = _scenario(lab, params["file"].rsplit("/", 1)[-1], params["node"])
    names = {p.name for p in ours}
    specs = [_bare_spec(p.manifest) for p in ours]
    return {p.name for p in pods if p.name in names or _bare_spec(p.manifest) in specs}


def weight_values(lab) -> tuple[int, int]:
    """(cpu.shares, cpu.weight) kubelet writes into the weight exercise's pod cgroup."""
    from labkit.resources import kubelet
    params = _exercise(lab, "weight").params
    pod = next(p for p in _scenario(lab, "node-1.yaml", params["node"]) if p.name == params["pod"])
    shares = kubelet.pod_cgroup(pod).cpu_shares
    return shares, kubelet.shares_to_weight(shares)
