"""Kubernetes `Status` errors, built as apimachinery's `k8s.io/apimachinery/pkg/api/errors`
constructors build them, so that kubectl and client libraries print exactly what a real cluster
prints (`Error from server (NotFound): configmaps "x" not found`).

A "qualified resource" is `<resource>` for the core group and `<resource>.<group>` otherwise
(`deployments.apps`), as `schema.GroupResource.String()` renders it.
"""

from __future__ import annotations

import json


def qualified(resource: str, group: str) -> str:
    return f"{resource}.{group}" if group else resource


def go_quote(value: str) -> str:
    """Go's %q for the strings that appear in API messages (JSON escaping is close enough)."""
    return json.dumps(value, ensure_ascii=False)


class ApiError(Exception):
    """A request failed: carries the HTTP code and the Status object to send back."""

    def __init__(self, code: int, reason: str, message: str, details: dict | None = None):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.list_continue = ""     # a Status' metadata.continue (a list whose continue token expired)
        self.warnings: list[str] = []   # sent with the Status as `Warning:` headers

    def status(self) -> dict:
        body = {"kind": "Status", "apiVersion": "v1",
                "metadata": {"continue": self.list_continue} if self.list_continue else {},
                "status": "Failure", "message": self.message}
        if self.reason:       # metav1.Status reason is omitempty (StatusReasonUnknown is "")
            body["reason"] = self.reason
        if self.details is not None:
            body["details"] = self.details
        body["code"] = self.code
        return body

    @classmethod
    def from_status(cls, code: int, body) -> "ApiError":
        if isinstance(body, dict) and body.get("kind") == "Status":
            return cls(int(body.get("code") or code), body.get("reason", ""), body.get("message", ""),
                       body.get("details"))
        return cls(code, "", f"the server responded with the status code {code}: {str(body)[:200]}")


def _details(group: str, resource: str, name: str | None = None, **extra) -> dict:
    details: dict = {}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    if resource:
        details["kind"] = resource   # apimachinery puts the resource name in "kind"
    details.update({k: v for k, v in extra.items() if v})
    return details


def not_found(resource: str, group: str, name: str) -> ApiError:
    return ApiError(404, "NotFound", f"{qualified(resource, group)} {go_quote(name)} not found",
                    _details(group, resource, name))


def not_found_path() -> ApiError:
    """An unknown URL (resource, group or version): the generic 404 of the API server."""
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})


def already_exists(resource: str, group: str, name: str, deleting: bool = False) -> ApiError:
    message = f"{qualified(resource, group)} {go_quote(name)} already exists"
    if deleting:
        message = f"object is being deleted: {message}"
    return ApiError(409, "AlreadyExists", message, _details(group, resource, name))


def conflict(resource: str, group: str, name: str, why: str) -> ApiError:
    return ApiError(409, "Conflict",
                    f"Operation cannot be fulfilled on {qualified(resource, group)} {go_quote(name)}: {why}",
                    _details(group, resource, name))


OPTIMISTIC_LOCK_MESSAGE = ("the object has been modified; please apply your changes to the latest "
                           "version and try again")


def forbidden(resource: str, group: str, name: str, why: str, causes: list | None = None) -> ApiError:
    if not resource:
        message = f"forbidden: {why}"
    elif not name:
        message = f"{qualified(resource, group)} is forbidden: {why}"
    else:
        message = f"{qualified(resource, group)} {go_quote(name)} is forbidden: {why}"
    return ApiError(403, "Forbidden", message, _details(group, resource, name, causes=causes))


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def method_not_supported(resource: str, group: str, action: str) -> ApiError:
    return ApiError(405, "MethodNotAllowed",
                    f"{action} is not supported on resources of kind {go_quote(qualified(resource, group))}",
                    _details(group, resource))


def unsupported_media_type(content_type: str, accepted: list[str]) -> ApiError:
    return ApiError(415, "UnsupportedMediaType",
                    f"the body of the request was in an unknown format - accepted media types include: "
                    f"{', '.join(accepted)}", {})


def not_acceptable(accepted: list[str]) -> ApiError:
    return ApiError(406, "NotAcceptable", f"only the following media types are accepted: {', '.join(accepted)}", {})


def too_large(limit: int) -> ApiError:
    return ApiError(413, "RequestEntityTooLarge", f"Request entity too large: limit is {limit}")


def expired(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def timeout(message: str, retry_after: int = 0) -> ApiError:
    """apierrors.NewTimeoutError."""
    return ApiError(504, "Timeout", f"Timeout: {message}", {"retryAfterSeconds": retry_after} if retry_after else {})


def request_timeout_error() -> ApiError:
    return timeout("request did not complete within requested timeout")


def internal(message: str) -> ApiError:
    return ApiError(500, "InternalError", f"Internal error occurred: {message}",
                    {"causes": [{"message": message}]})


def invalid_request(message: str = "the server rejected our request due to an error in our request") -> ApiError:
    """What NewGenericServerResponse(422, ...) builds, e.g. for a JSON patch that cannot be applied."""
    return ApiError(422, "Invalid", message, {})


# -- field errors (k8s.io/apimachinery/pkg/util/validation/field) ------------------------------

class RawJSON(str):
    """A bad value already rendered as Go's json.Marshal renders it (struct fields in their
    declared order, which sorted keys would not reproduce)."""


def _render_value(value) -> str:
    if isinstance(value, RawJSON):
        return str(value)
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class FieldError:
    """One validation problem, rendered as field.Error.Error() renders it."""

    def __init__(self, kind: str, field: str, detail: str = "", value=None, has_value: bool = False):
        self.kind = kind            # "Invalid value", "Required value", "Forbidden", "Unsupported value", ...
        self.field = field
        self.detail = detail
        self.value = value
        self.has_value = has_value

    def body(self) -> str:
        if self.has_value:
            text = f"{self.kind}: {_render_value(self.value)}"
            return f"{text}: {self.detail}" if self.detail else text
        return f"{self.kind}: {self.detail}" if self.detail else self.kind

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"

    @property
    def cause_type(self) -> str:
        return {"Invalid value": "FieldValueInvalid", "Required value": "FieldValueRequired",
                "Forbidden": "FieldValueForbidden", "Unsupported value": "FieldValueNotSupported",
                "Duplicate value": "FieldValueDuplicate", "Too long": "FieldValueTooLong",
                "Not found": "FieldValueNotFound", "Internal error": "InternalError"}.get(self.kind, self.kind)


def field_invalid(field: str, value, detail: str) -> FieldError:
    return FieldError("Invalid value", field, detail, value, True)


def field_required(field: str, detail: str = "") -> FieldError:
    return FieldError("Required value", field, detail)


def field_forbidden(field: str, detail: str) -> FieldError:
    return FieldError("Forbidden", field, detail)


def field_unsupported(field: str, value, supported: list[str]) -> FieldError:
    return FieldError("Unsupported value", field,
                      "supported values: " + ", ".join(go_quote(s) for s in supported), value, True)


def invalid(kind: str, group: str, name: str, errors: list[FieldError]) -> ApiError:
    """NewInvalid: 422 `<Kind>[.group] "<name>" is invalid: <errors>`."""
    qualified_kind = f"{kind}.{group}" if group else kind
    if len(errors) == 1:
        aggregate = str(errors[0])
    else:
        aggregate = "[" + ", ".join(str(e) for e in errors) + "]"
    causes = [{"reason": e.cause_type, "message": e.body(), "field": e.field} for e in errors]
    details = {"name": name, "group": group, "kind": kind, "causes": causes}
    details = {k: v for k, v in details.items() if v}
    return ApiError(422, "Invalid", f"{qualified_kind} {go_quote(name)} is invalid: {aggregate}", details)
