"""The PersistentVolume controller's binding and release of existing volumes
(pkg/controller/volume/persistentvolume/pv_controller.go, kube-controller-manager's
persistentvolume-binder), reduced to what needs no volume plugin:

- syncClaim: a claim without pv.kubernetes.io/bind-completed is unbound (syncUnboundClaim). One
  that names no volume gets a volume pre-bound to it or the smallest Available one that matches
  it, among the volumes whose access modes hold all of the claim's, those with the fewest modes
  first (index.go findByClaim; FindMatchingVolume, component-helpers/storage/volume/
  pv_helpers.go: capacity at least the request, the same volumeMode and storageClassName, the
  claim's selector); none: the claim stays Pending, with the event FailedBinding when it names
  no StorageClass. One that names a volume binds to it when the volume is unclaimed
  and satisfies it (checkVolumeSatisfyClaim) or is claimed by it; else it stays Pending. A bound
  claim (syncBoundClaim) whose volume is gone, or claimed by another claim, is Lost.
- bind, in upstream's order: the volume's spec.claimRef (a reference to the claim: kind,
  namespace, name, uid, apiVersion, resourceVersion) and, unless the volume was pre-bound to the
  claim, the annotation pv.kubernetes.io/bound-by-controller (GetBindVolumeToClaim); the volume's
  status.phase Bound; the claim's spec.volumeName with pv.kubernetes.io/bound-by-controller (when
  the controller chose the volume) and pv.kubernetes.io/bind-completed (bindClaimToVolume); the
  claim's status: phase Bound, the volume's accessModes and capacity (updateClaimStatus).
- syncVolume: no claimRef, or a claimRef without uid (pre-bound): Available. A claimRef whose
  claim is gone (or is another claim of that name: another uid): Released, and reclaimVolume by
  the policy. Retain does nothing more, so the volume stays Released, claimRef and all, until an
  administrator deletes it or clears its claimRef (then it is Available again). A claim bound to
  it: Bound. A claim bound to another volume: a volume the controller bound loses its claimRef, a
  pre-bound one only its uid (unbindVolume), and it is Available.

The claims and volumes are synced when they or their counterpart change (added, updated,
deleted), and all of them every 15 s (pv_controller_base.go Run: `go wait.Until(ctrl.resync,
ctrl.resyncPeriod)`, --pvclaimbinder-sync-period's default): a claim that found no volume is
bound on the next resync after one appears. Not reconstructed: dynamic
provisioning (a claim with a StorageClass and no volume stays Pending),
the Delete and Recycle reclaim policies (such a volume stays Released, with a decision saying so),
delayed binding (WaitForFirstConsumer), CSI migration annotations, metrics.
"""

from __future__ import annotations

from fractions import Fraction

from labkit.apiserver.errors import go_quote
from labkit.apiserver.selectors import LabelSelector
from labkit.controllers.base import KeyedController
from labkit.quantity import parse

ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
PV_CONTROLLER = "persistentvolume-binder"


def _quantity(value) -> Fraction:
    return parse(str(value))[0]


def _class(obj: dict) -> str:
    """GetPersistentVolumeClass / GetPersistentVolumeClaimClass (the beta annotation first)."""
    meta = obj.get("metadata") or {}
    beta = (meta.get("annotations") or {}).get("volume.beta.kubernetes.io/storage-class")
    return beta if beta is not None else (obj.get("spec") or {}).get("storageClassName") or ""


def _mode(obj: dict) -> str:
    return (obj.get("spec") or {}).get("volumeMode") or "Filesystem"


def _storage(obj: dict, field: str) -> Fraction:
    spec = obj.get("spec") or {}
    holder = (spec.get("resources") or {}).get("requests") if field == "request" else spec.get("capacity")
    return _quantity((holder or {}).get("storage") or "0")


def claim_key(claim: dict) -> str:
    return f"{claim['metadata']['namespace']}/{claim['metadata']['name']}"


def bound_to(volume: dict, claim: dict) -> bool:
    """IsVolumeBoundToClaim: the claimRef names the claim, and its uid, when set, is the claim's."""
    ref = (volume.get("spec") or {}).get("claimRef")
    meta = claim["metadata"]
    if not ref or (ref.get("namespace"), ref.get("name")) != (meta["namespace"], meta["name"]):
        return False
    return not ref.get("uid") or ref["uid"] == meta["uid"]


def _matches_selector(volume: dict, selector: dict | None) -> bool:
    if selector is None:
        return True
    return LabelSelector.from_label_selector(selector).matches((volume.get("metadata") or {}).get("labels"))


def find_best_match(claim: dict, volumes: list[dict]) -> dict | None:
    """findBestMatchForClaim (index.go findByClaim): the volumes are indexed by their set of access
    modes; the sets that hold every mode the claim asks for are searched fewest modes first
    (allPossibleMatchingAccessModes; among sets of one size upstream's order is the index's, here
    their names'), each with FindMatchingVolume, and the first match wins."""
    wanted = set((claim.get("spec") or {}).get("accessModes") or [])
    groups: dict[frozenset, list[dict]] = {}
    for volume in volumes:
        groups.setdefault(frozenset((volume.get("spec") or {}).get("accessModes") or []), []).append(volume)
    for modes in sorted((m for m in groups if wanted <= m), key=lambda m: (len(m), sorted(m))):
        found = find_matching_volume(claim, groups[modes])
        if found is not None:
            return found
    return None


def find_matching_volume(claim: dict, volumes: list[dict]) -> dict | None:
    """FindMatchingVolume on the controller's path (no node, no delayed binding)."""
    requested, wanted = _storage(claim, "request"), _class(claim)
    smallest = None
    for volume in volumes:
        if (volume.get("spec") or {}).get("claimRef") and not bound_to(volume, claim):
            continue
        size = _storage(volume, "capacity")
        if size < requested or _mode(claim) != _mode(volume) or volume["metadata"].get("deletionTimestamp"):
            continue
        if ((claim.get("spec") or {}).get("volumeAttributesClassName") or "") != \
                ((volume.get("spec") or {}).get("volumeAttributesClassName") or ""):
            continue
        if bound_to(volume, claim):
            return volume
        if (volume.get("status") or {}).get("phase") != "Available" \
                or not _matches_selector(volume, (claim.get("spec") or {}).get("selector")) or _class(volume) != wanted:
            continue
        if smallest is None or _storage(smallest, "capacity") > size:
            smallest = volume
    return smallest


def volume_satisfies_claim(volume: dict, claim: dict) -> str | None:
    """checkVolumeSatisfyClaim: why the volume a claim names cannot be bound to it, or None."""
    if volume["metadata"].get("deletionTimestamp"):
        return f"the volume is marked for deletion {go_quote(volume['metadata']['name'])}"
    if _storage(volume, "capacity") < _storage(claim, "request"):
        return "requested PV is too small"
    if _class(volume) != _class(claim):
        return "storageClassName does not match"
    if _mode(volume) != _mode(claim):
        return "incompatible volumeMode"
    offered = set((volume.get("spec") or {}).get("accessModes") or [])
    if not set((claim.get("spec") or {}).get("accessModes") or []) <= offered:
        return "incompatible accessMode"
    return None


SYNC_PERIOD = 15.0      # kube-controller-manager --pvclaimbinder-sync-period's default


class PersistentVolumeController(KeyedController):
    name = PV_CONTROLLER
    user = "system:serviceaccount:kube-system:persistent-volume-binder"
    component = "persistentvolume-controller"

    def make_informers(self):
        def claim_changed(*claims):
            for claim in claims:
                self.queue.add("claim:" + claim_key(claim))

        def claim_deleted(claim):
            # deleteClaim: the volume it was bound to is synced at once (it may be Released now)
            name = (claim.get("spec") or {}).get("volumeName")
            if name:
                self.queue.add("volume:" + name)

        def volume_changed(*volumes):
            for volume in volumes:
                self.queue.add("volume:" + volume["metadata"]["name"])

        def volume_deleted(volume):
            # deleteVolume: its claim is synced at once, to be Lost without waiting for a resync
            ref = (volume.get("spec") or {}).get("claimRef")
            if ref:
                self.queue.add(f"claim:{ref.get('namespace', '')}/{ref.get('name', '')}")
        # resync: every claim and volume queued again each SYNC_PERIOD (the informers' Sync deltas
        # call on_update(obj, obj), which queues it as upstream's resync does)
        return {"volumes": self.informer("v1", "persistentvolumes", "PersistentVolume", namespaced=False,
                                         on_add=volume_changed, on_update=volume_changed, on_delete=volume_deleted,
                                         resync_period=SYNC_PERIOD),
                "claims": self.informer("v1", "persistentvolumeclaims", "PersistentVolumeClaim", on_add=claim_changed,
                                        on_update=claim_changed, on_delete=claim_deleted, resync_period=SYNC_PERIOD)}

    def sync(self, key: str) -> None:
        kind, _, name = key.partition(":")
        if kind == "claim":
            claim = self.informers["claims"].get(name)
            if claim is not None:
                self.sync_claim(claim)
        else:
            volume = self.informers["volumes"].get(name)
            if volume is not None:
                self.sync_volume(volume)

    # -- claims ------------------------------------------------------------------------------

    def sync_claim(self, claim: dict) -> None:
        annotations = claim["metadata"].get("annotations") or {}
        if ANN_BIND_COMPLETED not in annotations:
            self._sync_unbound_claim(claim)
        else:
            self._sync_bound_claim(claim)

    def _sync_unbound_claim(self, claim: dict) -> None:
        wanted = (claim.get("spec") or {}).get("volumeName")
        what = f"PersistentVolumeClaim {claim_key(claim)}"
        if not wanted:
            volume = find_best_match(claim, self.informers["volumes"].list())
            if volume is None:
                if not _class(claim):
                    self.event(claim, "Normal", "FailedBinding",
                               "no persistent volumes available for this claim and no storage class is set")
                self._claim_status(claim, "Pending", None)
                return
            self.log.record(self.name, "bind", None, f"{what} matches PersistentVolume {volume['metadata']['name']} "
                            "→ bind them")
            self.bind(volume, claim)
            return
        volume = self.informers["volumes"].get(wanted)
        if volume is None:
            self._claim_status(claim, "Pending", None)
            return
        if not (volume.get("spec") or {}).get("claimRef"):
            problem = volume_satisfies_claim(volume, claim)
            if problem:
                self.event(claim, "Warning", "VolumeMismatch",
                           f"Cannot bind to requested volume {go_quote(wanted)}: {problem}")
                self._claim_status(claim, "Pending", None)
                return
            self.bind(volume, claim)
        elif bound_to(volume, claim):
            self.bind(volume, claim)
        else:
            self.event(claim, "Warning", "FailedBinding",
                       f"volume {go_quote(wanted)} already bound to a different claim.")
            if ANN_BOUND_BY_CONTROLLER not in (claim["metadata"].get("annotations") or {}):
                self._claim_status(claim, "Pending", None)      # the user asked for it: retry later
                return
            raise RuntimeError(f"invalid binding of claim {go_quote(claim_key(claim))} to volume {go_quote(wanted)}")

    def _sync_bound_claim(self, claim: dict) -> None:
        wanted = (claim.get("spec") or {}).get("volumeName")
        if not wanted:
            self._claim_lost(claim, "ClaimLost",
                             "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!")
            return
        volume = self.informers["volumes"].get(wanted)
        if volume is None:
            self._claim_lost(claim, "ClaimLost",
                             "Bound claim has lost its PersistentVolume. Data on the volume is lost!")
        elif not (volume.get("spec") or {}).get("claimRef") or \
                volume["spec"]["claimRef"].get("uid") == claim["metadata"]["uid"]:
            self.bind(volume, claim)
        else:
            self._claim_lost(claim, "ClaimMisbound", "Two claims are bound to the same volume, this one is bound "
                                                     "incorrectly")

    def _claim_lost(self, claim: dict, reason: str, message: str) -> None:
        """updateClaimStatusWithEvent: the phase Lost and its event, once."""
        if (claim.get("status") or {}).get("phase") == "Lost":
            return
        updated = self._claim_status(claim, "Lost", None)
        self.event(updated, "Warning", reason, message)
        self.log.record(self.name, "lost", None, f"PersistentVolumeClaim {claim_key(claim)}: {message}")

    def _claim_status(self, claim: dict, phase: str, volume: dict | None) -> dict:
        """updateClaimStatus: the phase, and the volume's access modes and (when the claim becomes
        Bound) capacity, or none of them without a volume; written only when something changes."""
        status = dict(claim.get("status") or {})
        before = dict(status)
        if volume is None:
            status.pop("accessModes", None)
            status.pop("capacity", None)
        else:
            status["accessModes"] = list((volume.get("spec") or {}).get("accessModes") or [])
            if status.get("phase") != phase:
                capacity = (volume.get("spec") or {}).get("capacity") or {}
                if "storage" not in capacity:
                    raise RuntimeError(f"PersistentVolume {go_quote(volume['metadata']['name'])} is without a "
                                       "storage capacity")
                status["capacity"] = dict(capacity)
        status["phase"] = phase
        if status == before:
            return claim
        return self.client.update("v1", "persistentvolumeclaims", dict(claim, status=status),
                                  claim["metadata"]["namespace"], subresource="status")

    # -- binding -----------------------------------------------------------------------------

    def bind(self, volume: dict, claim: dict) -> None:
        """bind: the volume first (claimRef, then its phase), then the claim (volumeName and
        annotations, then its status). An error leaves the rest to the next sync."""
        volume = self._bind_volume_to_claim(volume, claim)
        volume = self._volume_phase(volume, "Bound")
        claim = self._bind_claim_to_volume(claim, volume)
        self._claim_status(claim, "Bound", volume)

    def _bind_volume_to_claim(self, volume: dict, claim: dict) -> dict:
        """GetBindVolumeToClaim, saved with an update of the volume when it changed."""
        meta, spec = claim["metadata"], volume.get("spec") or {}
        ref = spec.get("claimRef") or {}
        set_by_controller = not bound_to(volume, claim)
        changed = dict(volume, spec=dict(spec), metadata=dict(volume["metadata"]))
        dirty = False
        if (ref.get("name"), ref.get("namespace"), ref.get("uid")) != (meta["name"], meta["namespace"], meta["uid"]):
            changed["spec"]["claimRef"] = {"kind": "PersistentVolumeClaim", "namespace": meta["namespace"],
                                           "name": meta["name"], "uid": meta["uid"], "apiVersion": "v1",
                                           "resourceVersion": meta["resourceVersion"]}
            dirty = True
        annotations = dict(changed["metadata"].get("annotations") or {})
        if set_by_controller and ANN_BOUND_BY_CONTROLLER not in annotations:
            annotations[ANN_BOUND_BY_CONTROLLER] = "yes"
            changed["metadata"]["annotations"] = annotations
            dirty = True
        if not dirty:
            return volume
        return self.client.update("v1", "persistentvolumes", changed)

    def _bind_claim_to_volume(self, claim: dict, volume: dict) -> dict:
        """bindClaimToVolume."""
        changed = dict(claim, spec=dict(claim.get("spec") or {}), metadata=dict(claim["metadata"]))
        annotations = dict(changed["metadata"].get("annotations") or {})
        dirty = False
        if changed["spec"].get("volumeName") != volume["metadata"]["name"]:
            changed["spec"]["volumeName"] = volume["metadata"]["name"]
            annotations.setdefault(ANN_BOUND_BY_CONTROLLER, "yes")
            dirty = True
        if ANN_BIND_COMPLETED not in annotations:
            annotations[ANN_BIND_COMPLETED] = "yes"
            dirty = True
        if not dirty:
            return claim
        changed["metadata"]["annotations"] = annotations
        return self.client.update("v1", "persistentvolumeclaims", changed, claim["metadata"]["namespace"])

    def _volume_phase(self, volume: dict, phase: str) -> dict:
        """updateVolumePhase: written only when the phase changes (the message is cleared)."""
        if (volume.get("status") or {}).get("phase") == phase:
            return volume
        status = {k: v for k, v in (volume.get("status") or {}).items() if k != "message"}
        status["phase"] = phase
        updated = self.client.update("v1", "persistentvolumes", dict(volume, status=status), subresource="status")
        self.log.record(self.name, "phase", None, f"PersistentVolume {volume['metadata']['name']} → {phase}")
        return updated

    # -- volumes -----------------------------------------------------------------------------

    def sync_volume(self, volume: dict) -> None:
        ref = (volume.get("spec") or {}).get("claimRef")
        if not ref or not ref.get("uid"):
            self._volume_phase(volume, "Available")
            return
        namespace, name = ref.get("namespace", ""), ref.get("name", "")
        claim = self.informers["claims"].get(f"{namespace}/{name}")
        phase = (volume.get("status") or {}).get("phase")
        if claim is None and phase not in ("Released", "Failed"):
            claim = self.client.get_or_none("v1", "persistentvolumeclaims", name, namespace)
        if claim is not None and claim["metadata"]["uid"] != ref["uid"]:
            claim = self.client.get_or_none("v1", "persistentvolumeclaims", name, namespace)
            if claim is not None and claim["metadata"]["uid"] != ref["uid"]:
                claim = None            # the claim it was bound to was deleted, another took its name
        if claim is None:
            if phase not in ("Released", "Failed"):
                volume = self._volume_phase(volume, "Released")
            self._reclaim(volume)
            return
        if not (claim.get("spec") or {}).get("volumeName"):
            self.queue.add("claim:" + claim_key(claim))        # the binding is not completed: syncClaim does it
        elif claim["spec"]["volumeName"] == volume["metadata"]["name"]:
            self._volume_phase(volume, "Bound")
        else:
            self._unbind(volume)

    def _reclaim(self, volume: dict) -> None:
        """reclaimVolume: Retain does nothing; Delete and Recycle are not reconstructed."""
        policy = (volume.get("spec") or {}).get("persistentVolumeReclaimPolicy")
        if policy == "Retain":
            return
        self.log.record(self.name, "reclaim", None, f"PersistentVolume {volume['metadata']['name']} is Released with "
                        f"reclaim policy {policy}: labkit does not reconstruct it, the volume stays Released")

    def _unbind(self, volume: dict) -> None:
        """unbindVolume: the volume the controller bound loses its claimRef (and the annotation), a
        pre-bound one only the claimRef's uid; then it is Available."""
        changed = dict(volume, spec=dict(volume["spec"]), metadata=dict(volume["metadata"]))
        annotations = dict(changed["metadata"].get("annotations") or {})
        if ANN_BOUND_BY_CONTROLLER in annotations:
            changed["spec"].pop("claimRef", None)
            annotations.pop(ANN_BOUND_BY_CONTROLLER)
            changed["metadata"]["annotations"] = annotations or None
        else:
            changed["spec"]["claimRef"] = dict(changed["spec"]["claimRef"], uid="")
        self._volume_phase(self.client.update("v1", "persistentvolumes", changed), "Available")
