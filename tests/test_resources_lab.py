"""The resources lab end to end through the real CLI: every check fails on a fresh lab and passes
after its reference solution; what students commonly type is answered the way the API server and
kubelet answer it; kill -9 at every named step, then cleanup, leaves the host as it was."""

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
import yaml

from labkit.apiserver.podvalidation import POD_UPDATE_FORBIDDEN
from support import LABKIT, REPO, assert_clean_after, labkit, wait_until

EXERCISES = ["qos", "throttled", "oom", "noisy-neighbour", "eviction-order", "weight"]
CRASH_POINTS = ("scenarios", "node", "recorded", "container-started")


def results(run) -> dict:
    return {r["exercise"]: r for r in json.loads(run.stdout)["results"]}


@pytest.fixture
def lab_cleanup():
    yield
    labkit("cleanup", "resources", check=0)


@pytest.mark.host_compared
def test_resources_lab_end_to_end(host_unchanged, lab_cleanup, tmp_path):
    run = labkit("run", "resources", check=0)
    assert "labkit resources top" in run.stdout
    lab_dir = Path(os.environ["LABKIT_STATE_DIR"]) / "resources"

    fresh = results(labkit("check", "resources", "-o", "json", check=1))
    assert {e: r["status"] for e, r in fresh.items()} == {e: "fail" for e in EXERCISES}
    assert "still throttled" in fresh["throttled"]["message"]
    assert "below its eviction threshold" in fresh["noisy-neighbour"]["message"]

    # what students type: a request above the limit, a changed spec over a running Pod
    pod = yaml.safe_load_all((lab_dir / "scenarios" / "node-1.yaml").read_text())
    frontend = next(p for p in pod if p and p["metadata"]["name"] == "frontend")
    frontend["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "200m"
    changed = tmp_path / "frontend.yaml"
    changed.write_text(yaml.safe_dump(frontend))
    refused = labkit("resources", "apply", "-f", str(changed), check=2)
    assert 'The Pod "frontend" is invalid: spec.containers[0].resources.requests: Invalid value: "200m": ' \
           "must be less than or equal to cpu limit of 100m" in refused.stderr
    del frontend["spec"]["containers"][0]["resources"]["limits"]["cpu"]
    changed.write_text(yaml.safe_dump(frontend))
    running = labkit("resources", "apply", "-f", str(changed), check=2)
    # kubectl apply's words for its one refusal, then what to do here
    first, hint = running.stderr.splitlines()
    assert first == f'labkit: The Pod "frontend" is invalid: spec: Forbidden: {POD_UPDATE_FORBIDDEN}'
    assert "labkit resources delete frontend" in hint
    # kubectl's habits: delete -f FILE, apply -f - (standard input), delete pod/NAME, apply -f DIR,
    # get NAME -o yaml, get pod/NAME -o name
    assert labkit("resources", "delete", "-f", str(changed), check=0).stdout == 'pod "frontend" deleted\n'
    assert "pod/frontend on node-1: " in labkit("resources", "apply", "-f", "-", input=changed.read_text(), check=0).stdout
    assert labkit("resources", "delete", "pod/frontend", check=0).stdout == 'pod "frontend" deleted\n'
    assert "pod/frontend on node-1: " in labkit("resources", "apply", "-f", str(tmp_path), check=0).stdout
    [row] = yaml.safe_load(labkit("resources", "get", "frontend", "-o", "yaml", check=0).stdout)
    assert row["name"] == "frontend" and row["node"] == "node-1"
    assert labkit("resources", "get", "pod/frontend", "-o", "name", check=0).stdout == "pod/frontend\n"
    assert 'pods "nosuch" not found' in labkit("resources", "get", "nosuch", check=2).stderr
    shown = {p["name"]: p for p in json.loads(labkit("resources", "get", "--node", "node-1", "-o", "json", check=0).stdout)}
    server = shown["frontend"]["containers"][0]
    assert server["state"] == "running" and server["spec"] == "req cpu=200m,memory=32Mi / lim memory=64Mi"
    assert labkit("resources", "get", check=0).stdout.count("OOMKilled") == 1     # shop/indexer, killed at start
    kills = json.loads(labkit("resources", "oom-kills", "-o", "json", check=0).stdout)
    text = labkit("resources", "oom-kills", check=0).stdout
    assert all(f"{k['task']} (pid {k['pid']}" in text for k in kills) and all("ownLimit" in k for k in kills)

    for exercise in EXERCISES:
        labkit("solve", "resources", exercise, check=0, timeout=120)
    solved = results(labkit("check", "resources", "-o", "json", check=0))
    assert {e: r["status"] for e, r in solved.items()} == {e: "pass" for e in EXERCISES}

    evicted = labkit("resources", "get", "--node", "node-3", check=0).stdout
    assert evicted.count("Failed (Evicted)") == 3
    labkit("cleanup", "resources", check=0)
    assert not (lab_dir / "nodes").exists()


@pytest.mark.host_compared
@pytest.mark.parametrize("point", CRASH_POINTS)
def test_kill_lab_build_at_each_step_then_clean_up(point, host_unchanged):
    crashed = subprocess.run(LABKIT + ["run", "resources"], cwd=REPO, capture_output=True,
                             env={**os.environ, "LABKIT_CRASH_AT": f"resources:{point}"})
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    assert_clean_after(host_unchanged, f"kill -9 of `labkit run resources` at {point}")


@pytest.mark.host_free     # plan builds no lab
def test_plan_works_offline_with_the_labs_and_the_students_priority_classes(tmp_path):
    """`labkit resources plan` needs no running lab: the shipped pressure scenario names the lab's
    own PriorityClasses; others come from --priority-class."""
    planned = json.loads(labkit("resources", "plan", "-f", "labs/resources/scenarios/pressure.yaml", "-o", "json",
                                check=0).stdout)
    assert "crawler" in {p["pod"] for p in planned}
    pod = tmp_path / "pod.yaml"
    pod.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "batch"},
                                   "spec": {"priorityClassName": "nightly",
                                            # not shaped as a qos Pod (those are withheld before the qos answer)
                                            "containers": [{"name": "c", "image": "x",
                                                            "resources": {"requests": {"memory": "1Mi"}}}]}}))
    refused = labkit("resources", "plan", "-f", str(pod), check=2)
    assert "no PriorityClass with name nightly was found" in refused.stderr
    assert labkit("resources", "plan", "-f", str(pod), "--priority-class", "nightly=5", check=0).stdout.startswith("pod/batch")
    assert "expected NAME=VALUE" in labkit("resources", "plan", "-f", str(pod), "--priority-class", "nightly", check=2).stderr


# -- what the lab's own commands refuse and withhold ---------------------------------------------

@pytest.mark.host_free     # plan builds no lab
def test_apply_and_plan_refuse_unknown_and_duplicate_fields_as_kubectl_does(tmp_path):
    """kubectl v1.34 asks for fieldValidation=Strict: a pod-level `privileged` (it belongs in a
    container's securityContext) is refused, not silently dropped; so is a key given twice."""
    pod = tmp_path / "pod.yaml"
    pod.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  privileged: true\n"
                   "  containers:\n    - name: c\n      command: [sleep, infinity]\n")
    refused = labkit("resources", "plan", "-f", str(pod), check=2)
    assert (f'Error from server (BadRequest): error when creating "{pod}": Pod in version "v1" cannot be handled '
            'as a Pod: strict decoding error: unknown field "spec.privileged"') in refused.stderr
    pod.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  containers:\n    - name: c\n"
                   "      name: d\n      command: [sleep, infinity]\n")
    assert 'strict decoding error: duplicate field "spec.containers[0].name"' in \
        labkit("resources", "plan", "-f", str(pod), check=2).stderr
    from labkit.resources.node import load_pods_strict
    from labkit.strict import StrictDecodingError
    with pytest.raises(StrictDecodingError, match='unknown field "spec.containers\\[0\\].resources.limit"'):
        pod.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  containers:\n    - name: c\n"
                       "      resources: {limit: {memory: 1Mi}}\n")
        load_pods_strict(pod, "node-1")


def test_convert_and_plan_withhold_the_answers_until_one_is_recorded(tmp_path):
    """`convert` would answer the weight exercise and `plan` the qos exercise: each shows it only
    once the exercise's answer is written, and keeps that answer as it was then."""
    answers = Path(os.environ["LABKIT_ANSWERS_DIR"]) / "resources"
    for value in (["--shares", "256"], ["--weight", "10"]):
        withheld = labkit("resources", "convert", *value, check=2)
        assert "withheld: exercise weight" in withheld.stderr and "233m" not in withheld.stdout + withheld.stderr
    assert "cpu requests 98m..98m" in labkit("resources", "convert", "--shares", "100", check=0).stdout
    planned = labkit("resources", "plan", "-f", "labs/resources/scenarios/node-1.yaml", check=0)
    assert "withheld: exercise qos" in planned.stderr
    # frontend is shaped as web (cpu and memory requested and limited): its class would tell web's
    assert "pod/shop" in planned.stdout and "pod/queue" not in planned.stdout and "Guaranteed" not in planned.stdout
    assert "pod/frontend" not in planned.stdout and "pod/web" not in planned.stdout
    # a copy under another name is the same Pod
    queue = next(d for d in yaml.safe_load_all(Path("labs/resources/scenarios/node-1.yaml").read_text())
                 if d and d["metadata"]["name"] == "queue")
    queue["metadata"]["name"] = "mine"
    copy = tmp_path / "mine.yaml"
    copy.write_text(yaml.safe_dump(queue))
    assert "pod/mine" not in labkit("resources", "plan", "-f", str(copy), check=0).stdout
    answers.mkdir(parents=True, exist_ok=True)
    (answers / "weight.yaml").write_text("cgroup_value: 256\nmin_millicores: 1\nmax_millicores: 2\n")
    assert "cpu requests 250m..250m" in labkit("resources", "convert", "--shares", "256", check=0).stdout
    kept = Path(os.environ["LABKIT_STATE_DIR"]) / "resources" / "predictions" / "weight.yaml"
    assert kept.read_text() == "cgroup_value: 256\nmin_millicores: 1\nmax_millicores: 2\n"


@pytest.mark.host_compared
def test_a_reset_keeps_a_pod_resized_in_place_as_yaml_apply_takes_back(lab_cleanup):
    # a resize is in no file of the student's: the reset copies the Pod to saved/ before it runs
    # frontend as built again, and `apply -f` of that copy runs the student's frontend again
    labkit("run", "resources", check=0)
    patch = json.dumps({"spec": {"containers": [{"name": "server", "resources": {"requests": {"cpu": "160m"},
                                                                                 "limits": {"cpu": "400m"}}}]}})
    labkit("resources", "patch", "frontend", "--subresource", "resize", "-p", patch, check=0)
    asked = labkit("reset", "resources", "throttled", check=2)
    assert "your changes to Pod frontend on node-1" in asked.stderr and "a copy of yours goes to" in asked.stderr
    reset = labkit("reset", "resources", "throttled", "--yes", check=0)
    saved = sorted((Path(os.environ["LABKIT_ANSWERS_DIR"]) / "resources" / "saved").glob("throttled-*.yaml"))
    assert len(saved) == 1 and str(saved[0]) in reset.stdout + reset.stderr
    (pod,) = [d for d in yaml.safe_load_all(saved[0].read_text()) if d]
    assert pod["spec"]["containers"][0]["resources"]["limits"]["cpu"] == "400m"
    assert "cpu=50m" in labkit("resources", "get", "--node", "node-1", check=0).stdout     # as built again
    labkit("resources", "delete", "frontend", check=0)
    labkit("resources", "apply", "-f", str(saved[0]), check=0)
    assert "req cpu=160m,memory=32Mi / lim cpu=400m,memory=64Mi" in labkit("resources", "get", "--node", "node-1",
                                                                            check=0).stdout


@pytest.mark.host_compared
def test_a_resize_tells_no_qos_class_before_the_qos_answer(lab_cleanup):
    # a newcomer lowered queue's cpu request with no qos answer written: 'The Pod "queue" is
    # invalid: spec: Invalid value: "Guaranteed": Pod QOS Class may not change as a result of
    # resizing' (and web's told "Burstable"): the class the qos exercise asks to predict
    from labkit import predictions

    labkit("run", "resources", check=0)
    lower = json.dumps({"spec": {"containers": [{"name": "broker", "resources": {"requests": {"cpu": "100m"}}}]}})
    refused = labkit("resources", "patch", "queue", "--subresource", "resize", "-p", lower, check=2)
    assert "withheld: exercise qos of lab resources" in refused.stderr and "Guaranteed" not in refused.stderr
    # frontend (throttled's) has web's shape: resized, but a refusal names no class
    whole = json.dumps({"spec": {"containers": [{"name": "server", "resources": {"requests": {"cpu": "100m",
                                                                                          "memory": "64Mi"}}}]}})
    refused = labkit("resources", "patch", "frontend", "--subresource", "resize", "-p", whole, check=2)
    assert "Invalid value: (withheld): Pod QOS Class may not change" in refused.stderr, refused.stderr
    assert "Burstable" not in refused.stderr
    raise_cpu = json.dumps({"spec": {"containers": [{"name": "server", "resources": {"requests": {"cpu": "60m"}}}]}})
    labkit("resources", "patch", "frontend", "--subresource", "resize", "-p", raise_cpu, check=0)
    assert predictions.kept("resources", "qos") is None


@pytest.mark.host_compared
def test_an_evict_that_ranks_nothing_keeps_no_prediction(lab_cleanup, tmp_path):
    # payments and checkout alone hold far less than node-3's threshold: evict ranks nothing, so it
    # showed nothing, and the prediction stays the student's to change (it kept it before)
    labkit("run", "resources", check=0)
    answers = Path(os.environ["LABKIT_ANSWERS_DIR"]) / "resources"
    answers.mkdir(parents=True, exist_ok=True)
    (answers / "eviction-order.yaml").write_text(yaml.safe_dump({"order": ["logs", "reports", "crawler", "analytics",
                                                                           "payments", "checkout"]}))
    docs = [d for d in yaml.safe_load_all((REPO / "labs/resources/scenarios/pressure.yaml").read_text())
            if d and d["metadata"]["name"] in ("payments", "checkout")]
    (tmp_path / "two.yaml").write_text(yaml.safe_dump_all(docs))
    labkit("resources", "apply", "-f", str(tmp_path / "two.yaml"), check=0)
    quiet = labkit("resources", "evict", "--node", "node-3", check=0).stdout
    assert "no threshold met" in quiet and "ranking:" not in quiet
    kept = Path(os.environ["LABKIT_STATE_DIR"]) / "resources" / "predictions" / "eviction-order.yaml"
    assert not kept.exists()


@pytest.mark.host_compared
def test_predictions_are_graded_as_they_were_when_a_tool_showed_the_outcome(lab_cleanup):
    labkit("run", "resources", check=0)
    answers = Path(os.environ["LABKIT_ANSWERS_DIR"]) / "resources"
    answers.mkdir(parents=True, exist_ok=True)
    # get withholds the qos Pods' classes and scores until the qos answer is written
    shown = labkit("resources", "get", "--node", "node-1", check=0)
    assert "withheld: exercise qos" in shown.stderr and "Guaranteed" not in shown.stdout and "-997" not in shown.stdout
    # eviction-order: graded before anything ran, and evict waits for the prediction
    labkit("resources", "apply", "-f", "labs/resources/scenarios/pressure.yaml", check=0)
    refused = labkit("resources", "evict", "--node", "node-3", check=2)
    assert "withheld: exercise eviction-order" in refused.stderr and "ranking:" not in refused.stdout
    order = ["crawler", "analytics", "logs", "reports", "payments", "checkout"]
    (answers / "eviction-order.yaml").write_text(yaml.safe_dump({"order": order[::-1]}))
    wrong = results(labkit("check", "resources", "eviction-order", "-o", "json", check=1))["eviction-order"]
    assert "its 6 places are wrong, or which" in wrong["message"]
    (answers / "eviction-order.yaml").write_text(yaml.safe_dump({"order": order}))
    right = results(labkit("check", "resources", "eviction-order", "-o", "json", check=1))["eviction-order"]
    assert "not watched it yet" in right["message"]
    # once evict has shown the ranking, changing the answer changes nothing (evict once node-3's
    # memory.available is below its 100Mi threshold: one bounded wait, `top` sampling 0.2 s)
    def under_pressure():
        top = labkit("resources", "top", "--node", "node-3", "--interval", "0.2", check=0).stdout
        return "memory.available" in top and float(top.split("memory.available ")[-1].split("Mi")[0]) < 100
    wait_until(under_pressure, timeout=30, interval=0)
    assert "ranking: crawler" in labkit("resources", "evict", "--node", "node-3", check=0).stdout
    (answers / "eviction-order.yaml").write_text(yaml.safe_dump({"order": order[::-1]}))
    kept = results(labkit("check", "resources", "eviction-order", "-o", "json", check=0))["eviction-order"]
    assert kept["status"] == "pass" and "as it was when `labkit resources evict` first showed" in kept["message"]
    # a reset of the exercise keeps the kept answer (labkit.predictions), after listing what it reverts
    asked = labkit("reset", "resources", "eviction-order", check=2)
    assert "Pod crawler you ran on node-3" in asked.stderr and "the evictions you watched on node-3" in asked.stderr
    assert "kept it" not in asked.stderr
    labkit("reset", "resources", "eviction-order", "--yes", check=0)
    still = results(labkit("check", "resources", "eviction-order", "-o", "json", check=1))["eviction-order"]
    assert "you have not watched it yet" in still["message"], still["message"]     # the kept order is graded:
    assert "as it was when `labkit resources evict` first showed" in still["message"]   # the file's is reversed
    # only --forget-prediction forgets it, says so before, and the grade report shows it
    asked = labkit("reset", "resources", "eviction-order", "--forget-prediction", check=2)
    assert "your eviction-order answer as labkit kept it" in asked.stderr and "--forget-prediction --yes" in asked.stderr
    labkit("reset", "resources", "eviction-order", "--forget-prediction", "--yes", check=0)
    again = results(labkit("check", "resources", "eviction-order", "-o", "json", check=1))["eviction-order"]
    assert "its 6 places are wrong, or which" in again["message"]
    assert [e["kept_by"] for e in again["details"]["predictions_forgotten"]] == ["labkit resources evict"]


@pytest.mark.host_compared
def test_a_one_exercise_reset_keeps_the_other_exercises_and_the_students_files(lab_cleanup):
    labkit("run", "resources", check=0)
    lab_dir = Path(os.environ["LABKIT_STATE_DIR"]) / "resources"
    for exercise in ("throttled", "oom"):
        labkit("solve", "resources", exercise, check=0, timeout=120)
    # like kubectl, apply goes on with the file's other Pods after one is refused
    again = labkit("resources", "apply", "-f", str(lab_dir / "scenarios" / "node-1.yaml"), check=2)
    assert 'The Pod "shop" is invalid' in again.stderr and "pod/mystery on node-1: unchanged" in again.stdout
    asked = labkit("reset", "resources", "throttled", check=2)
    assert "your changes to Pod frontend on node-1" in asked.stderr and "shop" not in asked.stderr
    labkit("reset", "resources", "throttled", "--yes", check=0)
    after = results(labkit("check", "resources", "-o", "json", check=1))
    assert after["throttled"]["status"] == "fail" and after["oom"]["status"] == "pass"
    # the whole lab's rebuild keeps the scenario file the student edited
    edited = lab_dir / "scenarios" / "node-1.yaml"
    edited.write_text(edited.read_text().replace("limits: {cpu: 100m, memory: 64Mi}", "limits: {memory: 64Mi}"))
    asked = labkit("reset", "resources", check=2)
    assert "scenarios/node-1.yaml you edited" in asked.stderr and "your changes to Pod shop on node-1" in asked.stderr
    done = labkit("reset", "resources", "--yes", check=0)
    kept = list((lab_dir / "kept").glob("*/node-1.yaml"))
    assert len(kept) == 1 and "limits: {memory: 64Mi}" in kept[0].read_text()
    assert edited.read_text() == (REPO / "labs/resources/scenarios/node-1.yaml").read_text(), done.stderr
