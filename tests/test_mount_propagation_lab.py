"""The mount-propagation lab end to end: every check fails on a fresh lab and passes after its
reference solution, wrong fixes fail, and the `labkit mounts` tools work on the live node."""

import json
import os
import re
import textwrap

import pytest
import yaml

from labkit import procs, runner
from labkit.apiserver.podvalidation import POD_UPDATE_FORBIDDEN
from labkit.exercises import answer_path, wait_for
from labkit.labs import get_lab
from labkit.mounts import kernel, mountinfo, observe
from labkit.mounts.node import NODE, Node
from labkit.mounts.pods import load_pods
from labkit.state import LabEnv, LabState
from support import labkit

LAB = "mount-propagation"


def lab_env():
    lab = get_lab(LAB)
    return lab, LabEnv(lab, LabState(LAB))


@pytest.fixture
def running_lab():
    """`labkit run` on this test's own labkit instance; cleaned up even when the test fails."""
    labkit("run", LAB, check=0)
    try:
        yield lab_env()
    finally:
        labkit("cleanup", "--all", check=0)


def statuses(lab, exercise=None):
    return {r.exercise: r for r in runner.check(lab, exercise)}


def test_every_check_fails_on_a_fresh_lab_and_passes_after_its_solution(running_lab):
    lab, env = running_lab
    fresh = statuses(lab)
    assert {e: r.status for e, r in fresh.items()} == {ex.id: "fail" for ex in lab.exercises}, \
        {e: r.message for e, r in fresh.items()}
    for ex in lab.exercises:
        runner.solve(lab, ex.id)
        result = statuses(lab, ex.id)[ex.id]
        assert result.status == "pass", f"{ex.id}: {result.message} {result.observed}"
    report = json.loads(labkit("check", LAB, "-o", "json", check=0).stdout)
    assert report["passed"] == report["total"] == len(lab.exercises)


def test_the_node_is_found_by_its_recorded_pid_and_start_time_without_a_pass_over_every_process(
        running_lab, monkeypatch):
    lab, env = running_lab
    node = Node(env)
    record = json.loads((node.dir / "node.json").read_text())
    assert record["pid"] in procs.find(procs.owner_token(env, NODE))       # the node's own process
    assert procs.same_process(record["pid"], record["start"])
    assert not procs.same_process(record["pid"], record["start"] + 1)     # another process with its pid

    def no_scan(*args, **kwargs):
        raise AssertionError("a pass over every process's environment")
    monkeypatch.setattr(procs, "find", no_scan)
    assert node.pid == record["pid"] and lab.environment_module().is_up(env)
    monkeypatch.undo()
    procs.kill([record["pid"]])
    assert node.pid is None and not lab.environment_module().is_up(env)


def test_wrong_fixes_fail_with_a_reason(running_lab):
    lab, env = running_lab
    node = Node(env)
    # (a) a plausible but wrong matrix: HostToContainer sending its own mount to the host
    path = answer_path(LAB, "predict-e2e-matrix")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"host": ["master", "slave", "host"], "master": ["master", "host"],
                                    "slave": ["master", "slave", "host"], "private": ["private"], "default": ["default"]}))
    result = statuses(lab, "predict-e2e-matrix")["predict-e2e-matrix"]
    assert result.status == "fail" and "prediction is not right" in result.message
    # (b) Bidirectional (and privileged) lets the node's mounts in, and the Pod's own out
    pods = env.dir / "pods"
    reader = yaml.safe_load((pods / "reader.yaml").read_text())
    reader["spec"]["containers"][0]["volumeMounts"][0]["mountPropagation"] = "Bidirectional"
    reader["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    (pods / "reader.yaml").write_text(yaml.safe_dump(reader))
    node.delete("reader")
    node.apply_all(load_pods(pods / "reader.yaml"))
    result = statuses(lab, "node-mounts-reach-reader")["node-mounts-reach-reader"]
    assert result.status == "fail" and "reached the node" in result.message
    # (d) changing the Pod instead of the node
    node.delete("logger")
    logger = yaml.safe_load((pods / "logger.yaml").read_text())
    logger["spec"]["containers"][0]["volumeMounts"][0]["mountPropagation"] = "None"
    (pods / "logger.yaml").write_text(yaml.safe_dump(logger))
    node.apply_all(load_pods(pods / "logger.yaml"))
    result = statuses(lab, "private-host-path")["private-host-path"]
    assert result.status == "fail" and "fix the node, not the Pod" in result.message
    # (f) peer groups written as the wrong relation
    path = answer_path(LAB, "peer-groups")
    truth = mountinfo.visible_at(mountinfo.read(node.party("master").pid), "/mnt/test").tags
    path.write_text(yaml.safe_dump({"node": truth, "master": truth, "slave": truth, "private": "private", "default": "private"}))
    result = statuses(lab, "peer-groups")["peer-groups"]
    assert result.status == "fail" and "findings are not right" in result.message and "2 of" not in result.message
    # (e) throwing away /var/lib/kubelet's own mount removes the leak, and too much
    node.umount(node.require_pid(), "/var/lib/kubelet", lazy=True)
    result = statuses(lab, "leaked-mount")["leaked-mount"]
    assert result.status == "fail" and "/var/lib/kubelet's own shared mount" in result.message
    # (g) peer groups read from a node an experiment changed (/var/lib/kubelet gone): not the lab asked about
    path.write_text(yaml.safe_dump({"node": "private", "master": truth, "slave": f"master:{truth.split(':')[1]}",
                                    "private": "private", "default": "private"}))
    result = statuses(lab, "peer-groups")["peer-groups"]
    assert result.status == "fail" and "no longer the mount the lab built" in result.message


def test_capabilities_listed_under_privileged_change_nothing_and_pass(running_lab):
    """A privileged container gets every capability whatever securityContext.capabilities lists:
    the CSI plugin made privileged with CAP_SYS_ADMIN added (or every capability dropped) runs
    with the same capabilities as with privileged alone, publishes its mounts, and passes."""
    lab, env = running_lab
    node = Node(env)
    path = env.dir / "pods" / "csi-node.yaml"
    shipped = yaml.safe_load(path.read_text())
    for capabilities in ({"add": ["SYS_ADMIN"]}, {"drop": ["ALL"]}):
        pod = yaml.safe_load(yaml.safe_dump(shipped))
        pod["spec"]["containers"][0]["securityContext"] = {"privileged": True, "capabilities": capabilities}
        path.write_text(yaml.safe_dump(pod, sort_keys=False))
        if node.pod("csi-node"):
            node.delete("csi-node")
        node.apply_all(load_pods(path))
        assert kernel.status_mask(node.party("csi-node").pid) == kernel.status_mask("self"), capabilities
        result = statuses(lab, "csi-plugin-publishes")["csi-plugin-publishes"]
        assert result.status == "pass", (capabilities, result.message)


def test_mounts_tools_on_the_live_node(tmp_path, running_lab):
    lab, env = running_lab
    pods = env.dir / "pods"
    refused = labkit("mounts", "apply", "-f", str(pods / "csi-node.yaml"), check=1)
    assert ('Pod "csi-node" is invalid: spec.containers[0].volumeMounts.mountPropagation: Forbidden: '
            "Bidirectional mount propagation is available only to privileged containers") in refused.stderr
    waiting = labkit("mounts", "apply", "-f", str(pods / "logger.yaml"), check=0)
    assert re.search(r'logger: CreateContainerError: failed to generate container "[0-9a-f]{64}" spec: failed to generate '
                     r'spec: path "/srv/data" is mounted on "/" but it is not a shared or slave mount\n', waiting.stdout)
    states = {f"{r['pod']}/{r['container']}": r["state"]["state"]
              for r in json.loads(labkit("mounts", "get", "-o", "json", check=0).stdout)}
    assert states == {"master/cntr": "running", "slave/cntr": "running", "private/cntr": "running",
                      "default/cntr": "running", "reader/reader": "running", "watcher/watcher": "running",
                      "logger/logger": "waiting", "publisher/publisher": "terminated"}
    # a command inside a container runs in its root, with its mounts
    out = labkit("mounts", "exec", "master", "--", "sh", "-c",
                 "mkdir -p /mnt/test/mine && mount -t tmpfs mine /mnt/test/mine && cat /proc/self/mountinfo", check=0)
    inside = {m.mountpoint: m for m in mountinfo.parse(out.stdout)}
    assert inside["/mnt/test/mine"].source == "mine" and "/var/lib/kubelet" not in inside
    # from now on any command in the lab can show the e2e experiment's outcome: not before the prediction
    refused = labkit("mounts", "exec", "node", "--", "findmnt", "-n", "-o", "SOURCE", "/var/lib/kubelet/e2e/mine", check=2)
    assert refused.stdout == "" and "predict-e2e-matrix" in refused.stderr and "node:/var/lib/kubelet/e2e/mine" not in refused.stderr
    assert labkit("shell", "mount-propagation", "private", "--", "true", check=2).stdout == ""
    # nothing of the e2e Pods' answers before the prediction is written and peer-groups has passed
    withheld = labkit("mounts", "matrix", "-o", "json", check=0)
    table = json.loads(withheld.stdout)
    assert "mine" not in table["/var/lib/kubelet/e2e"]["columns"] and "e2e/mine" not in table["/var/lib/kubelet"]["columns"]
    assert {row["tags"] for row in table["/var/lib/kubelet/e2e"]["rows"].values()} == {"(withheld)"}
    assert table["/var/lib/kubelet"]["rows"]["node"]["tags"] == "(withheld)"
    assert "predict-e2e-matrix" in withheld.stderr and "peer-groups" in withheld.stderr
    assert "master:/mnt/test" not in labkit("mounts", "graph", check=0).stdout
    answer = answer_path(LAB, "predict-e2e-matrix")
    answer.parent.mkdir(parents=True, exist_ok=True)
    answer.write_text(yaml.safe_dump({p: [] for p in ("host", "master", "slave", "private", "default")}))
    assert "kept" in labkit("mounts", "matrix", check=0).stderr              # kept at the first look, as play keeps it
    on_node = labkit("mounts", "exec", "node", "--", "findmnt", "-n", "-o", "SOURCE", "/var/lib/kubelet/e2e/mine", check=0)
    assert on_node.stdout.strip() == "mine"
    runner.solve(lab, "peer-groups")
    assert statuses(lab, "peer-groups")["peer-groups"].status == "pass"
    table = json.loads(labkit("mounts", "matrix", "-o", "json", check=0).stdout)["/var/lib/kubelet/e2e"]
    sees = {party: "mine" in row["sees"] for party, row in table["rows"].items()}
    assert sees == {"node": True, "master": True, "slave": True, "private": False, "default": False}
    assert table["rows"]["slave"]["tags"] == "master:" + table["rows"]["node"]["tags"].split(":")[1]
    assert json.loads(labkit("mounts", "matrix", "-o", "json", check=0).stdout)[
        "/var/lib/kubelet/shared"]["rows"]["reader"]["tags"] == ""       # None: private, shown once peer-groups passed
    text = labkit("mounts", "matrix", check=0).stdout
    assert "hostPath /var/lib/kubelet/e2e" in text and "mine" in text
    graph = labkit("mounts", "graph", check=0).stdout
    group = table["rows"]["node"]["tags"].split(":")[1]
    assert f"shared:{group}  members: node:/var/lib/kubelet, master:/mnt/test" in graph
    assert f"master:{group}  slaves:  slave:/mnt/test, watcher:/var/lib/kubelet" in graph
    svg = tmp_path / "g.svg"
    labkit("mounts", "graph", "-o", "svg", "--output-file", str(svg), check=0)
    assert svg.read_text().lstrip().startswith("<?xml") and f"peer group {group}" in svg.read_text()
    g = observe.graph(Node(env))
    assert observe.render_graph_image(g, "png").startswith(b"\x89PNG")
    assert f"g{group} -> " in observe.render_graph_dot(g)
    # a running Pod's volume mounts are immutable; delete and apply again works
    reader = yaml.safe_load((pods / "reader.yaml").read_text())
    reader["spec"]["containers"][0]["volumeMounts"][0]["mountPropagation"] = "HostToContainer"
    (pods / "reader.yaml").write_text(yaml.safe_dump(reader))
    changed = labkit("mounts", "apply", "-f", str(pods / "reader.yaml"), check=1)
    # kubectl apply's words for its one refusal (labkit/kubectlerrors.py)
    assert changed.stderr == f'The Pod "reader" is invalid: spec: Forbidden: {POD_UPDATE_FORBIDDEN}\n'
    labkit("mounts", "delete", "reader", check=0)
    assert "pod/reader created" in labkit("mounts", "apply", "-f", str(pods / "reader.yaml"), check=0).stdout
    assert "not found" in labkit("mounts", "delete", "nothing", check=1).stderr
    missing = tmp_path / "missing.yaml"
    missing.write_text(yaml.safe_dump({"metadata": {"name": "strict"}, "spec": {
        "volumes": [{"name": "v", "hostPath": {"path": "/srv/nothing", "type": "Directory"}}],
        "containers": [{"name": "c", "volumeMounts": [{"name": "v", "mountPath": "/v"}]}]}}))
    assert ('MountVolume.SetUp failed for volume "v" : hostPath type check failed: /srv/nothing is not a directory'
            in labkit("mounts", "apply", "-f", str(missing), check=0).stdout)
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: c, volumeMounts: [{name: v}]}]}\n")
    assert labkit("mounts", "apply", "-f", str(bad), check=2).stderr.strip() == \
        f"labkit: {bad}: spec.containers[0].volumeMounts[0].mountPath: expected an absolute path, got nothing"
    labkit("cleanup", LAB, check=0)
    assert "not running" in labkit("mounts", "get", check=2).stderr


DEFAULT_CAPS = 0x00000000a80425fb      # containerd's defaultUnixCaps: no CAP_SYS_ADMIN


def test_containers_have_the_runtimes_capabilities_and_node_paths(running_lab):
    lab, env = running_lab
    node = Node(env)
    reader, master = node.party("reader"), node.party("master")
    # what the kernel says of the container's process (its "init") and of a process run with exec
    assert {f: kernel.status_mask(reader.pid, f) for f in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")} == \
        {"CapInh": 0, "CapPrm": DEFAULT_CAPS, "CapEff": DEFAULT_CAPS, "CapBnd": DEFAULT_CAPS, "CapAmb": 0}
    assert kernel.status_mask(master.pid) == kernel.status_mask("self")          # privileged: all of them
    exec_caps = labkit("mounts", "exec", "reader", "--", "grep", "^Cap", "/proc/self/status", check=0).stdout
    assert "CapEff:\t00000000a80425fb" in exec_caps and "CapBnd:\t00000000a80425fb" in exec_caps
    # a real mount(2) by a process of the container fails with EPERM, and nothing is mounted
    with pytest.raises(PermissionError):
        kernel.in_namespace(reader.pid, kernel.mount, "x", "/data", "tmpfs", capabilities=reader.capabilities)
    refused = labkit("mounts", "exec", "reader", "--", "mount", "-t", "tmpfs", "x", "/data")
    assert refused.returncode != 0 and "permission denied" in refused.stderr
    assert mountinfo.submounts(mountinfo.read(reader.pid), "/data") == []
    # mountinfo shows node paths, as on a real node: nothing of the lab's state directory
    for party in (node.party("node"), reader, master, node.party("watcher")):
        text = open(f"/proc/{party.pid}/mountinfo").read()
        assert str(env.dir) not in text and "/labkit" not in text, (party.name, text)
    assert mountinfo.visible_at(mountinfo.read(reader.pid), "/data").root == "/var/lib/kubelet/shared"
    assert mountinfo.visible_at(mountinfo.read(reader.pid), "/").root == "/"
    assert mountinfo.visible_at(node.mounts(), "/var/lib/kubelet").root == "/var/lib/kubelet"
    # a dead container has no process to exec in
    dead = labkit("mounts", "exec", "publisher", "--", "true", check=2)
    assert "container publisher of Pod publisher has exited (Error (exit code 137))" in dead.stderr


def test_a_container_command_runs_inside_and_its_exit_ends_the_container(tmp_path, running_lab):
    lab, env = running_lab
    pod = tmp_path / "job.yaml"
    pod.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "job"}, "spec": {
        "volumes": [{"name": "v", "hostPath": {"path": "/var/lib/kubelet/job"}}],
        "containers": [{"name": "c", "command": ["sh", "-c", "cat /proc/self/mountinfo > /out/seen"],
                        "volumeMounts": [{"name": "v", "mountPath": "/out"}]}]}}))
    labkit("mounts", "apply", "-f", str(pod), check=0)
    node = Node(env)
    assert wait_for(lambda: node.container_state("job", "c")["state"] == "terminated", timeout=10)
    seen = kernel.in_namespace(node.require_pid(), _read, "/var/lib/kubelet/job/seen")
    inside = [m.mountpoint for m in mountinfo.parse(seen)]
    assert inside[0] == "/" and "/out" in inside and not any(p.startswith("/var/lib/kubelet") for p in inside)
    assert "job" not in {p.name for p in node.parties()}


def _read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


# -- the students' work survives resets ---------------------------------------------------------------


def test_a_reset_never_deletes_or_overwrites_the_students_pod_files(running_lab):
    lab, env = running_lab
    pods = env.dir / "pods"
    shipped = {name: (lab.directory / "pods" / f"{name}.yaml").read_text() for name in ("reader", "csi-node")}
    edited = shipped["reader"].replace("mountPropagation: None", "mountPropagation: HostToContainer")
    (pods / "reader.yaml").write_text(edited)
    (pods / "csi-node.yaml").write_text(shipped["csi-node"] + "# mine\n")
    (pods / "mine.yaml").write_text("# a file of my own\n")
    inode = os.stat(pods).st_ino
    held = os.open(pods, os.O_RDONLY)      # a shell whose working directory is pods/
    try:
        refused = labkit("reset", LAB, check=2)      # not a terminal: it lists what it would revert and stops
        assert f"your edits to {pods / 'reader.yaml'}" in refused.stderr and f"{pods / 'csi-node.yaml'}" in refused.stderr
        assert "--yes" in refused.stderr and (pods / "reader.yaml").read_text() == edited
        done = labkit("reset", LAB, "--yes", check=0)
        assert f"your {pods / 'reader.yaml'} is kept as {pods / 'reader.yaml.yours'}" in done.stderr
        assert sorted(os.listdir(held)) == ["csi-node.yaml", "csi-node.yaml.yours", "e2e.yaml", "logger.yaml", "mine.yaml",
                                            "publisher.yaml", "reader.yaml", "reader.yaml.yours", "watcher.yaml"]
        assert os.stat(pods).st_ino == inode
        assert (pods / "reader.yaml.yours").read_text() == edited and (pods / "reader.yaml").read_text() == shipped["reader"]
        assert (pods / "csi-node.yaml.yours").read_text() == shipped["csi-node"] + "# mine\n"
        assert (pods / "mine.yaml").read_text() == "# a file of my own\n"
        # one exercise: its file only, and a second edit is kept beside the first one
        (pods / "reader.yaml").write_text(edited + "# again\n")
        (pods / "logger.yaml").write_text("# logger, edited\n")
        assert "reader.yaml" in " ".join(runner.work_at_risk(lab, "node-mounts-reach-reader"))
        labkit("reset", LAB, "node-mounts-reach-reader", "--yes", check=0)
        assert (pods / "reader.yaml.yours.1").read_text() == edited + "# again\n"
        assert (pods / "logger.yaml").read_text() == "# logger, edited\n"
        # the same edit reset twice is kept once
        (pods / "reader.yaml").write_text(edited)
        labkit("reset", LAB, "node-mounts-reach-reader", "--yes", check=0)
        assert sorted(p.name for p in pods.glob("reader.yaml*")) == ["reader.yaml", "reader.yaml.yours", "reader.yaml.yours.1"]
    finally:
        os.close(held)
    # `labkit cleanup` removes the lab, not the students' files
    labkit("cleanup", LAB, check=0)
    assert (pods / "mine.yaml").exists() and (pods / "reader.yaml.yours").exists()


def test_work_at_risk_names_the_live_work_of_each_exercise(running_lab):
    lab, env = running_lab
    assert runner.work_at_risk(lab) == []
    for exercise in ("node-mounts-reach-reader", "csi-plugin-publishes", "private-host-path", "leaked-mount"):
        runner.solve(lab, exercise)
    risk = {ex.id: " ".join(runner.work_at_risk(lab, ex.id)) for ex in lab.exercises}
    assert "the Pod reader you changed" in risk["node-mounts-reach-reader"]
    assert "the Pod csi-node you created" in risk["csi-plugin-publishes"]
    assert "/srv/data" in risk["private-host-path"] and "your clean-up of the leaked" in risk["leaked-mount"]
    assert risk["predict-e2e-matrix"] == risk["peer-groups"] == ""
    whole = " ".join(runner.work_at_risk(lab))
    assert all(part in whole for part in ("reader", "csi-node", "/srv/data", "leaked"))
    for exercise in ("node-mounts-reach-reader", "csi-plugin-publishes", "private-host-path", "leaked-mount"):
        runner.reset(lab, exercise_id=exercise)
        assert statuses(lab, exercise)[exercise].status == "fail"
        assert runner.work_at_risk(lab, exercise) == [], exercise
    # the node's / made shared (an over-broad fix of private-host-path): the reset makes it private
    # again, and says so first
    node = Node(env)
    node.run(node.require_pid(), kernel.change_propagation, "/", "shared")
    assert "the propagation you gave the node's mounts: / (shared)" in " ".join(
        runner.work_at_risk(lab, "private-host-path"))
    runner.reset(lab, exercise_id="private-host-path")
    assert runner.work_at_risk(lab, "private-host-path") == []


def test_a_reset_repairs_the_nodes_kubelet_mount_and_its_pods(running_lab):
    lab, env = running_lab
    node = Node(env)
    node.umount(node.require_pid(), "/var/lib/kubelet", lazy=True)
    assert "the node's /var/lib/kubelet as you left it" in " ".join(runner.work_at_risk(lab, "leaked-mount"))
    runner.reset(lab, exercise_id="leaked-mount")
    runner.solve(lab, "leaked-mount")
    assert statuses(lab, "leaked-mount")["leaked-mount"].status == "pass"
    runner.solve(lab, "peer-groups")
    assert statuses(lab, "peer-groups")["peer-groups"].status == "pass"


def test_a_kubelet_mount_cut_out_of_its_peer_group_fails_and_a_reset_puts_the_pods_back_in_it(running_lab):
    lab, env = running_lab
    node = Node(env)
    pid = node.require_pid()
    module = lab.environment_module()
    node.umount(pid, "/var/lib/kubelet/plugins/publisher/staging")
    node.run(pid, kernel.change_propagation, "/var/lib/kubelet", "private")
    node.run(pid, kernel.change_propagation, "/var/lib/kubelet", "shared")
    assert module.kubelet_is_shared(node)             # still shared: the flag alone would pass it
    result = statuses(lab, "leaked-mount")["leaked-mount"]
    assert result.status == "fail" and "peer group" in result.message and "watcher" in result.message, result.message
    assert "the node's /var/lib/kubelet as you left it" in " ".join(runner.work_at_risk(lab, "leaked-mount"))
    runner.reset(lab, exercise_id="leaked-mount")
    group = mountinfo.visible_at(node.mounts(), "/var/lib/kubelet").shared
    watcher = [m for m in mountinfo.read(node.party("watcher").pid) if m.mountpoint == "/var/lib/kubelet"]
    assert [m.master for m in watcher] == [group]
    staged = [name for name in ("node", "watcher") if any(m.source == module.LEAK_SOURCE
                                                          for m in mountinfo.read(node.party(name).pid))]
    assert staged == ["node", "watcher"]             # the leak made again reaches the node and its slaves
    runner.solve(lab, "leaked-mount")
    assert statuses(lab, "leaked-mount")["leaked-mount"].status == "pass"


def test_the_leak_is_judged_by_the_mount_itself_not_by_its_source_name(running_lab):
    """A tmpfs of the student's own that happens to be called publisher-staging is not the leak
    (it has a device of its own); a bind copy of the leak is, wherever it is. The reset leaks a
    new tmpfs, and the lab records that one."""
    lab, env = running_lab
    node = Node(env)
    pid = node.require_pid()
    module = lab.environment_module()
    leaked = module.leak_identity(module.built(env))
    assert len(leaked) == 1 and all(source == module.LEAK_SOURCE for _device, source in leaked)
    # the student's tmpfs is mounted while the leak still holds its device: the kernel hands out the
    # lowest free anonymous device, so one mounted after the leak went could get the leak's number
    # again (machine-wide, whatever else runs), and would then be the leak's (device, source) twin
    node.mount_tmpfs(pid, "/tmp/try", module.LEAK_SOURCE, "mine")
    node.umount(pid, "/var/lib/kubelet/plugins/publisher/staging")
    result = statuses(lab, "leaked-mount")["leaked-mount"]
    assert result.status == "pass", result.message
    runner.reset(lab, exercise_id="leaked-mount")
    # the new leak's record names the staging mount there now; its device may be the first leak's
    # again (the kernel hands out the lowest free anonymous device, and the reset freed it)
    again = module.leak_identity(module.built(env))
    assert len(again) == 1 and again == {
        (m.device, m.source) for m in node.mounts() if m.mountpoint == "/var/lib/kubelet/plugins/publisher/staging"}
    runner.apply_mistake(lab, "leaked-mount", "keeps_a_copy_then_unmounts_it")
    result = statuses(lab, "leaked-mount")["leaked-mount"]
    assert result.status == "fail" and "node:/tmp/keep" in str(result.observed) and "node:/tmp/try" not in str(
        result.observed), (result.message, result.observed)


def test_a_copy_of_the_leak_kept_through_a_reset_is_still_the_leak(running_lab):
    """The dead publisher's filesystem bound to /var/lib/kubelet/keep, then the exercise reset (a
    new staging mount leaks) and the new one unmounted: the first leak is still on the node and in
    watcher, and the check says where (it passed before: the reset had forgotten the first leak)."""
    lab, env = running_lab
    runner.apply_mistake(lab, "leaked-mount", "keeps_a_copy_resets_then_unmounts")
    result = statuses(lab, "leaked-mount")["leaked-mount"]
    assert result.status == "fail" and "still there" in result.message, result.message
    assert {"node:/var/lib/kubelet/keep", "watcher:/var/lib/kubelet/keep"} <= set(
        str(result.observed).removeprefix("live: ").split(", ")), result.observed
    node = Node(env)
    node.umount(node.require_pid(), "/var/lib/kubelet/keep")
    assert statuses(lab, "leaked-mount")["leaked-mount"].status == "pass"


def test_a_prediction_kept_by_mounts_exec_says_so(running_lab):
    """A command of `labkit mounts exec` that shows the live experiment keeps the prediction under its
    own name (it was recorded, and the reset's message said, "labkit shell")."""
    from labkit import predictions

    lab, env = running_lab
    path = answer_path(LAB, "predict-e2e-matrix")
    path.unlink(missing_ok=True)
    labkit("mounts", "exec", "master", "--", "mkdir", "-p", "/mnt/test/mine", check=0)
    labkit("mounts", "exec", "master", "--", "mount", "-t", "tmpfs", "mine", "/mnt/test/mine", check=0)
    assert "Write your prediction" in labkit("mounts", "exec", "slave", "--", "true", check=2).stderr
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{party}: []\n" for party in ("host", "master", "slave", "private", "default")))
    labkit("mounts", "exec", "slave", "--", "true", check=0)
    assert predictions.kept(LAB, "predict-e2e-matrix").tool == "labkit mounts exec"


FIELD = re.compile(r"\b(?:shared|master):\d+|volume mount private|is private")


def test_other_checks_keep_the_fields_peer_groups_asks_for_until_it_passes(running_lab):
    """The reader's and the CSI plugin's checks name their volume mount's propagation fields
    (master:N of the node's /var/lib/kubelet group, shared:N, private for None): what peer-groups
    asks to read from mountinfo. Until it passes they say where to read them instead, as `labkit
    mounts matrix` and `graph` do; afterwards they show them."""
    lab, env = running_lab

    def said(exercise):
        result = statuses(lab, exercise)[exercise]
        return result, f"{result.message} {result.expected} {result.observed}"

    for exercise, apply in (("node-mounts-reach-reader", None),          # None: private, and not there
                            ("node-mounts-reach-reader", "bidirectional"),
                            ("csi-plugin-publishes", "host_to_container_instead"),
                            ("node-mounts-reach-reader", "solve")):
        if apply == "solve":
            runner.reset(lab, exercise_id=exercise)
            runner.solve(lab, exercise)
        elif apply:
            runner.apply_mistake(lab, exercise, apply)
        result, text = said(exercise)
        assert result.status == ("pass" if apply == "solve" else "fail"), text
        assert not FIELD.search(text) and "withheld until peer-groups passes" in text, text
    runner.solve(lab, "peer-groups")
    assert statuses(lab, "peer-groups")["peer-groups"].status == "pass"
    result, text = said("node-mounts-reach-reader")
    assert result.status == "pass" and re.search(r"\bmaster:\d+", text), text


# -- kubectl's strict field validation ------------------------------------------------------------------


def test_apply_refuses_unknown_and_duplicate_fields_in_kubectls_words(tmp_path, running_lab):
    lab, env = running_lab
    bad = tmp_path / "bad.yaml"
    bad.write_text(textwrap.dedent("""\
        apiVersion: v1
        kind: Pod
        metadata: {name: typo}
        spec:
          privileged: true
          containers:
            - name: c
              volumeMounts:
                - {name: v, mountPath: /v, mountPropagaton: HostToContainer}
          volumes:
            - {name: v, hostPath: {path: /var/lib/kubelet/typo}}
        """))
    refused = labkit("mounts", "apply", "-f", str(bad), check=1)
    assert refused.stderr.strip() == (
        f'Error from server (BadRequest): error when creating "{bad}": Pod in version "v1" cannot be handled as a Pod: '
        'strict decoding error: unknown field "spec.privileged", '
        'unknown field "spec.containers[0].volumeMounts[0].mountPropagaton"')
    doubled = tmp_path / "doubled.yaml"
    doubled.write_text(bad.read_text().replace("  privileged: true\n", "").replace("mountPropagaton", "mountPropagation")
                       .replace("metadata: {name: typo}", "metadata: {name: typo}\nmetadata: {name: typo}"))
    assert 'strict decoding error: duplicate field "metadata"' in labkit("mounts", "apply", "-f", str(doubled), check=1).stderr
    assert "typo" not in Node(env).pod_names()
    # the check says why the exercise's Pod is missing, in the same words
    pods = env.dir / "pods"
    (pods / "reader.yaml").write_text((pods / "reader.yaml").read_text().replace("mountPropagation: None",
                                                                                  "mountPropagaton: HostToContainer"))
    labkit("mounts", "delete", "reader", check=0)
    labkit("mounts", "apply", "-f", str(pods / "reader.yaml"), check=1)
    result = statuses(lab, "node-mounts-reach-reader")["node-mounts-reach-reader"]
    assert result.status == "fail" and 'unknown field "spec.containers[0].volumeMounts[0].mountPropagaton"' in result.message


# -- no tool and no text answers a graded question -------------------------------------------------------


def test_answer_examples_are_never_answers(running_lab):
    lab, env = running_lab
    from labkit.exercises import CheckContext
    checks = lab._load("checks.py")
    matrix = lab.exercise("predict-e2e-matrix")
    truth = checks.e2e_truth(CheckContext(env, matrix))
    examples = re.findall(r"`(\w+): \[([^\]]*)\]`", matrix.answer)
    assert examples
    for party, listed in examples:
        assert sorted(m.strip() for m in listed.split(",") if m.strip()) != truth[party], (party, listed)
    runner.solve(lab, "peer-groups")
    read = yaml.safe_load(answer_path(LAB, "peer-groups").read_text())
    examples = re.findall(r"`(\w+): ([^`]+)`", lab.exercise("peer-groups").answer)
    assert examples
    for party, value in examples:
        assert value != read.get(party) and not all(checks._is_field(item) for item in value.split()), (party, value)
    # a wrong reading: the feedback says what the answer gives, where, and not the node's values
    from labkit.grading import feedback_lines
    wrong = {**read, "slave": read["node"]}
    answer_path(LAB, "peer-groups").write_text(yaml.safe_dump(wrong))
    result = statuses(lab, "peer-groups")["peer-groups"]
    assert result.status == "fail" and result.observed == wrong and result.observed_in == "your answer"
    lines = feedback_lines(result.to_dict())
    assert f"observed in your answer: node: {read['node']}, master: {read['master']}" in "\n".join(lines), lines
    assert not any("your answer: your answer" in line for line in lines), lines


def test_wrong_cells_are_neither_counted_nor_named_while_the_prediction_can_earn_points(running_lab):
    lab, env = running_lab
    path = answer_path(LAB, "predict-e2e-matrix")
    path.parent.mkdir(parents=True, exist_ok=True)
    right = {"host": ["master", "host"], "master": ["master", "host"], "slave": ["master", "slave", "host"],
             "private": ["private"], "default": ["default"]}
    messages = []
    for extra in ("slave", "private", "default"):
        path.write_text(yaml.safe_dump({**right, "host": right["host"] + [extra]}))
        messages.append(statuses(lab, "predict-e2e-matrix")["predict-e2e-matrix"].message)
    assert all("prediction is not right" in m for m in messages)
    assert not any(" / " in m or "1 of" in m for m in messages)
    # no advice to look at the live lab: what it shows would be kept as the prediction
    assert not any("observe" in m or "live lab" in m for m in messages)
    assert all("who sends mount events to whom" in m and "is the one graded" in m for m in messages)
    counts = [int(re.search(r"\((\d+) different wrong answers? checked", m).group(1)) for m in messages]
    assert counts == [counts[0], counts[0] + 1, counts[0] + 2]      # each different answer is counted
    # an answer that cannot be judged (a party or a mount misspelt) is not a wrong answer tried
    for unreadable in ({**right, "defualt": right.pop("default")}, {**right, "host": ["/mnt/test/host"]}):
        path.write_text(yaml.safe_dump(unreadable))
        result = statuses(lab, "predict-e2e-matrix")["predict-e2e-matrix"]
        # a misspelt party is a key the exercise does not read (lab.yaml answer_keys); an unknown
        # mount is named by the check
        assert result.status == "fail" and ("unknown" in result.message or "does not read" in result.message), \
            result.message
        right.setdefault("default", ["default"])
    path.write_text(yaml.safe_dump(right))
    result = statuses(lab, "predict-e2e-matrix")["predict-e2e-matrix"]
    assert result.status == "pass" and f"after {counts[2]} different wrong answers" in result.message, result.message


def test_the_prediction_graded_is_the_one_written_before_play_showed_the_outcome(running_lab):
    lab, env = running_lab
    path = answer_path(LAB, "predict-e2e-matrix")
    path.parent.mkdir(parents=True, exist_ok=True)
    scenario_file = str(lab.directory / "scenarios" / "e2e.yaml")
    labkit("mounts", "play", "-f", scenario_file, check=1)           # no prediction yet: nothing shown
    path.write_text(yaml.safe_dump({p: [p] for p in ("host", "master", "slave", "private", "default")}))
    labkit("mounts", "play", "-f", scenario_file, check=0)
    runner.solve(lab, "predict-e2e-matrix")                           # the right matrix, written afterwards
    result = statuses(lab, "predict-e2e-matrix")["predict-e2e-matrix"]
    assert result.status == "fail" and "graded: the prediction you had written when labkit first showed" in result.message
    assert f"labkit mounts play -f {scenario_file}" in result.message and "observe" not in result.message
    assert str(env.state.dir) not in result.message
    runner.reset(lab, exercise_id="predict-e2e-matrix")
    assert statuses(lab, "predict-e2e-matrix")["predict-e2e-matrix"].status == "fail"


def test_copies_of_the_e2e_pods_elsewhere_show_nothing_of_the_prediction_before_it_is_written(tmp_path, running_lab):
    """Judged by the propagation modes of the parties on a host path, not by its path or the Pods'
    names: copies of the e2e Pods on another hostPath, under other names and in another namespace,
    run the same experiment, so matrix, graph and exec withhold it as they withhold the e2e Pods'."""
    lab, env = running_lab
    text = (env.dir / "pods" / "e2e.yaml").read_text().replace("/var/lib/kubelet/e2e", "/var/lib/kubelet/copies")
    for old, new in (("master", "cm"), ("slave", "cs"), ("private", "cp"), ("default", "cd")):
        text = text.replace(f"{{name: {old}}}", f"{{name: {new}, namespace: elsewhere}}")
    copies = tmp_path / "copies.yaml"
    copies.write_text(text)
    assert [p.name for p in load_pods(copies)] == ["cm", "cs", "cp", "cd"]
    labkit("mounts", "exec", "node", "--", "mkdir", "-p", "/var/lib/kubelet/copies", check=0)
    labkit("mounts", "apply", "-f", str(copies), check=0)
    labkit("mounts", "exec", "cm", "--", "sh", "-c", "mkdir -p /mnt/test/cm && mount -t tmpfs cm /mnt/test/cm", check=0)
    # the copy's mount is there (the node sees it), and no tool shows who sees it
    node = Node(env)
    assert mountinfo.visible_at(node.mounts(), "/var/lib/kubelet/copies/cm").source == "cm"
    withheld = labkit("mounts", "matrix", "-o", "json", check=0)
    table = json.loads(withheld.stdout)
    assert table["/var/lib/kubelet/copies"]["columns"] == [] and table["/var/lib/kubelet/copies"]["withheld"] == 1
    assert not any("cm" in row["sees"] for row in table["/var/lib/kubelet/copies"]["rows"].values())
    assert "copies/cm" not in table["/var/lib/kubelet"]["columns"]
    assert {table["/var/lib/kubelet/copies"]["rows"][p]["tags"] for p in ("node", "cm", "cs")} == {"(withheld)"}
    # the copies of the None and unset Pods (and the reader, None too) show what peer-groups asks of private and default
    assert {table["/var/lib/kubelet/copies"]["rows"][p]["tags"] for p in ("cp", "cd")} == {"(withheld)"}
    assert table["/var/lib/kubelet/shared"]["rows"]["reader"]["tags"] == "(withheld)"
    assert "mountPropagation None or unset" in withheld.stderr
    assert "/var/lib/kubelet/copies" in withheld.stderr and "predict-e2e-matrix" in withheld.stderr
    assert "1 mount(s) below it withheld" in labkit("mounts", "matrix", check=0).stdout
    graph = labkit("mounts", "graph", check=0).stdout
    assert "/mnt/test/cm" not in graph and "/var/lib/kubelet/copies/cm" not in graph and "cs:/mnt/test" not in graph
    assert "cp:/mnt/test" not in graph and "cd:/mnt/test" not in graph and "reader:" not in graph
    refused = labkit("mounts", "exec", "cs", "--", "cat", "/proc/self/mountinfo", check=2)
    assert refused.stdout == "" and "predict-e2e-matrix" in refused.stderr and "/var/lib/kubelet/copies" in refused.stderr
    assert labkit("shell", LAB, "node", "--", "true", check=2).stdout == ""
    # the refusal's way out works: the reset of the prediction exercise unmounts the copy's mount (and says so first)
    assert f"labkit reset {LAB} predict-e2e-matrix` unmounts" in refused.stderr
    asked = labkit("reset", LAB, "predict-e2e-matrix")
    assert "/var/lib/kubelet/copies/cm" in asked.stdout + asked.stderr and "cm:/" not in asked.stdout + asked.stderr
    labkit("reset", LAB, "predict-e2e-matrix", "--yes", check=0)
    assert labkit("mounts", "exec", "cs", "--", "true", check=0).stdout == ""
    assert mountinfo.visible_at(Node(env).mounts(), "/var/lib/kubelet/copies/cm") is None
    assert not answer_path(LAB, "predict-e2e-matrix").exists()
    labkit("mounts", "exec", "cm", "--", "sh", "-c", "mount -t tmpfs cm /mnt/test/cm", check=0)
    table = json.loads(labkit("mounts", "matrix", "-o", "json", check=0).stdout)
    # the lab's own leaked mount is no experiment: shown as before
    assert "plugins/publisher/staging" in table["/var/lib/kubelet"]["columns"]
    # once the prediction is written, everything is shown (and the prediction is kept)
    answer = answer_path(LAB, "predict-e2e-matrix")
    answer.parent.mkdir(parents=True, exist_ok=True)
    answer.write_text(yaml.safe_dump({p: [] for p in ("host", "master", "slave", "private", "default")}))
    table = json.loads(labkit("mounts", "matrix", "-o", "json", check=0).stdout)["/var/lib/kubelet/copies"]
    assert {party for party, row in table["rows"].items() if "cm" in row["sees"]} == {"node", "cm", "cs"}
    assert "master:" in labkit("mounts", "exec", "cs", "--", "cat", "/proc/self/mountinfo", check=0).stdout


def test_a_reset_names_the_experiments_mounts_by_their_place_not_by_who_holds_them(running_lab):
    """Before the prediction is kept, what a reset would revert names a mount made by hand where
    parties of the e2e experiment's modes view it by its place in the node's terms only: master's
    mount (which reaches the node, slave and watcher) and slave's (which stays in slave) read the
    same, in every reset that unmounts them, so the listing cannot stand in for the experiment."""
    lab, env = running_lab
    answer_path(LAB, "predict-e2e-matrix").unlink(missing_ok=True)
    node = Node(env)
    for party in ("master", "slave"):
        node.mount_tmpfs(node.party(party).pid, f"/mnt/test/{party}-made", f"{party}-made")
    node.mount_tmpfs(node.require_pid(), "/var/lib/kubelet/node-made", "node-made")
    holders = re.compile(r"\b(?:node|master|slave|private|default|watcher):/")
    for exercise in ("predict-e2e-matrix", "peer-groups", None):
        risk = runner.work_at_risk(lab, exercise)
        assert not holders.search(" ".join(risk)), (exercise, risk)
        assert "/var/lib/kubelet/e2e/master-made" in " ".join(risk), (exercise, risk)
        # a line naming master's mount (the node holds it) and not slave's would tell them apart
        assert all(("master-made" in line) == ("slave-made" in line) for line in risk), (exercise, risk)
    assert "/var/lib/kubelet/node-made" in " ".join(runner.work_at_risk(lab, "predict-e2e-matrix"))
    runner.reset(lab, exercise_id="predict-e2e-matrix")
    assert runner.work_at_risk(lab, "predict-e2e-matrix") == []
    # once the prediction is kept, the reset says where each mount is, party by party
    path = answer_path(LAB, "predict-e2e-matrix")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{party}: []\n" for party in ("host", "master", "slave", "private", "default")))
    labkit("mounts", "matrix", check=0)
    node.mount_tmpfs(node.party("master").pid, "/mnt/test/later", "later")
    assert "master:/mnt/test/later" in " ".join(runner.work_at_risk(lab, "predict-e2e-matrix"))


def test_the_experiment_done_in_one_command_before_any_prediction_earns_no_points(running_lab):
    """The gate of mounts exec looks when a command starts: one command on the node that mounts in
    every e2e container (nsenter), on the node, and then reads every party's mountinfo runs the whole
    experiment. labkit looks again when it ends, keeps when it ran, and a prediction written after
    it fails, after a reset too; --forget-prediction starts over, and a prediction written before
    such a command is kept by it and graded."""
    from labkit import predictions

    lab, env = running_lab
    node = Node(env)
    path = answer_path(LAB, "predict-e2e-matrix")
    path.unlink(missing_ok=True)
    right = {"host": ["host", "master"], "master": ["host", "master"], "slave": ["host", "master", "slave"],
             "private": ["private"], "default": ["default"]}

    def whole_experiment() -> str:
        pids = {party: node.party(party).pid for party in ("master", "slave", "private", "default")}
        script = "".join(f"nsenter -t {pid} -m sh -c 'mkdir -p /mnt/test/{p} && mount -t tmpfs {p} /mnt/test/{p}'; "
                         for p, pid in pids.items())
        script += "mkdir -p /var/lib/kubelet/e2e/host && mount -t tmpfs host /var/lib/kubelet/e2e/host; "
        script += "".join(f"cat /proc/{pid}/mountinfo; " for pid in pids.values())
        return labkit("mounts", "exec", "node", "--", "sh", "-c", script, check=0).stderr

    said = whole_experiment()
    assert "before a prediction of predict-e2e-matrix was written" in said
    assert predictions.kept_trial(LAB, "predict-e2e-matrix") is not None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(right))
    result = statuses(lab, "predict-e2e-matrix")["predict-e2e-matrix"]
    assert result.status == "fail" and "ran the e2e experiment by hand" in result.message, result.message
    runner.reset(lab, exercise_id="predict-e2e-matrix")
    path.write_text(yaml.safe_dump(right))
    assert statuses(lab, "predict-e2e-matrix")["predict-e2e-matrix"].status == "fail"
    # starting over: the prediction written first is kept by the command that shows the outcome
    labkit("reset", LAB, "predict-e2e-matrix", "--forget-prediction", "--yes", check=0)
    assert predictions.kept_trial(LAB, "predict-e2e-matrix") is None
    path.write_text(yaml.safe_dump(right))
    assert "your prediction is kept" in whole_experiment()
    assert predictions.kept_trial(LAB, "predict-e2e-matrix") is None
    path.write_text(yaml.safe_dump({party: [] for party in right}))         # changed after it: not graded
    result = statuses(lab, "predict-e2e-matrix")["predict-e2e-matrix"]
    assert result.status == "pass", result.message
