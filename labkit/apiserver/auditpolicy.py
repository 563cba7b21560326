"""The audit policy (audit.k8s.io/v1 Policy): which requests are audited at which level and
which stages are left out, decided by the first rule that matches
(apiserver pkg/audit/policy/checker.go: `NewPolicyRuleEvaluator`, `EvaluatePolicyRule`,
`ruleMatches`, `ruleMatchesResource`, `ruleMatchesNonResource`; validation as
pkg/apis/audit/validation/validation.go `ValidatePolicy`).

The server reads its policy from `audit-policy.yaml` in its state directory when it starts
(kube-apiserver: --audit-policy-file). Without one it writes `DEFAULT_POLICY` there: every
request at Metadata, writes at Request (so the request body — DeleteOptions, patches, the
objects sent — is in the log), and no RequestReceived events (one event per request, two for a
watch: ResponseStarted and ResponseComplete).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from labkit.apiserver.authorizer import Attributes
from labkit.errors import LabkitError

LEVELS = ("None", "Metadata", "Request", "RequestResponse")
STAGES = ("RequestReceived", "ResponseStarted", "ResponseComplete", "Panic")
POLICY_FILE = "audit-policy.yaml"

DEFAULT_POLICY = """\
# labkit's default audit policy (audit.k8s.io/v1): the first rule that matches a request decides.
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
# writes with their request bodies
- level: Request
  verbs: [create, update, patch, delete, deletecollection]
# everything else: who did what to which object, and the answer's code
- level: Metadata
"""


@dataclass
class RequestAuditConfig:
    level: str = "None"
    omit_stages: frozenset = frozenset()
    omit_managed_fields: bool = False
    rule: int | None = None          # the index of the rule that matched


@dataclass
class Rule:
    level: str
    users: list[str] = field(default_factory=list)
    user_groups: list[str] = field(default_factory=list)
    verbs: list[str] = field(default_factory=list)
    resources: list[dict] = field(default_factory=list)       # {group, resources, resourceNames}
    namespaces: list[str] = field(default_factory=list)
    non_resource_urls: list[str] = field(default_factory=list)
    omit_stages: frozenset = frozenset()
    omit_managed_fields: bool | None = None

    def matches(self, a: Attributes) -> bool:
        """checker.go `ruleMatches` (a request that failed authentication has no user: "")."""
        if self.users and (not a.user or a.user not in self.users):
            return False
        if self.user_groups and (not a.user or not any(g in self.user_groups for g in a.groups)):
            return False
        if self.verbs and a.verb not in self.verbs:
            return False
        if self.namespaces or self.resources:
            return self._matches_resource(a)
        if self.non_resource_urls:
            return not a.resource and any(_path_matches(a.path, spec) for spec in self.non_resource_urls)
        return True

    def _matches_resource(self, a: Attributes) -> bool:
        """checker.go `ruleMatchesResource`: non-namespaced resources have namespace ""."""
        if not a.resource:
            return False
        if self.namespaces and a.namespace not in self.namespaces:
            return False
        if not self.resources:
            return True
        combined = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
        for gr in self.resources:
            if gr.get("group", "") != a.group:
                continue
            names = gr.get("resources") or []
            if not names:
                return True
            allowed_names = gr.get("resourceNames") or []
            if allowed_names and a.name not in allowed_names:
                continue
            for res in names:
                if res in (combined, "*"):
                    return True
                if a.subresource and res.startswith("*/") and a.subresource == res[2:]:
                    return True
                if res.endswith("/*") and a.resource == res[:-2]:
                    return True
        return False


def _path_matches(path: str, spec: str) -> bool:
    """checker.go `pathMatches`: exact, `*`, or a prefix ending in `*`."""
    return spec == "*" or spec == path or (spec.endswith("*") and path.startswith(spec.rstrip("*")))


class Policy:
    def __init__(self, rules: list[Rule], omit_stages: frozenset = frozenset(), omit_managed_fields: bool = False):
        # NewPolicyRuleEvaluator: the policy's omitStages are added to every rule's
        self.rules = [Rule(**{**r.__dict__, "omit_stages": frozenset(r.omit_stages) | omit_stages}) for r in rules]
        self.omit_stages = frozenset(omit_stages)
        self.omit_managed_fields = omit_managed_fields

    def evaluate(self, attributes: Attributes) -> RequestAuditConfig:
        """checker.go `EvaluatePolicyRule`: the first matching rule, else level None."""
        for i, rule in enumerate(self.rules):
            if rule.matches(attributes):
                omit = self.omit_managed_fields if rule.omit_managed_fields is None else rule.omit_managed_fields
                return RequestAuditConfig(rule.level, rule.omit_stages, omit, i)
        return RequestAuditConfig("None", self.omit_stages, self.omit_managed_fields)

    @classmethod
    def from_dict(cls, doc) -> "Policy":
        errors = validate(doc)
        if errors:
            raise ValueError("; ".join(errors))
        rules = [Rule(level=r["level"], users=list(r.get("users") or []), user_groups=list(r.get("userGroups") or []),
                      verbs=list(r.get("verbs") or []), resources=list(r.get("resources") or []),
                      namespaces=list(r.get("namespaces") or []),
                      non_resource_urls=list(r.get("nonResourceURLs") or []),
                      omit_stages=frozenset(r.get("omitStages") or []),
                      omit_managed_fields=r.get("omitManagedFields"))
                 for r in doc.get("rules") or []]
        return cls(rules, frozenset(doc.get("omitStages") or []), bool(doc.get("omitManagedFields", False)))


def validate(doc) -> list[str]:
    """validation.go `ValidatePolicy` (its field errors, one line each)."""
    if not isinstance(doc, dict):
        return ["the audit policy must be a mapping (an audit.k8s.io/v1 Policy)"]
    errors = []
    if doc.get("apiVersion") != "audit.k8s.io/v1" or doc.get("kind") != "Policy":
        errors.append(f"expected apiVersion audit.k8s.io/v1 and kind Policy, found "
                      f"{doc.get('apiVersion')!r} and {doc.get('kind')!r}")
    errors += _stage_errors("omitStages", doc.get("omitStages"))
    rules = doc.get("rules")
    if not isinstance(rules, list):
        return errors + ["rules: Required value: a policy needs a list of rules"]
    for i, rule in enumerate(rules):
        path = f"rules[{i}]"
        if not isinstance(rule, dict):
            errors.append(f"{path}: Invalid value: a rule is a mapping")
            continue
        level = rule.get("level")
        if not level:
            errors.append(f"{path}.level: Required value")
        elif level not in LEVELS:
            errors.append(f'{path}.level: Unsupported value: "{level}": supported values: '
                          + ", ".join(f'"{v}"' for v in LEVELS))
        errors += _stage_errors(f"{path}.omitStages", rule.get("omitStages"))
        if rule.get("nonResourceURLs") and (rule.get("resources") or rule.get("namespaces")):
            errors.append(f"{path}.nonResourceURLs: Invalid value: rules cannot apply to both regular resources "
                          "and non-resource URLs")
        for j, url in enumerate(rule.get("nonResourceURLs") or []):
            if not isinstance(url, str) or not url:
                errors.append(f"{path}.nonResourceURLs[{j}]: Required value")
            elif "*" in url.rstrip("*") or (url != "*" and not url.startswith("/")):
                errors.append(f'{path}.nonResourceURLs[{j}]: Invalid value: "{url}": non-resource URL rules must '
                              "begin with a '/' character and may only have a '*' at the end")
        for j, gr in enumerate(rule.get("resources") or []):
            if not isinstance(gr, dict):
                errors.append(f"{path}.resources[{j}]: Invalid value: a mapping of group, resources, resourceNames")
            elif gr.get("resourceNames") and any("*" in r for r in gr.get("resources") or []):
                errors.append(f"{path}.resources[{j}].resourceNames: Invalid value: using resource names with "
                              "wildcard resources is not supported")
    return errors


def _stage_errors(path: str, stages) -> list[str]:
    return [f'{path}[{i}]: Unsupported value: "{s}": supported values: ' + ", ".join(f'"{v}"' for v in STAGES)
            for i, s in enumerate(stages or []) if s not in STAGES]


def load(state_dir: Path) -> Policy:
    """The policy in the state directory, written from DEFAULT_POLICY when there is none."""
    path = Path(state_dir) / POLICY_FILE
    if not path.exists():
        path.write_text(DEFAULT_POLICY)
        path.chmod(0o600)
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise LabkitError(f"audit policy {path} is not YAML: {exc}")
    try:
        return Policy.from_dict(doc)
    except ValueError as exc:
        raise LabkitError(f"audit policy {path} is invalid: {exc}")
