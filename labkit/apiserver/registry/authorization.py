"""authorization.k8s.io/v1: the access reviews, created and answered, never stored
(pkg/registry/authorization/<kind>/rest.go).
"""

from __future__ import annotations

import json

from labkit.apiserver.errors import FieldError, RawJSON, field_invalid, field_required
from labkit.apiserver.resources import Strategy


# -- access reviews (create-only, nothing stored) ------------------------------------------------

class ReviewStrategy(Strategy):
    """A kind that is a question to the server: created, answered, never stored (the access
    reviews of pkg/registry/authorization and authentication). `review` answers it."""

    virtual = True

    def review(self, obj: dict, user, authorizer, namespace: str | None) -> dict:
        raise NotImplementedError


def _decide(authorizer, user: str, groups: list[str], spec: dict, namespace: str | None = None) -> dict:
    from labkit.apiserver.authorizer import Attributes
    resource = spec.get("resourceAttributes")
    if resource is not None:
        attributes = Attributes(user, groups, resource.get("verb", ""), namespace or resource.get("namespace", ""),
                                resource.get("group", ""), resource.get("version", ""), resource.get("resource", ""),
                                resource.get("subresource", ""), resource.get("name", ""))
    else:
        attrs = spec.get("nonResourceAttributes") or {}
        attributes = Attributes(user, groups, attrs.get("verb", ""), path=attrs.get("path", ""))
    decision = authorizer.authorize(attributes)
    status = {"allowed": decision.allowed}
    if decision.denied:
        status["denied"] = True
    if decision.reason:
        status["reason"] = decision.reason
    return status


def _review_errors(obj: dict, subject: bool, local: bool = False) -> list[FieldError]:
    """pkg/apis/authorization/validation: ValidateSelfSubjectAccessReview, ValidateSubjectAccessReview
    and ValidateLocalSubjectAccessReview."""
    spec = obj.get("spec") or {}
    resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    errors = []
    if resource is not None and non_resource is not None:
        errors.append(field_invalid("spec.nonResourceAttributes", non_resource,
                                    "cannot be specified in combination with resourceAttributes"))
    if resource is None and non_resource is None:
        errors.append(field_invalid("spec.resourceAttributes", None,
                                    "exactly one of nonResourceAttributes or resourceAttributes must be specified"))
    if subject and not spec.get("user") and not spec.get("groups"):
        errors.append(field_invalid("spec.user", spec.get("user", ""), "at least one of user or group must be specified"))
    for selector in ("fieldSelector", "labelSelector"):
        attributes = (resource or {}).get(selector)
        if attributes is None:
            continue
        path = f"spec.resourceAttributes.{selector}"
        if attributes.get("rawSelector") and attributes.get("requirements"):
            errors.append(field_invalid(f"{path}.rawSelector", attributes["rawSelector"],
                                        "may not specified at the same time as requirements"))
        if not attributes.get("rawSelector") and not attributes.get("requirements"):
            errors.append(field_required(f"{path}.requirements",
                                         f"when {path} is specified, requirements or rawSelector is required"))
    meta = {k: v for k, v in obj["metadata"].items() if k != "managedFields" and not (local and k == "namespace")}
    if meta:
        errors.append(field_invalid("metadata", _go_object_meta(obj["metadata"]),
                                    "must be empty except for namespace" if local else "must be empty"))
    if local:
        if resource is not None and resource.get("namespace", "") != obj["metadata"].get("namespace", ""):
            errors.append(field_invalid("spec.resourceAttributes.namespace", resource.get("namespace", ""),
                                        "must match metadata.namespace"))
        if non_resource is not None:
            errors.append(field_invalid("spec.nonResourceAttributes", non_resource, "disallowed on this kind of request"))
    return errors


# metav1.ObjectMeta's fields in declaration order; creationTimestamp has no omitempty effect
OBJECT_META_FIELDS = ("name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
                      "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
                      "annotations", "ownerReferences", "finalizers", "managedFields")


def _go_object_meta(meta: dict) -> RawJSON:
    """ObjectMeta as json.Marshal writes it in a field error."""
    fields = [f'"{k}":' + json.dumps(meta.get(k), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
              for k in OBJECT_META_FIELDS if k in meta or k == "creationTimestamp"]
    return RawJSON("{" + ",".join(fields) + "}")


class SelfSubjectAccessReviewStrategy(ReviewStrategy):
    """`kubectl auth can-i`: may the requesting user do this?"""

    def validate(self, obj):
        return _review_errors(obj, subject=False)

    def review(self, obj, user, authorizer, namespace):
        return dict(obj, status=_decide(authorizer, user.name, user.groups, obj.get("spec") or {}))


class SubjectAccessReviewStrategy(ReviewStrategy):
    """May the user named in the spec, with exactly the groups named there, do this?
    (pkg/registry/authorization/subjectaccessreview/rest.go with
    authorizationutil.AuthorizationAttributesFrom: no group is added, not even
    system:authenticated.)"""

    def validate(self, obj):
        return _review_errors(obj, subject=True)

    def review(self, obj, user, authorizer, namespace):
        spec = obj.get("spec") or {}
        return dict(obj, status=_decide(authorizer, spec.get("user", ""), list(spec.get("groups") or []), spec,
                                        namespace))


class LocalSubjectAccessReviewStrategy(SubjectAccessReviewStrategy):
    def validate(self, obj):
        return _review_errors(obj, subject=True, local=True)


class SelfSubjectRulesReviewStrategy(ReviewStrategy):
    """`kubectl auth can-i --list`: everything the requesting user may do in a namespace."""

    def review(self, obj, user, authorizer, namespace):
        rules = authorizer.rules(user.name, user.groups, (obj.get("spec") or {}).get("namespace", ""))
        status = {"resourceRules": rules.resource_rules, "nonResourceRules": rules.non_resource_rules,
                  "incomplete": rules.incomplete}
        if rules.evaluation_error:
            status["evaluationError"] = rules.evaluation_error
        return dict(obj, status=status)
