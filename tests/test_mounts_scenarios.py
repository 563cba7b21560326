"""Scenarios played on fresh nodes come out as the kernel makes them.

Expectations are worked out by hand from the kernel's shared-subtree rules (mount_namespaces(7),
Documentation/filesystems/sharedsubtree.rst), written next to each case, and two scenarios are
also run as plain util-linux shell (unshare, nsenter, mount; no labkit code) and compared.
Visibility is observed twice: labkit's answer from mountinfo, and the e2e test's own way
(`cat <volume>/<name>/file` inside each party, through /proc/<pid>/root).
"""

import json
import re
import subprocess
import textwrap

import pytest
import yaml

from labkit.errors import ConfigError
from labkit.mounts import scenario
from support import REPO, labkit

SCENARIOS = REPO / "labs" / "mount-propagation" / "scenarios"
E2E = {"host": ["master", "host"], "master": ["master", "host"], "slave": ["master", "slave", "host"],
       "private": ["private"], "default": ["default"]}


def play_and_read_files(path, steps=None):
    """Play a scenario; before the node goes, also read every <volume>/<name>/file the e2e way."""
    loaded = scenario.load(path)
    if steps is not None:
        loaded.steps = loaded.steps[:steps]
    with scenario.throwaway_env() as env:
        player = scenario.Player(loaded, env)
        result = player.play()
        names = [arg["name"] for kind, arg in loaded.steps if kind == "mount"]
        by_file = {}
        for party in result["visible"]:
            pid, volume, _caps = player._volume_of(party)
            seen = []
            for name in dict.fromkeys(names):
                try:
                    if open(f"/proc/{pid}/root{volume}/{name}/file").read().strip() == name:
                        seen.append(name)
                except OSError:
                    pass
            by_file[party] = seen
        return result, by_file


def peers(tags, a, b):
    return tags[a].startswith("shared:") and tags[a].split()[0] == tags[b].split()[0]


def slave_of(tags, slave, master):
    group = tags[master].split()[0].split(":")[1]
    return f"master:{group}" in tags[slave].split()


def test_e2e_scenario_reproduces_the_kubernetes_e2e_matrix():
    result, by_file = play_and_read_files(SCENARIOS / "e2e.yaml")
    assert result["errors"] == []
    assert result["visible"] == E2E
    assert by_file == E2E                      # the e2e test's own observation: cat <dir>/file
    tags = result["tags"]
    assert peers(tags, "host", "master") and slave_of(tags, "slave", "host")
    assert tags["private"] == tags["default"] == ""


def test_late_containers_copy_existing_mounts_and_only_host_to_container_follows():
    # rbind copies the submounts present when the container starts (master's and host's tmpfs),
    # whatever the mode. Then the host unmounts 'host' and mounts 'after': the unmount and the new
    # mount reach the peer (master) and the slave copy (late-slave), never the private copy.
    result, by_file = play_and_read_files(SCENARIOS / "late-containers.yaml")
    expected = {"host": ["master", "after"], "master": ["master", "after"],
                "late-private": ["master", "host"], "late-slave": ["master", "after"]}
    assert result["errors"] == []
    assert result["visible"] == expected and by_file == expected


def test_unmounts_propagate_to_peers_and_slaves():
    # umount of the host's own tmpfs and of its copy of master's: both parents are members of the
    # host path's peer group, so the same unmounts happen in master (peer) and slave (slave).
    result, by_file = play_and_read_files(SCENARIOS / "unmounting.yaml")
    expected = {"host": [], "master": [], "slave": ["slave"], "private": ["private"]}
    assert result["errors"] == [] and result["visible"] == expected and by_file == expected


def test_an_exited_bidirectional_container_leaves_its_mount_on_the_node():
    # Namespace teardown sends no unmount events: master's tmpfs stays on the host (and in the
    # slave); the stopped container is gone from the result and cannot mount again.
    result, by_file = play_and_read_files(SCENARIOS / "exiting-container.yaml")
    expected = {"host": ["master", "host"], "slave": ["master", "host"]}
    assert result["visible"] == expected and by_file == expected
    assert result["errors"] == [{"step": 5, "container": "master", "message": "container master is not running (Killed)"}]


def test_private_host_path_refusals_name_each_container_with_the_runtimes_and_api_servers_wording():
    result, by_file = play_and_read_files(SCENARIOS / "private-host-path.yaml")
    expected = {"host": ["host"], "private": ["private"]}
    assert result["visible"] == expected and by_file == expected
    assert result["tags"] == {"host": "", "private": ""}
    errors = {e["container"]: e for e in result["errors"]}
    assert set(errors) == {"master", "slave", "unprivileged"} and {e["step"] for e in result["errors"]} == {1}
    path = '"/var/lib/kubelet/mount-propagation"'
    spec = re.compile(r'CreateContainerError: failed to generate container "[0-9a-f]{64}" spec: failed to generate spec: ')
    assert spec.match(errors["master"]["message"]) and spec.match(errors["slave"]["message"])
    assert errors["master"]["message"].endswith(f"path {path} is mounted on {path} but it is not a shared mount")
    assert errors["slave"]["message"].endswith(f"path {path} is mounted on {path} but it is not a shared or slave mount")
    assert errors["unprivileged"]["message"] == (
        'Pod "unprivileged" is invalid: spec.containers[0].volumeMounts.mountPropagation: Forbidden: '
        "Bidirectional mount propagation is available only to privileged containers")
    table = labkit("mounts", "play", "-f", str(SCENARIOS / "private-host-path.yaml"), check=0).stdout
    assert {line.split(": ")[0] for line in table.splitlines() if line.startswith("step ")} == {"step 1"}
    assert sorted(line.split(": ")[1] for line in table.splitlines() if line.startswith("step ")) == \
        ["master", "slave", "unprivileged"]


def test_a_container_that_is_not_privileged_cannot_mount():
    # containerd's default capability set has no CAP_SYS_ADMIN: mount(2) fails with EPERM inside,
    # the node's own mount still arrives
    result, by_file = play_and_read_files(SCENARIOS / "unprivileged-mount.yaml")
    expected = {"host": ["host"], "privileged": ["privileged", "host"], "unprivileged": ["host"]}
    assert result["visible"] == expected and by_file == expected
    assert result["errors"] == [{"step": 3, "container": "unprivileged",
                                 "message": "mount /mnt/test/unprivileged: Operation not permitted"}]


def test_slave_host_path_follows_upstream_and_the_nodes_own_mounts_go_nowhere():
    # The node's host path is a slave of the upstream group: upstream mounts reach it and the
    # HostToContainer copy (a slave of the same group); mounts the node makes under a slave
    # propagate nowhere; None receives nothing. Bidirectional needs shared: refused.
    result, by_file = play_and_read_files(SCENARIOS / "slave-host-path.yaml")
    expected = {"host": ["upstream", "host"], "slave": ["upstream", "slave"], "private": ["private"]}
    assert result["visible"] == expected and by_file == expected
    tags = result["tags"]
    assert tags["host"].startswith("master:") and tags["slave"] == tags["host"] and tags["private"] == ""
    assert [e["step"] for e in result["errors"]] == [1]
    assert "is mounted on" in result["errors"][0]["message"] and "not a shared mount" in result["errors"][0]["message"]


def test_a_busy_slave_copy_blocks_a_plain_unmount_and_a_lazy_one_removes_it_everywhere():
    before_lazy, files = play_and_read_files(SCENARIOS / "busy-mount.yaml", steps=4)
    assert before_lazy["visible"] == {"host": ["host"], "master": ["host"], "slave": ["host"]} == files
    assert before_lazy["errors"] == [{"step": 4, "message": "umount /var/lib/kubelet/mount-propagation/host: Device or resource busy"}]
    after_lazy, files = play_and_read_files(SCENARIOS / "busy-mount.yaml")
    assert after_lazy["visible"] == {"host": [], "master": [], "slave": []} == files
    assert [e["step"] for e in after_lazy["errors"]] == [4]


# -- the same experiments in plain util-linux ---------------------------------------------------

SHELL = r"""
set -eu
ROOT=$(mktemp -d /tmp/labkit-mp-ref.XXXXXX); VOL=$ROOT/host/vol; mkdir -p $VOL
trap 'kill -9 $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf $ROOT' EXIT
ready() { while [ ! -e $ROOT/ready.$1 ]; do sleep 0.01; done; }
# the host: a sandbox namespace (unshare's default makes it rprivate), the host path shared
unshare -m sh -c "mount --bind $VOL $VOL && mount --make-shared $VOL && touch $ROOT/ready.host && exec sleep 60" &
HOST=$!; ready host
declare -A PID
start() { # name rootprop volprop: root propagation first (runc), then rbind + propagation (CRI)
  d=$ROOT/ctr/$1; mkdir -p $d
  nsenter -t $HOST -m unshare -m --propagation unchanged sh -c \
    "mount --make-r$2 / && mount --rbind $VOL $d && mount --make-r$3 $d && touch $ROOT/ready.$1 && exec sleep 60" &
  PID[$1]=$!; ready $1; }
vol() { if [ $1 = host ]; then echo $VOL; else echo $ROOT/ctr/$1; fi; }
pid() { if [ $1 = host ]; then echo $HOST; else echo ${PID[$1]}; fi; }
mnt() { d=$(vol $1)/$2; nsenter -t $(pid $1) -m sh -c "mkdir -p $d && mount -t tmpfs ref-$2 $d && echo $2 > $d/file"; }
umnt() { nsenter -t $(pid $1) -m umount $(vol $1)/$2; }
report() { for o in "$@"; do printf '%s:' $o; for m in $NAMES; do
  [ "$(nsenter -t $(pid $o) -m cat $(vol $o)/$m/file 2>/dev/null)" = $m ] && printf ' %s' $m; done; echo; done; }
"""

E2E_SHELL = """
NAMES="master slave private default host"
start master shared shared; start slave slave slave; start private slave private; start default slave private
for n in master slave private default; do mnt $n $n; done; mnt host host
report host master slave private default
"""

LATE_SHELL = """
NAMES="master host after"
start master shared shared; mnt master master; mnt host host
start late-private slave private; start late-slave slave slave
umnt host host; mnt host after
report host master late-private late-slave
"""


def run_shell(body):
    out = subprocess.run(["bash", "-c", SHELL + body], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    seen = {}
    for line in out.stdout.splitlines():
        party, _, names = line.partition(":")
        seen[party] = names.split()
    return seen


@pytest.mark.parametrize("name, body", [("e2e", E2E_SHELL), ("late-containers", LATE_SHELL)])
def test_plain_util_linux_reproduction_agrees(name, body):
    assert scenario.play(scenario.load(SCENARIOS / f"{name}.yaml"))["visible"] == run_shell(body)


# -- the scenario format ------------------------------------------------------------------------


def test_cli_play_prints_json_and_a_table(tmp_path):
    # the e2e experiment is what exercise predict-e2e-matrix asks to predict: shown once a prediction is written
    answer = tmp_path / "answers" / "mount-propagation" / "predict-e2e-matrix.yaml"
    answer.parent.mkdir(parents=True)
    answer.write_text(yaml.safe_dump({p: [] for p in E2E}))
    out = labkit("mounts", "play", "-f", str(SCENARIOS / "e2e.yaml"), "-o", "json", check=0)
    data = json.loads(out.stdout)
    assert set(data) == {"visible", "tags", "errors"} and data["visible"] == E2E
    table = labkit("mounts", "play", "-f", str(SCENARIOS / "exiting-container.yaml"), check=0).stdout
    assert "step 5: master: container master is not running (Killed)" in table
    assert table.splitlines()[0].split() == ["party", "volume", "mount", "master", "host", "again"]


@pytest.mark.parametrize("text, field, problem", [
    ("kind: Pod\n", "apiVersion", "expected labkit/v1alpha1"),
    ("apiVersion: labkit/v1alpha1\nkind: MountScenario\nhostPath: {propagation: rshared}\ncontainers: [{name: a}]\n",
     "hostPath.propagation", "expected one of shared, slave, private"),
    ("apiVersion: labkit/v1alpha1\nkind: MountScenario\ncontainers: [{name: a, mountPropagation: 3}]\n",
     "containers[0].mountPropagation", "None, HostToContainer or Bidirectional"),
    ("apiVersion: labkit/v1alpha1\nkind: MountScenario\ncontainers: [{name: a, colour: red}]\n",
     "containers[0].colour", "unknown field"),
    ("apiVersion: labkit/v1alpha1\nkind: MountScenario\ncontainers: [{name: a}]\nsteps: [{start: b}]\n",
     "steps[0].start", "unknown container 'b'"),
    ("apiVersion: labkit/v1alpha1\nkind: MountScenario\ncontainers: [{name: a}]\nsteps: [{mount: {by: upstream, name: x}}]\n",
     "steps[0].mount.by", "expected one of host, a"),
    ("apiVersion: labkit/v1alpha1\nkind: MountScenario\ncontainers: [{name: a}]\nsteps: [{mount: {by: a, name: x/y}}]\n",
     "steps[0].mount.name", "no '/'"),
    ("apiVersion: labkit/v1alpha1\nkind: MountScenario\ncontainers: [{name: a}]\nsteps: [{jump: a}]\n",
     "steps[0]", "one of start, mount, umount, busy, stop"),
])
def test_malformed_scenarios_name_file_field_and_expectation(tmp_path, text, field, problem):
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        scenario.load(path)
    assert (info.value.path, info.value.field) == (str(path), field) and problem in info.value.problem
    out = labkit("mounts", "play", "-f", str(path), check=2)
    assert out.stderr.startswith(f"labkit: {path}: {field}: ") and "Traceback" not in out.stderr


def test_scenarios_take_pods_too(tmp_path):
    path = tmp_path / "pods.yaml"
    path.write_text(textwrap.dedent("""\
        apiVersion: labkit/v1alpha1
        kind: MountScenario
        hostPath: {propagation: shared, path: /var/lib/kubelet/data}
        pods:
          - metadata: {name: two}
            spec:
              volumes: [{name: v, hostPath: {path: /var/lib/kubelet/data}}]
              containers:
                - {name: a, volumeMounts: [{name: v, mountPath: /in, mountPropagation: HostToContainer}]}
                - {name: b, securityContext: {privileged: true},
                   volumeMounts: [{name: v, mountPath: /out, mountPropagation: Bidirectional}]}
        steps:
          - start: [two/a]
          - mount: {by: two/b, name: from-b}
          - mount: {by: host, name: from-host}
        """))
    result = scenario.play(scenario.load(path))
    both = ["from-b", "from-host"]
    assert result["visible"] == {"host": both, "two/a": both, "two/b": both}
    assert result["errors"] == []


def test_a_finished_play_leaves_nothing_in_the_state_dir(tmp_path):
    scenario.play(scenario.load(SCENARIOS / "e2e.yaml"))
    assert list((tmp_path / "state").iterdir()) == []


def test_play_withholds_the_predicted_experiment_until_a_prediction_is_written(tmp_path):
    """`labkit mounts play` of the e2e scenario (or of a copy with other names and another host
    path) shows nothing before a prediction is in the exercise's answer file; once it shows the
    outcome, the prediction as it was then is kept and graded."""
    answer = tmp_path / "answers" / "mount-propagation" / "predict-e2e-matrix.yaml"
    copy = tmp_path / "renamed.yaml"
    names = {"master": "a", "slave": "b", "private": "c", "default": "d", "host": "h"}
    text = (SCENARIOS / "e2e.yaml").read_text()
    for old, new in names.items():
        text = re.sub(rf"\b{old}\b(?!:)", new, text)
    copy.write_text(text.replace("hostPath: {propagation: shared}",
                                 "hostPath: {propagation: shared, path: /var/lib/kubelet/other}").replace("by: h,", "by: host,"))
    assert scenario.load(copy).party_names == ["a", "b", "c", "d"]
    reversed_steps = tmp_path / "reversed.yaml"          # the same mounts, the host's first
    lines = (SCENARIOS / "e2e.yaml").read_text().splitlines()
    mounts = [line for line in lines if line.lstrip().startswith("- mount:")]
    reversed_steps.write_text("\n".join([line for line in lines if line not in mounts] + mounts[::-1]) + "\n")
    without_default = tmp_path / "three.yaml"             # unset is None: three containers tell it all
    shipped = (SCENARIOS / "e2e.yaml").read_text().replace(", default]", "]").splitlines()
    without_default.write_text("\n".join(line for line in shipped if "default" not in line) + "\n")
    assert scenario.load(reversed_steps).steps[1][1]["by"] == "host" and len(scenario.load(reversed_steps).steps) == 6
    assert scenario.load(without_default).party_names == ["master", "slave", "private"]
    for path in (SCENARIOS / "e2e.yaml", copy, reversed_steps, without_default, SCENARIOS / "late-containers.yaml"):
        for extra in ((), ("-o", "json")):
            out = labkit("mounts", "play", "-f", str(path), *extra, check=1)
            assert out.stdout == "" and "predict-e2e-matrix" in out.stderr and str(answer) in out.stderr
    # an experiment that shows none of the predicted pairs (another host path propagation) is shown as it is
    assert "master" in labkit("mounts", "play", "-f", str(SCENARIOS / "slave-host-path.yaml"), check=0).stdout
    answer.parent.mkdir(parents=True)
    answer.write_text("host: [host]\n")          # a prediction of one party does not count
    assert labkit("mounts", "play", "-f", str(SCENARIOS / "e2e.yaml"), check=1).stdout == ""
    guess = {"host": ["host"], "master": ["master"], "slave": ["slave"], "private": ["private"], "default": ["default"]}
    answer.write_text(yaml.safe_dump(guess))
    shown = labkit("mounts", "play", "-f", str(SCENARIOS / "e2e.yaml"), "-o", "json", check=0)
    assert json.loads(shown.stdout)["visible"] == E2E and "kept" in shown.stderr
    assert str(tmp_path / "state") not in shown.stderr                # where it is kept is not advertised
    kept = tmp_path / "state" / "mount-propagation" / "predictions" / "predict-e2e-matrix.yaml"   # labkit.predictions
    assert yaml.safe_load(kept.read_text()) == guess
    answer.write_text(yaml.safe_dump(E2E))          # corrected after seeing the outcome
    labkit("mounts", "play", "-f", str(SCENARIOS / "e2e.yaml"), check=0)
    assert yaml.safe_load(kept.read_text()) == guess


def test_play_withholds_the_fields_of_none_volume_mounts_until_peer_groups_passes():
    """A None or unset volume mount is private whatever the host path: what peer-groups asks of two
    e2e Pods. play showed it (`private`) before peer-groups passed, as matrix and graph do not."""
    from labkit.state import LabState, write_json_atomic

    out = labkit("mounts", "play", "-f", str(SCENARIOS / "private-host-path.yaml"), "-o", "json", check=0)
    assert json.loads(out.stdout)["tags"] == {"host": "", "private": "(withheld)"}
    assert "withheld until peer-groups passes" in out.stderr
    state = LabState("mount-propagation")
    state.ensure_dir()
    write_json_atomic(state.dir / "credit.json", {**state.credit, "peer-groups": {"at": 0}})
    out = labkit("mounts", "play", "-f", str(SCENARIOS / "private-host-path.yaml"), "-o", "json", check=0)
    assert json.loads(out.stdout)["tags"] == {"host": "", "private": ""}
