"""Admission: the plugins kube-apiserver v1.34 runs on every write, in its fixed order.

What a plugin sees is `Attributes` (k8s.io/apiserver/pkg/admission/attributes.go,
attributesRecord): the operation (CREATE, UPDATE, DELETE), the kind and resource of the request
with its subresource, the name and namespace, the object and the old object, whether it is a dry
run, the operation's options (CreateOptions, UpdateOptions, DeleteOptions) and the requesting
user.

The order is pkg/kubeapiserver/options/plugins.go `AllOrderedPlugins` of v1.34: enabled plugins
run in that order whatever order --enable-admission-plugins names them in. Each takes part in the
mutating phase (Admit), the validating phase (Validate) or both. The registry runs them where the
REST handlers and the generic store run them (endpoints/handlers/create.go, update.go, patch.go,
delete.go; registry/rest/create.go, update.go, delete.go):

  create   decode and default -> mutating admission -> BeforeCreate (PrepareForCreate, Validate)
           -> validating admission -> storage
  update   (also patch and subresources such as status and scale) the same, the old object read
           first; a patch reaches admission as an UPDATE with UpdateOptions
  delete   (also each object of a delete-collection, whose attributes carry no name) mutating then
           validating admission on the stored object as oldObject, before the deletion starts

Mutating webhooks may ask to be called again: when a webhook with reinvocationPolicy IfNeeded
ran and a later one changed the object, the whole mutating phase runs a second time
(pkg/admission/reinvocation.go, reinvoker.Admit), in which webhooks are called again only if
they asked for it and were called in the first round.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from labkit.apiserver.errors import ApiError, forbidden
from labkit.apiserver.trace import Trace
from labkit.jsondata import json_copy

# pkg/kubeapiserver/options/plugins.go, AllOrderedPlugins (v1.34)
ALL_ORDERED_PLUGINS = (
    "AlwaysAdmit", "NamespaceAutoProvision", "NamespaceLifecycle", "NamespaceExists",
    "LimitPodHardAntiAffinityTopology", "LimitRanger", "ServiceAccount", "NodeRestriction",
    "TaintNodesByCondition", "AlwaysPullImages", "ImagePolicyWebhook", "PodSecurity", "PodNodeSelector",
    "Priority", "DefaultTolerationSeconds", "PodTolerationRestriction", "EventRateLimit",
    "ExtendedResourceToleration", "DefaultStorageClass", "StorageObjectInUseProtection",
    "OwnerReferencesPermissionEnforcement", "PersistentVolumeClaimResize", "RuntimeClass",
    "CertificateApproval", "CertificateSigning", "ClusterTrustBundleAttest", "CertificateSubjectRestriction",
    "DefaultIngressClass", "DenyServiceExternalIPs", "PodTopologyLabels",
    # "webhook, resourcequota, and deny plugins must go at the end"
    "MutatingAdmissionPolicy", "MutatingAdmissionWebhook", "ValidatingAdmissionPolicy",
    "ValidatingAdmissionWebhook", "ResourceQuota", "AlwaysDeny",
)

# DefaultOffAdmissionPlugins' complement: the plugins on without --enable-admission-plugins
DEFAULT_ENABLED = frozenset((
    "NamespaceLifecycle", "LimitRanger", "ServiceAccount", "DefaultStorageClass", "PersistentVolumeClaimResize",
    "DefaultTolerationSeconds", "MutatingAdmissionWebhook", "ValidatingAdmissionWebhook", "ResourceQuota",
    "StorageObjectInUseProtection", "Priority", "TaintNodesByCondition", "RuntimeClass", "CertificateApproval",
    "CertificateSigning", "ClusterTrustBundleAttest", "CertificateSubjectRestriction", "DefaultIngressClass",
    "PodSecurity", "PodTopologyLabels", "MutatingAdmissionPolicy", "ValidatingAdmissionPolicy",
))

# Enabled plugins that act only behind a feature gate that is off in v1.34 (pkg/features,
# kube_features.go): MutatingAdmissionPolicy is beta and off (its API admissionregistration.k8s.io/
# v1beta1 is not served either), PodTopologyLabelsAdmission is off.
GATED_OFF = {"MutatingAdmissionPolicy": "feature gate MutatingAdmissionPolicy is off by default in v1.34",
             "PodTopologyLabels": "feature gate PodTopologyLabelsAdmission is off by default in v1.34"}

# Enabled by default upstream, but not reconstructed here: what a request meets instead.
NOT_RECONSTRUCTED = {
    "DefaultStorageClass": "storage classes are not served",
    "PersistentVolumeClaimResize": "storage classes are not served",
    "RuntimeClass": "runtime classes are not served",
    "ClusterTrustBundleAttest": "cluster trust bundles are not served",
    "DefaultIngressClass": "ingresses are not served",
}


@dataclass
class Attributes:
    """admission.Attributes of one request (attributesRecord)."""
    operation: str                       # CREATE | UPDATE | DELETE
    rt: object                           # the ResourceType: resource and kind of the request
    namespace: str
    name: str
    obj: dict | None                     # the object (None for DELETE)
    old: dict | None = None              # the stored object (UPDATE, DELETE)
    subresource: str = ""
    kind: tuple[str, str, str] | None = None   # (group, version, kind) when not rt's (the Scale of scale)
    dry_run: bool = False
    options: dict | None = None          # CreateOptions | UpdateOptions | DeleteOptions
    user: object = None                  # handler.User: the authenticated or impersonated user
    trace: Trace = field(default_factory=Trace)
    warnings: list[str] = field(default_factory=list)   # sent back as Warning headers
    # reinvocation (pkg/admission/reinvocation.go): the round, and the mutating webhooks' state
    round: int = 0
    reinvoke: dict = field(default_factory=dict)
    # time.monotonic() when the request's time is up (filters/deadline.py; None: no deadline)
    deadline: float | None = None

    @property
    def gvk(self) -> tuple[str, str, str]:
        return self.kind or (self.rt.group, self.rt.version, self.rt.kind)

    @property
    def gvr(self) -> tuple[str, str, str]:
        return self.rt.group, self.rt.version, self.rt.resource

    def user_info(self) -> dict:
        """authenticationv1.UserInfo of the requesting user."""
        user = self.user
        if user is None:
            return {}
        info = {"username": user.name}
        if getattr(user, "uid", ""):
            info["uid"] = user.uid
        if user.groups:
            info["groups"] = list(user.groups)
        extra = getattr(user, "extra", None)
        if extra:
            info["extra"] = {k: list(v) for k, v in extra.items()}
        return info

    def admission_request(self, rt) -> dict:
        """admission.k8s.io/v1 AdmissionRequest without uid and objects (CreateV1AdmissionReview,
        cel.CreateAdmissionRequest): kind and resource as `rt` (the version a webhook or policy
        matched), requestKind and requestResource as requested."""
        request = {
            "kind": dict(zip(("group", "version", "kind"), self.gvk if rt is self.rt else (rt.group, rt.version,
                                                                                           rt.kind))),
            "resource": {"group": rt.group, "version": rt.version, "resource": rt.resource},
            "subResource": self.subresource,
            "requestKind": dict(zip(("group", "version", "kind"), self.gvk)),
            "requestResource": dict(zip(("group", "version", "resource"), self.gvr)),
            "requestSubResource": self.subresource,
            "name": self.name,
            "namespace": self.namespace,
            "operation": self.operation,
            "userInfo": self.user_info(),
            "dryRun": self.dry_run,
        }
        if self.options is not None:
            request["options"] = self.options
        return request

    def annotate(self, key: str, value: str, level: str | None = None) -> None:
        """AddAnnotation: an audit annotation of the request (the first value of a key stays);
        with `level` (AddAnnotationWithLevel), the audit event carries it only at that level or
        above (attributesRecord.getAnnotations(maxLevel)); the trace keeps it whatever the level."""
        if key not in self.trace.annotations and level is not None:
            self.trace.annotation_levels[key] = level
        self.trace.annotations.setdefault(key, value)


def forbidden_by(attrs: Attributes, message: str):
    """admission.NewForbidden: `<resource> "<name>" is forbidden: <message>` (403); a Pod still
    to be named by generateName is called by its prefix."""
    rt = attrs.rt
    meta = (attrs.obj or attrs.old or {}).get("metadata") or {}
    name = attrs.name or meta.get("name") or meta.get("generateName") or ""
    return forbidden(rt.resource, rt.group, name, message)


@dataclass
class Plugin:
    name: str
    admit: Callable[[Attributes], None] | None = None       # the mutating phase
    validate: Callable[[Attributes], None] | None = None    # the validating phase
    handles: tuple[str, ...] = ("CREATE", "UPDATE", "DELETE", "CONNECT")


class Chain:
    """The enabled plugins in AllOrderedPlugins' order (admission.chainAdmissionHandler), with the
    reinvocation of the mutating phase."""

    def __init__(self, plugins: list[Plugin]):
        rank = {name: i for i, name in enumerate(ALL_ORDERED_PLUGINS)}
        unknown = [p.name for p in plugins if p.name not in rank]
        if unknown:
            raise ValueError(f"admission plugins not in AllOrderedPlugins: {unknown}")
        self.plugins = sorted(plugins, key=lambda p: rank[p.name])

    def order(self) -> list[dict]:
        """Every plugin of AllOrderedPlugins with what labkit does with it (`labkit requests explain`)."""
        running = {p.name: p for p in self.plugins}
        rows = []
        for name in ALL_ORDERED_PLUGINS:
            if name in running:
                p = running[name]
                phases = [ph for ph, fn in (("mutating", p.admit), ("validating", p.validate)) if fn]
                rows.append({"name": name, "enabled": True, "state": "runs", "phases": phases})
            elif name in GATED_OFF:
                rows.append({"name": name, "enabled": True, "state": "inactive", "why": GATED_OFF[name]})
            elif name in DEFAULT_ENABLED:
                rows.append({"name": name, "enabled": True, "state": "not reconstructed",
                             "why": NOT_RECONSTRUCTED.get(name, "")})
            else:
                rows.append({"name": name, "enabled": False, "state": "off by default"})
        return rows

    def admit(self, attrs: Attributes) -> None:
        """The mutating phase (reinvoker.Admit): once, and a second time if a webhook asks."""
        self._run(attrs, "admit")
        if attrs.reinvoke.get("should_reinvoke"):
            attrs.round = 1
            self._run(attrs, "admit")

    def validate(self, attrs: Attributes) -> None:
        attrs.round = 0         # the validating phase runs once: its steps and annotations are round 0
        self._run(attrs, "validate")

    def _run(self, attrs: Attributes, phase: str) -> None:
        stage = "mutating-admission" if phase == "admit" else "validating-admission"
        # the object as the last plugin left it, which the trace shows each in-tree mutating plugin's
        # change against: copied once, and again only after a plugin changed it (or a webhook ran)
        before = None
        for plugin in self.plugins:
            fn = getattr(plugin, phase)
            if fn is None or attrs.operation not in plugin.handles:
                continue
            traced = phase == "admit" and not plugin.name.endswith("Webhook")
            if traced and before is None:
                before = json_copy(attrs.obj)
            try:
                fn(attrs)
            except ApiError as exc:
                attrs.trace.add(stage, plugin.name, "rejected", exc.message, code=exc.code, round=attrs.round)
                raise
            if traced:
                patch = [] if before == attrs.obj else json_patch_between(before, attrs.obj)
                if patch:
                    before = None
                attrs.trace.add(stage, plugin.name, "mutated" if patch else "admitted",
                                f"{plugin.name} changed the object" if patch else
                                f"{plugin.name} admitted the request unchanged", round=attrs.round,
                                **({"patch": patch} if patch else {}))
                continue
            before = None           # a webhook may have changed the object
            if not plugin.name.endswith("Webhook") and plugin.name != "ValidatingAdmissionPolicy":
                attrs.trace.add(stage, plugin.name, "admitted", f"{plugin.name} admitted the request",
                                round=attrs.round)


def json_patch_between(before, after, path: str = "") -> list[dict]:
    """A JSON patch (RFC 6902) that turns `before` into `after`: how the trace shows what an
    in-tree plugin changed (lists are replaced whole)."""
    if isinstance(before, dict) and isinstance(after, dict):
        ops = []
        for key in before:
            pointer = f"{path}/{str(key).replace('~', '~0').replace('/', '~1')}"
            if key not in after:
                ops.append({"op": "remove", "path": pointer})
            else:
                ops += json_patch_between(before[key], after[key], pointer)
        for key in after:
            if key not in before:
                pointer = f"{path}/{str(key).replace('~', '~0').replace('/', '~1')}"
                ops.append({"op": "add", "path": pointer, "value": json_copy(after[key])})
        return ops
    if before == after:
        return []
    return [{"op": "replace", "path": path, "value": json_copy(after)}]
