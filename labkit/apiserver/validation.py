"""Validation of names, object metadata and DeleteOptions, with apimachinery's messages.

Follows k8s.io/apimachinery/pkg/util/validation (IsDNS1123Subdomain, IsDNS1123Label,
IsQualifiedName, IsValidLabelValue), pkg/api/validation/objectmeta.go (ValidateObjectMetaAccessor,
ValidateObjectMetaAccessorUpdate, ValidateOwnerReferences, ValidateFinalizers),
pkg/apis/core/validation (validateKubeFinalizerName) and meta/v1/validation ValidateDeleteOptions.
"""

from __future__ import annotations

import re

from labkit.apiserver.errors import (FieldError, field_forbidden, field_invalid, field_required,
                                     field_unsupported)

_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL_RE = re.compile(f"^{_DNS1123_LABEL}$")
_DNS1123_SUBDOMAIN = _DNS1123_LABEL + r"(\." + _DNS1123_LABEL + r")*"
_DNS1123_SUBDOMAIN_RE = re.compile(f"^{_DNS1123_SUBDOMAIN}$")
_QUALIFIED_NAME_PART = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_NAME_PART_RE = re.compile(f"^{_QUALIFIED_NAME_PART}$")
_LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    r"validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
LABEL_MESSAGE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
    "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
QUALIFIED_NAME_MESSAGE = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
    "an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
LABEL_VALUE_MESSAGE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
    "'12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")

STANDARD_FINALIZERS = ("kubernetes", "orphan", "foregroundDeletion")


def _mask_trailing_dash(name: str) -> str:
    # generateName prefixes may end in '-': validate them as if a character followed
    return name[:-1] + "a" if len(name) > 1 and name.endswith("-") else name


def dns1123_subdomain_problems(name: str, prefix: bool = False) -> list[str]:
    if prefix:
        name = _mask_trailing_dash(name)
    problems = []
    if len(name) > 253:
        problems.append("must be no more than 253 characters")
    if not _DNS1123_SUBDOMAIN_RE.match(name):
        problems.append(SUBDOMAIN_MESSAGE)
    return problems


def dns1123_label_problems(name: str, prefix: bool = False) -> list[str]:
    if prefix:
        name = _mask_trailing_dash(name)
    problems = []
    if len(name) > 63:
        problems.append("must be no more than 63 characters")
    if not _DNS1123_LABEL_RE.match(name):
        problems.append(LABEL_MESSAGE)
    return problems


def path_segment_problems(name: str, prefix: bool = False) -> list[str]:
    """IsValidPathSegmentName: what any name must satisfy to be usable in a URL."""
    if not prefix and name in (".", ".."):
        return [f"may not be '{name}'"]
    problems = []
    for bad in ("/", "%"):
        if bad in name:
            problems.append(f"may not contain '{bad}'")
    return problems


def qualified_name_problems(value: str) -> list[str]:
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            return ["prefix part must be non-empty"]
        problems = [f"prefix part {p}" for p in dns1123_subdomain_problems(prefix)]
        if problems:
            return problems
    else:
        return ["a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start "
                "and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
                "used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS "
                "subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    if not name:
        return ["name part must be non-empty"]
    problems = []
    if len(name) > 63:
        problems.append("name part must be no more than 63 characters")
    if not _QUALIFIED_NAME_PART_RE.match(name):
        problems.append(QUALIFIED_NAME_MESSAGE)
    return problems


def label_value_problems(value: str) -> list[str]:
    problems = []
    if len(value) > 63:
        problems.append("must be no more than 63 characters")
    if not _LABEL_VALUE_RE.match(value):
        problems.append(LABEL_VALUE_MESSAGE)
    return problems


# -- object metadata -------------------------------------------------------------------------

def validate_finalizers(finalizers: list[str], field: str = "metadata.finalizers") -> list[FieldError]:
    """apimachinery ValidateFinalizers: every name a qualified name (ValidateFinalizerName), not
    both `orphan` and `foregroundDeletion`."""
    errors = []
    for f in finalizers:
        for msg in qualified_name_problems(f):
            errors.append(field_invalid(field, f, msg))
    if "orphan" in finalizers and "foregroundDeletion" in finalizers:
        errors.append(field_invalid(field, finalizers, "finalizer orphan and foregroundDeletion cannot be both set"))
    return errors


def validate_kube_finalizer_names(finalizers: list[str], field: str, index: bool = True) -> list[FieldError]:
    """pkg/apis/core/validation validateKubeFinalizerName, which built-in kinds add to the generic
    checks (ValidateObjectMeta, per item: `metadata.finalizers[i]`): a name without a `/` must be
    one of the standard names."""
    return [field_invalid(f"{field}[{i}]" if index else field, f,
                          "name is neither a standard finalizer name nor is it fully qualified")
            for i, f in enumerate(finalizers) if "/" not in f and f not in STANDARD_FINALIZERS]


def validate_finalizer_name_list(finalizers: list[str], field: str, index: bool) -> list[FieldError]:
    """validateFinalizerName for each of a namespace's spec.finalizers: a qualified name, and a
    standard one unless it has a `/` (ValidateNamespace: `spec.finalizers`;
    ValidateNamespaceFinalizeUpdate: `spec.finalizers[i]`)."""
    errors = []
    for i, f in enumerate(finalizers):
        path = f"{field}[{i}]" if index else field
        errors += [field_invalid(path, f, msg) for msg in qualified_name_problems(f)]
        errors += validate_kube_finalizer_names([f], path, index=False)
    return errors


def validate_owner_references(refs: list[dict], field: str = "metadata.ownerReferences") -> list[FieldError]:
    errors = []
    first_controller = ""
    for ref in refs:
        api_version = ref.get("apiVersion") or ""
        version = api_version.split("/")[-1] if api_version else ""
        if not version:
            errors.append(field_invalid(f"{field}.apiVersion", api_version, "version must not be empty"))
        if not ref.get("kind"):
            errors.append(field_invalid(f"{field}.kind", ref.get("kind") or "", "must not be empty"))
        if not ref.get("name"):
            errors.append(field_invalid(f"{field}.name", ref.get("name") or "", "must not be empty"))
        if not ref.get("uid"):
            errors.append(field_invalid(f"{field}.uid", ref.get("uid") or "", "must not be empty"))
        if api_version == "v1" and ref.get("kind") == "Event":
            errors.append(field_invalid(field, ref, "/v1, Kind=Event is disallowed from being an owner"))
        if ref.get("controller"):
            current = f"{ref.get('kind')}/{ref.get('name')}"
            if first_controller:
                errors.append(field_invalid(field, refs, "Only one reference can have Controller set to true. "
                                            f"Found \"true\" in references for {first_controller} and {current}"))
            else:
                first_controller = current
    return errors


def validate_labels(labels: dict, field: str = "metadata.labels") -> list[FieldError]:
    errors = []
    for key, value in labels.items():
        for msg in qualified_name_problems(key):
            errors.append(field_invalid(field, key, msg))
        for msg in label_value_problems(value):
            errors.append(field_invalid(field, value, msg))
    return errors


def validate_annotations(annotations: dict, field: str = "metadata.annotations") -> list[FieldError]:
    errors = []
    for key in annotations:
        for msg in qualified_name_problems(key.lower()):
            errors.append(field_invalid(field, key, msg))
    if sum(len(k) + len(v) for k, v in annotations.items()) > 256 * 1024:
        errors.append(FieldError("Too long", field, "may not be more than 262144 bytes"))
    return errors


def validate_object_meta(meta: dict, namespaced: bool, name_problems, standard_finalizers: bool) -> list[FieldError]:
    """ValidateObjectMetaAccessor (+ the core finalizer rule for built-in kinds) for a create."""
    errors: list[FieldError] = []
    generate_name = meta.get("generateName") or ""
    if generate_name:
        for msg in name_problems(generate_name, True):
            errors.append(field_invalid("metadata.generateName", generate_name, msg))
    name = meta.get("name") or ""
    if not name:
        errors.append(field_required("metadata.name", "name or generateName is required"))
    else:
        for msg in name_problems(name, False):
            errors.append(field_invalid("metadata.name", name, msg))
    errors += _common_meta(meta, namespaced, standard_finalizers)
    return errors


def validate_object_meta_update(new: dict, old: dict, namespaced: bool, standard_finalizers: bool) -> list[FieldError]:
    """ValidateObjectMetaAccessorUpdate: immutable fields and no new finalizers while deleting."""
    errors: list[FieldError] = []
    if old.get("deletionTimestamp"):
        extra = sorted(set(new.get("finalizers") or []) - set(old.get("finalizers") or []))
        if extra:
            shown = ", ".join(f'"{f}"' for f in extra)
            errors.append(field_forbidden("metadata.finalizers", "no new finalizers can be added if the object is "
                                          f"being deleted, found new finalizers []string{{{shown}}}"))
    if (new.get("generation") or 0) < (old.get("generation") or 0):
        errors.append(field_invalid("metadata.generation", new.get("generation") or 0, "must not be decremented"))
    for key in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"):
        if new.get(key) != old.get(key):
            errors.append(field_invalid(f"metadata.{key}", new.get(key), "field is immutable"))
    errors += _common_meta(new, namespaced, standard_finalizers, update=True)
    return errors


def _common_meta(meta: dict, namespaced: bool, standard_finalizers: bool, update: bool = False) -> list[FieldError]:
    errors: list[FieldError] = []
    if not update:
        if namespaced:
            if not meta.get("namespace"):
                errors.append(field_required("metadata.namespace"))
            else:
                for msg in dns1123_label_problems(meta["namespace"]):
                    errors.append(field_invalid("metadata.namespace", meta["namespace"], msg))
        elif meta.get("namespace"):
            errors.append(field_forbidden("metadata.namespace", "not allowed on this type"))
    if (meta.get("generation") or 0) < 0:
        errors.append(field_invalid("metadata.generation", meta["generation"], "must be greater than or equal to 0"))
    errors += validate_labels(meta.get("labels") or {})
    errors += validate_annotations(meta.get("annotations") or {})
    errors += validate_owner_references(meta.get("ownerReferences") or [])
    errors += validate_finalizers(meta.get("finalizers") or [])
    if standard_finalizers:
        errors += validate_kube_finalizer_names(meta.get("finalizers") or [], "metadata.finalizers")
    return errors


# -- DeleteOptions ---------------------------------------------------------------------------

PROPAGATION_POLICIES = ("Foreground", "Background", "Orphan")


def validate_delete_options(options: dict) -> list[FieldError]:
    errors = []
    policy = options.get("propagationPolicy")
    if options.get("orphanDependents") is not None and policy is not None:
        errors.append(field_invalid("propagationPolicy", policy,
                                    "orphanDependents and deletionPropagation cannot be both set"))
    if policy is not None and policy not in PROPAGATION_POLICIES:
        errors.append(field_unsupported("propagationPolicy", policy, [*PROPAGATION_POLICIES, "nil"]))
    for value in options.get("dryRun") or []:
        if value != "All":
            errors.append(field_unsupported("dryRun", value, ["All"]))
    return errors
