"""What kubelet's eviction manager keeps from one pass to the next, and the MemoryPressure node
condition it derives (pkg/kubelet/eviction/eviction_manager.go, Kubernetes v1.34).

* `thresholdsMet`: a threshold met in a pass stays met in the next ones until memory.available is
  back above the threshold *plus* its minimum reclaim (thresholdsMet(m.thresholdsMet, observations,
  true), merged with the thresholds met now). labkit keeps it in <node dir>/eviction-manager.json,
  so one `labkit resources evict` run goes on where the last one stopped.
* The node condition (helpers.go nodeConditions, nodeConditionsObservedSince): MemoryPressure holds
  while a memory threshold is met and for `evictionPressureTransitionPeriod` (KubeletConfiguration
  default 5m) after it was last observed met.
* Admission (eviction_manager.go Admit): with MemoryPressure, a critical Pod and a Pod that is not
  BestEffort are admitted, and a BestEffort Pod only if it tolerates the
  `node.kubernetes.io/memory-pressure:NoSchedule` taint; any other is rejected with reason
  `Evicted` and the message `The node had condition: [MemoryPressure]. ` (nodeConditionMessageFmt).
* The condition as the node status shows it (pkg/kubelet/nodestatus/setters.go
  MemoryPressureCondition): True, KubeletHasInsufficientMemory, "kubelet has insufficient memory
  available"; False, KubeletHasSufficientMemory, "kubelet has sufficient memory available".

kubelet observes every 10 s (evictionMonitoringPeriod); labkit observes when the eviction manager
runs (`labkit resources evict`), so the condition is as fresh as the last run.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from labkit.pods import BEST_EFFORT, Pod, qos_class

PRESSURE_TRANSITION_PERIOD = 300.0      # evictionPressureTransitionPeriod: 5m
MEMORY_PRESSURE = "MemoryPressure"
TAINT_KEY, TAINT_EFFECT = "node.kubernetes.io/memory-pressure", "NoSchedule"
REJECTED_REASON = "Evicted"
MESSAGE_FMT = "The node had condition: [{}]. "
STATE_FILE = "eviction-manager.json"


def load(node_dir: Path) -> dict:
    try:
        data = json.loads((Path(node_dir) / STATE_FILE).read_text())
    except (OSError, ValueError):
        return {"thresholds_met": False, "pressure_last_observed": None}
    return {"thresholds_met": bool(data.get("thresholds_met")),
            "pressure_last_observed": data.get("pressure_last_observed")}


def save(node_dir: Path, state: dict) -> None:
    path = Path(node_dir) / STATE_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    os.replace(tmp, path)


def observe(node_dir: Path, available: int, threshold: int, min_reclaim: int, now: float | None = None) -> bool:
    """One pass's thresholds: met now, or met before and not yet resolved (minimum reclaim). The
    result is kept for the next pass, and a met threshold refreshes MemoryPressure."""
    state = load(node_dir)
    met = threshold > available or (state["thresholds_met"] and threshold + min_reclaim > available)
    state["thresholds_met"] = met
    if met:
        state["pressure_last_observed"] = time.time() if now is None else now
    save(node_dir, state)
    return met


def memory_pressure(node_dir: Path, now: float | None = None) -> bool:
    last = load(node_dir)["pressure_last_observed"]
    now = time.time() if now is None else now
    return last is not None and now - last < PRESSURE_TRANSITION_PERIOD


def condition(node_dir: Path, now: float | None = None) -> dict:
    """The MemoryPressure condition as kubelet reports it in the node's status."""
    if memory_pressure(node_dir, now):
        return {"type": MEMORY_PRESSURE, "status": "True", "reason": "KubeletHasInsufficientMemory",
                "message": "kubelet has insufficient memory available"}
    return {"type": MEMORY_PRESSURE, "status": "False", "reason": "KubeletHasSufficientMemory",
            "message": "kubelet has sufficient memory available"}


def _tolerates_memory_pressure(manifest: dict) -> bool:
    """v1helper.TolerationsTolerateTaint for node.kubernetes.io/memory-pressure:NoSchedule
    (Toleration.ToleratesTaint: the effect matches or is empty; the key matches, or is empty with
    operator Exists; Exists, or Equal with the taint's empty value)."""
    for toleration in (manifest.get("spec") or {}).get("tolerations") or []:
        if not isinstance(toleration, dict):
            continue
        if toleration.get("effect") not in (None, "", TAINT_EFFECT):
            continue
        operator = toleration.get("operator") or "Equal"
        key = toleration.get("key") or ""
        if key and key != TAINT_KEY:
            continue
        if not key and operator != "Exists":
            continue
        if operator == "Exists" or (operator == "Equal" and (toleration.get("value") or "") == ""):
            return True
    return False


def admit(node_dir: Path, pod: Pod, now: float | None = None) -> tuple[str, str] | None:
    """The eviction manager's admission: (reason, message) when it rejects the Pod, else None."""
    if not memory_pressure(node_dir, now) or pod.is_critical():
        return None
    if qos_class(pod) != BEST_EFFORT or _tolerates_memory_pressure(pod.manifest):
        return None
    return REJECTED_REASON, MESSAGE_FMT.format(MEMORY_PRESSURE)
