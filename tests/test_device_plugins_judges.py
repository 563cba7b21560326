"""The device-plugins lab's judges in-process: the feedback on predictions of the checkpoint
exercise, and what the plugin exercises' judges make of observations (kubelet's record of
Register calls, as labs/device-plugins/checks.py observes it)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from labkit.exercises import CheckContext, CheckFailed
from labkit.labs import get_lab
from labkit.state import LabEnv, LabState


@pytest.fixture
def lab():
    the_lab = get_lab("device-plugins")
    state = LabState(the_lab.id)
    state.ensure_dir()
    return the_lab, LabEnv(the_lab, state)


RIGHT = {"train": ["widget-0", "widget-1"], "prep": ["widget-3"], "next": ["widget-2"]}
WRONG = [{**RIGHT, "next": ["widget-1"]}, {**RIGHT, "next": ["widget-3"]}, {**RIGHT, "train": ["widget-0"]},
         {**RIGHT, "prep": ["widget-2"]}, {**RIGHT, "infer": ["widget-2"]}, {**RIGHT, "ghost": ["widget-2"]},
         {"train": ["widget-0", "widget-1"], "prep": ["widget-3"]}, {"next": ["widget-0"]}]


@pytest.mark.parametrize("settled", [False, True], ids=["before-play", "kept"])
@pytest.mark.parametrize("held", WRONG)
def test_checkpoint_feedback_is_filled_in(lab, held, settled):
    # every message of judge_checkpoint is a complete sentence: no {placeholder} left unformatted
    the_lab, env = lab
    checks = the_lab._load("checks.py")
    ctx = CheckContext(env, the_lab.exercise("checkpoint"))
    with pytest.raises(CheckFailed) as failed:
        checks.judge_checkpoint(ctx, {"held": held}, " (a note)", settled=settled)
    message = str(failed.value)
    assert not re.search(r"\{\w+\}", message), message
    assert message.endswith(" (a note)"), message
    assert checks.judge_checkpoint(ctx, {"held": RIGHT}, settled=settled).passed


SCENARIO_NAMES = r"\b(train|infer|prep|next|fetch|main)\b|widget-\d"      # the scenario's Pods, containers, widgets


def test_checkpoint_feedback_names_no_pod_until_play_has_shown_the_outcome(lab):
    """Before `labkit devices play` keeps the prediction, every well-formed wrong answer gets the
    same words: not which Pod or widget is wrong (changing one Pod at a time would find the answer),
    only that it is wrong, where to look, and how many different wrong answers were checked. Once
    the answer is kept, the feedback names the Pod and the rule."""
    the_lab, env = lab
    checks = the_lab._load("checks.py")
    ctx = CheckContext(env, the_lab.exercise("checkpoint"))
    from labkit.exercises import answer_path
    told = set()
    well_formed = [held for held in WRONG if "ghost" not in held]
    for n, held in enumerate(well_formed, start=1):
        answer_path(the_lab.id, "checkpoint").parent.mkdir(parents=True, exist_ok=True)
        answer_path(the_lab.id, "checkpoint").write_text(repr(held))       # each a different answer file
        with pytest.raises(CheckFailed) as failed:
            checks.judge_checkpoint(ctx, {"held": held})
        message = str(failed.value)
        assert not re.search(SCENARIO_NAMES, message), message
        assert "prediction is not right" in message and f"({n} different wrong answer" in message, message
        told.add(re.sub(r"\(\d+ different wrong answers? ", "(N different wrong answers ", message))
    assert len(told) == 1, told
    with pytest.raises(CheckFailed) as failed:
        checks.judge_checkpoint(ctx, {"held": {**RIGHT, "train": ["widget-0"]}}, settled=True)
    assert "takes a widget away from train" in str(failed.value)
    with pytest.raises(CheckFailed) as failed:
        checks.judge_checkpoint(ctx, {"held": {**RIGHT, "ghost": ["widget-2"]}})
    assert "ghost in your answer is not a Pod of the scenario" in str(failed.value)


WIDGETS = {"widget-0": 0, "widget-1": 0, "widget-2": 1, "widget-3": 1}


def registered(*resources, stream: str = "open") -> dict:
    """An observation of register: these Register calls accepted, the exercise's four widgets
    (after the first ListAndWatch message and at the end of the watch: `last`)."""
    devices = [{"ID": d, "health": "Healthy", "numa": [n]} for d, n in WIDGETS.items()]
    node = {"capacity": {"example.com/widget": 4}, "allocatable": {"example.com/widget": 4}}
    return {"exited": None, "log": "",
            "registrations": [{"resource": r, "version": "v1beta1", "error": None, "stream": stream, "in_directory": True}
                              for r in resources],
            "devices": devices, "node": node, "last": {"devices": [dict(d) for d in devices], "node": node},
            "serving": None}


def test_register_names_the_extra_resource_not_the_exercises(lab):
    the_lab, env = lab
    checks = the_lab._load("checks.py")
    ctx = CheckContext(env, the_lab.exercise("register"))
    assert checks.judge_register(ctx, registered("example.com/widget")).passed
    for order in (("example.com/widget", "example.com/gadget"), ("example.com/gadget", "example.com/widget")):
        with pytest.raises(CheckFailed) as failed:
            checks.judge_register(ctx, registered(*order))
        message = str(failed.value)
        assert "also the resource(s) example.com/gadget" in message and "is 'example.com/gadget'" not in message, message
    with pytest.raises(CheckFailed) as failed:
        checks.judge_register(ctx, registered("example.com/gadget"))
    assert "is 'example.com/gadget', not the exercise's example.com/widget" in str(failed.value)


def test_a_refused_registration_says_whether_a_socket_was_there_to_dial(lab):
    the_lab, env = lab
    checks = the_lab._load("checks.py")
    ctx = CheckContext(env, the_lab.exercise("register"))
    obs = registered("example.com/widget")
    obs["registrations"][0].update(error="failed to dial device plugin: context deadline exceeded", stream=None)
    with pytest.raises(CheckFailed) as failed:
        checks.judge_register(ctx, obs)
    assert "nothing answered there)" in str(failed.value) and "no socket was at" not in str(failed.value)
    obs["registrations"][0]["socket_missing"] = "/run/device-plugins/widget.sock"
    with pytest.raises(CheckFailed) as failed:
        checks.judge_register(ctx, obs)
    assert ("nothing answered there; when kubelet gave up, no socket was at /run/device-plugins/widget.sock. A plugin "
            "that serves there and stopped an earlier gRPC server") in str(failed.value)
    # an absolute endpoint, joined under the directory: no plugin serves there, the note stops at the path
    obs["registrations"][0].update(in_directory=False,
                                   socket_missing="/run/device-plugins/run/device-plugins/widget.sock")
    with pytest.raises(CheckFailed) as failed:
        checks.judge_register(ctx, obs)
    assert ("no socket was at /run/device-plugins/run/device-plugins/widget.sock)" in str(failed.value)
            and "earlier gRPC server" not in str(failed.value)), str(failed.value)


def test_register_fails_a_plugin_that_no_longer_answers_though_its_stream_is_open(lab):
    # a plugin whose main returned: its grpc server stopped, the thread serving ListAndWatch keeps
    # the process alive and the stream open (Session.serving probes the socket at the watch's end)
    the_lab, env = lab
    checks = the_lab._load("checks.py")
    for exercise in ("register", "health"):
        ctx = CheckContext(env, the_lab.exercise(exercise))
        obs = registered("example.com/widget")
        obs["serving"] = "rpc error: code = Unavailable desc = failed to connect to all addresses"
        with pytest.raises(CheckFailed) as failed:
            checks.judge_register(ctx, obs)
        assert "no longer answers on its socket" in str(failed.value) and "failed to connect" in str(failed.value)
    assert checks.judge_register(CheckContext(env, the_lab.exercise("register")), registered("example.com/widget")).passed


def test_a_second_register_still_in_flight_is_a_second_registration(lab):
    """Under load the window can end while kubelet still dials back a plugin's second Register
    call: that call was made, and the feedback names the repeated registration, not a pending one."""
    the_lab, env = lab
    checks = the_lab._load("checks.py")
    ctx = CheckContext(env, the_lab.exercise("register"))
    seen = registered("example.com/widget")
    seen["registrations"].append({"resource": "example.com/widget", "version": "v1beta1",
                                  "error": checks.PENDING, "stream": None})
    with pytest.raises(CheckFailed) as failed:
        checks.judge_register(ctx, seen)
    assert "registered 2 times with the same kubelet" in str(failed.value)
    alone = registered()
    alone["registrations"] = [{"resource": "example.com/widget", "version": "v1beta1", "error": checks.PENDING,
                               "stream": None}]
    with pytest.raises(CheckFailed) as failed:
        checks.judge_register(ctx, alone)
    assert "has not returned" in str(failed.value)


def test_a_container_env_the_allocate_answer_sets_counts_even_labkits_own():
    from labkit.devices.container import added_envs
    process = {"PATH": "/usr/bin", "LABKIT_OWNER": "x", "WIDGET_VISIBLE_DEVICES": "widget-0"}
    assert added_envs(process, {"envs": {"WIDGET_VISIBLE_DEVICES": "widget-0"}}) == {"WIDGET_VISIBLE_DEVICES": "widget-0"}
    assert added_envs(process, {"envs": {"WIDGET_VISIBLE_DEVICES": "widget-0", "PATH": "/usr/bin"}}) == \
        {"WIDGET_VISIBLE_DEVICES": "widget-0", "PATH": "/usr/bin"}


def _allocated(env, pod_devices: dict, specs_of) -> dict:
    """An observation of allocate: each Pod admitted with its widgets, its container started with
    WIDGET_VISIBLE_DEVICES and the driver read-only, and the DeviceSpecs `specs_of(devices)` of the
    Allocate answer, whose nodes the runtime binds in the container (so they show among its mounts)."""
    driver = env.dir / "widget-driver"
    driver.mkdir(parents=True, exist_ok=True)
    (driver / "VERSION").write_text("widget-driver 1.0\n")
    files = {"VERSION": "widget-driver 1.0"}
    source = [driver.stat().st_dev, driver.stat().st_ino]
    obs = registered("example.com/widget")
    obs["allocates"] = [{"devices": list(ids), "envs": {"WIDGET_VISIBLE_DEVICES": ",".join(ids)}}
                        for ids in (("widget-3", "widget-1"), ("widget-2",))]
    obs["pods"] = {}
    for pod, devices in pod_devices.items():
        specs = specs_of(devices)
        mounts = {"/var/lib/widget": {"read_only": True, "files": files, "source": source}}
        mounts.update({d["container_path"]: {"read_only": False, "files": None, "source": None} for d in specs})
        obs["pods"][pod] = {"admitted": True, "devices": devices, "container": {
            "started": True, "envs": {"WIDGET_VISIBLE_DEVICES": ",".join(devices)}, "mounts": mounts,
            "options": {"envs": {}, "mounts": [], "devices": specs}}}
    return obs


def test_allocate_takes_device_nodes_of_the_containers_own_widgets_for_devices_not_mounts(lab):
    """The lab's README answers Allocate with a DeviceSpec per widget (its node under devices/): a
    device the runtime makes in the container, not a mount of the answer's. The container's own
    widgets' nodes pass; a node of a widget kubelet did not allocate to it fails, named as such."""
    the_lab, env = lab
    checks = the_lab._load("checks.py")
    ctx = CheckContext(env, the_lab.exercise("allocate"))
    pods = {"pod-a": ["widget-0", "widget-1"], "pod-b": ["widget-2", "widget-3"]}

    def nodes(ids):
        return [{"container_path": f"/dev/{d}", "host_path": str(env.dir / "devices" / d), "permissions": "rw"}
                for d in ids]
    assert checks.judge_allocate(ctx, _allocated(env, pods, lambda ids: [])).passed
    assert checks.judge_allocate(ctx, _allocated(env, pods, nodes)).passed
    with pytest.raises(CheckFailed) as failed:
        checks.judge_allocate(ctx, _allocated(env, pods, lambda ids: nodes(sorted(WIDGETS))))
    message = str(failed.value)
    assert "device nodes that are not of the widgets kubelet allocated to it" in message and "/dev/widget-2" in message


def test_allocate_judges_the_answers_to_the_checks_own_allocate_calls(lab):
    """kubelet takes a container's widgets in no fixed order: an Allocate answer that names the widgets
    in the order they were handed out is right for Pods given widget-0/1 then widget-2/3, and wrong
    for the IDs the check sends itself; the answer to those is judged before the Pods'."""
    the_lab, env = lab
    checks = the_lab._load("checks.py")
    ctx = CheckContext(env, the_lab.exercise("allocate"))
    pods = {"pod-a": ["widget-0", "widget-1"], "pod-b": ["widget-2", "widget-3"]}
    obs = _allocated(env, pods, lambda ids: [])
    assert [s["devices"] for s in obs["allocates"]] == [list(ids) for ids in checks.ALLOCATES]
    assert checks.judge_allocate(ctx, obs).passed
    obs["allocates"][0]["envs"] = {"WIDGET_VISIBLE_DEVICES": "widget-0,widget-1"}
    with pytest.raises(CheckFailed) as failed:
        checks.judge_allocate(ctx, obs)
    message = str(failed.value)
    assert "devices_ids widget-3, widget-1" in message and "not from which widgets were handed out" in message
    obs["allocates"] = obs["allocates"][:1]
    with pytest.raises(CheckFailed):
        checks.judge_allocate(ctx, obs)


def test_allocate_fails_a_relative_host_path_though_the_container_found_the_driver(lab):
    # labkit starts its containers in the lab directory, where `widget-driver` is found; kubelet
    # passes host_path to the runtime as it is, and the runtime's working directory is its own
    the_lab, env = lab
    checks = the_lab._load("checks.py")
    ctx = CheckContext(env, the_lab.exercise("allocate"))
    pods = {"pod-a": ["widget-0", "widget-1"], "pod-b": ["widget-2", "widget-3"]}
    for host_path, passes in ((str(env.dir / "widget-driver"), True), ("widget-driver", False)):
        obs = _allocated(env, pods, lambda ids: [])
        for seen in obs["pods"].values():
            seen["container"]["options"]["mounts"] = [
                {"container_path": "/var/lib/widget", "host_path": host_path, "read_only": True}]
        if passes:
            assert checks.judge_allocate(ctx, obs).passed
            continue
        with pytest.raises(CheckFailed) as failed:
            checks.judge_allocate(ctx, obs)
        assert "relative host_path: widget-driver" in str(failed.value)


def test_reset_of_checkpoint_keeps_a_changed_scenario_file(lab):
    # labkit reset device-plugins checkpoint writes scenarios/ afresh: a student's changed copy is
    # student work (named before the reset, kept first); an unchanged one is not
    the_lab, env = lab
    module = the_lab.environment_module()
    (env.dir / "scenarios").mkdir(parents=True, exist_ok=True)
    module.write_scenario(env)
    assert module.student_work(env, "checkpoint") == [] and module.keep_student_work(env, "checkpoint") == []
    case = env.dir / "scenarios" / "restart.yaml"
    case.write_text(case.read_text() + "# my note: infer ended\n")
    assert [w.split(" ")[0] for w in module.student_work(env, "checkpoint")] == ["scenarios/restart.yaml"]
    assert module.student_work(env, "register") == []
    kept = module.keep_student_work(env, "checkpoint")
    assert len(kept) == 1 and kept[0].startswith("scenarios/restart.yaml kept as ")
    assert kept[0].split(" kept as ")[1].endswith("restart.yaml")
    assert "# my note: infer ended" in Path(kept[0].split(" kept as ")[1]).read_text()
    module.reset_exercise(env, "checkpoint")
    assert module.student_work(env, "checkpoint") == []


# -- restart: the times of kubelet's restarts against plugins that keep time ---------------------------

def _play_restarts(checks, schedule, rng) -> str:
    """The restart check's timeline (checks.restart_quiet, RESTARTS, CHANGE_S, FINAL_S) against a
    plugin that never looks at kubelet.sock: it registers at 0 and then at the times `schedule`
    gives, whatever kubelet does. What the check would hold against it, or "passed"."""
    times = [t for t in schedule if t > 0]
    last, gap = 0.0, None
    for n in range(checks.RESTARTS):
        restart = last + checks.restart_quiet(gap, rng)
        if any(last < t <= restart for t in times):
            return f"registered again before restart {n + 1}"
        answer = [t for t in times if restart < t <= restart + checks.CHANGE_S]
        if not answer:
            return f"did not register again after restart {n + 1}"
        last, gap = answer[0], answer[0] - last
    if any(last < t <= last + checks.FINAL_S for t in times):
        return "registered again after the last restart"
    return "passed"


def test_a_plugin_on_any_fixed_timer_fails_the_restart_check_whatever_the_draw(lab):
    # every period P of a periodic re-registration (every P s), every single delay T (once, T s
    # after starting), with 40 draws of the restart times each: never a pass
    import random
    the_lab, _env = lab
    checks = the_lab._load("checks.py")
    for seed in range(40):
        rng = random.Random(seed)
        for tenth in range(1, 120):
            p = tenth / 10
            periodic = [p * k for k in range(1, 40)]
            assert _play_restarts(checks, periodic, rng) != "passed", (p, seed)
            assert _play_restarts(checks, [p], rng).startswith(("registered again", "did not register again after "
                                                                "restart 2", "did not register again after restart 1"))
    # a plugin that answers each restart 0.2 s after it (it watches kubelet.sock) passes every draw
    for seed in range(40):
        rng = random.Random(seed)
        last, gap = 0.0, None
        for _ in range(checks.RESTARTS):
            quiet = checks.restart_quiet(gap, rng)
            assert (checks.FIRST_QUIET_S[0] <= quiet <= checks.FIRST_QUIET_S[1] if gap is None
                    else gap + checks.QUIET_MARGIN_S[0] <= quiet <= gap + checks.QUIET_MARGIN_S[1])
            now = last + quiet + 0.2
            last, gap = now, now - last


def test_a_plugin_that_watches_kubelet_sock_and_also_keeps_a_timer_fails_whatever_the_draw(lab):
    # it answers each restart 0.05 s after it, and registers again P s after its last registration
    # whether kubelet restarted or not: for every P up to register's window (1 s), some registration
    # comes with no restart before it, before the next restart or in the watch after the last one
    import random
    the_lab, _env = lab
    checks = the_lab._load("checks.py")

    def play(p, rng) -> str:
        last, gap = 0.0, None
        for n in range(checks.RESTARTS):
            restart = last + checks.restart_quiet(gap, rng)
            if last + p <= restart:
                return f"registered again before restart {n + 1}"
            now = restart + 0.05
            last, gap = now, now - last
        return "registered again after the last restart" if p <= checks.FINAL_S else "passed"
    for seed in range(40):
        rng = random.Random(seed)
        for hundredth in range(5, 101, 5):
            assert play(hundredth / 100, rng) != "passed", (hundredth, seed)


def _restart_seen(start: int, stream: str, **more) -> dict:
    return {"registered_again": True, "listed": True, "held_after": ["widget-0", "widget-1"],
            "node": {"capacity": {"example.com/widget": 4}, "allocatable": {"example.com/widget": 4}},
            "registrations": [{"resource": "example.com/widget", "version": "v1beta1", "error": None, "stream": stream,
                               "at": 0.0, "in_directory": True, **more}]}


def test_the_restart_judge_names_the_timing_mistake(lab):
    the_lab, env = lab
    checks = the_lab._load("checks.py")
    ctx = CheckContext(env, the_lab.exercise("restart"))

    def observed(*restarts, later=("widget-2", "widget-3")):
        return {**registered("example.com/widget", stream="closed"), "held_before": ["widget-0", "widget-1"],
                "restarts": list(restarts), **({"later_pod": list(later)} if later else {})}

    assert checks.judge_restart(ctx, observed(_restart_seen(2, "closed"), _restart_seen(3, "open"))).passed
    early = _restart_seen(2, "replaced")
    early["registrations"].append({**early["registrations"][0], "stream": "closed", "at": 1.2})
    with pytest.raises(CheckFailed) as failed:
        checks.judge_restart(ctx, observed(early, later=None))
    assert "after kubelet's first restart, before its second: your plugin registered 2 times" in str(failed.value)
    assert "again 1.2 s after the first, kubelet not restarted" in str(failed.value)
    with pytest.raises(CheckFailed) as failed:
        checks.judge_restart(ctx, observed(_restart_seen(2, "closed"), {**_restart_seen(3, "open"),
                                                                          "registered_again": False,
                                                                          "registrations": []}, later=None))
    assert "after kubelet's second restart" in str(failed.value) and "misses one" in str(failed.value)
    # a Register call that reached the restarted kubelet, refused once kubelet's dial of the
    # removed socket gave up (observe_restart waits for that answer): kubelet's words, and why
    dialed = {**_restart_seen(2, None), "registered_again": False, "refused": "failed to dial device plugin: "
              "context deadline exceeded"}
    dialed["registrations"][0]["error"] = dialed["refused"]
    with pytest.raises(CheckFailed) as failed:
        checks.judge_restart(ctx, observed(dialed, later=None))
    assert failed.value.message == (
        "after kubelet's first restart (kubelet.sock made anew, your socket removed) your plugin called Register, "
        "and kubelet refused it: failed to dial device plugin: context deadline exceeded — so it did not register "
        "again: kubelet dials the socket the endpoint names, in its device-plugins directory, before it answers "
        "(plugin/v1beta1/server.go Register).")
    # nothing was at the path when kubelet gave up: the old server's late stop can take a socket
    # served anew away (grpc removes its socket file when it has finished stopping)
    gone = {**dialed, "socket_missing": "/run/device-plugins/widget.sock"}
    with pytest.raises(CheckFailed) as failed:
        checks.judge_restart(ctx, observed(gone, later=None))
    assert failed.value.message.startswith(
        "after kubelet's first restart (kubelet.sock made anew, your socket removed) your plugin called Register, "
        "and kubelet refused it: failed to dial device plugin: context deadline exceeded — so it did not register "
        "again: kubelet dials the socket the endpoint names, in its device-plugins directory, before it answers "
        "(plugin/v1beta1/server.go Register); when kubelet gave up, no socket was at /run/device-plugins/widget.sock.")
    assert "without waiting for it" in failed.value.message
    unlisted = {**_restart_seen(2, "open"), "listed": False,
                "node": {"capacity": {"example.com/widget": 0}, "allocatable": {"example.com/widget": 0}}}
    with pytest.raises(CheckFailed) as failed:
        checks.judge_restart(ctx, observed(unlisted, later=None))
    assert failed.value.message.startswith("after kubelet's first restart your plugin registered again, but kubelet got "
                                           "no device list on the ListAndWatch stream it opened then within 3 s")
    dead = observed(_restart_seen(2, "closed"), _restart_seen(3, "ended", served=0.8, end="the plugin finished"))
    with pytest.raises(CheckFailed) as failed:
        checks.judge_restart(ctx, dead)
    assert "after kubelet's second restart: your plugin stopped serving 0.8 s after registering" in str(failed.value)


def test_register_says_how_long_the_plugin_served(lab):
    the_lab, env = lab
    checks = the_lab._load("checks.py")
    ctx = CheckContext(env, the_lab.exercise("register"))
    seen = registered("example.com/widget", stream="ended")
    seen["registrations"][0].update(served=1.5, end="rpc error: code = Unavailable desc = Cancelling all calls")
    with pytest.raises(CheckFailed) as failed:
        checks.judge_register(ctx, seen)
    assert "your plugin stopped serving 1.5 s after registering" in str(failed.value)
    assert "main do after Register returns" not in str(failed.value)
    # the process ended with code 0: its main returned (before a thread served the stream)
    with pytest.raises(CheckFailed) as failed:
        checks.judge_register(ctx, {**seen, "exited": 0})
    assert "exited (code 0) — it ended normally: what does your plugin's main do after Register returns?" in str(
        failed.value)


def test_share_rules_pack_best_fit_and_allow_a_split_only_when_no_widget_has_room(lab):
    # the share exercise's rule for a preferred allocation of vcores (gpu-manager's share mode):
    # one widget when one can hold the request, the one with the fewest available; else any
    the_lab, _env = lab
    checks = the_lab._load("checks.py")
    assert len(checks.VCORES) == 16 and checks.VCORE_NUMA["widget-2-vcore-3"] == 1
    partly = checks.PARTLY      # widget-0: 2 available, widget-1: 4, widget-2: 1, widget-3: 3
    assert checks.fitting_widgets(partly, [], 3) == {"widget-1": 4, "widget-3": 3}
    assert checks.share_problem(partly, [], 3, ["widget-3-vcore-0", "widget-3-vcore-1", "widget-3-vcore-2"]) is None
    assert checks.share_problem(partly, [], 3, ["widget-1-vcore-0", "widget-1-vcore-1", "widget-1-vcore-2"])[0] == "fewest"
    assert checks.share_problem(partly, [], 2, ["widget-0-vcore-0", "widget-3-vcore-0"])[0] == "one widget"
    assert checks.share_problem(partly, ["widget-1-vcore-2"], 2, ["widget-0-vcore-0", "widget-0-vcore-1"])[0] == \
        "must_include"
    assert checks.share_problem(partly, [], 2, ["widget-2-vcore-3", "widget-2-vcore-0"])[0] == "not available"
    assert checks.share_problem(partly, [], 2, ["widget-0-vcore-0"])[0] == "allocation_size"
    # no widget holds three of these: any three available IDs are right
    few = ["widget-0-vcore-3", "widget-2-vcore-1", "widget-2-vcore-2", "widget-3-vcore-0"]
    assert checks.fitting_widgets(few, [], 3) == {}
    assert checks.share_problem(few, [], 3, ["widget-0-vcore-3", "widget-2-vcore-1", "widget-3-vcore-0"]) is None
    # must_include on two widgets: no one-widget choice either
    assert checks.fitting_widgets(sorted(checks.VCORES), ["widget-0-vcore-0", "widget-3-vcore-1"], 3) == {}


def _asked(checks, requests, answer=None, error=None, drop=0) -> list[dict]:
    seen = [{"available": list(a), "must_include": list(m), "size": n, "answer": list(a)[:n]} for a, m, n in requests]
    if answer is not None:
        seen[0]["answer"] = answer
    if error is not None:
        seen[0].pop("answer")
        seen[0]["error"] = error
    return seen[:len(seen) - drop]


def _share_registered(checks) -> dict:
    return {**registered("example.com/vcore"),
            "devices": [{"ID": d, "health": "Healthy", "numa": [n]} for d, n in checks.VCORE_NUMA.items()],
            "node": {"capacity": {"example.com/vcore": 16}, "allocatable": {"example.com/vcore": 16}}}


def test_preferred_and_share_keep_their_own_words_for_getpreferredallocation(lab):
    """preferred and share judge GetPreferredAllocation through one helper; each exercise's
    messages are its own, word for word."""
    the_lab, env = lab
    checks = the_lab._load("checks.py")
    cases = {
        "preferred": (registered("example.com/widget"), checks.REQUESTS, {
            "option": "your plugin's GetDevicePluginOptions answer does not say get_preferred_allocation_available: "
                      "kubelet never calls GetPreferredAllocation then",
            "error": "GetPreferredAllocation failed for request 1 (available widget-0, widget-1, widget-2, widget-3; "
                     "must_include none; allocation_size 2): rpc error: code = Unimplemented",
            "wrong": "your answer to request 1 (available widget-0, widget-1, widget-2, widget-3; must_include none; "
                     "allocation_size 2) has 1 device ID(s); it must have allocation_size distinct ones"}),
        "share": (_share_registered(checks), checks.SHARE_REQUESTS, {
            "option": "your plugin's GetDevicePluginOptions answer does not say get_preferred_allocation_available: "
                      "kubelet never asks it which vcores to take, and puts a Pod's vcores wherever its own choice "
                      "falls",
            "error": "GetPreferredAllocation request 1 (available " + ", ".join(sorted(checks.VCORES)) +
                     "; must_include none; allocation_size 2) failed: rpc error: code = Unimplemented",
            "wrong": "your answer to GetPreferredAllocation request 1 (available " + ", ".join(sorted(checks.VCORES)) +
                     "; must_include none; allocation_size 2) has 1 device ID(s); it must have allocation_size "
                     "distinct ones"}),
    }
    for exercise, (base, requests, words) in cases.items():
        ctx = CheckContext(env, the_lab.exercise(exercise))
        judge = getattr(checks, f"judge_{exercise}")
        first = requests[0][0][0]
        for kind, seen in (("option", {"options": {}, "answers": _asked(checks, requests)}),
                           ("error", {"answers": _asked(checks, requests, error="rpc error: code = Unimplemented")}),
                           ("wrong", {"answers": _asked(checks, requests, answer=[first])}),
                           ("count", {"answers": _asked(checks, requests, drop=1)})):
            obs = {**base, "options": {"get_preferred_allocation_available": True}, **seen}
            with pytest.raises(CheckFailed) as failed:
                judge(ctx, obs)
            want = words.get(kind, "not every GetPreferredAllocation request got an answer")
            assert failed.value.message == want, (exercise, kind, failed.value.message)


def test_register_judges_the_list_kubelet_keeps_at_the_end_of_the_watch(lab):
    """Every ListAndWatch message is the whole list: a later message that leaves the widgets out
    makes kubelet forget them, and register judges the list and node as the watch ends too."""
    the_lab, env = lab
    checks = the_lab._load("checks.py")
    ctx = CheckContext(env, the_lab.exercise("register"))
    assert checks.judge_register(ctx, registered("example.com/widget")).passed
    seen = registered("example.com/widget")
    seen["last"] = {"devices": [], "node": {"capacity": {"example.com/widget": 0},
                                            "allocatable": {"example.com/widget": 0}}}
    with pytest.raises(CheckFailed) as failed:
        checks.judge_register(ctx, seen)
    assert failed.value.message.startswith("at the end of the check's window (1 s from your plugin's first device list on): kubelet's "
                                           "device list does not hold the exercise's device IDs (missing: widget-0")
    seen["last"] = {**seen["last"], "devices": registered()["devices"]}
    with pytest.raises(CheckFailed) as failed:
        checks.judge_register(ctx, seen)
    assert "at the end of the check's window" in failed.value.message and "capacity of example.com/widget is 0" in \
        failed.value.message
    # the empty message came before the check read the node: the list it emptied is named, not the node
    seen = registered("example.com/widget")
    seen["node"] = {"capacity": {"example.com/widget": 0}, "allocatable": {"example.com/widget": 0}}
    seen["last"] = {"devices": [], "node": seen["node"]}
    with pytest.raises(CheckFailed) as failed:
        checks.judge_register(ctx, seen)
    assert failed.value.message.startswith("at the end of the check's window (1 s from your plugin's first device list on): kubelet's "
                                           "device list does not hold the exercise's device IDs")
    # the other plugin exercises judge their own later lists; register's end-of-watch list is its own
    health = CheckContext(env, the_lab.exercise("health"))
    assert checks.judge_register(health, {k: v for k, v in registered("example.com/widget").items() if k != "last"}).passed


def test_a_plugin_socket_outside_kubelets_directory_is_named(lab):
    """An endpoint like ../../tmp/widget.sock: v1.34's kubelet dials it (filepath.Join cleans the
    `..`), but the exercise's plugin serves in $DEVICE_PLUGIN_DIR, which a restart empties."""
    the_lab, env = lab
    checks = the_lab._load("checks.py")
    ctx = CheckContext(env, the_lab.exercise("register"))
    seen = registered("example.com/widget")
    seen["registrations"][0]["in_directory"] = False
    with pytest.raises(CheckFailed) as failed:
        checks.judge_register(ctx, seen)
    assert failed.value.message.startswith("the endpoint your plugin registered names a socket that is not in "
                                           "$DEVICE_PLUGIN_DIR itself")


# -- how long a step waits: not at all once kubelet's list is the one the step expects ----------------

class _ListedNode:
    """What checks._settled reads of a session: kubelet's device list, and a wait that records
    whether its condition already held (Session.wait returns at once when it does)."""

    def __init__(self, devices):
        self.current = devices
        self.waits: list[tuple[float, bool]] = []

    def devices(self, resource):
        return [dict(d) for d in self.current]

    def wait(self, condition, seconds):
        held = bool(condition())
        self.waits.append((seconds, held))
        return held


def test_a_step_stops_waiting_when_kubelets_list_is_the_expected_one(lab):
    the_lab, _env = lab
    checks = the_lab._load("checks.py")
    widgets = [{"ID": f"widget-{i}", "health": "Healthy", "numa": [i // 2]} for i in range(4)]
    node = _ListedNode(widgets)
    checks._settled(node, "example.com/widget")
    assert node.waits == [(checks.SETTLE_S, True)]
    # the list a health step expects: widget-2 Unhealthy, the others Healthy
    broken = [dict(d, health="Unhealthy") if d["ID"] == "widget-2" else d for d in widgets]
    assert not checks._listed(node, "example.com/widget", sick=["widget-2"])
    node.current = broken
    assert checks._listed(node, "example.com/widget", sick=["widget-2"])
    assert not checks._listed(node, "example.com/widget")
    # anything else than exactly the expected list waits SETTLE_S for the messages that may follow
    for wrong in (widgets[:3], widgets + [{"ID": "widget-4", "health": "Healthy", "numa": [1]}],
                  [dict(d, numa=[]) for d in widgets], [dict(d, health="healthy") for d in widgets],
                  [dict(d, numa=[0]) for d in widgets]):
        node = _ListedNode(wrong)
        checks._settled(node, "example.com/widget")
        assert node.waits == [(checks.SETTLE_S, False)], wrong
    # share's vcores are judged against their own list
    vcores = [{"ID": v, "health": "Healthy", "numa": [n]} for v, n in checks.VCORE_NUMA.items()]
    assert checks._listed(_ListedNode(vcores), "example.com/vcore", checks.VCORE_NUMA)
    assert not checks._listed(_ListedNode(vcores[1:]), "example.com/vcore", checks.VCORE_NUMA)


def test_a_host_path_that_is_not_there_fails_the_container_as_the_runtime_does(lab, tmp_path):
    """A Mount's host_path that does not exist: the container runtime refuses the container
    (runc's `error mounting ... stat ...: no such file or directory`), with no traceback of labkit's,
    and the check says so instead of pointing at the logs."""
    from labkit.devices.container import missing_source
    there = tmp_path / "widget-driver"
    there.mkdir()
    assert missing_source({"mounts": [{"container_path": "/var/lib/widget", "host_path": str(there)}]}) is None
    refused = missing_source({"mounts": [{"container_path": "/var/lib/widget", "host_path": "/tmp/no-widget-driver"}]})
    assert refused == ('error mounting "/tmp/no-widget-driver" to rootfs at "/var/lib/widget": '
                       "stat /tmp/no-widget-driver: no such file or directory")
    the_lab, env = lab
    checks = the_lab._load("checks.py")
    ctx = CheckContext(env, the_lab.exercise("allocate"))
    obs = _allocated(env, {"pod-a": ["widget-0", "widget-1"], "pod-b": ["widget-2", "widget-3"]}, lambda ids: [])
    obs["pods"]["pod-a"]["container"] = {"started": False, "envs": {}, "mounts": {}, "options": {}, "error": refused}
    with pytest.raises(CheckFailed) as failed:
        checks.judge_allocate(ctx, obs)
    assert "container runtime refused it" in str(failed.value) and "/tmp/no-widget-driver" in str(failed.value)
