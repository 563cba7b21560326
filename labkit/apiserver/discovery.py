"""Discovery documents, generated from the resource catalogue (OpenAPI: openapi.py).

- legacy discovery: /api (APIVersions), /apis (APIGroupList), /apis/<group> (APIGroup),
  /api/v1 and /apis/<group>/<version> (APIResourceList, one entry per resource and subresource);
- aggregated discovery (apidiscovery.k8s.io/v2 and v2beta1 APIGroupDiscoveryList), which kubectl
  1.30+ asks for first on /api and /apis;
- group/versions of APIServices with a backend service (kube-aggregator): listed in /apis; while
  the APIService is not Available, /apis/<group>/<version> answers 503 and aggregated discovery
  marks the version Stale, as the aggregator does for a backend it cannot reach.
"""

from __future__ import annotations

import hashlib

from labkit.apiserver.resources import Catalog, ResourceType
from labkit.apiserver.version import GIT_VERSION


def user_agent(program: str) -> str:
    """What the component `program` of a v1.34 control plane sends as its user agent."""
    return f"{program}/{GIT_VERSION} (linux/amd64) kubernetes/labkit"


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
        group, version, kind = subresource_kind(rt, sub.name)
        if (group, version) != (rt.group, rt.version):
            sub_entry.update(group=group, version=version)
        entries.append({**sub_entry, "kind": kind, "verbs": sorted(sub.verbs)})
    return entries


def subresource_kind(rt: ResourceType, name: str) -> tuple[str, str, str]:
    """(group, version, kind) of what a subresource serves."""
    if name == "scale":
        return "autoscaling", "v1", "Scale"
    if name == "binding":
        return "", "v1", "Binding"
    if name == "token":
        return "authentication.k8s.io", "v1", "TokenRequest"
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
                         "responseKind": dict(zip(("group", "version", "kind"), subresource_kind(rt, s.name))),
                         "verbs": sorted(s.verbs)} for s in rt.strategy.subresources]
                if subs:
                    entry["subresources"] = subs
                resources.append(entry)
            version_entries.append({"version": version, "resources": resources, "freshness": "Current"})
        metadata = {"name": group} if group else {}
        items.append({"metadata": metadata, "versions": version_entries})
    return {"kind": "APIGroupDiscoveryList", "apiVersion": api_version, "metadata": {}, "items": items}
