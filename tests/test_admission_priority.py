"""PriorityClass and PodDisruptionBudget served; the Priority and DefaultTolerationSeconds admission
plugins with upstream's texts.

Expected values from kubernetes v1.34: plugin/pkg/admission/priority/admission.go (admitPod,
validatePriorityClass) and its admission_test.go cases; plugin/pkg/admission/
defaulttolerationseconds/admission.go (Admit) and admission_test.go; pkg/apis/scheduling/
validation/validation.go; pkg/registry/scheduling/priorityclass/storage/storage.go (REST.Delete);
pkg/apis/policy/validation/validation.go (ValidatePodDisruptionBudgetSpec).
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
import yaml

from labkit.apiserver.client import LocalClient
from labkit.apiserver.errors import ApiError
from labkit.apiserver.handler import Api
from labkit.apiserver.policykinds import ensure_system_classes
from labkit.apiserver.registry.store import Registry
from labkit.apiserver.storage import Store

S = "scheduling.k8s.io/v1"
NOT_READY = {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": 300}
UNREACHABLE = {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
               "tolerationSeconds": 300}


@pytest.fixture
def client(tmp_path):
    api = Api(Registry(Store(tmp_path / "objects.db")))
    admin = LocalClient(api, "admin", ["system:masters", "system:authenticated"])
    admin.registry = api.registry
    ensure_system_classes(admin)
    admin.create("v1", "namespaces", {"metadata": {"name": "ns"}})
    admin.create("v1", "serviceaccounts", {"metadata": {"name": "default"}}, "ns")    # the controller's
    return admin


def pod(name="p", **spec):
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}], **spec}}


def pclass(name, value, **fields):
    return {"metadata": {"name": name}, "value": value, **fields}


def refused(fn, *args) -> ApiError:
    with pytest.raises(ApiError) as info:
        fn(*args)
    return info.value


# -- the system classes and PriorityClass validation --------------------------------------------------

def test_system_classes_exist_as_upstream_creates_them(client):
    classes = {pc["metadata"]["name"]: pc for pc in client.list(S, "priorityclasses")[0]}
    assert {n: (pc["value"], pc["preemptionPolicy"], pc.get("globalDefault", False)) for n, pc in classes.items()} == {
        "system-node-critical": (2000001000, "PreemptLowerPriority", False),
        "system-cluster-critical": (2000000000, "PreemptLowerPriority", False)}
    assert classes["system-node-critical"]["description"] == ("Used for system critical pods that must not be moved "
                                                              "from their current node.")


def test_system_class_cannot_be_deleted(client):
    err = refused(client.delete, S, "priorityclasses", "system-node-critical")
    assert err.code == 403
    assert err.message == ('priorityclasses.scheduling.k8s.io "system-node-critical" is forbidden: '
                           "this is a system priority class and cannot be deleted")


def test_reserved_prefix_and_maximum_value(client):
    err = refused(client.create, S, "priorityclasses", pclass("system-mine", 5))
    assert err.code == 422
    assert err.message == ('PriorityClass.scheduling.k8s.io "system-mine" is invalid: metadata.name: Forbidden: '
                           "priority class names with 'system-' prefix are reserved for system use only. error: "
                           "system-mine is not a known system priority class")
    err = refused(client.create, S, "priorityclasses", pclass("huge", 1000000001))
    assert err.message == ('PriorityClass.scheduling.k8s.io "huge" is invalid: value: Forbidden: '
                           "maximum allowed value of a user defined priority is 1000000000")


def test_value_is_immutable(client):
    client.create(S, "priorityclasses", pclass("high", 1000))
    pc = client.get(S, "priorityclasses", "high")
    pc["value"] = 2000
    err = refused(client.update, S, "priorityclasses", pc)
    assert "value: Forbidden: may not be changed in an update." in err.message


def test_only_one_global_default(client):
    client.create(S, "priorityclasses", pclass("first", 10, globalDefault=True))
    err = refused(client.create, S, "priorityclasses", pclass("second", 20, globalDefault=True))
    assert err.code == 403
    assert err.message == ('priorityclasses.scheduling.k8s.io "second" is forbidden: PriorityClass first is already '
                           "marked as default. Only one default can exist")
    client.create(S, "priorityclasses", pclass("second", 20))
    second = client.get(S, "priorityclasses", "second")
    second["globalDefault"] = True
    assert refused(client.update, S, "priorityclasses", second).code == 403
    first = client.get(S, "priorityclasses", "first")
    first["description"] = "still the default"
    client.update(S, "priorityclasses", first)      # the default itself may be updated


# -- Priority on pods ----------------------------------------------------------------------------------

def test_pod_without_class_gets_priority_zero(client):
    spec = client.create("v1", "pods", pod(), "ns")["spec"]
    assert spec["priority"] == 0
    assert spec["preemptionPolicy"] == "PreemptLowerPriority"
    assert "priorityClassName" not in spec


def test_pod_class_resolved(client):
    client.create(S, "priorityclasses", pclass("batch-low", -5, preemptionPolicy="Never"))
    spec = client.create("v1", "pods", pod(priorityClassName="batch-low"), "ns")["spec"]
    assert (spec["priority"], spec["preemptionPolicy"]) == (-5, "Never")
    spec = client.create("v1", "pods", pod("crit", priorityClassName="system-node-critical"), "ns")["spec"]
    assert spec["priority"] == 2000001000


def test_global_default_class_is_written_into_the_pod(client):
    client.create(S, "priorityclasses", pclass("everyone", 7, globalDefault=True))
    spec = client.create("v1", "pods", pod(), "ns")["spec"]
    assert (spec["priorityClassName"], spec["priority"]) == ("everyone", 7)


def test_unknown_class_refused(client):
    err = refused(client.create, "v1", "pods", pod(priorityClassName="nope"), "ns")
    assert err.code == 403
    assert err.message == 'pods "p" is forbidden: no PriorityClass with name nope was found'


def test_priority_set_directly_refused(client):
    err = refused(client.create, "v1", "pods", pod(priority=100), "ns")
    assert err.code == 403
    assert err.message == ('pods "p" is forbidden: the integer value of priority (100) must not be provided in pod '
                           "spec; priority admission controller computed 0 from the given PriorityClass name")
    client.create("v1", "pods", pod("same", priority=0), "ns")     # the computed value itself is accepted
    err = refused(client.create, "v1", "pods", pod(preemptionPolicy="Never"), "ns")
    assert err.message == ('pods "p" is forbidden: the string value of PreemptionPolicy (Never) must not be provided '
                           "in pod spec; priority admission controller computed PreemptLowerPriority from the given "
                           "PriorityClass name")


def test_update_keeps_the_priority(client):
    client.create("v1", "pods", pod(), "ns")
    current = client.get("v1", "pods", "p", "ns")
    del current["spec"]["priority"], current["spec"]["preemptionPolicy"]
    current["metadata"]["labels"] = {"touched": "yes"}
    updated = client.update("v1", "pods", current, "ns")
    assert (updated["spec"]["priority"], updated["spec"]["preemptionPolicy"]) == (0, "PreemptLowerPriority")


# -- DefaultTolerationSeconds ----------------------------------------------------------------------------

def test_pod_gets_the_two_default_tolerations(client):
    spec = client.create("v1", "pods", pod(), "ns")["spec"]
    assert spec["tolerations"] == [NOT_READY, UNREACHABLE]


def test_own_tolerations_come_first_and_matching_ones_are_kept(client):
    own = {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
           "tolerationSeconds": 6000}
    spec = client.create("v1", "pods", pod(tolerations=[own]), "ns")["spec"]
    assert spec["tolerations"] == [own, NOT_READY]


def test_toleration_of_everything_needs_no_defaults(client):
    everything = {"operator": "Exists"}
    spec = client.create("v1", "pods", pod(tolerations=[everything]), "ns")["spec"]
    assert spec["tolerations"] == [everything]
    other_effect = {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule"}
    spec = client.create("v1", "pods", pod("q", tolerations=[other_effect]), "ns")["spec"]
    assert spec["tolerations"] == [other_effect, NOT_READY, UNREACHABLE]


def test_chain_lists_the_new_plugins_in_upstream_order(client):
    names = [p.name for p in client.registry.admission.plugins]
    assert names[:7] == ["NamespaceLifecycle", "LimitRanger", "ServiceAccount", "TaintNodesByCondition",
                         "PodSecurity", "Priority", "DefaultTolerationSeconds"]
    rows = {r["name"]: r for r in client.registry.admission.order()}
    assert rows["Priority"]["phases"] == ["mutating", "validating"]
    assert rows["DefaultTolerationSeconds"]["phases"] == ["mutating"]
    # CertificateSigningRequests are served and so are their three plugins
    assert all(rows[name]["state"] == "runs" for name in ("CertificateApproval", "CertificateSigning",
                                                           "CertificateSubjectRestriction"))


# -- PodDisruptionBudget -----------------------------------------------------------------------------------

def pdb(name="budget", **spec):
    return {"metadata": {"name": name}, "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec}}


def test_pdb_served_with_a_fresh_status(client):
    out = client.create("policy/v1", "poddisruptionbudgets", pdb(minAvailable=2), "ns")
    assert out["status"] == {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}
    assert out["metadata"]["generation"] == 1


def test_pdb_validation(client):
    err = refused(client.create, "policy/v1", "poddisruptionbudgets", pdb(minAvailable=1, maxUnavailable=1), "ns")
    assert err.code == 422
    assert err.message.startswith('PodDisruptionBudget.policy "budget" is invalid: spec: Invalid value: '
                                  "policy.PodDisruptionBudgetSpec{")
    assert err.message.endswith(": minAvailable and maxUnavailable cannot be both set")
    err = refused(client.create, "policy/v1", "poddisruptionbudgets", pdb(maxUnavailable="150%"), "ns")
    assert err.message.endswith("spec.maxUnavailable: Invalid value: "
                                'intstr.IntOrString{Type:1, IntVal:0, StrVal:"150%"}: must not be greater than 100%')
    err = refused(client.create, "policy/v1", "poddisruptionbudgets", pdb(minAvailable=-1), "ns")
    assert err.message.endswith("spec.minAvailable: Invalid value: -1: must be greater than or equal to 0")
    err = refused(client.create, "policy/v1", "poddisruptionbudgets", pdb(unhealthyPodEvictionPolicy="Sometimes"),
                  "ns")
    assert err.message.endswith('spec.unhealthyPodEvictionPolicy: Unsupported value: "Sometimes": supported values: '
                                '"AlwaysAllow", "IfHealthyBudget"')


# -- through real kubectl ------------------------------------------------------------------------------------

@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_shows_what_a_real_cluster_shows(tmp_path):
    from labkit.apiserver.server import EmbeddedServer
    from support import host_lock
    with host_lock(False):
        srv = EmbeddedServer(tmp_path / "apiserver").start()
    try:
        env = {**os.environ, "KUBECONFIG": str(srv.kubeconfig), "HOME": str(tmp_path)}

        def kubectl(*args, input=None):
            result = subprocess.run(["kubectl", *args], capture_output=True, text=True, input=input, timeout=60,
                                    env=env)
            assert result.returncode == 0, result.stderr
            return result.stdout
        table = kubectl("get", "priorityclasses").splitlines()
        assert table[0].split() == ["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"]
        assert table[1].split()[:3] == ["system-cluster-critical", "2000000000", "false"]
        assert table[1].split()[-1] == "PreemptLowerPriority"
        kubectl("run", "web", "--image=busybox:1.36", "-n", "default")
        shown = yaml.safe_load(kubectl("get", "pod", "web", "-n", "default", "-o", "yaml"))
        assert shown["spec"]["tolerations"] == [NOT_READY, UNREACHABLE]
        assert shown["spec"]["priority"] == 0
        kubectl("create", "pdb", "web", "--selector=run=web", "--min-available=1", "-n", "default")
        table = kubectl("get", "pdb", "-n", "default").splitlines()
        assert table[0].split() == ["NAME", "MIN", "AVAILABLE", "MAX", "UNAVAILABLE", "ALLOWED", "DISRUPTIONS", "AGE"]
        assert table[1].split()[:4] == ["web", "1", "N/A", "0"]
    finally:
        with host_lock(False):
            srv.stop()
