"""The gc lab end to end: `labkit run gc` prints a kubeconfig that real kubectl uses; every check
fails on a fresh lab, fails after a typical wrong method or answer with a reason, and passes
after its reference solution; `labkit gc graph` draws live objects; and the lab runs against
any API server with --kubeconfig (here a separately started one standing in for a cluster)."""

import contextlib
import json
import os
import signal
import stat
import subprocess

import pytest

from conftest import fresh_environment
from labkit import runner
from labkit.exercises import answer_path, wait_for, write_answer
from labkit import predictions
from labkit.apiserver.target import for_env
from labkit.labs import get_lab
from labkit.state import LabEnv, LabState
from support import LABKIT, REPO, host_lock, labkit, skipping_idle_time

LAB = "gc"
# How long a deleted namespace may take to disappear (a bound, not a wait): the namespace
# controller's first pass comes namespaceDeletionGracePeriod (5 s) after the DELETE, the Pods get
# their grace period (GRACE, 2 s), and each later pass comes estimate/2+1 s after the one before
# (up to 8 s while content waits on finalizers); a handful of passes fit well within it.
NAMESPACE_GONE = 60
EXERCISES = ["owner-chain", "background-delete", "foreground-delete", "orphan-adopt", "unblocking-dependent",
             "predict-dangling", "stuck-finalizer"]


@pytest.fixture(scope="module")
def lab_vars(tmp_path_factory):
    """One `labkit run gc` for the module (its tests reset it when they need a fresh state)."""
    env = {**os.environ, **fresh_environment(tmp_path_factory.mktemp("gc-lab"))}
    with host_lock(False):
        run = labkit("run", LAB, env=env, check=0)
    try:
        yield env, run.stdout
    finally:
        with host_lock(False):
            labkit("cleanup", LAB, env=env, check=0)


@pytest.fixture
def lab(lab_vars, monkeypatch):
    env, _ = lab_vars
    for key in ("LABKIT_STATE_DIR", "LABKIT_ANSWERS_DIR", "LABKIT_PREFIX", "LABKIT_LABS_PATH"):
        monkeypatch.setenv(key, env[key])
    lab = get_lab(LAB)
    return lab, LabEnv(lab, LabState(lab.id))


def statuses(lab, exercise=None):
    return {r.exercise: r for r in runner.check(lab, exercise)}


def test_run_prints_a_kubeconfig_that_kubectl_uses(lab_vars, lab):
    _, out = lab_vars
    lab, env = lab
    target = for_env(env)
    assert f"export KUBECONFIG={target.kubeconfig}" in out
    assert stat.S_IMODE(target.kubeconfig.stat().st_mode) == 0o600
    got = subprocess.run(["kubectl", "get", "deploy,rs", "-n", "shop", "-o", "name"], capture_output=True, text=True,
                         env={**os.environ, "KUBECONFIG": str(target.kubeconfig)}, check=True).stdout.split()
    assert {"deployment.apps/web", "deployment.apps/cart", "deployment.apps/api", "replicaset.apps/worker",
            "replicaset.apps/reports"} <= set(got)
    # the Pod that holds the ReplicaSet was deleted: its container was killed after the grace period
    # (Error) and its own finalizer keeps it
    assert wait_for(lambda: "Error" in target.kubectl("get", "pods", "-n", "shop", "-l", "app=reports"), timeout=10)
    # the graph of the live lab: the Deployment chain, and the stuck foreground deletion with its state
    text = labkit("gc", "graph", "-n", "shop", check=0).stdout
    assert "Deployment shop/web" in text and "Service shop/web" in text
    # ... and what labkit's GC has marked in its own graph: the owner waits for its dependents
    assert "ReplicaSet shop/reports" in text and "finalizers: foregroundDeletion; GC: deletingDependents" in text
    assert "finalizers: example.com/upload; GC: beingDeleted] (controller, blockOwnerDeletion)" in text
    assert "Secret shop/archive-key" in text and "[finalizers: example.com/keep] (blockOwnerDeletion)" in text
    pods = [line for line in text.splitlines() if "Pod shop/web-" in line]
    assert len(pods) == 3 and all(line.startswith("   ") for line in pods)     # below their ReplicaSet
    nodes = json.loads(labkit("gc", "graph", "-o", "json", check=0).stdout)
    assert not any(n["namespace"] == "kube-system" for n in nodes)     # without -n: only objects in relations
    assert "kube-root-ca.crt" not in labkit("gc", "graph", check=0).stdout
    assert "ConfigMap shop/settings" in labkit("gc", "graph", "-a", check=0).stdout


def test_fresh_checks_fail_solutions_pass_and_credit_survives_a_reset(lab):
    # (the common wrong solutions are labs/gc/mistakes/, run by test_mistakes.py)
    lab, env = lab
    runner.reset(lab)
    fresh = statuses(lab)
    assert {e: r.status for e, r in fresh.items()} == {e: "fail" for e in EXERCISES}, \
        {e: r.message for e, r in fresh.items()}
    for exercise in EXERCISES:
        runner.solve(lab, exercise)
    results = statuses(lab)
    assert {e: r.status for e, r in results.items()} == {e: "pass" for e in EXERCISES}, \
        {e: r.message for e, r in results.items()}
    report = json.loads(labkit("check", LAB, "-o", "json", check=0).stdout)
    assert report["passed"] == report["total"] == len(EXERCISES)
    # the GC decision log the lab points to (labkit gc log) explains what happened
    log = labkit("gc", "log", check=0).stdout
    assert "replicaset shop/reports: no dependent blocks its deletion any more → remove the foregroundDeletion" in log
    # a reset that would undo the student's work lists it (from the audit log) and asks first
    refused = labkit("reset", LAB, check=2)
    assert "your deletion of Deployment shop/cart" in refused.stderr
    assert "the ReplicaSet shop/worker-v2 you created" in refused.stderr
    assert "your changes to Secret shop/archive-key" in refused.stderr
    assert for_env(env).client().get_or_none("apps/v1", "deployments", "cart", "shop") is None    # nothing reset
    # a rebuild gives new UIDs: owner-chain's answer no longer matches, but its pass stays recorded
    labkit("reset", LAB, "--yes", check=0)
    report = json.loads(labkit("check", LAB, "-o", "json", check=1).stdout)
    chain = next(r for r in report["results"] if r["exercise"] == "owner-chain")
    assert chain["status"] == "fail" and chain["recorded"]["message"].startswith("Pod web-")
    # (a prediction does not depend on the objects: it still passes on the rebuilt lab)
    assert {r["exercise"] for r in report["results"] if r["status"] == "pass"} == {"predict-dangling"}
    assert (report["score"], report["passed"], report["passing"]) == (25, 7, 1)
    assert next(row.status for row in runner.listing() if row.id == LAB) == "running: 7 of 7 exercises passed"
    # one exercise afresh: the others keep their objects (the web Deployment keeps its UID)
    web = for_env(env).client().get("apps/v1", "deployments", "web", "shop")["metadata"]["uid"]
    out = labkit("reset", LAB, "background-delete", "--yes", check=0)
    assert "exercise background-delete of lab gc starts afresh" in out.stderr
    assert for_env(env).client().get("apps/v1", "deployments", "web", "shop")["metadata"]["uid"] == web
    runner.solve(lab, "background-delete")
    assert statuses(lab, "background-delete")["background-delete"].status == "pass"


def test_graph_of_any_api_server_virtual_owners_and_images(tmp_path):
    # no controllers: nothing collects the dangling references, so the graph keeps them
    from labkit.apiserver.server import EmbeddedServer
    server = EmbeddedServer(tmp_path / "srv", controllers=[]).start()
    try:
        c = server.client()
        for ns in ("a", "b"):
            c.create("v1", "namespaces", {"metadata": {"name": ns}})
        owner_b = c.create("v1", "configmaps", {"metadata": {"name": "owner"}}, "b")
        ghost = {"apiVersion": "v1", "kind": "ReplicationController", "name": "ghost",
                 "uid": "00000000-0000-0000-0000-00000000dead"}
        c.create("v1", "configmaps", {"metadata": {"name": "orphan", "ownerReferences": [ghost]}}, "a")
        c.create("v1", "configmaps", {"metadata": {"name": "stranger", "ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner_b["metadata"]["uid"]}]}}, "a")
        x = c.create("v1", "configmaps", {"metadata": {"name": "x"}}, "a")
        y = c.create("v1", "configmaps", {"metadata": {"name": "y", "finalizers": ["example.com/f"], "ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": x["metadata"]["uid"]}]}}, "a")
        c.patch("v1", "configmaps", "x", {"metadata": {"ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "y", "uid": y["metadata"]["uid"],
             "controller": True, "blockOwnerDeletion": True}]}}, "merge", "a")
        c.delete("v1", "configmaps", "y", "a")
        kc = str(server.kubeconfig)
        text = labkit("gc", "graph", "-n", "a", "--kubeconfig", kc, check=0).stdout
        assert ("ReplicationController a/ghost  uid=00000000  [virtual: referenced but absent]\n"
                "└─ ConfigMap a/orphan") in text
        assert "ConfigMap a/owner  uid=" + owner_b["metadata"]["uid"][:8] + \
            "  [virtual: referenced but absent (exists in namespace b)]\n└─ ConfigMap a/stranger" in text
        assert "… (cycle)" in text and "deleting since" in text and "finalizers: example.com/f" in text
        dot = labkit("gc", "graph", "-n", "a", "--kubeconfig", kc, "-o", "dot", check=0).stdout
        assert f'"{y["metadata"]["uid"]}" -> "{x["metadata"]["uid"]}";' in dot
        assert f'"{x["metadata"]["uid"]}" -> "{y["metadata"]["uid"]}" [label="controller, blockOwnerDeletion"];' in dot
        svg = tmp_path / "g.svg"
        labkit("gc", "graph", "-n", "a", "--kubeconfig", kc, "-o", "svg", "--output-file", str(svg), check=0)
        assert svg.read_text().lstrip().startswith("<?xml") and "a/ghost" in svg.read_text()
        png = tmp_path / "g.png"
        labkit("gc", "graph", "--kubeconfig", kc, "-o", "png", "--output-file", str(png), check=0)
        assert png.read_bytes().startswith(b"\x89PNG")
        assert labkit("gc", "graph", "-o", "png", "--kubeconfig", kc, check=2).stderr.strip() == \
            "labkit: -o png: give a file with --output-file FILE"
        assert "the gc lab is not running" in labkit("gc", "graph", check=2).stderr
    finally:
        server.stop()


def test_kubeconfig_mode_runs_the_lab_on_another_api_server(tmp_path):
    # a separately started server with its own controllers stands in for a real cluster: the lab
    # starts nothing, has no audit or decision log of it, and cleanup deletes what it created there
    from labkit.apiserver.server import EmbeddedServer
    assert "lab kube-proxy does not take --kubeconfig" in \
        labkit("run", "kube-proxy", "--kubeconfig", __file__, check=2).stderr
    # its garbage collector, namespace controller and kubelet stand-in skip the time they only wait
    # in (support.skipping_idle_time); in real time with LABKIT_SLOW_SCENARIOS=1
    cluster = EmbeddedServer(tmp_path / "cluster")
    with contextlib.ExitStack() as stack:
        if os.environ.get("LABKIT_SLOW_SCENARIOS") != "1":
            stack.enter_context(skipping_idle_time(cluster))
        cluster.start()
        stack.callback(cluster.stop)
        out = labkit("run", LAB, "--kubeconfig", str(cluster.kubeconfig), check=0).stdout
        assert f"export KUBECONFIG={cluster.kubeconfig}" in out and "no labkit GC log" in out
        lab = get_lab(LAB)
        assert {r.status for r in statuses(lab).values()} == {"fail"}
        for exercise in EXERCISES:
            runner.solve(lab, exercise)
        results = statuses(lab)
        assert {e: r.status for e, r in results.items()} == {e: "pass" for e in EXERCISES}, \
            {e: r.message for e, r in results.items()}
        for exercise in ("background-delete", "foreground-delete", "orphan-adopt", "unblocking-dependent",
                         "stuck-finalizer"):
            assert "judged by the final state only" in results[exercise].message
        assert not (LabState(LAB).dir / "apiserver").exists()
        assert "labkit has no decision log" in labkit("gc", "log", check=2).stderr
        assert "Deployment shop/web" in labkit("gc", "graph", "-n", "shop", check=0).stdout
        labkit("cleanup", LAB, check=0)
        client = cluster.client()

        def lab_namespaces():
            return {n["metadata"]["name"] for n in client.list("v1", "namespaces")[0]} & {"shop", "predict-a", "predict-b"}
        assert wait_for(lambda: not lab_namespaces(), timeout=NAMESPACE_GONE), lab_namespaces()
        # a namespace that was there before is never taken over, nor deleted when the build fails
        client.create("v1", "namespaces", {"metadata": {"name": "predict-b"}})
        refused = labkit("run", LAB, "--kubeconfig", str(cluster.kubeconfig), check=2).stderr
        assert "namespace predict-b already exists on the cluster of" in refused
        assert wait_for(lambda: lab_namespaces() == {"predict-b"}, timeout=NAMESPACE_GONE), lab_namespaces()
        assert client.get("v1", "namespaces", "predict-b")["metadata"].get("deletionTimestamp") is None


@pytest.mark.host_compared
@pytest.mark.parametrize("step", ["server", "objects"])
def test_kill_9_during_run_then_cleanup_leaves_nothing(step, host_unchanged):
    run = subprocess.run([*LABKIT, "run", LAB], cwd=REPO, capture_output=True,
                         env={**os.environ, "LABKIT_CRASH_AT": f"gc:{step}"})
    assert run.returncode == -signal.SIGKILL
    state = LabState(LAB)
    assert (state.dir / "apiserver" / "server.json").exists()     # the server outlived labkit
    assert labkit("cleanup", LAB, check=0)
    assert not (state.dir / "apiserver").exists()


def test_a_reset_of_one_exercise_lists_only_its_work_and_keeps_answer_files(lab):
    lab, env = lab
    runner.reset(lab, exercise_id="orphan-adopt")
    runner.reset(lab, exercise_id="unblocking-dependent")
    assert runner.work_at_risk(lab, "orphan-adopt") == []
    runner.solve(lab, "orphan-adopt")
    answer = answer_path(LAB, "owner-chain")
    answer.parent.mkdir(parents=True, exist_ok=True)
    answer.write_text("pod: mine\n")
    assert runner.work_at_risk(lab, "orphan-adopt") == ["your deletion of ReplicaSet shop/worker",
                                                       "the ReplicaSet shop/worker-v2 you created"]
    assert runner.work_at_risk(lab, "unblocking-dependent") == []
    assert runner.work_at_risk(lab, "owner-chain") == []
    refused = labkit("reset", LAB, "orphan-adopt", check=2)
    assert "the ReplicaSet shop/worker-v2 you created" in refused.stderr
    labkit("reset", LAB, "orphan-adopt", "--yes", check=0)
    assert runner.work_at_risk(lab, "orphan-adopt") == []
    assert answer.read_text() == "pod: mine\n"


def test_background_deletion_earns_nothing_when_the_student_deleted_pods_first(lab):
    """Reported: after `kubectl delete pod -l app=cart` and then the Deployment, the true order
    failed and [Pod, Deployment, ReplicaSet] passed, with a message that contradicted itself. Then:
    the true order passed with "the GC deleted its dependents", which was not so. The exercise
    leaves the dependents to the garbage collector: either order fails, saying why."""
    lab, env = lab
    runner.reset(lab, exercise_id="background-delete")
    target = for_env(env)
    target.kubectl("delete", "pod", "-l", "app=cart", "-n", "shop", "--wait=false")
    target.kubectl("delete", "deployment", "cart", "-n", "shop")
    client = target.client()
    assert wait_for(lambda: not client.list("v1", "pods", "shop", label_selector="app=cart")[0], timeout=60)
    write_answer(env, "background-delete", {"order": ["Pod", "Deployment", "ReplicaSet"]})
    wrong = statuses(lab, "background-delete")["background-delete"]
    assert wrong.status == "fail" and "yourself" in wrong.message and "as the lab builds it" in wrong.message, \
        wrong.message
    write_answer(env, "background-delete", {"order": ["Deployment", "ReplicaSet", "Pod"]})
    right = statuses(lab, "background-delete")["background-delete"]
    assert right.status == "fail" and "deleted 2 Pods of cart yourself" in right.message \
        and "left to the garbage collector" in right.message, right.message
    assert "GC deleted its dependents" not in right.message


def test_the_predict_experiment_is_shown_only_after_a_prediction_and_that_prediction_is_judged(lab, tmp_path):
    lab, env = lab
    experiment = str(lab.directory / "scenarios" / "predict.yaml")
    answer = answer_path(LAB, "predict-dangling")
    answer.unlink(missing_ok=True)
    predictions.forget(LAB, "predict-dangling", "test: a fresh start")
    shown = labkit("gc", "run", "-f", experiment, check=0)
    withheld = shown.stderr + shown.stdout
    assert shown.stderr.startswith("withheld:") and not shown.stdout and "final objects" not in withheld and "orphan" not in withheld
    # a copy with other names is the same experiment
    text = (lab.directory / "scenarios" / "predict.yaml").read_text()
    copy = tmp_path / "mine.yaml"
    copy.write_text(text.replace("id: predict\n", "id: mine\n").replace("name: stranger", "name: visitor")
                    .replace("predict-b", "elsewhere"))
    assert labkit("gc", "run", "-f", str(copy), check=0).stderr.startswith("withheld:")
    assert predictions.kept(LAB, "predict-dangling") is None
    wrong = {"orphan": "kept", "shared": "kept", "shared_owners": ["anchor"], "stranger": "deleted",
             "stranger_event": "none"}
    write_answer(env, "predict-dangling", wrong)
    shown = labkit("gc", "run", "-f", experiment, check=0).stdout
    assert "final objects" in shown
    # the prediction corrected after seeing the outcome: the check judges the one written before
    runner.solve(lab, "predict-dangling")
    result = statuses(lab, "predict-dangling")["predict-dangling"]
    assert result.status == "fail" and "when `labkit gc run` first showed you" in result.message, result.message
    assert predictions.forget(LAB, "predict-dangling", "test: judge the answer file") is not None
    assert statuses(lab, "predict-dangling")["predict-dangling"].status == "pass"


def test_the_prediction_is_judged_on_the_experiment_as_the_lab_was_built(lab):
    """An experiment changed after `labkit run` (here: its copy as built, where the orphan lost
    its owner reference) is what the check plays, and it says the file differs."""
    lab, env = lab
    predictions.forget(LAB, "predict-dangling", "test: a fresh start")
    runner.solve(lab, "predict-dangling")
    assert statuses(lab, "predict-dangling")["predict-dangling"].status == "pass"
    path = env.dir / "built.json"
    original = path.read_text()
    data = json.loads(original)
    text = data["predict-dangling"]["experiment"]
    ghost = "    ownerReferences:\n      - {apiVersion: v1, kind: ReplicationController, name: ghost, uid: 00000000-0000-0000-0000-00000000dead}\n"
    assert ghost in text
    data["predict-dangling"]["experiment"] = text.replace(ghost, "", 1)
    path.write_text(json.dumps(data))
    try:
        result = statuses(lab, "predict-dangling")["predict-dangling"]
        assert result.status == "fail" and "differs from the experiment the lab was built with" in result.message, \
            result.message
        assert result.right_answer["orphan"] == "kept"
    finally:
        path.write_text(original)


def test_unblocking_feedback_says_what_is_wrong_and_where_to_look_not_the_value(lab):
    """Reported: the feedback stated the answer (`expected: blockOwnerDeletion false or unset`)."""
    from labkit.grading import show_value
    lab, env = lab
    runner.reset(lab, exercise_id="unblocking-dependent")
    runner.apply_mistake(lab, "unblocking-dependent", "deletes_without_unblocking")
    result = statuses(lab, "unblocking-dependent")["unblocking-dependent"]
    shown = " ".join([result.message, show_value(result.expected), show_value(result.observed)]).lower()
    assert result.status == "fail" and "owner reference" in shown and "archive-key" in shown, shown
    assert "false" not in shown and "unset" not in shown and "blockownerdeletion" not in shown, shown
    runner.reset(lab, exercise_id="unblocking-dependent")


def test_a_reset_of_one_exercise_removes_a_pod_released_by_taking_its_label_off(lab):
    """Seen: `kubectl label pod web-… app-` (the ReplicaSet releases the Pod and makes another), then
    `labkit reset gc owner-chain`: the released Pod stayed in shop beside the rebuilt chain, a fourth
    web Pod belonging to nothing."""
    lab, env = lab
    runner.reset(lab, exercise_id="owner-chain")
    target = for_env(env)
    client = target.client()
    released = client.list("v1", "pods", "shop", label_selector="app=web")[0][0]["metadata"]["name"]
    target.kubectl("label", "pod", released, "-n", "shop", "app-")
    assert wait_for(lambda: not (client.get("v1", "pods", released, "shop")["metadata"].get("ownerReferences")),
                    timeout=30)
    runner.reset(lab, exercise_id="owner-chain")
    assert client.get_or_none("v1", "pods", released, "shop") is None
    assert all(p["metadata"].get("labels", {}).get("app") == "web" for p in client.list("v1", "pods", "shop")[0]
               if p["metadata"]["name"].startswith("web-"))
