"""A Node as kubelet v1.34.1 registers it and its first status update reports it: the labels every
kubelet sets (kubernetes.io/hostname, os, arch: pkg/kubelet/kubelet_node_status.go initialNode),
capacity and allocatable, the condition Ready True (nodestatus/setters.go ReadyCondition,
`kubelet is posting ready status`) and NodeSystemInfo (setters.go NodeSystemInfo). For labs whose
Nodes run no kubelet of their own, or one of labkit's."""

from __future__ import annotations

KUBELET_VERSION = "v1.34.1"


def ready_node(name: str, resources: dict, labels: dict | None = None, taints: list[dict] | None = None) -> dict:
    """The Node `name` with `resources` as both capacity and allocatable (no reservations), the
    kubelet's labels plus `labels`; with `taints` given, a spec (with those taints, if any)."""
    node = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                                  "kubernetes.io/arch": "amd64", **(labels or {})}},
            "status": {"capacity": dict(resources), "allocatable": dict(resources),
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                       "message": "kubelet is posting ready status"}],
                       # every field of NodeSystemInfo is required in the API (the kubernetes client
                       # refuses a Node without one): those a kubelet would report of a machine are empty
                       "nodeInfo": {"kubeletVersion": KUBELET_VERSION, "kubeProxyVersion": "",
                                    "operatingSystem": "linux", "architecture": "amd64",
                                    "containerRuntimeVersion": "", "osImage": "", "kernelVersion": "",
                                    "machineID": "", "systemUUID": "", "bootID": ""}}}
    if taints is not None:        # a spec, with taints when there are some
        node["spec"] = {"taints": [dict(t) for t in taints]} if taints else {}
    return node
