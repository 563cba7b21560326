"""The controller manager: the controllers that can run in the embedded server, each started and
stopped by name (the CONTROLLERS table), each talking to the server through an in-process client
as its own user, all writing to one decision log. `settings` are what kube-controller-manager
takes as flags (here: `root_ca`, the CA bundle --root-ca-file names; `pki`, the directory of the
CA that --cluster-signing-cert-file and --cluster-signing-key-file name; and `clock`, the clock of
the controllers that wait for a time, labkit.controllers.clock, time.monotonic when not given)."""

from __future__ import annotations

import importlib
import threading
import time
from dataclasses import dataclass
from typing import Callable

from labkit.controllers.decisions import DecisionLog


@dataclass(frozen=True)
class Controller:
    """One controller of the manager: the user it authenticates as, its class ("module:Class" of a
    module of labkit.controllers, or a dotted module path; imported when it first starts), and how
    it is made from its client, the decision log and the manager's settings (by default
    `Class(client, log)`)."""
    user: str
    cls: str
    make: Callable = lambda cls, client, log, settings: cls(client, log)

    def build(self, client, log: DecisionLog, settings: dict):
        module, name = self.cls.split(":")
        module = module if "." in module else f"labkit.controllers.{module}"
        return self.make(getattr(importlib.import_module(module), name), client, log, settings)


def _component(user: str) -> str:
    """The program a controller is part of upstream, the first word of its user agent (and so
    the field manager of its writes)."""
    if user == "system:kube-scheduler":
        return "kube-scheduler"
    return "kubelet" if user.startswith("system:node:") else "kube-controller-manager"


SA = "system:serviceaccount:kube-system:"     # the controller-manager's per-controller accounts

CONTROLLERS: dict[str, Controller] = {
    "garbagecollector": Controller(SA + "generic-garbage-collector", "garbagecollector:GarbageCollector",
                                   lambda cls, client, log, s: cls(client, log, clock=s.get("clock"))),
    "deployment": Controller(SA + "deployment-controller", "deployment:DeploymentController"),
    "replicaset": Controller(SA + "replicaset-controller", "replicaset:ReplicaSetController"),
    "node": Controller("system:node:labkit-node", "node:NodeController",
                       lambda cls, client, log, s: cls(client, log, defer_binding=s.get("scheduler_runs"),
                                                       clock=s.get("clock"))),
    "namespace": Controller(SA + "namespace-controller", "namespace:NamespaceController",
                            lambda cls, client, log, s: cls(client, log, ordered=client.api.version.enabled(
                                "OrderedNamespaceDeletion"), clock=s.get("clock"))),
    "serviceaccount": Controller(SA + "service-account-controller", "serviceaccount:ServiceAccountsController"),
    "resourcequota": Controller(SA + "resourcequota-controller", "resourcequota:ResourceQuotaController"),
    "root-ca-cert-publisher": Controller(SA + "root-ca-cert-publisher", "rootcacert:RootCACertPublisher",
                                         lambda cls, client, log, s: cls(client, log, s.get("root_ca", b""))),
    "endpointslice": Controller(SA + "endpointslice-controller", "endpointslice:EndpointSliceController"),
    "endpoint": Controller(SA + "endpoint-controller", "endpoint:EndpointsController"),
    "podgc": Controller(SA + "pod-garbage-collector", "podgc:PodGCController"),
    "pvc-protection": Controller(SA + "pvc-protection-controller", "volumeprotection:PVCProtectionController"),
    "pv-protection": Controller(SA + "pv-protection-controller", "volumeprotection:PVProtectionController"),
    # the PV controller's binding and release of existing volumes (no provisioning)
    "persistentvolume-binder": Controller(SA + "persistent-volume-binder",
                                          "persistentvolume:PersistentVolumeController"),
    "csrsigning": Controller(SA + "certificate-controller", "csrsigning:CSRSigningController",
                             lambda cls, client, log, s: cls(client, log, s["pki"])),
    "clusterrole-aggregation": Controller(SA + "clusterrole-aggregation-controller",
                                          "clusterroleaggregation:ClusterRoleAggregationController"),
    # status.typeChecking of ValidatingAdmissionPolicies (pkg/controller/validatingadmissionpolicystatus)
    "validatingadmissionpolicy-status": Controller(SA + "validatingadmissionpolicy-status-controller",
                                                   "vapstatus:ValidatingAdmissionPolicyStatusController"),
    # kube-scheduler's own identity (not a controller-manager controller); off by default: the node
    # stand-in binds the labs' Pods to its one node unless the scheduler runs
    "scheduler": Controller("system:kube-scheduler", "scheduler:SchedulerController",
                            lambda cls, client, log, s: cls(client, log, seed=s.get("scheduler_seed"))),
    # taint_eviction.go runs with the node-controller's client (core.go newTaintEvictionController:
    # "taint-manager uses existing cluster role from node-controller")
    "tainteviction": Controller(SA + "node-controller", "tainteviction:TaintEvictionController",
                                lambda cls, client, log, s: cls(client, log, clock=s.get("clock"))),
    # the condition taints of the node lifecycle controller: among other things it takes off the
    # not-ready taint that TaintNodesByCondition admission puts on every new Node once it is Ready
    "nodelifecycle": Controller(SA + "node-controller", "nodelifecycle:NodeLifecycleController"),
    # the admission step of the kubelets of Nodes that run none of labkit's (off by default): each
    # rejection is written as system:node:<node>, the node's own kubelet
    "kubeletadmit": Controller("system:node:kubelet-admission", "kubeletadmit:KubeletAdmitController",
                               lambda cls, client, log, s: cls(client, log, client_for=s.get("client_for"))),
}

# what `labkit apiserver` and the labs run by default
DEFAULT_CONTROLLERS = ("garbagecollector", "deployment", "replicaset", "node", "namespace", "serviceaccount",
                       "root-ca-cert-publisher", "endpointslice", "endpoint", "podgc", "pvc-protection",
                       "pv-protection", "persistentvolume-binder", "clusterrole-aggregation", "csrsigning",
                       "resourcequota", "nodelifecycle", "validatingadmissionpolicy-status")


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
                spec = CONTROLLERS[name]
                controller = self._controllers[name] = spec.build(self.client(spec.user), self.log, self.settings)
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

    def quiet(self) -> bool:
        """No running controller has work in hand now: those that wait for times on their clock
        (`busy()`) may have items waiting for their time, the others must be idle."""
        with self._lock:
            controllers = list(self._controllers.values())
        for c in controllers:
            if c.running and (c.busy() if hasattr(c, "busy") else not c.idle()):
                return False
        return True

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
