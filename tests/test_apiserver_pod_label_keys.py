"""The Pod strategy merges a Pod's own label values into the selectors that name their keys, on
create, as kube-apiserver v1.34 does (pkg/registry/core/pod/strategy.go PrepareForCreate:
mutateTopologySpreadConstraints with MatchLabelKeysInPodTopologySpreadSelectorMerge, beta and on
by default in 1.34, and mutatePodAffinity with MatchLabelKeysInPodAffinity, GA in 1.33;
applyLabelKeysToLabelSelector appends `key In|NotIn (value)` for each key the Pod has a label of)."""

from __future__ import annotations

import pytest

from labkit.apiserver.client import LocalClient
from labkit.apiserver.handler import Api
from labkit.apiserver.registry.store import Registry
from labkit.apiserver.storage import Store

LABELS = {"app": "shop", "pod-template-hash": "58dd8dcb64"}


@pytest.fixture
def client(tmp_path):
    admin = LocalClient(Api(Registry(Store(tmp_path / "objects.db"))), "admin", ["system:masters"])
    admin.create("v1", "namespaces", {"metadata": {"name": "ns"}})
    admin.create("v1", "serviceaccounts", {"metadata": {"name": "default"}}, "ns")
    return admin


def create(client, spec: dict, labels=LABELS) -> dict:
    body = {"metadata": {"name": "p", "labels": dict(labels)},
            "spec": {"containers": [{"name": "c", "image": "nginx"}], **spec}}
    return client.create("v1", "pods", body, "ns")


def spread(**constraint) -> dict:
    return {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                           "whenUnsatisfiable": "DoNotSchedule", **constraint}]}


def test_match_label_keys_are_merged_into_the_spread_selector_on_create(client):
    created = create(client, spread(labelSelector={"matchLabels": {"app": "shop"}},
                                    matchLabelKeys=["pod-template-hash", "not-a-label-of-the-pod"]))
    stored = client.get("v1", "pods", "p", "ns")
    for pod in (created, stored):
        constraint = pod["spec"]["topologySpreadConstraints"][0]
        assert constraint["labelSelector"] == {
            "matchLabels": {"app": "shop"},
            "matchExpressions": [{"key": "pod-template-hash", "operator": "In", "values": ["58dd8dcb64"]}]}
        assert constraint["matchLabelKeys"] == ["pod-template-hash", "not-a-label-of-the-pod"]


def test_a_constraint_without_label_selector_stays_without_one(client):
    created = create(client, spread(matchLabelKeys=["pod-template-hash"]))
    assert "labelSelector" not in created["spec"]["topologySpreadConstraints"][0]


def test_an_update_merges_nothing_again(client):
    create(client, spread(labelSelector={"matchLabels": {"app": "shop"}}, matchLabelKeys=["pod-template-hash"]))
    pod = client.get("v1", "pods", "p", "ns")
    pod["metadata"]["labels"]["pod-template-hash"] = "other"
    updated = client.update("v1", "pods", pod, "ns")
    assert updated["spec"]["topologySpreadConstraints"][0]["labelSelector"]["matchExpressions"] == [
        {"key": "pod-template-hash", "operator": "In", "values": ["58dd8dcb64"]}]


def test_pod_affinity_terms_get_match_and_mismatch_label_keys(client):
    term = {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "shop"}},
            "matchLabelKeys": ["pod-template-hash"], "mismatchLabelKeys": ["app"]}
    created = create(client, {"affinity": {
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [dict(term)]},
        "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 10, "podAffinityTerm": dict(term)}]}}})
    merged = [{"key": "pod-template-hash", "operator": "In", "values": ["58dd8dcb64"]},
              {"key": "app", "operator": "NotIn", "values": ["shop"]}]
    affinity = created["spec"]["affinity"]
    assert affinity["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["labelSelector"][
        "matchExpressions"] == merged
    assert affinity["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"][
        "labelSelector"]["matchExpressions"] == merged


def test_a_deployment_template_keeps_the_selector_as_written(client):
    template_spec = {"containers": [{"name": "c", "image": "nginx"}],
                     **spread(labelSelector={"matchLabels": {"app": "shop"}}, matchLabelKeys=["pod-template-hash"])}
    created = client.create("apps/v1", "deployments", {
        "metadata": {"name": "shop"},
        "spec": {"selector": {"matchLabels": {"app": "shop"}},
                 "template": {"metadata": {"labels": {"app": "shop"}}, "spec": template_spec}}}, "ns")
    assert created["spec"]["template"]["spec"]["topologySpreadConstraints"][0]["labelSelector"] == {
        "matchLabels": {"app": "shop"}}
