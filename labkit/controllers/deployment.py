"""The Deployment controller, just complete enough for real owner chains (pkg/controller/deployment):
it claims ReplicaSets by selector (adopting matching orphans, releasing those that stopped
matching), keeps one ReplicaSet per pod template — named `<deployment>-<pod-template-hash>`, with
the hash as label and selector, owned with controller and blockOwnerDeletion — scaled to
spec.replicas, scales the older ReplicaSets to zero (a rollout in one step) and writes status.
A Deployment being deleted only gets its status synced, as upstream.

The hash is FNV-32a over the template's canonical JSON, rendered with SafeEncodeString like
upstream's pod-template-hash; it is not the same number, since upstream hashes Go's in-memory
representation of the template.
"""

from __future__ import annotations

import copy
import json

from labkit.apiserver.errors import ApiError
from labkit.apiserver.selectors import LabelSelector
from labkit.controllers.base import KeyedController, controller_of, controller_ref
from labkit.controllers.decisions import describe

CONTROLLER = "deployment"
HASH_LABEL = "pod-template-hash"
SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def fnv32a(data: bytes) -> int:
    h = 0x811C9DC5
    for b in data:
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def pod_template_hash(template: dict, collision_count: int | None = None) -> str:
    data = json.dumps(template, sort_keys=True, separators=(",", ":")).encode()
    if collision_count:
        data += str(collision_count).encode()
    return "".join(SAFE_ALPHABET[ord(c) % len(SAFE_ALPHABET)] for c in str(fnv32a(data)))


def _template_without_hash(template: dict) -> dict:
    template = copy.deepcopy(template or {})
    labels = (template.get("metadata") or {}).get("labels")
    if labels:
        labels.pop(HASH_LABEL, None)
    return template


def _semantic(value):
    """The value as apiequality.Semantic.DeepEqual sees it: empty and absent maps and lists alike."""
    if isinstance(value, dict):
        kept = {k: _semantic(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v not in (None, {}, [])}
    if isinstance(value, list):
        return [_semantic(v) for v in value]
    return value


def equal_ignore_hash(a: dict, b: dict) -> bool:
    """deploymentutil.EqualIgnoreHash: two pod templates equal but for the pod-template-hash label."""
    return _semantic(_template_without_hash(a)) == _semantic(_template_without_hash(b))


def find_new_replicaset(d: dict, owned: list[dict]) -> dict | None:
    """deploymentutil.FindNewReplicaSet: the oldest ReplicaSet whose template equals the
    Deployment's (several can, after a hash collision: the oldest is the new one)."""
    template = (d.get("spec") or {}).get("template") or {}
    for rs in sorted(owned, key=lambda r: (r["metadata"].get("creationTimestamp", ""), r["metadata"]["name"])):
        if equal_ignore_hash((rs.get("spec") or {}).get("template") or {}, template):
            return rs
    return None


class DeploymentController(KeyedController):
    name = CONTROLLER
    user = "system:serviceaccount:kube-system:deployment-controller"

    def make_informers(self):
        def on_rs(rs, *_):
            ref = controller_of(rs)
            ns = rs["metadata"].get("namespace")
            if ref is not None:
                if ref.get("kind") == "Deployment":
                    self.queue.add(f"{ns}/{ref.get('name')}")
                return
            for d in self.informers["deployments"].list(ns):
                selector = _selector(d)
                if selector is not None and selector.matches(rs["metadata"].get("labels")):
                    self.enqueue(d)

        def on_rs_update(old, new):
            on_rs(new)
            if controller_of(old) is not None and controller_of(old) != controller_of(new):
                on_rs(old)

        return {
            "deployments": self.informer("apps/v1", "deployments", "Deployment", on_add=self.enqueue,
                                         on_update=lambda old, new: self.enqueue(new), on_delete=self.enqueue),
            "replicasets": self.informer("apps/v1", "replicasets", "ReplicaSet", on_add=on_rs,
                                         on_update=on_rs_update, on_delete=on_rs),
        }

    def sync(self, key: str) -> None:
        d = self.informers["deployments"].get(key)
        if d is None:
            return
        selector = _selector(d)
        if selector is None or selector.empty:
            return
        ns = d["metadata"]["namespace"]
        owned = self.claim(d, self.informers["replicasets"].list(ns), selector, "apps/v1", "replicasets")
        if d["metadata"].get("deletionTimestamp"):
            self.update_status(d, owned, None)
            return
        new_rs = find_new_replicaset(d, owned)
        wanted = (d.get("spec") or {}).get("replicas", 1)
        who = describe({"kind": "Deployment", "namespace": ns, "name": d["metadata"]["name"]})
        if new_rs is None:
            new_rs = self.create_replicaset(d, owned)
            if new_rs is None:
                return
            self.log.record(self.name, "create-replicaset", None,
                            f"{who}: no ReplicaSet runs the current pod template → create "
                            f"replicaset {ns}/{new_rs['metadata']['name']} with {wanted} replica(s)")
        elif (new_rs.get("spec") or {}).get("replicas") != wanted:
            self.scale(new_rs, wanted)
        if not (d.get("spec") or {}).get("paused"):
            for rs in owned:
                if rs is not new_rs and rs["metadata"]["uid"] != new_rs["metadata"]["uid"] \
                        and (rs.get("spec") or {}).get("replicas"):
                    self.scale(rs, 0)
        self.update_status(d, owned, new_rs)

    def create_replicaset(self, d: dict, owned: list[dict]) -> dict | None:
        meta = d["metadata"]
        template = copy.deepcopy((d.get("spec") or {}).get("template") or {})
        collision = (d.get("status") or {}).get("collisionCount")
        digest = pod_template_hash(template, collision)
        template.setdefault("metadata", {}).setdefault("labels", {})[HASH_LABEL] = digest
        selector = copy.deepcopy((d.get("spec") or {}).get("selector") or {})
        selector.setdefault("matchLabels", {})[HASH_LABEL] = digest
        revisions = [int((rs["metadata"].get("annotations") or {}).get("deployment.kubernetes.io/revision", "0") or 0)
                     for rs in owned]
        replicas = (d.get("spec") or {}).get("replicas", 1)
        rs = {
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": f"{meta['name']}-{digest}", "namespace": meta["namespace"],
                         "labels": dict(template["metadata"]["labels"]),
                         "annotations": {"deployment.kubernetes.io/revision": str(max(revisions, default=0) + 1),
                                         "deployment.kubernetes.io/desired-replicas": str(replicas),
                                         "deployment.kubernetes.io/max-replicas": str(replicas)},
                         "ownerReferences": [controller_ref(d)]},
            "spec": {"replicas": replicas, "minReadySeconds": (d.get("spec") or {}).get("minReadySeconds", 0),
                     "selector": selector, "template": template},
        }
        try:
            return self.client.create("apps/v1", "replicasets", rs, meta["namespace"])
        except ApiError as exc:
            if exc.code != 409:
                raise
            # a ReplicaSet of that name exists and was not ours: count a collision and retry
            status = dict(d.get("status") or {}, collisionCount=(collision or 0) + 1)
            self.client.update("apps/v1", "deployments", dict(d, status=status), meta["namespace"], "status")
            return None

    def scale(self, rs: dict, replicas: int) -> None:
        meta = rs["metadata"]
        self.log.record(self.name, "scale-replicaset", None,
                        f"replicaset {meta['namespace']}/{meta['name']}: scale from "
                        f"{(rs.get('spec') or {}).get('replicas')} to {replicas}")
        self.client.patch("apps/v1", "replicasets", meta["name"], {"spec": {"replicas": replicas}}, "merge",
                          meta["namespace"])

    def update_status(self, d: dict, owned: list[dict], new_rs: dict | None) -> None:
        def total(field):
            return sum(int((rs.get("status") or {}).get(field) or 0) for rs in owned)

        wanted = (d.get("spec") or {}).get("replicas", 1)
        available = total("availableReplicas")
        updated = int(((new_rs or {}).get("status") or {}).get("replicas") or 0)
        status = dict(d.get("status") or {})
        status.update({"observedGeneration": d["metadata"].get("generation", 1), "replicas": total("replicas"),
                       "updatedReplicas": updated, "readyReplicas": total("readyReplicas"),
                       "availableReplicas": available})
        for field in ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas"):
            if not status[field]:
                status.pop(field)
        unavailable = max(wanted - available, 0)
        if unavailable:
            status["unavailableReplicas"] = unavailable
        else:
            status.pop("unavailableReplicas", None)
        conditions = []
        if available >= wanted:
            conditions.append({"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                               "message": "Deployment has minimum availability."})
        else:
            conditions.append({"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable",
                               "message": "Deployment does not have minimum availability."})
        if new_rs is not None:
            name = new_rs["metadata"]["name"]
            done = updated == wanted and available >= wanted
            conditions.append({"type": "Progressing", "status": "True",
                               "reason": "NewReplicaSetAvailable" if done else "ReplicaSetUpdated",
                               "message": f'ReplicaSet "{name}" has successfully progressed.' if done
                               else f'ReplicaSet "{name}" is progressing.'})
        old_conditions = {c.get("type"): c for c in status.get("conditions") or []}
        for c in conditions:
            old = old_conditions.get(c["type"])
            keep = old is not None and all(old.get(k) == c[k] for k in ("status", "reason", "message"))
            stamp = old.get("lastTransitionTime") if keep else _now()
            c["lastUpdateTime"] = old.get("lastUpdateTime") if keep else stamp
            c["lastTransitionTime"] = stamp if (old is None or old.get("status") != c["status"]) else \
                old.get("lastTransitionTime")
        status["conditions"] = conditions
        if status == (d.get("status") or {}):
            return
        try:
            self.client.update("apps/v1", "deployments", dict(d, status=status), d["metadata"]["namespace"], "status")
        except ApiError as exc:
            if exc.code == 409:
                self.queue.add_rate_limited(f"{d['metadata']['namespace']}/{d['metadata']['name']}")
            elif exc.code != 404:
                raise


def _now() -> str:
    import time
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _selector(d: dict) -> LabelSelector | None:
    try:
        return LabelSelector.from_label_selector((d.get("spec") or {}).get("selector"))
    except (ValueError, AttributeError):
        return None
