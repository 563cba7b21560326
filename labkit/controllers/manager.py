"""The controller manager: the controllers that can run in the embedded server, each started and
stopped by name (the CONTROLLERS table), each talking to the server through an in-process client
as its own user, all writing to one decision log. `settings` are what kube-controller-manager
takes as flags (here: `root_ca`, the CA bundle --root-ca-file names; `pki`, the directory of the
CA that --cluster-signing-cert-file and --cluster-signing-key-file name)."""

from __future__ import annotations

import threading
import time
from typing import Callable

from labkit.controllers.decisions import DecisionLog


def _garbage_collector(client, log, _settings):
    from labkit.controllers.garbagecollector import GarbageCollector
    return GarbageCollector(client, log)


def _deployment(client, log, _settings):
    from labkit.controllers.deployment import DeploymentController
    return DeploymentController(client, log)


def _replicaset(client, log, _settings):
    from labkit.controllers.replicaset import ReplicaSetController
    return ReplicaSetController(client, log)


def _namespace(client, log, _settings):
    from labkit.controllers.namespace import NamespaceController
    return NamespaceController(client, log, ordered=client.api.version.enabled("OrderedNamespaceDeletion"))


def _node(client, log, settings):
    from labkit.controllers.node import NodeController
    return NodeController(client, log, defer_binding=settings.get("scheduler_runs"))


def _scheduler(client, log, settings):
    from labkit.controllers.scheduler import SchedulerController
    return SchedulerController(client, log, seed=settings.get("scheduler_seed"))


def _tainteviction(client, log, settings):
    from labkit.controllers.tainteviction import TaintEvictionController
    return TaintEvictionController(client, log, clock=settings.get("clock"))


def _nodelifecycle(client, log, _settings):
    from labkit.controllers.nodelifecycle import NodeLifecycleController
    return NodeLifecycleController(client, log)


def _kubeletadmit(client, log, settings):
    from labkit.controllers.kubeletadmit import KubeletAdmitController
    return KubeletAdmitController(client, log, client_for=settings.get("client_for"))


def _resourcequota(client, log, _settings):
    from labkit.controllers.resourcequota import ResourceQuotaController
    return ResourceQuotaController(client, log)


def _serviceaccount(client, log, _settings):
    from labkit.controllers.serviceaccount import ServiceAccountsController
    return ServiceAccountsController(client, log)


def _root_ca_cert_publisher(client, log, settings):
    from labkit.controllers.rootcacert import RootCACertPublisher
    return RootCACertPublisher(client, log, settings.get("root_ca", b""))


def _endpointslice(client, log, _settings):
    from labkit.controllers.endpointslice import EndpointSliceController
    return EndpointSliceController(client, log)


def _endpoint(client, log, _settings):
    from labkit.controllers.endpoint import EndpointsController
    return EndpointsController(client, log)


def _podgc(client, log, _settings):
    from labkit.controllers.podgc import PodGCController
    return PodGCController(client, log)


def _pvc_protection(client, log, _settings):
    from labkit.controllers.volumeprotection import PVCProtectionController
    return PVCProtectionController(client, log)


def _pv_protection(client, log, _settings):
    from labkit.controllers.volumeprotection import PVProtectionController
    return PVProtectionController(client, log)


def _csrsigning(client, log, settings):
    from labkit.controllers.csrsigning import CSRSigningController
    return CSRSigningController(client, log, settings["pki"])


def _clusterrole_aggregation(client, log, _settings):
    from labkit.controllers.clusterroleaggregation import ClusterRoleAggregationController
    return ClusterRoleAggregationController(client, log)


def _component(user: str) -> str:
    """The program a controller is part of upstream, the first word of its user agent (and so
    the field manager of its writes)."""
    if user == "system:kube-scheduler":
        return "kube-scheduler"
    return "kubelet" if user.startswith("system:node:") else "kube-controller-manager"


# name -> (user the controller authenticates as, factory(client, decision log) -> controller)
CONTROLLERS: dict[str, tuple[str, Callable]] = {
    "garbagecollector": ("system:serviceaccount:kube-system:generic-garbage-collector", _garbage_collector),
    "deployment": ("system:serviceaccount:kube-system:deployment-controller", _deployment),
    "replicaset": ("system:serviceaccount:kube-system:replicaset-controller", _replicaset),
    "node": ("system:node:labkit-node", _node),
    "namespace": ("system:serviceaccount:kube-system:namespace-controller", _namespace),
    "serviceaccount": ("system:serviceaccount:kube-system:service-account-controller", _serviceaccount),
    "resourcequota": ("system:serviceaccount:kube-system:resourcequota-controller", _resourcequota),
    "root-ca-cert-publisher": ("system:serviceaccount:kube-system:root-ca-cert-publisher", _root_ca_cert_publisher),
    "endpointslice": ("system:serviceaccount:kube-system:endpointslice-controller", _endpointslice),
    "endpoint": ("system:serviceaccount:kube-system:endpoint-controller", _endpoint),
    "podgc": ("system:serviceaccount:kube-system:pod-garbage-collector", _podgc),
    "pvc-protection": ("system:serviceaccount:kube-system:pvc-protection-controller", _pvc_protection),
    "pv-protection": ("system:serviceaccount:kube-system:pv-protection-controller", _pv_protection),
    "csrsigning": ("system:serviceaccount:kube-system:certificate-controller", _csrsigning),
    "clusterrole-aggregation": ("system:serviceaccount:kube-system:clusterrole-aggregation-controller",
                                _clusterrole_aggregation),
    # kube-scheduler's own identity (not a controller-manager controller); off by default: the node
    # stand-in binds the labs' Pods to its one node unless the scheduler runs
    "scheduler": ("system:kube-scheduler", _scheduler),
    # taint_eviction.go runs with the node-controller's client (core.go newTaintEvictionController:
    # "taint-manager uses existing cluster role from node-controller")
    "tainteviction": ("system:serviceaccount:kube-system:node-controller", _tainteviction),
    # the condition taints of the node lifecycle controller (off by default)
    "nodelifecycle": ("system:serviceaccount:kube-system:node-controller", _nodelifecycle),
    # the admission step of the kubelets of Nodes that run none of labkit's (off by default): each
    # rejection is written as system:node:<node>, the node's own kubelet
    "kubeletadmit": ("system:node:kubelet-admission", _kubeletadmit),
}

# what `labkit apiserver` and the labs run by default
DEFAULT_CONTROLLERS = ("garbagecollector", "deployment", "replicaset", "node", "namespace", "serviceaccount",
                       "root-ca-cert-publisher", "endpointslice", "endpoint", "podgc", "pvc-protection",
                       "pv-protection", "clusterrole-aggregation", "csrsigning", "resourcequota")


class ControllerManager:
    def __init__(self, api, log: DecisionLog, settings: dict | None = None):
        self.api = api
        self.log = log
        self.settings = dict(settings or {})
        self.settings.setdefault("scheduler_runs", lambda: self.running("scheduler"))
        self.settings.setdefault("client_for", self.client)
        self._controllers: dict[str, object] = {}
        self._lock = threading.Lock()

    @staticmethod
    def known() -> list[str]:
        return list(CONTROLLERS)

    def client(self, user: str):
        from labkit.apiserver.client import LocalClient
        from labkit.apiserver.discovery import user_agent
        if user.startswith("system:serviceaccount:"):
            groups = ["system:serviceaccounts", f"system:serviceaccounts:{user.split(':')[2]}", "system:authenticated"]
        elif user == "system:kube-scheduler":
            groups = ["system:authenticated"]
        else:           # the node stand-in: a kubelet's client certificate says O=system:nodes
            groups = ["system:nodes", "system:authenticated"]
        return LocalClient(self.api, user, groups, user_agent=f"{user_agent(_component(user))}/{user}", trusted=True)

    def get(self, name: str):
        with self._lock:
            return self._controllers.get(name)

    def running(self, name: str) -> bool:
        controller = self.get(name)
        return controller is not None and controller.running

    def start(self, name: str):
        if name not in CONTROLLERS:
            raise KeyError(f"unknown controller {name!r}; known: {', '.join(CONTROLLERS)}")
        with self._lock:
            controller = self._controllers.get(name)
            if controller is None:
                user, factory = CONTROLLERS[name]
                controller = self._controllers[name] = factory(self.client(user), self.log, self.settings)
        controller.start()
        return controller

    def stop(self, name: str) -> None:
        controller = self.get(name)
        if controller is not None:
            controller.stop()

    def restart(self, name: str):
        """Stop (dropping all in-memory state, as a restarted controller manager) and start again."""
        self.stop(name)
        with self._lock:
            self._controllers.pop(name, None)
        return self.start(name)

    def stop_all(self) -> None:
        with self._lock:
            controllers = list(self._controllers.values())
        for controller in controllers:
            controller.stop()

    def status(self) -> dict[str, bool]:
        return {name: self.running(name) for name in CONTROLLERS}

    def idle(self) -> bool:
        with self._lock:
            controllers = list(self._controllers.values())
        return all(c.idle() for c in controllers if c.running)

    def wait_idle(self, timeout: float, stable_for: float = 0.2) -> bool:
        """Until every running controller has had nothing to do for `stable_for` seconds."""
        deadline = time.monotonic() + timeout
        since = None
        while time.monotonic() < deadline:
            if self.idle():
                since = since or time.monotonic()
                if time.monotonic() - since >= stable_for:
                    return True
            else:
                since = None
            time.sleep(0.02)
        return False
