"""broken-apiservice judges the APIService only once the controllers caught up with the Service:
a Service with a selector whose EndpointSlice the EndpointSlice controller has not written yet
(EndpointsNotFound, a transient state under load) is waited for, and the verdict is the one
kube-aggregator's availability check reaches once it is there. Driven by a stand-in API whose
state advances with the requests the check makes, not with time, and on a fake clock: the check's
waits (labkit.exercises wait_for and settle) move it by their intervals instead of sleeping."""

from __future__ import annotations

import copy
from pathlib import Path
from types import SimpleNamespace

from labkit.labs import load_lab

REPO = Path(__file__).resolve().parent.parent
APISERVICE = "v1beta1.metrics.k8s.io"


class SlowSlices:
    """An API with the APIService, its Service (with a selector) and, from the `late`-th request
    for them on, the Service's EndpointSlice; the Available condition follows one request later,
    as the availability controller does after the slice event."""

    def __init__(self, late: int):
        self.late = late
        self.asked = 0
        self.apiservice = {
            "metadata": {"name": APISERVICE, "resourceVersion": "1"},
            "spec": {"group": "metrics.k8s.io", "version": "v1beta1",
                     "service": {"namespace": "kube-system", "name": "metrics-server", "port": 443}},
            "status": {"conditions": [{"type": "Available", "status": "False", "reason": "EndpointsNotFound",
                                       "message": 'cannot find endpointslices for service/metrics-server in '
                                                  '"kube-system"'}]}}
        self.service = {"metadata": {"name": "metrics-server", "namespace": "kube-system", "resourceVersion": "2"},
                        "spec": {"selector": {"k8s-app": "metrics-server"},
                                 "ports": [{"name": "https", "port": 443, "targetPort": 10250}]}}
        # a ready endpoint where nothing listens: the discovery check fails
        self.slice = {"metadata": {"name": "metrics-server-x", "namespace": "kube-system", "resourceVersion": "3",
                                   "labels": {"kubernetes.io/service-name": "metrics-server"}},
                      "addressType": "IPv4", "ports": [{"name": "https", "port": 1, "protocol": "TCP"}],
                      "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}]}

    def _slices(self):
        self.asked += 1
        return [copy.deepcopy(self.slice)] if self.asked >= self.late else []

    def request(self, method, path, query=None, body=None):
        assert (method, path) == ("GET", f"/apis/apiregistration.k8s.io/v1/apiservices/{APISERVICE}"), path
        if self.asked > self.late:
            self.apiservice["status"]["conditions"][0].update(
                reason="FailedDiscoveryCheck", message="failing or missing response from https://127.0.0.1:1/apis")
        return 200, copy.deepcopy(self.apiservice)

    def get_or_none(self, api_version, resource, name, namespace=None):
        assert (resource, name, namespace) == ("services", "metrics-server", "kube-system")
        return copy.deepcopy(self.service)

    def list(self, api_version, resource, namespace=None, label_selector=None, field_selector=None):
        assert resource == "endpointslices" and namespace == "kube-system"
        return self._slices(), "9"


class FakeTime:
    """time.monotonic and time.sleep for labkit.exercises: sleeping moves the clock."""

    def __init__(self):
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def context():
    lab = load_lab(REPO / "labs" / "namespace")
    checks = lab._load("checks.py")
    embedded = SimpleNamespace(target=lambda env: SimpleNamespace(embedded=True))
    env = SimpleNamespace(lab=SimpleNamespace(environment_module=lambda: embedded))
    return checks, SimpleNamespace(env=env)


def test_the_apiservice_is_judged_after_the_endpointslice_appeared(monkeypatch):
    from labkit import exercises
    clock = FakeTime()
    monkeypatch.setattr(exercises, "time", clock)
    checks, ctx = context()
    # later than a 2 s settle alone would look (a probe every 0.2 s): only the wait for the
    # EndpointSlice sees the slice come
    api = SlowSlices(late=40)
    state = checks._apiservice_state(ctx, api, APISERVICE)
    assert api.asked > api.late
    assert state["reason"] == "FailedDiscoveryCheck", state
    assert state["settled"] is True
    # the check waited on the fake clock: for the slice, then 2 s of the same state
    assert clock.now - 1000.0 > 2.0


def test_without_the_wait_the_same_state_would_have_been_judged_transient():
    """The stand-in really starts in the transient state: its first answer is EndpointsNotFound."""
    api = SlowSlices(late=6)
    assert api.request("GET", f"/apis/apiregistration.k8s.io/v1/apiservices/{APISERVICE}")[1][
        "status"]["conditions"][0]["reason"] == "EndpointsNotFound"
    assert api.list("discovery.k8s.io/v1", "endpointslices", "kube-system")[0] == []

