"""The PodSecurity admission plugin: namespace labels choose the levels, Pods that violate the
enforce level are refused with upstream's text, warn and audit levels answer with warnings and
audit annotations, controllers are only warned about, labels are validated and tightening the
enforce level warns about the Pods already there.

Expected values from kubernetes v1.34: staging/src/k8s.io/pod-security-admission/admission/
admission.go (ValidateNamespace, ValidatePod, ValidatePodController, EvaluatePod,
EvaluatePodsInNamespace), admission/response.go (forbiddenResponse), api/helpers.go
(PolicyToEvaluate, ParseLevel, ParseVersion), policy/registry.go (EvaluatePod) and the texts of
policy/check_*.go.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from labkit.apiserver.admission.podsecurity import evaluate, forbidden_detail
from labkit.apiserver.client import LocalClient
from labkit.apiserver.errors import ApiError
from labkit.apiserver.handler import Api
from labkit.apiserver.registry.store import Registry
from labkit.apiserver.storage import Store
from support import embedded_server, kubectl

RESTRICTED_NGINX = (
    'violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "c" must set '
    'securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "c" must set '
    'securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or container "c" must set '
    'securityContext.runAsNonRoot=true), seccompProfile (pod or container "c" must set '
    'securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")')
# the warn and audit texts of the same evaluation
WOULD_NGINX = "would violate" + RESTRICTED_NGINX.removeprefix("violates")


@pytest.fixture
def api(tmp_path):
    return Api(Registry(Store(tmp_path / "objects.db")))


def namespace(client, name, **labels):
    client.create("v1", "namespaces", {"metadata": {"name": name, "labels": {
        f"pod-security.kubernetes.io/{k.replace('_', '-')}": v for k, v in labels.items()}}})
    client.create("v1", "serviceaccounts", {"metadata": {"name": "default"}}, name)    # the controller's


@pytest.fixture
def client(api):
    admin = LocalClient(api, "admin", ["system:masters", "system:authenticated"])
    namespace(admin, "plain")
    namespace(admin, "strict", enforce="restricted")
    namespace(admin, "base", enforce="baseline", warn="restricted", audit="restricted")
    return admin


def pod(name="p", **spec):
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}], **spec}}


def compliant(name="ok"):
    return {"metadata": {"name": name}, "spec": {
        "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{"name": "c", "image": "nginx:1.27", "securityContext": {
            "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}]}}


def refused(fn, *args) -> ApiError:
    with pytest.raises(ApiError) as info:
        fn(*args)
    return info.value


def test_unlabelled_namespaces_admit_anything(client):
    created = client.create("v1", "pods", pod(hostNetwork=True, volumes=[{"name": "h", "hostPath": {"path": "/"}}]),
                            "plain")
    assert created["spec"]["hostNetwork"] is True


def test_restricted_refuses_a_default_pod_with_upstreams_text(client):
    error = refused(client.create, "v1", "pods", pod(), "strict")
    assert error.code == 403 and error.reason == "Forbidden"
    assert error.message == 'pods "p" is forbidden: ' + RESTRICTED_NGINX
    assert client.create("v1", "pods", compliant(), "strict")["metadata"]["name"] == "ok"


def test_baseline_checks_and_their_order(client):
    body = pod(hostNetwork=True, hostPID=True, volumes=[{"name": "root", "hostPath": {"path": "/"}}])
    body["spec"]["containers"][0].update(
        ports=[{"containerPort": 80, "hostPort": 8080}],
        securityContext={"privileged": True, "capabilities": {"add": ["NET_ADMIN", "CHOWN"]}})
    body["spec"]["securityContext"] = {"sysctls": [{"name": "kernel.msgmax", "value": "1"},
                                                   {"name": "net.ipv4.tcp_keepalive_time", "value": "60"}]}
    error = refused(client.create, "v1", "pods", body, "base")
    # non-overlapping baseline checks in file order, then the overlapping ones (registry.go)
    assert error.message == (
        'pods "p" is forbidden: violates PodSecurity "baseline:latest": host namespaces (hostNetwork, hostPID), '
        'hostPort (container "c" uses hostPort 8080), privileged (container "c" must not set '
        'securityContext.privileged=true), forbidden sysctls (kernel.msgmax), non-default capabilities '
        '(container "c" must not include "NET_ADMIN" in securityContext.capabilities.add), hostPath volumes '
        '(volume "root")')


def test_restricted_volume_types_and_run_as_user(client):
    body = compliant("vol")
    body["spec"]["volumes"] = [{"name": "data", "hostPath": {"path": "/srv"}},
                               {"name": "cfg", "configMap": {"name": "x"}},
                               {"name": "web", "nfs": {"server": "nfs", "path": "/"}}]
    body["spec"]["containers"][0]["securityContext"]["runAsUser"] = 0
    error = refused(client.create, "v1", "pods", body, "strict")
    assert error.message == (
        'pods "vol" is forbidden: violates PodSecurity "restricted:latest": restricted volume types (volumes '
        '"data", "web" use restricted volume types "hostPath", "nfs"), runAsUser=0 (container "c" must not set '
        'runAsUser=0)')


def test_versions_choose_the_checks():
    sysctl = {"securityContext": {"sysctls": [{"name": "net.ipv4.tcp_keepalive_time", "value": "60"}]},
              "containers": [{"name": "c", "image": "x"}]}
    # net.ipv4.tcp_keepalive_time is safe from policy v1.29 on (check_sysctls.go sysctls_1_29)
    assert evaluate("baseline", 28, {}, sysctl) == [("forbidden sysctls", "net.ipv4.tcp_keepalive_time")]
    assert evaluate("baseline", 29, {}, sysctl) == []
    # capabilities_restricted belongs to v1.22 on, allowPrivilegeEscalation to v1.8 on
    old = [reason for reason, _ in evaluate("restricted", 21, {}, {"containers": [{"name": "c"}]})]
    assert old == ["allowPrivilegeEscalation != false", "runAsNonRoot != true", "seccompProfile"]
    assert forbidden_detail([("a", ""), ("b", "x")]) == "a, b (x)"


def test_warn_and_audit_levels(client, api):
    body = pod("w")
    client.create("v1", "pods", body, "base")       # baseline enforce admits it
    trace = api.traces.newest(1)[0]
    assert trace["annotations"]["pod-security.kubernetes.io/enforce-policy"] == "baseline:latest"
    assert trace["annotations"]["pod-security.kubernetes.io/audit-violations"] == (
        WOULD_NGINX)
    code, _, headers = _raw(api, "POST", "/api/v1/namespaces/base/pods", pod("w2"))
    assert code == 201
    assert headers == [WOULD_NGINX]


def _raw(api, method, path, body):
    """The answer with its warnings (the `Warning: 299` headers kubectl prints)."""
    admin = LocalClient(api, "admin", ["system:masters", "system:authenticated"])
    content_type = "application/merge-patch+json" if method == "PATCH" else None
    response = api.handle(admin._request(method, path, None, body, content_type, None))
    return response.code, response.body, response.warnings


def test_deployments_are_warned_about_not_refused(client, api):
    deployment = {"metadata": {"name": "web"}, "spec": {
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": pod()["spec"]}}}
    code, _, warnings = _raw(api, "POST", "/apis/apps/v1/namespaces/base/deployments", deployment)
    assert code == 201 and warnings == [WOULD_NGINX]
    # only enforce set: warn and audit are privileged, the Deployment passes silently
    code, _, warnings = _raw(api, "POST", "/apis/apps/v1/namespaces/strict/deployments", deployment)
    assert code == 201 and warnings == []


def test_pod_updates_are_checked_only_when_an_image_changes(client):
    created = client.create("v1", "pods", pod("u", hostIPC=True), "plain")
    client.patch("v1", "namespaces", "plain",
                 {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "baseline"}}})
    created["metadata"]["labels"] = {"touched": "yes"}
    client.update("v1", "pods", created, "plain")       # isSignificantPodUpdate: nothing significant
    created = client.get("v1", "pods", "u", "plain")
    created["spec"]["containers"][0]["image"] = "nginx:1.28"
    error = refused(client.update, "v1", "pods", created, "plain")
    assert error.message == ('pods "u" is forbidden: violates PodSecurity "baseline:latest": '
                             "host namespaces (hostIPC)")


def test_invalid_labels_are_refused(client):
    error = refused(client.create, "v1", "namespaces", {"metadata": {"name": "bad", "labels": {
        "pod-security.kubernetes.io/enforce": "strict", "pod-security.kubernetes.io/warn-version": "1.30"}}})
    assert error.code == 422
    assert error.message == (
        'Namespace "bad" is invalid: [metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: '
        '"strict": must be one of privileged, baseline, restricted, '
        'metadata.labels[pod-security.kubernetes.io/warn-version]: Invalid value: "1.30": must be "latest" or "v1.x"]')


def test_tightening_the_enforce_level_warns_about_existing_pods(client, api):
    for name in ("b", "a", "c"):
        client.create("v1", "pods", pod(name), "plain")
    client.create("v1", "pods", pod("h", hostPID=True), "plain")
    code, _, warnings = _raw(api, "PATCH", "/api/v1/namespaces/plain", {
        "metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}})
    assert code == 200
    assert warnings == [
        'existing pods in namespace "plain" violate the new PodSecurity enforce level "restricted:latest"',
        "a (and 2 other pods): allowPrivilegeEscalation != false, unrestricted capabilities, runAsNonRoot != true, "
        "seccompProfile",
        "h: host namespaces, allowPrivilegeEscalation != false, unrestricted capabilities, runAsNonRoot != true, "
        "seccompProfile"]
    # relaxing it checks nothing
    code, _, warnings = _raw(api, "PATCH", "/api/v1/namespaces/plain", {
        "metadata": {"labels": {"pod-security.kubernetes.io/enforce": "baseline"}}})
    assert code == 200 and warnings == []


def test_only_the_first_3000_pods_are_checked_and_the_warning_says_so(client, api, monkeypatch):
    """EvaluatePodsInNamespace checks namespaceMaxPodsToCheck (3000) Pods and says how many of how
    many; the limit is lowered here to keep the test small, the mechanism is the same."""
    from labkit.apiserver.admission import podsecurity

    assert podsecurity.NAMESPACE_MAX_PODS_TO_CHECK == 3000
    monkeypatch.setattr(podsecurity, "NAMESPACE_MAX_PODS_TO_CHECK", 2)
    for name in ("a", "b", "c"):
        client.create("v1", "pods", compliant(name), "plain")
    code, _, warnings = _raw(api, "PATCH", "/api/v1/namespaces/plain", {
        "metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}})
    assert code == 200
    assert warnings == ["new PodSecurity enforce level only checked against the first 2 of 3 existing pods"]
    namespace(client, "more")
    for name in ("d", "e", "f"):
        client.create("v1", "pods", pod(name, hostPID=True), "more")
    code, _, warnings = _raw(api, "PATCH", "/api/v1/namespaces/more", {
        "metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}})
    assert warnings[:2] == ["new PodSecurity enforce level only checked against the first 2 of 3 existing pods",
                            'existing pods in namespace "more" violate the new PodSecurity enforce level '
                            '"restricted:latest"']
    assert warnings[2].startswith("d (and 1 other pod): host namespaces")


class FakeClock:
    """Seconds that advance by `step` each time they are read (each Pod's check reads it once)."""

    def __init__(self, step: float):
        self.now, self.step = 100.0, step

    def __call__(self) -> float:
        value = self.now
        self.now += self.step
        return value


def test_the_check_stops_at_its_one_second_deadline(api, client):
    """namespacePodCheckTimeout: the deadline is tested after each Pod's evaluation (so the Pod
    being checked when it passes is counted), and the warning says how many of how many."""
    from labkit.apiserver.admission import podsecurity

    assert podsecurity.NAMESPACE_POD_CHECK_TIMEOUT == 1.0
    for name in ("a", "b", "c", "d", "e"):
        client.create("v1", "pods", pod(name, hostPID=True), "plain")
    enforce = ("restricted", None)
    # 0.4 s per read of the clock: the deadline (start + 1 s) has passed at the read after the 3rd Pod (1.2 s)
    slow = podsecurity.PodSecurity(api.registry.store, clock=FakeClock(0.4))
    warnings = slow.evaluate_pods_in_namespace("plain", enforce)
    assert warnings[:2] == ["new PodSecurity enforce level only checked against the first 3 of 5 existing pods",
                            'existing pods in namespace "plain" violate the new PodSecurity enforce level '
                            '"restricted:latest"']
    assert warnings[2].startswith("a (and 2 other pods): host namespaces")
    # a clock that jumps past the deadline at once still lets the first Pod be checked
    stalled = podsecurity.PodSecurity(api.registry.store, clock=FakeClock(5.0))
    assert stalled.evaluate_pods_in_namespace("plain", enforce)[0] == \
        "new PodSecurity enforce level only checked against the first 1 of 5 existing pods"
    # a fast clock checks all: no count
    fast = podsecurity.PodSecurity(api.registry.store, clock=FakeClock(0.0))
    assert fast.evaluate_pods_in_namespace("plain", enforce)[1].startswith("a (and 4 other pods): ")


def test_the_check_takes_at_most_half_the_time_the_request_has_left(api, client):
    """EvaluatePodsInNamespace: "don't take more than half the remaining time" of the request
    (its `?timeout=`): 0.8 s left gives the check 0.4 s, not its 1 s."""
    from labkit.apiserver.admission import podsecurity

    for name in ("a", "b", "c", "d", "e"):
        client.create("v1", "pods", pod(name, hostPID=True), "plain")
    enforce = ("restricted", None)
    check = podsecurity.PodSecurity(api.registry.store, clock=FakeClock(0.3))
    assert check.evaluate_pods_in_namespace("plain", enforce, remaining=0.8)[0] == \
        "new PodSecurity enforce level only checked against the first 2 of 5 existing pods"
    check = podsecurity.PodSecurity(api.registry.store, clock=FakeClock(0.3))
    assert check.evaluate_pods_in_namespace("plain", enforce, remaining=30.0)[0] == \
        "new PodSecurity enforce level only checked against the first 4 of 5 existing pods"


def test_one_pod_per_controller_is_checked_first():
    """prioritizePods: the first Pod of each controller and the Pods without one, in list order,
    then the other Pods of controllers already represented."""
    from labkit.apiserver.admission.podsecurity import prioritize_pods

    def owned(name, uid):
        return {"metadata": {"name": name, "ownerReferences": [{"uid": uid, "controller": True}]}}
    pods = [owned("rs1-a", "1"), owned("rs1-b", "1"), {"metadata": {"name": "bare"}}, owned("rs2-a", "2"),
            owned("rs1-c", "1"), {"metadata": {"name": "ref", "ownerReferences": [{"uid": "1"}]}}]
    assert [p["metadata"]["name"] for p in prioritize_pods(pods)] == ["rs1-a", "bare", "rs2-a", "ref", "rs1-b",
                                                                       "rs1-c"]


def test_a_pod_in_a_user_namespace_is_not_relaxed_in_v1_34(client):
    """hostUsers: false relaxes runAsNonRoot and runAsUser only behind the alpha gate
    UserNamespacesPodSecurityStandards, off by default in v1.34.1."""
    body = compliant("userns")
    body["spec"]["hostUsers"] = False
    body["spec"]["securityContext"] = {"runAsUser": 0, "seccompProfile": {"type": "RuntimeDefault"}}
    error = refused(client.create, "v1", "pods", body, "strict")
    assert error.message == (
        'pods "userns" is forbidden: violates PodSecurity "restricted:latest": runAsNonRoot != true (pod or container '
        '"c" must set securityContext.runAsNonRoot=true), runAsUser=0 (pod must not set runAsUser=0)')


# -- real kubectl ----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed")
    with embedded_server(tmp_path_factory.mktemp("apiserver"), tmp_path_factory.mktemp("home")) as srv:
        yield srv


def test_kubectl_sees_the_denial_and_the_warnings(server):
    assert kubectl(server, "create", "namespace", "secure").returncode == 0
    labelled = kubectl(server, "label", "namespace", "secure", "pod-security.kubernetes.io/enforce=restricted",
                       "pod-security.kubernetes.io/warn=restricted")
    assert labelled.returncode == 0, labelled.stderr
    result = None
    for _ in range(50):      # the serviceaccount controller makes the namespace's default account
        result = kubectl(server, "run", "web", "-n", "secure", "--image=nginx:1.27")
        if "serviceaccount" not in result.stderr:
            break
        subprocess.run(["sleep", "0.1"])
    assert result.returncode == 1
    assert result.stderr.strip() == ('Error from server (Forbidden): pods "web" is forbidden: '
                                     + RESTRICTED_NGINX.replace('"c"', '"web"'))
    # a Deployment is admitted with a warning; its ReplicaSet's Pods are refused at creation
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "secure"},
                  "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {
                      "metadata": {"labels": {"app": "web"}},
                      "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}}}
    applied = kubectl(server, "apply", "-f", "-", input=json.dumps(deployment))
    assert applied.returncode == 0, applied.stderr
    assert applied.stderr.strip() == "Warning: " + WOULD_NGINX
    failed = ""
    for _ in range(100):
        failed = kubectl(server, "get", "events", "-n", "secure", "--field-selector", "reason=FailedCreate",
                         "-o", "jsonpath={.items[0].message}").stdout
        if failed:
            break
        subprocess.run(["sleep", "0.1"])
    assert failed.startswith('Error creating: pods "web-') and ('is forbidden: ' + RESTRICTED_NGINX) in failed
