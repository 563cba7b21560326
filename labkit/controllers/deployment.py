"""The Deployment controller, reconstructed from pkg/controller/deployment (v1.34): deployment_controller.go
(syncDeployment), sync.go (getNewReplicaSet, scale, cleanupDeployment, calculateStatus),
rolling.go, recreate.go, progress.go and util/deployment_util.go.

- It claims ReplicaSets by selector (adopting matching orphans, releasing those that stopped
  matching) and finds the new one as FindNewReplicaSet does: the oldest whose pod template equals
  the Deployment's but for the pod-template-hash label. A template that comes back (`kubectl
  rollout undo`) reuses its ReplicaSet, which gets the next revision and remembers the old one in
  `deployment.kubernetes.io/revision-history`.
- A new ReplicaSet is `<deployment>-<pod-template-hash>`, with the hash as label and selector, the
  Deployment's annotations (but kubectl's last-applied configuration and the controller's own),
  `revision`, `desired-replicas` and `max-replicas`, owned with controller and blockOwnerDeletion.
- RollingUpdate scales the new ReplicaSet up within maxSurge and the old ones down within
  maxUnavailable (unhealthy replicas first, then the oldest ReplicaSets), step by step as pods
  become available; Recreate scales the old ones to zero, waits until their pods are gone, then
  scales the new one up. A scaling event (spec.replicas changed, the ReplicaSets' desired-replicas
  annotation says otherwise) or a paused Deployment only scales, proportionally across the
  ReplicaSets. Completed rollouts delete old ReplicaSets beyond revisionHistoryLimit.
- Status: replicas, updated, ready, available, unavailable, observedGeneration and the conditions
  Available and Progressing (NewReplicaSetCreated, FoundNewReplicaSet, ReplicaSetUpdated,
  NewReplicaSetAvailable, ProgressDeadlineExceeded, DeploymentPaused, DeploymentResumed);
  conditions of other types, written by others, are kept.
- Events on the Deployment: ScalingReplicaSet (`Scaled up replica set web-x from 0 to 3`),
  SelectingAll, FailedCreate.

The pod-template-hash is FNV-32a over the template's canonical JSON, rendered with SafeEncodeString
like upstream's; it is not the same number, since upstream hashes Go's in-memory representation
(DeepHashObject), but it is stable and the same for equal templates, which is what the controller
relies on.
"""

from __future__ import annotations

import calendar
import json
import math
import time

from labkit.apiserver.errors import ApiError
from labkit.apiserver.selectors import LabelSelector
from labkit.controllers.base import KeyedController, controller_of, controller_ref
from labkit.jsondata import json_copy

CONTROLLER = "deployment"
HASH_LABEL = "pod-template-hash"
SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
REVISION = "deployment.kubernetes.io/revision"
REVISION_HISTORY = "deployment.kubernetes.io/revision-history"
DESIRED_REPLICAS = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
# annotations of a Deployment that are not copied to its ReplicaSets (annotationsToSkip)
SKIPPED_ANNOTATIONS = {"kubectl.kubernetes.io/last-applied-configuration", REVISION, REVISION_HISTORY,
                       DESIRED_REPLICAS, MAX_REPLICAS, "deprecated.deployment.rollback.to"}
MAX_REVISION_HISTORY_CHARS = 2000        # the controller manager's default
INT32_MAX = (1 << 31) - 1


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
    template = json_copy(template or {})
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


# -- deploymentutil ------------------------------------------------------------------------------

def _replicas(obj: dict | None) -> int:
    return int(((obj or {}).get("spec") or {}).get("replicas") or 0)


def _status(obj: dict | None, field: str) -> int:
    return int(((obj or {}).get("status") or {}).get(field) or 0)


def _annotation(obj: dict, key: str) -> str | None:
    return (obj["metadata"].get("annotations") or {}).get(key)


def revision(rs: dict) -> int:
    try:
        return int(_annotation(rs, REVISION) or 0)
    except ValueError:
        return 0


def _by_creation(items: list[dict]) -> list[dict]:
    return sorted(items, key=lambda r: (r["metadata"].get("creationTimestamp", ""), r["metadata"]["name"]))


def find_new_replicaset(d: dict, owned: list[dict]) -> dict | None:
    """FindNewReplicaSet: the oldest ReplicaSet whose template equals the Deployment's (several
    can, after a hash collision: the oldest is the new one)."""
    template = (d.get("spec") or {}).get("template") or {}
    for rs in _by_creation(owned):
        if equal_ignore_hash((rs.get("spec") or {}).get("template") or {}, template):
            return rs
    return None


def scaled_value(value, total: int, round_up: bool) -> int:
    """intstr.GetScaledValueFromIntOrPercent."""
    if isinstance(value, int):
        return value
    text = str(value)
    if not text.endswith("%"):
        raise ValueError("invalid value for IntOrString: invalid type: string is not a percentage")
    percent = int(text[:-1])
    exact = percent * total / 100
    return math.ceil(exact) if round_up else math.floor(exact)


def resolve_fenceposts(d: dict) -> tuple[int, int]:
    """ResolveFenceposts: (maxSurge, maxUnavailable); both zero makes unavailable 1."""
    rolling = ((d.get("spec") or {}).get("strategy") or {}).get("rollingUpdate") or {}
    desired = _replicas(d)
    surge = scaled_value(rolling.get("maxSurge", "25%"), desired, True)
    unavailable = scaled_value(rolling.get("maxUnavailable", "25%"), desired, False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def is_rolling_update(d: dict) -> bool:
    return ((d.get("spec") or {}).get("strategy") or {}).get("type", "RollingUpdate") == "RollingUpdate"


def max_surge(d: dict) -> int:
    return resolve_fenceposts(d)[0] if is_rolling_update(d) else 0


def max_unavailable(d: dict) -> int:
    if not is_rolling_update(d) or _replicas(d) == 0:
        return 0
    return min(resolve_fenceposts(d)[1], _replicas(d))


def active(rss: list[dict | None]) -> list[dict]:
    """FilterActiveReplicaSets: those with replicas in their spec."""
    return [rs for rs in rss if rs is not None and _replicas(rs) > 0]


def new_rs_new_replicas(d: dict, all_rss: list[dict], new_rs: dict) -> int:
    """NewRSNewReplicas: how far the new ReplicaSet may be scaled up now."""
    if not is_rolling_update(d):
        return _replicas(d)
    current = sum(_replicas(rs) for rs in all_rss)
    max_total = _replicas(d) + max_surge(d)
    if current >= max_total:
        return _replicas(new_rs)
    scale_up = min(max_total - current, _replicas(d) - _replicas(new_rs))
    return _replicas(new_rs) + scale_up


def has_progress_deadline(d: dict) -> bool:
    deadline = (d.get("spec") or {}).get("progressDeadlineSeconds")
    return deadline is not None and deadline != INT32_MAX


def condition(status: dict, type_: str) -> dict | None:
    return next((c for c in status.get("conditions") or [] if c.get("type") == type_), None)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _parse_time(value: str | None) -> float:
    try:
        return calendar.timegm(time.strptime((value or "")[:19], "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return 0.0


def new_condition(type_: str, status: str, reason: str, message: str) -> dict:
    now = _now()
    return {"type": type_, "status": status, "lastUpdateTime": now, "lastTransitionTime": now,
            "reason": reason, "message": message}


def set_condition(status: dict, cond: dict) -> None:
    """SetDeploymentCondition: replaces the condition of that type unless status and reason are
    the same; keeps lastTransitionTime while the status does not change."""
    current = condition(status, cond["type"])
    if current is not None and current.get("status") == cond["status"] and current.get("reason") == cond["reason"]:
        return
    if current is not None and current.get("status") == cond["status"]:
        cond["lastTransitionTime"] = current.get("lastTransitionTime")
    status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") != cond["type"]] + [cond]


def remove_condition(status: dict, type_: str) -> None:
    kept = [c for c in status.get("conditions") or [] if c.get("type") != type_]
    if kept:
        status["conditions"] = kept
    else:
        status.pop("conditions", None)


def deployment_complete(d: dict, status: dict) -> bool:
    wanted = _replicas(d)
    return (status.get("updatedReplicas", 0) == wanted and status.get("replicas", 0) == wanted
            and status.get("availableReplicas", 0) == wanted
            and status.get("observedGeneration", 0) >= d["metadata"].get("generation", 0))


def deployment_progressing(d: dict, status: dict) -> bool:
    old = d.get("status") or {}
    old_old = old.get("replicas", 0) - old.get("updatedReplicas", 0)
    new_old = status.get("replicas", 0) - status.get("updatedReplicas", 0)
    return (status.get("updatedReplicas", 0) > old.get("updatedReplicas", 0) or new_old < old_old
            or status.get("readyReplicas", 0) > old.get("readyReplicas", 0)
            or status.get("availableReplicas", 0) > old.get("availableReplicas", 0))


def deployment_timed_out(d: dict, status: dict) -> bool:
    if not has_progress_deadline(d):
        return False
    cond = condition(status, "Progressing")
    if cond is None or cond.get("reason") == "NewReplicaSetAvailable":
        return False
    if cond.get("reason") == "ProgressDeadlineExceeded":
        return True
    return _parse_time(cond.get("lastUpdateTime")) + d["spec"]["progressDeadlineSeconds"] < time.time()


def set_replicas_annotations(rs: dict, desired: int, maximum: int) -> bool:
    annotations = rs["metadata"].setdefault("annotations", {})
    changed = annotations.get(DESIRED_REPLICAS) != str(desired) or annotations.get(MAX_REPLICAS) != str(maximum)
    annotations[DESIRED_REPLICAS], annotations[MAX_REPLICAS] = str(desired), str(maximum)
    return changed


def set_new_replicaset_annotations(d: dict, rs: dict, new_revision: int, exists: bool) -> bool:
    """SetNewReplicaSetAnnotations: the Deployment's annotations, the revision (a reused
    ReplicaSet keeps its old revisions in revision-history), and on creation the replica counts."""
    annotations = rs["metadata"].setdefault("annotations", {})
    changed = False
    for key, value in (d["metadata"].get("annotations") or {}).items():
        if key not in SKIPPED_ANNOTATIONS and annotations.get(key) != value:
            annotations[key] = value
            changed = True
    old = annotations.get(REVISION)
    old_int = revision(rs) if old is not None else 0
    if old_int < new_revision:
        annotations[REVISION] = str(new_revision)
        changed = True
        if old is not None:      # rolling back to this ReplicaSet: remember where it was
            history = [h for h in (annotations.get(REVISION_HISTORY) or "").split(",") if h]
            history.append(old)
            while len(",".join(history)) > MAX_REVISION_HISTORY_CHARS and len(history) > 1:
                history.pop(0)
            annotations[REVISION_HISTORY] = ",".join(history)
    if not exists and set_replicas_annotations(rs, _replicas(d), _replicas(d) + max_surge(d)):
        changed = True
    return changed


class DeploymentController(KeyedController):
    name = CONTROLLER
    user = "system:serviceaccount:kube-system:deployment-controller"
    component = "deployment-controller"

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

        def on_pod_delete(pod):
            # Recreate waits for the old pods to be gone (deletePod)
            ref = controller_of(pod)
            if ref is None or ref.get("kind") != "ReplicaSet":
                return
            rs = self.informers["replicasets"].get(f"{pod['metadata']['namespace']}/{ref.get('name')}")
            owner = controller_of(rs) if rs else None
            if owner is not None and owner.get("kind") == "Deployment":
                self.queue.add(f"{pod['metadata']['namespace']}/{owner.get('name')}")

        return {
            "deployments": self.informer("apps/v1", "deployments", "Deployment", on_add=self.enqueue,
                                         on_update=lambda old, new: self.enqueue(new), on_delete=self.enqueue),
            "replicasets": self.informer("apps/v1", "replicasets", "ReplicaSet", on_add=on_rs,
                                         on_update=on_rs_update, on_delete=on_rs),
            "pods": self.informer("v1", "pods", "Pod", on_delete=on_pod_delete),
        }

    # -- syncDeployment ----------------------------------------------------------------------------
    def sync(self, key: str) -> None:
        cached = self.informers["deployments"].get(key)
        if cached is None:
            return
        d = json_copy(cached)
        ns, name = d["metadata"]["namespace"], d["metadata"]["name"]
        if (d.get("spec") or {}).get("selector") == {}:
            self.event(d, "Warning", "SelectingAll",
                       "This deployment is selecting all pods. A non-empty selector is required.")
            if (d.get("status") or {}).get("observedGeneration", 0) < d["metadata"].get("generation", 0):
                self._update_status(d, dict(d.get("status") or {}, observedGeneration=d["metadata"]["generation"]))
            return
        selector = _selector(d)
        if selector is None:
            return
        rs_list = [json_copy(rs) for rs in self.claim(d, self.informers["replicasets"].list(ns), selector,
                                                           "apps/v1", "replicasets")]
        if d["metadata"].get("deletionTimestamp"):
            new_rs, old_rss = self.all_replicasets(d, rs_list, create=False)
            self.sync_deployment_status([*old_rss, new_rs], new_rs, d)
            return
        d = self.check_paused_conditions(d)
        if d["spec"].get("paused"):
            self.sync_scaling(d, rs_list)
            return
        if self.is_scaling_event(d, rs_list):
            self.log.record(self.name, "scaling-event", _ref(d),
                            f"deployment {ns}/{name}: spec.replicas is now {_replicas(d)} → scale its ReplicaSets "
                            "proportionally", level="debug")
            self.sync_scaling(d, rs_list)
            return
        if is_rolling_update(d):
            self.rollout_rolling(d, rs_list)
        else:
            self.rollout_recreate(d, rs_list)

    def check_paused_conditions(self, d: dict) -> dict:
        """checkPausedConditions: Progressing Unknown DeploymentPaused / DeploymentResumed."""
        if not has_progress_deadline(d):
            return d
        cond = condition(d.get("status") or {}, "Progressing")
        if cond is not None and cond.get("reason") == "ProgressDeadlineExceeded":
            return d
        paused_cond = cond is not None and cond.get("reason") == "DeploymentPaused"
        status = json_copy(d.get("status") or {})
        if d["spec"].get("paused") and not paused_cond:
            set_condition(status, new_condition("Progressing", "Unknown", "DeploymentPaused", "Deployment is paused"))
        elif not d["spec"].get("paused") and paused_cond:
            set_condition(status, new_condition("Progressing", "Unknown", "DeploymentResumed",
                                                "Deployment is resumed"))
        else:
            return d
        return self._update_status(d, status) or d

    def is_scaling_event(self, d: dict, rs_list: list[dict]) -> bool:
        new_rs, old_rss = self.all_replicasets(d, rs_list, create=False)
        for rs in active([*old_rss, new_rs]):
            desired = _annotation(rs, DESIRED_REPLICAS)
            if desired is not None and desired.isdigit() and int(desired) != _replicas(d):
                return True
        return False

    # -- the new and the old ReplicaSets (getAllReplicaSetsAndSyncRevision) -------------------------
    def all_replicasets(self, d: dict, rs_list: list[dict], create: bool) -> tuple[dict | None, list[dict]]:
        new_rs = find_new_replicaset(d, rs_list)
        old_rss = [rs for rs in rs_list if new_rs is None or rs["metadata"]["uid"] != new_rs["metadata"]["uid"]]
        return self.get_new_replicaset(d, rs_list, old_rss, new_rs, create), old_rss

    def get_new_replicaset(self, d: dict, rs_list: list[dict], old_rss: list[dict], existing: dict | None,
                           create: bool) -> dict | None:
        ns, name = d["metadata"]["namespace"], d["metadata"]["name"]
        new_revision = max((revision(rs) for rs in old_rss), default=0) + 1
        if existing is not None:
            rs = json_copy(existing)
            previous = _annotation(rs, REVISION)
            changed = set_new_replicaset_annotations(d, rs, new_revision, True)
            min_ready = (d.get("spec") or {}).get("minReadySeconds", 0)
            if changed or (rs.get("spec") or {}).get("minReadySeconds", 0) != min_ready:
                if min_ready:
                    rs["spec"]["minReadySeconds"] = min_ready
                else:
                    rs["spec"].pop("minReadySeconds", None)
                if previous is not None and previous != _annotation(rs, REVISION):
                    self.log.record(self.name, "reuse-replicaset", _ref(rs),
                                    f"deployment {ns}/{name}: its template is that of replicaset {ns}/"
                                    f"{rs['metadata']['name']} (revision {previous}) → reuse it as revision "
                                    f"{_annotation(rs, REVISION)}")
                return self.client.update("apps/v1", "replicasets", rs, ns)
            status = json_copy(d.get("status") or {})
            needs_update = self._set_revision(d, _annotation(rs, REVISION))
            if has_progress_deadline(d) and condition(status, "Progressing") is None:
                set_condition(status, new_condition("Progressing", "True", "FoundNewReplicaSet",
                                                    f'Found new replica set "{rs["metadata"]["name"]}"'))
                needs_update = True
            if needs_update:
                self._update_status(d, status)
            return rs
        if not create:
            return None
        template = json_copy((d.get("spec") or {}).get("template") or {})
        collision = (d.get("status") or {}).get("collisionCount")
        digest = pod_template_hash(template, collision)
        template.setdefault("metadata", {}).setdefault("labels", {})[HASH_LABEL] = digest
        selector = json_copy((d.get("spec") or {}).get("selector") or {})
        selector.setdefault("matchLabels", {})[HASH_LABEL] = digest
        rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
              "metadata": {"name": f"{name}-{digest}", "namespace": ns, "labels": dict(template["metadata"]["labels"]),
                           "ownerReferences": [controller_ref(d)]},
              "spec": {"replicas": 0, "selector": selector, "template": template}}
        if (d.get("spec") or {}).get("minReadySeconds"):
            rs["spec"]["minReadySeconds"] = d["spec"]["minReadySeconds"]
        replicas = new_rs_new_replicas(d, [*old_rss, rs], rs)
        rs["spec"]["replicas"] = replicas
        set_new_replicaset_annotations(d, rs, new_revision, False)
        already_exists = False
        try:
            created = self.client.create("apps/v1", "replicasets", rs, ns)
        except ApiError as exc:
            if exc.code == 409 and exc.reason == "AlreadyExists":
                found = self.client.get_or_none("apps/v1", "replicasets", rs["metadata"]["name"], ns)
                ref = controller_of(found) if found else None
                if found and ref and ref.get("uid") == d["metadata"]["uid"] and \
                        equal_ignore_hash((d.get("spec") or {}).get("template") or {}, found["spec"]["template"]):
                    created, already_exists = found, True
                else:
                    # a hash collision: count it, so that the next hash differs (the sync is retried)
                    status = dict(d.get("status") or {}, collisionCount=(collision or 0) + 1)
                    self.log.record(self.name, "hash-collision", _ref(d),
                                    f"deployment {ns}/{name}: replicaset {rs['metadata']['name']} exists and is not "
                                    "its own → count a hash collision and retry")
                    self._update_status(d, status)
                    raise
            elif any(c.get("reason") == "NamespaceTerminating" for c in (exc.details or {}).get("causes") or []):
                raise
            else:
                message = f'Failed to create new replica set "{rs["metadata"]["name"]}": {exc.message}'
                if has_progress_deadline(d):
                    status = json_copy(d.get("status") or {})
                    set_condition(status, new_condition("Progressing", "False", "ReplicaSetCreateError", message))
                    self._update_status(d, status)
                self.event(d, "Warning", "ReplicaSetCreateError", message)
                raise
        if not already_exists:
            self.log.record(self.name, "create-replicaset", _ref(created),
                            f"deployment {ns}/{name}: no ReplicaSet runs the current pod template → create "
                            f"replicaset {ns}/{created['metadata']['name']} (revision {new_revision}) with "
                            f"{replicas} replica(s)")
            if replicas > 0:
                self.event(d, "Normal", "ScalingReplicaSet",
                           f"Scaled up replica set {created['metadata']['name']} from 0 to {replicas}")
        status = json_copy(d.get("status") or {})
        needs_update = self._set_revision(d, str(new_revision))
        if not already_exists and has_progress_deadline(d):
            set_condition(status, new_condition("Progressing", "True", "NewReplicaSetCreated",
                                                f'Created new replica set "{created["metadata"]["name"]}"'))
            needs_update = True
        if needs_update:
            self._update_status(d, status)
        return created

    @staticmethod
    def _set_revision(d: dict, value: str | None) -> bool:
        """SetDeploymentRevision (written with the next status update: the status strategy keeps
        the Deployment's metadata from the request)."""
        if value is None or _annotation(d, REVISION) == value:
            return False
        d["metadata"].setdefault("annotations", {})[REVISION] = value
        return True

    # -- scaling -------------------------------------------------------------------------------------
    def scale_replicaset(self, rs: dict, new_scale: int, d: dict, operation: str | None = None) -> tuple[bool, dict]:
        """scaleReplicaSet: the new size and the replica annotations, and an event when the size changed."""
        old_scale = _replicas(rs)
        size_changes = old_scale != new_scale
        updated = json_copy(rs)
        annotations_change = set_replicas_annotations(updated, _replicas(d), _replicas(d) + max_surge(d))
        if not size_changes and not annotations_change:
            return False, rs
        updated["spec"]["replicas"] = new_scale
        ns = rs["metadata"]["namespace"]
        result = self.client.update("apps/v1", "replicasets", updated, ns)
        if size_changes:
            operation = operation or ("up" if new_scale > old_scale else "down")
            message = f"Scaled {operation} replica set {rs['metadata']['name']} from {old_scale} to {new_scale}"
            self.event(d, "Normal", "ScalingReplicaSet", message)
            self.log.record(self.name, "scale-replicaset", _ref(rs), f"deployment {ns}/{d['metadata']['name']}: "
                            + message[0].lower() + message[1:])
        return size_changes, result

    def sync_scaling(self, d: dict, rs_list: list[dict]) -> None:
        """sync: scaling events and paused Deployments — scale, clean up, write the status."""
        new_rs, old_rss = self.all_replicasets(d, rs_list, create=False)
        self.scale(d, new_rs, old_rss)
        if d["spec"].get("paused"):
            self.cleanup(d, old_rss)
        self.sync_deployment_status([*old_rss, new_rs], new_rs, d)

    def scale(self, d: dict, new_rs: dict | None, old_rss: list[dict]) -> None:
        """scale: one active ReplicaSet takes all replicas; a saturated new one means the old go to
        zero; otherwise the change is spread in proportion over the active ReplicaSets."""
        candidate = self._active_or_latest(new_rs, old_rss)
        if candidate is not None:
            if _replicas(candidate) != _replicas(d):
                self.scale_replicaset(candidate, _replicas(d), d)
            return
        if self._saturated(d, new_rs):
            for rs in active(old_rss):
                self.scale_replicaset(rs, 0, d)
            return
        if not is_rolling_update(d):
            return
        all_rss = active([*old_rss, new_rs])
        allowed = _replicas(d) + max_surge(d) if _replicas(d) > 0 else 0
        to_add = allowed - sum(_replicas(rs) for rs in all_rss)
        operation = None
        if to_add > 0:      # ReplicaSetsBySizeNewer
            all_rss.sort(key=lambda r: (_replicas(r), r["metadata"].get("creationTimestamp", ""), r["metadata"]["name"]),
                         reverse=True)
            operation = "up"
        elif to_add < 0:    # ReplicaSetsBySizeOlder
            all_rss.sort(key=lambda r: (-_replicas(r), r["metadata"].get("creationTimestamp", ""), r["metadata"]["name"]))
            operation = "down"
        added, sizes = 0, {}
        for rs in all_rss:
            if to_add:
                proportion = self._proportion(rs, d, to_add, added)
                sizes[rs["metadata"]["name"]] = _replicas(rs) + proportion
                added += proportion
            else:
                sizes[rs["metadata"]["name"]] = _replicas(rs)
        for i, rs in enumerate(all_rss):
            if i == 0 and to_add:
                sizes[rs["metadata"]["name"]] = max(0, sizes[rs["metadata"]["name"]] + to_add - added)
            self.scale_replicaset(rs, sizes[rs["metadata"]["name"]], d, operation)

    @staticmethod
    def _active_or_latest(new_rs: dict | None, old_rss: list[dict]) -> dict | None:
        """FindActiveOrLatest."""
        if new_rs is None and not old_rss:
            return None
        newest_first = list(reversed(_by_creation(old_rss)))
        candidates = active([*newest_first, new_rs])
        if not candidates:
            return new_rs if new_rs is not None else newest_first[0]
        return candidates[0] if len(candidates) == 1 else None

    @staticmethod
    def _saturated(d: dict, rs: dict | None) -> bool:
        """IsSaturated: the new ReplicaSet runs all replicas, all available."""
        if rs is None:
            return False
        desired = _annotation(rs, DESIRED_REPLICAS)
        return (desired is not None and desired.isdigit() and _replicas(rs) == _replicas(d)
                and int(desired) == _replicas(d) and _status(rs, "availableReplicas") == _replicas(d))

    @staticmethod
    def _proportion(rs: dict, d: dict, to_add: int, added: int) -> int:
        """GetProportion with getReplicaSetFraction."""
        if _replicas(rs) == 0 or to_add == 0 or to_add == added:
            return 0
        if _replicas(d) == 0:
            fraction = -_replicas(rs)
        else:
            total = _replicas(d) + max_surge(d)
            annotated = _annotation(rs, MAX_REPLICAS)
            annotated = int(annotated) if annotated and annotated.isdigit() else _status(d, "replicas")
            fraction = int(math.floor(_replicas(rs) * total / annotated + 0.5)) - _replicas(rs) if annotated else 0
        allowed = to_add - added
        return min(fraction, allowed) if to_add > 0 else max(fraction, allowed)

    # -- RollingUpdate ------------------------------------------------------------------------------
    def rollout_rolling(self, d: dict, rs_list: list[dict]) -> None:
        new_rs, old_rss = self.all_replicasets(d, rs_list, create=True)
        all_rss = [*old_rss, new_rs]
        if self.reconcile_new(all_rss, new_rs, d):
            self.sync_rollout_status(all_rss, new_rs, d)
            return
        if self.reconcile_old(all_rss, active(old_rss), new_rs, d):
            self.sync_rollout_status(all_rss, new_rs, d)
            return
        if deployment_complete(d, d.get("status") or {}):
            self.cleanup(d, old_rss)
        self.sync_rollout_status(all_rss, new_rs, d)

    def reconcile_new(self, all_rss: list[dict], new_rs: dict, d: dict) -> bool:
        if _replicas(new_rs) == _replicas(d):
            return False
        if _replicas(new_rs) > _replicas(d):
            return self.scale_replicaset(new_rs, _replicas(d), d)[0]
        return self.scale_replicaset(new_rs, new_rs_new_replicas(d, all_rss, new_rs), d)[0]

    def reconcile_old(self, all_rss: list[dict], old_rss: list[dict], new_rs: dict, d: dict) -> bool:
        old_count = sum(_replicas(rs) for rs in old_rss)
        if old_count == 0:
            return False
        all_count = sum(_replicas(rs) for rs in all_rss)
        min_available = _replicas(d) - max_unavailable(d)
        new_unavailable = _replicas(new_rs) - _status(new_rs, "availableReplicas")
        max_scaled_down = all_count - min_available - new_unavailable
        if max_scaled_down <= 0:
            return False
        # cleanupUnhealthyReplicas: first the replicas that are not available anyway, oldest first
        cleaned = 0
        old_rss = _by_creation(old_rss)
        for i, rs in enumerate(old_rss):
            if cleaned >= max_scaled_down:
                break
            unhealthy = _replicas(rs) - _status(rs, "availableReplicas")
            if _replicas(rs) == 0 or unhealthy <= 0:
                continue
            count = min(max_scaled_down - cleaned, unhealthy)
            _, old_rss[i] = self.scale_replicaset(rs, _replicas(rs) - count, d)
            cleaned += count
        # scaleDownOldReplicaSetsForRollingUpdate: then within maxUnavailable, oldest first
        available = sum(_status(rs, "availableReplicas") for rs in [*old_rss, new_rs])
        scaled = 0
        if available > min_available:
            budget = available - min_available
            for rs in old_rss:
                if scaled >= budget:
                    break
                if _replicas(rs) == 0:
                    continue
                count = min(_replicas(rs), budget - scaled)
                self.scale_replicaset(rs, _replicas(rs) - count, d)
                scaled += count
        return cleaned + scaled > 0

    # -- Recreate -----------------------------------------------------------------------------------
    def rollout_recreate(self, d: dict, rs_list: list[dict]) -> None:
        new_rs, old_rss = self.all_replicasets(d, rs_list, create=False)
        all_rss = [*old_rss, new_rs]
        scaled_down = False
        for rs in active(old_rss):
            scaled_down = self.scale_replicaset(rs, 0, d)[0] or scaled_down
        if scaled_down or self._old_pods_running(new_rs, old_rss):
            self.sync_rollout_status(all_rss, new_rs, d)
            return
        if new_rs is None:
            new_rs, old_rss = self.all_replicasets(d, rs_list, create=True)
            all_rss = [*old_rss, new_rs]
        self.scale_replicaset(new_rs, _replicas(d), d)
        if deployment_complete(d, d.get("status") or {}):
            self.cleanup(d, old_rss)
        self.sync_rollout_status(all_rss, new_rs, d)

    def _old_pods_running(self, new_rs: dict | None, old_rss: list[dict]) -> bool:
        """oldPodsRunning: old ReplicaSets still report pods, or a pod of theirs has not finished."""
        if sum(_status(rs, "replicas") for rs in old_rss) > 0:
            return True
        old_uids = {rs["metadata"]["uid"] for rs in old_rss}
        for pod in self.informers["pods"].list():
            ref = controller_of(pod)
            if ref is not None and ref.get("uid") in old_uids and \
                    (pod.get("status") or {}).get("phase") not in ("Failed", "Succeeded"):
                return True
        return False

    # -- history -------------------------------------------------------------------------------------
    def cleanup(self, d: dict, old_rss: list[dict]) -> None:
        """cleanupDeployment: delete the oldest revisions beyond revisionHistoryLimit, if idle."""
        limit = (d.get("spec") or {}).get("revisionHistoryLimit")
        if limit is None:
            return
        cleanable = [rs for rs in old_rss if not rs["metadata"].get("deletionTimestamp")]
        excess = len(cleanable) - limit
        if excess <= 0:
            return
        ns = d["metadata"]["namespace"]
        for rs in sorted(cleanable, key=lambda r: (revision(r), r["metadata"].get("creationTimestamp", "")))[:excess]:
            if _status(rs, "replicas") or _replicas(rs) or \
                    rs["metadata"].get("generation", 0) > _status(rs, "observedGeneration"):
                continue
            self.log.record(self.name, "delete-old-replicaset", _ref(rs),
                            f"deployment {ns}/{d['metadata']['name']}: revision {revision(rs)} is beyond "
                            f"revisionHistoryLimit {limit} → delete replicaset {ns}/{rs['metadata']['name']}")
            try:
                self.client.delete("apps/v1", "replicasets", rs["metadata"]["name"], ns)
            except ApiError as exc:
                if exc.code != 404:
                    raise

    # -- status --------------------------------------------------------------------------------------
    def calculate_status(self, all_rss: list[dict | None], new_rs: dict | None, d: dict) -> dict:
        rss = [rs for rs in all_rss if rs is not None]
        available = sum(_status(rs, "availableReplicas") for rs in rss)
        wanted = sum(_replicas(rs) for rs in rss)
        status = {"observedGeneration": d["metadata"].get("generation", 1),
                  "replicas": sum(_status(rs, "replicas") for rs in rss),
                  "updatedReplicas": _status(new_rs, "replicas") if new_rs else 0,
                  "readyReplicas": sum(_status(rs, "readyReplicas") for rs in rss), "availableReplicas": available,
                  "unavailableReplicas": max(wanted - available, 0)}
        if (d.get("status") or {}).get("collisionCount") is not None:
            status["collisionCount"] = d["status"]["collisionCount"]
        conditions = json_copy((d.get("status") or {}).get("conditions") or [])
        if conditions:
            status["conditions"] = conditions
        if available >= _replicas(d) - max_unavailable(d):
            set_condition(status, new_condition("Available", "True", "MinimumReplicasAvailable",
                                                "Deployment has minimum availability."))
        else:
            set_condition(status, new_condition("Available", "False", "MinimumReplicasUnavailable",
                                                "Deployment does not have minimum availability."))
        return status

    def sync_deployment_status(self, all_rss: list[dict | None], new_rs: dict | None, d: dict) -> None:
        status = self.calculate_status(all_rss, new_rs, d)
        if _compact(status) != _compact(d.get("status") or {}) or self._revision_pending(d):
            self._update_status(d, status)

    def sync_rollout_status(self, all_rss: list[dict | None], new_rs: dict | None, d: dict) -> None:
        """syncRolloutStatus: the status and the Progressing condition (progress.go)."""
        status = self.calculate_status(all_rss, new_rs, d)
        if not has_progress_deadline(d):
            remove_condition(status, "Progressing")
        current = condition(d.get("status") or {}, "Progressing")
        complete = status["replicas"] == status["updatedReplicas"] and current is not None and \
            current.get("reason") == "NewReplicaSetAvailable"
        rs_name = new_rs["metadata"]["name"] if new_rs else None
        if has_progress_deadline(d) and not complete:
            if deployment_complete(d, status):
                message = f'ReplicaSet "{rs_name}" has successfully progressed.' if rs_name else \
                    f'Deployment "{d["metadata"]["name"]}" has successfully progressed.'
                set_condition(status, new_condition("Progressing", "True", "NewReplicaSetAvailable", message))
            elif deployment_progressing(d, status):
                message = f'ReplicaSet "{rs_name}" is progressing.' if rs_name else \
                    f'Deployment "{d["metadata"]["name"]}" is progressing.'
                cond = new_condition("Progressing", "True", "ReplicaSetUpdated", message)
                if current is not None:
                    if current.get("status") == "True":
                        cond["lastTransitionTime"] = current.get("lastTransitionTime")
                    remove_condition(status, "Progressing")
                set_condition(status, cond)
            elif deployment_timed_out(d, status):
                message = f'ReplicaSet "{rs_name}" has timed out progressing.' if rs_name else \
                    f'Deployment "{d["metadata"]["name"]}" has timed out progressing.'
                set_condition(status, new_condition("Progressing", "False", "ProgressDeadlineExceeded", message))
        failure = next((c for rs in all_rss if rs is not None
                        for c in (rs.get("status") or {}).get("conditions") or [] if c.get("type") == "ReplicaFailure"
                        and c.get("status") == "True"), None)
        if failure is not None:
            set_condition(status, {"type": "ReplicaFailure", "status": "True",
                                   "lastUpdateTime": failure.get("lastTransitionTime") or _now(),
                                   "lastTransitionTime": failure.get("lastTransitionTime") or _now(),
                                   "reason": failure.get("reason", ""), "message": failure.get("message", "")})
        else:
            remove_condition(status, "ReplicaFailure")
        if _compact(status) == _compact(d.get("status") or {}) and not self._revision_pending(d):
            self._requeue_stuck(d, status)
            return
        self._update_status(d, status)

    def _requeue_stuck(self, d: dict, status: dict) -> None:
        """requeueStuckDeployment: look again when the progress deadline would pass."""
        cond = condition(status, "Progressing")
        if not has_progress_deadline(d) or cond is None or \
                cond.get("reason") in ("NewReplicaSetAvailable", "ProgressDeadlineExceeded") or \
                deployment_complete(d, status):
            return
        due = _parse_time(cond.get("lastUpdateTime")) + d["spec"]["progressDeadlineSeconds"] - time.time()
        self.queue.add_after(f"{d['metadata']['namespace']}/{d['metadata']['name']}", max(due, 0) + 1)

    def _revision_pending(self, d: dict) -> bool:
        cached = self.informers["deployments"].get(f"{d['metadata']['namespace']}/{d['metadata']['name']}")
        return cached is not None and _annotation(cached, REVISION) != _annotation(d, REVISION)

    def _update_status(self, d: dict, status: dict) -> dict | None:
        for key in [k for k, v in status.items() if v in (0, None) and k != "observedGeneration"
                    and k != "collisionCount"]:
            status.pop(key)
        d["status"] = status
        try:
            updated = self.client.update("apps/v1", "deployments", d, d["metadata"]["namespace"], "status")
        except ApiError as exc:
            if exc.code == 404:
                return None
            raise
        d["metadata"]["resourceVersion"] = updated["metadata"]["resourceVersion"]
        return updated


def _compact(status: dict) -> dict:
    """A status without its zero counts (Go omits them), for comparisons."""
    return {k: v for k, v in status.items() if v not in (0, None) or k == "observedGeneration"}


def _ref(obj: dict) -> dict:
    meta = obj.get("metadata") or {}
    return {"apiVersion": obj.get("apiVersion", ""), "kind": obj.get("kind", ""),
            "namespace": meta.get("namespace", ""), "name": meta.get("name", ""), "uid": meta.get("uid", "")}


def _selector(d: dict) -> LabelSelector | None:
    try:
        return LabelSelector.from_label_selector((d.get("spec") or {}).get("selector"))
    except (ValueError, AttributeError):
        return None
