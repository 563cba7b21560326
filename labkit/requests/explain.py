"""`labkit requests explain`: one request's way through the API server, stage by stage.

The stages and what each decided come from the server's traces (`GET /labkit/v1/traces`, see
labkit.apiserver.trace): every stage of the pipeline records its decision in plain sentences as it
makes it. The audit event of the same request (matched by audit ID) adds what the audit log kept:
the level, the stage, the user and the annotations that authorization and admission wrote, as
kube-apiserver's audit filter records them (staging/src/k8s.io/apiserver/pkg/endpoints/filters/audit.go).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from labkit.apiserver.trace import STAGES

TITLES = {"authentication": "authentication", "impersonation": "impersonation", "authorization": "authorization",
          "mutating-admission": "mutating admission", "validation": "validation",
          "validating-admission": "validating admission", "storage": "storage", "audit": "audit"}
# where a stage stands in kube-apiserver (staging/src/k8s.io/apiserver/pkg/server/config.go
# DefaultBuildHandlerChain for the filters; pkg/endpoints/handlers/create.go etc. for the rest), and
# the module of labkit's API server that reconstructs it (the filters are composed in
# labkit.apiserver.filters.chain in the same order)
WHERE = {"authentication": ("filter WithAuthentication", "labkit.apiserver.filters.authentication"),
         "audit": ("filter WithAudit", "labkit.apiserver.filters.audit"),
         "impersonation": ("filter WithImpersonation", "labkit.apiserver.filters.impersonation"),
         "authorization": ("filter WithAuthorization", "labkit.apiserver.filters.authorization"),
         "mutating-admission": ("REST handler: admission.Admit", "labkit.apiserver.admission"),
         "validation": ("REST handler: strategy Validate", "labkit.apiserver.registry"),
         "validating-admission": ("REST handler: admission.Validate", "labkit.apiserver.admission"),
         "storage": ("REST handler: storage (etcd)", "labkit.apiserver.registry.store")}


@dataclass
class Explained:
    audit_id: str
    steps: list[dict] = field(default_factory=list)
    annotations: dict = field(default_factory=dict)
    event: dict | None = None        # the request's audit event (ResponseComplete, else the last one)

    def as_dict(self) -> dict:
        return {"auditID": self.audit_id, "steps": self.steps, "annotations": self.annotations, "event": self.event}


def events_by_id(events: list[dict]) -> dict[str, dict]:
    """The last audit event of each audit ID (ResponseComplete comes after RequestReceived)."""
    found: dict[str, dict] = {}
    for e in events:
        if e.get("auditID"):
            found[e["auditID"]] = e
    return found


def combine(traces: list[dict], events: list[dict]) -> list[Explained]:
    by_id = events_by_id(events)
    return [Explained(t.get("auditID", ""), list(t.get("steps") or []), dict(t.get("annotations") or {}),
                      by_id.get(t.get("auditID", ""))) for t in traces]


def is_kubectl(item: Explained) -> bool:
    return "kubectl" in ((item.event or {}).get("userAgent") or "")


def is_resource_request(item: Explained) -> bool:
    return bool((item.event or {}).get("objectRef"))


def headline(item: Explained) -> str:
    e = item.event or {}
    ref = e.get("objectRef") or {}
    what = ref.get("resource", "")
    if ref.get("subresource"):
        what += "/" + ref["subresource"]
    if ref.get("namespace"):
        what = f"{what} in {ref['namespace']}" if not ref.get("name") else f"{what} {ref['namespace']}/{ref['name']}"
    elif ref.get("name"):
        what += " " + ref["name"]
    code = (e.get("responseStatus") or {}).get("code")
    user = (e.get("user") or {}).get("username", "?")
    imp = (e.get("impersonatedUser") or {}).get("username")
    who = f"{user} as {imp}" if imp else user
    verb = e.get("verb", "?")
    target = what or e.get("requestURI", "?")
    return f"{verb} {target} by {who} -> {code if code is not None else '?'}"


def _short(value, limit: int = 400) -> str:
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    return text if len(text) <= limit else text[:limit] + "…"


def render(items: list[Explained]) -> str:
    if not items:
        return "no request to explain (the server keeps the newest 1000)\n"
    out = []
    for item in items:
        e = item.event or {}
        out.append(f"{headline(item)}\n  audit ID {item.audit_id}   {e.get('requestURI', '')}\n")
        steps = {stage: [s for s in item.steps if s.get("stage") == stage] for stage in STAGES}
        impersonated = (e.get("impersonatedUser") or {}).get("username")
        if impersonated and not steps["impersonation"]:
            steps["impersonation"] = [{"stage": "impersonation", "name": "Impersonate-User",
                                       "outcome": f"acts as {impersonated}",
                                       "detail": "the audit event's impersonatedUser; authorization judges that user"}]
        for stage in STAGES:
            if stage == "audit":
                continue
            for s in steps[stage]:
                line = f"  {TITLES[stage]:<22}{s.get('name', '')}: {s.get('outcome', '')}"
                out.append(line + "\n")
                if s.get("detail"):
                    out.append(f"  {'':<22}  {s['detail']}\n")
                data = s.get("data") or {}
                if data.get("patch") is not None:
                    out.append(f"  {'':<22}  patch: {_short(data['patch'])}\n")
        if not steps["storage"]:
            out.append(_result_line(item))
        out.append(_audit_lines(item, steps["audit"]))
        out.append("\n")
    return "".join(out)


WRITES = ("create", "update", "patch", "delete", "deletecollection")


def _result_line(item: Explained) -> str:
    """What became of the request, from its audit event (when no stage recorded a storage step)."""
    e = item.event or {}
    code = (e.get("responseStatus") or {}).get("code")
    if code is None:
        return ""
    if code >= 400:
        return f"  {'result':<22}refused with {code}: nothing was stored\n"
    if e.get("verb") in WRITES:
        dry = "dryRun=All" in (e.get("requestURI") or "")
        return f"  {'result':<22}" + ("a dry run: validated and admitted, nothing stored\n" if dry else
                                      f"{code}: written to storage\n")
    return f"  {'result':<22}{code}: read from storage\n"


def _audit_lines(item: Explained, steps: list[dict]) -> str:
    e = item.event
    lines = []
    for s in steps:
        lines.append(f"  {'audit':<22}{s.get('name', '')}: {s.get('outcome', '')}" +
                     (f" — {s['detail']}" if s.get("detail") else "") + "\n")
    if e is None:
        lines.append(f"  {'audit':<22}no event in the audit log (the policy's level for it is None)\n")
        return "".join(lines)
    kept = [k for k in ("requestObject", "responseObject") if k in e]
    lines.append(f"  {'audit':<22}level {e.get('level', '?')}, stage {e.get('stage', '?')}"
                 + (f", keeps {' and '.join(kept)}" if kept else "") + "\n")
    status = e.get("responseStatus") or {}
    if status.get("message"):
        lines.append(f"  {'':<22}  {status.get('code')}: {status['message']}\n")
    for key, value in sorted((e.get("annotations") or {}).items()):
        lines.append(f"  {'':<22}  {key} = {_short(value, 300)}\n")
    return "".join(lines)
