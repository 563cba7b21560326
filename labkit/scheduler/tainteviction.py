"""The NoExecute taint manager (pkg/controller/tainteviction/taint_eviction.go processPodOnNode,
getMinTolerationTime; v1helper.GetMatchingTolerations): when a node's NoExecute taints change,
each Pod on it is evicted at once if a NoExecute taint is not tolerated, after the smallest
tolerationSeconds of the tolerations that matched, or never when none of them sets it. An
eviction already scheduled earlier is kept (a longer toleration does not postpone it); a node
without NoExecute taints cancels the Pod's pending eviction."""

from __future__ import annotations

from labkit.scheduler.objects import Pod, tolerates

CONDITION = {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager",
             "message": "Taint manager: deleting due to NoExecute taint"}
EVENT_REASON = "TaintManagerEviction"


def matching_tolerations(taints: list[dict], tolerations: list[dict]) -> tuple[bool, list[dict]]:
    """GetMatchingTolerations: whether every taint is tolerated, and the first toleration that
    tolerates each."""
    if not taints:
        return True, []
    used = []
    for taint in taints:
        found = next((t for t in tolerations if tolerates(t, taint)), None)
        if found is None:
            return False, []
        used.append(found)
    return True, used


def eviction_delay(pod: Pod, node_taints: list[dict]) -> float | None:
    """Seconds from the update until the Pod is deleted; None: never (no NoExecute taint, or
    tolerated without tolerationSeconds)."""
    taints = [t for t in node_taints if t.get("effect") == "NoExecute"]
    if not taints:
        return None
    all_tolerated, used = matching_tolerations(taints, pod.tolerations)
    if not all_tolerated:
        return 0
    return min_toleration_seconds(used)


def min_toleration_seconds(used: list[dict]) -> int | None:
    """getMinTolerationTime: 0 without tolerations or when one sets tolerationSeconds <= 0, the
    smallest tolerationSeconds set, or None (forever) when none sets it."""
    if not used:
        return 0
    seconds = [int(t["tolerationSeconds"]) for t in used if t.get("tolerationSeconds") is not None]
    if not seconds:
        return None
    least = min(seconds)
    return 0 if least <= 0 else least


def mark_event(pod: Pod) -> dict:
    return {"type": "Normal", "reason": EVENT_REASON, "message": f"Marking for deletion Pod {pod.namespace}/{pod.name}"}


def cancel_event(pod: Pod) -> dict:
    return {"type": "Normal", "reason": EVENT_REASON, "message": f"Cancelling deletion of Pod {pod.namespace}/{pod.name}"}
