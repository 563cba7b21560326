"""The generic registry: create, get, list, update, patch, delete, deletecollection and watch with
upstream's semantics, for every resource type, parameterised by the type's strategy.

Follows k8s.io/apiserver/pkg/registry/generic/registry/store.go (Create, Update,
ShouldDeleteDuringUpdate, Delete, updateForGracefulDeletionAndFinalizers, markAsDeleting,
deletionFinalizersForGarbageCollection, shouldOrphanDependents, shouldDeleteDependents,
DeleteCollection, finalizeDelete) and pkg/registry/rest (BeforeCreate, BeforeUpdate, BeforeDelete),
as of Kubernetes v1.34.

Admission (`Registry.admission`, labkit.apiserver.admission) runs where upstream's handlers
and store run it: the mutating phase before BeforeCreate / BeforeUpdate, the validating phase
after the strategy's validation and before the write, both on the stored object before a delete.
"""

from __future__ import annotations

import dataclasses
import json
import secrets
import time
import uuid
from dataclasses import dataclass, field as dc_field
from typing import Callable

from labkit.apiserver import defaults, fieldmanager, models, patch as patches, schema
from labkit.apiserver.admission import Attributes
from labkit.apiserver.admission.plugins import IMMORTAL_NAMESPACES, default_chain  # noqa: F401 (re-exported)
from labkit.apiserver.errors import (OPTIMISTIC_LOCK_MESSAGE, ApiError, already_exists, bad_request, conflict,
                                     expired, field_forbidden, field_invalid, field_required, field_unsupported,
                                     internal, invalid, invalid_request, not_found, unsupported_media_type)
from labkit.apiserver.registry.catalog import builtin_types, custom_resource_types
from labkit.apiserver.resources import ORPHAN_DEPENDENTS, UNSUPPORTED, Catalog, ResourceType, Strategy
from labkit.apiserver.selectors import FieldSelector, LabelSelector
from labkit.apiserver.timestamps import now_rfc3339
from labkit.apiserver.storage import ADDED, DELETED, MODIFIED, Compacted, Event, Store
from labkit.apiserver.trace import Trace
from labkit.apiserver.validation import (path_segment_problems, validate_delete_options, validate_object_meta,
                                         validate_object_meta_update)
from labkit.gojson import value_type
from labkit.jsondata import json_copy

GENERATE_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def _parse_rfc3339(value: str) -> float:
    import calendar
    return calendar.timegm(time.strptime(value[:19], "%Y-%m-%dT%H:%M:%S"))


@dataclass
class WriteOptions:
    """The options of a create, update or patch (CreateOptions, UpdateOptions, PatchOptions from
    the query) and the warnings the request collects for its answer."""
    dry_run: bool = False
    field_validation: str = "Warn"         # Strict | Warn | Ignore (upstream's default: Warn)
    field_manager: str | None = None
    force: bool = False
    user_agent: str = ""
    warnings: list[str] = dc_field(default_factory=list)
    # what admission sees of the request: the user (authenticated or impersonated), the options
    # object (CreateOptions, UpdateOptions or DeleteOptions) and the trace its plugins write to
    user: object = None
    admission_options: dict | None = None
    trace: Trace = dc_field(default_factory=Trace)
    deadline: float | None = None      # the request's (filters/deadline.py): admission waits no longer
    # the request's object as decoded and defaulted, in its version: what the audit logs as the
    # requestObject of a create or update (audit.LogRequestObject after the decoder)
    decoded: dict | None = None

    @property
    def manager(self) -> str:
        return fieldmanager.manager_name(self.field_manager, self.user_agent)


# the autoscaling/v1 Scale of every scale subresource, decoded as a kind of its own
SCALE = ResourceType("autoscaling", "v1", "scale", "Scale", True, Strategy())


class Registry:
    def __init__(self, store: Store):
        self.store = store
        self.catalog = Catalog()
        for rt in builtin_types():
            self.catalog.add(rt)
        self.admission = default_chain(self)
        # checks a kind's storage makes of the request before validation, after admission
        # (e.g. RBAC's policybased storage: escalation.py): guard(operation, rt, obj, old)
        self.write_guards: list[Callable[[str, ResourceType, dict, dict | None], None]] = []
        self._crd_types: dict[str, list[ResourceType]] = {}
        crd_rt = self.catalog.lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        for crd in self.store.list(crd_rt.storage_key)[0]:
            self._serve_crd(crd)
        self.store.add_listener(self._on_event)

    # -- helpers --------------------------------------------------------------------------------
    @staticmethod
    def scope(rt: ResourceType, namespace: str | None) -> str:
        return (namespace or "") if rt.namespaced else ""

    @staticmethod
    def present(rt: ResourceType, obj: dict) -> dict:
        """The object as the requested group/version shows it: converted from the stored version
        where the kinds differ, else (custom resources of several versions, stored as written and
        converted with the `None` strategy) only relabelled."""
        if rt.from_storage is not None:
            return rt.from_storage(obj)
        if obj.get("apiVersion") == rt.api_version and obj.get("kind") == rt.kind:
            return obj
        return {**obj, "apiVersion": rt.api_version, "kind": rt.kind}

    @staticmethod
    def check_name_parameter(name: str) -> None:
        if not name:
            raise bad_request("Name parameter required.")
        problems = path_segment_problems(name)
        if problems:
            raise bad_request(f"Name parameter invalid: {json.dumps(name)}: {';'.join(problems)}")

    def decode(self, rt: ResourceType, body, namespace: str | None, options: "WriteOptions") -> dict:
        """What the decoder of a request body does: check it is an object of the endpoint's kind,
        decode it into the kind's type (type errors: 400; unknown fields dropped, refused or
        warned about as fieldValidation says), then apply the kind's defaults."""
        if not isinstance(body, dict):
            raise bad_request(f"{rt.kind} in version \"{rt.version}\" cannot be handled as a {rt.kind}: "
                              "the body is not a JSON object")
        self._check_type_meta(rt, body)
        try:
            obj, unknown = self._typed(rt, body)
        except models.DecodeError as exc:
            raise bad_request(f"{rt.kind} in version \"{rt.version}\" cannot be handled as a {rt.kind}: {exc}")
        if unknown:
            fields = ", ".join(f'unknown field "{f}"' for f in unknown)
            if options.field_validation == "Strict":
                raise bad_request(f"{rt.kind} in version \"{rt.version}\" cannot be handled as a {rt.kind}: "
                                  f"strict decoding error: {fields}")
            if options.field_validation == "Warn":
                options.warnings += [f'unknown field "{f}"' for f in unknown]
        obj = self._finish_decode(rt, obj, namespace)
        options.decoded = self.present(rt, json_copy(obj))
        return obj

    def decode_patched(self, rt: ResourceType, patched, namespace: str | None, options: "WriteOptions",
                       shown: str) -> dict:
        """Decoding of a patched object (handlers/patch.go): type errors and, with
        fieldValidation Strict, unknown fields are 422 errors of the field `patch`."""
        if not isinstance(patched, dict):
            raise invalid_request()
        self._check_type_meta(rt, patched)
        try:
            obj, unknown = self._typed(rt, patched)
        except models.DecodeError as exc:
            raise invalid("", "", "", [field_invalid("patch", shown, str(exc))])
        if unknown:
            fields = ", ".join(f'unknown field "{f}"' for f in unknown)
            if options.field_validation == "Strict":
                raise invalid("", "", "", [field_invalid("patch", shown, f"strict decoding error: {fields}")])
            if options.field_validation == "Warn":
                options.warnings += [f'unknown field "{f}"' for f in unknown]
        return self._finish_decode(rt, obj, namespace)

    @staticmethod
    def _check_type_meta(rt: ResourceType, body: dict) -> None:
        api_version, kind = body.get("apiVersion"), body.get("kind")
        if api_version is not None and api_version != rt.api_version:
            raise bad_request(f"the API version in the data ({api_version}) does not match the expected API "
                              f"version ({rt.api_version})")
        if kind is not None and kind != rt.kind:
            raise bad_request(f"{rt.kind} in version \"{rt.version}\" cannot be handled as a {rt.kind}: "
                              f"the object provided is unrecognized (must be of type {rt.kind})")

    @staticmethod
    def _typed(rt: ResourceType, body: dict) -> tuple[dict, list[str]]:
        decoder = models.Decoder()
        if rt.model is not None:
            obj = decoder.object(rt.model, body)
        else:       # custom resources: typed metadata, the rest pruned to the CRD's schema
            obj = json_copy(body)
            meta = obj.get("metadata")
            obj["metadata"] = decoder.object("V1ObjectMeta", meta, "metadata", rt.kind) if meta is not None else {}
            obj = rt.strategy.prune(obj, decoder.unknown)
        return obj, decoder.unknown

    @staticmethod
    def _finish_decode(rt: ResourceType, obj: dict, namespace: str | None) -> dict:
        obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind
        meta = obj.setdefault("metadata", {})
        if rt.model is not None:
            defaults.apply(rt.model, obj)
        else:
            rt.strategy.default(obj)
        if rt.to_storage is not None:
            obj = rt.to_storage(obj)
            defaults.apply(rt.storage_model, obj)
            meta = obj["metadata"]
        rt.strategy.normalize(obj)
        if rt.namespaced and namespace and meta.get("namespace") and meta["namespace"] != namespace:
            raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
        return obj

    def _attributes(self, operation: str, rt: ResourceType, namespace: str | None, name: str, obj: dict | None,
                    old: dict | None, options: "WriteOptions", subresource: str = "") -> Attributes:
        """The admission attributes of a write (handlers/create.go, update.go, patch.go, delete.go).
        Their namespace is the request's (handlers/namer.go ContextBasedNaming.Name:
        requestInfo.Namespace), which for /api/v1/namespaces/NAME[/SUBRESOURCE] is NAME: a request
        about a namespace carries its own name ("the namespace object has the namespace of itself",
        policy/generic/policy_dispatcher.go); a creation of one (POST /api/v1/namespaces) none."""
        if (rt.group, rt.resource) == ("", "namespaces") and operation != "CREATE":
            namespace = name
        return Attributes(operation, rt, namespace or "", name, obj, old, subresource, None, options.dry_run,
                          options.admission_options, options.user, options.trace, options.warnings,
                          deadline=options.deadline)

    def redecode(self, rt: ResourceType, obj: dict) -> dict:
        """A mutating webhook's patched object decoded and defaulted again (the dispatcher's
        Decode and Default): stays in the request's version."""
        try:
            typed, _ = self._typed(rt, obj)
        except models.DecodeError as exc:
            raise internal(str(exc))
        typed["apiVersion"], typed["kind"] = rt.api_version, rt.kind
        typed.setdefault("metadata", {})
        if rt.model is not None:
            defaults.apply(rt.model, typed)
        else:
            rt.strategy.default(typed)
        return typed

    # -- reads -------------------------------------------------------------------------------------
    def get(self, rt: ResourceType, namespace: str | None, name: str) -> dict:
        self.check_name_parameter(name)
        obj = self.store.get(rt.storage_key, self.scope(rt, namespace), name)
        if obj is None:
            raise not_found(rt.resource, rt.group, name)
        return self.present(rt, obj)

    def selectors(self, rt: ResourceType, label_selector: str | None, field_selector: str | None):
        labels = LabelSelector.parse(label_selector)
        fields = FieldSelector.parse(field_selector)
        fields.check_supported({"metadata.name", "metadata.namespace", *rt.strategy.field_labels})
        return labels, fields

    def matcher(self, rt: ResourceType, labels: LabelSelector, fields: FieldSelector):
        strategy = rt.strategy
        if labels.empty and fields.empty:
            return lambda obj: True
        return lambda obj: labels.matches(obj.get("metadata", {}).get("labels")) and fields.matches(strategy.fields(obj))

    def list(self, rt: ResourceType, namespace: str | None, label_selector: str | None = None,
             field_selector: str | None = None) -> tuple[list[dict], int]:
        items, rev, _, _ = self.list_page(rt, namespace, label_selector, field_selector)
        return items, rev

    def list_page(self, rt: ResourceType, namespace: str | None, label_selector: str | None = None,
                  field_selector: str | None = None, limit: int = 0, continue_token: str | None = None,
                  resource_version: str | None = None, match: str | None = None) -> tuple[list[dict], int, str, int]:
        """(items, resourceVersion, continue token, remaining item count), as the etcd3 store
        lists: the latest state, or the one at an exact resourceVersion (resourceVersionMatch
        Exact), or at the revision of a continue token, so that pages read one snapshot; a
        revision older than the history kept answers 410 Expired."""
        labels, fields = self.selectors(rt, label_selector, field_selector)
        accept = self.matcher(rt, labels, fields)
        _validate_list_options(resource_version, match, continue_token)
        current = self.store.revision
        requested = _parse_resource_version(resource_version) if resource_version else None
        at, after = None, None
        if continue_token:
            if requested:
                raise bad_request("specifying resource version is not allowed when using continue")
            at, after = _decode_continue(continue_token)
            if at == -1:            # the token of a compacted list: go on at the latest revision
                at = None
        elif requested and (match == "Exact" or requested > current):
            if requested > current:
                raise _too_large(requested, current)
            at = requested
        scope = self.scope(rt, namespace) if rt.namespaced and namespace else None
        try:
            entries, rev = self.store.scan(rt.storage_key, scope, after, at)
        except Compacted:
            if not continue_token:
                raise expired("The resourceVersion for the provided list is too old.")
            error = expired(INCONSISTENT_CONTINUE)
            error.list_continue = _encode_continue(-1, after)
            raise error
        items: list[dict] = []
        token, remaining, items_key = "", 0, None
        for i, (key, shared, text) in enumerate(entries):
            if not accept(shared):
                continue
            if limit and len(items) == limit:
                remaining = sum(1 for _, obj, _ in entries[i:] if accept(obj))
                token = _encode_continue(rev, items_key)
                break
            items.append(self.present(rt, json.loads(text)))
            items_key = key
        return items, rev, token, remaining

    # -- create ------------------------------------------------------------------------------------
    def create(self, rt: ResourceType, namespace: str | None, body, options: "WriteOptions | None" = None) -> dict:
        options = options or WriteOptions()
        return self.create_decoded(rt, namespace, self.decode(rt, body, namespace, options), options)

    def create_decoded(self, rt: ResourceType, namespace: str | None, obj: dict, options: "WriteOptions",
                       tracked: bool = False) -> dict:
        meta = obj["metadata"]
        if meta.get("resourceVersion"):
            raise bad_request("resourceVersion should not be set on objects to be created")
        if not tracked:
            self._track(rt, "", None, obj, options)
        if rt.namespaced:
            meta["namespace"] = namespace or meta.get("namespace") or ""
        attrs = self._attributes("CREATE", rt, meta.get("namespace", ""), meta.get("name", ""), None, None, options)
        obj = self._mutating_admission(rt, attrs, obj)
        meta = obj["metadata"]
        for guard in self.write_guards:
            guard("CREATE", rt, obj, None)
        if meta.get("name") or not meta.get("generateName"):
            return self._create_one(rt, obj, options.dry_run, attrs)
        last_error = None
        for _ in range(8):      # createWithGenerateNameRetry
            candidate = json_copy(obj)
            candidate["metadata"]["name"] = meta["generateName"] + "".join(
                secrets.choice(GENERATE_NAME_ALPHABET) for _ in range(5))
            try:
                return self._create_one(rt, candidate, options.dry_run, attrs)
            except ApiError as exc:
                if exc.reason != "AlreadyExists":
                    raise
                last_error = exc
        raise last_error

    def _mutating_admission(self, rt: ResourceType, attrs: Attributes, obj: dict) -> dict:
        """The mutating phase on `obj` (stored form): admission sees it in the request's version."""
        attrs.obj = self.present(rt, obj) if rt.to_storage is not None else obj
        self.admission.admit(attrs)
        if rt.to_storage is None:
            return attrs.obj
        obj = rt.to_storage(attrs.obj)
        defaults.apply(rt.storage_model, obj)
        return obj

    def admit_unstored(self, rt: ResourceType, namespace: str | None, obj: dict, options: "WriteOptions"):
        """Admission of a create that is answered and never stored (the reviews): the mutating
        phase now, and the validating phase as a function of the final object."""
        attrs = self._attributes("CREATE", rt, namespace, (obj.get("metadata") or {}).get("name", ""), obj, None,
                                 options)
        self.admission.admit(attrs)

        def validate(final: dict) -> None:
            attrs.obj = final
            self.admission.validate(attrs)
        return attrs.obj, validate

    def admit_subresource_create(self, rt: ResourceType, namespace: str | None, name: str, obj: dict,
                                 subresource: str, kind: tuple[str, str, str], options: "WriteOptions") -> dict:
        """A create that a subresource's REST answers (pods/binding, the legacy bindings,
        serviceaccounts/token): the create handler's mutating admission, then the REST's
        createValidation (pkg/registry/core/pod/storage/storage.go BindingREST.Create and
        LegacyBindingREST, pkg/registry/core/serviceaccount/storage/token.go TokenREST.Create).
        NamespaceLifecycle thus refuses a binding or a token in a namespace being terminated."""
        attrs = self._attributes("CREATE", rt, namespace, name, obj, None, options, subresource)
        attrs.kind = kind
        self.admission.admit(attrs)
        self.admission.validate(attrs)
        return attrs.obj

    def _validating_admission(self, rt: ResourceType, attrs: Attributes, obj: dict) -> None:
        attrs.obj = self.present(rt, json_copy(obj))
        if not attrs.name and attrs.operation == "CREATE":
            # rest.AdmissionToValidateObjectFunc: "in case the generated name is populated", the
            # validating phase names the object by the name generateName gave it
            attrs = dataclasses.replace(attrs, name=obj["metadata"].get("name", ""))
        self.admission.validate(attrs)

    def _create_one(self, rt: ResourceType, obj: dict, dry_run: bool, attrs: Attributes) -> dict:
        # BeginCreate (a Service's node ports) runs before BeforeCreate; its finish function when
        # the create is over, stored or not
        finish = rt.strategy.begin_create(self, rt, obj)
        try:
            return self._create_begun(rt, obj, dry_run, attrs)
        finally:
            if finish is not None:
                finish()

    def _create_begun(self, rt: ResourceType, obj: dict, dry_run: bool, attrs: Attributes) -> dict:
        meta = obj["metadata"]
        # FillObjectMetaSystemFields + BeforeCreate
        meta["creationTimestamp"] = now_rfc3339()
        meta["uid"] = str(uuid.uuid4())
        for key in ("selfLink", "deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(key, None)
        if not rt.namespaced:
            meta.pop("namespace", None)
        meta.pop("generation", None)
        rt.strategy.prepare_for_create(obj)
        self._default_stored(rt, obj)
        _drop_empty_meta(obj)
        errors = validate_object_meta(meta, rt.namespaced, rt.strategy.name_problems,
                                      rt.strategy.standard_finalizer_names)
        errors += rt.strategy.validate(obj)
        name = meta.get("name", "")
        if errors:
            raise invalid(rt.kind, rt.group, name, errors)
        self._validating_admission(rt, attrs, obj)     # rest.AdmissionToValidateObjectFunc
        scope = self.scope(rt, meta.get("namespace"))
        with self.store.lock:
            existing = self.store.get(rt.storage_key, scope, name)
            if existing is not None:
                raise already_exists(rt.resource, rt.group, name,
                                     deleting=bool(existing["metadata"].get("deletionTimestamp")))
            if dry_run:
                return obj
            return self.present(rt, self.store.put(rt.storage_key, scope, name, obj))

    def bind(self, namespace: str, name: str, body, dry_run: bool = False) -> dict:
        """POST pods/<name>/binding: assign the pod to a node (what the scheduler does)."""
        rt = self.catalog.lookup("", "v1", "pods")
        if not isinstance(body, dict) or not isinstance(body.get("target"), dict) or not body["target"].get("name"):
            raise invalid("Binding", "", name, [field_required("target.name")])
        node = body["target"]["name"]
        with self.store.lock:
            pod = self.store.get(rt.storage_key, namespace, name)
            if pod is None:
                raise not_found("pods", "", name)
            if pod["metadata"].get("deletionTimestamp"):
                raise conflict("pods/binding", "", name, f"pod {name} is being deleted, cannot be assigned to a host")
            if (pod.get("spec") or {}).get("nodeName"):
                raise conflict("pods/binding", "", name,
                               f"pod {name} is already assigned to node \"{pod['spec']['nodeName']}\"")
            pod.setdefault("spec", {})["nodeName"] = node
            if not dry_run:
                self.store.put(rt.storage_key, namespace, name, pod)
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}

    # -- update and patch --------------------------------------------------------------------------
    def update(self, rt: ResourceType, namespace: str | None, name: str, body, subresource: str = "",
               options: "WriteOptions | None" = None) -> dict:
        options = options or WriteOptions()
        self.check_name_parameter(name)
        if subresource == "scale":
            return self._update_scale(rt, namespace, name, self.decode(SCALE, body, namespace, options), options)
        obj = self.decode(rt, body, namespace, options)
        if obj["metadata"].get("name", "") != name:
            raise bad_request(f"the name of the object ({obj['metadata'].get('name', '')}) does not match the name "
                              f"on the URL ({name})")
        with self.store.lock:
            old = self.store.get(rt.storage_key, self.scope(rt, namespace), name)
            if old is None:
                raise not_found(rt.resource, rt.group, name)
            self._track(rt, subresource, self.present(rt, old), obj, options)
            return self._update(rt, namespace, name, obj, old, subresource, options)

    def patch(self, rt: ResourceType, namespace: str | None, name: str, patch_type: str, body: bytes,
              subresource: str = "", options: "WriteOptions | None" = None) -> tuple[int, dict]:
        """Returns (HTTP code, object): 201 when a server-side apply created the object."""
        options = options or WriteOptions()
        self.check_name_parameter(name)
        if patch_type == patches.STRATEGIC_MERGE_PATCH and not rt.strategy.strategic_merge_patch:
            raise unsupported_media_type(patch_type, [patches.JSON_PATCH, patches.MERGE_PATCH, patches.APPLY_PATCH])
        if patch_type == patches.APPLY_PATCH and not options.field_manager:
            raise invalid("PatchOptions", "meta.k8s.io", "",
                          [field_required("fieldManager", "is required for apply patch")])
        decoded = patches.decode_patch_body(patch_type, body)
        with self.store.lock:
            old = self.store.get(rt.storage_key, self.scope(rt, namespace), name)
            if old is None:
                if patch_type == patches.APPLY_PATCH and not subresource:
                    return 201, self._apply(rt, namespace, name, decoded, None, "", options)
                raise not_found(rt.resource, rt.group, name)
            if subresource == "scale":
                scale = rt.strategy.subresource("scale").scale_of(self.present(rt, old))
                kind = patches.MERGE_PATCH if patch_type == patches.APPLY_PATCH else patch_type
                patched = patches.apply_patch(kind, scale, decoded)
                shown = patches.go_format(decoded) if patch_type == patches.STRATEGIC_MERGE_PATCH else \
                    json.dumps(patched, separators=(",", ":"))
                return 200, self._update_scale(rt, namespace, name,
                                               self.decode_patched(SCALE, patched, namespace, options, shown), options)
            if patch_type == patches.APPLY_PATCH:
                return 200, self._apply(rt, namespace, name, decoded, old, subresource, options)
            current = json_copy(self.present(rt, old))
            patched = patches.apply_patch(patch_type, current, decoded, self.schema_root(rt))
            shown = patches.go_format(decoded) if patch_type == patches.STRATEGIC_MERGE_PATCH else \
                json.dumps(patched, separators=(",", ":"))
            obj = self.decode_patched(rt, patched, namespace, options, shown)
            if obj["metadata"].get("name") != name:
                raise bad_request(f"the name of the object ({obj['metadata'].get('name')}) does not match the name "
                                  f"on the URL ({name})")
            self._track(rt, subresource, self.present(rt, old), obj, options)
            return 200, self._update(rt, namespace, name, obj, old, subresource, options)

    # -- field management ----------------------------------------------------------------------------
    def schema_root(self, rt: ResourceType) -> schema.Node:
        return rt.strategy.schema_root(rt)

    @staticmethod
    def _reset_fields(rt: ResourceType, subresource: str) -> fieldmanager.FieldSet:
        """ResetFieldsFor: what an endpoint's strategy overwrites, so nobody owns it there."""
        if not subresource:
            return fieldmanager.fields_of(["status"] if rt.strategy.has_status() else [])
        sub = rt.strategy.subresource(subresource)
        if getattr(sub, "status_only", False):
            return fieldmanager.fields_of(["spec"])
        return fieldmanager.fields_of(getattr(sub, "keeps", ()))

    def _field_manager(self, rt: ResourceType, subresource: str, options: "WriteOptions") -> fieldmanager.FieldManager:
        return fieldmanager.FieldManager(self.schema_root(rt), options.manager, rt.api_version, subresource,
                                         self._reset_fields(rt, subresource))

    def _track(self, rt: ResourceType, subresource: str, old: dict | None, new: dict, options: "WriteOptions") -> None:
        """FieldManager.Update: set new's managedFields for this update from `old` (None: a create).
        Managed fields in the request replace the stored ones (not on subresources)."""
        requested = new["metadata"].pop("managedFields", None)
        stored = (old or {}).get("metadata", {}).get("managedFields")
        managers = fieldmanager.decode_managed(requested if requested and not subresource else stored)
        live = _without_managed(old) if old is not None else None
        entries = self._field_manager(rt, subresource, options).update(live, new, managers)
        if entries:
            new["metadata"]["managedFields"] = entries

    def _apply(self, rt: ResourceType, namespace: str | None, name: str, config, old: dict | None, subresource: str,
               options: "WriteOptions") -> dict:
        """Server-side apply (FieldManager.Apply): the configuration merged into the live object
        with field ownership; a create when there is no object."""
        config = self._apply_config(rt, config, name)
        live = self.present(rt, old) if old is not None else None
        managers = fieldmanager.decode_managed((live or {}).get("metadata", {}).get("managedFields"))
        rv = config["metadata"].get("resourceVersion")
        if rv and live is not None and rv != live["metadata"].get("resourceVersion"):
            raise conflict(rt.resource, rt.group, name, OPTIMISTIC_LOCK_MESSAGE)
        try:
            merged, entries = self._field_manager(rt, subresource, options).apply(
                _without_managed(live) if live is not None else None, config, managers, options.force)
        except fieldmanager.Conflict as exc:
            raise ApiError(409, "Conflict", exc.message(), {"causes": exc.causes()})
        merged["apiVersion"], merged["kind"] = rt.api_version, rt.kind
        merged.setdefault("metadata", {})["name"] = name
        if live is None:
            if options.admission_options is not None:     # patchToCreateOptions
                options.admission_options = dict(options.admission_options, kind="CreateOptions")
            obj = self.decode(rt, merged, namespace, options)
            obj["metadata"]["managedFields"] = entries
            return self.create_decoded(rt, namespace, obj, options, tracked=True)
        obj = self.decode_patched(rt, merged, namespace, options, json.dumps(merged, separators=(",", ":")))
        obj["metadata"]["managedFields"] = entries
        return self._update(rt, namespace, name, obj, old, subresource, options)

    def _apply_config(self, rt: ResourceType, config, name: str) -> dict:
        """The applied configuration, typed: a field the kind does not have is refused as
        structured-merge-diff refuses it."""
        if not isinstance(config.get("metadata", {}), dict):
            raise bad_request("metadata must be an object")
        meta = config.get("metadata") or {}
        if meta.get("managedFields") is not None:
            raise bad_request("metadata.managedFields must be nil")
        if meta.get("name") and meta["name"] != name:
            raise bad_request(f"the name of the object ({meta['name']}) does not match the name on the URL ({name})")
        try:
            typed, unknown = self._typed(rt, config)
        except models.DecodeError as exc:
            raise bad_request(f"failed to create typed patch object ({rt.api_version}, Kind={rt.kind}): {exc}")
        if unknown:
            raise bad_request(f"failed to create typed patch object ({rt.api_version}, Kind={rt.kind}): "
                              f".{unknown[0]}: field not declared in schema")
        typed.setdefault("metadata", {})
        for key in ("apiVersion", "kind"):
            typed.pop(key, None)
        return typed

    @staticmethod
    def _default_stored(rt: ResourceType, obj: dict) -> None:
        """The defaults again after the strategy: kube-apiserver applies them when it decodes what
        it reads from etcd, so what a strategy reset (a status) reads back defaulted."""
        if rt.storage_model is not None:
            defaults.apply(rt.storage_model, obj)
        elif not rt.strategy.builtin:
            rt.strategy.default(obj)

    def get_scale(self, rt: ResourceType, namespace: str | None, name: str) -> dict:
        return rt.strategy.subresource("scale").scale_of(self.get(rt, namespace, name))

    def _update_scale(self, rt: ResourceType, namespace: str | None, name: str, scale: dict,
                      options: "WriteOptions") -> dict:
        """ScaleREST.Update: the Scale's replicas into the object (its resourceVersion, if any, as
        precondition), then a normal update of the object."""
        sub = rt.strategy.subresource("scale")
        if scale["metadata"].get("name", "") != name:
            raise bad_request(f"the name of the object ({scale['metadata'].get('name', '')}) does not match the name "
                              f"on the URL ({name})")
        replicas = (scale.get("spec") or {}).get("replicas", 0)
        if replicas < 0:
            raise invalid("Scale", "autoscaling", name,
                          [field_invalid("spec.replicas", replicas, "must be greater than or equal to 0")])
        with self.store.lock:
            old = self.store.get(rt.storage_key, self.scope(rt, namespace), name)
            if old is None:
                raise not_found(rt.resource, rt.group, name)
            rv = scale["metadata"].get("resourceVersion")
            if rv and rv != old["metadata"].get("resourceVersion"):
                raise conflict(rt.resource, rt.group, name, OPTIMISTIC_LOCK_MESSAGE)
            # admission sees the Scale (handlers/update.go with the scale endpoint's kind), its
            # validating phase the Scale of the updated object (scaleUpdatedObjectInfo)
            attrs = self._attributes("UPDATE", rt, old["metadata"].get("namespace", ""), name, scale,
                                     sub.scale_of(self.present(rt, old)), options, "scale")
            attrs.kind = ("autoscaling", "v1", "Scale")
            self.admission.admit(attrs)
            replicas = (attrs.obj.get("spec") or {}).get("replicas", 0)
            new = sub.set_replicas(self.present(rt, old), replicas)
            self._track(rt, "scale", self.present(rt, old), new, options)

            def validate_scale(updated: dict) -> None:
                attrs.obj = sub.scale_of(self.present(rt, json_copy(updated)))
                self.admission.validate(attrs)
            return sub.scale_of(self._update(rt, namespace, name, new, old, "", options, validate_scale))

    def _update(self, rt, namespace, name, obj, old, subresource, options: "WriteOptions",
                validate_scale: Callable[[dict], None] | None = None) -> dict:
        strategy = rt.strategy
        old_meta = old["metadata"]
        attrs = None
        if validate_scale is None:
            # mutating admission runs on the updated object, before the strategy (rest.Update's objInfo)
            attrs = self._attributes("UPDATE", rt, old_meta.get("namespace", ""), name, None,
                                     self.present(rt, json_copy(old)), options, subresource)
            obj = self._mutating_admission(rt, attrs, obj)
        for guard in self.write_guards:
            guard("UPDATE", rt, obj, old)
        new_rv = obj["metadata"].get("resourceVersion")
        if not new_rv:
            if not strategy.allow_unconditional_update:
                raise invalid(rt.resource, rt.group, name,
                              [field_invalid("metadata.resourceVersion", 0, "must be specified for an update")])
            obj["metadata"]["resourceVersion"] = old_meta.get("resourceVersion")
        elif new_rv != old_meta.get("resourceVersion"):
            raise conflict(rt.resource, rt.group, name, OPTIMISTIC_LOCK_MESSAGE)
        # BeforeUpdate: generation, uid, creation and deletion timestamps are not the client's
        obj["metadata"]["generation"] = old_meta.get("generation")
        if obj["metadata"]["generation"] is None:
            obj["metadata"].pop("generation")
        if subresource:
            return self._update_begun(rt, namespace, name, obj, old, subresource, options, validate_scale, attrs)
        finish = strategy.begin_update(self, rt, obj, old)      # BeginUpdate, before BeforeUpdate
        try:
            return self._update_begun(rt, namespace, name, obj, old, subresource, options, validate_scale, attrs)
        finally:
            if finish is not None:
                finish()

    def _update_begun(self, rt, namespace, name, obj, old, subresource, options: "WriteOptions",
                      validate_scale: Callable[[dict], None] | None, attrs) -> dict:
        strategy = rt.strategy
        old_meta = old["metadata"]
        dry_run = options.dry_run
        sub = None
        if subresource:
            sub = strategy.subresource(subresource)
            new = sub.prepare_for_update(obj, old)
        else:
            new = obj
            strategy.prepare_for_update(new, old)
        meta = new["metadata"]
        if rt.namespaced:
            meta["namespace"] = old_meta.get("namespace")
        if not meta.get("uid"):
            meta["uid"] = old_meta.get("uid")
        meta["creationTimestamp"] = old_meta.get("creationTimestamp")
        if old_meta.get("deletionTimestamp"):
            meta["deletionTimestamp"] = old_meta["deletionTimestamp"]
        if old_meta.get("deletionGracePeriodSeconds") is not None and meta.get("deletionGracePeriodSeconds") is None:
            meta["deletionGracePeriodSeconds"] = old_meta["deletionGracePeriodSeconds"]
        meta.pop("selfLink", None)
        errors = validate_object_meta_update(meta, old_meta, rt.namespaced, strategy.standard_finalizer_names)
        errors += sub.validate_update(new, old) if sub else strategy.validate_update(new, old)
        if errors:
            raise invalid(rt.kind, rt.group, name, errors)
        # rest.AdmissionToValidateObjectUpdateFunc: validating admission on the updated object
        if validate_scale is not None:
            validate_scale(new)
        else:
            self._validating_admission(rt, attrs, new)
        scope = self.scope(rt, namespace)
        if self._should_delete_during_update(new, old) and strategy.should_delete_during_update(new, old):
            if not dry_run:
                self.store.delete(rt.storage_key, scope, name)
            return self.present(rt, new)
        self._default_stored(rt, new)
        _drop_empty_meta(new)
        if _same(new, old):
            return self.present(rt, old)
        if dry_run:
            return self.present(rt, new)
        return self.present(rt, self.store.put(rt.storage_key, scope, name, new))

    @staticmethod
    def _should_delete_during_update(new: dict, old: dict) -> bool:
        """ShouldDeleteDuringUpdate: no finalizers left on an object being deleted whose grace
        period (if any) is over."""
        old_meta = old["metadata"]
        if new["metadata"].get("finalizers"):
            return False
        if not old_meta.get("deletionTimestamp"):
            return False
        return not old_meta.get("deletionGracePeriodSeconds")

    # -- delete ------------------------------------------------------------------------------------
    def delete(self, rt: ResourceType, namespace: str | None, name: str, options: dict,
               dry_run: bool = False, caller: "WriteOptions | None" = None, collection: bool = False) -> tuple[int, dict]:
        """Returns (HTTP code, body): the kept object, the deleted object or a Status. `caller`
        carries the requesting user, trace and warnings for admission."""
        self.check_name_parameter(name)
        existing = self.store.get(rt.storage_key, self.scope(rt, namespace), name)
        if existing is None:
            raise not_found(rt.resource, rt.group, name)
        # rest.AdmissionToValidateObjectDeleteFunc: both phases, the stored object as oldObject; the
        # attributes of a delete-collection carry no name (handlers/delete.go, DeleteCollection)
        caller = caller or WriteOptions()
        caller.dry_run = dry_run
        caller.admission_options = {"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1", **options}
        attrs = self._attributes("DELETE", rt, self.scope(rt, namespace), "" if collection else name, None,
                                 self.present(rt, existing), caller)
        self.admission.admit(attrs)
        self.admission.validate(attrs)
        delete = getattr(rt.strategy, "delete", None)
        if delete is not None:
            return delete(self, rt, namespace, name, options, dry_run)
        return self.generic_delete(rt, namespace, name, options, dry_run)

    def generic_delete(self, rt: ResourceType, namespace: str | None, name: str, options: dict,
                       dry_run: bool = False) -> tuple[int, dict]:
        options = json_copy(options)
        scope = self.scope(rt, namespace)
        with self.store.lock:
            obj = self.store.get(rt.storage_key, scope, name)
            if obj is None:
                raise not_found(rt.resource, rt.group, name)
            graceful, pending = self._before_delete(rt, obj, options)
            if pending:
                return self._deleted_code(options, False), self._finalize_delete(rt, obj)
            pending_finalizers = bool(obj["metadata"].get("finalizers"))
            update_finalizers, _ = self._deletion_finalizers(rt, obj, options)
            if graceful or pending_finalizers or update_finalizers:
                # updateForGracefulDeletionAndFinalizers: BeforeDelete again on the stored object
                existing = self.store.get(rt.storage_key, scope, name)
                graceful, pending = self._before_delete(rt, existing, options)
                if pending:
                    return self._deleted_code(options, False), self._finalize_delete(rt, obj)
                changed, finalizers = self._deletion_finalizers(rt, existing, options)
                if changed:
                    if finalizers:
                        existing["metadata"]["finalizers"] = finalizers
                    else:
                        existing["metadata"].pop("finalizers", None)
                pending_finalizers = bool(existing["metadata"].get("finalizers"))
                if not graceful:
                    if pending_finalizers:
                        self._mark_as_deleting(existing)
                        if dry_run or existing == self.store.get(rt.storage_key, scope, name):
                            out = existing      # GuaranteedUpdate writes nothing when nothing changed
                        else:
                            out = self.store.put(rt.storage_key, scope, name, existing)
                        return self._deleted_code(options, False), self.present(rt, out)
                    # errDeleteNow: fall through to the immediate delete
                else:
                    period = options.get("gracePeriodSeconds") or 0
                    out = existing if dry_run else self.store.put(rt.storage_key, scope, name, existing)
                    if pending_finalizers or period > 0:
                        return self._deleted_code(options, False), self.present(rt, out)
            if dry_run:
                return 200, self._finalize_delete(rt, obj)
            deleted = self.store.delete(rt.storage_key, scope, name)
            return 200, self._finalize_delete(rt, deleted)

    @staticmethod
    def _deleted_code(options: dict, deleted: bool) -> int:
        # handlers/delete.go: 202 only when the object stays and orphanDependents=false was asked
        return 202 if not deleted and options.get("orphanDependents") is False else 200

    def _finalize_delete(self, rt: ResourceType, obj: dict) -> dict:
        if rt.strategy.return_deleted_object:
            return self.present(rt, obj)
        details = {"name": obj["metadata"].get("name", ""), "group": rt.group, "kind": rt.resource,
                   "uid": obj["metadata"].get("uid", "")}
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "details": {k: v for k, v in details.items() if v}}

    def _before_delete(self, rt: ResourceType, obj: dict, options: dict) -> tuple[bool, bool]:
        """rest.BeforeDelete: validate options and preconditions; start graceful deletion."""
        errors = validate_delete_options(options)
        if errors:
            raise invalid("DeleteOptions", "meta.k8s.io", "", errors)
        meta = obj["metadata"]
        preconditions = options.get("preconditions") or {}
        uid, rv = preconditions.get("uid"), preconditions.get("resourceVersion")
        if uid is not None and uid != meta.get("uid"):
            raise conflict(rt.kind, rt.group, meta.get("name", ""),
                           f"the UID in the precondition ({uid}) does not match the UID in record ({meta.get('uid')}). "
                           "The object might have been deleted and then recreated")
        if rv is not None and rv != meta.get("resourceVersion"):
            raise conflict(rt.kind, rt.group, meta.get("name", ""),
                           f"the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in "
                           f"record ({meta.get('resourceVersion')}). The object might have been modified")
        if isinstance(options.get("gracePeriodSeconds"), int) and options["gracePeriodSeconds"] < 0:
            options["gracePeriodSeconds"] = 1
        if isinstance(meta.get("deletionGracePeriodSeconds"), int) and meta["deletionGracePeriodSeconds"] < 0:
            meta["deletionGracePeriodSeconds"] = 1
        strategy = rt.strategy
        if not strategy.graceful_deletion:
            return False, False
        if meta.get("deletionTimestamp"):
            current = meta.get("deletionGracePeriodSeconds")
            if not current:
                return False, False
            requested = options.get("gracePeriodSeconds")
            if requested is not None:
                if requested >= current:
                    return False, True
                moved = _parse_rfc3339(meta["deletionTimestamp"]) - current + requested
                meta["deletionTimestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(moved))
                meta["deletionGracePeriodSeconds"] = requested
                return True, False
            options["gracePeriodSeconds"] = current
            return False, True
        if not strategy.check_graceful_delete(obj, options):
            return False, False
        period = options["gracePeriodSeconds"]
        meta["deletionTimestamp"] = now_rfc3339(period)
        meta["deletionGracePeriodSeconds"] = period
        if (meta.get("generation") or 0) > 0:
            meta["generation"] += 1
        return True, False

    @staticmethod
    def _mark_as_deleting(obj: dict) -> None:
        meta = obj["metadata"]
        if not meta.get("deletionTimestamp") and (meta.get("generation") or 0) > 0:
            meta["generation"] += 1
        now = now_rfc3339()
        if not meta.get("deletionTimestamp") or _parse_rfc3339(meta["deletionTimestamp"]) > _parse_rfc3339(now):
            meta["deletionTimestamp"] = now
        meta["deletionGracePeriodSeconds"] = 0

    @staticmethod
    def _deletion_finalizers(rt: ResourceType, obj: dict, options: dict) -> tuple[bool, list[str]]:
        """deletionFinalizersForGarbageCollection: which of `orphan` / `foregroundDeletion` the
        object must carry after this DELETE, and whether that changes its finalizer set."""
        policy = rt.strategy.gc_policy(rt.version)
        current = list(obj["metadata"].get("finalizers") or [])
        orphan_opt = options.get("orphanDependents")
        propagation = options.get("propagationPolicy")

        def existing_choice(first: str) -> bool | None:
            for f in current:
                if f == "orphan":
                    return first == "orphan"
                if f == "foregroundDeletion":
                    return first == "foregroundDeletion"
            return None

        if policy == UNSUPPORTED:
            should_orphan = should_foreground = False
        else:
            if orphan_opt is not None:
                should_orphan = bool(orphan_opt)
            elif propagation is not None:
                should_orphan = propagation == "Orphan"
            else:
                choice = existing_choice("orphan")
                should_orphan = choice if choice is not None else policy == ORPHAN_DEPENDENTS
            if orphan_opt is not None:
                should_foreground = False
            elif propagation is not None:
                should_foreground = propagation == "Foreground"
            else:
                choice = existing_choice("foregroundDeletion")
                should_foreground = bool(choice)
        new = [f for f in current if f not in ("orphan", "foregroundDeletion")]
        if should_orphan:
            new.append("orphan")
        if should_foreground:
            new.append("foregroundDeletion")
        if set(new) == set(current):
            return False, current
        return True, new

    def delete_collection(self, rt: ResourceType, namespace: str | None, options: dict,
                          label_selector: str | None, field_selector: str | None,
                          dry_run: bool = False, caller: "WriteOptions | None" = None) -> dict:
        items, rev = self.list(rt, namespace, label_selector, field_selector)
        for item in items:
            meta = item["metadata"]
            try:
                self.delete(rt, meta.get("namespace"), meta["name"], json_copy(options), dry_run, caller,
                            collection=True)
            except ApiError as exc:
                if exc.code != 404:
                    raise
        return {"kind": rt.list_kind, "apiVersion": rt.api_version, "metadata": {"resourceVersion": str(rev)},
                "items": items}

    # -- watch -------------------------------------------------------------------------------------
    def watch(self, rt: ResourceType, namespace: str | None, resource_version: str | None,
              label_selector: str | None = None, field_selector: str | None = None):
        """(watcher, initial objects). A resourceVersion of "" or "0" starts with synthetic ADDED
        events for the current objects; any other value replays the changes after it."""
        labels, fields = self.selectors(rt, label_selector, field_selector)
        match = self.matcher(rt, labels, fields)
        since = None
        if resource_version not in (None, "", "0"):
            try:
                since = int(resource_version)
            except ValueError:
                raise bad_request(f"invalid resource version: {resource_version}")

        def accept(event: Event):
            new_ok = event.type != DELETED and match(event.obj)
            if event.type == DELETED:
                return (DELETED, event.obj) if match(event.obj) else None
            if event.type == ADDED:
                return (ADDED, event.obj) if new_ok else None
            old_ok = event.old is not None and match(event.old)
            if new_ok:
                return (MODIFIED if old_ok else ADDED, event.obj)
            if old_ok:
                last = json_copy(event.old)
                last["metadata"]["resourceVersion"] = str(event.rev)
                return DELETED, last
            return None

        scope = self.scope(rt, namespace) if rt.namespaced and namespace else None
        watcher, initial = self.store.watch(rt.storage_key, scope, since, accept)
        return watcher, [o for o in initial if match(o)]

    # -- custom resource definitions -------------------------------------------------------------
    def _serve_crd(self, crd: dict) -> None:
        name = crd["metadata"]["name"]
        for rt in self._crd_types.pop(name, []):
            self.catalog.remove(rt.group, rt.version, rt.resource)
        established = any(c.get("type") == "Established" and c.get("status") == "True"
                          for c in (crd.get("status") or {}).get("conditions") or [])
        if established:
            types = custom_resource_types(crd)
            for rt in types:
                self.catalog.add(rt)
            self._crd_types[name] = types

    def _on_event(self, event: Event) -> None:
        if event.key != "apiextensions.k8s.io/customresourcedefinitions":
            return
        if event.type == DELETED:
            for rt in self._crd_types.pop(event.name, []):
                self.catalog.remove(rt.group, rt.version, rt.resource)
        else:
            self._serve_crd(event.obj)

    def crd_types(self, crd_name: str) -> list[ResourceType]:
        return list(self._crd_types.get(crd_name, []))

    def crd_terminating(self, rt: ResourceType) -> bool:
        """Whether `rt` is served by a CustomResourceDefinition whose condition Terminating is True
        (apiextensionshelpers.IsCRDConditionTrue(crd, Terminating))."""
        name = f"{rt.resource}.{rt.group}"
        if rt not in self._crd_types.get(name, []):
            return False
        crd = self.store.get("apiextensions.k8s.io/customresourcedefinitions", "", name) or {}
        return any(c.get("type") == "Terminating" and c.get("status") == "True"
                   for c in (crd.get("status") or {}).get("conditions") or [])


INCONSISTENT_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new list "
    "without the continue parameter, or use the continue token in this response to retrieve the remainder of the "
    "results. Continuing with the provided token results in an inconsistent list - objects that were created, "
    "modified, or deleted between the time the first chunk was returned and now may show up in the list.")


def _encode_continue(rev: int, key: tuple[str, str]) -> str:
    import base64
    data = json.dumps({"v": "meta.k8s.io/v1", "rv": rev, "start": f"{key[0]}/{key[1]}"}, separators=(",", ":"))
    return base64.urlsafe_b64encode(data.encode()).decode().rstrip("=")


def _decode_continue(token: str) -> tuple[int, tuple[str, str]]:
    """(revision, last key) of a continue token."""
    import base64
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        namespace, _, name = data["start"].partition("/")
        rev = data["rv"]
        if data.get("v") != "meta.k8s.io/v1" or not name or not isinstance(rev, int) or isinstance(rev, bool):
            raise ValueError
        if rev == 0 or rev < -1:
            raise bad_request("continue key is not valid: incorrect encoded start resourceVersion (version "
                              "meta.k8s.io/v1)")
        return rev, (namespace, name)
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError):
        raise bad_request("continue key is not valid: the continue token could not be decoded")


def _parse_resource_version(value: str) -> int:
    try:
        rev = int(value)
        if rev < 0 or not value.isdigit():
            raise ValueError
        return rev
    except ValueError:
        raise bad_request(f"invalid resource version: {value}")


def _validate_list_options(resource_version: str | None, match: str | None, continue_token: str | None) -> None:
    """ValidateListOptions (apimachinery meta/internalversion/validation)."""
    errors = []
    if match:
        if not resource_version:
            errors.append(field_forbidden("resourceVersionMatch",
                                          "resourceVersionMatch is forbidden unless resourceVersion is provided"))
        if continue_token:
            errors.append(field_forbidden("resourceVersionMatch",
                                          "resourceVersionMatch is forbidden when continue is provided"))
        if match not in ("Exact", "NotOlderThan"):
            errors.append(field_unsupported("resourceVersionMatch", match, ["Exact", "NotOlderThan", ""]))
        if match == "Exact" and resource_version == "0":
            errors.append(field_forbidden("resourceVersionMatch",
                                          'resourceVersionMatch "exact" is forbidden for resourceVersion "0"'))
    if errors:
        raise invalid("ListOptions", "meta.k8s.io", "", errors)


def _too_large(requested: int, current: int) -> ApiError:
    """storage.NewTooLargeResourceVersionError: the server has not seen that revision (yet)."""
    return ApiError(504, "Timeout", f"Timeout: Too large resource version: {requested}, current: {current}",
                    {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                     "retryAfterSeconds": 1})


def _without_managed(obj: dict) -> dict:
    out = dict(obj, metadata=dict(obj.get("metadata") or {}))
    out["metadata"].pop("managedFields", None)
    return out


def _same(new: dict, old: dict) -> bool:
    """An update that changes nothing is not written (etcd3 store: identical bytes)."""
    a = dict(new, metadata={k: v for k, v in new["metadata"].items() if k != "resourceVersion"})
    b = dict(old, metadata={k: v for k, v in old["metadata"].items() if k != "resourceVersion"})
    return a == b


def _drop_empty_meta(obj: dict) -> None:
    # Go's omitempty: an emptied list or map is not stored
    for key in ("finalizers", "ownerReferences", "labels", "annotations"):
        if key in obj["metadata"] and not obj["metadata"][key]:
            del obj["metadata"][key]


def decode_delete_options(body) -> dict:
    """DeleteOptions from a request body (any apiVersion/kind or none), with type checks."""
    if body is None:
        return {}
    if not isinstance(body, dict):
        raise bad_request("couldn't get version/kind; json parse error: the body is not a JSON object")
    options = {k: v for k, v in body.items() if k not in ("apiVersion", "kind")}

    def fail(field, go_type):
        raise bad_request(f"json: cannot unmarshal {value_type(options[field])} into Go struct field "
                          f"DeleteOptions.{field} of type {go_type}")

    for key, go_type in (("gracePeriodSeconds", "int64"),):
        if options.get(key) is not None and (not isinstance(options[key], int) or isinstance(options[key], bool)):
            fail(key, go_type)
    if options.get("orphanDependents") is not None and not isinstance(options["orphanDependents"], bool):
        fail("orphanDependents", "bool")
    if options.get("propagationPolicy") is not None and not isinstance(options["propagationPolicy"], str):
        fail("propagationPolicy", "v1.DeletionPropagation")
    if options.get("dryRun") is not None and not (isinstance(options["dryRun"], list)
                                                  and all(isinstance(v, str) for v in options["dryRun"])):
        fail("dryRun", "[]string")
    pre = options.get("preconditions")
    if pre is not None:
        if not isinstance(pre, dict):
            fail("preconditions", "v1.Preconditions")
        for key in ("uid", "resourceVersion"):
            if pre.get(key) is not None and not isinstance(pre[key], str):
                raise bad_request(f"json: cannot unmarshal {value_type(pre[key])} into Go struct field "
                                  f"Preconditions.preconditions.{key} of type string")
    return options

