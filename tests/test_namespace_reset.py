"""Resets of the namespace lab keep the student's work unless asked: `labkit reset namespace
EXERCISE` lists what it would revert (lab.py's student_work) and refuses without --yes; a reset
of release-finalizer after the CRD was deleted makes the CRD again and rebuilds the namespace of
force-finalize whose Backup went with it; the check names the CRD and the other namespace's
Backup. The prediction of terminating-create is judged against the Terminating namespace the lab
built, and its feedback never states the answer."""

from __future__ import annotations

import json
import subprocess

import pytest

from support import labkit, wait_until
from test_namespace_lab import answer, namespace_lab, results


def kubectl(env, *args, check=True):
    out = subprocess.run(["kubectl", *args], capture_output=True, text=True, env=env, timeout=60)
    if check and out.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)}: {out.stderr}")
    return out


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    with namespace_lab(tmp_path_factory.mktemp("namespace-reset")) as env:
        yield env


def test_a_fresh_lab_has_no_work_to_lose_and_resets_without_asking(lab):
    for exercise in ("conditions", "own-finalizer", "volume-in-use", "broken-apiservice", "release-finalizer"):
        out = labkit("reset", "namespace", exercise, env=lab, timeout=300)
        assert out.returncode == 0, out.stderr


def _rebuilt_as_at_the_start(lab):
    """After a reset of release-finalizer: both Backups back with their finalizer, their namespaces
    Terminating, the exercise failing as on a fresh lab, and nothing left for another reset to revert."""
    for ns, name in (("reports", "nightly"), ("legacy", "weekly")):
        backup = json.loads(kubectl(lab, "get", "backup", name, "-n", ns, "-o", "json").stdout)
        assert backup["metadata"]["finalizers"] == ["backup.example.com/upload"]
        assert kubectl(lab, "get", "ns", ns, "-o", "jsonpath={.status.phase}").stdout == "Terminating"
    again = results(lab, "release-finalizer", code=1)["release-finalizer"]
    assert again["message"].startswith("namespace reports still exists (Terminating)"), again
    assert labkit("reset", "namespace", "release-finalizer", env=lab, timeout=300).returncode == 0


def test_a_deleted_crd_fails_release_finalizer_and_its_reset_repairs_it(lab):
    kubectl(lab, "delete", "crd", "backups.example.com", "--wait=false")
    kubectl(lab, "-n", "reports", "patch", "backup", "nightly", "--type=json",
            "-p", '[{"op":"remove","path":"/metadata/finalizers"}]')
    assert wait_until(lambda: kubectl(lab, "get", "ns", "reports", check=False).returncode == 1, timeout=60,
                      interval=0.3)
    result = results(lab, "release-finalizer", code=1)["release-finalizer"]
    assert result["status"] == "fail"
    assert "the CustomResourceDefinition backups.example.com is being deleted" in result["message"], result

    refused = labkit("reset", "namespace", "release-finalizer", env=lab, check=2, timeout=300)
    listed = refused.stderr
    assert "namespace reports is gone: it is built again" in listed, listed
    assert "the CustomResourceDefinition backups.example.com you deleted (it is made again)" in listed, listed
    assert "namespace legacy of exercise force-finalize" in listed, listed
    assert "--yes" in listed
    # nothing was reset
    assert kubectl(lab, "get", "ns", "reports", check=False).returncode == 1

    labkit("reset", "namespace", "release-finalizer", "--yes", env=lab, check=0, timeout=300)
    crd = json.loads(kubectl(lab, "get", "crd", "backups.example.com", "-o", "json").stdout)
    assert not crd["metadata"].get("deletionTimestamp")
    _rebuilt_as_at_the_start(lab)


def test_a_crd_version_no_longer_served_fails_release_finalizer_and_its_reset_puts_it_back(lab):
    # the check's feedback promises that the reset repairs the CRD: it used to fail creating the
    # Backup of reports while v1 was not served, and left reports half built
    kubectl(lab, "patch", "crd", "backups.example.com", "--type=json",
            "-p", '[{"op":"replace","path":"/spec/versions/0/served","value":false}]')
    assert wait_until(lambda: kubectl(lab, "get", "ns", "reports", check=False).returncode == 1, timeout=60,
                      interval=0.3)
    message = results(lab, "release-finalizer", code=1)["release-finalizer"]["message"]
    assert "changed the CustomResourceDefinition itself" in message and "repairs it" in message, message

    listed = labkit("reset", "namespace", "release-finalizer", env=lab, check=2, timeout=300).stderr
    assert "the CustomResourceDefinition backups.example.com you changed" in listed, listed
    assert "namespace legacy" not in listed, listed     # its Backup is only hidden, not changed
    labkit("reset", "namespace", "release-finalizer", "--yes", env=lab, check=0, timeout=300)
    crd = json.loads(kubectl(lab, "get", "crd", "backups.example.com", "-o", "json").stdout)
    assert [(v["name"], v["served"], v["storage"]) for v in crd["spec"]["versions"]] == [("v1", True, True)]
    _rebuilt_as_at_the_start(lab)


def test_releasing_another_namespaces_backup_fails_and_is_listed(lab):
    kubectl(lab, "-n", "legacy", "patch", "backup", "weekly", "--type=json",
            "-p", '[{"op":"remove","path":"/metadata/finalizers"}]')
    message = results(lab, "release-finalizer", code=1)["release-finalizer"]["message"]
    assert "backups.example.com/weekly in legacy" in message and "other namespaces' objects alone" in message, message
    listed = labkit("reset", "namespace", "release-finalizer", env=lab, check=2, timeout=300).stderr
    assert "namespace legacy of exercise force-finalize" in listed, listed
    labkit("reset", "namespace", "release-finalizer", "--yes", env=lab, check=0, timeout=300)
    backup = json.loads(kubectl(lab, "get", "backup", "weekly", "-n", "legacy", "-o", "json").stdout)
    assert backup["metadata"]["finalizers"] == ["backup.example.com/upload"]
    # force-finalize's namespace was built afresh by that reset: its exercise starts from there (the
    # finalize request with which the reset removed the old legacy is no force-finalize of the student's)
    labkit("solve", "namespace", "force-finalize", env=lab, check=0, timeout=300)
    assert results(lab, "force-finalize", code=0)["force-finalize"]["status"] == "pass"
    labkit("reset", "namespace", "force-finalize", "--yes", env=lab, check=0, timeout=300)


def test_student_work_lists_each_exercise_changes(lab):
    kubectl(lab, "delete", "namespace", "billing", "--wait=false")
    kubectl(lab, "cordon", "node-b")
    listed = labkit("reset", "namespace", env=lab, check=2, timeout=300).stderr
    assert "your deletion of namespace billing" in listed, listed
    assert "your cordon of node node-b" in listed, listed
    only = labkit("reset", "namespace", "conditions", env=lab, check=2, timeout=300).stderr
    assert "your deletion of namespace billing" in only and "node-b" not in only, only
    labkit("reset", "namespace", "conditions", "--yes", env=lab, check=0, timeout=300)
    labkit("reset", "namespace", "volume-in-use", "--yes", env=lab, check=0, timeout=300)
    assert labkit("reset", "namespace", env=lab, timeout=600).returncode == 0


def test_a_changed_apiservice_is_listed_and_put_back(lab):
    # a newcomer made the APIService Local (spec.service null) for broken-apiservice; the reset put
    # it back as the lab builds it and listed only the namespace and the Service
    kubectl(lab, "patch", "apiservice", "v1beta1.metrics.k8s.io", "--type=merge", "-p", '{"spec":{"service":null}}')
    listed = labkit("reset", "namespace", "broken-apiservice", env=lab, check=2, timeout=300).stderr
    assert "your changes to the APIService v1beta1.metrics.k8s.io" in listed, listed
    labkit("reset", "namespace", "broken-apiservice", "--yes", env=lab, check=0, timeout=300)
    service = kubectl(lab, "get", "apiservice", "v1beta1.metrics.k8s.io", "-o", "jsonpath={.spec.service.name}").stdout
    assert service == "metrics-server"
    assert labkit("reset", "namespace", "broken-apiservice", env=lab, timeout=300).returncode == 0


def test_a_deleted_volume_is_listed_and_the_reset_binds_the_new_claim_to_a_new_one(lab):
    # the Bound volume stays Terminating (kubernetes.io/pv-protection); the reset lists it, empties
    # archive (the claim goes, the volume is Released and goes) and makes volume and claim again
    kubectl(lab, "delete", "pv", "archive-data", "--wait=false")
    listed = labkit("reset", "namespace", "volume-in-use", env=lab, check=2, timeout=300).stderr
    assert "your deletion of PersistentVolume archive-data (it is made again)" in listed, listed
    labkit("reset", "namespace", "volume-in-use", "--yes", env=lab, check=0, timeout=300)
    volume = json.loads(kubectl(lab, "get", "pv", "archive-data", "-o", "json").stdout)
    claim = json.loads(kubectl(lab, "get", "pvc", "data", "-n", "archive", "-o", "json").stdout)
    assert not volume["metadata"].get("deletionTimestamp")
    assert (volume["status"]["phase"], claim["status"]["phase"]) == ("Bound", "Bound")
    assert volume["spec"]["claimRef"]["uid"] == claim["metadata"]["uid"]
    assert labkit("reset", "namespace", "volume-in-use", env=lab, timeout=300).returncode == 0   # nothing to lose


def test_terminating_create_is_judged_against_the_lab_s_namespace_and_never_told(lab):
    # what kube-apiserver v1.34 answers (lifecycle/admission.go Admit, errors.NewForbidden), as kubectl prints it
    truth = ('error: failed to create configmap: configmaps "late" is forbidden: unable to create new content in '
             'namespace attic because it is being terminated')
    told = []
    for wrong in ('Error from server (NotFound): namespaces "attic" not found',
                  'configmaps "late" is forbidden: namespace attic is terminating',
                  "forbidden"):
        answer(lab, "terminating-create", {"error": wrong})
        result = results(lab, "terminating-create", code=1)["terminating-create"]
        told.append(result["message"])
        shown = json.dumps(result)
        assert "403" not in shown and "unable to create new content" not in shown, shown
    assert "kind of error in your prediction (NotFound)" in told[0]
    assert "the object part is right" in told[1]
    assert "the start of your message" in told[2]
    shown = labkit("show", "namespace", "terminating-create", env=lab, check=0).stdout
    assert "(Forbidden)" not in shown and "403" not in shown, shown
    hints = "".join(labkit("hint", "namespace", "terminating-create", env=lab, check=0).stdout for _ in range(2))
    assert "hint 2 of 2" in hints
    assert "403" not in hints and "being terminated" not in hints, hints
    answer(lab, "terminating-create", {"error": truth})
    assert results(lab, "terminating-create", code=0)["terminating-create"]["status"] == "pass"
    # tried after the prediction was written: the prediction as it stood still counts, and it is the server's answer
    tried = kubectl(lab, "create", "configmap", "late", "-n", "attic", check=False).stderr.strip()
    assert tried == truth, tried
    assert results(lab, "terminating-create", code=0)["terminating-create"]["status"] == "pass"
    # the answer file written again after the try: not a prediction any more
    answer(lab, "terminating-create", {"error": truth})
    message = results(lab, "terminating-create", code=1)["terminating-create"]["message"]
    assert "trying first earns no points" in message and "create configmaps" in message, message
    # the namespace force-finalized away: the prediction is about a situation that changed
    ns = json.loads(kubectl(lab, "get", "ns", "attic", "-o", "json").stdout)
    ns["spec"]["finalizers"] = []
    subprocess.run(["kubectl", "replace", "--raw", "/api/v1/namespaces/attic/finalize", "-f", "-"], input=json.dumps(ns),
                   env=lab, check=True, capture_output=True, text=True)
    answer(lab, "terminating-create", {"error": 'Error from server (NotFound): namespaces "attic" not found'})
    message = results(lab, "terminating-create", code=1)["terminating-create"]["message"]
    assert message.startswith("the situation the exercise describes has changed"), message
    labkit("reset", "namespace", "terminating-create", "--yes", env=lab, check=0, timeout=300)
    answer(lab, "terminating-create", {"error": truth})
    # the try is remembered across the reset (labkit.predictions' reset rule) ...
    message = results(lab, "terminating-create", code=1)["terminating-create"]["message"]
    assert "a reset since then" in message and "create configmaps" in message, message
    # ... until --forget-prediction forgets it
    labkit("reset", "namespace", "terminating-create", "--yes", "--forget-prediction", env=lab, check=0, timeout=300)
    answer(lab, "terminating-create", {"error": truth})
    assert results(lab, "terminating-create", code=0)["terminating-create"]["status"] == "pass"


def test_kubectl_apply_on_the_lab_refuses_unknown_fields_as_kubectl_1_34(lab):
    """The lab's own commands read no object files; what students apply goes to the embedded API
    server, which decodes strictly as kube-apiserver does with kubectl's fieldValidation=Strict."""
    unknown = subprocess.run(["kubectl", "apply", "-f", "-"], capture_output=True, text=True, env=lab, timeout=60,
                             input="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: typo, namespace: sandbox}\n"
                                   "dta: {a: b}\n")
    assert unknown.returncode == 1
    assert 'strict decoding error: unknown field "dta"' in unknown.stderr, unknown.stderr
    assert kubectl(lab, "get", "configmap", "typo", "-n", "sandbox", check=False).returncode == 1
