"""The requests lab through the real CLI and real kubectl: every check fails on a fresh lab and
passes after its reference solution; a student's webhook served by `labkit requests webhook
serve` is a lab process in the ledger, and `labkit cleanup requests` leaves nothing behind;
`labkit requests explain` shows the stages of a request kubectl sent; the image-reference grammar
the CEL exercise is judged by is upstream's."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import fresh_environment
from support import REPO, host_lock, labkit, labkit_processes

EXERCISES = ["alice", "forbidden", "mutating-webhook", "image-tag-policy", "outage", "audit"]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    base = tmp_path_factory.mktemp("requests-lab")
    env = {**os.environ, **fresh_environment(base)}
    with host_lock(False):
        labkit("run", "requests", env=env, check=0)
    env["KUBECONFIG"] = str(Path(env["LABKIT_STATE_DIR"]) / "requests" / "apiserver" / "kubeconfig")
    env["HOME"] = str(base)
    try:
        yield env
    finally:
        with host_lock(False):
            labkit("cleanup", "requests", env=env, check=0)
        # the API server, the webhook backend and every webhook served are stopped; the
        # certificates, the server's state and the lab's own files are gone
        assert not labkit_processes(env["LABKIT_PREFIX"])
        state = Path(env["LABKIT_STATE_DIR"]) / "requests"
        assert not [name for name in ("apiserver", "webhook-pki", "webhooks", "scene") if (state / name).exists()]


def kubectl(env, *args, check=True, input=None):
    out = subprocess.run(["kubectl", *args], capture_output=True, text=True, env=env, timeout=60, input=input)
    if check and out.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)}: {out.stderr}")
    return out


def results(env, *exercise, code=None):
    out = labkit("check", "requests", *exercise, "--format", "json", env=env, check=code)
    return {r["exercise"]: r for r in json.loads(out.stdout)["results"]}


def test_explain_shows_the_stages_of_a_kubectl_request(lab):
    out = labkit("requests", "explain", "--", "kubectl", "get", "configmaps", "-n", "dev", env=lab, check=0).stdout
    assert "\nlist configmaps in dev by labkit-admin -> 200\n" in out, out     # after kubectl's own output
    assert "authorization" in out and "RBAC" in out and "cluster-admin" in out, out
    assert "level " in out and "authorization.k8s.io/decision = allow" in out, out
    # as JSON: the trace's steps and the audit event of the same audit ID
    [item] = json.loads(labkit("requests", "explain", "--json", env=lab, check=0).stdout)
    assert item["event"]["auditID"] == item["auditID"] and item["steps"]
    # a refused request says that no binding matched, and the audit event says forbid
    denied = labkit("requests", "explain", "--", "kubectl", "get", "pods", "-n", "shop",
                    "--as=system:serviceaccount:shop:reporter", env=lab, check=0).stdout
    assert "-> 403" in denied and "authorization.k8s.io/decision = forbid" in denied, denied


def test_each_check_fails_on_a_fresh_lab_and_passes_after_its_solution(lab):
    fresh = results(lab, code=1)
    assert {e: r["status"] for e, r in fresh.items()} == {e: "fail" for e in EXERCISES}, fresh
    for exercise in EXERCISES:
        labkit("solve", "requests", exercise, env=lab, check=0, timeout=180)
        result = results(lab, exercise)[exercise]
        assert result["status"] == "pass", result
    final = json.loads(labkit("check", "requests", "--format", "json", env=lab, check=0).stdout)
    assert final["passed"] == len(EXERCISES)
    # the webhook's patch is visible stage by stage
    out = labkit("requests", "explain", "--", "kubectl", "run", "seen", "-n", "web", "--image=nginx:1.27",
                 "--dry-run=server", env=lab, check=0).stdout
    assert "labeler.example.com" in out and "example.com~1owner" in out, out


def test_the_webhook_runner_serves_a_function_as_a_lab_process(lab, tmp_path):
    hook = tmp_path / "echo.py"
    hook.write_text("def review(r):\n    return {'apiVersion': 'admission.k8s.io/v1', 'kind': 'AdmissionReview',\n"
                    "            'response': {'uid': r['request']['uid'], 'allowed': True}}\n")
    out = labkit("requests", "webhook", "serve", str(hook), "--name", "echo", env=lab, check=0).stdout
    url = out.split(" on ", 1)[1].split()[0]
    state = Path(lab["LABKIT_STATE_DIR"]) / "requests"
    ledger = [json.loads(line) for line in (state / "ledger.jsonl").read_text().splitlines()]
    assert any(e["kind"] == "process" and e["tag"] == "requests/webhook-echo" for e in ledger)
    ca = state / "webhook-pki" / "ca.crt"
    answer = subprocess.run(["curl", "-s", "--cacert", str(ca), f"{url}/x", "-d", '{"request":{"uid":"u-1"}}'],
                            capture_output=True, text=True, timeout=30)
    assert json.loads(answer.stdout)["response"] == {"uid": "u-1", "allowed": True}
    listed = labkit("requests", "webhook", "list", env=lab, check=0).stdout
    assert "echo  running  " + url in listed
    [row] = [r for r in json.loads(labkit("requests", "webhook", "list", "-o", "json", env=lab, check=0).stdout)
             if r["name"] == "echo"]
    assert row["state"] == "running" and row["url"] == url and row["file"].endswith("echo.py")
    assert "echo\n" in labkit("requests", "webhook", "list", "-o", "name", env=lab, check=0).stdout
    # its serving certificate is for 127.0.0.1, signed by the lab's webhook CA
    text = subprocess.run(["openssl", "x509", "-noout", "-text", "-in", str(state / "webhook-pki" / "echo.crt")],
                          capture_output=True, text=True).stdout
    assert "IP Address:127.0.0.1" in text and "labkit-webhook-ca" in text
    labkit("requests", "webhook", "stop", "echo", env=lab, check=0)
    assert "echo  stopped" in labkit("requests", "webhook", "list", env=lab, check=0).stdout
    # a file without review() is refused with its reason
    bad = tmp_path / "bad.py"
    bad.write_text("x = 1\n")
    refused = labkit("requests", "webhook", "serve", str(bad), "--name", "bad", env=lab, check=2)
    assert "defines no function review" in refused.stderr


@pytest.mark.host_free     # no lab
def test_image_references_are_judged_by_upstreams_grammar():
    spec = importlib.util.spec_from_file_location("requests_checks", REPO / "labs" / "requests" / "checks.py")
    checks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(checks)
    digest = "sha256:" + "a" * 64
    # (distribution/reference's reference_test.go: name, tag, digest, registry with port)
    assert [checks.pinned(i) for i in ("nginx", "nginx:1.27", "registry:5000/app", "registry:5000/app:v1",
                                       f"app@{digest}", f"app:v1@{digest}", "localhost:5000/a/b",
                                       "docker.io/library/nginx:latest", "[::1]:5000/app:v2", "UPPER:tag")] == \
        [False, True, False, True, True, True, False, True, True, False]


def test_and_n_more_counts_requests_not_the_objects_they_name():
    """A binding that grants the forbidden exercise's job more than its Role: the feedback names one
    request and how many more there are, counting a request on any object once, whatever names
    RBAC rules list (it said "(and 32 more)" for five requests: each request again for every name
    the roles' resourceNames list), and a request on one named object (a rule's resourceNames) as
    one."""
    from types import SimpleNamespace

    from labkit.exercises import CheckFailed
    from labkit.labs import load_lab
    from labkit.requests import reconstruct
    lab = load_lab(REPO / "labs" / "requests")
    checks = lab._load("checks.py")
    ctx = SimpleNamespace(params=lab.exercise("forbidden").params, lab=lab, env=SimpleNamespace(lab=lab))
    rbac = "rbac.authorization.k8s.io/v1"
    role = {"apiVersion": rbac, "kind": "Role", "metadata": {"name": "more", "namespace": "shop"},
            "rules": [{"apiGroups": [""], "resources": ["secrets", "configmaps"], "verbs": ["get", "list"]},
                      {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["settings"],
                       "verbs": ["delete"]}]}
    binding = {"apiVersion": rbac, "kind": "RoleBinding", "metadata": {"name": "more", "namespace": "shop"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "more"},
               "subjects": [{"kind": "ServiceAccount", "name": "reporter", "namespace": "shop"}]}
    objects = lab.environment_module().rbac_as_built() + [role, binding]
    obs = {"rbac": objects, "space": {"namespaces": ["default", "dev", "shop"],
                                      "resources": [["", "configmaps", True], ["", "pods", True],
                                                    ["", "secrets", True]]}}
    with pytest.raises(CheckFailed) as info:
        checks.judge_forbidden(ctx, obs)
    assert str(info.value) == ("the job can now get secrets in shop (and 4 more) — the RoleBinding shop/more (of the "
                               "Role more) grants it: it must get what the Role pod-reader says and nothing more")
    job = reconstruct.Subject.of(binding["subjects"][0])
    space = reconstruct.Space.from_observation(obs["space"]).covering(objects, lab.environment_module().rbac_as_built())
    grants = reconstruct.access([role, binding], job, space)        # what the old count counted, less one
    assert len(checks._requests(grants)) == 5 < len(grants)


def test_a_probe_the_outage_blocks_says_how_to_unblock_it_not_that_the_outage_is_unsolved():
    """The outage exercise passes with the backend still down (scoped right, the webhook fails closed
    for the application namespaces, as it must); mutating-webhook's probes in web are then refused
    by pod-policy, and the feedback says to bring the backend back, not to work the outage first."""
    spec = importlib.util.spec_from_file_location("requests_checks_outage", REPO / "labs" / "requests" / "checks.py")
    checks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(checks)
    note = checks._blocked_by_outage('Internal error occurred: failed calling webhook "pod-policy.example.com": '
                                     'failed to call webhook: no endpoints available for service "pod-policy"')
    assert "scale deployment pod-policy --replicas=1" in note and "first" not in note, note
    assert checks._blocked_by_outage("doc is missing path") == ""


@pytest.mark.parametrize("ops", [
    [{"op": "add", "path": "/metadata/labels/example.com~1owner", "value": "web-team"}],
    [{"op": "remove", "path": "/metadata/annotations/a"}],
    [{"op": "replace", "path": "/spec/containers/3/image", "value": "x"}],
    [{"op": "move", "from": "/metadata/labels/gone", "path": "/metadata/labels/here"}],
    [{"op": "copy", "from": "/spec/containers/5", "path": "/spec/containers/-"}],
    [{"op": "test", "path": "/metadata/name", "value": "other"}],
    [{"op": "merge", "path": "/metadata"}],
])
def test_a_patch_that_does_not_apply_is_explained_whatever_the_operation(ops):
    """Feedback on a webhook whose JSON Patch fails reads the failure as the API server words it
    (evanphx/json-patch v4, labkit.apiserver.jsonpatch) for every operation."""
    from labkit.apiserver import jsonpatch
    spec = importlib.util.spec_from_file_location("requests_checks_patch", REPO / "labs" / "requests" / "checks.py")
    checks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(checks)
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}
    with pytest.raises(jsonpatch.PatchError) as err:
        jsonpatch.apply(pod, ops)
    assert "could not be applied" in checks._patch_note(f"Internal error occurred: {err.value}")


def test_an_outage_fix_with_match_conditions_passes(lab):
    labkit("reset", "requests", "outage", "--yes", env=lab, check=0, timeout=120)
    kubectl(lab, "-n", "policy", "scale", "deployment", "pod-policy", "--replicas=0")
    kubectl(lab, "-n", "policy", "wait", "--for=delete", "pod", "-l", "app=pod-policy", "--timeout=60s")
    refused = None
    for i in range(50):     # until the Service's endpoints follow the Pod that is gone
        out = kubectl(lab, "run", f"probe-{i}", "-n", "shop", "--image=nginx:1.27", "--dry-run=server", check=False)
        if out.returncode != 0:
            refused = out
            break
    assert refused is not None and "pod-policy" in refused.stderr, refused
    conditions = [{"name": "not-the-clusters-own",
                   "expression": "!(request.namespace in ['kube-system', 'kube-public', 'kube-node-lease', 'policy'])"}]
    kubectl(lab, "patch", "validatingwebhookconfiguration", "pod-policy", "--type=json", "-p",
            json.dumps([{"op": "add", "path": "/webhooks/0/matchConditions", "value": conditions}]))
    result = results(lab, "outage")["outage"]
    assert result["status"] == "pass", result
    # the same conditions leaving kube-public out still block it while the backend is down
    conditions[0]["expression"] = "!(request.namespace in ['kube-system', 'kube-node-lease', 'policy'])"
    kubectl(lab, "patch", "validatingwebhookconfiguration", "pod-policy", "--type=json", "-p",
            json.dumps([{"op": "replace", "path": "/webhooks/0/matchConditions", "value": conditions}]))
    result = results(lab, "outage", code=1)["outage"]
    assert result["status"] == "fail" and "kube-public still fail" in result["message"], result
    labkit("reset", "requests", "outage", "--yes", env=lab, check=0, timeout=120)


def test_the_audit_hints_do_not_print_the_answer(lab):
    labkit("solve", "requests", "audit", env=lab, check=0)
    answers = Path(lab["LABKIT_ANSWERS_DIR"]) / "requests" / "audit.yaml"
    deleter = answers.read_text().split("user:", 1)[1].strip()
    audit_log = Path(lab["LABKIT_STATE_DIR"]) / "requests" / "apiserver" / "audit.log"
    from labkit.labs import load_lab
    hints = "\n".join(load_lab(REPO / "labs" / "requests").exercise("audit").hints)
    commands = [c for c in hints.split("`") if c.startswith("jq ")]
    assert commands, hints
    for command in commands:
        out = subprocess.run(command.replace("AUDIT_LOG", str(audit_log)), shell=True, capture_output=True,
                             text=True, timeout=30)
        assert out.returncode == 0 and '"delete"' in out.stdout, out
        assert deleter not in out.stdout, f"{command} prints the answer:\n{out.stdout}"


def test_a_misspelled_field_is_refused_in_kubectls_words(lab, tmp_path):
    path = tmp_path / "binding.yaml"
    path.write_text("apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: typo\n"
                    "  namespace: shop\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n"
                    "  name: pod-reader\nsubject:\n- kind: ServiceAccount\n  name: reporter\n  namespace: shop\n")
    out = kubectl(lab, "apply", "-f", str(path), check=False)
    assert out.returncode == 1
    assert 'RoleBinding in version "v1" cannot be handled as a RoleBinding: strict decoding error: unknown field ' \
           '"subject"' in out.stderr, out.stderr


def test_a_reset_lists_the_students_objects_and_keeps_them(lab):
    kubectl(lab, "create", "rolebinding", "alice-reads", "-n", "dev", "--clusterrole=view", "--user=alice")
    refused = labkit("reset", "requests", "alice", env=lab, check=None)
    assert refused.returncode != 0 and "the RoleBinding dev/alice-reads that names alice" in refused.stderr, refused
    assert kubectl(lab, "get", "rolebinding", "alice-reads", "-n", "dev", check=False).returncode == 0
    done = labkit("reset", "requests", "alice", "--yes", env=lab, check=0)
    saved = [line.split(" kept in ", 1)[1].split()[0] for line in (done.stdout + done.stderr).splitlines()
             if " kept in " in line]
    assert saved, done
    assert "name: alice-reads" in Path(saved[0]).read_text()
    assert kubectl(lab, "get", "rolebinding", "alice-reads", "-n", "dev", check=False).returncode != 0
    kubectl(lab, "apply", "-f", saved[0])        # the student takes it back
    assert kubectl(lab, "get", "rolebinding", "alice-reads", "-n", "dev", check=False).returncode == 0
    labkit("reset", "requests", "alice", "--yes", env=lab, check=0)


def test_alices_certificate_stays_good_after_a_reset_and_the_saved_file_brings_her_access_back(lab):
    """A reset of alice deletes her CertificateSigningRequests; `kubectl apply -f` of the saved file
    brings them back Pending, without the certificate they issued. The certificate the student's
    kubeconfig holds was issued through an approved request all the same: with the binding back,
    the check passes (it failed saying the certificate was not issued through a CSR)."""
    labkit("solve", "requests", "alice", env=lab, check=0)
    assert results(lab, "alice")["alice"]["status"] == "pass"
    done = labkit("reset", "requests", "alice", "--yes", env=lab, check=0)
    assert "a certificate it issued stays good for the check" in done.stderr, done.stderr
    saved = [line.split(" kept in ", 1)[1].split()[0] for line in (done.stdout + done.stderr).splitlines()
             if " kept in " in line]
    assert saved, done
    kubectl(lab, "apply", "-f", saved[0])
    result = results(lab, "alice", code=None)["alice"]
    assert result["status"] == "pass", result
    labkit("reset", "requests", "alice", "--yes", env=lab, check=0)


def test_alices_certificate_stays_good_after_her_csr_is_deleted(lab):
    """A student who deletes the CertificateSigningRequest once the certificate is taken from it
    (as kube-controller-manager's csrcleaner does an hour after it was issued) keeps a certificate
    issued through it: the check passes (it said the certificate was not issued through a CSR)."""
    labkit("solve", "requests", "alice", env=lab, check=0)
    assert results(lab, "alice")["alice"]["status"] == "pass"
    csrs = json.loads(kubectl(lab, "get", "csr", "-o", "json").stdout)["items"]
    assert csrs
    kubectl(lab, "delete", "csr", *[c["metadata"]["name"] for c in csrs])
    result = results(lab, "alice", code=None)["alice"]
    assert result["status"] == "pass", result
    labkit("reset", "requests", "alice", "--yes", env=lab, check=0)


def test_a_reset_of_alice_gives_view_back_its_own_rules_and_keeps_the_clusterrole_that_changed_it(lab):
    """A ClusterRole of the student's labelled aggregate-to-view makes view read what it grants, for
    everyone bound to view; a reset of alice left it, so the exercise did not start afresh (a right
    answer then failed on Secrets). The reset lists it, keeps it in its saved file, deletes it, and
    view has its own rules again."""
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "view-secrets", "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
            "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"]}]}
    kubectl(lab, "apply", "-f", "-", input=json.dumps(role))
    done = labkit("reset", "requests", "alice", "--yes", env=lab, check=0)
    assert "the ClusterRole view-secrets, which adds its rules to the ClusterRole view" in done.stderr, done.stderr
    saved = [line.split(" kept in ", 1)[1].split()[0] for line in (done.stdout + done.stderr).splitlines()
             if " kept in " in line]
    assert saved and "name: view-secrets" in Path(saved[0]).read_text()
    assert kubectl(lab, "get", "clusterrole", "view-secrets", check=False).returncode != 0
    view = json.loads(kubectl(lab, "get", "clusterrole", "view", "-o", "json").stdout)
    assert not any("secrets" in (r.get("resources") or []) for r in view.get("rules") or []), view["rules"]


def test_a_reset_of_mutating_webhook_puts_webs_label_back_and_says_so(lab):
    """The label pod-labeler=enabled of web is the mutating-webhook exercise's situation: a student
    who took it off (an experiment) is told by the check that it is gone, and a reset of the
    exercise lists it and puts it back; the student's other namespace labels stay."""
    kubectl(lab, "label", "namespace", "web", "pod-labeler-", "team=web")
    refused = labkit("reset", "requests", "mutating-webhook", env=lab, check=None)
    assert refused.returncode != 0, refused
    assert "the label pod-labeler=enabled of the namespace web, which you removed (the reset puts it back" in \
        refused.stderr, refused.stderr
    labkit("reset", "requests", "mutating-webhook", "--yes", env=lab, check=0)
    labels = json.loads(kubectl(lab, "get", "namespace", "web", "-o", "json").stdout)["metadata"]["labels"]
    assert labels.get("pod-labeler") == "enabled" and labels.get("team") == "web", labels
    kubectl(lab, "label", "namespace", "web", "team-")


def test_a_rebuild_of_the_whole_lab_lists_the_namespace_labels_it_reverts_and_keeps_them(lab):
    """No exercise's reset touches the namespaces (but for web's label pod-labeler=enabled, which a
    reset of mutating-webhook puts back); a rebuild of the whole lab (a new API server)
    reverts every label the student added, changed or removed and every namespace they made: it
    says so before, and keeps those namespaces as YAML."""
    kubectl(lab, "label", "namespace", "dev", "pod-labeler=enabled")
    kubectl(lab, "label", "namespace", "web", "pod-labeler-")
    kubectl(lab, "label", "namespace", "kube-system", "admission=skip")
    kubectl(lab, "create", "namespace", "scratch")
    refused = labkit("reset", "requests", env=lab, check=None)
    assert refused.returncode != 0
    assert refused.stderr.count("namespace web") == 1, refused.stderr      # said once, as the rebuild's
    for phrase in ("the label pod-labeler=enabled you added to the namespace dev (the rebuild removes it)",
                   "the label pod-labeler=enabled you removed from the namespace web (the rebuild puts it back)",
                   "the label admission=skip you added to the namespace kube-system (the rebuild removes it)",
                   "the namespace scratch you made, with everything in it"):
        assert phrase in refused.stderr, refused.stderr
    done = labkit("reset", "requests", "--yes", env=lab, check=0, timeout=180)
    saved = [line.split(" kept in ", 1)[1].split()[0] for line in (done.stdout + done.stderr).splitlines()
             if " kept in " in line]
    assert saved, done
    assert "a label you had removed is put back by the rebuild and stays after `kubectl apply`" in \
        done.stdout + done.stderr, done
    kept = {d["metadata"]["name"]: d["metadata"].get("labels") or {}
            for d in __import__("yaml").safe_load_all(Path(saved[0]).read_text()) if d["kind"] == "Namespace"}
    assert kept["dev"]["pod-labeler"] == "enabled" and kept["kube-system"]["admission"] == "skip"
    assert "scratch" in kept and "pod-labeler" not in kept["web"]
    labels = json.loads(kubectl(lab, "get", "namespaces", "-o", "json").stdout)["items"]
    assert {n["metadata"]["name"]: n["metadata"]["labels"].get("pod-labeler") for n in labels
            if "pod-labeler" in n["metadata"]["labels"]} == {"web": "enabled"}


def test_a_reset_stops_the_students_webhook_and_serving_it_again_reaches_the_saved_configuration(lab, tmp_path):
    """`labkit reset requests mutating-webhook` stops the webhook the student served and keeps their
    MutatingWebhookConfiguration as YAML; serving the same file under the same name again gives it
    the port it had, so the saved configuration, applied back, calls it again (with failurePolicy
    Fail, a configuration naming another port would fail every Pod creation in web)."""
    hook = tmp_path / "allow.py"
    hook.write_text("def review(r):\n    return {'apiVersion': 'admission.k8s.io/v1', 'kind': 'AdmissionReview',\n"
                    "            'response': {'uid': r['request']['uid'], 'allowed': True}}\n")
    out = labkit("requests", "webhook", "serve", str(hook), "--name", "kept", env=lab, check=0).stdout
    url = out.split(" on ", 1)[1].split()[0]
    ca = out.split("caBundle: ", 1)[1].split()[0]
    config = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
              "metadata": {"name": "kept"},
              "webhooks": [{"name": "kept.example.com", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                            "failurePolicy": "Fail", "namespaceSelector": {"matchLabels": {"pod-labeler": "enabled"}},
                            "clientConfig": {"url": f"{url}/mutate", "caBundle": ca},
                            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                                       "resources": ["pods"]}]}]}
    kubectl(lab, "apply", "-f", "-", input=json.dumps(config))
    refused = labkit("reset", "requests", "mutating-webhook", env=lab, check=None)
    assert refused.returncode != 0 and "the webhook kept that `labkit requests webhook serve` runs" in refused.stderr
    done = labkit("reset", "requests", "mutating-webhook", "--yes", env=lab, check=0)
    [saved] = [line.split(" kept in ", 1)[1].split()[0] for line in (done.stdout + done.stderr).splitlines()
               if " kept in " in line]
    assert "kept  stopped" in labkit("requests", "webhook", "list", env=lab, check=0).stdout
    again = labkit("requests", "webhook", "serve", str(hook), "--name", "kept", env=lab, check=0).stdout
    assert again.split(" on ", 1)[1].split()[0] == url, again
    kubectl(lab, "apply", "-f", saved)
    created = kubectl(lab, "run", "reached", "-n", "web", "--image=nginx:1.27", "--dry-run=server", check=False)
    assert created.returncode == 0, created.stderr
    labkit("reset", "requests", "mutating-webhook", "--yes", env=lab, check=0)
