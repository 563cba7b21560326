"""ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1, GA since v1.30): CEL validations
of the policies, applied through their ValidatingAdmissionPolicyBindings.

Follows k8s.io/apiserver v1.34:
- policy/generic/policy_dispatcher.go (Dispatch, CollectParams): a policy applies where its
  matchConstraints match, through each binding naming it whose matchResources match; a policy
  with paramKind is evaluated once per param the binding's paramRef finds (by name or selector,
  in the paramRef's namespace or the request's), none found with parameterNotFoundAction Deny is
  a configuration error; configuration errors read `failed to configure policy: ...` /
  `failed to configure binding: ...` and follow the policy's failurePolicy;
- policy/matching/matching.go (Matcher.Matches): namespaceSelector, objectSelector,
  excludeResourceRules, resourceRules (with resourceNames) and matchPolicy Equivalent, as for
  webhooks;
- policy/validating/validator.go (validator.Validate): matchConditions first (an error follows
  failurePolicy), then each validation: true admits; false denies with messageExpression's value,
  else message, else `failed expression: <expression>`; an error denies with the error under
  failurePolicy Fail and admits under Ignore;
- policy/validating/dispatcher.go (dispatcher.Dispatch): per binding, validationActions Deny
  (the first denial is the answer: `ValidatingAdmissionPolicy '<p>' with binding '<b>' denied
  request: <message>`, reason Invalid (422) unless the validation's reason says otherwise, with the
  message as a cause), Warn (a warning `Validation failed for ValidatingAdmissionPolicy '<p>' with
  binding '<b>': <message>`), Audit (the audit annotation
  validation.policy.admission.k8s.io/validation_failure); auditAnnotations published as
  `<policy>/<key>`.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict

from labkit.apiserver.admission import Attributes
from labkit.apiserver.admission.webhook import (_equivalents, _converted, is_exempt, namespace_selector_matches,
                                                object_selector_matches, rule_matches)
from labkit.apiserver.errors import ApiError, go_quote, qualified
from labkit.apiserver.selectors import LabelSelector

POLICY_KEY = "admissionregistration.k8s.io/validatingadmissionpolicies"
BINDING_KEY = "admissionregistration.k8s.io/validatingadmissionpolicybindings"
VALIDATION_FAILURE = "validation.policy.admission.k8s.io/validation_failure"
REASON_CODES = {"Unauthorized": 401, "Forbidden": 403, "Invalid": 422, "RequestEntityTooLarge": 413}


class ConfigError(Exception):
    pass


# ValidatingPolicies._evaluate's answers, least recently used first: (the JSON of the spec and the
# activation's data) -> (decisions, audit annotations' values)
_DECISIONS: "OrderedDict[str, tuple[list, dict]]" = OrderedDict()
_DECISIONS_MAX = 2048
_DECISIONS_LOCK = threading.Lock()


def _rules_match(rules: list[dict], attrs: Attributes, gvr=None) -> bool:
    """matchesResourceRules: a NamedRuleWithOperations and, if given, its resourceNames."""
    gvr = gvr or attrs.gvr
    for rule in rules or []:
        names = rule.get("resourceNames") or []
        if rule_matches(rule, attrs.operation, gvr, attrs.subresource, attrs.namespace) and \
                (not names or attrs.name in names):
            return True
    return False


def resources_match(registry, match: dict, attrs: Attributes):
    """Matcher.Matches: the ResourceType the request matched as (another version under
    Equivalent), or None. A selector that cannot be evaluated (its namespace not found) is an
    error only for a request the rules match: "now that we know this applies to this request
    otherwise, if there were selector errors, return them"."""
    try:
        ns_error = None
        if not namespace_selector_matches(registry.store, match.get("namespaceSelector"), attrs):
            return None
    except ApiError as exc:
        ns_error = exc
    try:
        object_error = None
        if not object_selector_matches(match.get("objectSelector"), attrs):
            return None
    except ApiError as exc:
        object_error = exc
    rt = _rules_matched(registry, match, attrs)
    if rt is not None and (ns_error or object_error):
        raise ns_error or object_error
    return rt


def _rules_matched(registry, match: dict, attrs: Attributes):
    """matchesResourceRules of excludeResourceRules, then of resourceRules (none: every request)."""
    equivalent = (match.get("matchPolicy") or "Equivalent") == "Equivalent"
    candidates = [attrs.rt] + (_equivalents(registry, attrs.rt) if equivalent else [])
    for rt in candidates:
        if _rules_match(match.get("excludeResourceRules"), attrs, (rt.group, rt.version, rt.resource)):
            return None
    if not match.get("resourceRules"):
        return attrs.rt
    for rt in candidates:
        if _rules_match(match["resourceRules"], attrs, (rt.group, rt.version, rt.resource)):
            return rt
    return None


class ValidatingPolicies:
    name = "ValidatingAdmissionPolicy"

    def __init__(self, registry):
        self.registry = registry

    def validate(self, attrs: Attributes) -> None:
        if is_exempt(attrs):
            return
        store = self.registry.store
        # the store's shared objects (only read), as webhook.configurations reads them
        policies = sorted((o for _, o, _ in store.scan(POLICY_KEY)[0]), key=lambda p: p["metadata"]["name"])
        if not policies:
            return
        bindings = sorted((o for _, o, _ in store.scan(BINDING_KEY)[0]), key=lambda b: b["metadata"]["name"])
        denials: list[tuple[dict, dict | None, str, str]] = []     # (policy, binding, message, reason)
        for policy in policies:
            spec = policy.get("spec") or {}
            fail = (spec.get("failurePolicy") or "Fail") == "Fail"
            name = policy["metadata"]["name"]
            try:
                rt = resources_match(self.registry, spec.get("matchConstraints") or {}, attrs)
            except ApiError as exc:
                if fail:
                    denials.append((policy, None, f"failed to configure policy: {exc.message}", ""))
                continue
            if rt is None:
                continue
            annotations: dict[str, list[str]] = {}
            for binding in bindings:
                bspec = binding.get("spec") or {}
                if bspec.get("policyName") != name:
                    continue
                bname = binding["metadata"]["name"]
                try:
                    if bspec.get("matchResources") is not None and \
                            resources_match(self.registry, bspec["matchResources"], attrs) is None:
                        continue
                    params = self._params(spec.get("paramKind"), bspec.get("paramRef"), attrs)
                except (ApiError, ConfigError) as exc:
                    message = exc.message if isinstance(exc, ApiError) else str(exc)
                    if fail:
                        denials.append((policy, binding, f"failed to configure binding: {message}", ""))
                    attrs.trace.add("validating-admission", f"{name}/{bname}", "error",
                                    f"failed to configure binding: {message}")
                    continue
                versioned = attrs if rt is attrs.rt else _converted(self.registry, attrs, rt)
                namespace = self._namespace(attrs)
                for param in params:
                    for index, action, message, reason in self._evaluate(spec, versioned, rt, param, namespace,
                                                                          annotations):
                        self._act(policy, binding, index, action, message, reason, attrs, denials)
            for key, values in annotations.items():
                attrs.annotate(f"{name}/{key}", ", ".join(values))
        if denials:
            policy, binding, message, reason = denials[0]
            raise self._denial(policy, binding, message, reason, attrs)

    def _namespace(self, attrs: Attributes) -> dict | None:
        # "the namespace object has the namespace of itself": unset for Namespace requests
        if not attrs.namespace or attrs.gvk == ("", "v1", "Namespace"):
            return None
        return self.registry.store.get("/namespaces", "", attrs.namespace)

    def _params(self, kind: dict | None, ref: dict | None, attrs: Attributes) -> list:
        """CollectParams."""
        if not kind or not ref:
            return [None]
        rt = self.registry.catalog.for_kind(kind.get("apiVersion", ""), kind.get("kind", ""))
        if rt is None:
            raise ConfigError(f"paramKind kind `{kind.get('apiVersion')}, Kind={kind.get('kind')}` not known")
        namespace = ""
        if rt.namespaced:
            namespace = ref.get("namespace") or attrs.namespace
            if not namespace:
                raise ConfigError("cannot use namespaced paramRef in policy binding that matches cluster-scoped "
                                  "resources")
        elif ref.get("namespace"):
            raise ConfigError("paramRef.namespace must not be provided for a cluster-scoped `paramKind`")
        store = self.registry.store
        if ref.get("name"):
            found = store.get(rt.storage_key, namespace, ref["name"])
            params = [self.registry.present(rt, found)] if found is not None else []
        elif ref.get("selector") is not None:
            selector = LabelSelector.from_label_selector(ref["selector"]) or LabelSelector([])
            params = [self.registry.present(rt, o) for o in store.list(rt.storage_key, namespace or None)[0]
                      if selector.matches(o["metadata"].get("labels"))]
        else:
            raise ConfigError("one of name or selector must be provided")
        if not params and ref.get("parameterNotFoundAction") == "Deny":
            raise ConfigError("no params found for policy binding with `Deny` parameterNotFoundAction")
        return params

    @staticmethod
    def _evaluate(spec: dict, attrs: Attributes, rt, param, namespace, annotations: dict):
        """validator.Validate: (expression index, action, message, reason) of each decision; the
        audit annotations' values added to `annotations`.

        The decisions are a function of the policy's spec and of the activation's data alone (the
        object, the old object, the request as `rt` names it, the param, the namespace): the same
        ones asked about again (labkit's reconstruction judges the same Pods under policies that
        differ in a binding only) are taken from _DECISIONS rather than evaluated by celpy again."""
        from labkit.apiserver.admission import cel      # celpy takes seconds to import: only when a policy runs
        try:
            data = json.dumps([attrs.obj, attrs.old, attrs.admission_request(rt), param,
                               cel.namespace_object(namespace)], sort_keys=True, separators=(",", ":"))
            key = json.dumps(spec, sort_keys=True, separators=(",", ":")) + data
        except (TypeError, ValueError):      # not plain JSON data: evaluated, not kept
            data = key = None
        with _DECISIONS_LOCK:
            found = _DECISIONS.get(key) if key is not None else None
            if found is not None:
                _DECISIONS.move_to_end(key)
        if found is None:
            decided = ValidatingPolicies._decide(spec, attrs, rt, param, namespace, cel, data)
            found = (decided[:-1], decided[-1])
            if key is not None:
                with _DECISIONS_LOCK:
                    _DECISIONS[key] = found
                    if len(_DECISIONS) > _DECISIONS_MAX:
                        _DECISIONS.popitem(last=False)
        decisions, produced = found
        for name, values in produced.items():
            kept = annotations.setdefault(name, [])
            for value in values:
                if value not in kept:
                    kept.append(value[:10 * 1024])
        return list(decisions)

    @staticmethod
    def _decide(spec: dict, attrs: Attributes, rt, param, namespace, cel, data: str | None = None) -> list:
        """_evaluate's work: the decisions, then (last) the audit annotations' values it produced
        (key -> every value, in order). `data`: the JSON of the activation's data, which lets
        cel.evaluate give the result of an expression asked about the same data before (under
        another policy: a near-miss that changed another of its expressions)."""
        annotations: dict[str, list[str]] = {}
        fail = (spec.get("failurePolicy") or "Fail") == "Fail"
        error_action = "Deny" if fail else "Admit"
        act = cel.Activation(attrs, rt, param, namespace)
        conditions = spec.get("matchConditions") or []
        variables = spec.get("variables") or []
        # the activation before the variables are added (the match conditions'), and after
        before = None if data is None else "match " + data
        after = None if data is None else json.dumps(variables, sort_keys=True, separators=(",", ":")) + data
        if conditions:
            try:
                if not cel.match_conditions(conditions, attrs, rt, act=act, memo=before):
                    return [annotations]
            except cel.EvaluationError as exc:
                return [(0, error_action, str(exc), ""), annotations]
        cel.add_variables(act, variables, memo=after)
        decisions = []
        for index, validation in enumerate(spec.get("validations") or []):
            expression = validation.get("expression", "")
            try:
                value = cel.evaluate(expression, act, after)
                if not isinstance(value, cel.celtypes.BoolType):
                    raise cel.EvaluationError(f"expression '{expression}' resulted in error: no such overload")
            except cel.EvaluationError as exc:
                decisions.append((index, error_action, str(exc), ""))
                continue
            if value:
                decisions.append((index, "Admit", "", ""))
                continue
            message = ""
            if validation.get("messageExpression"):
                try:
                    result = cel.evaluate(validation["messageExpression"], act, after)
                    if isinstance(result, str):       # celpy's StringType, or str from a concatenation
                        message = str(result).strip()
                        if "\n" in message or len(message) > 5 * 1024:
                            message = ""
                except cel.EvaluationError:
                    message = ""
            if not message and validation.get("message"):
                message = validation["message"].strip()
            if not message:
                message = f"failed expression: {expression.strip()}"
            decisions.append((index, "Deny", message, validation.get("reason") or "Invalid"))
        for annotation in spec.get("auditAnnotations") or []:
            try:
                value = cel.evaluate(annotation.get("valueExpression", ""), act, after)
            except cel.EvaluationError as exc:
                if fail:
                    decisions.append((0, "Deny", str(exc), ""))
                continue
            if value is None:
                continue
            if not isinstance(value, str):
                if fail:
                    decisions.append((0, "Deny", f"valueExpression '{annotation.get('valueExpression')}' resulted "
                                                 f"in unsupported return type: {type(value).__name__}. Return type "
                                                 "must be either string or null.", ""))
                continue
            # each value in order; _evaluate adds it to the request's (once, at most 10 KiB of it)
            annotations.setdefault(annotation.get("key", ""), []).append(str(value))
        return decisions + [annotations]

    @staticmethod
    def _act(policy, binding, index, action, message, reason, attrs: Attributes, denials: list) -> None:
        pname, bname = policy["metadata"]["name"], binding["metadata"]["name"]
        step = f"{pname}/{bname}"
        if action == "Admit":
            if message:     # an error ignored under failurePolicy Ignore
                attrs.trace.add("validating-admission", step, "admitted",
                                f"validation {index} failed to evaluate ({message}); failurePolicy Ignore admits")
            else:
                attrs.trace.add("validating-admission", step, "admitted", f"validation {index} holds")
            return
        actions = (binding.get("spec") or {}).get("validationActions") or []
        for what in actions:
            if what == "Deny":
                denials.append((policy, binding, message, reason))
                attrs.trace.add("validating-admission", step, "rejected", message, expressionIndex=index)
            elif what == "Warn":
                attrs.warnings.append(f"Validation failed for ValidatingAdmissionPolicy '{pname}' with binding "
                                      f"'{bname}': {message}")
                attrs.trace.add("validating-admission", step, "warned", message, expressionIndex=index)
            elif what == "Audit":
                attrs.annotate(VALIDATION_FAILURE, json.dumps(
                    [{"message": message, "policy": pname, "binding": bname, "expressionIndex": index,
                      "validationActions": actions}], separators=(",", ":")))
                attrs.trace.add("validating-admission", step, "audited", message, expressionIndex=index)

    @staticmethod
    def _denial(policy, binding, message, reason, attrs: Attributes) -> ApiError:
        """admission.NewForbidden with the reason (and code) the validation chose."""
        pname = policy["metadata"]["name"]
        if binding is not None:
            text = f"ValidatingAdmissionPolicy '{pname}' with binding '{binding['metadata']['name']}' denied " \
                   f"request: {message}"
        else:
            text = f"ValidatingAdmissionPolicy '{pname}' denied request: {message}"
        reason = reason or "Invalid"
        rt = attrs.rt
        # extractResourceName: the name, else the object's name or generateName, else "Unknown"
        meta = (attrs.obj or {}).get("metadata") or {}
        name = attrs.name or meta.get("name") or meta.get("generateName") or "Unknown"
        full = f"{qualified(rt.resource, rt.group)} {go_quote(name)} is forbidden: {text}"
        details = {"name": name, "group": rt.group, "kind": rt.resource, "causes": [{"message": text}]}
        return ApiError(REASON_CODES.get(reason, 422), reason, full, {k: v for k, v in details.items() if v})
