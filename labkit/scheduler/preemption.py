"""DefaultPreemption's PostFilter (pkg/scheduler/framework/preemption/preemption.go Evaluator.Preempt,
findCandidates, pickOneNodeForPreemption; plugins/defaultpreemption/default_preemption.go
SelectVictimsOnNode, PodEligibleToPreemptOthers, filterPodsWithPDBViolation).

Only nodes whose main-cycle status was Unschedulable are dry-run; on each, every lower-priority
pod is removed, and if the pod then fits, the removed pods are reprieved most important first
(those whose eviction would break a PodDisruptionBudget before the others) as long as the pod
still fits; the rest are the victims. The node is then picked by fewest PDB violations, lowest
highest victim priority, smallest priority sum, fewest victims, latest start among the highest
priority victims.
"""

from __future__ import annotations

from dataclasses import dataclass

from labkit.scheduler import framework as fw
from labkit.scheduler.objects import NodeInfo, Pod, label_selector_matches

NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
INT32_MAX = (1 << 31) - 1


def more_important(a: Pod, b: Pod) -> bool:
    """util.MoreImportantPod: higher priority, then the one that started earlier."""
    if a.priority != b.priority:
        return a.priority > b.priority
    return a.start_time < b.start_time


def importance_key(pod: Pod):
    return (-pod.priority, pod.start_time)


@dataclass
class Candidate:
    node: str
    victims: list[Pod]
    pdb_violations: int


def pdb_violating(pods: list[Pod], pdbs: list[dict]) -> tuple[list[Pod], list[Pod]]:
    """filterPodsWithPDBViolation: each pod matched by a PDB (same namespace, non-empty selector,
    not already in status.disruptedPods) uses one of its disruptionsAllowed; past zero it violates."""
    allowed = [int(((p.get("status") or {}).get("disruptionsAllowed")) or 0) for p in pdbs]
    violating, fine = [], []
    for pod in pods:
        breaks = False
        for i, pdb in enumerate(pdbs):
            meta = pdb.get("metadata") or pdb
            if (meta.get("namespace") or "default") != pod.namespace:
                continue
            selector = (pdb.get("spec") or pdb).get("selector")
            if not selector or not label_selector_matches(selector, pod.labels):
                continue
            if pod.name in ((pdb.get("status") or {}).get("disruptedPods") or {}):
                continue
            allowed[i] -= 1
            if allowed[i] < 0:
                breaks = True
        (violating if breaks else fine).append(pod)
    return violating, fine


def _fits(cycle: fw.Cycle, pod: Pod, node: NodeInfo) -> fw.Status:
    """RunFilterPluginsWithNominatedPods on a changed node: the PreFilter state is computed again
    on the snapshot with that node (what the plugins' AddPod/RemovePod extensions keep up to date)."""
    nodes = [node if n.name == node.name else n for n in cycle.nodes]
    trial = fw.Cycle(pod, cycle.profile, nodes, cycle.pdbs, cycle.workloads)
    st = fw.run_pre_filters(trial, pod)
    if not st.ok:
        return st
    return fw.run_filters(trial, pod, node)


def select_victims(cycle: fw.Cycle, pod: Pod, node: NodeInfo) -> tuple[list[Pod] | None, int, fw.Status]:
    lower = [p for p in node.pods if p.priority < pod.priority]
    if not lower:
        return None, 0, fw.status(fw.UNRESOLVABLE, NO_VICTIMS)
    current = node.without(lower)
    st = _fits(cycle, pod, current)
    if not st.ok:
        return None, 0, st
    lower.sort(key=importance_key)
    violating, fine = pdb_violating(lower, cycle.pdbs)
    victims: list[Pod] = []
    violations = 0
    for group, counts in ((violating, True), (fine, False)):
        for p in group:
            trial = current.with_pod(p)
            if _fits(cycle, pod, trial).ok:
                current = trial
            else:
                victims.append(p)
                violations += counts
    if violating and fine:
        victims.sort(key=importance_key)
    return victims, violations, fw.OK


def pick_one(candidates: list[Candidate]) -> Candidate:
    """pickOneNodeForPreemption: each rule keeps the candidates best by it, in order."""
    def keep(cands, key):
        best = min(key(c) for c in cands)
        return [c for c in cands if key(c) == best]

    cands = keep(candidates, lambda c: c.pdb_violations)
    cands = keep(cands, lambda c: c.victims[0].priority if c.victims else -(1 << 62))
    cands = keep(cands, lambda c: sum(v.priority + INT32_MAX + 1 for v in c.victims))
    cands = keep(cands, lambda c: len(c.victims))

    def earliest_of_highest(c):
        if not c.victims:
            return 0.0
        top = max(v.priority for v in c.victims)
        return min(v.start_time for v in c.victims if v.priority == top)
    cands = keep(cands, lambda c: -earliest_of_highest(c))
    return cands[0]


class DefaultPreemption:
    name = "DefaultPreemption"

    def __init__(self, args: dict | None = None):
        args = args or {}
        self.min_percentage = int(args.get("minCandidateNodesPercentage", 10))
        self.min_absolute = int(args.get("minCandidateNodesAbsolute", 100))

    def post_filter(self, cycle: fw.Cycle, pod: Pod):
        nominated, st = self.preempt(cycle, pod)
        if st.message:
            return nominated, fw.Status(st.code, [f"preemption: {st.message}"])
        return nominated, st

    def eligible(self, cycle: fw.Cycle, pod: Pod) -> str | None:
        """PodEligibleToPreemptOthers; why not, or None: preemptionPolicy Never, or the node the
        pod is already nominated to still has a lower-priority pod terminating because of a
        preemption (the pod waits for it instead of preempting again)."""
        if (pod.spec.get("preemptionPolicy") or "PreemptLowerPriority") == "Never":
            return "not eligible due to preemptionPolicy=Never."
        nominated = (pod.obj.get("status") or {}).get("nominatedNodeName") if isinstance(pod.obj.get("status"), dict) else None
        if nominated and any(n.name == nominated for n in cycle.nodes):
            st = cycle.statuses.get(nominated)
            if st is None or st.code != fw.UNRESOLVABLE:
                for other in cycle.node(nominated).pods:
                    meta = other.obj.get("metadata") or {}
                    preempted = any(c.get("type") == "DisruptionTarget" and c.get("reason") == "PreemptionByScheduler"
                                    for c in (other.obj.get("status") or {}).get("conditions") or [])
                    if other.priority < pod.priority and meta.get("deletionTimestamp") and preempted:
                        return "not eligible due to a terminating pod on the nominated node."
        return None

    def preempt(self, cycle: fw.Cycle, pod: Pod):
        why_not = self.eligible(cycle, pod)
        if why_not:
            return None, fw.status(fw.UNSCHEDULABLE, why_not)
        potential = [n for n in cycle.nodes if n.name in cycle.statuses
                     and cycle.statuses[n.name].code == fw.UNSCHEDULABLE]
        statuses: dict[str, fw.Status] = {}
        candidates: list[Candidate] = []
        if potential:
            wanted = min(max(len(potential) * self.min_percentage // 100, self.min_absolute), len(potential))
            for node in potential:
                victims, violations, st = select_victims(cycle, pod, node)
                if st.ok:
                    candidates.append(Candidate(node.name, victims or [], violations))
                    if len(candidates) >= wanted and any(c.pdb_violations == 0 for c in candidates):
                        break
                else:
                    statuses[node.name] = st
        if not candidates:
            message = fw.fit_error_message(len(cycle.nodes), statuses, fw.status(fw.UNRESOLVABLE, NOT_HELPFUL))
            return "", fw.status(fw.UNSCHEDULABLE, message)
        best = pick_one(candidates)
        cycle.victims = list(best.victims)
        return best.node, fw.OK

    @staticmethod
    def victim_condition(scheduler_name: str) -> dict:
        return {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                "message": f"{scheduler_name}: preempting to accommodate a higher priority pod"}

    @staticmethod
    def victim_event(preemptor: Pod, node: str) -> dict:
        return {"type": "Normal", "reason": "Preempted", "message": f"Preempted by pod {preemptor.uid} on node {node}"}
