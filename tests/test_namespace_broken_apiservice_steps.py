"""The steps with which the reference solution and every common mistake of broken-apiservice break
the API as the prompt says, against a stand-in cluster whose kube-aggregator notices a deleted
Service a little late and whose namespace controller passes over `monitoring` as soon as it is
deleted (a pass still queued for the name, from an earlier deletion: the work queue keeps the
earlier of two AddAfter times).

Each must delete the namespace only once the APIService is reported unavailable: a pass that
finds discovery still working deletes the namespace's content and finalizes it at once, so the
situation the exercise is about (the namespace waiting on the failing discovery) never comes."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest

from labkit.apiserver.errors import ApiError
from labkit.labs import get_lab

APISERVICE = "v1beta1.metrics.k8s.io"
SERVICE = ("kube-system", "metrics-server")


class LateAggregatorCluster:
    """What the steps read and write; the aggregator writes Available=False on the first read of
    the APIService after the Service went (a read before that still sees it Available)."""

    def __init__(self):
        self.service = True
        self.apiservice = {"metadata": {"name": APISERVICE},
                           "spec": {"service": {"namespace": SERVICE[0], "name": SERVICE[1], "port": 443}},
                           "status": {"conditions": [{"type": "Available", "status": "True"}]}}
        self.aggregator_behind = False
        self.namespace = {"metadata": {"name": "monitoring"}, "status": {"phase": "Active"}}
        self.finalized_while_discovery_worked = False

    # -- the cluster's controllers -----------------------------------------------------------
    def _available(self) -> bool:
        if self.apiservice is None or not self.apiservice["spec"].get("service"):
            return True             # gone, or Local: discovery works
        return self.apiservice["status"]["conditions"][0]["status"] == "True"

    def _namespace_controller_pass(self) -> None:
        if self.namespace is None or not self.namespace["metadata"].get("deletionTimestamp"):
            return
        if self._available():
            self.namespace = None               # content deleted, finalized, gone
            return
        self.namespace["status"]["conditions"] = [{"type": "NamespaceDeletionDiscoveryFailure", "status": "True"}]

    # -- the client ----------------------------------------------------------------------------
    def get_or_none(self, api_version, resource, name, namespace=None):
        if resource == "namespaces":
            if self.finalized_while_discovery_worked:
                raise AssertionError("monitoring was deleted while APIService v1beta1.metrics.k8s.io was still "
                                     "Available: the namespace controller's pass found discovery working and "
                                     "finalized it, and the failing discovery never came")
            self._namespace_controller_pass()
            return copy.deepcopy(self.namespace)
        if resource == "apiservices":
            seen = copy.deepcopy(self.apiservice)
            if self.aggregator_behind and self.apiservice is not None:
                self.aggregator_behind = False
                self.apiservice["status"]["conditions"][0]["status"] = "False"
            return seen
        raise AssertionError(f"unexpected read of {resource}")

    def get(self, api_version, resource, name, namespace=None):
        found = self.get_or_none(api_version, resource, name, namespace)
        if found is None:
            raise ApiError(404, "NotFound", f'{resource} "{name}" not found')
        return found

    def request(self, method, path, **_):
        assert (method, path) == ("GET", "/api/v1/namespaces/monitoring"), (method, path)
        found = self.get_or_none("v1", "namespaces", "monitoring")
        return (404, {}) if found is None else (200, found)

    def delete(self, api_version, resource, name, namespace=None, options=None):
        if resource == "services":
            if not self.service:
                raise ApiError(404, "NotFound", "not found")
            self.service, self.aggregator_behind = False, True
        elif resource == "namespaces":
            self.namespace["metadata"]["deletionTimestamp"] = "now"
            self.namespace["status"]["phase"] = "Terminating"
            self.finalized_while_discovery_worked = self._available()
            self._namespace_controller_pass()
        elif resource == "apiservices":
            self.apiservice = None
            self._namespace_controller_pass()
        else:
            raise AssertionError(f"unexpected delete of {resource}")

    def patch(self, api_version, resource, name, body, patch_type, namespace=None):
        if resource == "apiservices":
            self.apiservice["spec"].update(body["spec"])
            self._namespace_controller_pass()

    def create(self, api_version, resource, body, namespace=None):
        if resource == "services":
            self.service = True

    def list(self, api_version, resource, namespace=None):
        assert resource == "apiservices"
        return ([copy.deepcopy(self.apiservice)] if self.apiservice else []), "1"


def _ways_to_break():
    lab = get_lab("namespace")
    exercise = lab.exercise("broken-apiservice")
    ways = [pytest.param(m.apply, id=m.name) for m in lab.mistakes(exercise)]
    solution = lab._load("solutions/broken-apiservice.py")
    return ways + [pytest.param(solution.solve, id="solution")]


@pytest.mark.parametrize("apply", _ways_to_break())
def test_the_namespace_is_deleted_only_once_the_aggregator_reports_the_apiservice_unavailable(monkeypatch, apply):
    lab = get_lab("namespace")
    cluster = LateAggregatorCluster()
    monkeypatch.setattr(lab.environment_module(), "client", lambda env: cluster)
    apply(SimpleNamespace(lab=lab))
    assert not cluster.finalized_while_discovery_worked
