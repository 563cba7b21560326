"""A Service's clusterIP and clusterIPs on create and update, as kube-apiserver v1.34 takes them
(pkg/registry/core/service/storage/storage.go patchAllocatedValues and normalizeClusterIPs,
alloc.go initIPFamilyFields' ValidateServiceClusterIPsRelatedFields, validation.go
validateUpgradeDowngradeClusterIPs and validateServiceExternalTrafficFieldsUpdate), with real
kubectl where a student would type it."""

from __future__ import annotations

import functools
import json
import shutil

import pytest

import support
from labkit.apiserver.registry import serviceips
from support import embedded_server


# -- the rules, on the spec alone ----------------------------------------------------------------

OLD = {"type": "ClusterIP", "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"], "ipFamilyPolicy": "SingleStack"}


@pytest.mark.parametrize("given, after", [
    ({"clusterIP": "10.96.0.99", "clusterIPs": ["10.96.0.10"]}, ["10.96.0.99"]),   # clusterIP changed alone
    ({"clusterIP": "10.96.0.99"}, ["10.96.0.99"]),                                # clusterIPs left out
    ({}, ["10.96.0.10"]),                                                        # both left out: kept
    ({"clusterIP": "", "clusterIPs": []}, ["10.96.0.10"]),                       # both cleared: kept
    ({"clusterIPs": ["10.96.0.10"]}, ["10.96.0.10"]),                            # clusterIPs alone, as stored
    ({"clusterIPs": ["10.96.0.77"]}, ["10.96.0.77"]),                            # clusterIPs alone, changed
    ({"clusterIP": "10.96.0.99", "clusterIPs": ["10.96.0.77"]}, ["10.96.0.77"]),  # both, differing
])
def test_an_update_patches_then_normalizes_the_pair(given, after):
    spec = {"type": "ClusterIP", **given}
    serviceips.patch_allocated_cluster_ips(spec, OLD)
    serviceips.normalize_cluster_ips(spec, OLD)
    assert spec["clusterIPs"] == after


def test_the_pair_must_match_and_an_allocated_ip_may_not_change():
    match = serviceips.cluster_ips_match_errors
    assert [str(e) for e in match({"clusterIP": "10.96.0.1", "clusterIPs": ["10.96.0.2"]})] == \
        ['spec.clusterIPs: Invalid value: ["10.96.0.2"]: first value must match `clusterIP`']
    assert [str(e) for e in match({"clusterIPs": ["10.96.0.2"]})] == \
        ['spec.clusterIPs: Invalid value: ["10.96.0.2"]: must be empty when `clusterIP` is not specified']
    assert [str(e) for e in match({"clusterIP": "10.96.0.1"})] == ["spec.clusterIPs: Required value"]
    assert match({"type": "ExternalName", "clusterIPs": ["10.96.0.2"]}) == []
    change = serviceips.upgrade_downgrade_errors
    assert [str(e) for e in change({"clusterIPs": ["10.96.0.99"]}, OLD)] == \
        ['spec.clusterIPs[0]: Invalid value: ["10.96.0.99"]: may not change once set']
    assert [str(e) for e in change({}, OLD)] == \
        ["spec.clusterIPs[0]: Invalid value: null: primary clusterIP can not be unset"]
    assert change(dict(OLD), OLD) == []
    lb = {"type": "LoadBalancer", "externalTrafficPolicy": "Local", "healthCheckNodePort": 30500}
    assert [str(e) for e in serviceips.health_check_node_port_errors({**lb, "healthCheckNodePort": 30501}, lb)] == \
        ["spec.healthCheckNodePort: Forbidden: field is immutable"]
    assert serviceips.health_check_node_port_errors({**lb, "externalTrafficPolicy": "Cluster"}, lb) == []


# -- with real kubectl ---------------------------------------------------------------------------

def _manifest(name, **spec):
    return json.dumps({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
                       "spec": {"selector": {"app": name}, "ports": [{"port": 80}], **spec}})


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_create_and_replace_of_cluster_ips(tmp_path):
    with embedded_server(tmp_path / "state", tmp_path / "home", controllers=[]) as server:
        kubectl = functools.partial(support.kubectl, server)

        def refused(*args, input):
            r = kubectl(*args, "-f", "-", input=input)
            assert r.returncode == 1, r.stdout
            return r.stderr.strip()

        # create: both given and differing, clusterIPs alone (refused before anything is allocated)
        assert refused("create", input=_manifest("both", clusterIP="10.96.0.61", clusterIPs=["10.96.0.62"])) == \
            'The Service "both" is invalid: spec.clusterIPs: Invalid value: ["10.96.0.62"]: ' \
            'first value must match `clusterIP`'
        assert refused("create", input=_manifest("plural", clusterIPs=["10.96.0.62"])) == \
            'The Service "plural" is invalid: spec.clusterIPs: Invalid value: ["10.96.0.62"]: ' \
            'must be empty when `clusterIP` is not specified'
        assert kubectl("get", "services", "-o", "name").stdout == "service/kubernetes\n"
        # clusterIP alone: clusterIPs follows it
        kubectl("create", "-f", "-", input=_manifest("web", clusterIP="10.96.0.61"), check=True)
        web = json.loads(kubectl("get", "service", "web", "-o", "json", check=True).stdout)
        assert (web["spec"]["clusterIP"], web["spec"]["clusterIPs"]) == ("10.96.0.61", ["10.96.0.61"])

        def replaced(**change):
            svc = json.loads(kubectl("get", "service", "web", "-o", "json", check=True).stdout)
            for key, value in change.items():
                if value is None:
                    svc["spec"].pop(key, None)
                else:
                    svc["spec"][key] = value
            return json.dumps(svc)

        # replace of `kubectl get -o json` with only clusterIP edited: clusterIPs follows it, then
        # the changed primary IP is refused
        assert refused("replace", input=replaced(clusterIP="10.96.0.99")) == \
            'The Service "web" is invalid: spec.clusterIPs[0]: Invalid value: ["10.96.0.99"]: may not change once set'
        # clusterIPs changed with clusterIP left out: clusterIP is the stored one, the pair differs
        assert refused("replace", input=replaced(clusterIP=None, clusterIPs=["10.96.0.99"])) == \
            'The Service "web" is invalid: spec.clusterIPs: Invalid value: ["10.96.0.99"]: ' \
            'first value must match `clusterIP`'
        # both cleared: the allocated pair is kept
        kubectl("replace", "-f", "-", input=replaced(clusterIP="", clusterIPs=None), check=True)
        web = json.loads(kubectl("get", "service", "web", "-o", "json", check=True).stdout)
        assert (web["spec"]["clusterIP"], web["spec"]["clusterIPs"]) == ("10.96.0.61", ["10.96.0.61"])

        # a local LoadBalancer's health-check node port may not change
        kubectl("create", "-f", "-", input=_manifest("lb", type="LoadBalancer", externalTrafficPolicy="Local",
                                                     healthCheckNodePort=30500), check=True)
        r = kubectl("patch", "service", "lb", "-p", '{"spec": {"healthCheckNodePort": 30501}}')
        assert r.returncode == 1
        assert r.stderr.strip() == \
            'The Service "lb" is invalid: spec.healthCheckNodePort: Forbidden: field is immutable'
