"""The ReplicaSet controller, just complete enough for real owner chains (pkg/controller/replicaset):
it claims pods by label selector — adopting matching orphans, releasing owned pods that stopped
matching — creates or deletes pods to reach spec.replicas (pods carry a controller reference with
blockOwnerDeletion), and writes status. A ReplicaSet being deleted is not scaled."""

from __future__ import annotations

from labkit.apiserver.errors import ApiError
from labkit.apiserver.selectors import LabelSelector
from labkit.controllers.base import KeyedController, controller_of, controller_ref
from labkit.controllers.decisions import describe

CONTROLLER = "replicaset"


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
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


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
            on_pod(new)
            if controller_of(old) != controller_of(new) and controller_of(old) is not None:
                on_pod(old)

        def on_pod_delete(pod):
            ref = controller_of(pod)
            if ref is not None and ref.get("kind") == self.kind:
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
        if needs_sync and not owner["metadata"].get("deletionTimestamp"):
            self.manage_replicas(key, owner, pods)
        self.update_status(owner, pods)

    def manage_replicas(self, key: str, owner: dict, pods: list[dict]) -> None:
        wanted = (owner.get("spec") or {}).get("replicas", 1)
        diff = len(pods) - wanted
        who = describe({"kind": owner["kind"], "namespace": owner["metadata"]["namespace"],
                        "name": owner["metadata"]["name"]})
        if diff < 0:
            count = min(-diff, 500)
            self.expectations.expect(key, adds=count)
            self.log.record(self.name, "create-pods", None, f"{who}: {len(pods)} of {wanted} replicas → create "
                            f"{count} pod(s)", level="debug")
            for _ in range(count):
                pod = pod_from_template(owner, (owner.get("spec") or {}).get("template"))
                try:
                    self.client.create("v1", "pods", pod, owner["metadata"]["namespace"])
                except ApiError:
                    self.expectations.observed(key, adds=1)
                    raise
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
                        raise

    def update_status(self, owner: dict, pods: list[dict]) -> None:
        template_labels = (((owner.get("spec") or {}).get("template") or {}).get("metadata") or {}).get("labels") or {}
        ready = sum(1 for p in pods if is_ready(p))
        status = dict(owner.get("status") or {})
        wanted = {
            "replicas": len(pods),
            "fullyLabeledReplicas": sum(1 for p in pods if all((p["metadata"].get("labels") or {}).get(k) == v
                                                             for k, v in template_labels.items())),
            "readyReplicas": ready, "availableReplicas": ready,
            "observedGeneration": owner["metadata"].get("generation", 1),
        }
        for k, v in wanted.items():
            if v or k in ("replicas", "observedGeneration"):
                status[k] = v
            else:
                status.pop(k, None)
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
