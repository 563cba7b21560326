"""The EndpointSlice controller (pkg/controller/endpointslice: endpointslice_controller.go syncService,
reconciler.go, utils.go podToEndpoint / newEndpointSlice / setEndpointSliceLabels) and what it
shares with the Endpoints controller (pkg/controller/util/endpoint: ShouldPodBeInEndpoints,
podutil.FindPort).

For every Service with a selector it publishes the selected pods that have an IP and are not
terminal (Succeeded/Failed), in EndpointSlices named `<service>-<random>`, owned by the Service
(controller, blockOwnerDeletion — so the garbage collector removes them with it) and labelled
`kubernetes.io/service-name` and `endpointslice.kubernetes.io/managed-by:
endpointslice-controller.k8s.io` besides the Service's own labels. Each endpoint carries the pod's
address, its conditions (ready: the pod is Ready and not terminating, or the Service publishes not
ready addresses; serving: the pod is Ready; terminating: it is being deleted), nodeName and a
targetRef to the pod. Pods whose named target ports resolve to different numbers go into
different slices; a Service that selects nothing gets one placeholder slice without endpoints or
ports. A Service without a selector gets no slices from this controller.

Not reconstructed: the 100-endpoints-per-slice limit and slice packing (labs have a handful of
pods), topology hints and zones, the last-change-trigger-time annotation, the mirroring controller
for selector-less Services' hand-made Endpoints.
"""

from __future__ import annotations

import threading
import time

from labkit.apiserver.errors import ApiError
from labkit.apiserver.selectors import LabelSelector
from labkit.controllers.base import KeyedController
from labkit.controllers.serviceaccount import terminating_refusal

CONTROLLER = "endpointslice"
MANAGED_BY = "endpointslice-controller.k8s.io"
LABEL_SERVICE_NAME = "kubernetes.io/service-name"
LABEL_MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
LABEL_HEADLESS = "service.kubernetes.io/headless"


# -- shared with the Endpoints controller -------------------------------------------------------

def service_selector(service: dict) -> LabelSelector | None:
    """The Service's selector; None when it has none (such Services get no endpoints from the controllers)."""
    selector = (service.get("spec") or {}).get("selector")
    if not selector:
        return None
    return LabelSelector.from_label_selector({"matchLabels": selector})


def selected_pods(service: dict, pods: list[dict]) -> list[dict]:
    selector = service_selector(service)
    if selector is None:
        return []
    return [p for p in pods if selector.matches(p["metadata"].get("labels"))]


def is_pod_ready(pod: dict) -> bool:
    """podutil.IsPodReady: condition Ready is True."""
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def should_pod_be_in_endpoints(pod: dict, include_terminating: bool) -> bool:
    """endpointutil.ShouldPodBeInEndpoints: not terminal, has an IP, and not being deleted unless
    terminating pods are wanted."""
    status = pod.get("status") or {}
    if status.get("phase") in ("Succeeded", "Failed"):
        return False
    if not status.get("podIP") and not status.get("podIPs"):
        return False
    return include_terminating or not pod["metadata"].get("deletionTimestamp")


def find_port(pod: dict, service_port: dict) -> int | None:
    """podutil.FindPort: a numeric targetPort as is; a named one is looked up among the pod's
    container ports of the same protocol (None: the pod does not have it)."""
    target = service_port.get("targetPort", service_port.get("port"))
    if isinstance(target, int):
        return target
    if isinstance(target, str) and target.isdigit():
        return int(target)
    protocol = service_port.get("protocol", "TCP")
    for container in (pod.get("spec") or {}).get("containers") or []:
        for port in container.get("ports") or []:
            if port.get("name") == target and port.get("protocol", "TCP") == protocol:
                return port.get("containerPort")
    return None


def pod_reference(pod: dict, resource_version: bool = False) -> dict:
    meta = pod["metadata"]
    ref = {"kind": "Pod", "namespace": meta["namespace"], "name": meta["name"], "uid": meta["uid"]}
    if resource_version:
        ref["resourceVersion"] = meta.get("resourceVersion", "")
    return ref


def service_key_of_pod_change(informers: dict, enqueue, *pods: dict) -> None:
    """Queue every Service in the pods' namespace whose selector matches one of them (getPodServiceMemberships)."""
    for pod in pods:
        ns = pod["metadata"]["namespace"]
        for service in informers["services"].list(ns):
            if selected_pods(service, [pod]):
                enqueue(service)


def is_headless(service: dict) -> bool:
    return (service.get("spec") or {}).get("clusterIP") == "None"


# -- the controller -------------------------------------------------------------------------------

def endpoint_for(pod: dict, service: dict) -> dict:
    """utils.go podToEndpoint."""
    publish = bool((service.get("spec") or {}).get("publishNotReadyAddresses"))
    terminating = bool(pod["metadata"].get("deletionTimestamp"))
    serving = is_pod_ready(pod)
    ready = publish or (serving and not terminating)
    endpoint = {"addresses": [(pod.get("status") or {}).get("podIP")],
                "conditions": {"ready": ready, "serving": serving, "terminating": terminating},
                "targetRef": pod_reference(pod)}
    node = (pod.get("spec") or {}).get("nodeName")
    if node:
        endpoint["nodeName"] = node
    return endpoint


def endpoint_ports(service: dict, pod: dict) -> list[dict]:
    """The ports a pod gives the Service's ports (getEndpointPorts, endpointPortFromServicePort): a
    port the pod does not have is left out."""
    ports = []
    for sp in (service.get("spec") or {}).get("ports") or []:
        number = find_port(pod, sp)
        if number is None:
            continue
        port = {"name": sp.get("name", ""), "port": number, "protocol": sp.get("protocol", "TCP")}
        if sp.get("appProtocol"):
            port["appProtocol"] = sp["appProtocol"]
        ports.append(port)
    return ports


class EndpointSliceController(KeyedController):
    name = CONTROLLER
    user = "system:serviceaccount:kube-system:endpointslice-controller"
    STALE_WAIT = 5.0      # how long a created slice may stay unseen before the cache is trusted anyway

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._created: dict[str, dict[str, float]] = {}     # service key -> {slice name: created at}
        self._created_lock = threading.Lock()

    def make_informers(self):
        def pod_changed(*pods):
            service_key_of_pod_change(self.informers, self.enqueue, *pods)

        def slice_changed(*slices):
            labels = slices[-1]["metadata"].get("labels") or {}
            if labels.get(LABEL_MANAGED_BY) == MANAGED_BY and labels.get(LABEL_SERVICE_NAME):
                self.queue.add(f"{slices[-1]['metadata']['namespace']}/{labels[LABEL_SERVICE_NAME]}")
        return {
            "services": self.informer("v1", "services", "Service", on_add=self.enqueue,
                                      on_update=lambda old, new: self.enqueue(new), on_delete=self.enqueue),
            "pods": self.informer("v1", "pods", "Pod", on_add=pod_changed, on_update=pod_changed,
                                  on_delete=pod_changed),
            "slices": self.informer("discovery.k8s.io/v1", "endpointslices", "EndpointSlice", on_update=slice_changed,
                                    on_delete=slice_changed),
        }

    def _owned(self, namespace: str, name: str) -> list[dict]:
        return [s for s in self.informers["slices"].list(namespace)
                if (s["metadata"].get("labels") or {}).get(LABEL_SERVICE_NAME) == name
                and (s["metadata"].get("labels") or {}).get(LABEL_MANAGED_BY) == MANAGED_BY]

    def sync(self, key: str) -> None:
        namespace, name = key.split("/", 1)
        service = self.informers["services"].get(key)
        if service is None or service_selector(service) is None or service["metadata"].get("deletionTimestamp"):
            # the garbage collector deletes a deleted Service's slices (they are owned by it)
            return
        desired: dict[str, tuple[list, list]] = {}       # ports as text -> (ports, endpoints)
        for pod in selected_pods(service, self.informers["pods"].list(namespace)):
            if not should_pod_be_in_endpoints(pod, include_terminating=True):
                continue
            ports = endpoint_ports(service, pod)
            entry = desired.setdefault(repr(ports), (ports, []))
            entry[1].append(endpoint_for(pod, service))
        if not desired:
            desired[repr(None)] = (None, [])              # the placeholder slice
        existing = self._owned(namespace, name)
        # slices this controller created that its informer has not seen yet: syncing on that cache
        # would create them again (endpointslice_controller.go syncService: the endpointSliceTracker's
        # StaleSlices check answers a stale-informer error, and the Service is queued again)
        seen = {s["metadata"]["name"] for s in existing}
        now = time.monotonic()
        with self._created_lock:
            waiting = {n: t for n, t in self._created.get(key, {}).items()
                       if n not in seen and now - t < self.STALE_WAIT}
            if waiting:
                self._created[key] = waiting
            else:
                self._created.pop(key, None)
        if waiting:
            self.queue.add_after(key, 0.1)
            return
        labels = {k: v for k, v in (service["metadata"].get("labels") or {}).items()
                  if k not in (LABEL_SERVICE_NAME, LABEL_MANAGED_BY, LABEL_HEADLESS)}
        labels.update({LABEL_SERVICE_NAME: name, LABEL_MANAGED_BY: MANAGED_BY})
        if is_headless(service):
            labels[LABEL_HEADLESS] = ""
        owner = {"apiVersion": "v1", "kind": "Service", "name": name, "uid": service["metadata"]["uid"],
                 "controller": True, "blockOwnerDeletion": True}
        unused = list(existing)
        for ports_key, (ports, endpoints) in desired.items():
            endpoints.sort(key=lambda e: (e["addresses"][0], e["targetRef"]["name"]))
            # a slice with these ports, else any slice no longer needed (the placeholder, say) is
            # updated rather than replaced, as the reconciler does to keep churn low
            match = next((s for s in unused if repr(s.get("ports")) == ports_key), unused[0] if unused else None)
            body = {"addressType": "IPv4", "endpoints": endpoints}
            if ports is not None:
                body["ports"] = ports
            if match is None:
                self._create(namespace, name, labels, owner, body)
                continue
            unused.remove(match)
            current = {"addressType": match.get("addressType"), "endpoints": match.get("endpoints") or []}
            if match.get("ports") is not None:
                current["ports"] = match["ports"]
            if current == body and (match["metadata"].get("labels") or {}) == labels:
                continue
            updated = {k: v for k, v in match.items() if k not in ("endpoints", "ports")}
            updated.update(body, metadata=dict(match["metadata"], labels=labels))
            self.client.update("discovery.k8s.io/v1", "endpointslices", updated, namespace)
        for stale in unused:
            try:
                self.client.delete("discovery.k8s.io/v1", "endpointslices", stale["metadata"]["name"], namespace)
            except ApiError as exc:
                if exc.code != 404:
                    raise

    def _create(self, namespace: str, name: str, labels: dict, owner: dict, body: dict) -> None:
        obj = {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
               "metadata": {"generateName": f"{name}-", "labels": labels, "ownerReferences": [owner]}, **body}
        try:
            made = self.client.create("discovery.k8s.io/v1", "endpointslices", obj, namespace)
        except ApiError as exc:
            if terminating_refusal(exc) or exc.code == 404:
                return
            raise
        with self._created_lock:
            self._created.setdefault(f"{namespace}/{name}", {})[made["metadata"]["name"]] = time.monotonic()
        self.log.record(self.name, "create", None, f"service {namespace}/{name}: "
                        f"{len(body['endpoints'])} endpoint(s) to publish → create an EndpointSlice", level="debug")
