"""Discovery and OpenAPI documents, generated from the resource catalogue.

- legacy discovery: /api (APIVersions), /apis (APIGroupList), /apis/<group> (APIGroup),
  /api/v1 and /apis/<group>/<version> (APIResourceList, one entry per resource and subresource);
- aggregated discovery (apidiscovery.k8s.io/v2 and v2beta1 APIGroupDiscoveryList), which kubectl
  1.30+ asks for first on /api and /apis;
- group/versions of APIServices with a backend service (kube-aggregator): listed in /apis; while
  the APIService is not Available, /apis/<group>/<version> answers 503 and aggregated discovery
  marks the version Stale, as the aggregator does for a backend it cannot reach;
- OpenAPI v3: /openapi/v3 lists one document per group/version; each document declares, per
  kind, the create/update/patch operations with their `x-kubernetes-group-version-kind` and the
  `fieldValidation` query parameter, which is what kubectl checks before it delegates validation of
  `create -f` / `apply -f` to the server. /openapi/v2 is not served (kubectl tolerates its 404).
"""

from __future__ import annotations

import hashlib
import json

from labkit.apiserver.resources import Catalog, ResourceType

# the Kubernetes version labkit reconstructs; kubectl 1.32 (and Debian 12's 1.20) work against it
# although it is beyond kubectl's supported skew of one minor version (`kubectl version` warns)
KUBERNETES_VERSION = "v1.34.1"
VERSION_INFO = {
    "major": "1", "minor": "34", "gitVersion": f"{KUBERNETES_VERSION}-labkit", "gitCommit": "labkit",
    "gitTreeState": "clean",
    "buildDate": "2025-09-09T00:00:00Z", "goVersion": "go1.24.6", "compiler": "gc", "platform": "linux/amd64",
}



def user_agent(program: str) -> str:
    """What the component `program` of a v1.34 control plane sends as its user agent."""
    return f"{program}/{KUBERNETES_VERSION} (linux/amd64) kubernetes/labkit"


def _group_version(group: str, version: str) -> str:
    return f"{group}/{version}" if group else version


def api_versions(server_address: str) -> dict:
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]}


def _api_group(group: str, versions: list[str]) -> dict:
    gvs = [{"groupVersion": _group_version(group, v), "version": v} for v in versions]
    return {"name": group, "versions": gvs, "preferredVersion": gvs[0]}


def remote_versions(store) -> dict[tuple[str, str], bool]:
    """(group, version) -> Available, for the APIServices served by a backend service
    (kube-aggregator proxies them; here the backend serves no resources of its own)."""
    found = []
    for svc in store.list("apiregistration.k8s.io/apiservices")[0]:
        spec = svc.get("spec") or {}
        if not spec.get("service") or not spec.get("group"):
            continue
        available = any(c.get("type") == "Available" and c.get("status") == "True"
                        for c in (svc.get("status") or {}).get("conditions") or [])
        found.append((-(spec.get("versionPriority") or 0), spec["group"], spec.get("version", ""), available))
    return {(g, v): ok for _, g, v, ok in sorted(found)}


def _all_groups(catalog: Catalog, remote: dict) -> list[tuple[str, list[str]]]:
    groups = [(g, list(vs)) for g, vs in catalog.groups()]
    served = {g for g, _ in groups}
    for (group, version) in remote:
        if group in served:
            continue
        entry = next((e for e in groups if e[0] == group), None)
        if entry is None:
            groups.append((group, [version]))
        elif version not in entry[1]:
            entry[1].append(version)
    return groups


def api_group_list(catalog: Catalog, remote: dict | None = None) -> dict:
    return {"kind": "APIGroupList", "apiVersion": "v1",
            "groups": [_api_group(g, vs) for g, vs in _all_groups(catalog, remote or {}) if g]}


def api_group(catalog: Catalog, group: str, remote: dict | None = None) -> dict | None:
    for g, versions in _all_groups(catalog, remote or {}):
        if g == group and g:
            return {"kind": "APIGroup", "apiVersion": "v1", **_api_group(g, versions)}
    return None


def _resource_entries(rt: ResourceType) -> list[dict]:
    entry = {"name": rt.resource, "singularName": rt.singular, "namespaced": rt.namespaced, "kind": rt.kind,
             "verbs": sorted(rt.verbs)}
    if rt.short_names:
        entry["shortNames"] = rt.short_names
    if rt.categories:
        entry["categories"] = rt.categories
    entry["storageVersionHash"] = hashlib.sha256(f"{rt.api_version}/{rt.kind}".encode()).digest()[:8].hex()
    entries = [entry]
    for sub in rt.strategy.subresources:
        sub_entry = {"name": f"{rt.resource}/{sub.name}", "singularName": "", "namespaced": rt.namespaced}
        group, version, kind = _subresource_kind(rt, sub.name)
        if (group, version) != (rt.group, rt.version):
            sub_entry.update(group=group, version=version)
        entries.append({**sub_entry, "kind": kind, "verbs": sorted(sub.verbs)})
    return entries


def _subresource_kind(rt: ResourceType, name: str) -> tuple[str, str, str]:
    """(group, version, kind) of what a subresource serves."""
    if name == "scale":
        return "autoscaling", "v1", "Scale"
    if name == "binding":
        return "", "v1", "Binding"
    return rt.group, rt.version, rt.kind


def api_resource_list(catalog: Catalog, group: str, version: str) -> dict | None:
    types = catalog.in_group_version(group, version)
    if not types:
        return None
    resources = [e for rt in sorted(types, key=lambda t: t.resource) for e in _resource_entries(rt)]
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": _group_version(group, version),
            "resources": resources}


def aggregated(catalog: Catalog, legacy: bool, api_version: str = "apidiscovery.k8s.io/v2",
               remote: dict | None = None) -> dict:
    """APIGroupDiscoveryList for /api (legacy=True: the core group) or /apis (all other groups)."""
    items = []
    remote = remote or {}
    for group, versions in _all_groups(catalog, remote):
        if (group == "") != legacy:
            continue
        version_entries = []
        for version in versions:
            if (group, version) in remote and not catalog.in_group_version(group, version):
                # the aggregator's discovery manager: a backend it cannot reach is published Stale
                version_entries.append({"version": version, "resources": [],
                                        "freshness": "Current" if remote[(group, version)] else "Stale"})
                continue
            resources = []
            for rt in sorted(catalog.in_group_version(group, version), key=lambda t: t.resource):
                entry = {"resource": rt.resource,
                         "responseKind": {"group": group, "version": version, "kind": rt.kind},
                         "scope": "Namespaced" if rt.namespaced else "Cluster",
                         "singularResource": rt.singular, "verbs": sorted(rt.verbs)}
                if rt.short_names:
                    entry["shortNames"] = rt.short_names
                if rt.categories:
                    entry["categories"] = rt.categories
                subs = [{"subresource": s.name,
                         "responseKind": dict(zip(("group", "version", "kind"), _subresource_kind(rt, s.name))),
                         "verbs": sorted(s.verbs)} for s in rt.strategy.subresources]
                if subs:
                    entry["subresources"] = subs
                resources.append(entry)
            version_entries.append({"version": version, "resources": resources, "freshness": "Current"})
        metadata = {"name": group} if group else {}
        items.append({"metadata": metadata, "versions": version_entries})
    return {"kind": "APIGroupDiscoveryList", "apiVersion": api_version, "metadata": {}, "items": items}


# -- OpenAPI v3 ------------------------------------------------------------------------------

def _gv_path(group: str, version: str) -> str:
    return f"api/{version}" if not group else f"apis/{group}/{version}"


def openapi_root(catalog: Catalog) -> dict:
    paths = {}
    for group, versions in catalog.groups():
        for version in versions:
            key = _gv_path(group, version)
            paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={openapi_hash(catalog, group, version)}"}
    return {"paths": paths}


def openapi_hash(catalog: Catalog, group: str, version: str) -> str:
    doc = openapi_document(catalog, group, version)
    return hashlib.sha512(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:64].upper()


_QUERY_PARAMS = [
    {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
    {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
    {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": True},
     "description": "fieldValidation instructs the server on how to handle objects in the request containing "
                    "unknown or duplicate fields."},
]


def openapi_document(catalog: Catalog, group: str, version: str) -> dict | None:
    types = catalog.in_group_version(group, version)
    if not types:
        return None
    paths = {}
    schemas = {}
    for rt in sorted(types, key=lambda t: t.resource):
        gvk = {"group": group, "version": version, "kind": rt.kind}
        prefix = f"/{_gv_path(group, version)}"
        collection = f"{prefix}/namespaces/{{namespace}}/{rt.resource}" if rt.namespaced else f"{prefix}/{rt.resource}"
        schema_name = f"{group or 'io.k8s.api.core'}.{version}.{rt.kind}"
        ref = {"$ref": f"#/components/schemas/{schema_name}"}
        body = {"content": {"*/*": {"schema": ref}}, "required": True}
        responses = {"200": {"description": "OK", "content": {"application/json": {"schema": ref}}},
                     "201": {"description": "Created", "content": {"application/json": {"schema": ref}}}}

        def operation(verb: str, op_id: str, request_body=body):
            return {"tags": [f"{group or 'core'}_{version}"], "operationId": op_id, "requestBody": request_body,
                    "responses": responses, "parameters": list(_QUERY_PARAMS),
                    "x-kubernetes-action": verb, "x-kubernetes-group-version-kind": gvk}

        paths[collection] = {"post": operation("post", f"create{rt.kind}"),
                             "get": {"operationId": f"list{rt.kind}", "responses": responses,
                                     "x-kubernetes-action": "list", "x-kubernetes-group-version-kind": gvk}}
        # strategic merge patch is served for built-in kinds but not advertised: the documents carry
        # no schemas with patch strategies, so kubectl apply must use its compiled-in ones
        patch_body = {"content": {t: {"schema": {"type": "object"}} for t in (
            "application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml")},
            "required": True}
        paths[f"{collection}/{{name}}"] = {"put": operation("put", f"replace{rt.kind}"),
                                           "patch": operation("patch", f"patch{rt.kind}", patch_body)}
        schemas[schema_name] = {"type": "object", "x-kubernetes-group-version-kind": [gvk],
                                "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                                               "metadata": {"type": "object"}},
                                "x-kubernetes-preserve-unknown-fields": True}
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": VERSION_INFO["gitVersion"]},
            "paths": paths, "components": {"schemas": schemas}}


# -- OpenAPI v2 ------------------------------------------------------------------------------------
# kubectl up to 1.26 (Debian 12 ships 1.20) reads /openapi/v2 before `create -f` / `apply -f`, as a
# protobuf-encoded gnostic openapi_v2.Document, and fails when the server has none. labkit
# describes its schemas in OpenAPI v3 only; the v2 document it serves is valid but has no
# definitions, and kubectl skips client-side validation of kinds it finds no schema for (as it
# does for custom resources without one) and computes apply patches from its built-in types.
OPENAPI_V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"      # what clients accept
OPENAPI_V2_PROTOBUF_ANSWER = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"  # kube-openapi's answer


def openapi_v2_document() -> dict:
    return {"swagger": "2.0", "info": {"title": "Kubernetes", "version": VERSION_INFO["gitVersion"]}, "paths": {}}


def openapi_v2_protobuf() -> bytes:
    """openapi_v2.Document (gnostic OpenAPIv2.proto): swagger = 1, info = 2 (title = 1,
    version = 2), paths = 8 (empty)."""
    from labkit.apiserver.protobuf import length_delimited as field

    doc = openapi_v2_document()
    info = field(1, doc["info"]["title"].encode()) + field(2, doc["info"]["version"].encode())
    return field(1, doc["swagger"].encode()) + field(2, info) + field(8, b"")
