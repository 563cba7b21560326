"""The resources lab's prediction exercises, for labkit.predictions: what each one's outcome is, so
that the lab's tools know when they are about to show it (`labkit resources get` the QoS classes and
oom_score_adj of the qos Pods, `plan` what kubelet makes of them, `evict` the eviction ranking of the
eviction-order Pods, `convert` the requests behind the weight Pod's value), whatever the names.
Withholding, keeping the answer when a tool first shows the outcome, and grading that kept answer
are labkit.predictions'.
"""

from __future__ import annotations

import copy
import re

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


def resource_shape(pod) -> tuple:
    """What labkit's reconstruction of a Pod's QoS class reads, without the amounts: which of cpu
    and memory each container (init containers with whether they are sidecars) and the pod level
    request and limit (a zero amount counts as none, as ComputePodQOS skips it:
    pkg/apis/core/v1/helper/qos/qos.go). The class and the oom_score_adj values follow from the
    amounts within one shape; a Pod of a qos Pod's shape is that Pod with other amounts, and what
    kubelet makes of it tells the qos answer for that Pod, whichever class it gets."""
    from labkit.pods import QOS_RESOURCES

    def keys(resources) -> tuple:
        return tuple(sorted(n for n, q in (resources or {}).items() if n in QOS_RESOURCES and q.value > 0))
    containers = tuple(sorted((keys(c.requests), keys(c.limits)) for c in pod.containers))
    inits = tuple(sorted((keys(c.requests), keys(c.limits), c.sidecar) for c in pod.init_containers))
    pod_level = None if pod.pod_requests is None and pod.pod_limits is None else \
        (keys(pod.pod_requests), keys(pod.pod_limits))
    return containers, inits, pod_level


def is_qos_pod(lab, pod) -> bool:
    """A Pod shaped as one of the qos exercise's (`resource_shape`: whatever its names, node,
    workload and amounts): a copy with another quantity is classified by the same rule, so
    showing its class shows the answer. Withheld by shape alone, whichever class the amounts
    give: withholding only the copies whose class equals the original's would itself tell it."""
    shape = resource_shape(pod)
    return any(shape == resource_shape(p) for p in qos_pods(lab).values())


def qos_gate(tool: str):
    """For another lab's tool that shows Pods' QoS classes (`labkit numa admit` prints each Pod's
    class, `labkit numa run` runs it in the cgroup its class names): gate(pod) says what to print
    instead while the Pod is shaped as one of the qos exercise's (is_qos_pod) and that exercise's
    answer is not recorded, once this lab was started on the machine; None otherwise (an answer
    recorded is kept then, as `labkit resources get` keeps it: reveal)."""
    from labkit import paths
    from labkit.labs import get_lab

    lab = get_lab(LAB_ID)
    started = (paths.state_root() / LAB_ID).is_dir()

    def gate(pod) -> str | None:
        if not started or not is_qos_pod(lab, pod) or reveal(lab, "qos", tool):
            return None
        return refusal(lab, "qos", f"the QoS class of Pod {pod.name} (its resources are shaped as those of a Pod of "
                                   "that exercise)")
    return gate


def eviction_pod_names(lab) -> set[str]:
    """The names of the eviction-order exercise's Pods."""
    params = _exercise(lab, "eviction-order").params
    return {p.name for p in _scenario(lab, params["file"].rsplit("/", 1)[-1], params["node"])}


def eviction_shape(pod) -> tuple:
    """What kubelet's eviction ranking reads of a Pod, without the amounts: its priority and
    whether it requests memory at all. rankMemoryPressure (pkg/kubelet/eviction/helpers.go) orders
    by usage above the memory request (exceedMemoryRequests), priority, and usage minus request
    (memory), the request being the Pod's as GetResourceRequestQuantity sums it: neither cpu, nor
    the limits, nor how the request is split over containers enter it. A Pod of this shape is ranked
    by the same rule as the exercise's Pod with it, whatever its amounts and workload size, and its
    place beside any other Pod tells that Pod's; a copy that only adds a cpu request, a memory limit
    or an empty container is one."""
    from labkit.pods import pod_request
    return pod.priority, pod_request(pod, "memory").value_int() > 0


def eviction_pods_among(lab, pods) -> set[str]:
    """The names of `pods` that are the eviction-order exercise's Pods: by name, or by shape under
    other names, with another workload or other amounts (`eviction_shape`)."""
    params = _exercise(lab, "eviction-order").params
    ours = _scenario(lab, params["file"].rsplit("/", 1)[-1], params["node"])
    names = {p.name for p in ours}
    shapes = {eviction_shape(p) for p in ours}
    return {p.name for p in pods if p.name in names or eviction_shape(p) in shapes}


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


# -- when an answer file holds a whole prediction ---------------------------------------------------

def _whole_number(value) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and value == int(value)


def prediction_problem(lab, exercise_id: str, text: str) -> str | None:
    """What keeps an answer text from being a whole prediction of the exercise (a part its check
    would refuse as missing or malformed), or None when it is one. A tool keeps the answer as it
    is when it first shows the outcome (labkit.predictions): kept half-written, the shown outcome
    could be copied into a fresh answer only by forgetting the kept one, and the kept one could
    only fail. Says what is missing or malformed, never what is right."""
    from labkit.pods import BEST_EFFORT, BURSTABLE, GUARANTEED
    from labkit.predictions import mapping_problem

    data, problem = mapping_problem(text)
    if problem:
        return problem

    def mapping(key: str) -> dict | str:
        value = data.get(key)
        return value if isinstance(value, dict) else f"it has no mapping {key}"

    if exercise_id == "qos":
        classes_known = (GUARANTEED, BURSTABLE, BEST_EFFORT)
        pods = qos_pods(lab)
        classes, adjs = mapping("qos"), mapping("oom_score_adj")
        for found in (classes, adjs):
            if isinstance(found, str):
                return found
        for name in pods:
            if classes.get(name) not in classes_known:
                return f"qos of {name} is missing or not one of {', '.join(classes_known)}"
        extra = sorted(set(map(str, classes)) - set(pods))
        if extra:
            return f"qos names {extra[0]}, which is not one of {', '.join(pods)}"
        keys = [f"{n}/{c.name}" for n, pod in pods.items() for c in pod.running_containers()]
        for key in keys:
            if not _whole_number(adjs.get(key)):
                return f"oom_score_adj of {key} is missing or not a whole number"
        extra = sorted(set(map(str, adjs)) - set(keys))
        if extra:
            return f"oom_score_adj names {extra[0]}, which is no running container of {', '.join(pods)}"
        return None
    if exercise_id == "eviction-order":
        order, names = data.get("order"), eviction_pod_names(lab)
        if not isinstance(order, list) or sorted(map(str, order)) != sorted(names):
            return f"order must list each of the {len(names)} Pods of the scenario exactly once"
        return None
    if exercise_id == "weight":
        if not _whole_number(data.get("cgroup_value")):
            return "cgroup_value is missing or not a whole number"
        for key in ("min_millicores", "max_millicores"):
            # a number of millicores, or the quantity as a Pod writes it (the check reads both)
            value = data.get(key)
            if not _whole_number(value) and not (isinstance(value, str) and re.fullmatch(r"\s*\d+m\s*", value)):
                return f"{key} is missing or not a number of millicores (250, or 250m)"
        return None
    raise ValueError(f"exercise {exercise_id} of lab {LAB_ID} predicts nothing")


def reveal(lab, exercise_id: str, tool: str) -> bool:
    """labkit.predictions.reveal with the rule of this lab: an answer counts as written once the
    answer file holds a whole prediction (`prediction_problem`)."""
    from labkit import predictions
    return predictions.reveal(LAB_ID, exercise_id, tool,
                              complete=lambda text: prediction_problem(lab, exercise_id, text) is None)


def answered(lab, exercise_id: str) -> bool:
    """Whether the answer file holds a whole prediction (`prediction_problem`), without keeping it:
    for a tool that may show the outcome or not (`evict` ranks nothing while no threshold is met),
    and keeps the answer (`reveal`) only when it does."""
    from labkit import predictions
    return predictions.recorded(LAB_ID, exercise_id,
                                complete=lambda text: prediction_problem(lab, exercise_id, text) is None)


def refusal(lab, exercise_id: str, what: str) -> str:
    """What a tool says instead of the outcome: labkit.predictions.refusal, and, when the answer
    file holds an answer that is not whole yet, what is missing (never the answer)."""
    from labkit import paths, predictions
    message = predictions.refusal(LAB_ID, exercise_id, what)
    text = predictions.answer_text(LAB_ID, exercise_id)
    problem = prediction_problem(lab, exercise_id, text) if text is not None else None
    if problem:
        message += (f". The answer in {paths.answer_path(LAB_ID, exercise_id)} is not a whole prediction yet "
                    f"({problem}): complete it first")
    return message
