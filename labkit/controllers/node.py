"""A node-side stand-in for the scheduler and the kubelet, since the lab runs no containers:

- registers the Node `labkit-node` (kubelet_node_status.go registerWithAPIServer): labels
  kubernetes.io/hostname, os, arch; conditions MemoryPressure, DiskPressure, PIDPressure False and
  Ready True with the kubelet's reasons and messages; addresses InternalIP (a loopback address of
  this machine, where the node's host-network processes really listen) and Hostname; nodeInfo with
  kubeletVersion v1.34.1. Its heartbeats are the kubelet's: the Lease `labkit-node` in
  kube-node-lease (owned by the Node, 40 s duration) renewed every 10 s (nodelease controller,
  renewInterval = 25 % of the duration), and the Node's status re-posted with new lastHeartbeatTime
  every 5 minutes (nodeStatusReportFrequency) when nothing changed;
- binds unscheduled pods to the node (POST pods/<name>/binding, as the scheduler), unless the
  scheduler controller (labkit.controllers.scheduler) runs; a pod that does not tolerate one of
  the node's NoExecute taints stays Pending, as the scheduler's TaintToleration filter leaves it
  (pkg/scheduler/framework/plugins/tainttoleration, Filter), until the taint is taken off (no
  FailedScheduling Event is written). The filter looks at NoSchedule taints too; the stand-in does
  not, since where the node lifecycle controller does not run the Node keeps the not-ready
  NoSchedule taint that TaintNodesByCondition admission gives it at creation;
- reports bound pods Running and Ready at once (PUT pods/<name>/status, as the kubelet); a
  hostNetwork pod gets the node's address as its pod IP (generateAPIPodStatus); each container's
  status has the resources in force (InPlacePodVerticalScaling), and a resize the API server
  accepted (pods/resize) is reported actuated at once (the stand-in admits every resize);
- ends a deleted pod as the kubelet does: each container is sent SIGTERM and stops as its process
  would — at once with exit code 0 for most programs (pause, nginx, ... handle SIGTERM), or, when
  PID 1 is a shell, `sleep` or `tail` (they ignore SIGTERM as PID 1 of a container: the kernel drops
  signals without a handler there), killed with SIGKILL when the grace period is over: exit code
  137. Once all containers stopped, the pod's status is written with a terminal phase (getPhase
  with podIsTerminal: Succeeded when every container exited 0, else Failed) and terminated
  container states (reason Completed or Error), and then it is deleted with gracePeriodSeconds 0
  and its UID as precondition, as the kubelet's status manager does;
- records the Events `kubectl describe pod` shows: Scheduled (from default-scheduler), and from
  the kubelet Pulling/Pulled (imagePullPolicy Always pulls, the others find the image present),
  Created, Started, and Killing when the pod is deleted.

Which programs ignore SIGTERM is decided from the container's command (or, without one, a few
well-known images whose default command is a shell: busybox, alpine, ubuntu, debian): labkit runs
no container to ask.
"""

from __future__ import annotations

import datetime
import hashlib
import os
import threading
import time

from labkit.apiserver.errors import ApiError
from labkit.apiserver.podresize import status_resources
from labkit.apiserver.timestamps import now_rfc3339
from labkit.controllers.base import KeyedController, bind
from labkit.scheduler.objects import untolerated
from labkit.controllers.events import EventRecorder, involved
from labkit.controllers.workqueue import RateLimitingQueue

CONTROLLER = "node"
NODE_NAME = "labkit-node"
HOST_IP = "127.0.89.2"          # the node's InternalIP: on loopback, where its host-network processes listen
KUBELET_VERSION = "v1.34.1"
LEASE_DURATION = 40             # kubelet nodeLeaseDurationSeconds
LEASE_RENEW = LEASE_DURATION / 4    # nodelease: renewInterval is 25 % of the lease duration
STATUS_REPORT = 300.0           # nodeStatusReportFrequency: the status is re-posted this often when unchanged
KILLED_EXIT_CODE = 137          # 128 + SIGKILL
SIGTERM_IGNORERS = {"sh", "bash", "ash", "dash", "sleep", "tail"}
SHELL_IMAGES = {"busybox", "alpine", "ubuntu", "debian"}


def pod_ip(uid: str) -> str:
    n = int.from_bytes(hashlib.sha256(uid.encode()).digest()[:2], "big")
    return f"10.244.{n // 254 % 254 + 1}.{n % 254 + 1}"


def ignores_sigterm(container: dict) -> bool:
    """Whether the container's PID 1 ignores SIGTERM (see the module's docstring)."""
    command = list(container.get("command") or []) or list(container.get("args") or [])
    if command:
        return os.path.basename(str(command[0])) in SIGTERM_IGNORERS
    image = str(container.get("image") or "").rsplit("/", 1)[-1].split("@")[0].split(":")[0]
    return image in SHELL_IMAGES


def _allocated(container: dict) -> dict:
    """containerStatuses[*].allocatedResources: the requests kubelet admitted (none: left out)."""
    requests = (container.get("resources") or {}).get("requests") or {}
    return {"allocatedResources": dict(requests)} if requests else {}


def node_object(now: str) -> dict:
    conditions = [("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                  ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                  ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                  ("Ready", "True", "KubeletReady", "kubelet is posting ready status")]
    resources = {"cpu": "2", "memory": "4030100Ki", "ephemeral-storage": "20470Mi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": NODE_NAME, "labels": {
                "kubernetes.io/hostname": NODE_NAME, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64"}},
            "spec": {},
            "status": {"conditions": [{"type": t, "status": st, "lastHeartbeatTime": now, "lastTransitionTime": now,
                                       "reason": r, "message": m} for t, st, r, m in conditions],
                       "addresses": [{"type": "InternalIP", "address": HOST_IP},
                                     {"type": "Hostname", "address": NODE_NAME}],
                       "capacity": dict(resources), "allocatable": dict(resources),
                       "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                       "nodeInfo": {"kubeletVersion": KUBELET_VERSION, "kubeProxyVersion": "",
                                    "operatingSystem": "linux", "architecture": "amd64",
                                    "containerRuntimeVersion": "labkit://1.0", "osImage": "labkit node stand-in",
                                    "kernelVersion": os.uname().release, "machineID": "", "systemUUID": "",
                                    "bootID": ""}}}


class NodeController(KeyedController):
    name = CONTROLLER
    user = f"system:node:{NODE_NAME}"

    def __init__(self, client, log, workers: int = 1, defer_binding=None, clock=None):
        super().__init__(client, log, workers)
        # the grace periods run on this clock (labkit.controllers.clock); heartbeats in real time
        self.clock = clock or time.monotonic
        # the scheduler runs: it binds, and this stand-in only runs what is bound to its node
        self.defer_binding = defer_binding or (lambda: False)
        self._stopping: dict[str, float] = {}      # pod uid -> when its containers were told to stop
        self.scheduler_events: EventRecorder | None = None
        self.kubelet_events: EventRecorder | None = None
        self._heartbeat: threading.Thread | None = None

    def start(self) -> None:
        if not self.running:
            self.scheduler_events = EventRecorder(self.client, "default-scheduler")
            self.kubelet_events = EventRecorder(self.client, "kubelet", NODE_NAME)
            self.register()
        super().start()
        if self._heartbeat is None or not self._heartbeat.is_alive():
            self._heartbeat = threading.Thread(target=self._beat, daemon=True, name="node-heartbeat")
            self._heartbeat.start()

    def stop(self) -> None:
        super().stop()
        for recorder in (self.scheduler_events, self.kubelet_events):
            if recorder is not None:
                recorder.stop()
        if self._heartbeat is not None:
            self._heartbeat.join(timeout=5)
            self._heartbeat = None

    # -- the Node and its heartbeats ---------------------------------------------------------------
    def register(self) -> dict:
        """registerWithAPIServer: create the Node, or (already registered) post its status anew."""
        node = node_object(now_rfc3339())
        try:
            return self.client.create("v1", "nodes", node)
        except ApiError as exc:
            if exc.code != 409:
                raise
        return self._post_status()

    def _post_status(self) -> dict:
        current = self.client.get("v1", "nodes", NODE_NAME)
        now = now_rfc3339()
        fresh = node_object(now)["status"]
        old = {c.get("type"): c for c in (current.get("status") or {}).get("conditions") or []}
        for cond in fresh["conditions"]:
            before = old.get(cond["type"])
            if before is not None and before.get("status") == cond["status"] and before.get("lastTransitionTime"):
                cond["lastTransitionTime"] = before["lastTransitionTime"]
        return self.client.update("v1", "nodes", dict(current, status=dict(current.get("status") or {}, **fresh)),
                                  subresource="status")

    def _renew_lease(self, node: dict) -> None:
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")     # a MicroTime
        spec = {"holderIdentity": NODE_NAME, "leaseDurationSeconds": LEASE_DURATION, "renewTime": now}
        lease = self.client.get_or_none("coordination.k8s.io/v1", "leases", NODE_NAME, "kube-node-lease")
        if lease is None:
            owner = {"apiVersion": "v1", "kind": "Node", "name": NODE_NAME, "uid": node["metadata"]["uid"]}
            self.client.create("coordination.k8s.io/v1", "leases",
                               {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                "metadata": {"name": NODE_NAME, "ownerReferences": [owner]}, "spec": spec},
                               "kube-node-lease")
        else:
            self.client.update("coordination.k8s.io/v1", "leases", dict(lease, spec=dict(lease.get("spec") or {},
                                                                                            **spec)),
                               "kube-node-lease")

    def _beat(self) -> None:
        last_status = time.monotonic()
        while self.running and not self._stop.is_set():
            try:
                node = self.client.get("v1", "nodes", NODE_NAME)
                if time.monotonic() - last_status >= STATUS_REPORT:
                    node = self._post_status()
                    last_status = time.monotonic()
                self._renew_lease(node)
            except ApiError as exc:
                if exc.code == 404:         # the Node was deleted: register again, as a kubelet does
                    try:
                        self.register()
                    except ApiError:
                        pass
            self._stop.wait(LEASE_RENEW)

    def make_queue(self) -> RateLimitingQueue:
        return RateLimitingQueue(self.name, clock=self.clock)

    def idle(self) -> bool:
        return super().idle() and all(r is None or r.idle() for r in (self.scheduler_events, self.kubelet_events))

    def busy(self) -> bool:
        """Work in hand now: a change not yet handled, a Pod queued or being synced, an Event not
        yet written (a Pod waiting for the end of its grace period does not count)."""
        return self.running and (self.queue.busy() or not all(i.idle() for i in self.informers.values())
                                 or not all(r is None or r.idle() for r in (self.scheduler_events,
                                                                            self.kubelet_events)))

    def _container_events(self, pod: dict, reason_messages) -> None:
        for c in (pod.get("spec") or {}).get("containers") or []:
            ref = dict(involved(pod), fieldPath=f"spec.containers{{{c.get('name')}}}")
            for type_, reason, message in reason_messages(c):
                self.kubelet_events.event(ref, type_, reason, message)

    def make_informers(self):
        return {"pods": self.informer("v1", "pods", "Pod", on_add=self.enqueue,
                                      on_update=lambda old, new: self.enqueue(new)),
                "nodes": self.informer("v1", "nodes", "Node", namespaced=False, on_update=self._node_updated)}

    def _untolerated_taint(self, pod: dict) -> dict | None:
        """The first NoExecute taint of the node the pod does not tolerate (tainttoleration.go
        Filter: v1helper.FindMatchingUntoleratedTaint; its NoSchedule taints are left out, see the
        module docstring), or None."""
        node = self.informers["nodes"].get(NODE_NAME) or {}
        return untolerated((node.get("spec") or {}).get("taints") or [],
                           (pod.get("spec") or {}).get("tolerations") or [], ("NoExecute",))

    def _node_updated(self, old: dict, new: dict) -> None:
        """The node's taints changed: the pods left Pending for them are looked at again."""
        if new["metadata"]["name"] != NODE_NAME or \
                (old.get("spec") or {}).get("taints") == (new.get("spec") or {}).get("taints"):
            return
        for pod in self.informers["pods"].list():
            if not (pod.get("spec") or {}).get("nodeName"):
                self.enqueue(pod)

    def sync(self, key: str) -> None:
        pod = self.informers["pods"].get(key)
        if pod is None:
            return
        meta, spec = pod["metadata"], pod.get("spec") or {}
        ns, name = meta["namespace"], meta["name"]
        if not spec.get("nodeName"):
            if meta.get("deletionTimestamp") or spec.get("schedulerName", "default-scheduler") != "default-scheduler" \
                    or self.defer_binding():
                return
            if self._untolerated_taint(pod) is not None:
                return
            if not bind(self.client, pod, NODE_NAME):
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
        elif (pod.get("status") or {}).get("phase") == "Running" and self._resized(pod):
            self._report_resized(pod)

    @staticmethod
    def _resized(pod: dict) -> bool:
        """A running Pod whose containers' cpu and memory differ from what its status reports:
        a resize the API server accepted (pods/resize)."""
        statuses = {s.get("name"): s for s in (pod.get("status") or {}).get("containerStatuses") or []}
        return any(c.get("name") in statuses and
                   statuses[c["name"]].get("resources") != status_resources(c.get("resources"))
                   for c in (pod.get("spec") or {}).get("containers") or [])

    def _report_resized(self, pod: dict) -> None:
        """kubelet v1.34's handling of an accepted resize (allocation_manager.go
        handlePodResourcesResize, then doPodResizeAction): the stand-in runs no containers and
        admits every resize, so it is actuated at once: containerStatuses[*].resources and
        allocatedResources report the new values (no PodResizePending/InProgress condition stays)."""
        status = dict(pod.get("status") or {})
        specs = {c.get("name"): c for c in (pod.get("spec") or {}).get("containers") or []}
        statuses = []
        for s in status.get("containerStatuses") or []:
            s = dict(s)
            if s.get("name") in specs:
                resources = specs[s["name"]].get("resources")
                s["resources"] = status_resources(resources)
                s.pop("allocatedResources", None)
                s.update(_allocated(specs[s["name"]]))
            statuses.append(s)
        status["containerStatuses"] = statuses
        self._write_status(pod, status)

    def _finish_deletion(self, key: str, pod: dict) -> None:
        meta = pod["metadata"]
        grace = meta.get("deletionGracePeriodSeconds") or 0
        if grace <= 0:
            self._stopping.pop(meta["uid"], None)
            return      # deleted already, waiting for finalizers
        containers = (pod.get("spec") or {}).get("containers") or []
        phase = (pod.get("status") or {}).get("phase")
        if phase not in ("Succeeded", "Failed"):
            # like the kubelet, count the grace period from when the containers are told to stop
            if meta["uid"] not in self._stopping:
                self._container_events(pod, lambda c: [("Normal", "Killing", f"Stopping container {c.get('name')}")])
            since = self._stopping.setdefault(meta["uid"], self.clock())
            stubborn = [c for c in containers if ignores_sigterm(c)]
            wait = since + grace - self.clock() if stubborn else 0
            if wait > 0:
                self.queue.add_after(key, wait + 0.01)
                return
            if not self._report_terminated(pod, {c.get("name") for c in stubborn}):
                return
            why = (f"grace period of {grace}s is over, {', '.join(c.get('name') for c in stubborn)} killed"
                   if stubborn else "every container exited on SIGTERM")
        else:
            why = f"phase {phase}"
        self._stopping.pop(meta["uid"], None)
        self.log.record(self.name, "delete-pod", None,
                        f"pod {meta['namespace']}/{meta['name']}: {why}, terminal status written "
                        "→ delete with gracePeriodSeconds=0")
        try:
            self.client.delete("v1", "pods", meta["name"], meta["namespace"],
                               options={"gracePeriodSeconds": 0, "preconditions": {"uid": meta["uid"]}})
        except ApiError as exc:
            if exc.code not in (404, 409):
                raise

    def _report_terminated(self, pod: dict, killed: set) -> bool:
        """Write the terminal phase and the containers' terminated states; False when the pod changed
        meanwhile (it is synced again)."""
        spec = pod.get("spec") or {}
        now = now_rfc3339()
        before = {s.get("name"): s for s in (pod.get("status") or {}).get("containerStatuses") or []}
        statuses, failed = [], False
        for c in spec.get("containers") or []:
            old = before.get(c.get("name")) or {}
            code = KILLED_EXIT_CODE if c.get("name") in killed else 0
            failed = failed or code != 0
            started = ((old.get("state") or {}).get("running") or {}).get("startedAt") or now
            statuses.append({**{k: v for k, v in old.items() if k not in ("state", "ready", "started")},
                             "name": c.get("name"), "ready": False, "started": False, "restartCount":
                             old.get("restartCount", 0), "image": old.get("image", c.get("image")),
                             "state": {"terminated": {"exitCode": code, "reason": "Error" if code else "Completed",
                                                      "startedAt": started, "finishedAt": now,
                                                      **({"containerID": old["containerID"]}
                                                         if old.get("containerID") else {})}}})
        conditions = []
        for cond in (pod.get("status") or {}).get("conditions") or []:
            cond = dict(cond)
            if cond.get("type") in ("Ready", "ContainersReady", "PodReadyToStartContainers") and \
                    cond.get("status") == "True":
                cond.update(status="False", lastTransitionTime=now)
                if cond["type"] != "PodReadyToStartContainers":
                    cond["reason"] = "PodCompleted"
            conditions.append(cond)
        status = dict(pod.get("status") or {}, phase="Failed" if failed else "Succeeded", conditions=conditions,
                      containerStatuses=statuses)
        return self._write_status(pod, status)

    def _write_status(self, pod: dict, status: dict) -> bool:
        """PUT pods/<name>/status; False when the pod is gone. A failed write (a conflict: the pod
        changed meanwhile) fails the sync, so the worker requeues the key rate-limited and keeps its
        backoff until a sync succeeds (processNextWorkItem); before, a conflict re-added the key
        and the sync then succeeded, forgetting the backoff it had just grown."""
        meta = pod["metadata"]
        try:
            self.client.update("v1", "pods", dict(pod, status=status), meta["namespace"], "status")
        except ApiError as exc:
            if exc.code != 404:
                raise
            return False
        return True

    def _report_running(self, pod: dict) -> None:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        now = now_rfc3339()
        ip = HOST_IP if spec.get("hostNetwork") else pod_ip(meta["uid"])
        statuses = []
        for c in spec.get("containers") or []:
            cid = hashlib.sha256(f"{meta['uid']}/{c.get('name')}".encode()).hexdigest()
            # kubelet v1.34 (InPlacePodVerticalScaling on) reports the resources in force and the
            # allocated requests: what tells the API server that the node resizes in place
            # (ValidatePodResize isPodResizeRequestSupported)
            statuses.append({"name": c.get("name"), "ready": True, "started": True, "restartCount": 0,
                             "image": c.get("image"), "imageID": f"{c.get('image')}@sha256:{cid[:64]}",
                             "containerID": f"labkit://{cid}", "state": {"running": {"startedAt": now}},
                             "resources": status_resources(c.get("resources")),
                             **_allocated(c)})
        conditions = [{"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
                      for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady",
                                "PodScheduled")]
        status = dict(pod.get("status") or {}, phase="Running", conditions=conditions, hostIP=HOST_IP,
                      hostIPs=[{"ip": HOST_IP}], podIP=ip, podIPs=[{"ip": ip}], startTime=now,
                      containerStatuses=statuses)
        if not self._write_status(pod, status):
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
