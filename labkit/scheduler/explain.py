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
