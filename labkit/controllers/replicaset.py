"""The ReplicaSet controller (pkg/controller/replicaset): it claims pods by label selector —
adopting matching orphans, releasing owned pods that stopped matching — creates or deletes pods to
reach spec.replicas (pods carry a controller reference with blockOwnerDeletion; the unscheduled,
pending, not ready and newest go first), and writes status: replicas, fullyLabeledReplicas, ready,
available (ready for minReadySeconds) and the ReplicaFailure condition when pods cannot be
created. Events on the ReplicaSet as upstream's pod control emits them: SuccessfulCreate
(`Created pod: web-abc-x`), SuccessfulDelete, FailedCreate, FailedDelete. A ReplicaSet being
deleted is not scaled."""

from __future__ import annotations

import calendar
import time

from labkit.apiserver.errors import ApiError
from labkit.apiserver.selectors import LabelSelector
from labkit.controllers.base import KeyedController, controller_of, controller_ref
from labkit.controllers.decisions import describe

CONTROLLER = "replicaset"


class ReplicasNotCreated(Exception):
    """A Pod the ReplicaSet needs could not be created (the ReplicaFailure condition says why)."""


def pod_from_template(owner: dict, template: dict) -> dict:
    template = template or {}
    tmeta = template.get("metadata") or {}
    meta = {"generateName": f"{owner['metadata']['name']}-", "namespace": owner["metadata"]["namespace"],
            "labels": dict(tmeta.get("labels") or {}), "ownerReferences": [controller_ref(owner)]}
    if tmeta.get("annotations"):
        meta["annotations"] = dict(tmeta["annotations"])
    if tmeta.get("finalizers"):
        meta["finalizers"] = list(tmeta["finalizers"])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template.get("spec") or {}}


def is_active(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed") and \
        not pod["metadata"].get("deletionTimestamp")


def is_ready(pod: dict) -> bool:
    return ready_since(pod) is not None


def ready_since(pod: dict) -> float | None:
    """When the pod's Ready condition became True (None: not ready)."""
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready" and c.get("status") == "True":
            try:
                return calendar.timegm(time.strptime((c.get("lastTransitionTime") or "")[:19], "%Y-%m-%dT%H:%M:%S"))
            except ValueError:
                return 0.0
    return None


def pods_to_delete(pods: list[dict], count: int) -> list[dict]:
    """getPodsToDelete's order: unassigned before assigned, pending before running, not ready
    before ready, then the newest first."""
    def rank(pod):
        status = pod.get("status") or {}
        return (bool((pod.get("spec") or {}).get("nodeName")),
                {"Pending": 0, "Unknown": 1, "Running": 2}.get(status.get("phase"), 0), is_ready(pod))
    newest_first = sorted(pods, key=lambda p: p["metadata"].get("creationTimestamp", ""), reverse=True)
    return sorted(newest_first, key=rank)[:count]


class ReplicaSetController(KeyedController):
    name = CONTROLLER
    user = "system:serviceaccount:kube-system:replicaset-controller"
    component = "replicaset-controller"
    api_version, resource, kind = "apps/v1", "replicasets", "ReplicaSet"

    def make_informers(self):
        def on_pod(pod, *_):
            ref = controller_of(pod)
            ns = pod["metadata"].get("namespace")
            if ref is not None:
                if ref.get("kind") == self.kind:
                    self.queue.add(f"{ns}/{ref.get('name')}")
                return
            for owner in self.informers["owners"].list(ns):
                selector = _selector(owner)
                if selector is not None and selector.matches(pod["metadata"].get("labels")):
                    self.enqueue(owner)

        def on_pod_add(pod):
            ref = controller_of(pod)
            if ref is not None and ref.get("kind") == self.kind:
                self.expectations.observed(f"{pod['metadata']['namespace']}/{ref.get('name')}", adds=1)
            on_pod(pod)

        def on_pod_update(old, new):
            # updatePod: a pod that starts terminating counts as deleted (the graceful period runs
            # on the node; the replica is gone for the ReplicaSet)
            if new["metadata"].get("deletionTimestamp") and not old["metadata"].get("deletionTimestamp"):
                ref = controller_of(new)
                if ref is not None and ref.get("kind") == self.kind:
                    self.expectations.observed(f"{new['metadata']['namespace']}/{ref.get('name')}", dels=1)
            on_pod(new)
            if controller_of(old) != controller_of(new) and controller_of(old) is not None:
                on_pod(old)

        def on_pod_delete(pod):
            ref = controller_of(pod)
            if ref is not None and ref.get("kind") == self.kind and not pod["metadata"].get("deletionTimestamp"):
                self.expectations.observed(f"{pod['metadata']['namespace']}/{ref.get('name')}", dels=1)
            on_pod(pod)

        return {
            "owners": self.informer(self.api_version, self.resource, self.kind, on_add=self.enqueue,
                                    on_update=lambda old, new: self.enqueue(new), on_delete=self.enqueue),
            "pods": self.informer("v1", "pods", "Pod", on_add=on_pod_add, on_update=on_pod_update,
                                  on_delete=on_pod_delete),
        }

    def sync(self, key: str) -> None:
        owner = self.informers["owners"].get(key)
        if owner is None:
            self.expectations.delete(key)
            return
        needs_sync = self.expectations.satisfied(key)
        selector = _selector(owner)
        if selector is None:
            return
        ns = owner["metadata"]["namespace"]
        active = [p for p in self.informers["pods"].list(ns) if is_active(p)]
        pods = self.claim(owner, active, selector, "v1", "pods")
        failure = None
        if needs_sync and not owner["metadata"].get("deletionTimestamp"):
            failure = self.manage_replicas(key, owner, pods)
        self.update_status(owner, pods, failure)
        if failure is not None:
            # syncReplicaSet returns manageReplicas' error: the worker requeues the key with the
            # rate limiter's backoff (replica_set.go processNextWorkItem), so a Pod an admission
            # webhook or policy refused is created once the refusal is gone
            raise ReplicasNotCreated(failure)

    def manage_replicas(self, key: str, owner: dict, pods: list[dict]) -> str | None:
        """Create or delete pods; the error of a failed creation (for the ReplicaFailure condition)."""
        wanted = (owner.get("spec") or {}).get("replicas", 1)
        diff = len(pods) - wanted
        who = describe({"kind": owner["kind"], "namespace": owner["metadata"]["namespace"],
                        "name": owner["metadata"]["name"]})
        if diff < 0:
            count = min(-diff, 500)     # burstReplicas
            self.expectations.expect(key, adds=count)
            self.log.record(self.name, "create-pods", None, f"{who}: {len(pods)} of {wanted} replicas → create "
                            f"{count} pod(s)", level="debug")
            for done in range(count):
                pod = pod_from_template(owner, (owner.get("spec") or {}).get("template"))
                try:
                    created = self.client.create("v1", "pods", pod, owner["metadata"]["namespace"])
                except ApiError as exc:
                    self.expectations.observed(key, adds=count - done)
                    self.event(owner, "Warning", "FailedCreate", f"Error creating: {exc.message}")
                    if any(c.get("reason") == "NamespaceTerminating" for c in (exc.details or {}).get("causes") or []):
                        return None
                    return exc.message
                self.event(owner, "Normal", "SuccessfulCreate", f"Created pod: {created['metadata']['name']}")
        elif diff > 0:
            victims = pods_to_delete(pods, diff)
            self.expectations.expect(key, dels=len(victims))
            self.log.record(self.name, "delete-pods", None, f"{who}: {len(pods)} of {wanted} replicas → delete "
                            + ", ".join(p["metadata"]["name"] for p in victims), level="debug")
            for pod in victims:
                try:
                    self.client.delete("v1", "pods", pod["metadata"]["name"], pod["metadata"]["namespace"])
                except ApiError as exc:
                    self.expectations.observed(key, dels=1)
                    if exc.code != 404:
                        self.event(owner, "Warning", "FailedDelete", f"Error deleting: {exc.message}")
                        raise
                    continue
                self.event(owner, "Normal", "SuccessfulDelete", f"Deleted pod: {pod['metadata']['name']}")
        return None

    def update_status(self, owner: dict, pods: list[dict], failure: str | None = None) -> None:
        template_labels = (((owner.get("spec") or {}).get("template") or {}).get("metadata") or {}).get("labels") or {}
        min_ready = (owner.get("spec") or {}).get("minReadySeconds") or 0
        now = time.time()
        ready, available, next_check = 0, 0, None
        for p in pods:
            since = ready_since(p)
            if since is None:
                continue
            ready += 1
            if since + min_ready <= now:
                available += 1
            else:
                next_check = min(next_check or 1e18, since + min_ready - now)
        if next_check is not None:      # look again when the pod has been ready for minReadySeconds
            self.queue.add_after(f"{owner['metadata']['namespace']}/{owner['metadata']['name']}", next_check + 0.05)
        status = dict(owner.get("status") or {})
        wanted = {
            "replicas": len(pods),
            "fullyLabeledReplicas": sum(1 for p in pods if all((p["metadata"].get("labels") or {}).get(k) == v
                                                             for k, v in template_labels.items())),
            "readyReplicas": ready, "availableReplicas": available,
            "observedGeneration": owner["metadata"].get("generation", 1),
        }
        for k, v in wanted.items():
            if v or k in ("replicas", "observedGeneration"):
                status[k] = v
            else:
                status.pop(k, None)
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "ReplicaFailure"]
        if failure is not None:
            old = next((c for c in status.get("conditions") or [] if c.get("type") == "ReplicaFailure"), None)
            conditions.append({"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate",
                               "message": failure, "lastTransitionTime": (old or {}).get("lastTransitionTime")
                               or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
        if conditions:
            status["conditions"] = conditions
        else:
            status.pop("conditions", None)
        if status == (owner.get("status") or {}):
            return
        updated = dict(owner, status=status)
        try:
            self.client.update(self.api_version, self.resource, updated, owner["metadata"]["namespace"], "status")
        except ApiError as exc:
            if exc.code not in (404, 409):
                raise
            if exc.code == 409:
                self.queue.add_rate_limited(f"{owner['metadata']['namespace']}/{owner['metadata']['name']}")


def _selector(owner: dict) -> LabelSelector | None:
    try:
        return LabelSelector.from_label_selector((owner.get("spec") or {}).get("selector"))
    except (ValueError, AttributeError):
        return None
