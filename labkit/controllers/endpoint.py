"""The Endpoints controller (pkg/controller/endpoint/endpoints_controller.go syncService): for every
Service with a selector, an Endpoints object of the Service's name whose subsets list the
selected pods' addresses — ready pods under `addresses`, the others under `notReadyAddresses`
(all under `addresses` when the Service publishes not-ready addresses) — with the ports the
Service's target ports resolve to on each pod, repacked so that addresses with the same ports
share a subset (RepackSubsets). Terminal pods, pods without an IP and, unless the Service
publishes not-ready addresses, terminating pods are left out. Labels are the Service's (plus
`service.kubernetes.io/headless` for a headless Service). Endpoints have no owner reference: the
controller deletes them itself when their Service is gone. The Endpoints API is deprecated since
v1.33 in favour of EndpointSlices, yet still served and maintained in v1.34.

Not reconstructed: the 1000-address truncation and its over-capacity annotation, the
last-change-trigger-time annotation, hostnames of headless Services' pods.
"""

from __future__ import annotations

import ipaddress

from labkit.apiserver.errors import ApiError
from labkit.controllers.base import KeyedController
from labkit.controllers.endpointslice import (LABEL_HEADLESS, endpoint_ports, is_headless, is_pod_ready,
                                              pod_reference, selected_pods, service_key_of_pod_change,
                                              service_selector, should_pod_be_in_endpoints)
from labkit.controllers.serviceaccount import terminating_refusal

CONTROLLER = "endpoint"


def _address(pod: dict) -> dict:
    address = {"ip": pod["status"]["podIP"]}
    node = (pod.get("spec") or {}).get("nodeName")
    if node:
        address["nodeName"] = node
    address["targetRef"] = pod_reference(pod, resource_version=True)
    return address


def subsets_for(service: dict, pods: list[dict]) -> list[dict]:
    """The repacked subsets: one per distinct port set, addresses sorted by IP then pod name."""
    publish = bool((service.get("spec") or {}).get("publishNotReadyAddresses"))
    groups: dict[str, dict] = {}
    for pod in pods:
        if not should_pod_be_in_endpoints(pod, include_terminating=publish):
            continue
        ports = endpoint_ports(service, pod)
        if not ports and not (is_headless(service) and not (service.get("spec") or {}).get("ports")):
            continue
        ports.sort(key=lambda p: (p["name"], p["port"], p["protocol"]))
        group = groups.setdefault(repr(ports), {"ports": ports, "addresses": [], "notReadyAddresses": []})
        ready = publish or is_pod_ready(pod)
        group["addresses" if ready else "notReadyAddresses"].append(_address(pod))
    subsets = []
    for group in groups.values():
        subset = {}
        for kind in ("addresses", "notReadyAddresses"):
            if group[kind]:
                subset[kind] = sorted(group[kind], key=lambda a: (ipaddress.ip_address(a["ip"]),
                                                                  a["targetRef"]["name"]))
        if group["ports"]:
            subset["ports"] = group["ports"]
        subsets.append(subset)
    return subsets


class EndpointsController(KeyedController):
    name = CONTROLLER
    user = "system:serviceaccount:kube-system:endpoint-controller"

    def make_informers(self):
        def pod_changed(*pods):
            service_key_of_pod_change(self.informers, self.enqueue, *pods)

        return {
            "services": self.informer("v1", "services", "Service", on_add=self.enqueue,
                                      on_update=lambda old, new: self.enqueue(new), on_delete=self.enqueue),
            "pods": self.informer("v1", "pods", "Pod", on_add=pod_changed, on_update=pod_changed,
                                  on_delete=pod_changed),
            "endpoints": self.informer("v1", "endpoints", "Endpoints", on_delete=self.enqueue,
                                       on_update=lambda old, new: self.enqueue(new)),
        }

    def sync(self, key: str) -> None:
        namespace, name = key.split("/", 1)
        service = self.informers["services"].get(key)
        current = self.informers["endpoints"].get(key)
        if service is None:
            if current is not None:
                try:
                    self.client.delete("v1", "endpoints", name, namespace)
                except ApiError as exc:
                    if exc.code != 404:
                        raise
            return
        if service_selector(service) is None:
            return      # endpoints of a Service without a selector are made by hand
        subsets = subsets_for(service, selected_pods(service, self.informers["pods"].list(namespace)))
        labels = dict(service["metadata"].get("labels") or {})
        if is_headless(service):
            labels[LABEL_HEADLESS] = ""
        if current is not None:
            if _without_versions(current.get("subsets") or []) == _without_versions(subsets) and \
                    (current["metadata"].get("labels") or {}) == labels:
                return
            body = dict(current, subsets=subsets, metadata=dict(current["metadata"], labels=labels))
            if not subsets:
                body.pop("subsets")
            self.client.update("v1", "endpoints", body, namespace)
            return
        body = {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": name, "labels": labels}}
        if subsets:
            body["subsets"] = subsets
        try:
            self.client.create("v1", "endpoints", body, namespace)
        except ApiError as exc:
            if terminating_refusal(exc):
                return
            raise


def _without_versions(subsets: list[dict]) -> list[dict]:
    """Subsets compared without the pods' resourceVersions (endpointSubsetsEqualIgnoreResourceVersion)."""
    out = []
    for subset in subsets:
        copy = {}
        for kind, value in subset.items():
            if kind in ("addresses", "notReadyAddresses"):
                value = [dict(a, targetRef={k: v for k, v in (a.get("targetRef") or {}).items()
                                            if k != "resourceVersion"}) for a in value]
            copy[kind] = value
        out.append(copy)
    return out
