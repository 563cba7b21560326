"""The taint-eviction controller of kube-controller-manager v1.34.1
(pkg/controller/tainteviction/taint_eviction.go), as a controller of the embedded server: it
deletes the Pods of a node whose NoExecute taints they do not tolerate, at once, or after the
smallest tolerationSeconds of the tolerations that matched.

- Node updates matter only when the node's NoExecute taints change (NodeUpdated); Pod updates
  only when the Pod's tolerations or spec.nodeName change (PodUpdated).
- processPodOnNode decides per Pod (labkit.scheduler.tainteviction for the matching): a taint not
  tolerated → the eviction is due now (a pending one is cancelled first); tolerated forever →
  a pending eviction is cancelled; else due at now + the smallest tolerationSeconds, except
  that an eviction already pending since earlier is kept as it is (a longer toleration does not
  postpone it, a shorter one does not bring it forward).
- A node without NoExecute taints any more cancels the evictions of its Pods; a Pod deleted
  cancels its own. Each cancelled pending eviction emits `Cancelling deletion of Pod NS/NAME`
  (emitCancelPodDeletionEvent).
- When an eviction is due (deletePodHandler): the event `Marking for deletion Pod NS/NAME`
  (TaintManagerEviction, Normal, from taint-eviction-controller), then the condition
  DisruptionTarget=True reason DeletionByTaintManager on the Pod's status
  (addConditionAndDeletePod), then DELETE of the Pod, tried up to 5 times.

Time is the controller's `clock` (seconds; time.monotonic unless the manager's settings give
another, which is how tests drive it without waiting): the timed evictions fire when the clock
reaches them (TimedWorkerQueue, timed_workers.go).
"""

from __future__ import annotations

import threading
import time

from labkit.apiserver.errors import ApiError
from labkit.apiserver.timestamps import now_rfc3339
from labkit.controllers.base import KeyedController
from labkit.scheduler import tainteviction
from labkit.scheduler.objects import Pod

CONTROLLER = "taint-eviction-controller"     # names.TaintEvictionController: the Events' source
RETRIES = 5                                   # taint_eviction.go `retries`
POLL = 0.05                                   # seconds between looks at the clock for due evictions


def no_execute_taints(node: dict | None) -> list[dict]:
    """getNoExecuteTaints, as the fields that tell taints apart (Semantic.DeepEqual on them)."""
    if node is None:
        return []
    return [{k: t.get(k) for k in ("key", "value", "effect")}
            for t in (node.get("spec") or {}).get("taints") or [] if t.get("effect") == "NoExecute"]


def _key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


class TaintEvictionController(KeyedController):
    name = "tainteviction"
    component = CONTROLLER

    def __init__(self, client, log, clock=None):
        super().__init__(client, log)
        self.clock = clock or time.monotonic
        self.tainted: dict[str, list[dict]] = {}         # taintedNodes: node -> its NoExecute taints
        self.work: dict[str, tuple[float, float]] = {}   # pod key -> (created at, fires at)
        self.fired: list[tuple[str, float]] = []         # (pod key, clock when it fired): the record tests read
        self._lock = threading.Lock()
        self._timer: threading.Thread | None = None

    # -- informers: NodeUpdated, PodUpdated ------------------------------------------------------
    def make_informers(self):
        def node_changed(old, new):
            if old is not None and new is not None and no_execute_taints(old) == no_execute_taints(new):
                return
            self.queue.add(("node", (new or old)["metadata"]["name"]))

        def pod_changed(old, new):
            if old is not None and new is not None:
                o, n = old.get("spec") or {}, new.get("spec") or {}
                if o.get("tolerations") == n.get("tolerations") and o.get("nodeName") == n.get("nodeName"):
                    return
            pod = new or old
            self.queue.add(("pod", pod["metadata"]["namespace"], pod["metadata"]["name"],
                            (pod.get("spec") or {}).get("nodeName") or ""))

        return {
            "nodes": self.informer("v1", "nodes", "Node", namespaced=False,
                                   on_add=lambda n: node_changed(None, n), on_update=node_changed,
                                   on_delete=lambda n: node_changed(n, None)),
            "pods": self.informer("v1", "pods", "Pod", on_add=lambda p: pod_changed(None, p),
                                  on_update=pod_changed, on_delete=lambda p: pod_changed(p, None)),
        }

    def start(self) -> None:
        super().start()
        self._timer = threading.Thread(target=self._fire_loop, daemon=True, name=f"{self.name}-timer")
        self._timer.start()

    def stop(self) -> None:
        super().stop()
        if self._timer is not None:
            self._timer.join(timeout=5)
            self._timer = None

    def idle(self) -> bool:
        with self._lock:
            due = any(at <= self.clock() for _created, at in self.work.values())
        return super().idle() and not due

    def pending(self) -> dict[str, float]:
        """Each Pod whose eviction is scheduled, with the clock time it fires at."""
        with self._lock:
            return {key: at for key, (_created, at) in self.work.items()}

    # -- handleNodeUpdate, handlePodUpdate --------------------------------------------------------
    def sync(self, item) -> None:
        if item[0] == "node":
            self._node_update(item[1])
        else:
            self._pod_update(*item[1:])

    def _pods_on(self, node_name: str) -> list[dict]:
        return [p for p in self.informers["pods"].list() if (p.get("spec") or {}).get("nodeName") == node_name]

    def _node_update(self, node_name: str) -> None:
        node = self.informers["nodes"].get(node_name)
        if node is None:
            self.tainted.pop(node_name, None)
            return
        taints = no_execute_taints(node)
        if taints:
            self.tainted[node_name] = taints
        else:
            self.tainted.pop(node_name, None)
        pods = self._pods_on(node_name)
        if not taints:
            for pod in pods:
                self._cancel(pod["metadata"]["namespace"], pod["metadata"]["name"])
            return
        now = self.clock()
        for pod in pods:
            self._process(pod, taints, now)

    def _pod_update(self, namespace: str, name: str, node_name: str) -> None:
        pod = self.informers["pods"].get(_key(namespace, name))
        if pod is None:
            self._cancel(namespace, name)
            return
        if (pod.get("spec") or {}).get("nodeName") != node_name or not node_name:
            return
        taints = self.tainted.get(node_name)
        if taints is None:
            return
        self._process(pod, taints, self.clock())

    def _process(self, obj: dict, taints: list[dict], now: float) -> None:
        """processPodOnNode. Each decision goes to the decision log with what it depended on (the
        Pod's tolerations, its node's NoExecute taints) and the delay it gave: what a watcher of
        the Pod learns, for labs whose predictions it answers."""
        pod = Pod(obj)
        ns, name = pod.namespace, pod.name
        all_tolerated, used = tainteviction.matching_tolerations(taints, pod.tolerations)
        delay = tainteviction.min_toleration_seconds(used) if all_tolerated else 0
        self.log.record(self.name, "process", {"namespace": ns, "name": name},
                        f"pod {ns}/{name} on {pod.node_name}: " + ("not evicted (tolerated without tolerationSeconds)"
                                                                   if delay is None else f"eviction due in {delay} s"),
                        node=pod.node_name, taints=taints, tolerations=pod.tolerations,
                        after="never" if delay is None else delay)
        if not all_tolerated:
            self._cancel(ns, name)
            self._add(ns, name, now, now)
            return
        if delay is None:
            self._cancel(ns, name)
            return
        trigger = now + delay
        with self._lock:
            scheduled = self.work.get(_key(ns, name))
        start = now
        if scheduled is not None:
            start = scheduled[0]
            if start + delay < trigger:          # pending since earlier: kept as it is
                return
            self._cancel(ns, name)
        self._add(ns, name, start, trigger)

    def _add(self, namespace: str, name: str, created: float, fires: float) -> None:
        with self._lock:
            if _key(namespace, name) not in self.work:      # AddWork keeps an existing worker
                self.work[_key(namespace, name)] = (created, fires)

    def _cancel(self, namespace: str, name: str) -> None:
        """cancelWorkWithEvent."""
        with self._lock:
            had = self.work.pop(_key(namespace, name), None) is not None
        if had:
            event = tainteviction.cancel_event(Pod({"metadata": {"name": name, "namespace": namespace}}))
            self.recorder.event(_ref(namespace, name), event["type"], event["reason"], event["message"])
            self.log.record(self.name, "cancel", {"namespace": namespace, "name": name},
                            f"pod {namespace}/{name}: eviction cancelled")

    # -- the timed workers and deletePodHandler ----------------------------------------------------
    def _fire_loop(self) -> None:
        while not self._stop.is_set():
            now = self.clock()
            with self._lock:
                due = sorted((at, key) for key, (_c, at) in self.work.items() if at <= now)
                for _at, key in due:
                    del self.work[key]
            for _at, key in due:
                try:
                    self._evict(*key.split("/", 1))
                except Exception as exc:      # a failed deletion is logged, as the handler's error is
                    self.log.record(self.name, "error", None, f"evicting {key} failed: {exc}", level="info")
                self.fired.append((key, now))
            self._stop.wait(POLL)

    def _evict(self, namespace: str, name: str) -> None:
        event = tainteviction.mark_event(Pod({"metadata": {"name": name, "namespace": namespace}}))
        self.recorder.event(_ref(namespace, name), event["type"], event["reason"], event["message"])
        error = None
        for _ in range(RETRIES):
            try:
                self._add_condition_and_delete(namespace, name)
                self.log.record(self.name, "evict", {"namespace": namespace, "name": name},
                                f"pod {namespace}/{name}: deleted (NoExecute taint)")
                return
            except ApiError as exc:
                error = exc
                if exc.code == 404:
                    return
                time.sleep(0.01)
        raise error

    def _add_condition_and_delete(self, namespace: str, name: str) -> None:
        """addConditionAndDeletePod: DisruptionTarget (unless already so), then DELETE."""
        pod = self.client.get("v1", "pods", name, namespace)
        status = dict(pod.get("status") or {})
        conditions = list(status.get("conditions") or [])
        old = next((c for c in conditions if c.get("type") == "DisruptionTarget"), None)
        wanted = tainteviction.CONDITION
        if old is None or any(old.get(k) != wanted[k] for k in ("status", "reason", "message")):
            changed = old is None or old.get("status") != wanted["status"]
            condition = dict(wanted, lastTransitionTime=now_rfc3339() if changed else old.get("lastTransitionTime"))
            status["conditions"] = [c for c in conditions if c.get("type") != "DisruptionTarget"] + [condition]
            self.client.update("v1", "pods", dict(pod, status=status), namespace, "status")
        self.client.delete("v1", "pods", name, namespace)


def _ref(namespace: str, name: str) -> dict:
    """The Events' involved object: emitPodDeletionEvent names the Pod by apiVersion, kind,
    namespace and name only."""
    return {"apiVersion": "v1", "kind": "Pod", "namespace": namespace, "name": name}
