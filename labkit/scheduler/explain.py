"""Why the scheduler decided what it did, from the record of the cycle itself (framework.Cycle):
per node the Filter verdict (the first plugin that failed, and its reasons), per Score plugin
the raw score, the normalised score and the weighted one, the totals, the node chosen and why;
for a Pod that fits nowhere, the FailedScheduling text and what preemption did. Built on the
record the decision left, so it cannot disagree with the decision."""

from __future__ import annotations

from labkit.scheduler import framework as fw


def explain(cycle: fw.Cycle) -> str:
    lines = [f"Pod {cycle.pod.namespace}/{cycle.pod.name} (priority {cycle.pod.priority}), "
             f"profile {cycle.profile.name}, {len(cycle.nodes)} node(s)"]
    if cycle.pre_filter_msg:
        lines.append(f"PreFilter rejected the Pod: {cycle.pre_filter_msg}")
    skipped = sorted(cycle.pre_filter_skipped)
    if skipped:
        lines.append(f"Filter plugins skipped for this Pod (nothing to check): {', '.join(skipped)}")
    lines.append("")
    lines.append("Filter:")
    for node in cycle.nodes:
        if node.name in cycle.feasible:
            verdict = "fits"
        elif node.name in cycle.statuses:
            st = cycle.statuses[node.name]
            verdict = f"{st.plugin or 'PreFilter'}: {'; '.join(st.reasons)} ({st.code})"
        elif cycle.absent_status is not None:
            verdict = f"not evaluated: {cycle.absent_status.message}"
        else:
            verdict = "not evaluated (enough feasible nodes were found: percentageOfNodesToScore)"
        lines.append(f"  {node.name:<16} {verdict}")
    if cycle.scores:
        lines.append("")
        lines.append("Score (raw -> normalised x weight):")
        for plugin, values in cycle.scores.items():
            weight = cycle.profile.weights.get(plugin, 1)
            shown = ", ".join(f"{n} {raw}->{norm}x{weight}={norm * weight}" for n, (raw, norm) in values.items())
            lines.append(f"  {plugin}: {shown}")
        if cycle.score_skipped:
            lines.append(f"  skipped at PreScore (nothing to score): {', '.join(sorted(cycle.score_skipped))}")
        lines.append("  total: " + ", ".join(f"{n} {t}" for n, t in cycle.totals.items()))
    lines.append("")
    if cycle.chosen is not None:
        if len(cycle.feasible) == 1:
            lines.append(f"Bound to {cycle.chosen}: the only node that fits (not scored against others).")
        else:
            best = cycle.totals[cycle.chosen]
            tied = [n for n, t in cycle.totals.items() if t == best]
            why = "the highest total" if len(tied) == 1 else \
                f"the highest total, shared with {', '.join(n for n in tied if n != cycle.chosen)}: picked at random"
            lines.append(f"Bound to {cycle.chosen}: {why} ({best}).")
    else:
        lines.append(f"Unschedulable: {cycle.fit_error}")
        if cycle.victims:
            lines.append(f"Preemption: nominated {cycle.nominated_node}; victims (deleted): "
                         f"{', '.join(v.name for v in cycle.victims)}. The Pod is retried once they are gone.")
    return "\n".join(lines)


# -- the record of a live decision (the scheduler controller writes it, `explain POD` reads it) ------

RECORDS = "scheduler"       # under the API server's state directory: RECORDS/<namespace>/<name>.json


def _pod_shape(pod, node: str | None = None) -> dict:
    """A Pod in the cases' shorthand (labkit.scheduler.play): what the plugins read of it."""
    spec = pod.spec
    shape = {"name": pod.name, "namespace": pod.namespace, "labels": dict(pod.labels),
             "priority": pod.priority,
             "containers": [{"name": c.get("name"), "requests": dict(((c.get("resources") or {}).get("requests")
                                                                       or c.get("requests") or {}))}
                            for c in spec.get("containers") or []]}
    for key in ("tolerations", "nodeSelector", "affinity", "topologySpreadConstraints", "initContainers", "overhead"):
        if spec.get(key):
            shape[key] = spec[key]
    if node:
        shape["nodeName"] = node
    return shape


def situation(cycle: fw.Cycle) -> dict:
    """The cycle's snapshot as a case (labkit.scheduler.play's shape): its nodes, the Pods bound
    to them, the incoming Pod, the PDBs; what `labkit.scheduler.withhold` compares with the lab's
    prediction cases."""
    def allocatable(node) -> dict:
        return dict(node.obj.get("allocatable") or (node.obj.get("status") or {}).get("allocatable") or {})
    nodes = [{"name": n.name, "labels": dict(n.node.labels), "allocatable": allocatable(n.node),
              **({"taints": n.node.taints} if n.node.taints else {}),
              **({"unschedulable": True} if n.node.unschedulable else {})} for n in cycle.nodes]
    pods = [_pod_shape(p, n.name) for n in cycle.nodes for p in n.pods]
    return {"nodes": nodes, "pods": pods, "incoming": _pod_shape(cycle.pod), "pdbs": list(cycle.pdbs)}


def spread_outcome(cycle: fw.Cycle) -> list | None:
    """For a Pod that fits no node and that PodTopologySpread's Filter checked: per domain of its
    first DoNotSchedule constraint's topology key, the matching Pods PreFilter counted there and
    each of the domain's nodes' Filter reasons, without names (domains and nodes sorted by what
    they hold). None for any other decision."""
    state = cycle.state.get("PodTopologySpread")
    if cycle.chosen is not None or not state or not state[0]:
        return None
    constraints, counts = state
    key = constraints[0].get("topologyKey")
    domains: dict = {}
    for node in cycle.nodes:
        value = node.node.labels.get(key)
        if value is None:
            continue
        st = cycle.statuses.get(node.name)
        domains.setdefault(value, []).append(", ".join(st.reasons) if st else "fits")
    return sorted([counts[0].get(value, 0), sorted(reasons)] for value, reasons in domains.items())


def record(cycle: fw.Cycle) -> dict:
    """What `labkit scheduler explain POD` shows of a live decision, kept as it was decided: the
    explanation, which plugin rejected each node, the node chosen, and the situation."""
    return {"uid": cycle.pod.meta.get("uid"), "profile": cycle.profile.name, "explain": explain(cycle),
            "chosen": cycle.chosen, "rejected_by": {n: st.plugin for n, st in cycle.statuses.items()},
            "spread": spread_outcome(cycle), "situation": situation(cycle)}
