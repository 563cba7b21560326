"""In-process judgement of the namespace lab's checks (and the shared answer loading they use) on
observations of work a student could do: each wrong piece of work fails with a message that says
what is wrong and where to look. No lab is built: the judges get plain observations."""

from __future__ import annotations

import importlib.util

import pytest

from labkit.exercises import AnswerMissing, CheckContext, CheckFailed, answer_path
from labkit.labs import get_lab
from labkit.state import LabEnv, LabState


def context(lab_id: str, exercise_id: str, answer_text: str | None = None) -> CheckContext:
    lab = get_lab(lab_id)
    state = LabState(lab.id)
    state.ensure_dir()
    ctx = CheckContext(LabEnv(lab, state, token="test"), lab.exercise(exercise_id))
    if answer_text is not None:
        path = answer_path(lab.id, exercise_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(answer_text)
    return ctx


def checks(lab_id: str):
    lab = get_lab(lab_id)
    spec = importlib.util.spec_from_file_location(f"{lab_id}_checks_under_test", lab.directory / "checks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- the shared answer loading ------------------------------------------------------------------

@pytest.mark.parametrize("lab_id,exercise,text,key,line", [
    ("namespace", "terminating-create", "error: first guess\nerror: second guess\n", "error", 2),
    ("gc", "owner-chain", "pod: p\nreplicaset: a\ndeployment: b\nreplicaset: b\ndeployment: a\n", "replicaset", 4),
    ("numa", "cpu-hints", "hints: []\nhints: [1]\n", "hints", 2),
])
def test_an_answer_that_gives_a_key_twice_is_refused_not_read_as_the_last_one(lab_id, exercise, text, key, line):
    ctx = context(lab_id, exercise, text)
    with pytest.raises(CheckFailed) as failed:
        ctx.answer()
    assert f"your answer is malformed: it gives {key} twice (line {line}): YAML keeps only the last one" \
        in str(failed.value)
    assert not isinstance(failed.value, AnswerMissing)


def test_a_key_used_once_in_each_of_two_mappings_is_not_a_duplicate():
    ctx = context("namespace", "conditions", "remaining: {configmaps.: 1}\nfinalizers: {remaining: 1}\n")
    assert ctx.answer()["finalizers"] == {"remaining": 1}


# -- the namespace lab's judges on the newcomer's work --------------------------------------------

def test_own_finalizer_fails_when_another_namespace_was_finalized_too():
    ctx = context("namespace", "own-finalizer")
    seen = {"requests": [["kubernetes", "example.com/hold"], ["kubernetes"]], "spec_edit": "",
            "other_namespaces": ["update …/finalize on default"],
            "namespace": {"original": True, "deleting": False, "finalizers": ["kubernetes"], "changed": True}}
    with pytest.raises(CheckFailed) as failed:
        checks("namespace").judge_own_finalizer(ctx, seen)
    assert "you also changed namespace default" in str(failed.value)
    assert "example.com/hold" not in str(failed.value).split("(")[0]
    assert checks("namespace").judge_own_finalizer(ctx, {**seen, "other_namespaces": []}).status == "pass"


@pytest.mark.parametrize("standard", ["orphan", "foregroundDeletion"])
def test_own_finalizer_is_not_one_of_the_names_kubernetes_defines(standard):
    # a newcomer added and removed `orphan` (accepted without a domain, being standard): passed
    ctx = context("namespace", "own-finalizer")
    seen = {"requests": [["kubernetes", standard], ["kubernetes"]], "spec_edit": "", "other_namespaces": [],
            "namespace": {"original": True, "deleting": False, "finalizers": ["kubernetes"], "changed": True}}
    with pytest.raises(CheckFailed) as failed:
        checks("namespace").judge_own_finalizer(ctx, seen)
    assert f"{standard} is not a finalizer of your own" in str(failed.value)
    own = {**seen, "requests": [["kubernetes", standard], ["kubernetes", "example.com/hold"], ["kubernetes"]]}
    assert checks("namespace").judge_own_finalizer(ctx, own).status == "pass"


def test_volume_in_use_fails_when_a_healthy_node_is_marked_out_of_service_too():
    ctx = context("namespace", "volume-in-use")
    seen = {"claim_finalizers_edited_by": [], "pod_force_deleted_by": [], "pod": None,
            "other_nodes_marked": ["labkit-node"], "pod_deleted_by_podgc": True,
            "node": {"unschedulable": False, "taints": [{"key": "node.kubernetes.io/out-of-service",
                                                          "value": "nodeshutdown", "effect": "NoExecute"}]},
            "gone": {"namespace": None, "spec_edit": "", "forced": [], "stored": []},
            "volume_writes": [], "volume": {"phase": "Released", "finalizers": ["kubernetes.io/pv-protection"]}}
    with pytest.raises(CheckFailed) as failed:
        checks("namespace").judge_volume_in_use(ctx, seen)
    assert "node labkit-node is marked out of service too" in str(failed.value)
    assert checks("namespace").judge_volume_in_use(ctx, {**seen, "other_nodes_marked": []}).status == "pass"
    # a newcomer marked labkit-node too, then took the mark off again: it passed
    with pytest.raises(CheckFailed) as failed:
        checks("namespace").judge_volume_in_use(ctx, {**seen, "other_nodes_marked": [],
                                                      "other_nodes_marked_on_the_way": ["labkit-node"]})
    assert "node labkit-node was marked out of service on the way" in str(failed.value)


def test_broken_apiservice_fails_when_the_local_apiservices_were_deleted_too():
    ctx = context("namespace", "broken-apiservice")
    seen = {"deleted": True, "discovery_failure": "discovery failed", "apiservice": None,
            "other_apiservices": [f"delete v1.{g}" for g in ("apps", "batch", "rbac.authorization.k8s.io")]
            + ["delete v1."],
            "gone": {"namespace": None, "spec_edit": "", "forced": [], "stored": []}}
    with pytest.raises(CheckFailed) as failed:
        checks("namespace").judge_broken_apiservice(ctx, seen)
    assert "4 APIService(s) besides v1beta1.metrics.k8s.io" in str(failed.value)
    assert checks("namespace").judge_broken_apiservice(ctx, {**seen, "other_apiservices": []}).status == "pass"


def _apiservice_write(verb, body, user="labkit-admin", subresource=None):
    return {"verb": verb, "user": {"username": user}, "requestObject": body, "responseStatus": {"code": 200},
            "objectRef": {"resource": "apiservices", "name": "v1beta1.metrics.k8s.io",
                          **({"subresource": subresource} if subresource else {})}}


LOCAL = _apiservice_write("patch", {"spec": {"service": None, "insecureSkipTLSVerify": False}})
BACK = _apiservice_write("patch", {"spec": {"service": {"name": "metrics-server", "namespace": "kube-system",
                                                        "port": 443}, "insecureSkipTLSVerify": True}})


def _created(service=None):
    return {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": "v1beta1.metrics.k8s.io"},
            "spec": {"group": "metrics.k8s.io", "version": "v1beta1", "groupPriorityMinimum": 100, "versionPriority": 100,
                     **({"service": {"namespace": "kube-system", "name": service, "port": 443}} if service else {})}}


CREATED_LOCAL, CREATED_ELSEWHERE, CREATED_AS_BUILT = _created(), _created("ms2"), _created("metrics-server")


@pytest.mark.parametrize("events,rewrites", [
    # a newcomer made it Local (monitoring finished, the group out of discovery), then put it back: passed
    ([LOCAL, BACK], ["patch: service none"]),
    ([_apiservice_write("patch", [{"op": "replace", "path": "/spec/service/name", "value": "other"}])],
     ["patch: service kube-system/other"]),
    ([_apiservice_write("patch", [{"op": "remove", "path": "/spec/service"}]),
      _apiservice_write("patch", [{"op": "add", "path": "/spec/service",
                                   "value": {"namespace": "kube-system", "name": "metrics-server"}}])],
     ["patch: service none"]),
    ([_apiservice_write("update", {"spec": {"group": "metrics.k8s.io", "version": "v1beta2",
                                            "service": {"namespace": "kube-system", "name": "metrics-server"}}})],
     ["update: version v1beta2"]),
    # deleted and made again Local or pointing elsewhere (then deleted, the accepted end): the same detour
    ([_apiservice_write("delete", None), _apiservice_write("create", CREATED_LOCAL), _apiservice_write("delete", None)],
     ["create: service none"]),
    ([_apiservice_write("delete", None), _apiservice_write("create", CREATED_ELSEWHERE)],
     ["create: service kube-system/ms2"]),
    ([_apiservice_write("delete", None), _apiservice_write("patch", CREATED_LOCAL)], ["patch: service none"]),
    # deleted, or deleted and made again as it was: no rewrite
    ([_apiservice_write("delete", None)], []),
    ([_apiservice_write("delete", None), _apiservice_write("create", CREATED_AS_BUILT)], []),
    # what leaves it serving the same from the same Service is no rewrite: a port, the CA, a label
    ([BACK, _apiservice_write("patch", {"spec": {"service": {"port": 8443}}}),
      _apiservice_write("patch", {"metadata": {"labels": {"a": "b"}}})], []),
    # the aggregator's status writes and the controllers' are not the student's
    ([_apiservice_write("update", {"spec": {}}, user="system:kube-aggregator"),
      _apiservice_write("update", {"status": {}}, subresource="status")], [])])
def test_broken_apiservice_counts_a_rewrite_of_the_apiservice_even_when_undone(monkeypatch, events, rewrites):
    module = checks("namespace")
    monkeypatch.setattr(module, "_audit", lambda ctx: events)
    ctx = context("namespace", "broken-apiservice")
    assert module._apiservice_rewrites(ctx, "v1beta1.metrics.k8s.io", "metrics-server") == rewrites
    seen = {"deleted": True, "discovery_failure": "discovery failed", "other_apiservices": [], "rewrites": rewrites,
            "apiservice": {"status": "True", "group": "metrics.k8s.io", "version": "v1beta1",
                           "service": "kube-system/metrics-server", "settled": True},
            "gone": {"namespace": None, "spec_edit": "", "forced": [], "stored": []}}
    if rewrites:
        with pytest.raises(CheckFailed) as failed:
            module.judge_broken_apiservice(ctx, seen)
        assert "even if you put it back later" in str(failed.value) and rewrites[0] in str(failed.value)
        assert "discovery worked again" not in str(failed.value)
    else:
        assert module.judge_broken_apiservice(ctx, seen).status == "pass"


@pytest.mark.parametrize("written,stored,other", [
    ("configmap", "configmaps", True), ("backup.example.com", "backups.example.com", True),
    ("Backup.example.com", "backups.example.com", True), ("configmaps", "configmaps", False),
    ("backups", "backups.example.com", False), ("secret", "configmaps", False),
    ("backup.other.io", "backups.example.com", False)])
def test_force_finalize_tells_kubectls_name_form_apart_from_an_object_not_stored(written, stored, other):
    assert checks("namespace")._other_form(written, stored) is other


def test_an_unquoted_error_message_is_told_to_be_quoted():
    ctx = context("namespace", "terminating-create",
                  'error: configmaps "late" is forbidden: unable to create new content in namespace attic\n')
    with pytest.raises(AnswerMissing) as failed:
        checks("namespace")._prediction_file(ctx)
    assert "not valid YAML (line 1)" in str(failed.value) and "quote the whole message" in str(failed.value)


def test_own_finalizer_counts_other_namespaces_but_not_the_other_exercises_work(monkeypatch):
    module = checks("namespace")

    clock = iter(range(10, 100))

    def stamp(event):
        return {**event, "requestReceivedTimestamp": f"2026-12-07T17:00:{next(clock):02d}.000000Z"}

    def finalize(ns, finalizers, user="labkit-admin"):
        return stamp({"verb": "update", "objectRef": {"resource": "namespaces", "name": ns, "subresource": "finalize"},
                      "user": {"username": user}, "responseStatus": {"code": 200},
                      "requestObject": {"spec": {"finalizers": finalizers}}})

    def request(verb, ns):
        return stamp({"verb": verb, "objectRef": {"resource": "namespaces", "name": ns},
                      "user": {"username": "labkit-admin"}, "responseStatus": {"code": 200}})
    built = [request("create", "legacy"), request("delete", "legacy"), request("create", "billing")]   # the lab's build
    events = [finalize("legacy", []),                                       # force-finalize's own work
              request("delete", "billing"),                                 # conditions' own work
              finalize("reports", [], user=module.CONTROLLER_USER),
              finalize("sandbox", ["kubernetes", "example.com/hold"]), finalize("sandbox", ["kubernetes"])]
    monkeypatch.setattr(module, "_audit", lambda ctx: events)
    monkeypatch.setattr(module, "_namespace_history", lambda ctx: built + events)
    ctx = context("namespace", "own-finalizer")
    assert module._other_namespace_writes(ctx, "sandbox") == []
    events += [finalize("default", ["kubernetes", "example.com/hold"]), finalize("billing", ["kubernetes", "x.io/y"])]
    assert module._other_namespace_writes(ctx, "sandbox") == ["update …/finalize on default",
                                                             "update …/finalize on billing"]
    # a finalize request that takes finalizers away from another exercise's namespace is that
    # exercise's work only while the namespace is being deleted: on billing still Active it passed
    del events[-2:]
    events.insert(0, {**finalize("billing", []), "requestReceivedTimestamp": "2026-12-07T17:00:12.500000Z"})
    assert module._other_namespace_writes(ctx, "sandbox") == ["update …/finalize on billing"]


def test_a_try_kept_before_a_reset_still_earns_no_points_until_forgotten(monkeypatch):
    # a newcomer tried the create, reset the exercise, wrote the message down: it passed ("written
    # after a reset that followed your own patch configmaps late")
    from labkit import predictions
    module = checks("namespace")
    ctx = context("namespace", "terminating-create", 'error: \'configmaps "late" is forbidden: unable to create new '
                  'content in namespace attic because it is being terminated\'\n')
    predictions.forget("namespace", "terminating-create", "test")
    monkeypatch.setattr(module, "_lab", lambda env: type("Lab", (), {
        "client": lambda self, env: None, "original_uid": lambda self, env, name: "uid-attic"})())
    monkeypatch.setattr(module, "_namespace", lambda c, name: {"metadata": {"uid": "uid-attic",
                                                                            "deletionTimestamp": "2026-12-06T20:00:00Z"}})
    monkeypatch.setattr(module, "_create_answer", lambda ctx, c, ns, name: (403, {
        "reason": "Forbidden", "message": 'configmaps "late" is forbidden: unable to create new content in namespace '
                                          'attic because it is being terminated'}))
    monkeypatch.setattr(module, "observe_terminating_create_tries", lambda ctx, ns: [])   # the reset: no try since
    assert module.check_terminating_create(ctx).status == "pass"
    predictions.keep_trial("namespace", "terminating-create", {"at": 1.0, "time": "20:29:12", "namespace": "attic",
                                                               "what": "patch configmaps late"})
    with pytest.raises(CheckFailed) as failed:
        module.check_terminating_create(ctx)
    assert "trying first earns no points" in str(failed.value) and "a reset since then" in str(failed.value)
    assert "patch configmaps late" in str(failed.value)
    predictions.forget("namespace", "terminating-create", "labkit reset --forget-prediction")
    assert module.check_terminating_create(ctx).status == "pass"


def test_a_create_refused_in_another_terminating_namespace_is_a_try(monkeypatch):
    module = checks("namespace")

    def create(ns, code, message="", causes=(), user="labkit-admin"):
        return {"verb": "create", "objectRef": {"resource": "configmaps", "namespace": ns, "name": "late"},
                "user": {"username": user}, "requestReceivedTimestamp": "2026-12-06T07:37:12.000000Z",
                "responseStatus": {"code": code, "message": message,
                                   **({"details": {"causes": list(causes)}} if causes else {})}}
    terminating = [{"reason": "NamespaceTerminating", "message": "namespace reports is being terminated",
                    "field": "metadata.namespace"}]
    events = [create("dev", 201),                                            # content elsewhere: no answer in it
              create("nowhere", 404, 'namespaces "nowhere" not found'),      # another refusal: not the answer
              create("reports", 403, "refused", terminating, user=module.CONTROLLER_USER)]     # not the student
    monkeypatch.setattr(module, "_audit", lambda ctx: events)
    ctx = context("namespace", "terminating-create")
    assert module.observe_terminating_create_tries(ctx, "attic") == []
    events.append(create("reports", 403, 'configmaps "late" is forbidden: unable to create new content in namespace '
                                         'reports because it is being terminated', terminating))
    events.append(create("attic", 201))
    tries = module.observe_terminating_create_tries(ctx, "attic")
    assert [(t["namespace"], t["what"]) for t in tries] == [("reports", "create configmaps late"),
                                                            ("attic", "create configmaps late")]
    # a server-side apply of a new object (PATCH, admitted as a create) refused the same way is a try;
    # a patch of an object that is there (an update) shows nothing
    events[:] = [{**create("attic", 200), "verb": "patch"},
                 {**create("attic", 403, 'configmaps "late2" is forbidden: unable to create new content in '
                                         'namespace attic because it is being terminated', terminating), "verb": "patch"}]
    tries = module.observe_terminating_create_tries(ctx, "attic")
    assert [(t["namespace"], t["what"]) for t in tries] == [("attic", "patch configmaps late")]


def test_own_finalizer_leaves_a_namespace_the_student_made_to_them(monkeypatch):
    # a newcomer had made and deleted a namespace of their own (`mine`, an experiment of
    # terminating-create) before starting own-finalizer: "you also changed namespace mine (delete on mine)"
    module = checks("namespace")

    def request(verb, ns, subresource=None, finalizers=None, user="labkit-admin"):
        ref = {"resource": "namespaces", "name": ns, **({"subresource": subresource} if subresource else {})}
        return {"verb": verb, "objectRef": ref, "user": {"username": user}, "responseStatus": {"code": 201},
                **({"requestObject": {"spec": {"finalizers": finalizers}}} if finalizers is not None else {})}
    events = [request("create", "mine"), request("delete", "mine"),
              request("update", "sandbox", "finalize", ["kubernetes", "example.com/hold"]),
              request("update", "sandbox", "finalize", ["kubernetes"])]
    monkeypatch.setattr(module, "_audit", lambda ctx: events)
    monkeypatch.setattr(module, "_namespace_history", lambda ctx: events)
    ctx = context("namespace", "own-finalizer")
    assert module._other_namespace_writes(ctx, "sandbox") == []
    # a finalizer of their own on it still counts (what this exercise must keep to sandbox), and a
    # namespace made by the cluster itself (system:apiserver's default) is not the student's
    events += [request("update", "mine", "finalize", ["kubernetes", "example.com/hold"]),
               request("create", "default", user="system:apiserver"), request("patch", "default")]
    assert module._other_namespace_writes(ctx, "sandbox") == ["update …/finalize on mine", "patch on default"]


def _release_finalizer_seen(**changes):
    seen = {"gone": {"namespace": None, "spec_edit": "", "forced": [], "stored": []},
            "crds": {"backups.example.com": "present"}, "crd_writes": [], "recreated": False,
            "elsewhere": {"backups.example.com/weekly in legacy": {"state": "deleting",
                                                                   "finalizers": ["backup.example.com/upload"]}}}
    seen.update(changes)
    return seen


@pytest.mark.parametrize("changes,words", [
    # the newcomer's pass: v1 unserved (reports went with its Backup stored), served again, reports
    # created anew to release the Backup and deleted again: it passed 3/3
    ({"crd_writes": ["patch backups.example.com"]}, ("changed the CustomResourceDefinition itself",
                                                     "patch backups.example.com")),
    ({"recreated": True}, ("created a namespace reports again",)),
])
def test_release_finalizer_fails_when_the_crd_was_changed_or_the_namespace_made_anew(changes, words):
    module = checks("namespace")
    ctx = context("namespace", "release-finalizer")
    assert module.judge_release_finalizer(ctx, _release_finalizer_seen()).status == "pass"
    with pytest.raises(CheckFailed) as failed:
        module.judge_release_finalizer(ctx, _release_finalizer_seen(**changes))
    assert all(w in str(failed.value) for w in words), str(failed.value)
    assert "weekly" not in str(failed.value)


@pytest.mark.parametrize("answer,says", [
    # the newcomer's first guess: both parts wrong, and the feedback named the start only, so the
    # reason read as right
    ('namespaces "attic" is forbidden: namespace attic is terminating', "neither the start"),
    ('configmap "late" is forbidden: unable to create new content in namespace attic because it is being terminated',
     "the start of your message"),
    ('configmaps "late" is forbidden: namespace attic is terminating', "the object part is right"),
    # the admission plugin's words alone, right as they are, were told not to be the API server's
    ("unable to create new content in namespace attic because it is being terminated",
     "your message is the admission plugin's reason alone"),
    ('Forbidden: configmaps "late": unable to create new content in namespace attic because it is being terminated',
     "the start of your message"),
])
def test_terminating_create_feedback_says_which_parts_differ(answer, says):
    body = {"reason": "Forbidden", "message": 'configmaps "late" is forbidden: unable to create new content in '
                                              'namespace attic because it is being terminated'}
    told = checks("namespace")._which_part(answer, body)
    assert told.startswith(says), told
    assert "unable to create" not in told and "being terminated" not in told


def test_a_create_refused_on_another_labkit_api_server_is_a_try(monkeypatch):
    # the newcomer's pass: the refusal seen on `labkit apiserver` (and on the gc lab's server), its
    # message written down with attic put in: it passed 1/1
    import json

    from labkit import paths, predictions, servers
    module = checks("namespace")
    monkeypatch.setattr(module, "_audit", lambda ctx: [])
    ctx = context("namespace", "terminating-create")
    elsewhere = paths.state_root() / "apiserver"            # `labkit apiserver`'s default state
    elsewhere.mkdir(parents=True)
    refused = {"verb": "create", "objectRef": {"resource": "configmaps", "namespace": "mine2", "name": "late"},
               "user": {"username": "labkit-admin"}, "requestReceivedTimestamp": "2026-12-06T23:16:00.000000Z",
               "responseStatus": {"code": 403, "message": 'configmaps "late" is forbidden: unable to create new '
                                  'content in namespace mine2 because it is being terminated'}}
    (elsewhere / "audit.log").write_text(json.dumps({**refused, "user": {"username": "system:serviceaccount:x"}})
                                         + "\n" + json.dumps(refused) + "\n")
    assert [s.name for s in servers.state_dirs()] == ["apiserver"]
    [tried] = module.observe_terminating_create_tries(ctx, "attic")
    assert tried["namespace"] == "mine2" and tried["server"] == str(elsewhere.resolve())
    assert "on the labkit API server of" in tried["what"]
    # forgotten with the exercise's prediction (`labkit reset namespace terminating-create --forget-prediction`)
    predictions.keep_trial("namespace", "terminating-create", tried)
    predictions.forget("namespace", "terminating-create", "labkit reset --forget-prediction")
    assert module.observe_terminating_create_tries(ctx, "attic") == []


def test_an_exercise_of_one_point_says_point():
    # the newcomer's pass: `labkit run namespace` listed "terminating-create — ... (1 points)"
    from support import labkit
    listed = labkit("show", "namespace", check=0).stdout
    assert "Terminating namespace (1 point)\n" in listed and "(1 points)" not in listed, listed
    assert labkit("show", "namespace", "conditions", check=0).stdout.startswith(
        "# Delete a namespace and read what it waits for (2 points)")


def test_ns_explain_leaves_out_decisions_about_an_earlier_namespace_of_the_same_name(tmp_path):
    # the newcomer's pass: after a reset rebuilt legacy, `labkit ns explain legacy` listed among the
    # controller's last decisions a discovery failure about the namespace legacy of before
    from labkit.apiserver.server import EmbeddedServer
    from labkit.namespaces.explain import explain
    server = EmbeddedServer(tmp_path / "srv", controllers=[]).start()
    try:
        uid = server.client().create("v1", "namespaces", {"metadata": {"name": "legacy"}})["metadata"]["uid"]

        def decision(message, item_uid):
            return {"controller": "namespace", "level": "info", "message": message,
                    "item": {"kind": "Namespace", "name": "legacy", "uid": item_uid}}
        decisions = [decision("namespace legacy: discovery failed (the earlier one)", "an-earlier-uid"),
                     decision("namespace legacy: content remains (this one)", uid)]
        assert explain(server.http_client(), "legacy", decisions).decisions == [
            "namespace legacy: content remains (this one)"]
        server.client().delete("v1", "namespaces", "legacy")
    finally:
        server.stop()


def test_conditions_counts_content_added_with_finalizers_as_a_changed_situation(monkeypatch):
    # a newcomer created a ConfigMap with a finalizer of their own in billing, deleted billing and
    # answered what its conditions then counted (their ConfigMap beside the lab's Secret): passed
    module = checks("namespace")

    def write(verb, resource, name, body, user="labkit-admin", code=201):
        return {"verb": verb, "user": {"username": user}, "responseStatus": {"code": code}, "requestObject": body,
                "objectRef": {"resource": resource, "namespace": "billing", **({"name": name} if name else {})}}

    held = {"metadata": {"name": "extra", "finalizers": ["mine.example.com/x"]}}
    events = [write("create", "configmaps", None, held),
              write("create", "configmaps", None, {"metadata": {"name": "plain"}}),          # deleted with the rest
              write("create", "configmaps", None, held, code=403),                          # refused: nothing made
              write("create", "pods", None, {"metadata": {"finalizers": ["x/y"]}}, user="system:node:n")]
    monkeypatch.setattr(module, "_audit", lambda ctx: events)
    ctx = context("namespace", "conditions")
    assert module._released_content(ctx, "billing") == ["create configmaps/extra with mine.example.com/x"]


def test_force_finalize_a_missing_object_is_not_said_to_be_of_a_custom_kind():
    # a newcomer listed the Backup and left out the ConfigMap: "look at every namespaced resource
    # type, not only the built-in kinds" sent them to the custom kinds they had already looked at
    ctx = context("namespace", "force-finalize")
    with pytest.raises(CheckFailed) as failed:
        checks("namespace").grade_force_finalize_answer(
            ctx, "legacy", ["backups.example.com/weekly"], True, ["backups.example.com/weekly", "configmaps/app-config"])
    message = str(failed.value)
    assert "objects left behind are missing from your list" in message
    assert "not only the built-in kinds" not in message and "configmaps" not in message, message


def test_force_finalize_does_not_count_what_the_namespace_made_again_in_the_same_second_got(monkeypatch):
    # a newcomer ran the prompt's force-finalize and `kubectl create ns legacy` in one line: the new
    # namespace's default ServiceAccount and kube-root-ca.crt were created in the second of the
    # force-finalize, and the right answer failed ("objects left behind are missing from your list")
    module = checks("namespace")
    forced_at = "2026-12-07T23:17:19.697506Z"
    monkeypatch.setattr(module, "_lab", lambda env: type("Lab", (), {
        "client": lambda self, env: None, "original_uid": lambda self, env, name: "uid-old",
        "CONTENT": {"legacy": [("v1", "configmaps", {"metadata": {"name": "app-config", "finalizers": ["x.io/k"]}}),
                               ("example.com/v1", "backups", {"metadata": {"name": "weekly",
                                                                           "finalizers": ["x.io/u"]}})]}})())
    monkeypatch.setattr(module, "_force_finalized", lambda ctx, ns: [{"user": "labkit-admin", "finalizers": [],
                                                                      "time": forced_at}])
    monkeypatch.setattr(module, "_namespace", lambda c, name: {"metadata": {"uid": "uid-new"}})

    def stored(created):
        return {"metadata": {"creationTimestamp": created}}
    monkeypatch.setattr(module, "_stored_objects", lambda c, ns: {
        "configmaps/app-config": stored("2026-12-07T23:17:12Z"), "backups.example.com/weekly": stored("2026-12-07T23:17:12Z"),
        "configmaps/kube-root-ca.crt": stored("2026-12-07T23:17:19Z"), "serviceaccounts/default": stored("2026-12-07T23:17:19Z")})

    def create(resource, name, at, group=None):
        return {"verb": "create", "requestReceivedTimestamp": at, "responseStatus": {"code": 201},
                "objectRef": {"resource": resource, "namespace": "legacy", "name": name,
                              **({"apiGroup": group} if group else {})}}
    events = [create("configmaps", "app-config", "2026-12-07T23:17:12.992068Z"),
              create("backups", "weekly", "2026-12-07T23:17:12.994195Z", "example.com"),
              create("serviceaccounts", "default", "2026-12-07T23:17:19.913060Z"),
              create("configmaps", "kube-root-ca.crt", "2026-12-07T23:17:19.913323Z")]
    monkeypatch.setattr(module, "_audit", lambda ctx: events)
    ctx = context("namespace", "force-finalize", "left_behind: [backups.example.com/weekly, configmaps/app-config]\n"
                                                 "visible_again: true\n")
    assert module.check_force_finalize(ctx).status == "pass"
    # what was created before the force-finalize, in its second too, is still left behind
    events[2] = create("serviceaccounts", "default", "2026-12-07T23:17:19.100000Z")
    with pytest.raises(CheckFailed) as failed:
        module.check_force_finalize(ctx)
    assert "objects left behind are missing from your list" in str(failed.value)


@pytest.mark.parametrize("key,says", [
    ("node.kubernetes.io/out-of-services", "The taint node.kubernetes.io/out-of-services on node-b is not one Kubernetes "
                                           "reads"),
    ("example.com/dead", "look at node-b (`kubectl get node node-b -o yaml`)")])
def test_volume_in_use_says_where_to_look_while_the_pod_waits_on_an_unmarked_node(key, says):
    # a newcomer misspelled the taint's key: the feedback said only that the Pod was still Terminating
    ctx = context("namespace", "volume-in-use")
    seen = {"claim_finalizers_edited_by": [], "pod_force_deleted_by": [], "other_nodes_marked": [],
            "pod": {"name": "uploader"}, "pod_deleted_by_podgc": None,
            "node": {"unschedulable": False, "taints": [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"},
                                                        {"key": key, "value": "nodeshutdown", "effect": "NoExecute"}]},
            "gone": {"namespace": None, "spec_edit": "", "forced": [], "stored": []},
            "volume_writes": [], "volume": {"phase": "Bound", "finalizers": ["kubernetes.io/pv-protection"]}}
    with pytest.raises(CheckFailed) as failed:
        checks("namespace").judge_volume_in_use(ctx, seen)
    assert "Pod uploader is still Terminating on node-b" in str(failed.value)
    assert says in str(failed.value), str(failed.value)
    assert "node.kubernetes.io/out-of-service " not in str(failed.value) + " "


@pytest.mark.parametrize("remaining, finalizers, named", [
    ({"secrets": 1, "configmaps.": 1}, {"legacy.example.com/keep": 2}, "'secrets' lacks the group"),
    ({"configmaps.": 1}, {"legacy.example.com/keep": 1, "bad key/x/y": 1}, "is not a finalizer name"),
])
def test_a_conditions_answer_whose_form_is_wrong_is_malformed_not_a_wrong_answer(remaining, finalizers, named):
    # a newcomer wrote `secrets` without the core group's trailing dot: wrong whatever the namespace
    # holds, so it is named, and the answer is malformed (not counted as a different wrong answer)
    from labkit.exercises import AnswerMalformed
    ctx = context("namespace", "conditions")
    with pytest.raises(AnswerMalformed) as failed:
        checks("namespace").grade_conditions_answer(ctx, "billing", remaining, finalizers,
                                                    {"secrets.": 1, "configmaps.": 1}, {"legacy.example.com/keep": 2})
    assert named in failed.value.message and failed.value.message.startswith("your answer is malformed: ")


@pytest.mark.parametrize("entry", ["configmaps./app-config", "configmaps", "app-config"])
def test_a_force_finalize_entry_whose_form_is_wrong_is_malformed_not_a_wrong_answer(entry):
    from labkit.exercises import AnswerMalformed
    ctx = context("namespace", "force-finalize")
    with pytest.raises(AnswerMalformed) as failed:
        checks("namespace").grade_force_finalize_answer(
            ctx, "legacy", ["backups.example.com/weekly", entry], True,
            ["backups.example.com/weekly", "configmaps/app-config"])
    assert repr(entry) in failed.value.message and "<resource>/<name>" in failed.value.message
