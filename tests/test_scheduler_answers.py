"""How the scheduler lab's checks read the numbers in answer files, in-process."""

from __future__ import annotations

from labkit.labs import get_lab


def test_a_score_written_as_a_whole_float_is_a_whole_number():
    checks = get_lab("scheduler")._load("checks.py")
    assert checks._int(50.0) == 50 and checks._int("49") == 49
    assert checks._int(49.5) is None and checks._int(True) is None


def test_own_scheduler_names_the_jobs_that_do_not_fit_not_the_one_bound_first(tmp_path, monkeypatch):
    """Three jobs bound to node-b (4 CPUs): job-1 (3 CPUs) fits there, and the kubelet rejected job-2
    and job-3 (OutOfcpu). kube-scheduler does not see Pods that ended (scheduler.go newPodInformer),
    so job-1 is well placed next to them and the feedback names job-2 and job-3 only."""
    from labkit.exercises import CheckContext
    from labkit.state import LabEnv, LabState
    monkeypatch.setenv("LABKIT_STATE_DIR", str(tmp_path))
    lab = get_lab("scheduler")
    checks = lab._load("checks.py")
    state = LabState(lab.id)
    state.ensure_dir()
    ctx = CheckContext(LabEnv(lab, state), lab.exercise("own-scheduler"))
    module = checks._lab(ctx)
    jobs = {}
    for name in module.JOBS:
        pod = module.job_pod(name)
        pod["metadata"]["namespace"] = "sched"
        pod["spec"]["nodeName"] = "node-b"
        jobs[name] = checks._bound_view(pod)
    node = {"metadata": {"name": "node-b", "labels": {"disk": "hdd"}}, "spec": {},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}
    obs = {"jobs": jobs, "bindings": sorted(jobs), "by_hand": [], "running": True, "nodes": [node], "others": [],
           "probe": None, "terminal": ["job-2", "job-3"]}
    result = checks.judge_own_scheduler(ctx, obs)
    assert not result.passed
    assert "job-2 on node-b" in result.message and "job-3 on node-b" in result.message
    assert "job-1 on node-b" not in result.message


def test_node_name_a_failing_fix_beside_a_right_reading_is_no_wrong_answer(tmp_path, monkeypatch):
    """node-name asks for a reading and a fix: with nightly still on node-c by hand, a right reading
    is no wrong answer (the README: a fix that fails beside a right answer is none), a wrong one is,
    and a missing one is not judged."""
    from labkit.exercises import CheckContext
    from labkit.state import LabEnv, LabState
    monkeypatch.setenv("LABKIT_STATE_DIR", str(tmp_path))
    lab = get_lab("scheduler")
    checks = lab._load("checks.py")
    state = LabState(lab.id)
    state.ensure_dir()
    module = checks._lab(CheckContext(LabEnv(lab, state), lab.exercise("node-name")))
    pod = {"metadata": {"name": "nightly", "namespace": "sched"}, "spec": module.NIGHTLY["spec"]}
    seen = {**checks._bound_view(pod), "phase": "Failed", "reason": "OutOfcpu", "message": ""}
    truth = checks.rejection_truth(module)

    def judged(answer, unanswered=None):
        ctx = CheckContext(LabEnv(lab, state), lab.exercise("node-name"))
        obs = {"answer": answer, "unanswered": unanswered, "pod": seen, "bound_by": [], "nodes_changed": [],
               "deleted": [], "placement": None}
        result = checks.judge_node_name(ctx, obs)
        assert not result.passed and "by hand" in result.message, result.message
        return ctx.answer_not_wrong
    assert judged(dict(truth)) is True
    assert judged({**truth, "used": truth["used"] + 1}) is False
    assert judged(None, unanswered="no answer yet") is True


def test_a_filter_reason_is_read_with_or_without_its_count_and_node_s():
    """spread's answer gives each node's Filter reason "as the FailedScheduling message words it":
    the message reads "3 node(s) didn't match pod topology spread constraints", and the reason
    written without the count, or without "node(s)" too, is the same reason; another is not."""
    checks = get_lab("scheduler")._load("checks.py")
    said = checks._reason_text("3 node(s) didn't match pod topology spread constraints.")
    for written in ("node(s) didn't match pod topology spread constraints",
                    "didn't match pod topology spread constraints", "Didn't match pod topology spread constraints."):
        assert checks._reason_text(written) == said, written
    assert checks._reason_text("1 Insufficient cpu") == checks._reason_text("insufficient cpu")
    assert checks._reason_text("didn't match Pod's node affinity/selector") != said


def test_spread_a_failing_fix_leaves_the_answer_unjudged_and_no_wrong_answer(tmp_path, monkeypatch):
    """spread asks for a constraint and an explanation of its outcome: while the Deployment is not
    as the task asks (here: scaled to 5), the answer is not judged, and is no wrong answer."""
    from labkit.exercises import CheckContext
    from labkit.state import LabEnv, LabState
    monkeypatch.setenv("LABKIT_STATE_DIR", str(tmp_path))
    lab = get_lab("scheduler")
    checks = lab._load("checks.py")
    state = LabState(lab.id)
    state.ensure_dir()
    ctx = CheckContext(LabEnv(lab, state), lab.exercise("spread"))
    module = checks._lab(ctx)
    dep = {**checks._deployment_view(module.SHOP), "replicas": 5}
    obs = {"nodes": {name: checks._node_view(node) for name, node in module.ZONE_NODES.items()},
           "deployment": dep, "answer": {"zones": {}, "nodes": {}}, "unanswered": None}
    result = checks.judge_spread(ctx, obs)
    assert not result.passed and "replicas" in result.message, result.message
    assert ctx.answer_not_wrong


def test_preempt_victims_named_with_their_namespace_are_malformed_not_wrong(tmp_path, monkeypatch):
    """The case file names its Pods without a namespace: victims written as default/batch-a are
    told to drop it, as a malformed answer (not counted), not as Pods the case lacks."""
    import pytest
    from labkit.exercises import AnswerMalformed, CheckContext, CheckFailed
    from labkit.state import LabEnv, LabState
    monkeypatch.setenv("LABKIT_STATE_DIR", str(tmp_path))
    lab = get_lab("scheduler")
    checks = lab._load("checks.py")
    state = LabState(lab.id)
    state.ensure_dir()
    ctx = CheckContext(LabEnv(lab, state), lab.exercise("preempt-predict"))
    with pytest.raises(AnswerMalformed, match="without a namespace"):
        checks.judge_preempt_predict(ctx, {"answer": {"node": "node-1", "victims": ["default/batch-a"]},
                                           "note": "", "tried": None})
    with pytest.raises(CheckFailed) as failed:
        checks.judge_preempt_predict(ctx, {"answer": {"node": "node-1", "victims": ["batch-z"]}, "note": "",
                                           "tried": None})
    assert not isinstance(failed.value, AnswerMalformed) and "is not a Pod of the case" in failed.value.message
