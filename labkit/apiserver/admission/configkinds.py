"""The admissionregistration.k8s.io/v1 kinds: MutatingWebhookConfiguration,
ValidatingWebhookConfiguration, ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding,
with upstream's defaults (pkg/apis/admissionregistration/v1/defaults.go) and the main rules of
its validation (pkg/apis/admissionregistration/validation/validation.go).

MutatingAdmissionPolicy and its binding are not served: their API (v1beta1 in v1.34) is off by
default, as is the MutatingAdmissionPolicy feature gate.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from labkit.apiserver import defaults
from labkit.apiserver.errors import (FieldError, field_forbidden, field_invalid, field_required,
                                     field_unsupported)
from labkit.apiserver.resources import RESET_META_FOR_STATUS, ResourceType, StatusSubresource, Strategy

OPERATIONS = ["*", "CONNECT", "CREATE", "DELETE", "UPDATE"]
FAILURE_POLICIES = ["Fail", "Ignore"]
MATCH_POLICIES = ["Equivalent", "Exact"]
SCOPES = ["*", "Cluster", "Namespaced"]
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


# -- defaults (SetDefaults_*) ------------------------------------------------------------------------

@defaults.defaulter("V1ValidatingWebhook")
def webhook(hook: dict) -> None:
    hook.setdefault("failurePolicy", "Fail")
    hook.setdefault("matchPolicy", "Equivalent")
    hook.setdefault("namespaceSelector", {})
    hook.setdefault("objectSelector", {})
    hook.setdefault("timeoutSeconds", 10)


@defaults.defaulter("V1MutatingWebhook")
def mutating_webhook(hook: dict) -> None:
    webhook(hook)
    hook.setdefault("reinvocationPolicy", "Never")


@defaults.defaulter("V1RuleWithOperations", "V1NamedRuleWithOperations")
def rule(r: dict) -> None:
    r.setdefault("scope", "*")


@defaults.defaulter("AdmissionregistrationV1ServiceReference")
def service_reference(ref: dict) -> None:
    ref.setdefault("port", 443)


@defaults.defaulter("V1MatchResources")
def match_resources(m: dict) -> None:
    m.setdefault("namespaceSelector", {})
    m.setdefault("objectSelector", {})
    m.setdefault("matchPolicy", "Equivalent")


@defaults.defaulter("V1ValidatingAdmissionPolicySpec")
def policy_spec(spec: dict) -> None:
    spec.setdefault("failurePolicy", "Fail")


# -- validation ----------------------------------------------------------------------------------

def _qualified_name_problem(name: str) -> str | None:
    if len(name.split(".")) < 3:
        return "should be a domain with at least three segments separated by dots"
    if len(name) > 253 or not all(_DNS1123_LABEL.match(p) for p in name.split(".")):
        return ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
                "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
    return None


def _rules(rules, path: str, named: bool = False) -> list[FieldError]:
    errors = []
    for i, r in enumerate(rules or []):
        p = f"{path}[{i}]"
        ops = r.get("operations") or []
        if not ops:
            errors.append(field_required(f"{p}.operations", ""))
        for j, op in enumerate(ops):
            if op not in OPERATIONS:
                errors.append(field_unsupported(f"{p}.operations[{j}]", op, OPERATIONS))
        if len(ops) > 1 and "*" in ops:
            errors.append(field_invalid(f"{p}.operations", ops, "if '*' is present, must not specify other operations"))
        for key in ("apiGroups", "apiVersions"):
            values = r.get(key) or []
            if not values:
                errors.append(field_required(f"{p}.{key}", ""))
            if len(values) > 1 and "*" in values:
                errors.append(field_invalid(f"{p}.{key}", values, "if '*' is present, must not specify other "
                                                                  f"{'API groups' if key == 'apiGroups' else 'API versions'}"))
        resources = r.get("resources") or []
        if not resources:
            errors.append(field_required(f"{p}.resources", ""))
        for j, res in enumerate(resources):
            if not res:
                errors.append(field_required(f"{p}.resources[{j}]", ""))
            elif "/" in res and res.split("/", 1)[0] != "*" and "*" in resources:
                errors.append(field_invalid(f"{p}.resources", resources,
                                            f"if '*' is present, must not specify {res}"))
        if r.get("scope") not in SCOPES:
            errors.append(field_unsupported(f"{p}.scope", r.get("scope"), SCOPES))
    return errors


def _client_config(config: dict, path: str) -> list[FieldError]:
    has_url, has_service = bool(config.get("url")), bool(config.get("service"))
    if has_url == has_service:
        return [field_required(path, "exactly one of url or service is required")]
    if has_url:
        parts = urlsplit(config["url"])
        if parts.scheme != "https":
            return [field_invalid(f"{path}.url", config["url"], "'https' is the only allowed URL scheme")]
        if not parts.hostname:
            return [field_invalid(f"{path}.url", config["url"], "host must be specified")]
        if parts.username or parts.password:
            return [field_invalid(f"{path}.url", config["url"], "user information is not permitted in the URL")]
        if parts.fragment or parts.query:
            return [field_invalid(f"{path}.url", config["url"], "fragments and query parameters are not permitted")]
        return []
    service = config["service"]
    errors = []
    for key in ("name", "namespace"):
        if not service.get(key):
            errors.append(field_required(f"{path}.service.{key}", f"service {key} is required"))
    port = service.get("port", 443)
    if not 1 <= port <= 65535:
        errors.append(field_invalid(f"{path}.service.port", port, "port is not valid: must be between 1 and 65535, "
                                                                   "inclusive"))
    svc_path = service.get("path")
    if svc_path is not None and not svc_path.startswith("/"):
        errors.append(field_invalid(f"{path}.service.path", svc_path, "must start with a '/'"))
    return errors


def _match_conditions(conditions, path: str) -> list[FieldError]:
    errors, seen = [], set()
    if len(conditions or []) > 64:
        errors.append(FieldError("Too many", path, "must have at most 64 items"))
    for i, c in enumerate(conditions or []):
        name = c.get("name", "")
        if not name:
            errors.append(field_required(f"{path}[{i}].name", ""))
        elif name in seen:
            errors.append(FieldError("Duplicate value", f"{path}[{i}].name", "", name, True))
        seen.add(name)
        errors += _expression(c.get("expression"), f"{path}[{i}].expression", "bool")
    return errors


def _expression(expression, path: str, returns: str | None = None) -> list[FieldError]:
    """validateValidation / validateMatchCondition / validateMessageExpression / validateVariable
    (pkg/apis/admissionregistration/validation/validation.go): the expression compiled, and of the
    type its field needs (ValidationCondition and MatchCondition: bool; MessageExpressionCondition:
    string; a variable: any)."""
    from labkit.apiserver.admission.cel import compile_problem
    if not expression:
        return [field_required(path, "")]
    problem = compile_problem(expression, returns)
    return [field_invalid(path, expression, problem)] if problem else []


def _webhooks(obj: dict, mutating: bool) -> list[FieldError]:
    errors, seen = [], set()
    for i, hook in enumerate(obj.get("webhooks") or []):
        p = f"webhooks[{i}]"
        name = hook.get("name", "")
        if not name:
            errors.append(field_required(f"{p}.name", ""))
        else:
            problem = _qualified_name_problem(name)
            if problem:
                errors.append(field_invalid(f"{p}.name", name, problem))
            if name in seen:
                errors.append(FieldError("Duplicate value", f"{p}.name", "", name, True))
            seen.add(name)
        errors += _rules(hook.get("rules"), f"{p}.rules")
        if hook.get("failurePolicy") not in FAILURE_POLICIES:
            errors.append(field_unsupported(f"{p}.failurePolicy", hook.get("failurePolicy"), FAILURE_POLICIES))
        if hook.get("matchPolicy") not in MATCH_POLICIES:
            errors.append(field_unsupported(f"{p}.matchPolicy", hook.get("matchPolicy"), MATCH_POLICIES))
        side = hook.get("sideEffects")
        if side is None:
            errors.append(field_required(f"{p}.sideEffects", "must specify one of None, NoneOnDryRun"))
        elif side not in ("None", "NoneOnDryRun"):
            errors.append(field_unsupported(f"{p}.sideEffects", side, ["None", "NoneOnDryRun"]))
        timeout = hook.get("timeoutSeconds")
        if timeout is not None and not 1 <= timeout <= 30:
            errors.append(field_invalid(f"{p}.timeoutSeconds", timeout,
                                        "the timeout value must be between 1 and 30 seconds"))
        versions = hook.get("admissionReviewVersions") or []
        if not versions:
            errors.append(field_required(f"{p}.admissionReviewVersions", "must specify one of v1, v1beta1"))
        elif not any(v in ("v1", "v1beta1") for v in versions):
            errors.append(field_invalid(f"{p}.admissionReviewVersions", versions,
                                        "must include at least one of v1, v1beta1"))
        if mutating and hook.get("reinvocationPolicy") not in ("Never", "IfNeeded"):
            errors.append(field_unsupported(f"{p}.reinvocationPolicy", hook.get("reinvocationPolicy"),
                                            ["IfNeeded", "Never"]))
        errors += _client_config(hook.get("clientConfig") or {}, f"{p}.clientConfig")
        errors += _match_conditions(hook.get("matchConditions"), f"{p}.matchConditions")
    return errors


class WebhookConfigurationStrategy(Strategy):
    mutating = False

    def validate(self, obj):
        return _webhooks(obj, self.mutating)


class MutatingWebhookConfigurationStrategy(WebhookConfigurationStrategy):
    mutating = True


def _match_resources(match: dict | None, path: str, required: bool) -> list[FieldError]:
    if match is None:
        return [field_required(path, "")] if required else []
    errors = _rules(match.get("resourceRules"), f"{path}.resourceRules", named=True)
    errors += _rules(match.get("excludeResourceRules"), f"{path}.excludeResourceRules", named=True)
    if required and not match.get("resourceRules"):
        errors.append(field_required(f"{path}.resourceRules", ""))
    if match.get("matchPolicy") not in MATCH_POLICIES:
        errors.append(field_unsupported(f"{path}.matchPolicy", match.get("matchPolicy"), MATCH_POLICIES))
    return errors


class ValidatingAdmissionPolicyStrategy(Strategy):
    # pkg/registry/admissionregistration/validatingadmissionpolicy/strategy.go: the status (written
    # by the status controller, labkit.controllers.vapstatus) is cleared on create and kept on
    # update; validatingAdmissionPolicyStatusStrategy keeps the spec (and ResetObjectMetaForStatus)
    generation = True
    subresources = (StatusSubresource(keeps=RESET_META_FOR_STATUS),)

    def validate(self, obj):
        spec = obj.get("spec") or {}
        errors = _match_resources(spec.get("matchConstraints"), "spec.matchConstraints", True)
        if spec.get("failurePolicy") not in FAILURE_POLICIES:
            errors.append(field_unsupported("spec.failurePolicy", spec.get("failurePolicy"), FAILURE_POLICIES))
        if not spec.get("validations") and not spec.get("auditAnnotations"):
            errors.append(field_required("spec.validations", "validations or auditAnnotations must contain at "
                                                             "least one item"))
        for i, v in enumerate(spec.get("validations") or []):
            errors += _expression(v.get("expression"), f"spec.validations[{i}].expression", "bool")
            if v.get("messageExpression"):
                errors += _expression(v["messageExpression"], f"spec.validations[{i}].messageExpression",
                                      "string")
            if v.get("reason") not in (None, "Unauthorized", "Forbidden", "Invalid", "RequestEntityTooLarge"):
                errors.append(field_unsupported(f"spec.validations[{i}].reason", v.get("reason"),
                                                ["Forbidden", "Invalid", "RequestEntityTooLarge", "Unauthorized"]))
        for i, v in enumerate(spec.get("variables") or []):
            if not v.get("name"):
                errors.append(field_required(f"spec.variables[{i}].name", ""))
            errors += _expression(v.get("expression"), f"spec.variables[{i}].expression")
        errors += _match_conditions(spec.get("matchConditions"), "spec.matchConditions")
        return errors


class ValidatingAdmissionPolicyBindingStrategy(Strategy):
    generation = True

    def validate(self, obj):
        spec = obj.get("spec") or {}
        errors = []
        if not spec.get("policyName"):
            errors.append(field_required("spec.policyName", ""))
        actions = spec.get("validationActions") or []
        if not actions:
            errors.append(field_required("spec.validationActions", ""))
        for i, action in enumerate(actions):
            if action not in ("Audit", "Deny", "Warn"):
                errors.append(field_unsupported(f"spec.validationActions[{i}]", action, ["Audit", "Deny", "Warn"]))
        if "Deny" in actions and "Warn" in actions:
            errors.append(field_invalid("spec.validationActions", actions,
                                        "must not contain both Deny and Warn (repeating the same validation "
                                        "failure information in the API response and headers serves no purpose)"))
        ref = spec.get("paramRef")
        if ref is not None:
            if ref.get("name") and ref.get("selector") is not None:
                errors.append(field_forbidden("spec.paramRef.name", "name and selector are mutually exclusive"))
            if not ref.get("name") and ref.get("selector") is None:
                errors.append(field_required("spec.paramRef", "one of name or selector must be specified"))
            if ref.get("parameterNotFoundAction") not in ("Allow", "Deny"):
                errors.append(field_required("spec.paramRef.parameterNotFoundAction", "") if
                              ref.get("parameterNotFoundAction") is None else
                              field_unsupported("spec.paramRef.parameterNotFoundAction",
                                                ref.get("parameterNotFoundAction"), ["Allow", "Deny"]))
        errors += _match_resources(spec.get("matchResources"), "spec.matchResources", False)
        return errors


def admissionregistration_types() -> list[ResourceType]:
    rt = ResourceType
    group = "admissionregistration.k8s.io"
    return [
        rt(group, "v1", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration", False,
           MutatingWebhookConfigurationStrategy(), "mutatingwebhookconfiguration", categories=["api-extensions"]),
        rt(group, "v1", "validatingwebhookconfigurations", "ValidatingWebhookConfiguration", False,
           WebhookConfigurationStrategy(), "validatingwebhookconfiguration", categories=["api-extensions"]),
        rt(group, "v1", "validatingadmissionpolicies", "ValidatingAdmissionPolicy", False,
           ValidatingAdmissionPolicyStrategy(), "validatingadmissionpolicy", categories=["api-extensions"]),
        rt(group, "v1", "validatingadmissionpolicybindings", "ValidatingAdmissionPolicyBinding", False,
           ValidatingAdmissionPolicyBindingStrategy(), "validatingadmissionpolicybinding",
           categories=["api-extensions"]),
    ]
