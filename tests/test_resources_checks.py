"""The resources lab's judges in-process, on observations built from the lab's own scenario files:
what they grade, against kubelet's reconstruction and the kernel's counters as an observation
carries them."""

from __future__ import annotations

import copy

import pytest
import yaml

from labkit.exercises import CheckContext, CheckFailed
from labkit.labs import get_lab
from labkit.state import LabEnv, LabState


@pytest.fixture
def lab():
    the_lab = get_lab("resources")
    state = LabState(the_lab.id)
    state.ensure_dir()
    return the_lab, LabEnv(the_lab, state)


def context(lab, exercise: str, answer: dict | None) -> CheckContext:
    the_lab, env = lab
    ctx = CheckContext(env, the_lab.exercise(exercise))
    if answer is not None:
        ctx.answer_path.parent.mkdir(parents=True, exist_ok=True)
        ctx.answer_path.write_text(yaml.safe_dump(answer))
    return ctx


def node_1(checks, frontend_resources: dict, server_state: dict) -> dict:
    """node-1 as the scenario gives it, with frontend's server container changed and observed so."""
    observation = {}
    for name, pod in checks._pristine("node-1.yaml", "node-1").items():
        manifest = copy.deepcopy(pod.manifest)
        containers = {c.name: {"running": True, "oom_kills": 0, "working_set": 0, "limit": None, "quota": -1,
                               "period": 100000} for c in pod.all_containers()}
        if name == "frontend":
            raw = copy.deepcopy(manifest)
            raw["spec"]["containers"][0]["resources"] = frontend_resources
            raw.pop("status")
            manifest = checks._pod_of(raw, "node-1").manifest
            containers["server"].update(server_state)
        observation[name] = {"manifest": manifest, "phase": "Running", "reason": "", "containers": containers}
    return observation


EXPLAINED = {"quota_us": 10000, "period_us": 100000, "request_ms": 105}


def test_the_graded_request_time_is_the_longest_a_request_takes_finding_the_quota_unspent(lab):
    checks = lab[0]._load("checks.py")
    # a request of 15 ms of CPU under 10 ms per 100 ms, started at each millisecond of a period
    # with the quota unspent: it runs until the quota is spent, then waits for the refill
    times = []
    for start in range(100):
        left, quota_left, now = 15, 10, start
        while left:
            if quota_left == 0 and now % 100:
                now = (now // 100 + 1) * 100        # throttled until the period ends
            if now % 100 == 0 and now != start:
                quota_left = 10                     # the refill
            step = min(left, quota_left, 100 - now % 100)
            left, quota_left, now = left - step, quota_left - step, now + step
        times.append(now - start)
    assert (min(times), max(times)) == (15, 105)
    assert checks._longest_ms(15, 10000, 100000) == max(times)
    prompt = lab[0].exercise("throttled").prompt
    assert "at best" not in prompt and "longest" in prompt


def test_a_limit_the_kernel_keeps_throttling_fails_on_the_live_counters(lab):
    checks = lab[0]._load("checks.py")
    ctx = context(lab, "throttled", EXPLAINED)
    resources = {"requests": {"cpu": "200m", "memory": "32Mi"}, "limits": {"cpu": "300m", "memory": "64Mi"}}
    calm = node_1(checks, resources, {"quota": 30000, "watched": {"periods": 10, "throttled": 0}})
    passed = checks.judge_throttled(ctx, calm)
    assert passed.status == "pass", passed.message
    # kubelet's reconstruction leaves it twice its use, but the kernel throttled it while watched
    held = node_1(checks, resources, {"quota": 30000, "watched": {"periods": 10, "throttled": 3}})
    verdict = checks.judge_throttled(ctx, held)
    assert verdict.status == "fail" and "held it back in 3 of the 10 CFS periods" in verdict.message
    assert "resized in place" not in verdict.message
    # resized in place (generation raised): the requests queued under the old quota are still
    # being worked off (workload serve catches up), and the feedback says so
    frontend = held["frontend"]["manifest"]
    frontend["metadata"] = {**(frontend.get("metadata") or {}), "generation": 2}
    verdict = checks.judge_throttled(ctx, held)
    assert verdict.status == "fail" and "frontend was resized in place: the requests that queued" in verdict.message


def test_the_eviction_order_pods_are_known_under_other_names(lab, tmp_path):
    """`labkit resources evict` withholds the ranking of the exercise's Pods until a prediction is
    recorded: a renamed copy of them, or one whose workloads hold a little more, is ranked exactly
    as they are, and one with other amounts by the same rule, so it is theirs too."""
    from labkit.inputs import load_yaml
    from labkit.resources import situations
    from labkit.resources.node import load_pods_strict

    the_lab, _env = lab
    params = the_lab.exercise("eviction-order").params
    docs = [d for d in yaml.safe_load_all((the_lab.directory / params["file"]).read_text()) if d]
    renamed = [dict(copy.deepcopy(d), metadata={**d["metadata"], "name": "x" + d["metadata"]["name"]}) for d in docs]
    for d in renamed[:3]:       # a near copy: other container names, a workload 1Mi larger
        for c in d["spec"]["containers"]:
            c["name"] += "-x"
            c["command"] = [f"{int(w[:-2]) + 1}Mi" if w.endswith("Mi") else w for w in c["command"]]
    # crawler with another request is ranked by the same rule (its place tells crawler's), and so is
    # crawler with a memory limit, a cpu request or an empty container beside it: rankMemoryPressure
    # reads none of those. crawler with a priority none of the six has is another Pod
    other = copy.deepcopy(docs[0])
    other["metadata"]["name"] = "mine"
    other["spec"]["containers"][0]["resources"] = {"requests": {"memory": "1Mi"}}
    unprioritised = copy.deepcopy(docs[0])
    unprioritised["metadata"]["name"] = "unprioritised"
    unprioritised["spec"]["priorityClassName"] = "system-cluster-critical"
    limited = copy.deepcopy(docs[0])
    limited["metadata"]["name"] = "limited"
    limited["spec"]["containers"][0]["resources"]["limits"] = {"memory": "64Mi"}
    with_cpu = copy.deepcopy(docs[0])
    with_cpu["metadata"]["name"] = "with-cpu"
    with_cpu["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "10m"
    with_sidecar = copy.deepcopy(docs[0])
    with_sidecar["metadata"]["name"] = "with-sidecar"
    with_sidecar["spec"]["containers"].append({"name": "idle", "command": ["sleep", "infinity"]})
    (tmp_path / "copy.yaml").write_text(yaml.safe_dump_all(renamed + [other, unprioritised, limited, with_cpu,
                                                                      with_sidecar]))
    classes = {str(k): int(v) for k, v in load_yaml(the_lab.directory / "nodes.yaml")["priorityClasses"].items()}
    pods = load_pods_strict(tmp_path / "copy.yaml", params["node"], classes)
    found = situations.eviction_pods_among(the_lab, pods)
    assert found == {"x" + d["metadata"]["name"] for d in docs} | {"mine", "limited", "with-cpu", "with-sidecar"}


def test_a_copy_of_the_eviction_order_pods_that_changes_only_their_cpu_is_theirs(lab, tmp_path):
    """All six Pods of pressure.yaml renamed, each given a cpu request (payments: its cpu limit
    dropped instead): their QoS shapes change, their eviction ranking does not (rankMemoryPressure
    reads memory requests, priority and usage), and `labkit resources evict` ranked them all before
    any prediction."""
    from labkit.inputs import load_yaml
    from labkit.resources import situations
    from labkit.resources.node import load_pods_strict

    the_lab, _env = lab
    params = the_lab.exercise("eviction-order").params
    docs = [d for d in yaml.safe_load_all((the_lab.directory / params["file"]).read_text()) if d]
    for d in docs:
        name = d["metadata"]["name"]
        d["metadata"]["name"] = "y-" + name
        resources = d["spec"]["containers"][0].setdefault("resources", {})
        if name == "payments":
            del resources["limits"]["cpu"]
        else:
            resources.setdefault("requests", {})["cpu"] = "10m"
    (tmp_path / "copy.yaml").write_text(yaml.safe_dump_all(docs))
    classes = {str(k): int(v) for k, v in load_yaml(the_lab.directory / "nodes.yaml")["priorityClasses"].items()}
    pods = load_pods_strict(tmp_path / "copy.yaml", params["node"], classes)
    assert situations.eviction_pods_among(the_lab, pods) == {d["metadata"]["name"] for d in docs}


def test_an_edited_scenario_copy_is_named_when_its_pods_differ_from_the_labs(lab):
    """A student who edits their scenarios/pressure.yaml (crawler given high-priority), runs the
    Pods from it and predicts their order is graded on the lab's Pods; the feedback says their copy
    was edited, where it used to say the node runs crawler "otherwise than the file" they had
    just run it from."""
    checks = lab[0]._load("checks.py")
    params = lab[0].exercise("eviction-order").params
    pods = checks._pristine(params["file"], params["node"])
    specs = {name: copy.deepcopy(pod.manifest["spec"]) for name, pod in pods.items()}
    specs["crawler"]["priorityClassName"] = "high-priority"
    specs["crawler"]["priority"] = 1000000
    edited_order = ["analytics", "logs", "reports", "crawler", "payments", "checkout"]
    ctx = context(lab, "eviction-order", {"order": edited_order})
    observation = {"ranking": edited_order, "specs": specs, "file_edited": True}
    verdict = checks.judge_eviction_order(ctx, observation)
    assert verdict.status == "fail"
    assert (f"graded on the Pods as the lab gives them in {params['file']}: {params['node']} runs crawler otherwise "
            f"than the lab's file; your copy of {params['file']} was edited, and the prediction is about the Pods as "
            "the lab gave them") in verdict.message
    # run from the lab's own file, the Pods are the lab's: no such note
    clean = checks.judge_eviction_order(ctx, {"ranking": edited_order, "specs": {n: p.manifest["spec"] for n, p in
                                                                                 pods.items()}, "file_edited": True})
    assert "edited" not in clean.message and "otherwise than" not in clean.message


def test_an_unwatched_eviction_order_says_which_pods_kubelet_rejected_under_memory_pressure(lab):
    """An eviction run left node-3 with MemoryPressure; applied again, logs and reports (BestEffort)
    were rejected (Failed, Evicted), the other four never met the threshold and evict ranked
    nothing: the feedback said only to apply the file and evict again, which could not help."""
    checks = lab[0]._load("checks.py")
    params = lab[0].exercise("eviction-order").params
    pods = checks._pristine(params["file"], params["node"])
    right = checks.reconstructed_ranking(params["file"], params["node"])
    ctx = context(lab, "eviction-order", {"order": right})
    specs = {n: p.manifest["spec"] for n, p in pods.items()}
    verdict = checks.judge_eviction_order(ctx, {"ranking": None, "specs": specs, "rejected": ["logs", "reports"]})
    assert verdict.status == "fail"
    assert ("(logs, reports are Failed, reason Evicted: kubelet rejected them while node-3 had the MemoryPressure "
            "condition") in verdict.message
    plain = checks.judge_eviction_order(ctx, {"ranking": None, "specs": specs, "rejected": []})
    assert "you have not watched it yet" in plain.message and "MemoryPressure" not in plain.message


def test_the_eviction_order_pass_claims_no_more_evictions_than_it_saw(lab):
    """The eviction manager evicts from the top of its ranking until memory.available is back above
    the threshold plus the minimum reclaim: on node-3 the first three go and the rest stay. The pass
    said "you watched it evict in that order", as if all six had gone."""
    checks = lab[0]._load("checks.py")
    params = lab[0].exercise("eviction-order").params
    pods = checks._pristine(params["file"], params["node"])
    truth = checks.reconstructed_ranking(params["file"], params["node"])
    ctx = context(lab, "eviction-order", {"order": truth})
    verdict = checks.judge_eviction_order(ctx, {"ranking": truth, "file_edited": False,
                                                "specs": {n: p.manifest["spec"] for n, p in pods.items()}})
    assert verdict.status == "pass", verdict.message
    assert verdict.message.startswith("the eviction manager ranks them exactly so, and you watched it rank them and "
                                      "evict from the top of that order")


def test_a_kept_qos_prediction_names_its_wrong_oom_score_adj_values_too(lab, monkeypatch):
    """Once kept, the prediction can earn nothing more and its wrong cells are named: a newcomer
    with one QoS class and one oom_score_adj wrong was told the class and only "1 of the 6
    oom_score_adj values are wrong"."""
    checks = lab[0]._load("checks.py")
    answer = {"qos": {"web": "Burstable", "queue": "Guaranteed", "batch": "BestEffort", "api": "Burstable",
                      "migrate": "Guaranteed"},
              "oom_score_adj": {"web/app": 938, "queue/broker": -997, "batch/job": 1000, "api/server": 750,
                                "api/log-shipper": 999, "migrate/app": -997}}
    ctx = context(lab, "qos", answer)
    monkeypatch.setattr(checks, "_answer_kept", lambda ctx: True)
    monkeypatch.setattr(checks, "_prediction", lambda ctx: (answer, ""))
    monkeypatch.setattr(checks, "_situation", lambda *args: "")
    verdict = checks.check_qos(ctx)
    assert verdict.status == "fail" and verdict.message == (
        "1 of the 5 QoS classes of your prediction is wrong: the QoS class of migrate; and 1 of the 6 "
        "oom_score_adj values is wrong: migrate/app's oom_score_adj"), verdict.message


def test_a_right_explanation_beside_a_pod_still_throttled_is_no_wrong_answer(lab):
    """A newcomer's right explanation with fixes of the Pod that still failed passed 'after 4
    different wrong answers': each failure of the Pod was counted as a wrong answer. A failure is a
    wrong answer only when the answer is wrong (CheckContext.answer_not_wrong)."""
    checks = lab[0]._load("checks.py")
    resources = {"requests": {"cpu": "200m", "memory": "32Mi"}, "limits": {"cpu": "300m", "memory": "64Mi"}}
    held = node_1(checks, resources, {"quota": 30000, "watched": {"periods": 10, "throttled": 3}})
    right = context(lab, "throttled", EXPLAINED)
    assert checks.judge_throttled(right, held).status == "fail" and right.answer_not_wrong
    wrong = context(lab, "throttled", {**EXPLAINED, "request_ms": 15})
    assert checks.judge_throttled(wrong, held).status == "fail" and not wrong.answer_not_wrong
    malformed = context(lab, "throttled", {**EXPLAINED, "quota_us": "10000us"})
    verdict = checks.judge_throttled(malformed, held)
    assert "malformed" in verdict.message and malformed.answer_not_wrong


@pytest.mark.parametrize("written,read", [(250, 250), ("250m", 250), (" 250m ", 250), (250.0, 250),
                                          ("250", None), ("0.25", None), ("250 millicores", None), (True, None)])
def test_a_weight_request_may_be_written_in_millicores_as_a_pod_writes_it(lab, written, read):
    """A newcomer wrote min_millicores: 250m, as a Pod's request is written, and was told the answer
    was malformed; a number or a millicore quantity is read, anything else is malformed (not counted)."""
    from labkit.exercises import AnswerMalformed
    checks = lab[0]._load("checks.py")
    ctx = context(lab, "weight", None)
    if read is None:
        with pytest.raises((AnswerMalformed, checks.CheckFailed)):
            checks._millicores(ctx, {"min_millicores": written}, "min_millicores")
    else:
        assert checks._millicores(ctx, {"min_millicores": written}, "min_millicores") == read


QOS_RIGHT = {"qos": {"web": "Burstable", "queue": "Guaranteed", "batch": "BestEffort", "api": "Burstable",
                     "migrate": "Burstable"},
             "oom_score_adj": {"web/app": 938, "queue/broker": -997, "batch/job": 1000, "api/server": 750,
                               "api/log-shipper": 999, "migrate/app": 969}}


def test_a_qos_answer_written_after_a_labkit_api_server_showed_the_classes_earns_nothing(lab, monkeypatch):
    """A newcomer ran `labkit apiserver`, `kubectl create -f scenarios/node-1.yaml` (an image added)
    and `kubectl get pods -o custom-columns=...qosClass`: the server showed every QoS class before
    the answer was written, and the answer written from it passed."""
    import json
    import os

    from labkit import paths, predictions
    from labkit.apiserver.audit import received_at

    checks = lab[0]._load("checks.py")
    monkeypatch.setattr(checks, "_situation", lambda *args: "")
    server = paths.state_root() / "apiserver"
    server.mkdir(parents=True, exist_ok=True)
    log = server / "audit.log"

    def create(name, spec, user="labkit-admin", at="2026-12-07T23:28:14.462754Z"):
        return json.dumps({"verb": "create", "user": {"username": user}, "requestReceivedTimestamp": at,
                           "objectRef": {"resource": "pods", "namespace": "default", "name": name, "apiVersion": "v1"},
                           "responseStatus": {"code": 201},
                           "requestObject": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                                             "spec": spec}},
                          separators=(",", ":"))      # as the server writes its audit log
    stamp = "2026-12-07T23:10:00.000000Z"
    at = received_at({"requestReceivedTimestamp": stamp})
    bare = {"containers": [{"name": "job", "image": "x", "command": ["sleep", "infinity"]}]}
    queue = {"containers": [{"name": "broker", "image": "x", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}
    # another lab's Pods, and a controller's copy: no student's copy of the exercise's Pods
    log.write_text("\n".join([
        create("invoices-1", bare, at=stamp), create("batch", bare, user="system:serviceaccount:x:y", at=stamp),
        create("queue", bare, at=stamp)]) + "\n")
    ctx = context(lab, "qos", QOS_RIGHT)
    os.utime(ctx.answer_path, (at + 60, at + 60))
    assert checks.check_qos(ctx).status == "pass"
    # the student's copy of queue (other amounts, the same shape), before the answer was written
    with log.open("a") as f:
        f.write(create("queue", queue, at=stamp) + "\n")
    with pytest.raises(CheckFailed) as failed:
        checks.check_qos(ctx)
    assert "default/queue" in str(failed.value) and "earns no points" in str(failed.value)
    # kept: the server's directory removed does not unsee it; --forget-prediction forgets it
    log.unlink()
    with pytest.raises(CheckFailed):
        checks.check_qos(ctx)
    predictions.forget("resources", "qos", "test")
    assert checks.check_qos(ctx).status == "pass"
    # an answer written before the server showed the classes, and not changed since, is graded
    log.write_text(create("queue", queue, at="2026-12-07T23:40:00.000000Z") + "\n")
    assert checks.check_qos(ctx).status == "pass"


@pytest.mark.parametrize("exercise,answer,says", [
    ("qos", {**QOS_RIGHT, "qos": {**QOS_RIGHT["qos"], "queue": "Guarenteed"}}, "qos of queue: 'Guarenteed' is not one of"),
    ("qos", {**QOS_RIGHT, "oom_score_adj": {k: v for k, v in QOS_RIGHT["oom_score_adj"].items() if k != "migrate/app"}},
     "oom_score_adj of migrate/app: missing"),
])
def test_an_incomplete_qos_answer_is_malformed_not_a_wrong_answer(lab, monkeypatch, exercise, answer, says):
    """A newcomer's misspelled class and a container left out were counted as wrong answers
    ("passed after 4 different wrong answers", two of them these), though the tools called them
    "not a whole prediction yet" and went on withholding."""
    from labkit.exercises import AnswerMalformed

    checks = lab[0]._load("checks.py")
    monkeypatch.setattr(checks, "_situation", lambda *args: "")
    ctx = context(lab, exercise, answer)
    with pytest.raises(AnswerMalformed) as failed:
        checks.check_qos(ctx)
    assert says in str(failed.value) and str(failed.value).startswith("your answer is malformed: ")


def test_an_eviction_order_that_misspells_a_pod_is_malformed_not_a_wrong_answer(lab):
    from labkit.exercises import AnswerMalformed

    checks = lab[0]._load("checks.py")
    pods = checks._pristine("pressure.yaml", "node-3")
    ctx = context(lab, "eviction-order", {"order": ["crawler", "analytics", "logs", "reports", "payment", "checkout"]})
    with pytest.raises(AnswerMalformed) as failed:
        checks.judge_eviction_order(ctx, {"ranking": [], "file_edited": False,
                                          "specs": {n: p.manifest["spec"] for n, p in pods.items()}})
    assert "expected each of the 6 Pods" in str(failed.value)
