"""In-process judgement of the gc lab's checks on observations of work a newcomer did: each piece of
wrong work that used to earn full points fails, saying what is wrong and where to look. No lab is
built: the judges get plain observations (the audit log's requests as the checks read them)."""

from __future__ import annotations

import pytest

from labkit.exercises import CheckFailed
from test_namespace_judging import checks, context

CHAIN = "pod: web-84cccc9b67-fckjx\nreplicaset: 11111111-1111-1111-1111-111111111111\n" \
        "deployment: 22222222-2222-2222-2222-222222222222\n"


@pytest.fixture
def live_chain(monkeypatch):
    """The gc check's client reads web's chain: Pod web-84cccc9b67-fckjx, its ReplicaSet and that
    ReplicaSet's Deployment. The checks module so patched, the ReplicaSet's and the Deployment's UIDs."""
    gc = checks("gc")
    rs_uid, dep_uid = "11111111-1111-1111-1111-11111111abcd", "22222222-2222-2222-2222-22222222abcd"
    objects = {"pods": {"metadata": {"name": "web-84cccc9b67-fckjx", "uid": "33333333-3333-3333-3333-333333333333",
                                     "ownerReferences": [{"kind": "ReplicaSet", "name": "web-84cccc9b67",
                                                          "uid": rs_uid, "controller": True}]}},
               "replicasets": {"metadata": {"name": "web-84cccc9b67", "uid": rs_uid,
                                            "ownerReferences": [{"kind": "Deployment", "name": "web", "uid": dep_uid,
                                                                 "controller": True}]}}}
    client = type("Client", (), {"get_or_none": lambda self, api, resource, name, ns=None: objects.get(resource)})()
    monkeypatch.setattr(gc, "for_env", lambda env: type("Target", (), {"client": lambda self: client})())
    return gc, rs_uid, dep_uid


def _fails(result_or_raise, *words):
    try:
        result = result_or_raise()
    except CheckFailed as exc:
        message = str(exc)
    else:
        assert result.status == "fail", result.message
        message = result.message
    for word in words:
        assert word in message, message
    return message


@pytest.mark.parametrize("writes,words", [
    (["patch Deployment web"], ("patch Deployment web",)),
    (["patch Pod web-84cccc9b67-fckjx"], ("patch Pod web-84cccc9b67-fckjx",))])
def test_owner_chain_fails_when_the_chain_was_scaled_or_labelled(writes, words):
    ctx = context("gc", "owner-chain", CHAIN)
    _fails(lambda: checks("gc").judge_owner_chain(ctx, {"writes": writes}),
           "you changed the chain of Deployment web by hand", "reading an owner chain changes nothing", *words)


@pytest.mark.parametrize("pod,words", [
    ("shop/web-84cccc9b67-fckjx", ("name alone", "(shop/)")),
    ("Web 1", ("cannot be the name of a Pod",)),
    ("web-%2F", ("cannot be the name of a Pod",))])
def test_owner_chain_refuses_what_cannot_be_a_pods_name_before_any_request(pod, words):
    ctx = context("gc", "owner-chain", CHAIN.replace("web-84cccc9b67-fckjx", pod))
    _fails(lambda: checks("gc").judge_owner_chain(ctx, {"writes": []}), "pod:", *words)


def test_owner_chain_says_when_the_uids_differ_only_in_case(live_chain):
    gc, rs_uid, dep_uid = live_chain
    # a newcomer's upper-cased UIDs were told to "follow ownerReferences from the Pod to its ReplicaSet"
    ctx = context("gc", "owner-chain", f"pod: web-84cccc9b67-fckjx\nreplicaset: {rs_uid.upper()}\n"
                                       f"deployment: {dep_uid}\n")
    message = _fails(lambda: gc.judge_owner_chain(ctx, {"writes": []}), "wrong UID for replicaset", "in another case")
    assert "follow ownerReferences" not in message and rs_uid not in message
    context("gc", "owner-chain", f"pod: web-84cccc9b67-fckjx\nreplicaset: {rs_uid}\ndeployment: {dep_uid}\n")
    assert gc.judge_owner_chain(ctx, {"writes": []}).status == "pass"


def _cascade_obs(**changes):
    obs = {"deployment": "gone", "audit": True, "delete": "Background", "left": [],
           "writes": [{"verb": "delete", "kind": "Deployment", "name": "cart", "finalizers": False,
                       "policy": "Background"}],
           "deleted_by": [{"kind": "ReplicaSet", "name": "cart-98598c785",
                           "user": "system:serviceaccount:kube-system:generic-garbage-collector"},
                          {"kind": "Pod", "name": "cart-98598c785-a1b2c",
                           "user": "system:serviceaccount:kube-system:generic-garbage-collector"}]}
    obs.update(changes)
    return obs


def test_background_fails_when_the_replicaset_was_deleted_by_hand_first():
    ctx = context("gc", "background-delete", "order: [Deployment, ReplicaSet, Pod]\n")
    own = {"verb": "delete", "kind": "ReplicaSet", "name": "cart-98598c785", "finalizers": False, "policy": "default"}
    obs = _cascade_obs()
    obs["writes"] = [own, *obs["writes"]]
    obs["deleted_by"][0]["user"] = "kubernetes-admin"
    message = _fails(lambda: checks("gc").judge_background_delete(ctx, obs),
                     "you deleted 1 ReplicaSet of cart yourself", "left to the garbage collector")
    assert "the GC deleted its dependents" not in message


def test_background_fails_when_the_deployment_was_scaled_to_zero_first():
    ctx = context("gc", "background-delete", "order: [Deployment, ReplicaSet, Pod]\n")
    obs = _cascade_obs()
    obs["writes"] = [{"verb": "patch", "kind": "Deployment", "name": "cart", "finalizers": False}, *obs["writes"]]
    obs["deleted_by"][1]["user"] = "system:serviceaccount:kube-system:replicaset-controller"
    _fails(lambda: checks("gc").judge_background_delete(ctx, obs), "changed Deployment cart (patch)", "yourself")


def test_background_fails_when_a_dependent_was_deleted_by_anyone_but_the_garbage_collector():
    ctx = context("gc", "background-delete", "order: [Deployment, ReplicaSet, Pod]\n")
    obs = _cascade_obs()
    obs["deleted_by"][1]["user"] = "system:serviceaccount:kube-system:replicaset-controller"
    _fails(lambda: checks("gc").judge_background_delete(ctx, obs),
           "Pod cart-98598c785-a1b2c was deleted by the ReplicaSet controller, not by the garbage collector")


def test_foreground_says_a_change_before_the_delete_came_before_it():
    ctx = context("gc", "foreground-delete", "finalizer: foregroundDeletion\nlast: Deployment\n")
    delete = {"verb": "delete", "kind": "Deployment", "name": "api", "finalizers": False, "policy": "Foreground"}
    scale = {"verb": "patch", "kind": "Deployment", "name": "api", "finalizers": False}
    obs = {"deployment": "gone", "audit": True, "delete": "Foreground", "left": [], "deleted_by": [],
           "writes": [scale, delete]}
    message = _fails(lambda: checks("gc").judge_foreground_delete(ctx, obs),
                     "you changed Deployment api by hand (patch) before you deleted the Deployment")
    assert "while" not in message
    _fails(lambda: checks("gc").judge_foreground_delete(ctx, {**obs, "writes": [delete, scale]}),
           "while the foreground deletion went on")


@pytest.mark.parametrize("kind,name", [("ReplicaSet", "api-6c9f8d7b5"), ("Pod", "api-6c9f8d7b5-x2k4q")])
def test_foreground_fails_when_a_dependent_was_deleted_by_hand_while_it_went(kind, name):
    # a newcomer's `kubectl delete rs -l app=api` (Background) while the ReplicaSet waited dropped its
    # foregroundDeletion: the Deployment went before the Pods, and the right answer passed with a remark
    ctx = context("gc", "foreground-delete", "finalizer: foregroundDeletion\nlast: Deployment\n")
    delete = {"verb": "delete", "kind": "Deployment", "name": "api", "finalizers": False, "policy": "Foreground"}
    dependent = {"verb": "delete", "kind": kind, "name": name, "finalizers": False, "policy": "Background"}
    obs = {"deployment": "gone", "audit": True, "delete": "Foreground", "left": [], "deleted_by": [],
           "writes": [delete, dependent]}
    message = _fails(lambda: checks("gc").judge_foreground_delete(ctx, obs),
                     f"you deleted {kind} {name} yourself (propagationPolicy Background)",
                     "while the foreground deletion went on", "its waiting ReplicaSet")
    assert "foregroundDeletion and" not in message and "removed last" not in message


def test_stuck_finalizer_fails_when_the_pods_owner_references_were_cut():
    ctx = context("gc", "stuck-finalizer", "pod: reports-abcde\nfinalizer: example.com/upload\n")
    gc = checks("gc")
    cut = [{"op": "remove", "path": "/metadata/ownerReferences"}]
    release = [{"op": "remove", "path": "/metadata/finalizers/0"}]
    obs = {"left": [], "audit": True, "held": {"reports-abcde": ["example.com/upload"]}, "writes": [],
           "pod_writes": [{"verb": "patch", "name": "reports-abcde", "touched": gc._touched("patch", cut)},
                          {"verb": "patch", "name": "reports-abcde", "touched": gc._touched("patch", release)}]}
    message = _fails(lambda: gc.judge_stuck_finalizer(ctx, obs), "beyond its finalizers", "metadata.ownerReferences")
    assert "example.com/upload" not in message
    assert gc.judge_stuck_finalizer(ctx, {**obs, "pod_writes": obs["pod_writes"][1:]}).status == "pass"


@pytest.mark.parametrize("verb,body,touched", [
    ("patch", [{"op": "remove", "path": "/metadata/finalizers/0"}], []),
    ("patch", {"metadata": {"finalizers": None}}, []),
    ("patch", {"metadata": {"$deleteFromPrimitiveList/finalizers": ["example.com/upload"]}}, []),
    ("patch", [{"op": "remove", "path": "/metadata/ownerReferences"}], ["metadata.ownerReferences"]),
    ("patch", {"metadata": {"ownerReferences": None, "finalizers": None}}, ["metadata.ownerReferences"]),
    ("patch", {"metadata": {"labels": {"extra": "1"}}}, ["metadata.labels"]),
    ("patch", {"spec": {"activeDeadlineSeconds": 1}}, ["spec"]),
    ("update", {"metadata": {"name": "p", "labels": {"app": "reports"}, "ownerReferences": [{"uid": "u"}]}}, []),
    ("update", {"metadata": {"name": "p", "labels": {"app": "reports"}}}, ["metadata.ownerReferences"])])
def test_what_a_pod_write_changes_besides_its_finalizers(verb, body, touched):
    assert checks("gc")._touched(verb, body) == touched


def test_predict_dangling_fails_a_prediction_written_after_trying_it_in_the_lab():
    answer = ("orphan: deleted\nshared: kept\nshared_owners: [anchor]\nstranger: deleted\n"
              "stranger_event: OwnerRefInvalidNamespace\n")
    ctx = context("gc", "predict-dangling", answer)
    import yaml
    obs = {"answer": yaml.safe_load(answer), "note": "", "experiment": "",
           "tried": {"at": 0.0, "time": "04:40:00", "what": "configmaps anchor in predict-a"}}
    message = _fails(lambda: checks("gc").judge_predict_dangling(ctx, obs),
                     "you made objects in the experiment's namespaces", "earns no points")
    assert "observe each case" not in message


def test_predict_dangling_tells_an_owner_deleted_before_the_graph_saw_its_dependent_from_one_that_never_existed(
        tmp_path, monkeypatch):
    """orphan-adopt's reset deletes the student's ReplicaSet worker-v2 while its controller may
    still make a Pod: that Pod reaches the GC's graph after the owner left it, as a virtual owner
    whose lookup finds nothing. The GC's decision says the owner was observed before, so a right
    prediction written afterwards is judged; an owner named like an object that existed under
    another kind (a ReplicationController worker-v2) never existed, and voids it."""
    from types import SimpleNamespace

    from labkit.apiserver.server import EmbeddedServer
    from labkit.controllers import decisions
    from support import wait_until
    server = EmbeddedServer(tmp_path / "apiserver", controllers=["garbagecollector"]).start()
    try:
        c = server.client()
        c.create("v1", "namespaces", {"metadata": {"name": "shop"}})
        gc = server.controllers.get("garbagecollector")
        rs = c.create("apps/v1", "replicasets", {"metadata": {"name": "worker-v2"}, "spec": {
            "replicas": 0, "selector": {"matchLabels": {"app": "worker"}},
            "template": {"metadata": {"labels": {"app": "worker"}},
                         "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}}}, "shop")
        uid = rs["metadata"]["uid"]
        assert wait_until(lambda: gc.graph_has_uid(uid))
        c.delete("apps/v1", "replicasets", "worker-v2", "shop")
        assert wait_until(lambda: not gc.graph_has_uid(uid))

        def owned(name, kind, api_version, owner_uid):
            c.create("v1", "configmaps", {"metadata": {"name": name, "ownerReferences": [
                {"apiVersion": api_version, "kind": kind, "name": "worker-v2", "uid": owner_uid}]}}, "shop")

        def dropped(owner_uid):
            return [d for d in decisions.read(server.state_dir / "decisions.log")
                    if d.get("action") == "virtual-delete" and (d.get("item") or {}).get("uid") == owner_uid]
        owned("worker-v2-late", "ReplicaSet", "apps/v1", uid)        # made just before its owner's deletion
        assert wait_until(lambda: dropped(uid))
        [late] = dropped(uid)
        assert late["never_observed"] is False and "observed earlier and deleted since" in late["message"]

        ctx = context("gc", "predict-dangling", "orphan: deleted\n")
        gc_checks = checks("gc")
        target = SimpleNamespace(audit=lambda since=0.0: [],
                                 decisions=lambda since=0.0: decisions.read(server.state_dir / "decisions.log"))
        monkeypatch.setattr(ctx.lab.environment_module(), "for_env", lambda env: target)
        assert gc_checks._first_try(ctx) is None

        ghost = "00000000-0000-0000-0000-00000000dead"
        owned("orphan", "ReplicationController", "v1", ghost)        # the experiment, tried in shop
        assert wait_until(lambda: dropped(ghost))
        [tried] = dropped(ghost)
        assert tried["never_observed"] is True
        found = gc_checks._first_try(ctx)
        assert found["how"] == "gc" and found["what"] == \
            "replicationcontroller shop/worker-v2, an owner that never existed", found
    finally:
        server.stop()


def test_predict_dangling_a_try_kept_before_a_reset_voids_a_prediction_written_after_it(monkeypatch):
    """A reset of predict-dangling builds its part afresh (the check reads the logs from then on),
    a reset of the lab starts a new API server: the try found before either is kept
    (keep_student_work), and a prediction written after it still earns nothing; one written
    before it is judged, and --forget-prediction forgets the try."""
    import os
    import time
    from types import SimpleNamespace

    from labkit import predictions
    answer = ("orphan: deleted\nshared: kept\nshared_owners: [anchor]\nstranger: deleted\n"
              "stranger_event: OwnerRefInvalidNamespace\n")
    ctx = context("gc", "predict-dangling", answer)
    lab = ctx.lab.environment_module()
    now = time.time()
    tried = {"controller": "garbagecollector", "action": "invalid-owner-reference", "ts": now - 60,
             "item": {"kind": "ConfigMap", "namespace": "trial", "name": "stranger", "uid": "u"}}
    logs = {"decisions": [tried]}
    monkeypatch.setattr(lab, "for_env", lambda env: SimpleNamespace(
        audit=lambda since=0.0: [], decisions=lambda since=0.0: [d for d in logs["decisions"] if d["ts"] >= since]))
    monkeypatch.setattr(type(ctx.env.state), "ready_time", lambda self, ex: now - 120)
    predictions.forget("gc", "predict-dangling", "test")
    assert lab.keep_student_work(ctx.env, "background-delete") == []        # another part's reset: nothing kept
    [said] = lab.keep_student_work(ctx.env, "predict-dangling")
    assert "tried the experiment of predict-dangling" in said and "after this reset too" in said
    # said before `--forget-prediction` forgets it in the same reset: the newcomer read "labkit keeps
    # that you tried ..." and then "forgot that you tried ..."
    assert "(unless --forget-prediction forgets it)" in said
    logs["decisions"] = []                                                   # the reset: the logs start afresh
    gc = checks("gc")
    obs = gc.observe_predict_dangling(ctx)
    assert obs["tried"]["how"] == "gc" and "stranger" in obs["tried"]["what"]
    _fails(lambda: gc.judge_predict_dangling(ctx, obs), "you tried the experiment", "earns no points")
    assert predictions.grade_details("gc", "predict-dangling")["experiment_tried"]["at"] == now - 60
    os.utime(ctx.answer_path, (now - 90, now - 90))                          # written before the try: judged
    assert gc.observe_predict_dangling(ctx)["tried"] is None
    os.utime(ctx.answer_path, (now, now))
    predictions.forget("gc", "predict-dangling", "labkit reset --forget-prediction")
    assert gc.observe_predict_dangling(ctx)["tried"] is None
    assert predictions.forgotten("gc", "predict-dangling")[-1]["tried"]["how"] == "gc"


def test_a_reset_that_forgets_the_prediction_says_only_that_it_forgot_the_try(monkeypatch):
    """`labkit reset gc predict-dangling --forget-prediction` after a try of the experiment: the lab's
    keep_student_work keeps the try and --forget-prediction forgets it in the same reset. The
    output says that it was forgotten, not first "labkit keeps that you tried ..." (a newcomer read
    that as the opposite of what happened); a reset without the flag still says it keeps it."""
    import time
    from types import SimpleNamespace

    from labkit import predictions, runner
    ctx = context("gc", "predict-dangling", "orphan: deleted\n")
    lab = ctx.lab.environment_module()
    now = time.time()
    tried = {"controller": "garbagecollector", "action": "invalid-owner-reference", "ts": now - 60,
             "item": {"kind": "ConfigMap", "namespace": "trial", "name": "stranger", "uid": "u"}}
    monkeypatch.setattr(lab, "for_env", lambda env: SimpleNamespace(
        audit=lambda since=0.0: [], decisions=lambda since=0.0: [tried]))
    monkeypatch.setattr(type(ctx.env.state), "ready_time", lambda self, ex: now - 120)
    monkeypatch.setattr(type(ctx.env.state), "phase", property(lambda self: "up"))
    said = []
    runner._before_reset(ctx.lab, ctx.env.state, "predict-dangling", True, said.append)
    assert len(said) == 1 and said[0].startswith("forgot that you tried the experiment of predict-dangling"), said
    assert predictions.kept_trial("gc", "predict-dangling") is None
    assert predictions.forgotten("gc", "predict-dangling")[-1]["tried"]["at"] == now - 60
    said = []
    runner._before_reset(ctx.lab, ctx.env.state, "predict-dangling", False, said.append)
    assert len(said) == 1 and said[0].startswith("labkit keeps that you tried the experiment of predict-dangling"), said


def test_stuck_finalizer_diagnosis_feedback_does_not_say_which_part_is_wrong():
    """Naming the wrong part would let the two Pods and the lab's few finalizers be tried in turn:
    a wrong Pod and a wrong finalizer get the same words; a GC finalizer is named as the GC's."""
    gc = checks("gc")
    obs = {"left": [], "audit": True, "held": {"reports-abcde": ["example.com/upload"]}, "writes": [],
           "pod_writes": []}
    messages = []
    for answer in ("pod: reports-vwxyz\nfinalizer: example.com/upload\n",
                   "pod: reports-abcde\nfinalizer: example.com/keep\n",
                   "pod: reports-vwxyz\nfinalizer: example.com/keep\n"):
        ctx = context("gc", "stuck-finalizer", answer)
        result = gc.judge_stuck_finalizer(ctx, obs)
        assert result.status == "fail"
        messages.append(result.message)
    assert all("does not say how many of its 2 parts are wrong, or which" in m for m in messages), messages
    # the newcomer's pass read "the diagnosis is wrong: your diagnosis are not right (...)"
    assert all(m.startswith("released correctly, but your diagnosis is not right (") for m in messages), messages
    assert len({m.replace(m[m.index("("):m.index(")") + 1], "") for m in messages}) == 1, messages
    assert not any(word in m for m in messages for word in ("pod:", "finalizer:", "example.com/upload"))
    ctx = context("gc", "stuck-finalizer", "pod: reports-vwxyz\nfinalizer: foregroundDeletion\n")
    message = gc.judge_stuck_finalizer(ctx, obs).message
    assert "foregroundDeletion is a finalizer of the garbage collector's own" in message
    assert "reports-abcde" not in message and "example.com/upload" not in message
    ctx = context("gc", "stuck-finalizer", "pod: reports-abcde\nfinalizer: example.com/upload\n")
    assert gc.judge_stuck_finalizer(ctx, obs).status == "pass"


def test_predict_dangling_a_try_on_another_labkit_api_server_voids_a_prediction_written_after_it(monkeypatch):
    """The newcomer's pass: the experiment tried on `labkit apiserver` (or another lab's server),
    not the gc lab's, and a prediction written from what it showed passed. Every labkit server's
    garbage collector logs its decisions (labkit.servers): a try on any of them counts, until
    --forget-prediction."""
    import json
    import os
    import time
    from types import SimpleNamespace

    from labkit import paths, predictions, servers
    answer = ("orphan: deleted\nshared: kept\nshared_owners: [anchor]\nstranger: deleted\n"
              "stranger_event: OwnerRefInvalidNamespace\n")
    ctx = context("gc", "predict-dangling", answer)
    lab = ctx.lab.environment_module()
    now = time.time()
    own = paths.state_root() / "gc" / "apiserver"
    monkeypatch.setattr(lab, "for_env", lambda env: SimpleNamespace(
        audit=lambda since=0.0: [], decisions=lambda since=0.0: [], state_dir=own))
    monkeypatch.setattr(type(ctx.env.state), "ready_time", lambda self, ex: now - 120)
    elsewhere = paths.state_root() / "elsewhere"        # `labkit apiserver --state elsewhere`
    elsewhere.mkdir(parents=True)
    (elsewhere / "decisions.log").write_text(json.dumps(
        {"controller": "garbagecollector", "action": "invalid-owner-reference", "ts": now - 60,
         "item": {"kind": "ConfigMap", "namespace": "mine", "name": "stranger", "uid": "u"}}) + "\n")
    gc = checks("gc")
    assert gc.observe_predict_dangling(ctx)["tried"] is None         # a directory labkit never ran a server in
    servers.register(elsewhere)
    obs = gc.observe_predict_dangling(ctx)
    assert obs["tried"]["how"] == "elsewhere" and obs["tried"]["server"] == str(elsewhere.resolve())
    _fails(lambda: gc.judge_predict_dangling(ctx, obs), "on another labkit API server", "earns no points")
    os.utime(ctx.answer_path, (now - 90, now - 90))                  # written before the try: judged
    assert gc.observe_predict_dangling(ctx)["tried"] is None
    os.utime(ctx.answer_path, (now, now))
    [said] = lab.keep_student_work(ctx.env, "predict-dangling")      # `labkit reset gc predict-dangling ...`
    assert "tried the experiment of predict-dangling" in said
    predictions.forget("gc", "predict-dangling", "labkit reset --forget-prediction")     # ... --forget-prediction
    assert gc.observe_predict_dangling(ctx)["tried"] is None         # a try before the forget is forgotten


def test_predict_dangling_counts_a_kept_prediction_once_whatever_the_answer_file_says_afterwards(monkeypatch):
    """Once `labkit gc run` kept the prediction, the check grades that kept copy: editing the answer
    file afterwards changes nothing graded, so it is no different wrong answer (the count said 2,
    then 3, for the one kept prediction)."""
    from labkit import predictions
    from labkit.exercises import run_check
    wrong = ("orphan: kept\nshared: kept\nshared_owners: [anchor]\nstranger: deleted\n"
             "stranger_event: OwnerRefInvalidNamespace\n")
    truth = {"orphan": "deleted", "shared": "kept", "shared_owners": ["anchor"], "stranger": "deleted",
             "stranger_event": "OwnerRefInvalidNamespace"}
    ctx = context("gc", "predict-dangling", wrong)
    predictions.forget("gc", "predict-dangling", "test")
    lab_checks = ctx.lab._load("checks.py")
    monkeypatch.setattr(lab_checks, "_first_try", lambda ctx: None)
    monkeypatch.setattr(lab_checks, "_experiment_text", lambda ctx: ("", ""))
    monkeypatch.setattr(lab_checks, "_predicted", lambda ctx, experiment: truth)
    tries = ctx.env.state.dir / "tries.json"
    tries.unlink(missing_ok=True)

    first = run_check(ctx.env, ctx.exercise)
    assert first.status == "fail" and "(1 different wrong answer checked" in first.message, first.message
    predictions.keep("gc", "predict-dangling", "labkit gc run")
    for edit in (wrong.replace("stranger: deleted", "stranger: kept"), wrong.replace("shared: kept", "shared: deleted")):
        ctx.answer_path.write_text(edit)
        again = run_check(ctx.env, ctx.exercise)
        assert again.status == "fail" and "judged on your prediction as it was" in again.message, again.message
        assert "(1 different wrong answer checked" in again.message, again.message
    assert ctx.env.state.wrong_answers_checked("predict-dangling") == 1
    predictions.forget("gc", "predict-dangling", "test")


@pytest.mark.parametrize("again", ["Foreground", "default"])
def test_foreground_passes_without_a_remark_when_the_deployment_was_deleted_again_the_same_way(again):
    # a newcomer who saw the Deployment still there ran the same `kubectl delete --cascade=foreground`
    # again: the pass said "You deleted 1 Deployment of api yourself, which changed the situation". A
    # second DELETE with Foreground, or with no policy, leaves foregroundDeletion where it is (store.go,
    # deletionFinalizersForGarbageCollection: the options, else the object's finalizers, decide)
    ctx = context("gc", "foreground-delete", "finalizer: foregroundDeletion\nlast: Deployment\n")
    delete = {"verb": "delete", "kind": "Deployment", "name": "api", "finalizers": False, "policy": "Foreground"}
    obs = {"deployment": "gone", "audit": True, "delete": "Foreground", "left": [], "deleted_by": [],
           "writes": [delete, {**delete, "policy": again}]}
    result = checks("gc").judge_foreground_delete(ctx, obs)
    assert result.status == "pass", result.message
    assert "changed the situation" not in result.message and "yourself" not in result.message, result.message


_DELETE_API = {"verb": "delete", "kind": "Deployment", "name": "api", "finalizers": False, "policy": "Foreground"}
_FIX_BESIDE_ANSWER = [
    # (exercise, right answer, wrong answer, observation of a fix that fails, of one not done yet)
    ("background-delete", "order: [Deployment, ReplicaSet, Pod]\n", "order: [Deployment, Pod, ReplicaSet]\n",
     _cascade_obs(delete="Orphan"), _cascade_obs(deployment="present")),
    ("foreground-delete", "finalizer: foregroundDeletion\nlast: Deployment\n",
     "finalizer: foregroundDeletion\nlast: Pod\n",
     {"deployment": "gone", "audit": True, "delete": "Foreground", "left": [], "deleted_by": [],
      "writes": [_DELETE_API, {**_DELETE_API, "kind": "Pod", "name": "api-6c9f8d7b5-x2k4q", "policy": "Background"}]},
     {"deployment": "present", "audit": True, "delete": None, "left": [], "deleted_by": [], "writes": []}),
    ("stuck-finalizer", "pod: reports-abcde\nfinalizer: example.com/upload\n",
     "pod: reports-abcde\nfinalizer: example.com/keep\n",
     {"left": [], "audit": True, "held": {"reports-abcde": ["example.com/upload"]},
      "writes": [{"verb": "delete", "kind": "ReplicaSet", "name": "reports", "finalizers": False}], "pod_writes": []},
     None),
]


@pytest.mark.parametrize("exercise,right,wrong,failing_fix,not_done", _FIX_BESIDE_ANSWER,
                         ids=[case[0] for case in _FIX_BESIDE_ANSWER])
def test_a_fix_that_fails_beside_a_right_answer_is_no_wrong_answer(monkeypatch, exercise, right, wrong, failing_fix,
                                                                    not_done):
    """README: a fix that fails beside a right answer is no wrong answer, and a check that cannot
    judge the answer yet counts nothing. A newcomer's right answer, checked before the Deployment was
    deleted, then after a Pod deleted by hand or a DELETE with the wrong policy, was counted as 3
    different wrong answers ('passed after 8 different wrong answers' after 5)."""
    from labkit.exercises import run_check
    ctx = context("gc", exercise, right)
    lab_checks = ctx.lab._load("checks.py")
    monkeypatch.setattr(lab_checks, f"observe_{exercise.replace('-', '_')}", lambda ctx: observed[0])
    monkeypatch.setattr(lab_checks, "_cascade", lambda ctx, policy: {
        "delete_order": ["Deployment", "ReplicaSet", "Pod"], "waited_with": ["foregroundDeletion"],
        "removed": ["Pod", "ReplicaSet", "Deployment"]} if policy in ("Background", "Foreground") else {})
    (ctx.env.state.dir / "tries.json").unlink(missing_ok=True)
    observed = [failing_fix]
    result = run_check(ctx.env, ctx.exercise)
    assert result.status == "fail", result.message
    assert ctx.env.state.wrong_answers_checked(exercise) == 0, result.message
    if not_done is not None:
        observed[0] = not_done
        ctx.answer_path.write_text(wrong)
        result = run_check(ctx.env, ctx.exercise)
        assert result.status == "fail" and "still there" in result.message, result.message
        assert ctx.env.state.wrong_answers_checked(exercise) == 0, result.message
    observed[0] = failing_fix
    ctx.answer_path.write_text(wrong)
    assert run_check(ctx.env, ctx.exercise).status == "fail"
    assert ctx.env.state.wrong_answers_checked(exercise) == 1
    (ctx.env.state.dir / "tries.json").unlink(missing_ok=True)


def test_owner_chain_a_changed_chain_beside_a_right_reading_is_no_wrong_answer(live_chain):
    gc, rs_uid, dep_uid = live_chain
    # a newcomer deleted a Pod of web (its ReplicaSet made another) and then read the chain right: the
    # check fails on the change, and counted the right reading as a wrong answer
    writes = {"writes": ["delete Pod web-84cccc9b67-bmc5h"]}
    for uid, not_wrong in ((rs_uid, True), (dep_uid, False)):
        ctx = context("gc", "owner-chain", f"pod: web-84cccc9b67-fckjx\nreplicaset: {uid}\ndeployment: {dep_uid}\n")
        _fails(lambda: gc.judge_owner_chain(ctx, writes), "you changed the chain of Deployment web by hand")
        assert ctx.answer_not_wrong is not_wrong


@pytest.mark.parametrize("order", ["[deploy, rs, po]", "[Deployments, ReplicaSets, Pods]", "[deployment, replicaset, pod]"])
def test_background_reads_kinds_as_kubectl_names_them(order):
    # kubectl's short names (deploy, rs, po) name the same kinds: a newcomer's right order written
    # with them failed as if the list did not hold the three kinds
    ctx = context("gc", "background-delete", f"order: {order}\n")
    assert checks("gc")._order_answer(ctx, ctx.answer(), "order") == ["Deployment", "ReplicaSet", "Pod"]


@pytest.mark.parametrize("exercise,answer", [
    ("background-delete", "order: [Deployment, ReplicaSet]\n"),
    ("background-delete", "order: [apps/v1 Deployment, ReplicaSet, Pod]\n"),
    ("foreground-delete", "finalizer: foregroundDeletion\nlast: Service\n")])
def test_a_kind_list_of_the_wrong_form_is_malformed_not_a_wrong_answer(monkeypatch, exercise, answer):
    # not the three kinds, each once (or not one of them): wrong whatever the lab holds, so it is
    # malformed and counts as no wrong answer (it was counted, and a pass said so)
    from labkit.exercises import run_check
    ctx = context("gc", exercise, answer)
    lab_checks = ctx.lab._load("checks.py")
    monkeypatch.setattr(lab_checks, f"observe_{exercise.replace('-', '_')}", lambda ctx: _cascade_obs())
    (ctx.env.state.dir / "tries.json").unlink(missing_ok=True)
    result = run_check(ctx.env, ctx.exercise)
    assert result.status == "fail" and "your answer is malformed" in result.message, result.message
    assert ctx.env.state.wrong_answers_checked(exercise) == 0
