"""The ServiceAccount admission plugin: the default account, the kube-api-access projected volume and
its mounts, automount opt-outs, pull secrets, missing accounts and mountable-secret enforcement.
The plugin is in the server's default chain, between LimitRanger and Priority.

Expected values from kubernetes v1.34 plugin/pkg/admission/serviceaccount/admission.go (Admit,
Validate, mountServiceAccountToken, TokenVolumeSource, limitSecretReferences) and its
admission_test.go (TestAutomountsAPIToken, TestRespectsExistingMount, TestFetchesUncachedServiceAccount,
TestDeniesInvalidServiceAccount, TestAutomountIsBackwardsCompatible).
"""

from __future__ import annotations

import re

import pytest

from labkit.apiserver.admission.serviceaccount import ServiceAccount
from labkit.apiserver.client import LocalClient
from labkit.apiserver.errors import ApiError
from labkit.apiserver.handler import Api
from labkit.apiserver.registry.store import Registry
from labkit.apiserver.storage import Store

MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
PROJECTION = {"defaultMode": 420, "sources": [
    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
    {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1",
                                                                   "fieldPath": "metadata.namespace"}}]}}]}


@pytest.fixture
def client(tmp_path):
    api = Api(Registry(Store(tmp_path / "objects.db")))
    admin = LocalClient(api, "admin", ["system:masters", "system:authenticated"])
    admin.create("v1", "namespaces", {"metadata": {"name": "ns"}})
    admin.create("v1", "serviceaccounts", {"metadata": {"name": "default"}}, "ns")    # the controller's
    return admin


def pod(name="p", **spec):
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}], **spec}}


def test_default_account_volume_and_mount(client):
    spec = client.create("v1", "pods", pod(initContainers=[{"name": "init", "image": "busybox:1.36"}]), "ns")["spec"]
    assert (spec["serviceAccountName"], spec["serviceAccount"]) == ("default", "default")
    [volume] = spec["volumes"]
    assert re.fullmatch(r"kube-api-access-[bcdfghjklmnpqrstvwxz2456789]{5}", volume["name"])
    assert volume["projected"] == PROJECTION
    expected = [{"name": volume["name"], "readOnly": True, "mountPath": MOUNT_PATH}]
    assert spec["containers"][0]["volumeMounts"] == expected
    assert spec["initContainers"][0]["volumeMounts"] == expected


def test_each_pod_gets_its_own_volume_name(client):
    names = {client.create("v1", "pods", pod(f"p{i}"), "ns")["spec"]["volumes"][0]["name"] for i in range(4)}
    assert len(names) == 4


def test_existing_mount_at_the_token_path_is_respected(client):
    own = {"name": "mine", "mountPath": MOUNT_PATH}
    body = pod(volumes=[{"name": "mine", "emptyDir": {}}])
    body["spec"]["containers"][0]["volumeMounts"] = [own]
    spec = client.create("v1", "pods", body, "ns")["spec"]
    assert spec["containers"][0]["volumeMounts"] == [own]
    assert [v["name"] for v in spec["volumes"]] == ["mine"]


def test_automount_opt_out_by_pod_or_account(client):
    spec = client.create("v1", "pods", pod("off", automountServiceAccountToken=False), "ns")["spec"]
    assert "volumes" not in spec and "volumeMounts" not in spec["containers"][0]
    client.create("v1", "serviceaccounts", {"metadata": {"name": "quiet"}, "automountServiceAccountToken": False},
                  "ns")
    spec = client.create("v1", "pods", pod("quiet", serviceAccountName="quiet"), "ns")["spec"]
    assert "volumes" not in spec
    # the pod's preference wins over the account's
    spec = client.create("v1", "pods", pod("loud", serviceAccountName="quiet", automountServiceAccountToken=True),
                         "ns")["spec"]
    assert spec["volumes"][0]["projected"] == PROJECTION


def test_pull_secrets_come_from_the_account(client):
    client.create("v1", "serviceaccounts", {"metadata": {"name": "puller"},
                                            "imagePullSecrets": [{"name": "registry-key"}]}, "ns")
    spec = client.create("v1", "pods", pod(serviceAccountName="puller"), "ns")["spec"]
    assert spec["imagePullSecrets"] == [{"name": "registry-key"}]


def test_missing_account_refused(client):
    with pytest.raises(ApiError) as info:
        client.create("v1", "pods", pod(serviceAccountName="ghost"), "ns")
    assert info.value.code == 403
    assert info.value.message == ('pods "p" is forbidden: error looking up service account ns/ghost: '
                                  'serviceaccount "ghost" not found')


def test_default_account_is_looked_up_again_before_refusing(tmp_path):
    """getServiceAccount: ten lookups for `default` (the controller may not have made it yet)."""
    store = Store(tmp_path / "objects.db")
    LocalClient(Api(Registry(store)), "admin", ["system:masters"]).create("v1", "namespaces",
                                                                          {"metadata": {"name": "ns"}})
    waits = []

    def sleep(seconds):
        waits.append(seconds)
        if len(waits) == 3:     # the controller catches up during the third wait
            store.put("/serviceaccounts", "ns", "default", {"apiVersion": "v1", "kind": "ServiceAccount",
                                                             "metadata": {"name": "default", "namespace": "ns"}})
    plugin = ServiceAccount(store, sleep=sleep)
    from labkit.apiserver.admission import Attributes
    from labkit.apiserver.registry.catalog import builtin_types
    rt = next(t for t in builtin_types() if t.resource == "pods")
    attrs = Attributes("CREATE", rt, "ns", "p", pod())
    plugin.admit(attrs)
    assert len(waits) == 3 and all(0.1 <= w < 0.2 for w in waits)
    assert attrs.obj["spec"]["serviceAccountName"] == "default"
    waits.clear()
    with pytest.raises(ApiError):
        plugin.admit(Attributes("CREATE", rt, "ns", "q", pod(serviceAccountName="other")))
    assert waits == []      # other accounts are looked up once


def test_mountable_secrets_enforced_by_annotation(client):
    client.create("v1", "serviceaccounts", {"metadata": {"name": "strict", "annotations": {
        "kubernetes.io/enforce-mountable-secrets": "true"}}, "secrets": [{"name": "allowed"}]}, "ns")
    body = pod(serviceAccountName="strict", volumes=[{"name": "s", "secret": {"secretName": "other"}}])
    with pytest.raises(ApiError) as info:
        client.create("v1", "pods", body, "ns")
    assert info.value.message == ('pods "p" is forbidden: volume with secret.secretName="other" is not allowed '
                                  "because service account strict does not reference that secret")
    body = pod("ok", serviceAccountName="strict", volumes=[{"name": "s", "secret": {"secretName": "allowed"}}])
    client.create("v1", "pods", body, "ns")


def test_mirror_pods_may_not_name_accounts(client):
    body = pod(serviceAccountName="default")
    body["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "hash"}
    with pytest.raises(ApiError) as info:
        client.create("v1", "pods", body, "ns")
    assert info.value.message == 'pods "p" is forbidden: a mirror pod may not reference service accounts'
    mirror = pod("m")
    mirror["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "hash"}
    spec = client.create("v1", "pods", mirror, "ns")["spec"]
    assert "serviceAccountName" not in spec and "volumes" not in spec


def test_it_runs_between_limit_ranger_and_priority(client):
    names = [p.name for p in client.api.registry.admission.plugins]
    assert names[:6] == ["NamespaceLifecycle", "LimitRanger", "ServiceAccount", "TaintNodesByCondition",
                         "PodSecurity", "Priority"]


def test_update_changes_nothing(client):
    created = client.create("v1", "pods", pod(), "ns")
    created["metadata"]["labels"] = {"a": "b"}
    updated = client.update("v1", "pods", created, "ns")
    assert updated["spec"]["volumes"] == created["spec"]["volumes"]
