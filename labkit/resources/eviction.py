"""kubelet's eviction manager under memory pressure (pkg/kubelet/eviction, Kubernetes v1.34).

Signals (helpers.go makeSignalObservations): `memory.available` = capacity - working set, and
`allocatableMemory.available` (added for the hard memory threshold because `pods` is in
enforceNodeAllocatable, addAllocatableThresholds) = kubepods' limit - its working set. A lab node
runs nothing but Pods and reserves nothing for the system, so the two are one number, read from
the node's kubepods cgroup.

A threshold is met when threshold > available (thresholdsMet); with a minimum reclaim, it stays met
until available >= threshold + minimum reclaim, across passes and runs (labkit.resources.pressure,
which also keeps the MemoryPressure condition). Each pass (eviction_manager.go synchronize)
ranks the active Pods with rankMemoryPressure — usage above request first, then lower priority,
then the larger usage above request (helpers.go exceedMemoryRequests, priority, memory) — and
evicts the first that may be evicted (never a critical Pod), one Pod per pass, then waits for it
to be gone. Hard thresholds evict at once (kubelet gives the Pod a 1 s grace period; labkit stops its
processes with SIGTERM, then SIGKILL). The Pod keeps existing: phase Failed, reason Evicted, the
message of helpers.go evictionMessage and a DisruptionTarget condition (TerminationByKubelet).
labkit runs the passes when asked (`labkit resources evict`), one right after the other, where
kubelet runs one every 10 s (evictionMonitoringPeriod).
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field

from labkit.quantity import Quantity
from labkit.resources import pressure
from labkit.resources.node import Node, quantity_string
from labkit.pods import Pod, pod_request

NODE_LOW = "The node was low on resource: {}. "
THRESHOLD_MET = "Threshold quantity: {}, available: {}. "
CONTAINER = "Container {} was using {}, request is {}, has larger consumption of {}. "


@dataclass
class Candidate:
    """One active Pod as the ranking sees it."""
    pod: Pod
    usage: int | None            # working set of the pod cgroup (None: no stats)
    request: int                 # memory request (GetResourceRequestQuantity)

    @property
    def exceeds(self) -> bool:
        return self.usage is not None and self.usage > self.request

    @property
    def above_request(self) -> int:
        return (self.usage or 0) - self.request


def _cmp_bool(a: bool, b: bool) -> int:
    """cmpBool: true first."""
    return 0 if a == b else (-1 if a else 1)


def exceed_memory_requests(p1: Candidate, p2: Candidate) -> int:
    """Pods without stats first, then Pods whose usage exceeds their request."""
    if p1.usage is None or p2.usage is None:
        return _cmp_bool(p1.usage is None, p2.usage is None)
    return _cmp_bool(p1.exceeds, p2.exceeds)


def priority(p1: Candidate, p2: Candidate) -> int:
    """Lower priority first."""
    return (p1.pod.priority > p2.pod.priority) - (p1.pod.priority < p2.pod.priority)


def memory(p1: Candidate, p2: Candidate) -> int:
    """Pods without stats first, then the larger usage above request."""
    if p1.usage is None or p2.usage is None:
        return _cmp_bool(p1.usage is None, p2.usage is None)
    return (p2.above_request > p1.above_request) - (p2.above_request < p1.above_request)


def ordered_by(*cmps):
    """orderedBy: each comparator decides unless it ties, the last one always decides."""
    def compare(p1: Candidate, p2: Candidate) -> int:
        for cmp in cmps:
            result = cmp(p1, p2)
            if result:
                return result
        return 0
    return functools.cmp_to_key(compare)


def rank(candidates: list[Candidate]) -> list[Candidate]:
    """rankMemoryPressure (Go's sort.Sort is not stable; labkit's sort keeps ties in input order)."""
    return sorted(candidates, key=ordered_by(exceed_memory_requests, priority, memory))


@dataclass
class Observation:
    available: int
    working_set: int
    threshold: int
    min_reclaim: int


@dataclass
class Pass:
    observation: Observation
    ranking: list[Candidate] = field(default_factory=list)
    evicted: str | None = None
    message: str = ""
    skipped_critical: list[str] = field(default_factory=list)


def observe(node: Node) -> Observation:
    available, working_set = node.memory_available()
    threshold = node.config.eviction_hard_bytes()
    reclaim = node.config.eviction_minimum_reclaim.get("memory.available")
    min_reclaim = Quantity.parse(reclaim).value_int() if reclaim else 0
    return Observation(available, working_set, threshold, min_reclaim)


def candidates(node: Node) -> list[tuple[dict, Candidate]]:
    out = []
    for record, pod in node.active():
        request = pod_request(pod, "memory").value_int()
        out.append((record, Candidate(pod, node.pod_working_set(record), request)))
    return out


def message(node: Node, record: dict, candidate: Candidate, observation: Observation) -> str:
    """evictionMessage for memory: the node, the threshold, and each container above its request."""
    text = NODE_LOW.format("memory")
    text += THRESHOLD_MET.format(node.config.eviction_hard["memory.available"], quantity_string(observation.available))
    for c in candidate.pod.containers:
        usage = node.container_working_set(record, c.name)
        request = c.requests.get("memory")
        request_bytes = request.value_int() if request is not None else 0
        if usage is not None and usage > request_bytes:
            text += CONTAINER.format(c.name, quantity_string(usage), str(request) if request is not None else "0", "memory")
    return text


def synchronize(node: Node) -> Pass:
    """One pass of the eviction manager: observe, and if a threshold is met (now, or still
    unresolved from an earlier pass: labkit.resources.pressure), evict one Pod."""
    observation = observe(node)
    result = Pass(observation)
    if not pressure.observe(node.dir, observation.available, observation.threshold, observation.min_reclaim):
        return result
    found = candidates(node)
    ranked = rank([c for _r, c in found])
    result.ranking = ranked
    records = {c.pod.name: r for r, c in found}
    for candidate in ranked:
        if candidate.pod.is_critical():
            result.skipped_critical.append(candidate.pod.name)   # "cannot evict a critical pod"
            continue
        record = records[candidate.pod.name]
        result.message = message(node, record, candidate, observation)
        node.evict(candidate.pod.name, result.message)
        result.evicted = candidate.pod.name
        break
    return result


def run(node: Node, say=lambda _p: None, max_passes: int = 20, settle_s: float = 0.3) -> list[Pass]:
    """Passes until no threshold is met: a threshold once met stays met until the minimum reclaim
    is reached too (thresholdsNotYetResolved), from one run to the next. The run is appended to the
    node's eviction.json (what happened, for `labkit resources` and the lab's checks)."""
    passes = []
    try:
        _run(node, passes, say, max_passes, settle_s)
    finally:
        _log(node, passes)
    return passes


def _log(node: Node, passes: list[Pass]) -> None:
    import json
    import os

    path = node.dir / "eviction.json"
    try:
        runs = json.loads(path.read_text())
    except (OSError, ValueError):
        runs = []
    runs.append([{"available": p.observation.available, "threshold": p.observation.threshold,
                  "ranking": [{"pod": c.pod.name, "usage": c.usage, "request": c.request,
                               "priority": c.pod.priority} for c in p.ranking],
                  "evicted": p.evicted, "message": p.message} for p in passes])
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(runs, indent=2) + "\n")
    os.replace(tmp, path)


def _run(node: Node, passes: list[Pass], say, max_passes: int, settle_s: float) -> None:
    for _ in range(max_passes):
        result = synchronize(node)
        passes.append(result)
        say(result)
        if result.evicted is None:
            break
        time.sleep(settle_s)     # the kernel uncharges the evicted Pod's memory
