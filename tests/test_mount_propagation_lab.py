"""The mount-propagation lab end to end: every check fails on a fresh lab and passes after its
reference solution, wrong fixes fail, and the `labkit mounts` tools work on the live node."""

import json
import re

import pytest
import yaml

from labkit import runner
from labkit.exercises import answer_path, wait_for
from labkit.labs import get_lab
from labkit.mounts import kernel, mountinfo, observe
from labkit.mounts.node import Node
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
    report = json.loads(labkit("check", LAB, "--format", "json", check=0).stdout)
    assert report["passed"] == report["total"] == len(lab.exercises)


def test_wrong_fixes_fail_with_a_reason(running_lab):
    lab, env = running_lab
    node = Node(env)
    # (a) a plausible but wrong matrix: HostToContainer sending its own mount to the host
    path = answer_path(LAB, "predict-e2e-matrix")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"host": ["master", "slave", "host"], "master": ["master", "host"],
                                    "slave": ["master", "slave", "host"], "private": ["private"], "default": ["default"]}))
    result = statuses(lab, "predict-e2e-matrix")["predict-e2e-matrix"]
    assert result.status == "fail" and "host" in result.message
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
    # (e) throwing away /var/lib/kubelet's own mount removes the leak, and too much
    node.umount(node.require_pid(), "/var/lib/kubelet", lazy=True)
    result = statuses(lab, "leaked-mount")["leaked-mount"]
    assert result.status == "fail" and "/var/lib/kubelet's own shared mount" in result.message
    # (f) peer groups written as the wrong relation
    path = answer_path(LAB, "peer-groups")
    truth = mountinfo.visible_at(mountinfo.read(node.party("master").pid), "/mnt/test").tags
    path.write_text(yaml.safe_dump({"node": truth, "master": truth, "slave": truth, "private": "private", "default": "private"}))
    result = statuses(lab, "peer-groups")["peer-groups"]
    assert result.status == "fail" and "slave" in result.message


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
              for r in json.loads(labkit("mounts", "get", "--json", check=0).stdout)}
    assert states == {"master/cntr": "running", "slave/cntr": "running", "private/cntr": "running",
                      "default/cntr": "running", "reader/reader": "running", "watcher/watcher": "running",
                      "logger/logger": "waiting", "publisher/publisher": "terminated"}
    # a command inside a container runs in its root, with its mounts
    out = labkit("mounts", "exec", "master", "--", "sh", "-c",
                 "mkdir -p /mnt/test/mine && mount -t tmpfs mine /mnt/test/mine && cat /proc/self/mountinfo", check=0)
    inside = {m.mountpoint: m for m in mountinfo.parse(out.stdout)}
    assert inside["/mnt/test/mine"].source == "mine" and "/var/lib/kubelet" not in inside
    on_node = labkit("mounts", "exec", "node", "--", "findmnt", "-n", "-o", "SOURCE", "/var/lib/kubelet/e2e/mine", check=0)
    assert on_node.stdout.strip() == "mine"
    table = json.loads(labkit("mounts", "matrix", "--json", check=0).stdout)["/var/lib/kubelet/e2e"]
    sees = {party: "mine" in row["sees"] for party, row in table["rows"].items()}
    assert sees == {"node": True, "master": True, "slave": True, "private": False, "default": False}
    assert table["rows"]["slave"]["tags"] == "master:" + table["rows"]["node"]["tags"].split(":")[1]
    text = labkit("mounts", "matrix", check=0).stdout
    assert "hostPath /var/lib/kubelet/e2e" in text and "mine" in text
    graph = labkit("mounts", "graph", check=0).stdout
    group = table["rows"]["node"]["tags"].split(":")[1]
    assert f"shared:{group}  members: node:/var/lib/kubelet, master:/mnt/test" in graph
    assert f"master:{group}  slaves:  slave:/mnt/test, watcher:/var/lib/kubelet" in graph
    svg = tmp_path / "g.svg"
    labkit("mounts", "graph", "--format", "svg", "-o", str(svg), check=0)
    assert svg.read_text().lstrip().startswith("<?xml") and f"peer group {group}" in svg.read_text()
    g = observe.graph(Node(env))
    assert observe.render_graph_image(g, "png").startswith(b"\x89PNG")
    assert f"g{group} -> " in observe.render_graph_dot(g)
    # a running Pod's volume mounts are immutable; delete and apply again works
    reader = yaml.safe_load((pods / "reader.yaml").read_text())
    reader["spec"]["containers"][0]["volumeMounts"][0]["mountPropagation"] = "HostToContainer"
    (pods / "reader.yaml").write_text(yaml.safe_dump(reader))
    changed = labkit("mounts", "apply", "-f", str(pods / "reader.yaml"), check=1)
    assert 'Pod "reader" is invalid: spec: Forbidden: pod updates may not change fields' in changed.stderr
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
