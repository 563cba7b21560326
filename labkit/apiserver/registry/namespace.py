"""core/v1 Namespaces: their strategy and the status and finalize subresources
(pkg/registry/core/namespace/strategy.go, storage/storage.go).
"""

from __future__ import annotations


from labkit.apiserver import tables
from labkit.apiserver.timestamps import now_rfc3339
from labkit.apiserver.errors import FieldError, field_invalid
from labkit.apiserver.resources import NAMESPACE_FINALIZER, StatusSubresource, Strategy, Subresource
from labkit.apiserver.validation import dns1123_label_problems, validate_finalizer_name_list
from labkit.jsondata import json_copy


# -- subresources of particular kinds ----------------------------------------------------------

class NamespaceStatusSubresource(StatusSubresource):
    """`namespaces/<name>/status`: pkg/apis/core/validation ValidateNamespaceStatusUpdate — the
    phase must say what deletionTimestamp says (so the status cannot "unstick" a namespace)."""

    def validate(self, obj: dict) -> list[FieldError]:
        phase = (obj.get("status") or {}).get("phase", "")
        if not obj["metadata"].get("deletionTimestamp"):
            if phase != "Active":
                return [field_invalid("status.Phase", phase, "may only be 'Active' if `deletionTimestamp` is empty")]
        elif phase != "Terminating":
            return [field_invalid("status.Phase", phase,
                                  "may only be 'Terminating' if `deletionTimestamp` is not empty")]
        return []


class FinalizeSubresource(Subresource):
    """`namespaces/<name>/finalize` (PUT only, upstream FinalizeREST with
    namespaceFinalizeStrategy): the body's spec and metadata are applied, only the status is kept
    (PrepareForUpdate); the `kubernetes.io/metadata.name` label is set as on every namespace write
    (Canonicalize).

    Anyone allowed to update it may add or remove spec finalizers, also while the namespace is
    Terminating; the namespace controller removes `kubernetes` this way once the namespace is
    empty."""

    name = "finalize"
    verbs = ["update"]

    def prepare_for_update(self, new: dict, old: dict) -> dict:
        if old.get("status") is not None:
            new["status"] = json_copy(old["status"])
        else:
            new.pop("status", None)
        new["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = new["metadata"].get("name", "")
        return new

    def validate(self, obj: dict) -> list[FieldError]:
        # ValidateNamespaceFinalizeUpdate (the metadata rules run for every update)
        return validate_finalizer_name_list((obj.get("spec") or {}).get("finalizers") or [], "spec.finalizers",
                                            index=True)


# -- strategies ------------------------------------------------------------------------------

class NamespaceStrategy(Strategy):
    """pkg/registry/core/namespace/strategy.go and storage/storage.go: the namespace lifecycle.

    - create: `spec.finalizers` gets `kubernetes` (FinalizerKubernetes) appended if missing, the
      status is reset to phase Active, the `kubernetes.io/metadata.name` label is set;
    - normal updates cannot change `spec.finalizers` or `status` (PrepareForUpdate copies them
      back); the `finalize` subresource changes only spec.finalizers, `status` only the status;
    - DELETE (REST.Delete, `delete` below): the first one sets deletionTimestamp and phase
      Terminating in one update and adjusts the GC finalizers; later ones return the namespace
      unchanged while spec finalizers remain, then fall back to the generic Store.Delete;
    - the namespace is removed in the update that leaves both spec and metadata finalizers empty
      (ShouldDeleteNamespaceDuringUpdate), whichever of the main, status or finalize endpoints
      makes it.
    """

    return_deleted_object = True
    field_labels = ("status.phase",)
    subresources = (NamespaceStatusSubresource(), FinalizeSubresource())
    printer = tables.PRINTERS["Namespace"]

    def name_problems(self, name, prefix):
        return dns1123_label_problems(name, prefix)

    def prepare_for_create(self, obj):
        # namespaceStrategy.PrepareForCreate
        obj["status"] = {"phase": "Active"}
        spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
        finalizers = list(spec.get("finalizers") or [])
        if NAMESPACE_FINALIZER not in finalizers:
            finalizers.append(NAMESPACE_FINALIZER)
        spec["finalizers"] = finalizers
        obj["spec"] = spec
        obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"].get("name", "")

    def prepare_for_update(self, new, old):
        new.setdefault("spec", {})
        old_finalizers = (old.get("spec") or {}).get("finalizers")
        if old_finalizers:
            new["spec"]["finalizers"] = list(old_finalizers)
        else:
            new["spec"].pop("finalizers", None)
        if not new["spec"]:
            new.pop("spec")
        new["status"] = json_copy(old.get("status") or {})
        new["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = new["metadata"].get("name", "")

    def validate(self, obj):
        # ValidateNamespace: each spec finalizer, reported at `spec.finalizers`
        return validate_finalizer_name_list((obj.get("spec") or {}).get("finalizers") or [], "spec.finalizers",
                                            index=False)

    def should_delete_during_update(self, new, old):
        # ShouldDeleteNamespaceDuringUpdate: the generic rule and no spec finalizers left
        return not (new.get("spec") or {}).get("finalizers")

    def delete(self, registry, rt, namespace, name, options, dry_run=False):
        """storage.go REST.Delete."""
        from labkit.apiserver.errors import conflict, invalid, not_found
        from labkit.apiserver.validation import validate_delete_options
        errors = validate_delete_options(options)
        if errors:
            raise invalid("DeleteOptions", "meta.k8s.io", "", errors)
        with registry.store.lock:
            current = registry.store.get(rt.storage_key, "", name)
            if current is None:
                raise not_found(rt.resource, rt.group, name)
            meta = current["metadata"]
            options = json_copy(options)
            preconditions = dict(options.get("preconditions") or {})
            # "ensure we have a UID precondition"
            if preconditions.get("uid") is None:
                preconditions["uid"] = meta.get("uid")
            elif preconditions["uid"] != meta.get("uid"):
                raise conflict(rt.resource, rt.group, name,
                               f"Precondition failed: UID in precondition: {preconditions['uid']}, "
                               f"UID in object meta: {meta.get('uid')}")
            rv = preconditions.get("resourceVersion")
            if rv is not None and rv != meta.get("resourceVersion"):
                raise conflict(rt.resource, rt.group, name,
                               f"Precondition failed: ResourceVersion in precondition: {rv}, "
                               f"ResourceVersion in object meta: {meta.get('resourceVersion')}")
            options["preconditions"] = preconditions
            if not meta.get("deletionTimestamp"):
                # upon the first request to delete, switch the phase to start namespace termination
                updated = json_copy(current)
                umeta = updated["metadata"]
                umeta["deletionTimestamp"] = now_rfc3339()
                updated.setdefault("status", {})["phase"] = "Terminating"
                current_finalizers = list(umeta.get("finalizers") or [])
                should_have = {"orphan": _namespace_should_orphan(options, "orphan" in current_finalizers),
                               "foregroundDeletion": _namespace_should_foreground(
                                   options, "foregroundDeletion" in current_finalizers)}
                if any((f in current_finalizers) != want for f, want in should_have.items()):
                    finalizers = [f for f in current_finalizers if f not in should_have]
                    finalizers += [f for f in ("orphan", "foregroundDeletion") if should_have[f]]
                    if finalizers:
                        umeta["finalizers"] = finalizers
                    else:
                        umeta.pop("finalizers", None)
                if dry_run:
                    return 200, registry.present(rt, updated)
                return 200, registry.present(rt, registry.store.put(rt.storage_key, "", name, updated))
            # prior to final deletion, spec.finalizers must be empty
            if (current.get("spec") or {}).get("finalizers"):
                return 200, registry.present(rt, current)
        return registry.generic_delete(rt, namespace, name, options, dry_run)


def _namespace_should_orphan(options: dict, have: bool) -> bool:
    # storage.go shouldHaveOrphanFinalizer
    if options.get("orphanDependents") is not None:
        return bool(options["orphanDependents"])
    if options.get("propagationPolicy") is not None:
        return options["propagationPolicy"] == "Orphan"
    return have


def _namespace_should_foreground(options: dict, have: bool) -> bool:
    # storage.go shouldHaveDeleteDependentsFinalizer
    if options.get("orphanDependents") is not None:
        return options["orphanDependents"] is False
    if options.get("propagationPolicy") is not None:
        return options["propagationPolicy"] == "Foreground"
    return have
