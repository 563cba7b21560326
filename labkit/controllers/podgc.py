"""The pod garbage collector (pkg/controller/podgc/gc_controller.go, PodGCController.gc), every
20 s (gcCheckPeriod):

- gcTerminated: when more terminated pods (Succeeded/Failed) exist than the threshold
  (--terminated-pod-gc-threshold, 12500), the oldest beyond it are deleted;
- gcTerminating: terminating pods on a node that is not Ready and carries the taint
  node.kubernetes.io/out-of-service are deleted (a NotReady node alone is not enough);
- gcOrphaned: a node name that pods are bound to but no Node has is quarantined for 40 s
  (quarantineTime); if a GET still answers 404 after that, its pods are orphans: each gets the
  condition DisruptionTarget (reason DeletionByPodGC, message `PodGC: node no longer exists`) and
  phase Failed, then is deleted with gracePeriodSeconds 0;
- gcUnscheduledTerminating: terminating pods bound to no node are deleted.

Every deletion first moves a pod that is not terminal to phase Failed
(markFailedAndDeletePodWithCondition), as there is no kubelet left to do it, then deletes it with
gracePeriodSeconds 0. The decisions go to the decision log.

Errors: a pod whose status write or delete fails is logged (utilruntime.HandleError) and the pass
goes on with the other pods; the next pass, a period later, finds it again (PodGC has no work
queue for pods: wait.UntilWithContext runs gc every period). A node whose GET fails with another
error than 404 is left alone until a later pass quarantines it again (discoverDeletedNodes).
Terminated pods over the threshold go in the order byEvictionAndCreationTimestamp: evicted ones
first, then the oldest, names breaking ties.
"""

from __future__ import annotations

import threading
import time

from labkit.apiserver.errors import ApiError
from labkit.apiserver.timestamps import now_rfc3339
from labkit.controllers.informer import Informer
from labkit.apiserver.client import ApiResource

CONTROLLER = "podgc"
GC_CHECK_PERIOD = 20.0
QUARANTINE_TIME = 40.0
TERMINATED_POD_THRESHOLD = 12500
OUT_OF_SERVICE_TAINT = "node.kubernetes.io/out-of-service"


def _terminal(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") not in ("Pending", "Running", "Unknown", None)


def _evicted(pod: dict) -> bool:
    """eviction.PodIsEvicted: phase Failed with reason Evicted."""
    status = pod.get("status") or {}
    return status.get("phase") == "Failed" and status.get("reason") == "Evicted"


def _ready(node: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


class PodGCController:
    name = CONTROLLER

    def __init__(self, client, log, period: float = GC_CHECK_PERIOD, quarantine: float = QUARANTINE_TIME,
                 threshold: int = TERMINATED_POD_THRESHOLD):
        self.client = client
        self.log = log
        self.period, self.quarantine, self.threshold = period, quarantine, threshold
        self.running = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._busy = False
        self._quarantined: dict[str, float] = {}      # node name -> when it may be checked
        self.pods: Informer | None = None
        self.nodes: Informer | None = None

    def start(self) -> None:
        if self.running:
            return
        self._stop = threading.Event()
        self.pods = Informer(self.client, ApiResource("", "v1", "pods", "Pod", True, ()))
        self.nodes = Informer(self.client, ApiResource("", "v1", "nodes", "Node", False, ()))
        for informer in (self.pods, self.nodes):
            informer.start()
            informer.wait_synced(30)
        self.running = True
        self._thread = threading.Thread(target=self._run, daemon=True, name=CONTROLLER)
        self._thread.start()

    def stop(self) -> None:
        if not self.running:
            return
        self.running = False
        self._stop.set()
        for informer in (self.pods, self.nodes):
            informer.stop()
        self._thread.join(timeout=5)

    def idle(self) -> bool:
        return not self.running or not self._busy

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self._busy = True
            try:
                self.gc()
            except Exception as exc:        # logged; the next period tries again (wait.Until)
                self.log.record(CONTROLLER, "error", None, f"pod garbage collection failed: {exc}")
            finally:
                self._busy = False

    def gc(self) -> None:
        pods, nodes = self.pods.list(), {n["metadata"]["name"]: n for n in self.nodes.list()}
        terminated = sorted((p for p in pods if _terminal(p)),
                            key=lambda p: (not _evicted(p), p["metadata"].get("creationTimestamp", ""),
                                           p["metadata"]["name"]))
        for pod in terminated[:max(0, len(terminated) - self.threshold)]:
            self._delete(pod, "terminated pods over the threshold of " + str(self.threshold))
        for pod in pods:
            node = nodes.get((pod.get("spec") or {}).get("nodeName") or "")
            if pod["metadata"].get("deletionTimestamp") and node is not None and not _ready(node) and any(
                    t.get("key") == OUT_OF_SERVICE_TAINT for t in (node.get("spec") or {}).get("taints") or []):
                self._delete(pod, f"terminating on node {node['metadata']['name']}, which is not ready and "
                                  f"tainted {OUT_OF_SERVICE_TAINT}")
        self._gc_orphaned(pods, nodes)
        for pod in pods:
            if pod["metadata"].get("deletionTimestamp") and not (pod.get("spec") or {}).get("nodeName"):
                self._delete(pod, "terminating and bound to no node")

    def _gc_orphaned(self, pods: list[dict], nodes: dict) -> None:
        now = time.monotonic()
        for pod in pods:
            name = (pod.get("spec") or {}).get("nodeName")
            if name and name not in nodes:
                self._quarantined.setdefault(name, now + self.quarantine)
        deleted = set()
        for name, due in list(self._quarantined.items()):
            if due > now:
                continue
            del self._quarantined[name]
            if name in nodes:
                continue
            try:
                self.client.get("v1", "nodes", name)
            except ApiError as exc:
                if exc.code == 404:
                    deleted.add(name)
        for pod in pods:
            if (pod.get("spec") or {}).get("nodeName") in deleted:
                condition = {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByPodGC",
                             "message": "PodGC: node no longer exists"}
                self._delete(pod, f"its node {pod['spec']['nodeName']} no longer exists (checked after "
                                  f"{self.quarantine:g} s)", condition)

    def _delete(self, pod: dict, why: str, condition: dict | None = None) -> None:
        """markFailedAndDeletePodWithCondition; a failure is logged and the pass goes on (the
        callers' utilruntime.HandleError)."""
        meta = pod["metadata"]
        try:
            if not _terminal(pod):
                status = dict(pod.get("status") or {}, phase="Failed")
                if condition is not None:
                    conditions = [c for c in status.get("conditions") or [] if c.get("type") != condition["type"]]
                    status["conditions"] = conditions + [dict(condition, lastProbeTime=None,
                                                              lastTransitionTime=now_rfc3339())]
                self.client.update("v1", "pods", dict(pod, status=status), meta["namespace"], "status")
            self.client.delete("v1", "pods", meta["name"], meta["namespace"], options={"gracePeriodSeconds": 0})
        except ApiError as exc:
            if exc.code not in (404, 409):
                self.log.record(CONTROLLER, "error", None, f"pod {meta['namespace']}/{meta['name']}: {why}, but "
                                f"marking it Failed and deleting it failed: {exc.message} → the next pass tries again")
            return
        self.log.record(CONTROLLER, "delete-pod", None, f"pod {meta['namespace']}/{meta['name']}: {why} → mark it "
                        "Failed and delete it with gracePeriodSeconds=0")
