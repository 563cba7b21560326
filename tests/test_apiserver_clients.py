"""The `kubernetes` client (typed and dynamic) and kubernetes_asyncio (typed and dynamic) run the
same life of an object — create, get, list, merge patch, server-side apply, replace, delete, and a
watch that sees all of it — against every kind the embedded server serves, over HTTPS."""

from __future__ import annotations

import asyncio
import base64
import re

import pytest
from kubernetes import client as k8s, config as k8s_config, dynamic, watch as k8s_watch

from labkit.apiserver.registry import catalog as kinds
from labkit.apiserver.resources import ORPHAN_DEPENDENTS
from labkit.apiserver.storageprotection import FINALIZERS as PROTECTION_FINALIZERS
from labkit.apiserver.server import EmbeddedServer
from support import host_lock

TEMPLATE = {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}
JOB_TEMPLATE = {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1.36"}]}}
SELECTOR = {"matchLabels": {"app": "x"}}
REF = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
WIDGETS = {"metadata": {"name": "widgets.example.com"}, "spec": {
    "group": "example.com", "scope": "Namespaced", "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
    "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
        "type": "object", "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}]}}


UNUSED_RULE = {"operations": ["CONNECT"], "apiGroups": ["example.com"], "apiVersions": ["v1"], "resources": ["nothing"]}
UNUSED_WEBHOOK = {"name": "unused.example.com", "clientConfig": {"url": "https://127.0.0.1:1/unused"},
                  "rules": [UNUSED_RULE], "sideEffects": "None", "admissionReviewVersions": ["v1"]}


def samples(ns: str, tag: str) -> dict[tuple[str, str], dict]:
    """A minimal valid object of every served kind, by (apiVersion, resource)."""
    return {
        ("v1", "namespaces"): {"metadata": {"name": f"space-{tag}"}},
        ("v1", "pods"): {"metadata": {"name": "p"}, **{"spec": TEMPLATE["spec"]}},
        ("v1", "replicationcontrollers"): {"metadata": {"name": "rc"}, "spec": {
            "replicas": 0, "selector": {"app": "x"}, "template": TEMPLATE}},
        ("v1", "configmaps"): {"metadata": {"name": "cm"}, "data": {"a": "b"}},
        ("v1", "secrets"): {"metadata": {"name": "s"}, "stringData": {"a": "b"}},
        ("v1", "services"): {"metadata": {"name": "svc"}, "spec": {"ports": [{"port": 80}], "selector": {"app": "x"}}},
        ("v1", "serviceaccounts"): {"metadata": {"name": "sa"}},
        ("v1", "events"): {"metadata": {"name": "ev"}, "involvedObject": {"kind": "Pod", "name": "p", "namespace": ns},
                           "reason": "Testing", "message": "a test", "type": "Normal"},
        ("apps/v1", "deployments"): {"metadata": {"name": "web"}, "spec": {
            "replicas": 0, "selector": SELECTOR, "template": TEMPLATE}},
        ("apps/v1", "replicasets"): {"metadata": {"name": "rs"}, "spec": {
            "replicas": 0, "selector": SELECTOR, "template": TEMPLATE}},
        ("apiextensions.k8s.io/v1", "customresourcedefinitions"): {
            "metadata": {"name": f"gadgets{tag}.example.com"}, "spec": {
                "group": "example.com", "scope": "Cluster",
                "names": {"plural": f"gadgets{tag}", "singular": f"gadget{tag}", "kind": f"Gadget{tag.capitalize()}"},
                "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                    "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}},
        ("apiregistration.k8s.io/v1", "apiservices"): {"metadata": {"name": f"v1.{tag}.example.org"}, "spec": {
            "group": f"{tag}.example.org", "version": "v1", "groupPriorityMinimum": 1000, "versionPriority": 15}},
        ("v1", "nodes"): {"metadata": {"name": f"node-{tag}"}},
        ("v1", "persistentvolumes"): {"metadata": {"name": f"pv-{tag}"}, "spec": {
            "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/srv"}}},
        ("v1", "persistentvolumeclaims"): {"metadata": {"name": "pvc"}, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}},
        ("v1", "endpoints"): {"metadata": {"name": "ep"}, "subsets": [
            {"addresses": [{"ip": "10.1.0.1"}], "ports": [{"port": 80}]}]},
        ("discovery.k8s.io/v1", "endpointslices"): {"metadata": {"name": "es"}, "addressType": "IPv4",
                                                    "endpoints": [{"addresses": ["10.1.0.1"]}], "ports": [{"port": 80}]},
        ("apps/v1", "daemonsets"): {"metadata": {"name": "ds"}, "spec": {"selector": SELECTOR, "template": TEMPLATE}},
        ("apps/v1", "statefulsets"): {"metadata": {"name": "sts"}, "spec": {"selector": SELECTOR, "template": TEMPLATE}},
        ("batch/v1", "jobs"): {"metadata": {"name": "job"}, "spec": {"suspend": True, "template": JOB_TEMPLATE}},
        ("batch/v1", "cronjobs"): {"metadata": {"name": "cj"}, "spec": {
            "schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": JOB_TEMPLATE}}}},
        ("rbac.authorization.k8s.io/v1", "roles"): {"metadata": {"name": "role"}, "rules": [
            {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]},
        ("rbac.authorization.k8s.io/v1", "rolebindings"): {"metadata": {"name": "rb"}, "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "role"},
            "subjects": [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}]},
        ("rbac.authorization.k8s.io/v1", "clusterroles"): {"metadata": {"name": f"cr-{tag}"}, "rules": [
            {"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]},
        ("rbac.authorization.k8s.io/v1", "clusterrolebindings"): {"metadata": {"name": f"crb-{tag}"}, "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": f"cr-{tag}"},
            "subjects": [{"kind": "Group", "name": "devs", "apiGroup": "rbac.authorization.k8s.io"}]},
        ("coordination.k8s.io/v1", "leases"): {"metadata": {"name": "lease"}, "spec": {"holderIdentity": "me"}},
        ("v1", "limitranges"): {"metadata": {"name": "lr"}, "spec": {"limits": [
            {"type": "PersistentVolumeClaim", "max": {"storage": "10Gi"}}]}},
        # scoped to Pods with an active deadline, which no sample has: it blocks nothing without a controller
        ("v1", "resourcequotas"): {"metadata": {"name": "rq"}, "spec": {"hard": {"pods": "5"},
                                                                        "scopes": ["Terminating"]}},
        ("scheduling.k8s.io/v1", "priorityclasses"): {"metadata": {"name": f"pc-{tag}"}, "value": 100},
        ("policy/v1", "poddisruptionbudgets"): {"metadata": {"name": "pdb"}, "spec": {
            "minAvailable": 1, "selector": {"matchLabels": {"app": "x"}}}},
        ("storage.k8s.io/v1", "storageclasses"): {"metadata": {"name": f"sc-{tag}"}, "provisioner": "csi.example.com"},
        ("storage.k8s.io/v1", "csidrivers"): {"metadata": {"name": f"csi-{tag}.example.com"}, "spec": {}},
        ("storage.k8s.io/v1", "volumeattachments"): {"metadata": {"name": f"va-{tag}"}, "spec": {
            "attacher": "csi.example.com", "nodeName": "node-a", "source": {"persistentVolumeName": "pv-1"}}},
        # admission configuration that matches no request of the test (CONNECT of a resource nobody serves)
        ("admissionregistration.k8s.io/v1", "mutatingwebhookconfigurations"): {
            "metadata": {"name": f"mwc-{tag}"}, "webhooks": [UNUSED_WEBHOOK]},
        ("admissionregistration.k8s.io/v1", "validatingwebhookconfigurations"): {
            "metadata": {"name": f"vwc-{tag}"}, "webhooks": [UNUSED_WEBHOOK]},
        ("admissionregistration.k8s.io/v1", "validatingadmissionpolicies"): {
            "metadata": {"name": f"vap-{tag}"}, "spec": {"matchConstraints": {"resourceRules": [UNUSED_RULE]},
                                                         "validations": [{"expression": "true"}]}},
        ("admissionregistration.k8s.io/v1", "validatingadmissionpolicybindings"): {
            "metadata": {"name": f"vapb-{tag}"}, "spec": {"policyName": f"vap-{tag}", "validationActions": ["Deny"]}},
        ("events.k8s.io/v1", "events"): {"metadata": {"name": "ev2"}, "eventTime": "2026-01-01T00:00:00.000000Z",
                                         "reportingController": "example.com/test", "reportingInstance": "test-1",
                                         "action": "Testing", "reason": "Testing", "type": "Normal",
                                         "regarding": {"kind": "Pod", "name": "p", "namespace": ns}},
        ("autoscaling/v2", "horizontalpodautoscalers"): {"metadata": {"name": "hpa2"}, "spec": {
            "scaleTargetRef": REF, "maxReplicas": 3}},
        ("autoscaling/v1", "horizontalpodautoscalers"): {"metadata": {"name": "hpa1"}, "spec": {
            "scaleTargetRef": REF, "maxReplicas": 3}},
        ("certificates.k8s.io/v1", "certificatesigningrequests"): {"metadata": {"name": f"csr-{tag}"}, "spec": {
            "request": CSR_PEM, "signerName": "example.com/signer", "usages": ["client auth"]}},
        ("example.com/v1", "widgets"): {"metadata": {"name": "w"}, "spec": {"size": 1}},
    }


def _csr_pem() -> str:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    key = ec.generate_private_key(ec.SECP256R1())
    request = x509.CertificateSigningRequestBuilder().subject_name(
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sample")])).sign(key, hashes.SHA256())
    return base64.b64encode(request.public_bytes(serialization.Encoding.PEM)).decode()


CSR_PEM = _csr_pem()


STORED = [(rt.api_version, rt.resource) for rt in kinds.builtin_types() if not rt.strategy.virtual]
CASES = STORED + [("example.com/v1", "widgets")]
CLIENTS = ["typed", "dynamic", "async-typed", "async-dynamic"]


def test_every_served_kind_has_a_sample():
    assert set(samples("ns", "t")) == set(CASES)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with host_lock(False):
        srv = EmbeddedServer(tmp_path_factory.mktemp("apiserver"), controllers=["serviceaccount"]).start()
    admin = srv.client()
    for name in CLIENTS:
        admin.create("v1", "namespaces", {"metadata": {"name": name}})
    admin.create("apiextensions.k8s.io/v1", "customresourcedefinitions", WIDGETS)
    yield srv
    with host_lock(False):
        srv.stop()


def snake(kind: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", kind).lower()


def api_class(api_version: str) -> str:
    """The typed client's API class of a group/version: `apps/v1` -> AppsV1Api, `v1` -> CoreV1Api."""
    group, _, version = api_version.rpartition("/")
    words = (group.removesuffix(".k8s.io") or "core").split(".")
    return "".join(w.capitalize() for w in words) + version.capitalize() + "Api"


def kind_of(server, api_version: str, resource: str):
    group, _, version = api_version.rpartition("/")
    return server.registry.catalog.lookup(group, version, resource)


APPLY = "application/apply-patch+yaml"


def expected_events(rt) -> list[str]:
    """What a watch sees: ADDED; MODIFIED by the patch, the apply and the update; the deletion: a
    Namespace, a CustomResourceDefinition (its cleanup finalizer), a kind whose DELETE orphans
    by default (the `orphan` finalizer, for the garbage collector) are only marked; a Pod is
    marked with its grace period (0 for a pod no node runs) and then removed, as the generic
    registry's updateForGracefulDeletionAndFinalizers does. A PersistentVolume(Claim) is only
    marked too: admission gave it its protection finalizer, and no protection controller runs here."""
    orphans = rt.strategy.gc_policy(rt.version) == ORPHAN_DEPENDENTS
    if rt.resource in ("namespaces", "customresourcedefinitions") or orphans or \
            (rt.group, rt.resource) in PROTECTION_FINALIZERS:
        return ["ADDED", "MODIFIED", "MODIFIED", "MODIFIED", "MODIFIED"]
    if rt.strategy.graceful_deletion:
        return ["ADDED", "MODIFIED", "MODIFIED", "MODIFIED", "MODIFIED", "DELETED"]
    return ["ADDED", "MODIFIED", "MODIFIED", "MODIFIED", "DELETED"]


def check_life(rt, seen: list[dict], events: list[tuple[str, dict]]):
    """seen: the object as create, get, patch, apply and replace returned it."""
    created, got, patched, applied, replaced = seen
    assert got["metadata"]["uid"] == created["metadata"]["uid"]
    assert patched["metadata"]["labels"]["patched"] == "yes"
    assert applied["metadata"]["labels"]["applied"] == "yes"
    managers = {(e["manager"], e["operation"]) for e in applied["metadata"]["managedFields"]}
    assert ("clients-test", "Apply") in managers
    assert replaced["metadata"]["labels"]["replaced"] == "yes"
    assert [t for t, _ in events] == expected_events(rt), rt.kind
    assert events[-1][1]["metadata"]["name"] == created["metadata"]["name"]


@pytest.mark.parametrize("api_version, resource", CASES, ids=[f"{v}/{r}" for v, r in CASES])
@pytest.mark.parametrize("flavour", ["typed", "dynamic"])
def test_sync_clients(server, flavour, api_version, resource):
    rt = kind_of(server, api_version, resource)
    ns = flavour if rt.namespaced else None
    body = {"apiVersion": api_version, "kind": rt.kind, **samples(flavour, flavour)[(api_version, resource)]}
    name = body["metadata"]["name"]
    configuration = k8s.Configuration()
    k8s_config.load_kube_config(str(server.kubeconfig), client_configuration=configuration)
    with k8s.ApiClient(configuration) as api:
        if flavour == "typed":
            ops = TypedOps(api, rt, ns)
        else:
            ops = DynamicOps(dynamic.DynamicClient(api), rt, ns)
        rv = ops.list_version()
        seen = [ops.create(body), ops.get(name)]
        seen.append(ops.patch(name, {"metadata": {"labels": {"patched": "yes"}}}))
        seen.append(ops.apply(name, {"apiVersion": api_version, "kind": rt.kind,
                                     "metadata": {"name": name, "labels": {"applied": "yes"}}}))
        current = seen[-1]
        current["metadata"]["labels"]["replaced"] = "yes"
        seen.append(ops.replace(name, current))
        ops.delete(name)
        events = ops.watch(rv, name, len(expected_events(rt)))
    check_life(rt, seen, events)


class TypedOps:
    """kubernetes.client's generated API classes (CustomObjectsApi for custom resources); every
    answer is deserialised into the typed models and turned back into a dict."""

    def __init__(self, api, rt, ns):
        self.api, self.rt = api, rt
        self.custom = not rt.strategy.builtin
        if self.custom:
            self.client = k8s.CustomObjectsApi(api)
            self.where = [rt.group, rt.version] + ([ns] if rt.namespaced else []) + [rt.resource]
            self.ns = []
        else:
            self.client = getattr(k8s, api_class(rt.api_version))(api)
            self.where = []
            self.ns = [ns] if rt.namespaced else []

    def fn(self, verb):
        if self.custom:
            scope = "namespaced_custom_object" if self.rt.namespaced else "cluster_custom_object"
            return getattr(self.client, f"{'get' if verb == 'read' else verb}_{scope}")
        return getattr(self.client, f"{verb}_{'namespaced_' if self.rt.namespaced else ''}{snake(self.rt.kind)}")

    def named(self, verb, name, *body, **kwargs):
        """read/patch/replace/delete: (group, version, [namespace], plural, name) for custom
        objects, (name, [namespace]) for the built-in kinds, then the body."""
        if self.custom:
            return self.fn(verb)(*self.where, name, *body, **kwargs)
        return self.fn(verb)(name, *self.ns, *body, **kwargs)

    def _dict(self, obj):
        return obj if isinstance(obj, dict) else self.api.sanitize_for_serialization(obj)

    def _with_content_type(self, content_type, call):
        # the generated patch methods choose the patch type themselves (strategic merge for a
        # dict); a default Content-Type header is how a typed client sends another one
        self.api.set_default_header("Content-Type", content_type)
        try:
            return call()
        finally:
            del self.api.default_headers["Content-Type"]

    def list_version(self):
        return self._dict(self.fn("list")(*self.where, *self.ns))["metadata"]["resourceVersion"]

    def create(self, body):
        return self._dict(self.fn("create")(*self.where, *self.ns, body))

    def get(self, name):
        return self._dict(self.named("read", name))

    def patch(self, name, patch):
        if self.custom:     # custom resources have no strategic merge patch
            return self._dict(self._with_content_type("application/merge-patch+json",
                                                      lambda: self.named("patch", name, patch)))
        return self._dict(self.named("patch", name, patch))

    def apply(self, name, body):
        return self._dict(self._with_content_type(APPLY, lambda: self.named("patch", name, body,
                                                                             field_manager="clients-test")))

    def replace(self, name, body):
        return self._dict(self.named("replace", name, body))

    def delete(self, name):
        self.named("delete", name)

    def watch(self, rv, name, count):
        events = []
        w = k8s_watch.Watch()
        for event in w.stream(self.fn("list"), *self.where, *self.ns, resource_version=rv, timeout_seconds=10):
            obj = self._dict(event["object"])
            if obj["metadata"]["name"] == name:
                events.append((event["type"], obj))
            if len(events) == count:
                w.stop()
        return events


class DynamicOps:
    """kubernetes.dynamic: discovery, then the resource's generic verbs."""

    def __init__(self, client, rt, ns):
        self.client, self.ns = client, ns
        self.resource = client.resources.get(api_version=rt.api_version, kind=rt.kind)

    def list_version(self):
        return self.resource.get(namespace=self.ns).metadata.resourceVersion

    def create(self, body):
        return self.resource.create(body=body, namespace=self.ns).to_dict()

    def get(self, name):
        return self.resource.get(name=name, namespace=self.ns).to_dict()

    def patch(self, name, patch):
        return self.resource.patch(body=patch, name=name, namespace=self.ns,
                                   content_type="application/merge-patch+json").to_dict()

    def apply(self, name, body):
        return self.resource.server_side_apply(body=body, name=name, namespace=self.ns,
                                               field_manager="clients-test").to_dict()

    def replace(self, name, body):
        return self.resource.replace(body=body, name=name, namespace=self.ns).to_dict()

    def delete(self, name):
        self.resource.delete(name=name, namespace=self.ns)

    def watch(self, rv, name, count):
        events = []
        w = k8s_watch.Watch()
        for event in self.resource.watch(namespace=self.ns, resource_version=rv, timeout=10, watcher=w):
            if event["raw_object"]["metadata"]["name"] == name:
                events.append((event["type"], event["raw_object"]))
            if len(events) == count:
                w.stop()
        return events


@pytest.mark.parametrize("flavour", ["async-typed", "async-dynamic"])
def test_asyncio_clients(server, flavour):
    """kubernetes_asyncio: the same life for every kind, concurrently."""
    from kubernetes_asyncio import client as aclient, config as aconfig
    from kubernetes_asyncio.dynamic import DynamicClient
    from kubernetes_asyncio.watch import Watch

    async def life(api, dyn, api_version, resource):
        rt = kind_of(server, api_version, resource)
        ns = flavour if rt.namespaced else None
        body = {"apiVersion": api_version, "kind": rt.kind,
                **samples(flavour, flavour.replace("-", ""))[(api_version, resource)]}
        name = body["metadata"]["name"]
        if flavour == "async-dynamic":
            res = await dyn.resources.get(api_version=api_version, kind=rt.kind)
            rv = (await res.get(namespace=ns)).metadata.resourceVersion
            seen = [(await res.create(body=body, namespace=ns)).to_dict(),
                    (await res.get(name=name, namespace=ns)).to_dict(),
                    (await res.patch(body={"metadata": {"labels": {"patched": "yes"}}}, name=name, namespace=ns,
                                     content_type="application/merge-patch+json")).to_dict(),
                    (await res.server_side_apply(body={"apiVersion": api_version, "kind": rt.kind, "metadata": {
                        "name": name, "labels": {"applied": "yes"}}}, name=name, namespace=ns,
                        field_manager="clients-test")).to_dict()]
            current = seen[-1]
            current["metadata"]["labels"]["replaced"] = "yes"
            seen.append((await res.replace(body=current, name=name, namespace=ns)).to_dict())
            await res.delete(name=name, namespace=ns)
            events = []
            watcher = Watch()
            async for event in res.watch(namespace=ns, resource_version=rv, timeout=10, watcher=watcher):
                if event["raw_object"]["metadata"]["name"] == name:
                    events.append((event["type"], event["raw_object"]))
                if len(events) == len(expected_events(rt)):
                    watcher.stop()
        else:
            custom = not rt.strategy.builtin
            typed = aclient.CustomObjectsApi(api) if custom else getattr(aclient, api_class(api_version))(api)
            suffix = ("namespaced_" if rt.namespaced else "") + snake(rt.kind)
            scope = [rt.group, rt.version] + ([ns] if rt.namespaced else []) + [rt.resource] if custom else \
                ([ns] if rt.namespaced else [])
            kind_suffix = ("namespaced_custom_object" if rt.namespaced else "cluster_custom_object") if custom \
                else suffix

            def op(verb):
                verb = {"read": "get"}.get(verb, verb) if custom else verb
                return getattr(typed, f"{verb}_{kind_suffix}")

            as_dict = api.sanitize_for_serialization
            rv = as_dict(await op("list")(*scope))["metadata"]["resourceVersion"]
            seen = [as_dict(await op("create")(*scope, body))]
            if custom:
                seen.append(as_dict(await op("read")(*scope, name)))
                seen.append(as_dict(await op("patch")(*scope, name, {"metadata": {"labels": {"patched": "yes"}}},
                                                      _content_type="application/merge-patch+json")))
                seen.append(as_dict(await op("patch")(*scope, name, {
                    "apiVersion": api_version, "kind": rt.kind, "metadata": {"name": name, "labels": {
                        "applied": "yes"}}}, field_manager="clients-test", _content_type=APPLY)))
                current = seen[-1]
                current["metadata"]["labels"]["replaced"] = "yes"
                seen.append(as_dict(await op("replace")(*scope, name, current)))
                await op("delete")(*scope, name)
            else:
                seen.append(as_dict(await op("read")(name, *scope)))
                seen.append(as_dict(await op("patch")(name, *scope, {"metadata": {"labels": {"patched": "yes"}}})))
                seen.append(as_dict(await op("patch")(name, *scope, {
                    "apiVersion": api_version, "kind": rt.kind, "metadata": {"name": name, "labels": {
                        "applied": "yes"}}}, field_manager="clients-test", _content_type=APPLY)))
                current = seen[-1]
                current["metadata"]["labels"]["replaced"] = "yes"
                seen.append(as_dict(await op("replace")(name, *scope, current)))
                await op("delete")(name, *scope)
            events = []
            watcher = Watch()
            async with watcher.stream(op("list"), *scope, resource_version=rv, timeout_seconds=10) as stream:
                async for event in stream:
                    obj = as_dict(event["object"])
                    if obj["metadata"]["name"] == name:
                        events.append((event["type"], obj))
                    if len(events) == len(expected_events(rt)):
                        watcher.stop()
        check_life(rt, seen, events)

    async def main():
        configuration = aclient.Configuration()
        await aconfig.load_kube_config(str(server.kubeconfig), client_configuration=configuration)
        async with aclient.ApiClient(configuration) as api:
            dyn = await DynamicClient(api) if flavour == "async-dynamic" else None
            # events.k8s.io Events after the rest: listed through events.k8s.io/v1, a core Event
            # without eventTime fails the typed client's model validation (as on any cluster)
            later = [("events.k8s.io/v1", "events")]
            await asyncio.gather(*(life(api, dyn, v, r) for v, r in CASES if (v, r) not in later))
            await asyncio.gather(*(life(api, dyn, v, r) for v, r in later))

    asyncio.run(main())
