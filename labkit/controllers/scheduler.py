"""kube-scheduler as a controller of the embedded server: labkit.scheduler's reconstruction of
v1.34.1's default profile deciding for every Pod that names no node, against the Nodes and the
bound Pods the server holds.

- A Pod with spec.schedulerName `default-scheduler` and no spec.nodeName is scheduled:
  bound with POST pods/<name>/binding and the event `Scheduled` ("Successfully assigned <ns>/<pod>
  to <node>", from default-scheduler), as schedule_one.go's binding cycle does;
- when it fits nowhere: condition PodScheduled=False reason Unschedulable with FitError's message,
  the Warning event FailedScheduling with the same text (schedule_one.go handleSchedulingFailure),
  and a retry after the queue's backoff (1 s doubling to 10 s, scheduling_queue.go); any change of
  a Node or the deletion of a Pod retries every waiting Pod at once (where upstream's
  QueueingHints pick the Pods an event can help, labkit retries all of them);
- preemption, weighing the PodDisruptionBudgets the server holds (a victim past a PDB's
  status.disruptionsAllowed counts as a violation, default_preemption.go filterPodsWithPDBViolation):
  the victims get condition DisruptionTarget (reason PreemptionByScheduler) and are
  deleted, with the event Preempted; the preemptor's status.nominatedNodeName names the node
  (preemption.go prepareCandidate, DefaultPreemption).

Every cycle's record is kept (the last per Pod, in memory and, beside the decision log,
as <state>/scheduler/<namespace>/<name>.json), for `labkit scheduler explain POD`.

Profiles: kube-scheduler reads its KubeSchedulerConfiguration from the file `--config` names, once,
at its start. labkit's reads it from the ConfigMap kube-system/kube-scheduler-config (key
config.yaml; labkit.scheduler.config builds the profiles as v1.34.1 does) and builds its profiles
again whenever the ConfigMap changes, as a restart of kube-scheduler with that file would; without
the ConfigMap it runs the default profile alone. A configuration kube-scheduler would not start
with leaves the profiles as they were: the error is in labkit's decision log and in a Warning
event `FailedToLoadConfiguration` on the ConfigMap. Each Pod is decided by the profile its
spec.schedulerName names; a Pod whose schedulerName no profile has is left alone, as upstream's
eventhandlers.go responsibleForPod does.

A Pod bound in one cycle counts on its node in the next even before the Pod informer has seen the
binding: the scheduler cache assumes it there (schedule_one.go assume, backend/cache/cache.go
AssumePod) until the informer's copy names the node (AddPod/UpdatePod confirm it) or the Pod is
gone. Without that, a batch of Pods created together (a Deployment's replicas) would each be
decided on a snapshot that misses the ones bound just before it.
"""

from __future__ import annotations

import random
import time

from labkit.apiserver.errors import ApiError
from labkit.apiserver.timestamps import now_rfc3339
from labkit.controllers.base import KeyedController, bind, object_key
from labkit.scheduler import framework as fw
from labkit.scheduler.objects import Node, NodeInfo, Pod
from labkit.scheduler.preemption import DefaultPreemption
from labkit.scheduler.profiles import make_profile
from labkit.scheduler.queue import ActiveQueue, backoff_seconds

CONTROLLER = "scheduler"
CONFIG_NAMESPACE, CONFIG_NAME, CONFIG_KEY = "kube-system", "kube-scheduler-config", "config.yaml"
# what helper.DefaultSelector looks a Pod's Services and controller up in (framework.Cycle.workloads)
WORKLOAD_KINDS = (("v1", "services", "Service"), ("v1", "replicationcontrollers", "ReplicationController"),
                  ("apps/v1", "replicasets", "ReplicaSet"), ("apps/v1", "statefulsets", "StatefulSet"))


def _pending(pod: dict, profiles: dict) -> bool:
    spec = pod.get("spec") or {}
    return (not spec.get("nodeName") and not pod["metadata"].get("deletionTimestamp")
            and spec.get("schedulerName", fw.DEFAULT_SCHEDULER) in profiles)


def _scheduling_relevant(pod: dict) -> dict:
    """What of a Pod an update must change to be tried again (eventhandlers.go skipPodUpdate: not
    its status, resourceVersion, managedFields, annotations, finalizers)."""
    meta = {k: v for k, v in pod["metadata"].items()
            if k not in ("resourceVersion", "managedFields", "annotations", "finalizers", "generation")}
    return {"metadata": meta, "spec": pod.get("spec")}


def _terminal(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


class SchedulerController(KeyedController):
    name = CONTROLLER
    component = fw.DEFAULT_SCHEDULER

    def __init__(self, client, log, profiles=None, seed: int | None = None):
        super().__init__(client, log)
        self.given = list(profiles or [make_profile("default")])     # without a configuration ConfigMap
        self.profiles = {p.name: p for p in self.given}
        self.config_error: str | None = None
        self.recorders: dict = {}         # schedulerName -> the EventRecorder of that profile
        self.rng = random.Random(seed)
        self.attempts: dict[str, int] = {}
        self.cycles: dict[str, fw.Cycle] = {}
        self.assumed: dict[str, dict] = {}      # key -> the Pod as bound, until the informer shows it bound

    def make_informers(self):
        def pod_changed(pod, *_):
            if _pending(pod, self.profiles):
                self.enqueue(pod)

        def pod_updated(old, new):
            if _scheduling_relevant(old) != _scheduling_relevant(new):
                pod_changed(new)

        def config_changed(cm, *_):
            meta = cm["metadata"]
            if (meta.get("namespace"), meta["name"]) == (CONFIG_NAMESPACE, CONFIG_NAME):
                self._configure(cm)

        def config_deleted(cm):
            meta = cm["metadata"]
            if (meta.get("namespace"), meta["name"]) == (CONFIG_NAMESPACE, CONFIG_NAME):
                self._configure(None)

        # the listers PodTopologySpread's default constraints read (plugin.go setListers)
        workloads = {resource: self.informer(api_version, resource, kind)
                     for api_version, resource, kind in WORKLOAD_KINDS}
        return {
            **workloads,
            "configmaps": self.informer("v1", "configmaps", "ConfigMap", on_add=config_changed,
                                        on_update=lambda old, new: config_changed(new), on_delete=config_deleted),
            "pods": self.informer("v1", "pods", "Pod", on_add=pod_changed, on_update=pod_updated,
                                  on_delete=lambda pod: self._retry_all()),
            # DefaultPreemption's PDB lister (default_preemption.go getPodDisruptionBudgets)
            "poddisruptionbudgets": self.informer("policy/v1", "poddisruptionbudgets", "PodDisruptionBudget"),
            "nodes": self.informer("v1", "nodes", "Node", namespaced=False, on_add=lambda n: self._retry_all(),
                                   on_update=lambda old, new: self._retry_all(), on_delete=lambda n: self._retry_all()),
        }

    def make_queue(self) -> ActiveQueue:
        """Pods are taken as activeQ pops them: the highest spec.priority first, then the earliest
        queued (queuesort/priority_sort.go Less)."""
        def priority_of(key: str) -> int:
            informers = getattr(self, "informers", None) or {}
            pod = informers["pods"].get(key) if "pods" in informers else None
            return int(((pod or {}).get("spec") or {}).get("priority") or 0)
        return ActiveQueue(self.name, priority_of)

    def _event_of(self, scheduler_name: str, obj: dict, type_: str, reason: str, message: str) -> None:
        """An event of the profile that decided: each profile records with its schedulerName as the
        reporting component (profile/profile.go newProfile: recorderFact(cfg.SchedulerName))."""
        if scheduler_name == self.component:
            self.event(obj, type_, reason, message)
            return
        if self.recorder is None:
            return
        from labkit.controllers.events import EventRecorder, involved
        recorder = self.recorders.get(scheduler_name)
        if recorder is None:
            recorder = self.recorders[scheduler_name] = EventRecorder(self.client, scheduler_name)
        recorder.event(involved(obj), type_, reason, message)

    def idle(self) -> bool:
        return super().idle() and all(r.idle() for r in self.recorders.values())

    def stop(self) -> None:
        super().stop()
        for recorder in self.recorders.values():
            recorder.stop()
        self.recorders = {}

    def _configure(self, cm: dict | None) -> None:
        """The profiles of the configuration ConfigMap (or the given ones without it); a
        configuration that fails to load changes nothing."""
        from labkit.scheduler.config import ConfigError, load
        if cm is None:
            self.profiles, self.config_error = {p.name: p for p in self.given}, None
            self.log.record(self.name, "config", None, "no configuration ConfigMap: the default profile")
        else:
            try:
                profiles, _percentage = load(((cm.get("data") or {}).get(CONFIG_KEY)) or "")
            except (ConfigError, ValueError, TypeError, AttributeError) as exc:
                message = str(exc) if isinstance(exc, ConfigError) else f"couldn't read the configuration: {exc}"
                self.config_error = message
                self.log.record(self.name, "config-refused", None, message)
                self.event(cm, "Warning", "FailedToLoadConfiguration", message)
                return
            self.profiles, self.config_error = {p.name: p for p in profiles}, None
            self.log.record(self.name, "config", None, "profiles " + ", ".join(self.profiles))
        self._retry_all()

    def _retry_all(self) -> None:
        """A cluster event: every Pod waiting to be scheduled is tried again now."""
        if self.queue is None or "pods" not in self.informers:
            return
        for pod in self.informers["pods"].list():
            if _pending(pod, self.profiles):
                self.queue.add(object_key(pod))

    def snapshot(self) -> list[NodeInfo]:
        """The scheduler cache's view: every Node with the non-terminal Pods bound to it."""
        nodes = [NodeInfo(Node(n)) for n in sorted(self.informers["nodes"].list(), key=lambda n: n["metadata"]["name"])]
        by_name = {n.name: n for n in nodes}
        for pod in self.informers["pods"].list():
            key = object_key(pod)
            if key in self.assumed:
                if (pod.get("spec") or {}).get("nodeName") or pod["metadata"].get("uid") != \
                        self.assumed[key]["metadata"].get("uid"):
                    del self.assumed[key]        # confirmed by the informer, or another Pod now
                else:
                    pod = self.assumed[key]
            node = by_name.get((pod.get("spec") or {}).get("nodeName") or "")
            if node is not None and not _terminal(pod):
                node.add(Pod(pod))
        return nodes

    def workloads(self) -> dict:
        """The Services, ReplicationControllers, ReplicaSets and StatefulSets the informers hold."""
        return {resource: self.informers[resource].list() for _v, resource, _k in WORKLOAD_KINDS
                if resource in self.informers}

    def pdbs(self) -> list[dict]:
        """The PodDisruptionBudgets the informer holds, every namespace's (preemption keeps those
        of the victim's namespace)."""
        informer = self.informers.get("poddisruptionbudgets")
        return informer.list() if informer is not None else []

    def sync(self, key: str) -> None:
        obj = self.informers["pods"].get(key)
        assumed = self.assumed.get(key)
        if assumed is not None and (obj is None or obj["metadata"].get("uid") != assumed["metadata"].get("uid")):
            self.assumed.pop(key, None)
            assumed = None
        if obj is None or not _pending(obj, self.profiles) or assumed is not None:
            self.attempts.pop(key, None)
            return
        pod = Pod(obj)
        profile = self.profiles[(obj.get("spec") or {}).get("schedulerName", fw.DEFAULT_SCHEDULER)]
        cycle = fw.schedule(profile, self.snapshot(), pod, pdbs=self.pdbs(),
                            rng=self.rng, workloads=self.workloads())
        self.cycles[key] = cycle
        self._keep_record(cycle)
        ns, name = pod.namespace, pod.name
        if cycle.chosen is not None:
            self.assumed[key] = dict(obj, spec=dict(obj.get("spec") or {}, nodeName=cycle.chosen))
            if not bind(self.client, obj, cycle.chosen):
                self.assumed.pop(key, None)     # ForgetPod: the binding failed
                return
            self.attempts.pop(key, None)
            self.log.record(self.name, "bind", None, f"pod {ns}/{name} → {cycle.chosen}")
            self._event_of(profile.name, obj, "Normal", "Scheduled", f"Successfully assigned {ns}/{name} to {cycle.chosen}")
            return
        for victim in cycle.victims:
            self._preempt(victim, pod, cycle.nominated_node, profile.name)
        self._mark_unschedulable(obj, cycle, profile.name)
        self.attempts[key] = self.attempts.get(key, 0) + 1
        self.queue.add_after(key, backoff_seconds(self.attempts[key]))

    def _keep_record(self, cycle: fw.Cycle) -> None:
        """The cycle's record (labkit.scheduler.explain.record), the last per Pod, in the server's
        state directory beside the decision log, for `labkit scheduler explain POD`; nothing when
        the decision log has no file (a server of the tests)."""
        path = getattr(self.log, "path", None)
        if path is None:
            return
        import json
        import os

        from labkit.scheduler.explain import RECORDS, record
        directory = path.parent / RECORDS / cycle.pod.namespace
        directory.mkdir(parents=True, exist_ok=True)
        target = directory / f"{cycle.pod.name}.json"
        partial = target.with_name(target.name + ".tmp")
        kept = record(cycle)
        # every situation this Pod was decided in, and when first (the same uid's earlier record
        # keeps them; the first and the last 15 when there were more): what the lab's cluster showed,
        # and since when (the scheduler lab's prediction checks read it)
        try:
            earlier = json.loads(target.read_text())
        except (OSError, ValueError):
            earlier = {}
        history = list(earlier.get("history") or []) if earlier.get("uid") == kept.get("uid") else []
        if not history or history[-1].get("situation") != kept["situation"]:
            history.append({"at": time.time(), "situation": kept["situation"]})
        kept["history"] = history[:1] + history[-15:] if len(history) > 16 else history
        partial.write_text(json.dumps(kept))
        os.replace(partial, target)

    def _preempt(self, victim: Pod, preemptor: Pod, node: str, scheduler_name: str) -> None:
        condition = dict(DefaultPreemption.victim_condition(scheduler_name), lastTransitionTime=now_rfc3339())
        obj = victim.obj
        status = dict(obj.get("status") or {})
        status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") != "DisruptionTarget"] + [condition]
        try:
            self.client.update("v1", "pods", dict(obj, status=status), victim.namespace, "status")
            self.client.delete("v1", "pods", victim.name, victim.namespace)
        except ApiError as exc:
            if exc.code not in (404, 409):
                raise
            return
        event = DefaultPreemption.victim_event(preemptor, node)
        self.log.record(self.name, "preempt", None, f"pod {victim.namespace}/{victim.name} on {node} for "
                                                    f"{preemptor.namespace}/{preemptor.name}")
        self._event_of(scheduler_name, obj, event["type"], event["reason"], event["message"])

    def _mark_unschedulable(self, obj: dict, cycle: fw.Cycle, scheduler_name: str = fw.DEFAULT_SCHEDULER) -> None:
        message = cycle.fit_error
        status = dict(obj.get("status") or {})
        old = next((c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), None)
        condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message,
                     "lastProbeTime": None,
                     "lastTransitionTime": old["lastTransitionTime"] if old and old.get("status") == "False"
                     else now_rfc3339()}
        status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"] + [condition]
        if cycle.nominated_node is not None:
            status["nominatedNodeName"] = cycle.nominated_node
        if status != (obj.get("status") or {}):
            try:
                self.client.update("v1", "pods", dict(obj, status=status), obj["metadata"]["namespace"], "status")
            except ApiError as exc:
                if exc.code not in (404, 409):
                    raise
        self.log.record(self.name, "unschedulable", None,
                        f"pod {obj['metadata']['namespace']}/{obj['metadata']['name']}: {message}")
        self._event_of(scheduler_name, obj, "Warning", "FailedScheduling", message)
