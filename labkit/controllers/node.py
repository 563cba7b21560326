"""A node-side stand-in for the scheduler and the kubelet, since the lab runs no containers:

- binds unscheduled pods to the node `labkit-node` (POST pods/<name>/binding, as the scheduler);
- reports bound pods Running and Ready at once (PUT pods/<name>/status, as the kubelet);
- finishes graceful deletion when the grace period is over: DELETE with gracePeriodSeconds 0 and
  the pod's UID as precondition, as the kubelet's status manager does once containers stopped
  (here: the containers take the whole grace period to stop, counted from when the node sees the
  deletion);
- records the Events `kubectl describe pod` shows: Scheduled (from default-scheduler), and from
  the kubelet Pulling/Pulled (imagePullPolicy Always pulls, the others find the image present),
  Created, Started, and Killing when the pod is deleted.
"""

from __future__ import annotations

import hashlib
import time

from labkit.apiserver.errors import ApiError
from labkit.apiserver.registry import now_rfc3339
from labkit.controllers.base import KeyedController
from labkit.controllers.events import EventRecorder, involved

CONTROLLER = "node"
NODE_NAME = "labkit-node"
HOST_IP = "10.89.0.2"


def pod_ip(uid: str) -> str:
    n = int.from_bytes(hashlib.sha256(uid.encode()).digest()[:2], "big")
    return f"10.244.{n // 254 % 254 + 1}.{n % 254 + 1}"


class NodeController(KeyedController):
    name = CONTROLLER
    user = f"system:node:{NODE_NAME}"

    def __init__(self, client, log, workers: int = 1):
        super().__init__(client, log, workers)
        self._stopping: dict[str, float] = {}      # pod uid -> when its containers were told to stop
        self.scheduler_events: EventRecorder | None = None
        self.kubelet_events: EventRecorder | None = None

    def start(self) -> None:
        if not self.running:
            self.scheduler_events = EventRecorder(self.client, "default-scheduler")
            self.kubelet_events = EventRecorder(self.client, "kubelet", NODE_NAME)
        super().start()

    def stop(self) -> None:
        super().stop()
        for recorder in (self.scheduler_events, self.kubelet_events):
            if recorder is not None:
                recorder.stop()

    def idle(self) -> bool:
        return super().idle() and all(r is None or r.idle() for r in (self.scheduler_events, self.kubelet_events))

    def _container_events(self, pod: dict, reason_messages) -> None:
        for c in (pod.get("spec") or {}).get("containers") or []:
            ref = dict(involved(pod), fieldPath=f"spec.containers{{{c.get('name')}}}")
            for type_, reason, message in reason_messages(c):
                self.kubelet_events.event(ref, type_, reason, message)

    def make_informers(self):
        return {"pods": self.informer("v1", "pods", "Pod", on_add=self.enqueue,
                                      on_update=lambda old, new: self.enqueue(new))}

    def sync(self, key: str) -> None:
        pod = self.informers["pods"].get(key)
        if pod is None:
            return
        meta, spec = pod["metadata"], pod.get("spec") or {}
        ns, name = meta["namespace"], meta["name"]
        if not spec.get("nodeName"):
            if meta.get("deletionTimestamp") or spec.get("schedulerName", "default-scheduler") != "default-scheduler":
                return
            binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "namespace": ns},
                       "target": {"apiVersion": "v1", "kind": "Node", "name": NODE_NAME}}
            try:
                self.client.create("v1", "pods", binding, ns, subresource="binding", name=name)
            except ApiError as exc:
                if exc.code not in (404, 409):
                    raise
                return
            self.scheduler_events.event(involved(pod), "Normal", "Scheduled",
                                        f"Successfully assigned {ns}/{name} to {NODE_NAME}")
            return
        if spec["nodeName"] != NODE_NAME:
            return
        if meta.get("deletionTimestamp"):
            self._finish_deletion(key, pod)
            return
        if (pod.get("status") or {}).get("phase") == "Pending":
            self._report_running(pod)

    def _finish_deletion(self, key: str, pod: dict) -> None:
        meta = pod["metadata"]
        grace = meta.get("deletionGracePeriodSeconds") or 0
        if grace <= 0:
            self._stopping.pop(meta["uid"], None)
            return      # deleted already, waiting for finalizers
        # like the kubelet, count the grace period from when the containers are told to stop
        if meta["uid"] not in self._stopping:
            self._container_events(pod, lambda c: [("Normal", "Killing", f"Stopping container {c.get('name')}")])
        since = self._stopping.setdefault(meta["uid"], time.monotonic())
        wait = since + grace - time.monotonic()
        if wait > 0:
            self.queue.add_after(key, wait + 0.01)
            return
        self._stopping.pop(meta["uid"], None)
        self.log.record(self.name, "delete-pod", None,
                        f"pod {meta['namespace']}/{meta['name']}: grace period of {grace}s is over, containers "
                        "stopped → delete with gracePeriodSeconds=0")
        try:
            self.client.delete("v1", "pods", meta["name"], meta["namespace"],
                               options={"gracePeriodSeconds": 0, "preconditions": {"uid": meta["uid"]}})
        except ApiError as exc:
            if exc.code not in (404, 409):
                raise

    def _report_running(self, pod: dict) -> None:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        now = now_rfc3339()
        ip = pod_ip(meta["uid"])
        statuses = []
        for c in spec.get("containers") or []:
            cid = hashlib.sha256(f"{meta['uid']}/{c.get('name')}".encode()).hexdigest()
            statuses.append({"name": c.get("name"), "ready": True, "started": True, "restartCount": 0,
                             "image": c.get("image"), "imageID": f"{c.get('image')}@sha256:{cid[:64]}",
                             "containerID": f"labkit://{cid}", "state": {"running": {"startedAt": now}}})
        conditions = [{"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
                      for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady",
                                "PodScheduled")]
        status = dict(pod.get("status") or {}, phase="Running", conditions=conditions, hostIP=HOST_IP,
                      hostIPs=[{"ip": HOST_IP}], podIP=ip, podIPs=[{"ip": ip}], startTime=now,
                      containerStatuses=statuses)
        try:
            self.client.update("v1", "pods", dict(pod, status=status), meta["namespace"], "status")
        except ApiError as exc:
            if exc.code == 409:
                self.queue.add_rate_limited(f"{meta['namespace']}/{meta['name']}")
            elif exc.code != 404:
                raise
            return

        def started(c):
            image = c.get("image")
            if c.get("imagePullPolicy") == "Always":
                pulled = [("Normal", "Pulling", f'Pulling image "{image}"'),
                          ("Normal", "Pulled", f'Successfully pulled image "{image}" in 0s (0s including waiting)')]
            else:
                pulled = [("Normal", "Pulled", f'Container image "{image}" already present on machine')]
            return pulled + [("Normal", "Created", f"Created container: {c.get('name')}"),
                             ("Normal", "Started", f"Started container {c.get('name')}")]
        self._container_events(pod, started)
